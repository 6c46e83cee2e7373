"""Round 16: a group named like another group's hash still gets a file of its own; a closed stderr (``2>&-``) does
not end a run with exit 1 and nothing saved."""

import numpy as np
from shared import relu_onnx, run_cli_closed

from byoc_workbench.cli.stages import group_files


def test_a_group_named_like_another_groups_hash_gets_a_file_of_its_own():
    """层一 is hashed to main-1b3b1bffd0, the plain name of a group 1b3b1bffd0: one view was drawn over the other."""
    ((hashed, _),) = group_files(["main/层一."], "svg")
    named_so = "main/" + hashed.removeprefix("00-source--main-").removesuffix(".svg") + "."
    names = [name for name, _ in group_files(["main/层一.", named_so], "svg")]
    assert len(set(names)) == 2 and hashed in names


def test_a_closed_stderr_keeps_the_run_and_its_saved_outputs(tmp_path):
    """``run ... 2>&-``: sys.stderr is None, and the next file opened took descriptor 2; it exited 1, saving nothing."""
    relu_onnx(tmp_path / "m.onnx")
    done = run_cli_closed(2, ["run", "m.onnx", "--backend", "tvm", "--save-outputs", "out.npz"], tmp_path)
    assert done.returncode == 0, done.stdout
    with np.load(tmp_path / "out.npz") as saved:
        assert saved.files and all(np.isfinite(saved[k]).all() for k in saved.files)
