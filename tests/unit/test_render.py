"""The graph model and its DOT text: clusters, colours, boundaries, legend."""

import re
import typing

import graphviz
import pytest

from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.draw import graph, render, renderers
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


def test_every_kind_drawn_is_one_the_graph_declares(demo_mod, byoc):
    bench = wb(demo_mod, byoc)
    node_kinds, box_kinds, edge_kinds = set(), set(), set()
    for stage in ("source", "composite", "merge", "partition", "prune", "codegen"):
        g = bench.graph(stage)
        node_kinds |= {n.kind for n in g.nodes.values()}
        box_kinds |= {c.kind for c in g.clusters.values()}
        edge_kinds |= {e.kind for e in g.edges}
    assert node_kinds <= set(typing.get_args(graph.NodeKind)) and {"if", "composite", "subgraph"} <= node_kinds
    assert box_kinds <= set(typing.get_args(graph.BoxKind)) and {"then", "region"} <= box_kinds
    assert edge_kinds == set(typing.get_args(graph.EdgeKind))


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


def declared(dot: str) -> list:
    """Node and cluster ids in the order the DOT text declares them."""
    found = re.findall(r'^\s*(?:subgraph )?"?((?:cluster_)?[\w./~-]+)"? [\[{]', dot, flags=re.M)
    return [x for x in found if x not in ("graph", "node", "edge")]


def test_inputs_stay_in_parameter_order_and_then_stays_left_of_else(demo_mod, byoc):
    dot = render.to_dot(wb(demo_mod, byoc).graph("partition")).source
    rows = [block.split("}", 1)[0] for block in dot.split("rank=same")[1:]]
    assert [re.findall(r'"(\w+/\w+)"', row) for row in rows] == [
        ["main/data", "main/weight", "main/bias"],
        ["while_loop/iter1", "while_loop/d1", "while_loop/w1", "while_loop/b1"],
    ]
    assert '"while_loop/d1" -> "while_loop/w1" [style=invis]' in dot
    (line,) = [ln for ln in dot.splitlines() if "ordering=in" in ln]
    assert 'id="while_loop/result"' in line, "the If keeps its branches in order"


def test_nodes_and_clusters_keep_their_order_from_stage_to_stage(demo_mod, byoc):
    w = wb(demo_mod, byoc)
    orders = [declared(render.to_dot(w.graph(s.name)).source) for s in w.stages]
    for a, b in zip(orders, orders[1:]):
        shared = set(a) & set(b)
        assert [x for x in a if x in shared] == [x for x in b if x in shared]
    merge, annotate = w.graph("merge"), w.graph("annotate")
    regions = {c.id for c in merge.clusters.values() if c.kind == "region"}
    layout = {c.id for c in annotate.clusters.values() if c.kind == "layout"}
    assert regions == layout, "annotate is laid out in the regions merge will draw"
    for cid in regions:
        assert {n for n, x in merge.nodes.items() if x.cluster == cid} == {
            n for n, x in annotate.nodes.items() if x.cluster == cid
        }
    assert "style=invis" in render.to_dot(annotate).source and "region 0" not in render.to_dot(annotate).source


@pytest.mark.parametrize("find", renderers.FINDERS, ids=lambda find: find.__name__.strip("_"))
def test_stepping_through_stages_keeps_left_and_right(demo_mod, byoc, find):
    """Laid out by each Graphviz there is, the inputs and the If's branches keep their left-to-right order
    at every stage."""
    import json

    renderer = find() or pytest.skip(f"no {find.__name__.strip('_')} here")
    w = wb(demo_mod, byoc)
    inputs = ["while_loop/iter1", "while_loop/d1", "while_loop/w1", "while_loop/b1"]
    branches = ["cluster_while_loop/result.then", "cluster_while_loop/result.else"]
    for s in w.stages:
        laid = json.loads(renderers.lay_out(w.dot(s.name).source, "json", renderer))
        x = {}
        for o in laid["objects"]:
            if "pos" in o:
                x[o.get("id", o["name"])] = float(o["pos"].split(",")[0])
            elif "bb" in o:
                x0, _, x1, _ = map(float, o["bb"].split(","))
                x[o.get("id", o["name"])] = (x0 + x1) / 2
        assert sorted(inputs, key=x.__getitem__) == inputs, s.name
        assert sorted(branches, key=x.__getitem__) == branches, s.name


def test_write_all_lays_out_in_the_background_what_to_svg_would(demo_mod, byoc, tmp_path):
    """The CLI's files: each SVG is what to_svg gives for its diagram, drawn while the next is laid out;
    a diagram dot cannot lay out names its file."""
    w = wb(demo_mod, byoc)
    dots = [w.dot(s) for s in ("source", "merge", "partition")]
    paths = [tmp_path / f"{k}.svg" for k in range(len(dots))]
    render.write_all(zip(dots, paths))
    for dot, path in zip(dots, paths):
        assert path.read_text() == render.to_svg(dot)
    broken = graphviz.Digraph()
    broken.body.append("a -> {{ b")
    with pytest.raises(RuntimeError, match="bad.svg"):
        render.write_all([(dots[0], tmp_path / "ok.svg"), (broken, tmp_path / "bad.svg")])


def test_the_legend_heads_the_diagram_and_a_called_function_stands_below_its_caller(demo_mod, byoc):
    """A diagram wider than the notebook's column scrolls sideways from its left edge: the legend sits there,
    under the title, and the loop is drawn under main rather than beside it (1431 pt wide before, at partition)."""

    def box(svg, cluster):
        outline = re.search(rf'<g id="cluster_{cluster}" class="cluster">.*?(?:d|points)="([^"]+)"', svg, re.S)
        xs, ys = zip(*(map(float, p.split(",")) for p in re.findall(r"-?[\d.]+,-?[\d.]+", outline.group(1))))
        return min(xs), min(ys), max(xs), max(ys)

    for stage in ("source", "partition", "codegen"):
        svg = wb(demo_mod, byoc).view(stage).svg
        width = float(re.search(r'<svg width="(\d+)pt"', svg).group(1))
        legend_x = float(re.search(r'<text[^>]*x="([\d.]+)"[^>]*>crosses a target boundary</text>', svg).group(1))
        assert legend_x < 0.4 * width, (stage, legend_x, width)
        main, loop = box(svg, "fn_main"), box(svg, "fn_while_loop")
        assert loop[1] > main[3], f"{stage}: the loop is not below main"  # SVG's y grows downwards
        assert width < 1250, (stage, width)


def test_an_id_that_opens_nothing_is_one_line_in_the_api_and_kept_quiet_by_the_widget(demo_mod, byoc):
    bench = wb(demo_mod, byoc)
    with pytest.raises(
        WorkbenchError, match=r"The merge stage has no node 'main/ot' to open \(did you mean main/out\?\)"
    ):
        bench.view("merge", expand=["main/ot"])  # it was drawn closed without a word
    assert bench.graph("merge", expand=["main/ot"], strict=False).nodes == bench.graph("merge").nodes
