"""Gluon block groups from variable names, drawn closed, opened, and wrapped into rows."""

from shared import ranks_with_rows

from byoc_workbench.draw import blocks, folding, graph, render
from byoc_workbench.draw.graph import Edge, Graph, Node


def _bound(var: str, kind: str, label: str, **fields) -> Node:
    """The node a binding ``var`` of ``main`` makes, as the graph builder draws it."""
    return Node(f"main/{var}", kind, label, cluster="fn_main", scope="main", var=var, **fields)


def test_names_read_as_block_paths():
    assert blocks.block_path("ssd0_resnetv10_stage1_conv0_fwd") == (
        "ssd0_",
        "ssd0_resnetv10_",
        "ssd0_resnetv10_stage1_",
        "ssd0_resnetv10_stage1_conv0_",
    )
    # suffixes of the importer (inner bindings), batch-norm folding and partitioning are not blocks
    assert blocks.source_name("ssd0_resnetv10_batchnorm0_fwd__1_scaled") == "ssd0_resnetv10_batchnorm0_fwd"
    assert blocks.source_name("ssd0_concat83__out2_outs~3") == "ssd0_concat83"
    assert blocks.block_path("ssd0_resnetv10_stage4__plus2") == ("ssd0_", "ssd0_resnetv10_", "ssd0_resnetv10_stage4_")
    assert blocks.block_path("ssd0_expand_trans_conv0") == ("ssd0_",)  # a word without an index is no block
    assert blocks.block_path("relu_x") == () and blocks.block_path("lv12") == ()


def ssd_like() -> Graph:
    """A model in the SSD's naming: a backbone of two chained stages, three heads side by side,
    extra layers named by a shared word, a chain of slices, and one MXNet node that became 4 ops."""
    g = Graph()
    names = ["data"]
    for stage in (1, 2):
        for k in range(3):
            names += [f"ssd0_net0_stage{stage}_conv{k}_fwd", f"ssd0_net0_stage{stage}_relu{k}_fwd"]
    names += ["ssd0_expand_conv0", "ssd0_expand_relu0"]
    names += [f"ssd0_convpredictor{k}_conv0_fwd" for k in range(3)]
    names += [f"ssd0_slice_axis{k}" for k in range(3)]
    names += [f"ssd0_box_nms0__{k}" for k in range(1, 5)]
    ops = {"conv": "relax.nn.conv2d", "relu": "relax.nn.relu", "slice": "relax.strided_slice"}
    for name in names:
        op = next((v for k, v in ops.items() if k in name), "relax.add")
        kind = "input" if name == "data" else "op"
        g.nodes[f"main/{name}"] = _bound(name, kind, op, op=op)
    g.clusters["fn_main"] = graph.Box("fn_main", "fn main", "function")
    chain = [n for n in names if "net0" in n or "expand" in n]
    prev = "data"
    for n in chain:
        g.edges.append(Edge(f"main/{prev}", f"main/{n}"))
        prev = n
    for k in range(3):  # each head reads the last extra layer, side by side
        g.edges.append(Edge("main/ssd0_expand_relu0", f"main/ssd0_convpredictor{k}_conv0_fwd"))
    return g


def test_blocks_group_stages_families_words_and_big_nodes():
    g = ssd_like()
    items = {"fn_main": [(nid, nid.split("/", 1)[1], n.op) for nid, n in g.nodes.items() if n.kind == "op"]}
    found = blocks.find_groups(items, [(e.src, e.dst) for e in g.edges], lambda nid: "main")
    tops = {gid: grp for gid, grp in found.items() if grp.parent is None}
    assert set(tops) == {"main/ssd0_net0_", "main/ssd0_convpredictor*", "main/ssd0_expand_", "main/ssd0_box_nms0_"}
    assert found["main/ssd0_net0_"].children == ["main/ssd0_net0_stage1_", "main/ssd0_net0_stage2_"]
    assert len(found["main/ssd0_net0_stage1_"].members) == 6, "one-op conv blocks dissolve into their stage"
    assert tops["main/ssd0_convpredictor*"].name == "convpredictor ×3"
    assert tops["main/ssd0_convpredictor*"].label == "convpredictor ×3 — class and box heads"
    assert tops["main/ssd0_box_nms0_"].label == "box_nms0 — non-maximum suppression"
    assert not any("slice" in gid for gid in found), "one kind of op under one word is a run, not a block"


def test_stages_in_a_chain_are_no_family():
    g = ssd_like()
    items = {"fn_main": [(nid, nid.split("/", 1)[1], n.op) for nid, n in g.nodes.items() if n.kind == "op"]}
    found = blocks.find_groups(items, [(e.src, e.dst) for e in g.edges], lambda nid: "main")
    assert "main/ssd0_net0_stage*" not in found


def test_closed_blocks_are_nodes_and_an_opened_one_lays_out_only_its_content():
    g = ssd_like()
    closed = folding.fold_chains(g)
    folds = {n.id: n for n in closed.node_by_kind("fold")}
    assert "main/ssd0_net0_" in folds and folds["main/ssd0_net0_"].ops.count("relax.nn.conv2d") == 6
    assert folds["main/ssd0_net0_"].expandable and folds["main/ssd0_net0_"].label.startswith("net0\n12 ops")
    assert ("main/ssd0_net0_", "main/ssd0_expand_") in {(e.src, e.dst) for e in closed.edges}
    opened = folding.fold_chains(g, keep_open=["main/ssd0_net0_"])
    assert opened.clusters["x_main/ssd0_net0_"].kind == "block"
    inside = [n for n in opened.nodes.values() if n.cluster == "x_main/ssd0_net0_"]
    assert sorted(n.id for n in inside) == ["main/ssd0_net0_stage1_", "main/ssd0_net0_stage2_"]
    assert "main/ssd0_convpredictor*" in opened.nodes, "the other blocks stay closed"
    deeper = folding.fold_chains(g, keep_open=["main/ssd0_net0_", "main/ssd0_net0_stage2_"])
    stage2 = [n.id for n in deeper.nodes.values() if n.cluster == "x_main/ssd0_net0_stage2_"]
    assert len(stage2) == 6 and all("stage2_" in nid for nid in stage2)
    assert deeper.clusters["x_main/ssd0_net0_stage2_"].parent == "x_main/ssd0_net0_"
    dot = render.to_dot(deeper).source
    assert '\t\t\tsubgraph "cluster_x_main/ssd0_net0_stage2_" {' in dot.splitlines(), "nested in the backbone"


def test_a_graph_without_block_names_folds_as_before(demo_mod, byoc):
    from byoc_workbench.session import Workbench

    g = Workbench(demo_mod, byoc).graph("partition", collapse=False)
    assert folding.fold_blocks(g) is g


def wide_run(pieces: int) -> Graph:
    """A run of ``pieces`` (two slices joined by a concat) side by side, all joined at the end."""
    g = Graph(clusters={"fn_main": graph.Box("fn_main", "fn main", "function")})

    def add(nid, op):
        g.nodes[nid] = _bound(nid.removeprefix("main/"), "op", op.split(".")[-1], op=op)

    add("main/x", "relax.nn.conv2d")
    for k in range(pieces):
        for j in "ab":
            add(f"main/slice_{j}{k}", "relax.strided_slice")
            g.edges.append(Edge("main/x", f"main/slice_{j}{k}"))
        add(f"main/concat{k}", "relax.concat")
        g.edges += [Edge(f"main/slice_{j}{k}", f"main/concat{k}") for j in "ab"]
    add("main/all", "relax.concat")
    g.edges += [Edge(f"main/concat{k}", "main/all") for k in range(pieces)]
    return g


def test_an_opened_run_wraps_into_rows():
    g = wide_run(40)
    closed = folding.fold_chains(g)
    (fold,) = closed.node_by_kind("fold")
    assert len(fold.ops) == 121 and not closed.below
    opened = folding.fold_chains(g, keep_open=[fold.id])
    cluster = f"x_{fold.id}"
    assert opened.clusters[cluster].kind == "fold"
    flat = ranks_with_rows(Graph(opened.nodes, opened.edges, opened.clusters), cluster)
    assert max(flat.values()) == 80, "without rows, 80 slices share one rank"
    rows = ranks_with_rows(opened, cluster)
    assert max(rows.values()) <= folding.WRAP
    assert sum(rows.values()) == 121
    dot = render.to_dot(opened).source
    assert dot.count("style=invis") == len(opened.below) > 0


def test_an_opened_run_draws_one_edge_per_neighbour_at_its_border():
    g = wide_run(40)
    (fold,) = folding.fold_chains(g).node_by_kind("fold")
    opened = folding.fold_chains(g, keep_open=[fold.id])
    cluster = f"x_{fold.id}"
    into = [e for e in opened.edges if e.src == "main/x"]
    assert len(into) == 1 and into[0].to_cluster == cluster, "80 slices reading x: one edge into the box"
    dot = render.to_dot(opened).source
    assert f'lhead="cluster_{cluster}"' in dot
    members = {n for n, node in opened.nodes.items() if node.cluster == cluster}
    assert len(members) == 121, "every op of the run is still drawn"
    out = [e for e in opened.edges if e.src in members and e.dst not in members]
    assert len(out) == len({e.dst for e in out}), "one edge out of the box per reader"


def test_a_fold_is_named_after_the_blocks_it_connects():
    names = ["ssd0_ssdanchorgenerator0_reshape1", "ssd0_ssdanchorgenerator1_reshape1"]
    assert blocks.run_title(names, ["ssd0_normalizedboxcenterdecoder0_box_decode0__1"]) == "anchors → box decoding"
    assert blocks.run_title(["ssd0_multiperclassdecoder0_"], ["ssd0_box_nms0__1"]) == (
        "class decoding → non-maximum suppression"
    )
    assert blocks.run_title(["ssd0_foo0_conv0_fwd", "ssd0_foo1_conv0_fwd"], ["ssd0_softmax0"]) == "foo ×2 → softmax0"
    assert blocks.run_title(["lv3"], ["lv9"]) == "", "a graph without Gluon names keeps plain folds"
    g = Graph(clusters={"fn_main": graph.Box("fn_main", "fn main", "function")})
    for k in range(6):
        g.nodes[f"main/ssd0_ssdanchorgenerator{k}_reshape1"] = _bound(
            f"ssd0_ssdanchorgenerator{k}_reshape1", "op", "reshape", op="relax.nn.conv2d"
        )
    prev = None
    for k in range(9):
        nid = f"main/ssd0_reshape{k}"
        g.nodes[nid] = _bound(f"ssd0_reshape{k}", "op", "reshape", op="relax.reshape")
        if k < 6:
            g.edges.append(Edge(f"main/ssd0_ssdanchorgenerator{k}_reshape1", nid))
        if prev:
            g.edges.append(Edge(prev, nid))
        prev = nid
    g.nodes["main/ssd0_normalizedboxcenterdecoder0_box_decode0"] = _bound(
        "ssd0_normalizedboxcenterdecoder0_box_decode0", "op", "decode", op="relax.nn.conv2d"
    )
    g.edges.append(Edge(prev, "main/ssd0_normalizedboxcenterdecoder0_box_decode0"))
    (fold,) = [n for n in folding.fold_chains(g).nodes.values() if n.kind == "fold" and n.op == "folded"]
    assert fold.label.startswith("anchors → box decoding\n9 ops"), fold.label
    opened = folding.fold_chains(g, keep_open=[fold.id])
    assert opened.clusters[f"x_{fold.id}"].label == "anchors → box decoding — 9 ops"
