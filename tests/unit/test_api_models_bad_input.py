"""What a careless caller passes to the Python API's model functions is one line, never a traceback:
the zoo workflow (which takes a ModelRef or a plain name), ModelRef.parse, execute.run, byom.run and
devices.propose (issue 47)."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tvm

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
    _one_line(lambda: ZOO_CALLS[name]("resnet18_v1", backend=5), "Unknown backend '5'")


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
def test_byom_example_without_a_writable_cache_goes_to_a_temporary_folder_removed_at_exit(tmp_path):
    """Notebook 05's first cell: a cache that is a file warns once and writes the example elsewhere, for the
    session only: the folder is gone when the process exits."""
    (tmp_path / "cache").write_text("not a folder")
    env = {**os.environ, "BYOC_WORKBENCH_CACHE": str(tmp_path / "cache"), "TMPDIR": str(tmp_path)}
    script = (
        "from byoc_workbench.measure.bench import byom; p = byom.example(size=32).onnx_path; print(p.stat().st_size, p)"
    )
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    size, path = done.stdout.split()
    assert int(size) > 0 and Path(path).parent.parent == tmp_path and Path(path).parent.name.startswith("byoc-byom-")
    assert [ln.split(";")[0] for ln in done.stderr.splitlines() if "cannot write" in ln] == [
        f"cannot write the example to {tmp_path}/cache/examples/32x32-seed0 (Not a directory)"
    ]
    assert not Path(path).parent.exists()  # the temporary folder went with the process


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
        ({"size": 32, "directory": "/proc/x"}, "Cannot write the example to /proc/x .*Fix: pass directory= a folder"),
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
    _one_line(lambda: byom.run(None, progress="yes"), "progress is True or False; got str")


def test_byom_text_helpers_refuse_what_run_and_from_onnx_did_not_give_in_one_line():
    _one_line(lambda: byom.stages_side_by_side(Workbench(demo.demo_module(), "byoc-target"), None), "got NoneType")
    _one_line(lambda: byom.stages_side_by_side(None, None), "Expected a Workbench holding your model, got NoneType")
    for bad in ({}, None, "run"):
        _one_line(lambda bad=bad: byom.run_text(bad), "run_text takes what byom.run gave")
