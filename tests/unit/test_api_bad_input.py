"""Careless input to the Python API: each is the right behaviour or one line, never a traceback or a
silent wrong result (a rule switched by a truthy word, an answer taken for a blank)."""

from pathlib import Path

import numpy as np
import pytest

from byoc_workbench import cli, exercises, exercises_codegen, subjects, workflow
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.frontends import gluon
from byoc_workbench.models import demo
from byoc_workbench.session import Workbench

RESHAPE, ADD = "byoc-target.reshape", "byoc-target.add"
ALL = {"byoc-target.conv2d_bias_relu", "byoc-target.conv2d_relu", RESHAPE, ADD}


@pytest.fixture(scope="module")
def wb():
    return Workbench(demo.demo_module(), "byoc-target")


def _one_line(call, *says) -> str:
    with pytest.raises(WorkbenchError) as err:
        call()
    text = str(err.value)
    assert "\n" not in text and text.startswith("error: ") and "Fix: " in text, text
    for s in says:
        assert s in text, text
    return text


@pytest.mark.parametrize("on", ["off", "False", "", 0, 1, None, 1.0])
def test_with_rule_takes_only_true_or_false(wb, on):
    off = wb.with_rule(RESHAPE, False)
    _one_line(lambda: off.with_rule(RESHAPE, on), repr(on))


def test_with_rule_takes_numpy_bools_and_a_name_with_spaces_around_it(wb):
    assert RESHAPE not in wb.with_rule(f" {RESHAPE} ", False).enabled
    assert RESHAPE not in wb.with_rule(RESHAPE, np.False_).enabled
    assert wb.with_rule(RESHAPE, False).with_rule(f"{RESHAPE}\t", np.True_).enabled == ALL


@pytest.mark.parametrize("name", [None, 5, "", "  ", [RESHAPE], "byoc-target.nope"])
def test_with_rule_refuses_what_names_no_rule(wb, name):
    _one_line(lambda: wb.with_rule(name, False))


def test_rule_off_of_no_rule_is_one_line(wb):
    _one_line(lambda: exercises.rule_off(wb, None), "None")


def test_enabled_as_a_mapping_switches_the_rules_it_names():
    mod = demo.demo_module()
    assert Workbench(mod, "byoc-target", enabled={ADD: False}).enabled == ALL - {ADD}
    assert Workbench(mod, "byoc-target", enabled={ADD: False, RESHAPE: np.True_}).enabled == ALL - {ADD}
    assert Workbench(mod, "byoc-target", enabled=ADD).enabled == {ADD}  # the --rules form
    _one_line(lambda: Workbench(mod, "byoc-target", enabled={ADD: "off"}), "'off'")
    _one_line(lambda: Workbench(mod, "byoc-target", enabled={"byoc-target.nope": False}), "byoc-target.nope")
    for bad in ([None], [ADD, None], 5, {None: True}):
        _one_line(lambda bad=bad: Workbench(mod, "byoc-target", enabled=bad))


def test_a_one_argument_prune_answer_is_judged_not_called_blank():
    fb = exercises.check_prune_exercise(lambda ops: None)
    assert len(fb.wrong) == 1 and fb.wrong[0].endswith(
        "<lambda> cannot take (name, ops): give it the two parameters, as in def rule(name, ops)"
    ), repr(fb)
    fb = exercises.check_prune_exercise(lambda name, ops: None)  # keeps everything: an answer, a wrong one
    assert exercises._NOT_ANSWERED not in fb.wrong and "should be pruned" in " ".join(fb.wrong), repr(fb)

    def answered(name, ops):
        return None

    assert exercises._NOT_ANSWERED not in exercises.check_prune_exercise(answered).wrong

    def blank(name, ops):
        """Still to write."""
        ...

    def passed(name, ops):
        pass

    for unanswered in (blank, passed, ..., None):
        assert exercises.check_prune_exercise(unanswered).wrong == [exercises._NOT_ANSWERED]


def test_view_draws_by_true_or_false_only(wb):
    _one_line(lambda: wb.view("partition", svg="no"), "svg is True or False", "'no'")
    assert wb.view("partition", svg=False).svg == ""


def test_rule_off_of_no_workbench_and_feedback_of_no_exercise_are_one_line(wb):
    _one_line(lambda: exercises.rule_off(None, ADD), "rule_off takes a Workbench, got NoneType")
    known = ", ".join(map(str, sorted(exercises.EXERCISES)))
    for bad in (99, True, "1", [1]):
        _one_line(lambda bad=bad: exercises.feedback(bad), "There is no exercise", f"pass one of: {known}")
    assert exercises.feedback(1).number == 1


# --- careless-user round 8 -----------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/tmp/a\x00b.onnx", Path("/tmp/x\x00.onnx")])
def test_a_path_with_a_nul_is_one_line(path):
    """It was ``ValueError: stat: embedded null character in path``."""
    _one_line(lambda: Workbench.from_onnx(path), "NUL character")


def test_a_registry_that_is_not_one_is_one_line():
    """It was ``AttributeError: 'int' object has no attribute 'targets'``."""
    _one_line(lambda: Workbench(demo.demo_module(), "byoc-target", registry=5), "registry must be a Registry")


def test_the_workflow_refuses_what_is_not_its_argument_in_one_line():
    _one_line(lambda: workflow.run("resnet18_v1", loaded="x"), "loaded must be a zoo.LoadedModel, got str")
    for bad in (None, "x"):
        _one_line(lambda bad=bad: workflow.relax_op_counts(bad), "tvm.IRModule", type(bad).__name__)
    assert sum(workflow.relax_op_counts(demo.demo_module()).values()) > 0


@pytest.mark.skipif(gluon.has_mxnet(), reason="mxnet is installed: its absence cannot be seen")
def test_mxnet_outputs_without_mxnet_names_the_extra():
    _one_line(lambda: workflow.mxnet_outputs(None, None), "mxnet is not importable", gluon.INSTALL_FIX)


def test_an_exit_in_an_answer_is_failing_feedback():
    """A student's ``exit()`` escaped the checkers (and would end the kernel's cell) as SystemExit."""
    fb = exercises.check_prune_exercise(lambda name, ops: exit(3))
    assert not fb.passed and fb.wrong[0].endswith("your rule raised SystemExit: 3"), repr(fb)
    fb = exercises_codegen.check_reshape_emitter(lambda *a, **k: exit(2))
    assert not fb.passed and fb.wrong == ["your reshape: it called exit(2)"], repr(fb)
    fb = exercises_codegen.check_emitters(lambda op: exit(), lambda op: exit(1))
    assert fb.wrong == ["relu: it called exit()", "add: it called exit(1)"], repr(fb)


@pytest.mark.parametrize("mark", [["a"], 3, None])
def test_a_mark_that_is_not_text_is_one_line(mark):
    _one_line(lambda: Workbench(demo.demo_module(), "byoc-target", mark=mark), "mark must be text")


def test_control_characters_never_reach_a_title(wb):
    marked = Workbench(demo.demo_module(), "byoc-target", mark="seeded\nweights\u202e\x00")
    assert marked.title("codegen") == "codegen — target byoc-target — seeded weights"
    assert marked.report(model="模型\u202e\x00\tone").text().startswith("Partitioning report: 模型 one for")
    _one_line(lambda: wb.title(None), "Unknown stage None")
    _one_line(lambda: wb.report(model=5), "model must be text")


def test_from_torch_takes_a_name_and_mark_of_text_only():
    torch = pytest.importorskip("torch", reason="needs the [pytorch] extra")
    net, x = torch.nn.Linear(4, 2), torch.randn(1, 4)
    _one_line(lambda: Workbench.from_torch(net, [x], mark=["a"]), "mark must be text", "list")
    _one_line(lambda: Workbench.from_torch(net, [x], name=5), "name must be text", "int")
    wb = Workbench.from_torch(net, [x], name="模型\u202e\x00", mark="seeded")
    assert wb.model.name == "模型" and wb.report().text().startswith("Partitioning report: 模型 for")


@pytest.mark.parametrize(
    ("model", "kinds", "says"),
    [
        ("/dev/null", ("zoo", "onnx", "torch"), ["/dev/null is not a regular file", "Fix: pass a .onnx file."]),
        ("/dev/null", subjects.KINDS, ["not a regular file", "pass a .py file that defines mod, or a .onnx file"]),
        ("{d}/noext", ("zoo", "onnx", "torch"), ["noext is not a .onnx file", "kind is told by its suffix"]),
        ("{d}/noext", subjects.KINDS, ["noext is neither a .py nor a .onnx file", "kind is told by its suffix"]),
    ],
)
def test_a_file_that_names_no_model_says_what_the_command_takes(tmp_path, model, kinds, says):
    """``run /dev/null`` said "/dev/null is a Python file"; ``run noext`` asked for the .py file run refuses."""
    (tmp_path / "noext").write_bytes(b"an ONNX model, but named without .onnx")
    line = _one_line(lambda: subjects.ModelRef.parse(model.format(d=tmp_path), kinds=kinds), *says)
    assert "Python file" not in line and (".py" not in line) == (kinds != subjects.KINDS), line


@pytest.mark.parametrize(
    ("spec", "folder"), [("../m/mymods:small", "../m"), ("/abs/mymods.py:small", "/abs"), (".mymods:small", ".")]
)
def test_torch_takes_a_module_name_not_a_path(spec, folder, capsys):
    """``run --torch ../m/mymods:small`` blamed the user's module for the relative import the path made."""
    assert cli.main(["run", "--torch", spec]) == 2
    line = capsys.readouterr().err.strip()
    assert line == (
        f"error: --torch takes module:factory, the module named as Python imports it, not a path: got {spec!r}. "
        f"Fix: put its directory on PYTHONPATH: PYTHONPATH={folder} byoc-workbench ... --torch mymods:small."
    )


def test_the_compare_map_says_it_is_a_numeric_check_and_what_ran():
    """compare.svg was titled "latency map: codegen stage": a bf16 check looked like an f32 one, and like a timing."""
    pytest.importorskip("torch", reason="needs the [pytorch] extra")
    from byoc_workbench.draw import latency
    from byoc_workbench.measure.bench import builds
    from byoc_workbench.measure.check import numerics

    built, inputs = builds.ready(subjects.ModelRef(kind="demo"), "torch", True, {"precision": "bf16"})
    source = latency.report(built, numerics=numerics.compare(built, inputs)).dot.source
    assert 'label="numeric check vs TVM alone: codegen stage on torch (eager, bf16)"' in source
    assert "latency map" not in source


def test_a_python_file_given_for_a_pytorch_program_is_told_how_to_pass_one():
    """Round 9: ``run odd/small.py`` was told to "pass a GluonCV zoo model, an ONNX file or a PyTorch program",
    the cause again, never how docs/cli.md passes a program (--torch MODULE:FACTORY, its folder on the path)."""
    line = _one_line(
        lambda: subjects.ModelRef.parse("odd/small.py", kinds=("zoo", "onnx", "torch")),
        "odd/small.py is a Python file; this command takes a GluonCV zoo model",
        "Fix: for a PyTorch program: PYTHONPATH=odd byoc-workbench ... --torch small:FACTORY.",
    )
    assert "this command takes" not in line.partition("Fix: ")[2]


@pytest.mark.parametrize(
    ("spec", "fix"),
    [("mymods::small", "mymods:small"), ("mymods:json:loads", "mymods:loads"), ("mymods:", "mymods:FACTORY")],
)
def test_a_torch_spec_whose_factory_is_no_name_is_one_line_whatever_the_extra_colon(spec, fix, capsys):
    """Round 9: ``--torch mymods::small`` and ``mymods:json:loads`` were each told "mymods has no ..." with
    "name a function of mymods", as if the name were one; both name no function, and are said so alike."""
    assert cli.main(["run", "--torch", spec]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: --torch takes module:factory, one colon and a function's name, got {spec!r}. "
        f"Fix: pass e.g. --torch {fix}."
    )
