"""A hostile but realistic user: a table of bad inputs, each one line, no traceback, nothing half-written.

Every row is run and checked the same way:

- no Python traceback on stdout or stderr;
- a non-zero exit (2 for a mistake) from the CLI, a WorkbenchError from the Python API;
- exactly one line ``error: <cause>. Fix: <fix>.`` that names the cause (the words given in the row);
- no output left behind: the rows' directory is the same before and after (files, sizes, times).

CLI rows run in-process through ``cli.main(argv)``; only what needs a real
process (``sys.exit`` inside a user file, Ctrl-C by SIGINT, two runs at once)
starts one. No row builds an SSD-size model.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import bad_models
import numpy as np
import pytest
from messages import LINE, one_line
from PIL import Image

from byoc_workbench import cli, stages, subjects
from byoc_workbench.backends.codegen import register_codegen
from byoc_workbench.backends.registry import Registry
from byoc_workbench.errors import WorkbenchError, first_line, shorten
from byoc_workbench.flow import rules
from byoc_workbench.measure import clock, execute
from byoc_workbench.models import demo, images
from byoc_workbench.session import Workbench

MODEL = """
from tvm.script import ir as I, relax as R
from tvm.relax.dpl import is_op, wildcard
from byoc_workbench.flow.rules import op_rule, pattern_rule


@I.ir_module
class Mine:
    @R.function
    def main(x: R.Tensor((2, 8), "float32"), w: R.Tensor((8, 4), "float32")):
        with R.dataflow():
            y = R.nn.relu(R.matmul(x, w))
            R.output(y)
        return y


mod = Mine
"""
MATMUL_RELU = 'is_op("relax.nn.relu")(is_op("relax.matmul")(wildcard(), wildcard()))'

# User files: name -> source. MODEL plus a tail, unless the source stands alone.
FILES = {
    "mine.py": MODEL + 'rules = [op_rule("mychip", "mm", "relax.matmul")]\n',
    "syntax.py": "x = = 1\n",
    "raises.py": "x = 1\nraise RuntimeError('boom')\n",
    "imports.py": "import nothing_here_at_all\n",
    "exit0.py": "import sys\nsys.exit(0)\n",
    "exit3.py": "import sys\nsys.exit(3)\n",
    "no_mod.py": "y = 2\n",
    "mod5.py": "mod = 5\n",
    "primfunc.py": textwrap.dedent("""
        from tvm.script import ir as I
        from tvm.script import tirx as T

        @I.ir_module
        class M:
            @T.prim_func
            def main(a: T.Buffer((4,), "float32")):
                a[0] = T.float32(1)

        mod = M
    """),
    "no_main.py": MODEL.replace("def main(", "def other("),
    "bad_shapes.py": MODEL.replace('w: R.Tensor((8, 4), "float32")', 'w: R.Tensor((3, 4), "float32")'),
    "rules5.py": MODEL + "rules = 5\n",
    "rules_ints.py": MODEL + "rules = [1, 2]\n",
    "rules_one.py": MODEL + 'rules = op_rule("mychip", "mm", "relax.matmul")\n',
    "rules_dup.py": MODEL
    + 'rules = [op_rule("mychip", "mm", "relax.matmul"), op_rule("mychip", "mm", "relax.nn.relu")]\n',
    "rules_dup_table.py": MODEL + 'rules = [op_rule("byoc-target", "add", "relax.nn.relu")]\n',
    "unknown_op.py": MODEL + 'rules = [op_rule("mychip", "mm", "relax.no_such_op")]\n',
    "not_pattern.py": MODEL + 'rules = [pattern_rule("mychip", "mm", "relax.matmul")]\n',
    "check5.py": MODEL + 'rules = [op_rule("mychip", "mm", "relax.matmul", check=5)]\n',
    "check_raises.py": MODEL
    + 'def picky(call):\n    return 1 / 0\n\n\nrules = [op_rule("mychip", "mm", "relax.matmul", check=picky)]\n',
    "pattern_raises.py": MODEL
    + "def picky(call):\n    raise KeyError('layout')\n\n\n"
    + f'rules = [pattern_rule("mychip", "mr", {MATMUL_RELU}, check=picky)]\n',
    "check_raises_ours.py": MODEL
    + "from byoc_workbench.errors import WorkbenchError\n\n\n"
    + "def picky(call):\n    raise WorkbenchError('Nested cause', 'nested fix')\n\n\n"
    + 'rules = [op_rule("mychip", "mm", "relax.matmul", check=picky)]\n',
    "empty_name.py": MODEL + 'rules = [op_rule("mychip", "", "relax.matmul")]\n',
    "sleepy.py": "import time\nprint('ready', flush=True)\ntime.sleep(60)\n",
}


def _picture(path: Path, h: int, w: int) -> None:
    Image.fromarray(np.random.RandomState(0).randint(0, 255, (h, w, 3), dtype=np.uint8)).save(path)


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    """One directory holding every row's files; rows write (or must not write) under it."""
    root = tmp_path_factory.mktemp("bad")
    for name, source in FILES.items():
        (root / name).write_text(source)
    (root / "a_file").write_text("not a directory")
    (root / "a_dir").mkdir()
    (root / "cwd").mkdir()
    (root / "empty.jpg").write_bytes(b"")
    (root / "text.jpg").write_text("hello, not a picture\n" * 20)
    _picture(root / "pic.png", 40, 60)
    (root / "half.png").write_bytes((root / "pic.png").read_bytes()[:60])
    (root / "garbage.params").write_bytes(b"\x00\x01 not mxnet parameters" * 10)
    blocked = root / "blocked"  # a stage file's name taken by a directory
    (blocked / "03-merge.svg").mkdir(parents=True)
    (blocked / "profile.json").mkdir()
    bad_models.write_all(root)  # ONNX files, PyTorch modules and codegen files
    sys.path.insert(0, str(root))  # so that --torch bad_torch_...:f imports from here
    yield root
    sys.path.remove(str(root))


def _snapshot(root: Path) -> dict:
    """Every file and directory under ``root``, with size and modification time (Python's own caches aside)."""
    return {
        str(p.relative_to(root)): (p.is_dir(), p.stat().st_size if p.is_file() else 0, p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if "__pycache__" not in p.parts
    }


def _no_traceback(*texts: str) -> None:
    for text in texts:
        assert "Traceback" not in text and 'File "' not in text, text[-2000:]


def _the_line(err: str) -> str:
    """The one error line: every other stderr line is a warning or a progress bar, none is a second error."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert len(errors) == 1, err
    return one_line(errors[0])


# --- the command line -------------------------------------------------------------------
# (id, kind, argv with {d} for the rows' directory, words the line must hold). Each exits 2.

CLI = [
    # arguments (argparse's own errors, in the one format)
    ("no-command", "cli", [], ["required: command", "Fix: add command"]),
    ("unknown-command", "cli", ["stagez"], ["invalid choice: 'stagez'", "did you mean stages?"]),
    ("stages-no-out", "cli", ["stages", "demo"], ["required: --out", "--help"]),
    ("stages-no-model", "cli", ["stages", "--out", "{d}/o"], ["required: model"]),
    ("unknown-option", "cli", ["stages", "demo", "--out", "{d}/o", "--frob"], ["unrecognized arguments: --frob"]),
    ("out-without-value", "cli", ["stages", "demo", "--out"], ["--out: expected one argument", "put a value"]),
    ("bad-format", "cli", ["stages", "demo", "--out", "{d}/o", "--format", "png"], ["use one of: svg, dot"]),
    ("min-mac-not-int", "cli", ["stages", "demo", "--out", "{d}/o", "--min-mac-ops", "x"], ["whole number"]),
    ("min-mac-negative", "cli", ["stages", "demo", "--out", "{d}/o", "--min-mac-ops", "-1"], ["0 or more"]),
    ("repeat-huge", "cli", ["bench", "ssd", "--repeat", "100000000"], ["from 1 to 1000", "Fix: pass --repeat"]),
    ("repeat-zero", "cli", ["bench", "ssd", "--repeat", "0"], ["from 1 to 1000"]),
    ("tvm-repeat-huge", "cli", ["bench", "ssd", "--tvm-repeat", "50"], ["from 1 to 20"]),
    ("runs-zero", "cli", ["profile", "demo", "--runs", "0"], ["--runs", "from 1 to 1000"]),
    ("runs-huge", "cli", ["profile", "demo", "--runs", "5000"], ["from 1 to 1000"]),
    ("max-seconds-zero", "cli", ["profile", "demo", "--max-seconds", "0"], ["--max-seconds", "above 0"]),
    (
        "profile-over-budget",
        "cli",
        ["profile", "demo", "--runs", "1000", "--max-seconds", "0.01", "--out", "{d}/o"],
        ["over the limit of", "pass --max-seconds"],
    ),
    ("backend-typo", "cli", ["run", "ssd", "--backend", "tvn"], ["Unknown backend 'tvn'", "did you mean tvm?"]),
    ("bench-backend-typo", "cli", ["bench", "ssd", "--backends", "tvm,onnxrt"], ["onnxrt", "--backends"]),
    ("tolerance-text", "cli", ["compare", "demo", "--tolerance", "abc"], ["invalid float value", "a number"]),
    ("tolerance-negative", "cli", ["compare", "demo", "--tolerance", "-1"], ["--tolerance must be 0 or more"]),
    ("tolerance-nan", "cli", ["compare", "demo", "--tolerance", "nan"], ["--tolerance must be 0 or more"]),
    ("import-what", "cli", ["import", "ssdd"], ["Unknown model 'ssdd'", "use one of: ssd_512_resnet50_v1_coco"]),
    ("unknown-model", "cli", ["stages", "nope", "--out", "{d}/o"], ["Unknown model 'nope'"]),
    ("unknown-target", "cli", ["stages", "demo", "--out", "{d}/o", "--target", "tensorrtt"], ["Unknown target"]),
    ("unknown-rule", "cli", ["stages", "demo", "--out", "{d}/o", "--rules", "byoc-target.nope"], ["nope"]),
    ("rule-without-target", "cli", ["stages", "demo", "--out", "{d}/o", "--rules", "add"], ["target.rule"]),
    ("zoo-model-typo", "cli", ["run", "ssd", "--model", "ssd_512_resnet"], ["Unknown model"]),
    ("run-demo", "cli", ["run", "demo"], ["the demo was written in Relax", "compare demo"]),
    ("bench-unknown-model", "cli", ["bench", "yolo9000"], ["Unknown model 'yolo9000'", "simple_pose_resnet18_v1b"]),
    # output paths: refused before any work, nothing written
    ("out-empty", "output", ["stages", "demo", "--out", ""], ["--out is empty"]),
    ("out-is-a-file", "output", ["stages", "demo", "--out", "{d}/a_file"], ["is a file, not a directory"]),
    ("out-under-a-file", "output", ["stages", "demo", "--out", "{d}/a_file/o"], ["is a file, not a directory"]),
    ("out-not-writable", "output", ["stages", "demo", "--out", "/sys/byoc-workbench"], ["Cannot write to /sys"]),
    ("out-stage-name-taken", "output", ["stages", "demo", "--out", "{d}/blocked"], ["directory named 03-merge.svg"]),
    ("save-empty", "output", ["run", "ssd", "--save-outputs", ""], ["--save-outputs is empty"]),
    ("save-is-a-dir", "output", ["run", "ssd", "--save-outputs", "{d}/a_dir"], ["is a directory, not a file"]),
    ("save-under-a-file", "output", ["run", "ssd", "--save-outputs", "{d}/a_file/x.npz"], ["is a file"]),
    ("save-not-writable", "output", ["run", "ssd", "--save-outputs", "/sys/x.npz"], ["Cannot write to /sys"]),
    ("profile-out-file", "output", ["profile", "demo", "--out", "{d}/a_file"], ["is a file, not a directory"]),
    ("profile-out-taken", "output", ["profile", "demo", "--out", "{d}/blocked"], ["profile.json"]),
    ("compare-out-empty", "output", ["compare", "demo", "--out", ""], ["--out is empty"]),
    ("bench-out-empty", "output", ["bench", "demo", "--out", ""], ["--out is empty", "leave it out"]),
    ("search-out-empty", "output", ["search", "demo", "--out", " "], ["--out is empty"]),
    ("report-target-empty", "cli", ["report", "demo", "--target", ""], ["--target is empty"]),
    ("search-target-empty", "cli", ["search", "demo", "--target", ""], ["--target is empty"]),
    # user model files
    ("file-missing", "file", ["stages", "{d}/nope.py", "--out", "{d}/o"], ["does not exist"]),
    ("file-is-a-dir", "file", ["stages", "{d}/a_dir", "--out", "{d}/o"], ["is a directory"]),
    ("file-syntax", "file", ["stages", "{d}/syntax.py", "--out", "{d}/o"], ["SyntaxError", "line 1"]),
    ("file-raises", "file", ["stages", "{d}/raises.py", "--out", "{d}/o"], ["RuntimeError", "line 2", "boom"]),
    ("file-imports", "file", ["stages", "{d}/imports.py", "--out", "{d}/o"], ["ModuleNotFoundError"]),
    ("file-exit-0", "file", ["stages", "{d}/exit0.py", "--out", "{d}/o"], ["sys.exit(0) at line 2"]),
    ("file-exit-3", "file", ["stages", "{d}/exit3.py", "--out", "{d}/o"], ["sys.exit(3)"]),
    ("file-no-mod", "file", ["stages", "{d}/no_mod.py", "--out", "{d}/o"], ["does not define mod"]),
    ("file-mod-5", "file", ["stages", "{d}/mod5.py", "--out", "{d}/o"], ["got int"]),
    ("file-primfunc-main", "file", ["stages", "{d}/primfunc.py", "--out", "{d}/o"], ["PrimFunc", "Relax function"]),
    ("file-no-main", "file", ["stages", "{d}/no_main.py", "--out", "{d}/o"], ["no function named main"]),
    (
        "file-bad-shapes",
        "file",
        ["stages", "{d}/bad_shapes.py", "--out", "{d}/o"],
        ["Matmul requires", "bad_shapes.py:12"],
    ),
    ("rules-5", "file", ["stages", "{d}/rules5.py", "--out", "{d}/o"], ["must be a list of rules; got int"]),
    ("rules-ints", "file", ["stages", "{d}/rules_ints.py", "--out", "{d}/o"], ["Rule values; got int"]),
    ("rules-not-a-list", "file", ["stages", "{d}/rules_one.py", "--out", "{d}/o"], ["list of rules; got Rule"]),
    ("rules-duplicate", "file", ["stages", "{d}/rules_dup.py", "--out", "{d}/o"], ["Two rules are named mychip.mm"]),
    ("rules-dup-table", "file", ["stages", "{d}/rules_dup_table.py", "--out", "{d}/o"], ["byoc-target.add"]),
    ("rule-unknown-op", "file", ["stages", "{d}/unknown_op.py", "--out", "{d}/o"], ["line 18", "relax.no_such_op"]),
    ("rule-not-pattern", "file", ["stages", "{d}/not_pattern.py", "--out", "{d}/o"], ["not a valid pattern"]),
    ("rule-check-5", "file", ["stages", "{d}/check5.py", "--out", "{d}/o"], ["check must be a function"]),
    ("rule-empty-name", "file", ["stages", "{d}/empty_name.py", "--out", "{d}/o"], ["non-empty"]),
    (
        "rule-check-raises",
        "file",
        ["stages", "{d}/check_raises.py", "--out", "{d}/o"],
        ["mychip.mm's check raised ZeroDivisionError", "check_raises.py, line 19", "division by zero"],
    ),
    (
        "pattern-check-raises",
        "file",
        ["stages", "{d}/pattern_raises.py", "--out", "{d}/o"],
        ["mychip.mr's check raised KeyError", "pattern_raises.py, line 19", "layout"],
    ),
    ("nested-error", "file", ["stages", "{d}/check_raises_ours.py", "--out", "{d}/o"], ["raised WorkbenchError"]),
    ("target-typo-file", "file", ["stages", "{d}/mine.py", "--out", "{d}/o", "--target", "mychp"], ["mychip"]),
    ("file-rule-typo", "file", ["stages", "{d}/mine.py", "--out", "{d}/o", "--rules", "mychip.mmm"], ["mychip.mm"]),
    # pictures: refused before the model is built
    ("image-missing", "picture", ["run", "ssd", "--image", "{d}/nope.jpg"], ["does not exist"]),
    ("image-is-a-dir", "picture", ["run", "ssd", "--image", "{d}/a_dir"], ["is a directory"]),
    ("image-empty", "picture", ["run", "ssd", "--image", "{d}/empty.jpg"], ["not a readable image"]),
    ("image-text", "picture", ["bench", "ssd", "--image", "{d}/text.jpg"], ["not a readable image"]),
    ("image-truncated", "picture", ["profile", "ssd", "--image", "{d}/half.png"], ["not a readable image"]),
    ("image-compare", "picture", ["compare", "ssd", "--image", "{d}/nope.png"], ["does not exist"]),
    # weights: refused before the network is built
    ("weights-missing", "weights", ["run", "ssd", "--weights", "{d}/nope.params"], ["does not exist"]),
    ("weights-dir", "weights", ["import", "ssd", "--weights", "{d}/a_dir"], ["is a directory"]),
    ("weights-empty", "weights", ["stages", "ssd", "--out", "{d}/o", "--weights", ""], ["--weights is empty"]),
    # your own models: ONNX files, --torch, --input-shape, codegen files
    ("not-py-or-onnx", "own", ["report", "{d}/README.md"], ["README.md is neither a .py nor a .onnx file"]),
    ("shape-huge", "own", ["report", "{d}/sym.onnx", "--input-shape", "100000,3,1000,1000"], ["1.1 TiB", "4.0 GiB"]),
    ("shape-twice", "own", ["report", "{d}/relu.onnx", *["--input-shape", "x=1,4,16,16"] * 2], ["twice for x"]),
    ("shape-demo", "own", ["report", "demo", "--input-shape", "1,3,8,8"], ["not to demo", "remove --input-shape"]),
    ("shape-zoo", "own", ["run", "ssd", "--input-shape", "1,3,8,8"], ["not to ssd"]),
    (
        "shape-search",
        "own",
        ["search", "demo", "--backends", "onnxruntime,tvm", "--input-shape", "1,2"],
        ["not to demo"],
    ),
    ("onnx-no-outputs", "own", ["run", "{d}/no_outputs.onnx"], ["no_outputs.onnx declares no outputs"]),
    ("onnx-no-outputs-report", "own", ["report", "{d}/no_outputs.onnx"], ["declares no outputs"]),
    (
        "onnx-no-inputs-bench",
        "own",
        ["bench", "{d}/no_inputs.onnx", "--backends", "tvm", "--no-anchors"],
        ["no_inputs.onnx takes no inputs"],
    ),
    ("onnx-empty", "own", ["run", "{d}/empty.onnx"], ["empty.onnx is empty", "re-export"]),
    ("onnx-opset-1", "own", ["run", "{d}/opset1.onnx"], ["uses ONNX opset 1", "opset 7 onwards"]),
    ("onnx-opset-99", "own", ["run", "{d}/opset99.onnx"], ["opset 99 is not a released one", "re-export"]),
    ("onnx-ir-99", "own", ["run", "{d}/ir99.onnx"], ["Unsupported model IR version: 99", "re-export"]),
    (
        "precision-ignored",
        "own",
        ["profile", "{d}/relu.onnx", "--backend", "onnxruntime", "--precision", "bf16"],
        ["--precision bf16 applies to --backend openvino or torch only", "onnxruntime runs in f32"],
    ),
    ("torch-syntax", "own", ["report", "--torch", "bad_torch_syntax:f"], ["bad_torch_syntax raised SyntaxError"]),
    ("torch-no-module", "own", ["report", "--torch", "no_such_module_x:f"], ["No module named 'no_such_module_x'"]),
    ("torch-exit-3", "own", ["report", "--torch", "bad_torch_exit:f"], ["bad_torch_exit:f() called sys.exit(3)"]),
    (
        "torch-shape-name",
        "own",
        ["report", "--torch", "bad_torch_tiny:net", "--input-shape", "y=1,4"],
        ["no input named y", "name one of: input"],
    ),
    ("torch-data-dependent", "own", ["report", "--torch", "bad_torch_data_dependent:net"], ["cannot trace Picky"]),
    (
        "torch-returns-none",
        "own",
        ["report", "--torch", "bad_torch_outputs:Nothing", "--input-shape", "x=1,3"],
        ["Nothing.forward must return tensors, and output 0 is None"],
    ),
    (
        "torch-returns-a-number",
        "own",
        ["report", "--torch", "bad_torch_outputs:Count", "--input-shape", "x=1,3"],
        ["output 1 is the int 3"],
    ),
    ("prefetch-empty", "cli", ["prefetch", "--models", ""], ["--models is empty"]),
    ("emitter-syntax", "own", ["compare", "demo", "--backend", "{d}/cg_syntax.py"], ["not valid Python"]),
    ("emitter-empty", "own", ["compare", "demo", "--backend", "{d}/cg_empty.py"], ["returned an empty str"]),
    ("emitter-undefined", "own", ["compare", "demo", "--backend", "{d}/cg_undefined.py"], ["uses nope"]),
    ("codegen-mxnet", "own", ["compare", "demo", "--backend", "{d}/cg_mxnet.py"], ["mxnet is a framework's name"]),
    # A faulty C codegen: tried in a child process, with a time limit, against TVM; the CLI lives on.
    (
        "c-out-of-bounds",
        "own",
        ["compare", "demo", "--no-prune", "--backend", "{d}/cg_c_oob.py"],
        ["crashed"],
    ),
    (
        "c-exit",
        "own",
        ["compare", "demo", "--no-prune", "--backend", "{d}/cg_c_exit.py"],
        ["mychip_c_0", "on a trial run"],
    ),
    ("c-hang", "own", ["compare", "demo", "--no-prune", "--backend", "{d}/cg_c_hang.py"], ["did not finish within"]),
    ("c-wrong", "own", ["compare", "demo", "--no-prune", "--backend", "{d}/cg_c_wrong.py"], ["wrong on a trial run"]),
    ("codegen-dash", "own", ["compare", "demo", "--backend", "{d}/cg_dash.py"], ["got 'byoc-target'"]),
]


@pytest.mark.parametrize("case", CLI, ids=[c[0] for c in CLI])
def test_cli_bad_input(case, d, capsys, monkeypatch):
    from byoc_workbench.backends import c_source

    _id, _kind, argv, words = case
    monkeypatch.setattr(c_source, "TRIAL_S", 5.0)  # a hung trial is killed sooner than a user's 30 s
    monkeypatch.chdir(d / "cwd")  # so that an empty --out would show up as files written here
    before = _snapshot(d)
    rc = cli.main([a.format(d=d) for a in argv])
    out, err = capsys.readouterr()
    _no_traceback(out, err)
    assert rc == 2, (rc, err)
    assert len(err.splitlines()) < 20, err[:2000]  # nothing printed at length before the line (torch's graphs)
    line = _the_line(err)
    assert "Fix: Fix" not in line and line.count("error:") == 1 and line.count("Fix:") == 1, line
    for word in words:
        assert word.format(d=d) in line, (word, line)
    assert _snapshot(d) == before, "nothing is left behind"


# --- the Python API -----------------------------------------------------------------------
# (id, kind, call(d) that must raise WorkbenchError, words its line must hold)


def _demo_wb(**kw):
    return Workbench(demo.demo_module(), "byoc-target", **kw)


def _raising_prune(name, ops):
    return {}["no such key"]


def _load(name):
    return lambda d: subjects.load_model_file(d / name)


def _build_unknown_rank(d):
    """Every stage takes a tensor of unknown rank; TVM's own build cannot, and says so in one line."""
    from tvm import relax

    from byoc_workbench.measure import execute

    x = relax.Var("x", relax.TensorType(dtype="float32", ndim=-1))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.add(x, x))
        bb.emit_func_output(out)
    return execute.run(bb.get(), [np.ones((2, 3), "float32")])


def _relu(op):
    return f"np.maximum({op.args[0]}, 0)"


def _codegen(name="mine", emit=None, **kw):
    """register_codegen into a registry of its own, so that no row changes the one the others read."""
    return register_codegen(name, {"relu": _relu} if emit is None else emit, registry=Registry.builtin(), **kw)


API = [
    ("target-int", "api", lambda d: Workbench(demo.demo_module(), 5), ["got int"]),
    ("target-unknown-str", "api", lambda d: Workbench(demo.demo_module(), "byoc"), ["Unknown target 'byoc'"]),
    ("module-not-a-module", "api", lambda d: Workbench("demo", "byoc-target"), ["Expected a tvm.IRModule"]),
    ("prune-not-callable", "api", lambda d: _demo_wb(prune_rule=5), ["prune rule must be a function", "int"]),
    ("prune-raises", "api", lambda d: _demo_wb(prune_rule=_raising_prune).stages, ["_raising_prune", "KeyError"]),
    ("prune-returns-int", "api", lambda d: _demo_wb(prune_rule=lambda n, ops: 3).stages, ["returned a int"]),
    ("with-prune-str", "api", lambda d: _demo_wb().with_prune("no_mac"), ["got str"]),
    ("switch-off-unknown", "api", lambda d: _demo_wb().with_rule("byoc-target.nope", False), ["nope"]),
    ("switch-on-unknown", "api", lambda d: _demo_wb().with_rule("add", True), ["target.rule"]),
    ("enabled-ints", "api", lambda d: _demo_wb(enabled=[1, 2]), ["Rule names must be texts"]),
    ("extra-rules-str", "api", lambda d: _demo_wb(extra_rules="byoc-target.add"), ["extra_rules must be a list"]),
    (
        "extra-rules-duplicate",
        "api",
        lambda d: _demo_wb(extra_rules=[rules.op_rule("byoc-target", "add", "relax.multiply")]),
        ["Two rules are named byoc-target.add"],
    ),
    ("run-stages-rules-5", "api", lambda d: stages.run_stages(demo.demo_module(), 5), ["must be a list"]),
    ("no-mac-negative", "api", lambda d: stages.no_mac(-1), ["0 or more"]),
    ("op-rule-check-str", "api", lambda d: rules.op_rule("t", "x", "relax.add", check="yes"), ["got str"]),
    ("load-rules-5", "api", _load("rules5.py"), ["got int"]),
    ("load-exit", "api", _load("exit0.py"), ["sys.exit(0)"]),
    ("build-unknown-rank", "api", _build_unknown_rank, ["unknown rank", "relax.add", "R.Tensor(ndim=4"]),
    (
        "image-zero-size",
        "picture",
        lambda d: images.resize_short_within(np.zeros((0, 7, 3), np.uint8), 512, 1024),
        ["7x0"],
    ),
    ("codegen-key-int", "api", lambda d: _codegen(emit={1: _relu}), ["keys must be op names", "got 1"]),
    ("codegen-rules-5", "api", lambda d: _codegen(rules=5), ["must be a list of rules, got int"]),
    ("codegen-emit-empty", "api", lambda d: _codegen(emit={}), ["emit is an empty dict"]),
    ("codegen-mxnet", "api", lambda d: _codegen(name="mxnet"), ["mxnet is a framework's name"]),
    ("codegen-torch", "api", lambda d: _codegen(name="Torch"), ["Torch is a built-in backend already"]),
    ("codegen-target-name", "api", lambda d: _codegen(name="byoc_target"), ["a built-in target"]),
    ("codegen-dash", "api", lambda d: _codegen(name="byoc-target"), ["letters, digits and _"]),
    ("run-inputs-count", "api", lambda d: execute.run(demo.demo_module(), demo.demo_inputs()[:2]), ["takes 3 inputs"]),
    (
        "run-inputs-dtype",
        "api",
        lambda d: execute.run(demo.demo_module(), [a.astype("float64") for a in demo.demo_inputs()]),
        ["input data is float64", "astype('float32')"],
    ),
    ("run-inputs-none", "api", lambda d: execute.run(demo.demo_module(), None), ["must be a list of arrays"]),
    ("view-expand-int", "api", lambda d: _demo_wb().view("partition", expand=5), ["expand must be a list"]),
    ("from-onnx-none", "api", lambda d: Workbench.from_onnx(None), ["Not the path of an ONNX file"]),
    ("search-widget-none", "api", lambda d: _search_widget(None), ["takes a search's result, not NoneType"]),
    ("chooser-unknown", "api", lambda d: _zoo_chooser(models=["nosuch"]), ["Unknown model 'nosuch'"]),
    ("chooser-value", "api", lambda d: _zoo_chooser(models=["resnet18_v1"], value="x"), ["pick one of: resnet18_v1"]),
    (
        "measure-over-budget",
        "api",
        lambda d: clock.measure(lambda: time.sleep(0.02), 500, 0, "sleep", False, 1.0),
        ["--max-seconds"],
    ),
]


def _search_widget(result):
    from byoc_workbench.widgets.search import search_widget

    return search_widget(result)


def _zoo_chooser(**kw):
    from byoc_workbench.widgets.zoo_chooser import zoo_chooser

    return zoo_chooser(**kw)


@pytest.mark.parametrize("case", API, ids=[c[0] for c in API])
def test_api_bad_input(case, d):
    _id, _kind, call, words = case
    before = _snapshot(d)
    with pytest.raises(WorkbenchError) as err:
        call(d)
    line = one_line(err)
    assert line.count("error:") == 1 and line.count("Fix:") == 1, line
    for word in words:
        assert word in line, (word, line)
    assert _snapshot(d) == before


def test_the_table_covers_every_kind_and_at_least_60_inputs():
    kinds = {c[1] for c in CLI + API}
    assert kinds >= {"cli", "output", "file", "picture", "weights", "api"}
    assert len(CLI) + len(API) >= 60


# --- bad inputs that are accepted, as the issue asks --------------------------------------


def test_pictures_of_any_shape_are_accepted(d):
    """3000x1 crashed OpenCV's resize; now it resizes as GluonCV's rules say, and bench pads it to 512x512."""
    _picture(d / "wide.png", 1, 3000)
    _picture(d / "tall.png", 3000, 1)
    _picture(d / "dot.png", 1, 1)
    x, resized = images.load_test(d / "wide.png")
    assert x.shape == (1, 3, 1, 1024) and resized.shape == (1, 1024, 3)
    assert images.load_test(d / "tall.png")[0].shape == (1, 3, 1024, 1)
    assert images.load_test(d / "dot.png")[0].shape == (1, 3, 512, 512)
    cut, shown = images.model_input(d / "wide.png", (1, 3, 512, 512))
    assert shown.shape == (512, 512, 3) and not shown[1:].any()
    assert cut.shape == (1, 3, 512, 512) and np.all(cut[:, :, 1:] == 0) and np.any(cut[:, :, 0] != 0)


def test_a_target_given_by_name(d):
    wb = Workbench(demo.demo_module(), "byoc-target", enabled="byoc-target.add,byoc-target.conv2d_bias_relu")
    assert {r.qualified for r in wb.rules} == {"byoc-target.add", "byoc-target.conv2d_bias_relu"}
    assert len(wb.stage("partition").subgraphs) == 3


def test_the_widget_shows_a_bad_target_in_one_line():
    from byoc_workbench.widgets import workbench_widget

    for target in (5, "byoc"):
        w = workbench_widget(target=target)
        assert w.workbench is None and "error:" in w.status.value and "Fix:" in w.status.value


def test_the_widget_refuses_an_unknown_rule_in_one_line():
    from byoc_workbench.widgets import workbench_widget

    w = workbench_widget()
    before = w.workbench
    assert w.set_rule("byoc-target.nope", False) is False
    assert "byoc-target.nope" in w.status.value and "Fix:" in w.status.value
    assert w.workbench is before, "the previous state is kept"


def test_causes_are_cut_at_a_word_and_nested_errors_not_repeated():
    long = ValueError("word " * 200)
    text = first_line(long)
    assert len(text) <= 300 and text.endswith("word […]")
    assert shorten("x" * 400, 300).endswith("[…]") and len(shorten("x" * 400, 300)) <= 300
    nested = WorkbenchError("Inner cause", "inner fix")
    outer = WorkbenchError(f"Outer failed ({first_line(nested)})", "outer fix")
    assert LINE.fullmatch(outer.line) and outer.line.count("Fix:") == 1 and "error:" not in outer.cause


def test_nonfinite_outputs_give_one_warning_and_the_run_finishes(d):
    from byoc_workbench.models import meaning, zoo

    name = "ssd_512_resnet50_v1_coco"
    loaded = zoo.LoadedModel(name, None, str(d / "flipped.params"), zoo.model_spec(name))
    ids, scores = np.zeros((1, 4, 1), "float32"), np.ones((1, 4, 1), "float32")
    boxes = np.ones((1, 4, 4), "float32")
    boxes[0, 2, 1] = np.inf
    result = meaning.prediction("detection", [ids, scores, boxes], loaded)
    assert len(result.warnings) == 1
    (line,) = result.warnings
    assert "output boxes holds 1 non-finite values (first inf at [0, 2, 1])" in line
    assert "flipped.params" in line and "corrupted" in line and "\n" not in line
    assert meaning.prediction("detection", [ids, scores, np.ones((1, 4, 4), "float32")], loaded).warnings == ()


def test_saved_outputs_are_whole_and_counted(d, capsys):
    """Each output is saved whole (batch axis and scalars too) and the line counts outputs, not rows."""
    for model, shape, saved, expect in [
        ("relu.onnx", [], "1 output", {"output0": (1, 4, 16, 16)}),
        ("batch.onnx", ["--input-shape", "4,4,16,16"], "1 output", {"output0": (4, 4, 16, 16)}),
        ("scalar.onnx", [], "2 outputs", {"output0": (), "output1": (1, 4, 16, 16)}),
    ]:
        path = d / "saved" / f"{model}.npz"
        assert cli.main(["run", str(d / model), *shape, "--save-outputs", str(path)]) == 0
        assert f"saved {saved} to" in capsys.readouterr().out
        with np.load(path) as z:
            assert {k: z[k].shape for k in z} == expect


def test_named_input_shapes_reach_pytorch(d, capsys):
    """--input-shape NAME=... names forward's input; it was ignored for 1,3,224,224."""
    save = d / "saved" / "torch.npz"
    assert (
        cli.main(["run", "--torch", "bad_torch_tiny:net", "--input-shape", "input=2,5", "--save-outputs", str(save)])
        == 0
    )
    with np.load(save) as z:
        assert z["output0"].shape == (2, 5)
    model = subjects.own_workbench(None, "bad_torch_tiny:net", {"input": [2, 5]}).model
    assert [x.shape for x in model.inputs] == [(2, 5)]
    described = subjects.describe(None, None, torch_spec="bad_torch_tiny:net", shapes={"input": [3, 2]})
    assert subjects.load(described).inputs[0].shape == (3, 2)  # the search's path


def test_a_model_file_in_capitals_is_accepted(d, capsys):
    (d / "upper").mkdir()
    (d / "upper" / "RELU.ONNX").write_bytes((d / "relu.onnx").read_bytes())
    (d / "upper" / "MINE.PY").write_text(FILES["mine.py"])
    assert cli.main(["report", str(d / "upper" / "RELU.ONNX"), "--json"]) == 0
    assert cli.main(["report", str(d / "upper" / "MINE.PY"), "--target", "mychip", "--json"]) == 0
    capsys.readouterr()


# --- what needs a real process ---------------------------------------------------------------


def _cli_process(*args, **kw):
    return subprocess.Popen(
        [sys.executable, "-m", "byoc_workbench.cli", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def test_a_user_file_that_exits_0_exits_2(d):
    proc = _cli_process("stages", d / "exit0.py", "--out", d / "exit-out")
    out, err = proc.communicate(timeout=120)
    _no_traceback(out, err)
    assert proc.returncode == 2 and "sys.exit(0)" in _the_line(err)
    assert not (d / "exit-out").exists()


def test_ctrl_c_is_one_line_exit_130_and_writes_nothing(d):
    proc = _cli_process("stages", d / "sleepy.py", "--out", d / "ctrl-c-out")
    assert proc.stdout.readline().strip() == "ready"  # the user file is loading: interrupt it there
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    _no_traceback(out, err)
    assert proc.returncode == 130 and err.strip() == "interrupted; nothing was written."
    assert not (d / "ctrl-c-out").exists()


def test_ctrl_c_while_writing_keeps_the_old_output(tmp_path, capsys, monkeypatch):
    """Interrupted after three of seven diagrams: the old output stays as it was, and the line says so."""
    from byoc_workbench.draw import render

    out = tmp_path / "out"
    assert cli.main(["stages", "demo", "--out", str(out), "--format", "dot"]) == 0
    old = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()
    real, calls = render.write, []

    def write_then_interrupt(dot, path, fmt="svg"):
        calls.append(path)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return real(dot, path, fmt)

    monkeypatch.setattr(render, "write", write_then_interrupt)
    assert cli.main(["stages", "demo", "--out", str(out), "--format", "dot", "--rules", ""]) == 130
    out_text, err = capsys.readouterr()
    _no_traceback(out_text, err)
    assert err.strip() == "interrupted; nothing was written."
    assert {p.name: p.read_bytes() for p in out.iterdir()} == old
    assert [p.name for p in tmp_path.iterdir()] == ["out"], "no temporary directory is left"


@pytest.mark.parametrize("how", ["flag", "env"])
def test_traceback_flag_and_debug_env_show_the_whole_trace(d, capsys, monkeypatch, how):
    argv = ["stages", str(d / "check_raises.py"), "--out", str(d / "o")]
    if how == "flag":
        argv.append("--traceback")
    else:
        monkeypatch.setenv("BYOC_WORKBENCH_DEBUG", "1")
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and "ZeroDivisionError: division by zero" in err and "check_raises.py" in err
    assert err.rstrip().splitlines()[-1].startswith("error: Rule mychip.mm's check raised ZeroDivisionError")


def test_two_runs_at_once_give_identical_outputs(tmp_path):
    """Concurrency holds: two processes, their own directories and one shared, all complete and equal."""
    env = dict(os.environ, BYOC_WORKBENCH_CACHE=str(tmp_path / "cache"))
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "shared", tmp_path / "shared"]
    procs = [_cli_process("stages", "demo", "--out", o, "--format", "dot", env=env) for o in dirs[:2]]
    procs += [_cli_process("stages", "demo", "--out", o, "--format", "dot", env=env) for o in dirs[2:]]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
    contents = [{f.name: f.read_bytes() for f in o.iterdir()} for o in dirs[1:3]]
    first = {f.name: f.read_bytes() for f in dirs[0].iterdir()}
    assert len(first) == 8 and all(c == first for c in contents)
    assert json.loads(first["summary.json"])["model"] == "demo"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == ["a", "b", "shared"]


@pytest.mark.mxnet
def test_corrupted_weights_warn_once_and_the_run_finishes(tmp_path, capsys):
    """A .params file whose box-head bias has blown exponents (3e38) loads without error; the run warns."""
    pytest.importorskip("mxnet")
    from byoc_workbench.models import zoo

    name = "ssd_512_mobilenet1.0_coco"  # the smallest detector of the zoo
    loaded = zoo.load_model(name, "untrained")
    bias = loaded.block.collect_params()["ssd0_convpredictor1_conv0_bias"]  # the first box predictor
    bias.set_data(np.full(bias.shape, 3e38, "float32"))
    path = tmp_path / "flipped.params"
    loaded.block.save_parameters(str(path))
    save = tmp_path / "out.npz"
    assert (
        cli.main(
            ["run", "ssd", "--backend", "mxnet", "--model", name, "--weights", str(path), "--save-outputs", str(save)]
        )
        == 0
    )
    out, err = capsys.readouterr()
    _no_traceback(out, err)
    warnings = [ln for ln in err.splitlines() if "non-finite" in ln]
    assert len(warnings) == 1 and warnings[0].startswith("warning: ") and "output boxes" in warnings[0]
    assert str(path) in warnings[0] and "corrupted" in warnings[0]
    assert np.load(save)["boxes"].shape == (1, 100, 4), "the run finished and saved its outputs"
