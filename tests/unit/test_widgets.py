"""The widgets without a browser: the pure HTML helpers, then the widget object in-process."""

import dataclasses
import html

import pytest

from byoc_workbench import stages
from byoc_workbench.errors import WorkbenchError
from byoc_workbench.flow.rules import get_target
from byoc_workbench.models.demo import demo_module
from byoc_workbench.session import Workbench
from byoc_workbench.widgets import (
    GraphView,
    details_html,
    expand_key,
    generated_html,
    lines_html,
    match_text,
    stage_summary,
    status_line,
    subgraph_table_html,
    svg_body,
    toggled,
    workbench_widget,
)
from byoc_workbench.widgets.html import capped, claimed_html, op_counts, ops_text, rule_label_html, subgraphs_tab_html
from byoc_workbench.widgets.rule_panel import FAMILIES, op_family, rule_family, rule_groups, shown_rules
from byoc_workbench.widgets.workbench import STAGE_HELP

RESHAPE = "byoc-target.reshape"


@pytest.fixture(scope="module")
def partition_view():
    return Workbench(demo_module(), get_target("byoc-target")).view("partition")


@pytest.fixture()
def widget():
    return workbench_widget()


# --- pure helpers ----------------------------------------------------------------


def test_subgraph_table_lists_each_subgraph_and_its_ops(partition_view):
    table = subgraph_table_html(partition_view.subgraphs)
    assert table.count("<tr data-subgraph=") == 3
    for name in ("byoc_target_0", "byoc_target_1", "byoc_target_2"):
        assert f'data-subgraph="{name}"' in table
    assert "reshape" in table and "nn.conv2d" in table


def test_subgraph_table_empty_says_so():
    assert "No subgraphs" in subgraph_table_html([])
    assert "<table" not in subgraph_table_html([])


def test_subgraph_table_escapes_html():
    table = subgraph_table_html([{"name": "<b>x</b>", "target": "t", "op_count": 1, "ops": ["relax.add"]}])
    assert "<b>x</b>" not in table and "&lt;b&gt;x&lt;/b&gt;" in table


@pytest.mark.parametrize(
    ("enabled", "matches", "expected"),
    [
        ({RESHAPE}, {RESHAPE: 1}, "1 match"),
        ({RESHAPE}, {RESHAPE: 2}, "2 matches"),
        ({RESHAPE}, {RESHAPE: 0}, "matched nothing"),
        (set(), {}, "off"),
    ],
)
def test_match_text(enabled, matches, expected):
    assert match_text(RESHAPE, enabled, matches) == expected


def test_status_line_is_one_line_for_any_error():
    assert status_line(WorkbenchError("Bad rule.", "use another.")) == "error: Bad rule. Fix: use another."
    line = status_line(RuntimeError("first line\n  second line\nTraceback ..."))
    assert line == "RuntimeError: first line"
    assert "\n" not in status_line(ValueError("x" * 1000)) and len(status_line(ValueError("x" * 1000))) <= 300


def test_details_names_op_and_why_unclaimed():
    view = Workbench(demo_module(), get_target("byoc-target")).with_rule(RESHAPE, False).view("partition")
    nid = next(k for k, n in view.nodes.items() if n["op"] == "relax.reshape")
    text = details_html(nid, view.nodes[nid])
    assert "relax.reshape" in text
    assert "not claimed" in text and "switched off" in text
    assert "float32[1, 56, 56, 32]" in text


def test_details_names_claiming_rule():
    view = Workbench(demo_module(), get_target("byoc-target")).view("annotate")
    nid = next(
        k for k, n in view.nodes.items() if n["kind"] == "composite" and n["op"] == "byoc-target.conv2d_bias_relu"
    )
    text = details_html(nid, view.nodes[nid])
    assert "claimed by" in text and "byoc-target.conv2d_bias_relu" in text
    assert "nn.conv2d, expand_dims, add, nn.relu" in text


def test_a_host_ops_details_name_the_other_targets_that_could_take_it():
    """Clicking the loop's ``less``, which byoc-target leaves to the host: the ONNX runtimes' own targets
    name it. A subgraph's node says nothing of other targets."""
    w = workbench_widget()
    host = next(k for k, d in w.view.nodes.items() if d.get("op") == "relax.less")
    w.graph.selected = host
    assert "other targets" in w.details.value and "onnxruntime, openvino, torch could take it" in w.details.value
    offloaded = next(k for k, d in w.view.nodes.items() if d.get("target") == "byoc-target")
    w.graph.selected = offloaded
    assert "byoc-target" in w.details.value and "other targets" not in w.details.value


def test_details_without_selection_or_unknown_node():
    assert "Click a node" in details_html("", None)
    assert "not in this diagram" in details_html("legend", None)


def test_lines_and_generated_html(partition_view):
    assert lines_html([], "Nothing.", "x").count("Nothing.") == 1
    diff = lines_html(partition_view.changes, "Nothing.", "byoc-diff")
    assert diff.count("<li>") == len(partition_view.changes) > 0
    assert "Choose the codegen stage" in generated_html({}, "partition")
    codegen = Workbench(demo_module(), get_target("byoc-target")).view("codegen")
    html = generated_html(codegen.generated, "codegen")
    assert "def byoc_target_1" in html and "kernels.conv2d" in html


def test_stage_summary_names_subgraphs_and_notes():
    wb = Workbench(demo_module(), get_target("byoc-target"))
    assert stage_summary(wb.view("partition")).startswith("partition: 3 subgraphs (byoc_target_0: add;")
    prune = " ".join(stage_summary(wb.view("prune")).split())
    assert "2 subgraphs" in prune and "byoc_target_0 returned to host" in prune


def test_svg_body_strips_prolog(partition_view):
    body = svg_body(partition_view.svg)
    assert body.startswith("<svg") and "<?xml" not in body and "DOCTYPE" not in body


def test_expand_key_and_toggled(partition_view):
    sub = next(n for n in partition_view.nodes.values() if n["kind"] == "subgraph")
    assert expand_key(sub) == sub["id"]  # one call opens, not every call of its function
    assert expand_key(next(n for n in partition_view.nodes.values() if n["kind"] == "op")) is None
    assert toggled(toggled(frozenset(), "a"), "a") == frozenset()
    assert toggled(frozenset({"b"}), "a") == {"a", "b"}


def test_graph_view_ships_its_module():
    assert "export default" in GraphView._esm and "selected" in GraphView._esm
    assert ".byoc-graph" in GraphView._css


# --- large targets (issue 8): families, filter, folded mismatches, capped op lists ----------

# The op mix of the SSD's one TensorRT subgraph after pruning: 505 ops, 14 kinds.
SSD_MIX = {"add": 133, "reshape": 77, "nn.conv2d": 73, "multiply": 71, "nn.relu": 57, "expand_dims": 32}
SSD_MIX |= {"strided_slice": 16, "permute_dims": 12, "subtract": 10, "sqrt": 8, "divide": 8, "concat": 4, "exp": 2}
SSD_MIX |= {"nn.max_pool2d": 1, "nn.softmax": 1}
BIG_OPS = [f"relax.{op}" for op, n in SSD_MIX.items() for _ in range(n)]


def test_capped_and_op_counts():
    assert capped("abc", 3) == "a, b, c"
    assert capped(range(500), 3) == "0, 1, 2 … and 497 more"
    assert (
        capped("abcd", 3, "note", sep="; ", where="(see the Notes tab)")
        == "a; b; c … and 1 more note (see the Notes tab)"
    )
    assert op_counts(["relax.add", "relax.nn.relu", "relax.add"]) == "add ×2, nn.relu"
    assert op_counts({"relax.add": 2, "relax.exp": 5}) == "exp ×5, add ×2"
    assert op_counts(BIG_OPS, 3) == "add ×133, reshape ×77, nn.conv2d ×73 … and 12 more kinds"
    assert ops_text(["relax.nn.conv2d", "relax.add"]) == "nn.conv2d, add"  # a few ops keep their order
    assert ops_text(BIG_OPS).startswith(f"{len(BIG_OPS)} ops: add ×133, reshape ×77,")


def test_rule_families_group_tensorrt_and_leave_the_demo_one_group():
    trt = get_target("tensorrt").rules
    groups = dict((t, [r.name for r in rs]) for t, rs in rule_groups(trt))
    assert list(groups) == [f for f in FAMILIES if f != "other"]
    assert sum(len(v) for v in groups.values()) == len(trt) == 52
    assert groups["conv / matmul"] == ["nn.batch_matmul", "nn.conv3d_transpose", "nn.conv2d_transpose", "nn.conv3d",
                                       "nn.conv2d", "nn.conv1d"]  # fmt: skip
    assert groups["reduce"] == ["mean", "min", "max", "prod", "sum"]
    assert {"transpose", "concatenate", "reshape", "strided_slice_2"} <= set(groups["shape / data movement"])
    demo = get_target("byoc-target").rules
    assert [(t, len(rs)) for t, rs in rule_groups(demo)] == [("target byoc-target", 4)]
    assert rule_family(demo[0]) == "conv / matmul"  # conv2d + bias add + relu joins its heaviest op's family
    assert op_family("relax.nn.softmax") == "activation" and op_family("relax.vision.nms") == "other"


def test_shown_rules_filter_and_fold():
    trt = get_target("tensorrt").rules
    names = {r.qualified for r in trt}
    enabled = names - {"tensorrt.sin"}
    matches = {"tensorrt.nn.conv2d": 73, "tensorrt.add": 134}
    folded = shown_rules(trt, enabled, matches, show_unmatched=False)
    assert folded == {"tensorrt.nn.conv2d", "tensorrt.add", "tensorrt.sin"}  # an off rule stays in sight
    assert shown_rules(trt, enabled, matches) == names
    conv = shown_rules(trt, enabled, matches, " Conv ", show_unmatched=False)  # a filter finds folded rules too
    assert conv == {r.qualified for r in trt if "conv" in r.name or "matmul" in r.name}
    assert shown_rules(trt, enabled, matches, "pool") == {
        r.qualified for r in trt if "pool" in r.name or "norm" in r.name
    }


def test_a_rule_that_matched_nothing_is_grey_not_red():
    rule = get_target("tensorrt").rules[0]
    nothing = rule_label_html(rule, {rule.qualified}, {}, doc=False)
    assert "matched nothing" in nothing and "#c92a2a" not in nothing and "upstream" not in nothing
    assert "bold" in rule_label_html(rule, {rule.qualified}, {rule.qualified: 3})


def test_summary_caps_a_big_subgraph_and_the_table_keeps_every_op(partition_view):
    row = {"name": "tensorrt_0", "target": "tensorrt", "op_count": len(BIG_OPS), "ops": BIG_OPS}
    view = dataclasses.replace(
        partition_view,
        stage="prune",
        subgraphs=[row],
        changes=[],
        notes=[f"rule r{i} matched nothing" for i in range(38)],
    )
    line = " ".join(stage_summary(view).split())  # lines broken to fit the page, joined again as HTML does
    assert line.startswith("prune: 1 subgraph (tensorrt_0: 505 ops: add ×133, reshape ×77, nn.conv2d ×73,")
    assert "… and 9 more kinds" in line and "… and 35 more notes" in line
    assert len(line) < 300, len(line)
    table = subgraph_table_html([row])
    summary, full = table.split("</summary>")
    assert "add ×133, reshape ×77, nn.conv2d ×73" in summary and "<details" in summary  # counts, not a wall
    assert full.count("nn.conv2d") == 73, "the whole list in order, one click away"
    small = subgraph_table_html([{**row, "op_count": 2, "ops": ["relax.add", "relax.nn.relu"]}])
    assert "add, nn.relu" in small and "<details" not in small


def test_details_summarise_a_big_subgraph_by_op_counts():
    details = {"id": "main/lv423_outs", "kind": "subgraph", "op": "tensorrt_0", "target": "tensorrt",
               "variables": ["lv423_outs"], "ops_inside": BIG_OPS}  # fmt: skip
    text = details_html("main/lv423_outs", details)
    assert "505 ops: add ×133, reshape ×77, nn.conv2d ×73" in text and "nn.softmax" in text
    assert len(text) < 1500 and "main/lv423_outs" not in text and "lv423_outs" in text


@pytest.mark.parametrize("stage", stages.STAGES)
def test_details_never_show_a_node_id(stage):
    wb = Workbench(demo_module(), get_target("byoc-target"))
    for collapse in (False, True):
        view = wb.view(stage, collapse=collapse, svg=False)
        for nid, node in view.nodes.items():
            text = details_html(nid, node)
            assert nid not in text and f"({node['kind']})" not in text, (nid, text)
    assert "main/lv9" not in details_html("main/lv9", None)


def test_annotate_subgraphs_tab_says_what_each_target_claimed():
    wb = Workbench(demo_module(), get_target("byoc-target"))
    view = wb.view("annotate", svg=False)
    assert view.claimed == {"byoc-target": {"relax.add": 3, "relax.nn.conv2d": 2, "relax.expand_dims": 2,
                                            "relax.nn.relu": 2, "relax.reshape": 1}}  # fmt: skip
    tab = subgraphs_tab_html(view)
    assert "everything runs on the host" not in tab
    assert 'data-target="byoc-target"' in tab and ">10<" in tab and "add ×3, nn.conv2d ×2" in tab
    assert stage_summary(view).startswith("annotate: no subgraphs yet; byoc-target has claimed 10 ops (add ×3,")
    assert "everything runs on the host" in claimed_html({})
    assert subgraphs_tab_html(wb.view("partition", svg=False)).count("<tr data-subgraph=") == 3


# --- the widget, in-process ---------------------------------------------------------


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
    assert panel.compact and matched == {"tensorrt.nn.conv2d", "tensorrt.nn.relu", "tensorrt.add",
                                         "tensorrt.reshape", "tensorrt.expand_dims"}  # fmt: skip
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
