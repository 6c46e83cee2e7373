"""The widget's "time" view: the codegen stage's build measured and shaded, following rule toggles."""

from byoc_workbench.models import demo
from byoc_workbench.widgets import workbench_widget


def test_time_view_measures_the_codegen_build_and_follows_a_toggle():
    w = workbench_widget(inputs=demo.demo_inputs())
    assert not w.time_button.disabled
    plain = w.graph.svg
    assert w.set_time(True), w.status.value
    assert w.stage == "codegen"
    assert "measured" in w.graph.svg and w.graph.svg != plain
    assert w.view.notes[0].startswith("measured: entries sum")
    first = w._measured[1]
    assert first.entries and first.end_to_end_s > 0
    assert w.set_rule("byoc-target.reshape", False), w.status.value
    assert w._measured[1] is not first  # a new rule set is a new build, measured again
    assert "measured" in w.graph.svg
    assert w.set_time(False)
    assert "measured" not in w.graph.svg


def test_without_inputs_the_time_view_cannot_be_switched_on():
    w = workbench_widget()
    assert w.time_button.disabled
    assert "inputs=" in w.time_button.tooltip
