"""Careless input to the Python API: each is the right behaviour or one line, never a traceback or a
silent wrong result (a rule switched by a truthy word, an answer taken for a blank)."""

import numpy as np
import pytest

from byoc_workbench import exercises
from byoc_workbench.core.errors import WorkbenchError
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
