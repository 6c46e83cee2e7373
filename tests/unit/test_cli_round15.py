"""Round 15: each opened group of ``stages`` gets a file of its own, also for names a file name cannot hold; a closed
stdout does not turn a finished command into exit 1; ``bench`` prints its results before it writes ``--out``."""

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from shared import run_cli_closed

from byoc_workbench import cli
from byoc_workbench.cli.stages import group_files


def _scoped_model(path: Path, groups) -> Path:
    """A chain of conv+relu, each pair under ONNX scope ``/<group>/``: one top-level group each, once imported (a last
    scope, ``end``, is added: the importer's last scope is not drawn as a group)."""
    rs, inits, nodes, cur = np.random.RandomState(0), [], [], "x"
    for i, g in enumerate([*groups, "end"]):
        inits.append(numpy_helper.from_array(rs.randn(3, 3, 3, 3).astype(np.float32), f"w{i}"))
        nodes.append(helper.make_node("Conv", [cur, f"w{i}"], [f"c{i}"], name=f"/{g}/conv/Conv", pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"/{g}/relu/Relu"))
        cur = f"r{i}"
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    y = helper.make_tensor_value_info(cur, TensorProto.FLOAT, [1, 3, 8, 8])
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x], [y], inits), opset_imports=[helper.make_opsetid("", 13)]
    )
    model.ir_version = 8
    onnx.save(model, path)
    return path


def _group_files(out: Path) -> list[Path]:
    return sorted(out.glob("00-source--*.dot"))


def test_groups_whose_names_clean_to_the_same_part_each_get_a_file(tmp_path, capsys):
    """层一 and 层二 lose what tells them apart in a file name (both were ``main``): a hash of each keeps them apart."""
    model = _scoped_model(tmp_path / "g.onnx", ["层一", "层二", "q"])
    out = tmp_path / "out"
    assert cli.main(["stages", str(model), "--format", "dot", "--out", str(out)]) == 0
    assert f"3 opened groups and summary.json to {out}" in capsys.readouterr().out
    written = [p.read_text() for p in _group_files(out)]
    assert len(written) == 3 and (out / "00-source--main-q.dot").is_file()
    for scope in ("层一", "层二", "q"):  # opened (not drawn folded) in exactly one file, its own
        assert sum(f'label="{scope}\n2 ops' not in dot for dot in written) == 1


def test_a_group_name_too_long_for_a_file_name_is_cut_and_hashed(tmp_path, capsys):
    """A 240-letter group is drawn (its name cut, with a hash of the whole), not refused with a Fix about --out."""
    model = _scoped_model(tmp_path / "long.onnx", ["L" * 240, "q"])
    out = tmp_path / "out"
    assert cli.main(["stages", str(model), "--format", "dot", "--out", str(out)]) == 0
    assert "2 opened groups" in capsys.readouterr().out
    names = [p.name for p in _group_files(out)]
    assert len(names) == 2 and "00-source--main-q.dot" in names
    assert all(len(os.fsencode(n)) + len(".XXXXXXXX.part.") <= 255 for n in names)


def test_group_file_names_are_unique_and_the_same_on_every_run():
    """The hash is of the group's whole id (not Python's salted hash()), so a second run names the same files."""
    ids = ["main/层一.", "main/层二.", "main/q.", "main/" + "L" * 240 + "."]
    names = [n for n, _ in group_files(ids, "svg")]
    digest = hashlib.sha256(ids[3].encode()).hexdigest()[:10]
    assert len(set(names)) == 4 and names[2] == "00-source--main-q.svg"
    assert names[3].endswith(f"-{digest}.svg") and names[3].startswith("00-source--main-LLL")
    assert [n for n, _ in group_files(ids, "svg")] == names


def test_a_closed_stdout_keeps_the_commands_exit_status(tmp_path):
    """``cmd >&-``: Python's sys.stdout is None; the command's work is done, and it exits 0 without a traceback."""
    out = tmp_path / "st"
    done = run_cli_closed(1, ["stages", "demo", "--format", "dot", "--out", out], tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert (out / "summary.json").is_file()


def test_bench_prints_its_results_before_an_out_that_cannot_be_written(capsys):
    """--out /dev/full fails after the timing: the results are printed first, and the failure is one line."""
    argv = ["bench", "demo", "--backends", "tvm", "--repeat", "1", "--no-anchors", "--json", "--out", "/dev/full"]
    assert cli.main(argv) == 1
    printed = capsys.readouterr()
    assert list(json.loads(printed.out)["backends"]) == ["tvm"]
    assert printed.err.startswith("error: ") and "/dev/full" in printed.err and printed.err.count("\n") == 1
