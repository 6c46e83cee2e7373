"""The graph model and its DOT text: clusters, colours, boundaries, legend."""

import re

from byoc_workbench.draw import graph, render
from byoc_workbench.session import Workbench


def wb(demo_mod, byoc):
    return Workbench(demo_mod, byoc)


def test_merge_stage_draws_a_cluster_per_region(demo_mod, byoc):
    g = wb(demo_mod, byoc).graph("merge")
    regions = [c for c in g.clusters.values() if c.kind == "region"]
    assert [c.label for c in regions] == ["region 0 → byoc-target", "region 1 → byoc-target", "region 2 → byoc-target"]
    dot = render.to_dot(g).source
    assert dot.count("subgraph cluster_region_") == 3


def test_if_branches_are_clusters_and_nodes_have_kinds(demo_mod, byoc):
    g = wb(demo_mod, byoc).graph("source")
    kinds = {c.kind for c in g.clusters.values()}
    assert {"function", "then", "else"} <= kinds
    assert len(g.node_by_kind("if")) == 1
    assert [n.label for n in g.node_by_kind("call")] == ["call while_loop", "call while_loop"]
    assert {n.label for n in g.node_by_kind("input")} >= {"data", "weight", "bias", "iter1", "d1", "w1", "b1"}
    conv = [n for n in g.node_by_kind("op") if n.op == "relax.nn.conv2d"][0]
    assert conv.ty == "float32[1, 32, 56, 56]"
    assert conv.input_types == ["float32[1, 32, 56, 56]", "float32[32, 32, 3, 3]"]
    assert conv.attrs["padding"] == "(1, 1, 1, 1)"


def test_edges_carry_shapes_and_boundaries_are_dashed(demo_mod, byoc):
    g = wb(demo_mod, byoc).graph("annotate")
    crossing = [e for e in g.edges if e.crosses]
    assert crossing, "annotate must show where the target changes"
    for e in crossing:
        assert g.nodes[e.src].target != g.nodes[e.dst].target
    dot = render.to_dot(g).source
    assert "style=dashed" in dot and 'label="float32[1, 32, 56, 56]"' in dot


def test_composites_collapse_and_expand_one_call_at_a_time(demo_mod, byoc):
    w = wb(demo_mod, byoc)
    closed = w.graph("composite")
    calls = closed.node_by_kind("composite")
    assert [n.label for n in calls] == ["byoc-target.conv2d_bias_relu"] * 2
    opened = w.graph("composite", expand=[calls[1].id])
    assert [n.id for n in opened.node_by_kind("composite")] == [calls[0].id]  # the other call stays closed
    inner = [n for n in opened.node_by_kind("op") if n.rule == "byoc-target.conv2d_bias_relu"]
    assert [n.op for n in inner] == ["relax.nn.conv2d", "relax.expand_dims", "relax.add", "relax.nn.relu"]
    assert all(n.id.startswith(calls[1].id + "/") and n.cluster == f"x_{calls[1].id}" for n in inner)
    both = w.graph("composite", expand=[n.id for n in calls])
    assert not both.node_by_kind("composite") and len(both.node_by_kind("op")) == 11


def test_subgraph_nodes_show_ops_and_open(demo_mod, byoc):
    w = wb(demo_mod, byoc)
    sub = w.graph("partition").node_by_kind("subgraph")
    assert [n.op for n in sub] == ["byoc_target_0", "byoc_target_1", "byoc_target_2"]
    assert sub[2].label == "byoc_target_2\nnn.conv2d, expand_dims, add, nn.relu,\nreshape"
    opened = w.graph("partition", expand=[sub[2].id])
    assert any(c.kind == "subgraph" and c.label.startswith("byoc_target_2") for c in opened.clusters.values())


def test_colours_per_target_with_legend():
    assert render.target_color("host") != render.target_color("byoc-target")
    assert render.target_color("mychip") == render.target_color("mychip")  # stable hash colour
    g = graph.Graph()
    g.nodes["a"] = graph.Node("a", "op", 'weird "label"\\', target="mychip")
    dot = render.to_dot(g).source
    assert 'weird \\"label\\"\\\\' in dot
    assert "targets" in dot and "mychip" in dot


def test_long_labels_are_cut():
    assert len(render.escape("x" * 20000)) == render.MAX_LABEL


def test_svg_has_clickable_node_ids(demo_mod, byoc):
    v = wb(demo_mod, byoc).view("partition")
    assert v.svg.lstrip().startswith("<?xml") or "<svg" in v.svg[:500]
    ids = set(re.findall(r'<g id="([^"]+)" class="node[ "]', v.svg))
    assert set(v.nodes) <= ids


def test_calls_between_functions_are_drawn(demo_mod, byoc):
    g = wb(demo_mod, byoc).graph("source")
    calls = [e for e in g.edges if e.kind == "call"]
    # main calls while_loop; the loop's call to itself is left out (it would point back up)
    assert len(calls) == 1 and calls[0].to_cluster == "fn_while_loop"
    assert g.nodes[calls[0].src].cluster == "fn_main"
    assert "lhead=cluster_fn_while_loop" in render.to_dot(g).source
