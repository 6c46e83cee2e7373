"""What a careless caller passes to the Python API's model functions is one line, never a traceback:
the zoo workflow (which takes a ModelRef or a plain name), ModelRef.parse, execute.run, byom.run,
build_run and offloaded, and devices.propose (issue 47)."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import tvm
from shared import relu_onnx

from byoc_workbench import workflow
from byoc_workbench.core import devices
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.measure.bench import byom
from byoc_workbench.measure.compiler import execute
from byoc_workbench.models import demo
from byoc_workbench.session import Workbench
from byoc_workbench.subjects import ModelRef, model_workbench, zoo_ref

ZOO_CALLS = {
    "import_summary": workflow.import_summary,
    "run": workflow.run,
    "zoo_report": workflow.zoo_report,
    "zoo_pick": workflow.zoo_pick,
}


def _one_line(call, match: str) -> str:
    with pytest.raises(WorkbenchError, match=match) as err:
        call()
    line = str(err.value)
    assert "\n" not in line and "Fix: " in line and "ModelRef(" not in line
    return line


@pytest.mark.parametrize("name", ZOO_CALLS)
@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (None, "A model is required"),
        (5, "named by a string, got int"),
        ("", "name is empty"),
        ("   ", "name is empty"),
        ("demo", "demo is the Relax demo; this command takes a GluonCV zoo model.*resnet18_v1"),
        ("Resnet18_V1", r"Unknown model 'Resnet18_V1' \(did you mean resnet18_v1\?\)"),
        (ModelRef(kind="file", path="/no/such.py"), "Unknown model '/no/such.py'"),
    ],
)
def test_the_zoo_workflow_refuses_what_names_no_zoo_model_in_one_line(name, bad, says):
    _one_line(lambda: ZOO_CALLS[name](bad), says)


@pytest.mark.parametrize("name", ZOO_CALLS)
def test_a_directory_given_as_the_model_is_said_to_be_one(name, tmp_path):
    line = _one_line(lambda: ZOO_CALLS[name](str(tmp_path)), "is a directory, not a model")
    assert ".onnx" in line and "demo" in line and "ssd_512" not in line  # what to pass, not the whole zoo


@pytest.mark.parametrize("name", ["zoo_report", "zoo_pick"])
def test_a_say_that_is_not_a_function_and_an_unknown_backend_are_refused_up_front(name):
    _one_line(lambda: ZOO_CALLS[name]("resnet18_v1", say="x"), "say must be a function.*got str")
    _one_line(lambda: ZOO_CALLS[name]("resnet18_v1", backend=5), r"A backend is named by a string, got int \(5\)")


def test_a_plain_zoo_name_is_what_a_model_ref_of_it_is():
    assert zoo_ref("resnet18_v1") == ModelRef(kind="zoo", name="resnet18_v1")
    assert zoo_ref("ssd") == workflow.SSD
    assert workflow.import_summary("resnet18_v1")["model"] == "resnet18_v1"


def test_model_workbench_shows_the_name_typed_not_a_repr():
    _one_line(lambda: model_workbench(ModelRef(kind="file", path="/no/such.py")), "Unknown model '/no/such.py'")
    _one_line(lambda: model_workbench(""), "name is empty")  # not the SSD, silently


@pytest.mark.slow  # over 10 s: `make test` and `make test-slow` run it, not test-fast
def test_a_script_without_a_main_guard_is_told_to_add_one(tmp_path):
    script = tmp_path / "pick.py"
    script.write_text(
        textwrap.dedent(
            """
            from byoc_workbench import workflow
            from byoc_workbench.core.errors import WorkbenchError

            try:
                workflow.zoo_pick("resnet18_v1")
            except WorkbenchError as err:
                print(err)
            """
        )
    )
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = [ln for ln in done.stdout.splitlines() if ln.startswith("error:")]  # the parent's, once
    assert 'under if __name__ == "__main__":' in line


@pytest.mark.parametrize(
    ("bad", "fix"),
    [
        (None, "pass a Relax IRModule"),
        ("mod", "pass a Relax IRModule"),
        (demo.demo_module()["main"], r"wrap it: tvm.IRModule\(\{'main': f\}\)"),
    ],
    ids=["None", "str", "Function"],
)
def test_what_takes_a_module_refuses_another_thing_in_one_line(bad, fix):
    _one_line(lambda: execute.run(bad, demo.demo_inputs()), f"run takes a tvm.IRModule.*{fix}")
    _one_line(lambda: devices.propose(bad), f"propose takes a tvm.IRModule.*{fix}")
    assert isinstance(tvm.IRModule({"main": demo.demo_module()["main"]}), tvm.IRModule)  # the fix works as written


@pytest.mark.parametrize("bad", ["wb", None, demo.demo_module()])
def test_byom_run_refuses_what_is_not_a_workbench_in_one_line(bad):
    _one_line(lambda: byom.run(bad), "Expected a Workbench holding your model")


def test_execute_run_refuses_a_vm_that_is_not_one(demo_mod):
    _one_line(lambda: execute.run(demo_mod, demo.demo_inputs(), vm="x"), "vm must be a relax.VirtualMachine, got str")


@pytest.mark.slow  # over 10 s: `make test` and `make test-slow` run it, not test-fast
def test_byom_example_without_a_writable_cache_goes_to_one_temporary_folder_per_user(tmp_path):
    """Notebook 05's first cell: a cache that is a file warns once and writes the example elsewhere: a folder of
    the system's temporary one named by the user and the example, which a later session (or one a SIGTERM
    stopped, which no exit hook outlives) reuses instead of adding 46 MB each time (round 8)."""
    (tmp_path / "cache").write_text("not a folder")
    env = {**os.environ, "BYOC_WORKBENCH_CACHE": str(tmp_path / "cache"), "TMPDIR": str(tmp_path)}
    script = (
        "from byoc_workbench.measure.bench import byom; p = byom.example(size=32).onnx_path; print(p.stat().st_size, p)"
    )
    paths = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        size, path = done.stdout.split()
        assert int(size) > 0 and Path(path).parent == tmp_path / f"byoc-byom-{os.getuid()}-32x32-seed0"
        assert [ln.split(";")[0] for ln in done.stderr.splitlines() if "cannot write" in ln] == [
            f"cannot write the example to {tmp_path}/cache/examples/32x32-seed0 (Not a directory)"
        ]
        paths.append(path)
    assert paths[0] == paths[1] and len([p for p in tmp_path.iterdir() if p.name.startswith("byoc-byom-")]) == 1


def test_byom_example_never_writes_over_your_file_in_its_directory(tmp_path):
    for name in ("resnet18.onnx", "resnet18_v1.onnx"):  # with torch, and without it
        (tmp_path / name).write_text("my own model")
    with pytest.raises(WorkbenchError, match="that the workbench did not write"):
        byom.example(size=32, directory=tmp_path)
    assert {p.read_text() for p in tmp_path.glob("*.onnx")} == {"my own model"}


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        ({"size": 0}, "size must be a whole number of pixels, at least 32.*got int \\(0\\)"),
        ({"size": 31}, "at least 32"),
        ({"size": "96"}, "got str \\('96'\\)"),
        ({"size": 96.0}, "got float \\(96.0\\)"),
        ({"size": True}, "got bool"),
        ({"seed": -1}, "The seed must be a whole number"),
        ({"seed": "0"}, "The seed must be a whole number"),
        ({"size": 32, "directory": "/proc/x"}, "Cannot write to /proc/x.*Fix: pass directory= a directory you can"),
    ],
    ids=["0", "31", "str", "float", "bool", "seed-1", "seed-str", "proc"],
)
def test_byom_example_refuses_a_bad_size_seed_or_folder_in_one_line_and_leaves_no_folder(
    kw, says, tmp_path, monkeypatch
):
    monkeypatch.setenv("BYOC_WORKBENCH_CACHE", str(tmp_path))
    _one_line(lambda: byom.example(**kw), says)
    assert list(tmp_path.iterdir()) == []  # no empty examples/<size>x<size>-seed<seed> folder


def test_the_workflow_refuses_what_is_not_an_imported_model_or_a_module_in_one_line(demo_mod):
    _one_line(lambda: workflow.model_workbench(imported="x"), "imported must be what zoo.import_model gave, got str")
    _one_line(lambda: workflow.offload(None, "onnxruntime"), "offload takes a tvm.IRModule, got NoneType")
    _one_line(lambda: workflow.offload(demo_mod, "onnxruntime", prune="x"), "prune is True or False; got str")
    # round 8: options went unchecked where nothing was offloaded
    _one_line(lambda: workflow.offload(demo_mod, "onnxruntime", options={"nope": 1}), "takes no option 'nope'")
    _one_line(lambda: byom.run(None, progress="yes"), "progress is True or False; got str")


def test_byom_text_helpers_refuse_what_run_and_from_onnx_did_not_give_in_one_line():
    _one_line(lambda: byom.stages_side_by_side(Workbench(demo.demo_module(), "byoc-target"), None), "got NoneType")
    _one_line(lambda: byom.stages_side_by_side(None, None), "Expected a Workbench holding your model, got NoneType")
    for bad in ({}, None, "run", {"check": 1}, {"check": {"equal": True}}):  # round 8: {"check": 1} was a TypeError
        _one_line(lambda bad=bad: byom.run_text(bad), "run_text takes what byom.run gave")


@pytest.fixture(scope="module")
def offloads_nothing(tmp_path_factory):
    """A workbench on an ONNX file of one Relu, on the teaching target, whose rules match none of it."""
    path = relu_onnx(tmp_path_factory.mktemp("byom") / "relu.onnx")
    return Workbench.from_onnx(path, "byoc-target")


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ("nope", "Unknown backend 'nope'"),
        ("TVM", r"Unknown backend 'TVM' \(did you mean tvm\?\)"),
        ("mxnet", "Unknown backend 'mxnet'"),
        (3, r"A backend is named by a string, got int \(3\)"),
        (None, "A backend is named by a string, got NoneType"),
        (["tvm"], r"A backend is named by a string, got list \(\['tvm'\]\)"),
    ],
)
def test_byom_checks_the_backend_first_though_nothing_is_offloaded(offloads_nothing, bad, says):
    _one_line(lambda: byom.run(offloads_nothing, bad), says)
    if bad is not None:  # None: each target's own codegen
        _one_line(lambda: byom.offloaded(offloads_nothing, bad), says)


@pytest.mark.parametrize(
    ("call", "says"),
    [
        (
            lambda wb: byom.build_run(wb, "tvm", repeat="3"),
            r"repeat must be a whole number, 1 or more, got str \('3'\)",
        ),
        (lambda wb: byom.build_run(wb, "tvm", warmup=-1), "warmup must be a whole number, 0 or more, got int"),
        (lambda wb: byom.build_run(wb, "tvm", bogus=1), "build_run takes no keyword 'bogus'.*tvm_target, progress"),
        (lambda wb: byom.offloaded(wb, "torch", options="bf16"), "options must be a dict.*got str"),
        (lambda wb: byom.offloaded(wb, "onnxruntime", options={"precision": "bf16"}), "applies to backend openvino"),
        (lambda wb: byom.offloaded(wb, "onnxruntime", options={"precision": "f8"}), "only, not to onnxruntime"),
        (lambda wb: byom.offloaded(wb, "torch", options={"precision": "f8"}), "Unknown precision 'f8' for torch"),
        (lambda wb: byom.offloaded(wb, "torch", options={"precison": "bf16"}), r"no option 'precison' \(did you mean"),
        (lambda wb: byom.offloaded(wb, "torch", options={"nope": 1}), "torch takes no option 'nope'"),
        (lambda wb: byom.build_run(wb, "tvm", options={"fp16": True}), "tvm takes no option 'fp16'.*leave options out"),
    ],
    ids=["repeat-str", "warmup", "bogus", "options-str", "ort-bf16", "ort-f8", "torch-f8", "misspelt", "nope", "tvm"],
)
def test_byom_refuses_run_options_and_backend_options_it_would_ignore_in_one_line(offloads_nothing, call, says):
    _one_line(lambda: call(offloads_nothing), says)


def test_byom_takes_the_options_a_backend_runs_with(offloads_nothing):
    assert byom.offloaded(offloads_nothing, "tvm", options={"precision": "f32"})[-1].name == "codegen"
    run = byom.build_run(offloads_nothing, "onnxruntime", options={"threads": 1}, progress=False)
    assert len(run.outputs) == 1 and run.backend == "tvm alone (llvm)"


@pytest.mark.parametrize(
    ("backend", "options", "says"),
    [
        ("onnxruntime", {"spinning": "no"}, r"Option spinning of onnxruntime is True or False; got str \('no'\)"),
        ("onnxruntime", {"fp16": "no"}, "Option fp16 of onnxruntime is True or False; got str"),
        ("torch", {"compile": "no"}, "Option compile of torch is True or False; got str"),
        ("torch", {"graphs": 5}, r"Option graphs of torch is True or False; got int \(5\)"),
        ("onnxruntime", {"threads": "4"}, r"threads of onnxruntime is a whole number from 1 to 1024, got str \('4'\)"),
        ("onnxruntime", {"threads": 1.5}, "a whole number from 1 to 1024, got float"),
        ("onnxruntime", {"threads": 2**40}, "a whole number from 1 to 1024, got int"),
        ("onnxruntime", {"threads": -1}, "a whole number from 1 to 1024, got int"),
        ("onnxruntime", {"threads": True}, "a whole number from 1 to 1024, got bool"),
        ("auto", {"threads": 0}, "Option threads of auto is a whole number"),
        ("openvino", {"threads": "2"}, "Option threads of openvino is a whole number"),
        ("openvino", {"fp16": True}, "Backend openvino takes no option 'fp16'.*pass only: precision, threads"),
        ("openvino", {"precision": ["f16"]}, r"Unknown precision \['f16'\] for openvino"),
    ],
)
def test_every_backend_option_is_checked_by_its_declared_type(offloads_nothing, backend, options, says):
    """Round 9: "no" switched spinning, compile and fp16 on; a thread count of "4", 1.5 or 2**40 was a TypeError."""
    _one_line(lambda: byom.build_run(offloads_nothing, backend, options=options), says)


def test_onnx_runtimes_fp16_is_in_its_label_and_its_precision_refusal_claims_no_f32(tmp_path):
    """Round 9: fp16=True ran half precision labelled "onnxruntime (CPU)", and precision= was refused as
    "onnxruntime runs in f32"."""
    wb = Workbench.from_onnx(relu_onnx(tmp_path / "relu.onnx"), "onnxruntime")
    half = byom.build_run(wb, "onnxruntime", False, options={"fp16": True, "threads": None, "spinning": False})
    assert half.backend.startswith("onnxruntime (CPU, fp16) + tvm") or "(CUDA, fp16)" in half.backend
    plain = byom.build_run(wb, "onnxruntime", False, options={"threads": np.int64(1)}).backend  # round 10: refused
    assert plain.startswith("onnxruntime (") and "fp16" not in plain
    line = _one_line(lambda: byom.build_run(wb, "onnxruntime", options={"fp16": True, "precision": "f16"}), "f16")
    assert "applies to backend openvino or torch only, not to onnxruntime" in line and "f32" not in line


@pytest.mark.parametrize(
    ("keyword", "value", "says"),
    [
        ("max_seconds", "x", r"max_seconds is a number of seconds above 0, got str \('x'\)"),
        ("max_seconds", -1, "max_seconds is a number of seconds above 0, got int"),
        ("max_seconds", float("nan"), "max_seconds is a number of seconds above 0, got float"),
        ("max_seconds", True, "max_seconds is a number of seconds above 0, got bool"),
        ("keep", "yes", "keep is True or False; got str"),
        ("keep", 5, "keep is True or False; got int"),
        ("progress", "x", "progress is True or False; got str"),
    ],
)
def test_build_run_checks_its_run_keywords_in_one_line_without_cli_flags(offloads_nothing, keyword, value, says):
    """Round 9: max_seconds="x" was a TypeError, -1 said "0 more runs ... over the limit of -1 s (--max-seconds)",
    and keep="yes", keep=5 and progress="x" were taken."""
    line = _one_line(lambda: byom.build_run(offloads_nothing, "tvm", **{keyword: value}), says)
    assert "--" not in line


@pytest.mark.parametrize("bad", [None, "x", demo.demo_module()])
def test_from_model_refuses_what_is_not_an_imported_model_in_one_line(bad):
    """Round 9: Workbench.from_model(None) and ("x") were AttributeErrors."""
    _one_line(lambda: Workbench.from_model(bad), f"from_model takes an imported model .*got {type(bad).__name__}")


def test_load_model_file_of_too_long_a_name_is_one_line():
    """Round 13's B-N6: a 5000-character name was an OSError traceback (ENAMETOOLONG) from Path.is_file."""
    from byoc_workbench.subjects import load_model_file

    line = _one_line(lambda: load_model_file("m" * 5000 + ".py"), r"cannot be read \(File name too long\)")
    assert line.startswith("error: Model file mmm") and line.endswith("Fix: pass a shorter path.") and len(line) < 200
