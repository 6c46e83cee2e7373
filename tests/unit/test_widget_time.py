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


def test_a_target_without_its_own_codegen_times_with_the_backend_this_machine_has():
    """As notebook 02 does for the SSD: the tensorrt target, given inputs, times with offload_choice()'s backend."""
    from byoc_workbench.measure.time import runner

    w = workbench_widget(demo.demo_module(), "tensorrt", inputs=demo.demo_inputs())
    choice = runner.offload_choice().backend
    assert w.workbench.backend == choice
    assert w.set_time(True), w.status.value
    assert w.stage == "codegen" and w.view.stage == "codegen" and w.view.measured
    assert w.summary.value.startswith("<b>codegen:") and "measured" in w.graph.svg
    assert any(f"ran on {choice}" in n for n in w.view.notes), w.view.notes
    assert workbench_widget(inputs=demo.demo_inputs()).workbench.backend is None  # byoc-target: its own codegen


def test_a_failed_switch_leaves_the_stage_bar_and_time_button_on_what_is_shown():
    import pytest

    from byoc_workbench.backends import tensorrt

    if tensorrt.missing() is None:
        pytest.skip("TensorRT runs here, so its codegen stage does not fail")
    w = workbench_widget(demo.demo_module(), "tensorrt", stage="prune", inputs=demo.demo_inputs(), backend="tensorrt")
    assert w.set_time(True) is False and "tensorrt" in w.status.value
    assert (w.stage, w.view.stage, w.time_button.value) == ("prune", "prune", False)
    assert w.set_stage("codegen") is False
    assert (w.stage, w.view.stage) == ("prune", "prune"), "the stage bar shows what the diagram shows"
    assert w.set_stage("merge") and w.view.stage == "merge" and w.status.value == ""


def test_the_details_panel_shows_a_calls_inputs_at_codegen_and_clears_when_the_time_map_redraws():
    w = workbench_widget(inputs=demo.demo_inputs())
    w.set_stage("codegen")
    packed = next(k for k, n in w.view.nodes.items() if n["kind"] == "packed")
    w.select(packed)
    assert "float32[32, 32, 3, 3]" in w.details.value  # its three inputs, not "—"
    assert w.set_time(True), w.status.value
    assert w.graph.selected == "" and "Click a node" in w.details.value
    w.select(packed)
    assert w.set_time(False)
    assert w.graph.selected == "" and "Click a node" in w.details.value
