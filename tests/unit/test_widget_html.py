"""The widgets' pure HTML helpers, without a browser or a widget: what each tab and panel shows."""

import dataclasses

import pytest

from byoc_workbench import stages
from byoc_workbench.core.errors import WorkbenchError
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
from byoc_workbench.widgets.html import capped, claimed_html, ops_line, ops_text, rule_label_html, subgraphs_tab_html
from byoc_workbench.widgets.rule_panel import OP_FAMILIES, op_family, rule_family, rule_groups, shown_rules

RESHAPE = "byoc-target.reshape"


@pytest.fixture(scope="module")
def partition_view():
    return Workbench(demo_module(), get_target("byoc-target")).view("partition")


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
    assert ops_line(["relax.add", "relax.nn.relu", "relax.add"]) == "add ×2, nn.relu"
    assert ops_line({"relax.add": 2, "relax.exp": 5}) == "exp ×5, add ×2"
    assert ops_line(BIG_OPS, 3) == "add ×133, reshape ×77, nn.conv2d ×73 … and 12 more kinds"
    assert ops_text(["relax.nn.conv2d", "relax.add"]) == "nn.conv2d, add"  # a few ops keep their order
    assert ops_text(BIG_OPS).startswith(f"{len(BIG_OPS)} ops: add ×133, reshape ×77,")


def test_rule_families_group_tensorrt_and_leave_the_demo_one_group():
    trt = get_target("tensorrt").rules
    groups = dict((t, [r.name for r in rs]) for t, rs in rule_groups(trt))
    assert list(groups) == [f for f in OP_FAMILIES if f != "other"]
    assert sum(len(v) for v in groups.values()) == len(trt) == 52
    assert groups["conv / matmul"] == [
        "nn.batch_matmul",
        "nn.conv3d_transpose",
        "nn.conv2d_transpose",
        "nn.conv3d",
        "nn.conv2d",
        "nn.conv1d",
    ]
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
    details = {
        "id": "main/lv423_outs",
        "kind": "subgraph",
        "op": "tensorrt_0",
        "target": "tensorrt",
        "variables": ["lv423_outs"],
        "ops_inside": BIG_OPS,
    }
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
    assert view.claimed == {
        "byoc-target": {
            "relax.add": 3,
            "relax.nn.conv2d": 2,
            "relax.expand_dims": 2,
            "relax.nn.relu": 2,
            "relax.reshape": 1,
        }
    }
    tab = subgraphs_tab_html(view)
    assert "everything runs on the host" not in tab
    assert 'data-target="byoc-target"' in tab and ">10<" in tab and "add ×3, nn.conv2d ×2" in tab
    assert stage_summary(view).startswith("annotate: no subgraphs yet; byoc-target has claimed 10 ops (add ×3,")
    assert "everything runs on the host" in claimed_html({})
    assert subgraphs_tab_html(wb.view("partition", svg=False)).count("<tr data-subgraph=") == 3
