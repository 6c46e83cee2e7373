"""The widget object in-process, without a browser: its controls, what they recompute and redraw."""

import html

import pytest

from byoc_workbench import stages
from byoc_workbench.flow.rules import get_target
from byoc_workbench.session import Workbench
from byoc_workbench.widgets import workbench_widget
from byoc_workbench.widgets.rule_panel import rule_family
from byoc_workbench.widgets.workbench import STAGE_HELP

RESHAPE = "byoc-target.reshape"


@pytest.fixture()
def widget():
    return workbench_widget()


def test_widget_starts_on_partition_with_every_rule(widget):
    assert widget.stage == "partition"
    assert set(widget.rule_boxes) == {r.qualified for r in get_target("byoc-target").rules}
    assert all(b.value for b in widget.rule_boxes.values())
    assert widget.graph.svg.startswith("<svg") and 'class="node"' in widget.graph.svg
    assert widget.subgraph_table.value.count("<tr data-subgraph=") == 3
    assert widget.status.value == ""
    assert "matched nothing" in widget.rule_labels["byoc-target.conv2d_relu"].value
    assert "2 matches" in widget.rule_labels["byoc-target.conv2d_bias_relu"].value


def test_unchecking_a_rule_recomputes_and_redraws(widget):
    svg, table = widget.graph.svg, widget.subgraph_table.value
    widget.rule_boxes[RESHAPE].value = False
    assert widget.status.value == ""
    assert RESHAPE not in widget.workbench.enabled
    assert widget.graph.svg != svg
    assert widget.subgraph_table.value != table and "reshape" not in widget.subgraph_table.value
    assert widget.rule_labels[RESHAPE].value.endswith(">off</span>")
    widget.rule_boxes[RESHAPE].value = True
    assert widget.subgraph_table.value == table


def test_prune_checkbox(widget):
    widget.set_stage("prune")
    assert widget.subgraph_table.value.count("<tr data-subgraph=") == 2
    widget.prune_box.value = False
    assert widget.subgraph_table.value.count("<tr data-subgraph=") == 3
    assert widget.workbench.prune_rule is stages.keep_all


def test_stage_selector_redraws_and_shows_generated_code(widget):
    svg = widget.graph.svg
    widget.stage_picker.value = "codegen"
    assert widget.graph.svg != svg
    assert "def byoc_target_2" in widget.generated.value
    assert widget.stage_help.value == f"<i>{html.escape(STAGE_HELP['codegen'])}</i>"


def test_unknown_rule_shows_one_line_and_keeps_state(widget):
    before = widget.graph.svg
    assert widget.set_rule("byoc-target.nope", True) is False
    status = widget.status.value
    assert "Unknown rule byoc-target.nope" in status and "Fix:" in status
    assert status.count("\n") == 0 and "Traceback" not in status
    assert widget.graph.svg == before
    assert widget.set_stage("bogus") is False and "Unknown stage 'bogus'" in widget.status.value.replace("&#x27;", "'")
    widget.set_stage("merge")
    assert widget.status.value == ""


def test_any_exception_becomes_one_line_and_checkbox_reverts(widget, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("kaboom\nwith a second line")

    monkeypatch.setattr(Workbench, "view", boom)
    widget.rule_boxes["byoc-target.add"].value = False
    assert "RuntimeError: kaboom" in widget.status.value and "second line" not in widget.status.value
    assert widget.rule_boxes["byoc-target.add"].value is True
    assert "byoc-target.add" in widget.workbench.enabled


def test_bad_module_or_target_shows_status_not_traceback():
    w = workbench_widget(mod="not a module")
    assert "Expected a tvm.IRModule" in w.status.value and w.graph.svg == ""
    assert w.set_rule(RESHAPE, False) is False
    t = workbench_widget(target="no-such-target")
    assert "Unknown target 'no-such-target'" in t.status.value.replace("&#x27;", "'")
    assert t.rule_boxes == {}


def test_selecting_a_node_fills_details(widget):
    widget.rule_boxes[RESHAPE].value = False
    nid = next(k for k, n in widget.view.nodes.items() if n["op"] == "relax.reshape")
    widget.graph.selected = nid
    assert "relax.reshape" in widget.details.value and "switched off" in widget.details.value
    sub = next(k for k, n in widget.view.nodes.items() if n["kind"] == "subgraph")
    widget.select(sub)
    assert "byoc_target_" in widget.details.value and "ops inside" in widget.details.value
    widget.rule_boxes[RESHAPE].value = True
    # The subgraph node stands for the same variable after the toggle, so it stays selected.
    assert widget.graph.selected == sub and "ops inside" in widget.details.value
    widget.select(nid)  # the host reshape's value is now computed by a subgraph: the same node id
    widget.rule_boxes["byoc-target.add"].value = False
    assert widget.graph.selected == nid and "byoc_target_" in widget.details.value
    widget.set_stage("source")  # a stage where that value is a plain op again
    assert widget.graph.selected == nid and "relax.reshape" in widget.details.value


def test_selection_clears_when_its_node_is_gone(widget):
    widget.set_stage("source")
    nid = next(k for k, n in widget.view.nodes.items() if n["op"] == "relax.nn.conv2d")
    widget.select(nid)
    widget.set_stage("partition")  # the conv2d now sits inside a subgraph, drawn closed
    assert nid not in widget.view.nodes
    assert widget.graph.selected == "" and "Click a node" in widget.details.value


def test_double_click_toggles_expansion(widget):
    sub = next(k for k, n in widget.view.nodes.items() if n["kind"] == "subgraph" and n["op"] == "byoc_target_1")
    ops_before = sum(n["kind"] == "composite" for n in widget.view.nodes.values())
    widget._on_msg(widget.graph, {"event": "toggle", "id": sub}, [])
    assert widget.expand == {sub}
    assert sum(n["kind"] == "composite" for n in widget.view.nodes.values()) == ops_before + 1
    assert f'id="cluster_x_{sub}"' in widget.graph.svg
    assert widget.toggle_expand(f"cluster_x_{sub}") and widget.expand == frozenset()
    assert widget.toggle_expand("main/data") and widget.expand == frozenset()  # an input opens nothing


def test_opening_one_composite_call_leaves_the_other_closed(widget):
    widget.set_stage("composite")
    first, second = [k for k, n in widget.view.nodes.items() if n["kind"] == "composite"]
    assert widget.toggle_expand(second) and widget.expand == {second}
    assert [k for k, n in widget.view.nodes.items() if n["kind"] == "composite"] == [first]
    inner = next(k for k, n in widget.view.nodes.items() if n["op"] == "relax.nn.conv2d" and n["target"] != "host")
    assert inner.startswith(second + "/")
    assert widget.toggle_expand(inner) and widget.expand == frozenset()  # a node inside closes its call


def test_opened_call_and_selection_survive_a_rule_toggle(widget):
    sub = next(k for k, n in widget.view.nodes.items() if n["kind"] == "subgraph" and n["op"] == "byoc_target_1")
    widget.select(sub)
    widget.rule_boxes["byoc-target.add"].value = False  # byoc_target_1 is now byoc_target_0
    assert widget.view.nodes[sub]["op"] == "byoc_target_0"
    assert widget.graph.selected == sub and "byoc_target_0" in widget.details.value
    widget.toggle_expand(sub)
    widget.rule_boxes["byoc-target.add"].value = True
    assert widget.expand == {sub} and f'id="cluster_x_{sub}"' in widget.graph.svg
    assert widget.view.nodes[sub + "/relu"]["op"] == "byoc-target.conv2d_bias_relu"  # inside byoc_target_1


def test_demo_rule_panel_is_one_group_with_every_rule_in_sight(widget):
    panel = widget.rules_panel
    assert not panel.compact and panel.filter is None and len(panel.groups) == 1
    assert all(row.layout.display != "none" for row in panel.rows.values())
    assert "conv2d, then relu" in widget.rule_labels["byoc-target.conv2d_relu"].value  # small tables keep their docs


@pytest.fixture()
def trt_widget():
    """The demo graph under TensorRT's 52 rules: the rule panel of a large target, without mxnet."""
    return workbench_widget(target="tensorrt")


def _shown(panel) -> set:
    return {q for q, row in panel.rows.items() if row.layout.display != "none"}


def test_large_target_folds_rules_that_matched_nothing(trt_widget):
    panel = trt_widget.rules_panel
    matched = {q for q, n in trt_widget.view.rule_matches.items() if n}
    assert panel.compact and matched == {
        "tensorrt.nn.conv2d",
        "tensorrt.nn.relu",
        "tensorrt.add",
        "tensorrt.reshape",
        "tensorrt.expand_dims",
    }
    assert _shown(panel) == matched
    assert panel.fold.description == "47 rules matched nothing"
    assert "52 rules, 5 matched" in panel.title.value and "upstream" not in trt_widget.rule_labels["tensorrt.add"].value
    hidden = [rule_family(members[0]) for members, g in panel.groups if g.layout.display == "none"]
    assert hidden == ["pool / norm", "reduce"]  # none of their rules matched
    panel.fold.value = True
    assert _shown(panel) == set(panel.rows) and not any(g.layout.display == "none" for _, g in panel.groups)
    panel.fold.value = False
    trt_widget.set_rule("tensorrt.add", False)  # an off rule stays in sight: the user needs it to switch back
    assert "tensorrt.add" in _shown(panel) and "tensorrt.add" not in trt_widget.workbench.enabled


def test_large_target_filter_box(trt_widget):
    panel = trt_widget.rules_panel
    panel.filter.value = "pool"
    assert _shown(panel) == {r.qualified for r in panel.rules if "pool" in r.name or "norm" in r.name}
    assert [g.layout.display for _, g in panel.groups].count(None) == 1
    panel.filter.value = "nothing like this"
    assert _shown(panel) == set()
    panel.filter.value = ""
    assert len(_shown(panel)) == 5


def test_group_all_off_then_on_recomputes_once(trt_widget, monkeypatch):
    panel = trt_widget.rules_panel
    group = dict((members[0].name, (members, box)) for members, box in panel.groups)["nn.softmax"]  # activation
    names = {r.qualified for r in group[0]}
    calls = []
    real = Workbench.view
    monkeypatch.setattr(Workbench, "view", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    off = next(b for b in group[1].children[0].children if "byoc-all-off" in b._dom_classes)
    off.click()
    assert not names & trt_widget.workbench.enabled and len(calls) == 1
    assert not any(trt_widget.rule_boxes[q].value for q in names)
    assert trt_widget.view.rule_matches.get("tensorrt.nn.relu", 0) == 0
    on = next(b for b in group[1].children[0].children if "byoc-all-on" in b._dom_classes)
    on.click()
    assert names <= trt_widget.workbench.enabled and len(calls) == 2
    assert trt_widget.view.rule_matches["tensorrt.nn.relu"] == 2


def test_collapse_all_is_disabled_until_a_call_is_open(widget):
    assert widget.collapse_button.disabled
    sub = next(k for k, n in widget.view.nodes.items() if n["kind"] == "subgraph")
    widget.toggle_expand(sub)
    assert not widget.collapse_button.disabled and "1 opened call" in widget.collapse_button.tooltip
    widget.collapse_button.click()
    assert widget.expand == frozenset() and widget.collapse_button.disabled


def test_tvmscript_tab_prints_when_opened_and_follows_a_toggle(widget):
    """Printing a module takes a second on 6,000 ops: the tab prints it only while it is open."""
    assert widget.script.value == ""  # the Subgraphs tab is open
    widget.tabs.selected_index = widget.tabs.children.index(widget.script)
    assert "def main" in widget.script.value and "byoc_target_0" in widget.script.value
    widget.set_rules([r.qualified for r in get_target("byoc-target").rules], False)
    assert "def main" in widget.script.value and "byoc_target_0" not in widget.script.value
