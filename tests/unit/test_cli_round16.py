"""Round 16: a group named like another group's hash still gets a file of its own; a closed stderr (``2>&-``) does
not end a run with exit 1 and nothing saved."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from byoc_workbench.cli.stages import group_files

ROOT = Path(__file__).resolve().parents[2]


def test_a_group_named_like_another_groups_hash_gets_a_file_of_its_own():
    """层一 is hashed to main-1b3b1bffd0, the plain name of a group 1b3b1bffd0: one view was drawn over the other."""
    ((hashed, _),) = group_files(["main/层一."], "svg")
    named_so = "main/" + hashed.removeprefix("00-source--main-").removesuffix(".svg") + "."
    names = [name for name, _ in group_files(["main/层一.", named_so], "svg")]
    assert len(set(names)) == 2 and hashed in names


def test_a_closed_stderr_keeps_the_run_and_its_saved_outputs(tmp_path):
    """``run ... 2>&-``: sys.stderr is None, and the next file opened took descriptor 2; it exited 1, saving nothing."""
    x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in "xy")
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "m.onnx")
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "byoc_workbench_cli.py"),
            "run",
            "m.onnx",
            "--backend",
            "tvm",
            "--save-outputs",
            "out.npz",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        preexec_fn=lambda: os.close(2),
        timeout=300,
    )
    assert done.returncode == 0, done.stdout
    with np.load(tmp_path / "out.npz") as saved:
        assert saved.files and all(np.isfinite(saved[k]).all() for k in saved.files)
