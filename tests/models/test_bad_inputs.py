"""A hostile but realistic user: a table of bad inputs, each one line, no traceback, nothing half-written.

Every row is run and checked the same way:

- no Python traceback on stdout or stderr;
- a non-zero exit (2 for a mistake) from the CLI, a WorkbenchError from the Python API;
- exactly one line ``error: <cause>. Fix: <fix>.`` that names the cause (the words given in the row);
- no output left behind: the rows' directory is the same before and after (files, sizes, times).

The bad inputs that are accepted, and what needs a real process, are in
test_bad_inputs_accepted.py and test_bad_inputs_process.py; the rows' files are in bad_rows.py.

CLI rows run in-process through ``cli.main(argv)``; only what needs a real
process (``sys.exit`` inside a user file, Ctrl-C by SIGINT, two runs at once)
starts one. No row builds an SSD-size model.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from bad_rows import no_traceback, rows_dir, snapshot, the_line
from messages import one_line

from byoc_workbench import cli, stages, subjects
from byoc_workbench.backends.codegen import register_codegen
from byoc_workbench.backends.registry import Registry
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.flow import rules
from byoc_workbench.measure.bench import byom
from byoc_workbench.measure.compiler import execute
from byoc_workbench.measure.time import clock
from byoc_workbench.models import demo, images
from byoc_workbench.session import Workbench


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    """One directory holding every row's files (bad_rows.rows_dir)."""
    yield from rows_dir(tmp_path_factory)


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
        ["1000 timed runs", "over the limit of", "(--max-seconds, or max_seconds= from Python)"],
    ),
    ("backend-typo", "cli", ["run", "ssd", "--backend", "tvn"], ["Unknown backend 'tvn'", "did you mean tvm?"]),
    ("bench-backend-typo", "cli", ["bench", "ssd", "--backends", "tvm,onnxrt"], ["onnxrt", "--backends"]),
    ("tolerance-text", "cli", ["compare", "demo", "--tolerance", "abc"], ["invalid float value", "a number"]),
    ("tolerance-negative", "cli", ["compare", "demo", "--tolerance", "-1"], ["--tolerance must be 0 or more"]),
    ("tolerance-nan", "cli", ["compare", "demo", "--tolerance", "nan"], ["--tolerance must be 0 or more"]),
    ("import-what", "cli", ["import", "ssdd"], ["Unknown model 'ssdd'", "use one of: ssd_512_resnet50_v1_coco"]),
    ("unknown-model", "cli", ["stages", "nope", "--out", "{d}/o"], ["Unknown model 'nope'"]),
    ("unknown-target", "cli", ["stages", "demo", "--out", "{d}/o", "--target", "tensorrtt"], ["Unknown target"]),
    ("picture-for-onnx", "cli", ["run", "{d}/relu.onnx", "--image", "{d}/pic.png"], ["--image applies to GluonCV"]),
    ("weights-for-demo", "cli", ["compare", "demo", "--weights", "untrained"], ["--weights applies to GluonCV"]),
    ("model-for-a-zoo-name", "cli", ["run", "resnet18_v1", "--model", "ssd_300_vgg16_atrous_voc"], ["the ssd only"]),
    ("cached-and-no-cache", "cli", ["search", "demo", "--cached", "--no-cache"], ["not allowed with argument"]),
    ("out-dash", "output", ["profile", "demo", "--out", "-"], ["directory named '-'", "results print anyway"]),
    ("save-onto-a-text", "output", ["run", "ssd", "--save-outputs", "{d}/notes.txt"], ["holds something else"]),
    ("bench-out-onto-a-model", "output", ["bench", "demo", "--out", "{d}/relu.onnx"], ["holds something else"]),
    ("verbose-after-command", "cli", ["stages", "demo", "--out", "{d}/o", "-v"], ["put -v before the command"]),
    ("import-the-demo", "cli", ["import", "demo"], ["demo is the Relax demo; this command takes a GluonCV zoo"]),
    ("target-in-caps", "cli", ["report", "demo", "--target", "TensorRT"], ["did you mean tensorrt?"]),
    ("unknown-rule", "cli", ["stages", "demo", "--out", "{d}/o", "--rules", "byoc-target.nope"], ["nope"]),
    ("rule-without-target", "cli", ["stages", "demo", "--out", "{d}/o", "--rules", "add"], ["target.rule"]),
    ("rule-of-tensorrt", "cli", ["stages", "demo", "--out", "{d}/o", "--rules", "tensorrt.nn.conv2d"], ["tensorrt's"]),
    ("no-prune-and-min-mac", "cli", ["report", "demo", "--no-prune", "--min-mac-ops", "3"], ["not allowed with"]),
    ("min-mac-and-no-prune", "cli", ["report", "demo", "--min-mac-ops", "1", "--no-prune"], ["not allowed with"]),
    ("tvm-repeat-no-tvm", "cli", ["bench", "demo", "--tvm-repeat", "3", "--backends", "onnxruntime"], ["TVM alone"]),
    ("prefetch-list-unknown", "cli", ["prefetch", "--list", "--models", "resnet18_vx"], ["Unknown model 'resnet"]),
    ("demo-in-caps", "cli", ["bench", "DEMO"], ["Unknown model 'DEMO'", "did you mean demo?"]),
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
    ("bench-out-slash", "output", ["bench", "demo", "--out", "{d}/newdir/"], ["ends in '/'", "bench.json"]),
    ("save-is-a-dir", "output", ["run", "ssd", "--save-outputs", "{d}/a_dir"], ["is a directory, not a file"]),
    ("save-under-a-file", "output", ["run", "ssd", "--save-outputs", "{d}/a_file/x.npz"], ["is a file"]),
    ("save-not-writable", "output", ["run", "ssd", "--save-outputs", "/sys/x.npz"], ["Cannot write to /sys"]),
    ("save-under-unwritable", "output", ["run", "ssd", "--save-outputs", "/proc/no/x.npz"], ["/proc/no: /proc"]),
    ("report-out-a-device", "output", ["report", "demo", "--out", "/dev/full"], ["is a device, not a directory"]),
    ("save-dash", "output", ["run", "ssd", "--save-outputs", "-"], ["file named '-'", "results print anyway"]),
    ("save-link-loop", "output", ["run", "ssd", "--save-outputs", "{d}/loop_a"], ["a link that leads nowhere"]),
    ("save-is-the-model", "output", ["run", "{d}/relu.onnx", "--save-outputs", "{d}/relu.onnx"], ["reads"]),
    (
        "save-is-the-picture",
        "output",
        ["run", "ssd", "--image", "{d}/pic.png", "--save-outputs", "{d}/pic_again.png"],
        ["destroy it"],
    ),
    (
        "save-is-the-weights",
        "output",
        ["run", "ssd", "--weights", "{d}/garbage.params", "--save-outputs", "{d}/garbage.params"],
        ["reads"],
    ),
    ("stages-out-links-the-model", "output", ["stages", "{d}/relu.onnx", "--out", "{d}/linked"], ["reads"]),
    ("model-is-a-fifo", "own", ["run", "{d}/pipe.onnx"], ["pipe.onnx is a FIFO, not a regular file", "a .onnx file"]),
    ("model-name-too-long", "own", ["run", "{d}/" + "m" * 300 + ".onnx"], ["File name too long", "a .onnx file"]),
    ("image-name-too-long", "cli", ["run", "ssd", "--image", "{d}/" + "p" * 300 + ".png"], ["too long a name"]),
    ("bench-out-too-long", "output", ["bench", "demo", "--out", "{d}/" + "o" * 300 + ".json"], ["names take at most"]),
    (
        "bench-out-is-the-model",
        "output",
        ["bench", "{d}/relu.onnx", "--out", "{d}/relu.onnx"],
        ["which this command reads"],
    ),
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
    ("shape-spaced", "own", ["report", "{d}/relu.onnx", "--input-shape", "x = 1", "--input-shape", "x=1"], ["twice"]),
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
    (
        "torch-wrong-shape",
        "own",
        ["report", "--torch", "torchvision.models:squeezenet1_1", "--input-shape", "1,4,64,64"],
        ["SqueezeNet cannot run on inputs 1x4x64x64 float32", "to have 3 channels", "--input-shape"],
    ),
    ("torch-dtype-onnx", "own", ["report", "{d}/relu.onnx", "--input-dtype", "int64"], ["applies to --torch only"]),
    (
        "torch-dtype-unknown",
        "own",
        ["report", "--torch", "bad_torch_tiny:net", "--input-dtype", "int65"],
        ["Unknown input dtype 'int65'", "int64"],
    ),
    (
        "torch-dtype-no-shape",
        "own",
        ["report", "--torch", "bad_torch_tiny:net", "--input-shape", "1,4", "--input-dtype", "x=int64"],
        ["--input-dtype names x, which --input-shape does not"],
    ),
]


@pytest.mark.parametrize("case", CLI, ids=[c[0] for c in CLI])
def test_cli_bad_input(case, d, capsys, monkeypatch):
    from byoc_workbench.backends import c_source

    _id, _kind, argv, words = case
    monkeypatch.setattr(c_source, "TRIAL_S", 5.0)  # a hung trial is killed sooner than a user's 30 s
    monkeypatch.chdir(d / "cwd")  # so that an empty --out would show up as files written here
    before = snapshot(d)
    rc = cli.main([a.format(d=d) for a in argv])
    out, err = capsys.readouterr()
    no_traceback(out, err)
    assert rc == 2, (rc, err)
    assert len(err.splitlines()) < 20, err[:2000]  # nothing printed at length before the line (torch's graphs)
    line = the_line(err)
    assert "Fix: Fix" not in line and line.count("error:") == 1 and line.count("Fix:") == 1, line
    for word in words:
        assert word.format(d=d) in line, (word, line)
    assert snapshot(d) == before, "nothing is left behind"


# --- the Python API -----------------------------------------------------------------------
# (id, kind, call(d) that must raise WorkbenchError, words its line must hold)


def _demo_wb(**kw):
    return Workbench(demo.demo_module(), "byoc-target", **kw)


def _onnx_wb(d):
    return Workbench.from_onnx(d / "relu.onnx")


def _raising_prune(name, ops):
    return {}["no such key"]


def _load(name):
    return lambda d: subjects.load_model_file(d / name)


def _build_unknown_rank(d):
    """Every stage takes a tensor of unknown rank; TVM's own build cannot, and says so in one line."""
    from tvm import relax

    from byoc_workbench.measure.compiler import execute

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
    ("prune-returns-int", "api", lambda d: _demo_wb(prune_rule=lambda n, ops: 3).stages, ["returned int 3"]),
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
    ("view-collapse-str", "api", lambda d: _demo_wb().view("partition", collapse="yes"), ["collapse is True or False"]),
    ("byom-prune-str", "api", lambda d: byom.run(_onnx_wb(d), prune="no"), ["prune is True or False", "got str"]),
    ("with-rule-of-tensorrt", "api", lambda d: _demo_wb().with_rule("tensorrt.nn.conv2d", True), ["tensorrt's"]),
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
    ("torch-bf16-input", "api", lambda d: _from_torch(lambda t: t.ones(1, 4, dtype=t.bfloat16)), ["is bfloat16"]),
    ("torch-complex-input", "api", lambda d: _from_torch(lambda t: t.ones(1, 4, dtype=t.cfloat)), ["view_as_real"]),
    ("torch-meta-input", "api", lambda d: _from_torch(lambda t: t.ones(1, 4, device="meta")), ["on the meta device"]),
    (
        "torch-sparse-input",
        "api",
        lambda d: _from_torch(lambda t: t.ones(1, 4).to_sparse()),
        ["sparse_coo", "to_dense"],
    ),
    ("torch-inputs-none", "api", lambda d: Workbench.from_torch(_linear(), None), ["example_inputs must be a tensor"]),
    (
        "torch-meta-weights",
        "api",
        lambda d: _from_torch(lambda t: t.ones(1, 4), lambda t: t.nn.Linear(4, 2, device="meta")),
        ["Linear's weights are on the meta device (weight, bias)", "to_empty"],
    ),
    (
        "torch-wrong-shape-api",
        "api",
        lambda d: _from_torch(lambda t: t.ones(1, 5), lambda t: t.nn.Linear(4, 2)),
        ["Linear cannot run on inputs 1x5 float32", "(1x5 and 4x2)"],
    ),
    (
        "torch-bool-cumsum",
        "api",
        lambda d: _from_torch(lambda t: t.ones(1, 4, dtype=t.bool), lambda t: _cumsum_module()),
        ["cumsum of a bool tensor", "x.long().cumsum(dim)"],
    ),
]


def _search_widget(result):
    from byoc_workbench.widgets.search import search_widget

    return search_widget(result)


def _zoo_chooser(**kw):
    from byoc_workbench.widgets.zoo_chooser import zoo_chooser

    return zoo_chooser(**kw)


def _from_torch(example, module=lambda t: t.nn.Linear(4, 2)):
    """Workbench.from_torch of ``module(torch)`` on ``example(torch)``: torch is imported when the row runs."""
    import torch

    return Workbench.from_torch(module(torch), (example(torch),))


def _linear():
    import torch

    return torch.nn.Linear(4, 2)


def _cumsum_module():
    import torch

    class Cumsum(torch.nn.Module):
        def forward(self, x):
            return x.cumsum(1)

    return Cumsum()


@pytest.mark.parametrize("case", API, ids=[c[0] for c in API])
def test_api_bad_input(case, d):
    _id, _kind, call, words = case
    before = snapshot(d)
    with pytest.raises(WorkbenchError) as err:
        call(d)
    line = one_line(err)
    assert line.count("error:") == 1 and line.count("Fix:") == 1, line
    for word in words:
        assert word in line, (word, line)
    assert snapshot(d) == before


def test_the_table_covers_every_kind_and_at_least_60_inputs():
    kinds = {c[1] for c in CLI + API}
    assert kinds >= {"cli", "output", "file", "picture", "weights", "api"}
    assert len(CLI) + len(API) >= 60
