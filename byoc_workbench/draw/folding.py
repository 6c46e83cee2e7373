"""Large graphs drawn small: model blocks and long runs of ops folded into nodes, wide ranks in rows.

:func:`fold_chains` is what a view of a large model draws; each fold is one
expandable node, and the ids in ``keep_open`` are drawn open as clusters.
"""

from __future__ import annotations

import collections
import dataclasses

from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.draw import blocks, structure
from byoc_workbench.draw.graph import Box, Graph, Node, on_cpu_of, ops_label

# Ops that move or reshape data without arithmetic; long runs of them (SSD's anchor and
# box-decoding tail) are folded into one node so a 600-op graph stays readable.
DATA_MOVEMENT = frozenset(
    {
        "relax.strided_slice",
        "relax.concat",
        "relax.reshape",
        "relax.permute_dims",
        "relax.expand_dims",
        "relax.squeeze",
        "relax.split",
        "relax.take",
        "relax.zeros_like",
        "relax.ones_like",
        "relax.full_like",
        "relax.where",
        "relax.arange",
        "relax.broadcast_to",
        "relax.flatten",
        "relax.astype",
        "relax.greater",
        "relax.less",
        "relax.multiply",
        "relax.add",
        "relax.subtract",
        "relax.divide",
        "relax.exp",
    }
)


def _components(g: Graph, eligible: set) -> list:
    """Connected groups of ``eligible`` nodes, joined along edges within one cluster and target."""
    nids = [nid for nid in g.nodes if nid in eligible]  # node order is binding order
    pairs = []
    for e in g.edges:
        if e.src in eligible and e.dst in eligible:
            a, b = g.nodes[e.src], g.nodes[e.dst]
            if a.cluster == b.cluster and a.target == b.target:
                pairs.append((e.src, e.dst))
    return _units(nids, pairs)


def _moves_data(n: Node) -> bool:
    ops = n.ops if n.kind == "composite" else [n.op]
    return bool(ops) and all(op in DATA_MOVEMENT for op in ops)


def _ops_of(nodes) -> list:
    return [
        op for n in nodes for op in (n.ops if n.kind in ("composite", "fold", "subgraph") else [n.op] if n.op else [])
    ]


def _group_node(nid: str, title: str, members: list, cluster: str, what: str) -> Node:
    """A closed group drawn as one node (``what``: "block" or "folded"): its ops counted, its main target's colour."""
    ops = _ops_of(members)
    by_target = collections.Counter()  # ops per target; a group of no op (tuples) by its nodes
    for m in members:
        by_target[m.target] += len(_ops_of([m]))
    by_target = +by_target or collections.Counter(m.target for m in members)
    target = by_target.most_common(1)[0][0]
    mix = "\n" + ", ".join(f"{t} {n}" for t, n in by_target.most_common()) if len(by_target) > 1 else ""
    head = f"{title}\n{len(ops)} ops" if title else f"{len(ops)} ops"
    label = f"{head}{mix}\n{ops_label(ops)}"
    node = Node(nid, "fold", label, target=target, cluster=cluster, ops=ops, expandable=True, op=what)
    node.on_cpu = on_cpu_of(members)
    return node


def _remap(g: Graph, nodes: dict, rename: dict, clusters: dict, below=()) -> Graph:
    """A graph of ``nodes`` whose edges and sites follow ``rename`` (old id -> the node now drawing it)."""
    out = Graph(nodes=nodes, clusters=clusters)
    seen = set()
    for e in g.edges:
        src, dst = rename.get(e.src, e.src), rename.get(e.dst, e.dst)
        if src == dst or (src, dst) in seen or src not in nodes or dst not in nodes:
            continue
        seen.add((src, dst))
        a, b = nodes[src], nodes[dst]
        crosses = e.kind == "data" and a.target != b.target and a.kind != "const"
        same = src == e.src and dst == e.dst and crosses == e.crosses  # most edges: no copy
        out.edges.append(e if same else dataclasses.replace(e, src=src, dst=dst, crosses=crosses))
    out.sites = {key: rename.get(nid, nid) for key, nid in g.sites.items() if rename.get(nid, nid) in nodes}
    out.below = list(below) + [pair for pair in g.below if pair[0] in nodes and pair[1] in nodes]
    return out


BLOCK_KINDS = ("op", "composite", "tuple", "item")  # what a Gluon block can hold
# Past this many subgraph calls in one view, blocks hold them too: a rule toggle that splits one
# subgraph into one per block (1,500 on 6,000 ops) still opens on the model's few top blocks.
# Below it, each subgraph stays a node of its own, where the reader looks for it (the SSD has 5).
MANY_SUBGRAPHS = 24


def fold_blocks(g: Graph, keep_open=()) -> Graph:
    """``g`` drawn as the hierarchy of its model's blocks (see :mod:`.blocks`).

    A closed block is one expandable ``fold`` node whose id is the block's
    (``main/ssd0_resnetv10_``); an open one (its id in ``keep_open``) is a
    cluster ``x_<id>`` that lays out its own content, sub-blocks closed.
    Graphs whose names carry no Gluon block prefixes come back unchanged.
    """
    groups = _block_groups(g)
    if not groups:
        return g
    keep_open = set(keep_open)
    clusters = dict(g.clusters)
    for gid, grp in groups.items():
        if _shown(groups, keep_open, gid) is None:  # open, and every group around it open
            parent = _place(grp.parent, grp.cluster)
            clusters[f"x_{gid}"] = Box(f"x_{gid}", grp.label, "block", parent, g.clusters[grp.cluster].target)
    nodes, rename = _fold_into_blocks(g, groups, keep_open)
    return _remap(g, nodes, rename, clusters)


def _block_groups(g: Graph) -> dict:
    """The model's blocks among ``g``'s nodes (:func:`.blocks.find_groups`); subgraph calls in them too
    when there are more than :data:`MANY_SUBGRAPHS`."""
    items: dict = {}
    many = sum(n.kind == "subgraph" for n in g.nodes.values()) > MANY_SUBGRAPHS
    kinds = BLOCK_KINDS + (("subgraph",) if many else ())
    for n in g.nodes.values():
        if n.kind in kinds and n.var:
            items.setdefault(n.cluster, []).append((n.id, n.var, n.op))
    return blocks.find_groups(items, [(e.src, e.dst) for e in g.edges], lambda nid: g.nodes[nid].scope)


def _shown(groups: dict, keep_open: set, gid) -> str | None:
    """The group, or the outermost closed group around it, that is drawn as a node; None when it and
    every group around it are open."""
    closed = None
    while gid is not None:
        if gid not in keep_open:
            closed = gid
        gid = groups[gid].parent
    return closed


def _place(gid, cluster):
    """The cluster a node directly inside group ``gid`` is drawn in: the open block's, or its own."""
    return f"x_{gid}" if gid is not None else cluster


def _fold_into_blocks(g: Graph, groups: dict, keep_open: set) -> tuple:
    """``(nodes, rename)``: each node of ``g`` drawn in its open block, or hidden in the closed block drawn
    as one node in its stead (``rename``: old id -> that block); in binding order, each closed block
    where its first node was."""
    innermost = {nid: gid for gid, grp in groups.items() for nid in grp.members}
    members: dict = collections.defaultdict(list)  # closed group drawn -> the nodes it hides
    rename, nodes = {}, {}
    order = []
    for nid, n in g.nodes.items():
        gid = innermost.get(nid)
        top = _shown(groups, keep_open, gid)
        if top is None:
            nodes[nid] = dataclasses.replace(n, cluster=_place(gid, n.cluster)) if gid is not None else n
            order.append(nid)
            continue
        if top not in members:
            order.append(top)
        members[top].append(n)
        rename[nid] = top
    for top, hidden in members.items():
        grp = groups[top]
        node = _group_node(top, grp.label, hidden, _place(grp.parent, grp.cluster), "block")
        nodes[top] = dataclasses.replace(node, scope=grp.scope, var=grp.key)
    return {nid: nodes[nid] for nid in order}, rename


WRAP = 8  # at most about this many nodes of one cluster side by side; more wrap into rows


def _ranks(nids: list, preds: dict) -> dict:
    """Longest-path rank of each node among ``nids`` (in binding order: producers first)."""
    rank: dict = {}
    for nid in nids:
        rank[nid] = 1 + max((rank[p] for p in preds.get(nid, ()) if p in rank), default=-1)
    return rank


def _widest(nids: list, preds: dict) -> int:
    return max(collections.Counter(_ranks(nids, preds).values()).values(), default=0)


def _units(nids: list, edges: list) -> list:
    """Weakly connected pieces of ``nids`` along ``edges``, each in binding order, in order of first node."""
    parent = {n: n for n in nids}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        parent[find(a)] = find(b)
    units: dict = {}
    for n in nids:
        units.setdefault(find(n), []).append(n)
    return list(units.values())


def _stack(nids: list, edges: list, preds: dict, width: int) -> list:
    """``below`` pairs that fold one wide cluster's nodes into rows about ``width`` nodes wide.

    Nodes that many others feed or read (a concat of 80 pieces) are set aside;
    the rest fall into pieces (a concat and the two slices it joins), laid out
    a few pieces per row. A piece that is wide by itself wraps rank by rank.
    """
    members = set(nids)
    edges = [(a, b) for a, b in edges if a in members and b in members]
    degree = collections.Counter(x for e in edges for x in e)
    hubs = {n for n in nids if degree[n] > width}
    rest = [n for n in nids if n not in hubs]
    units = _units(rest, [(a, b) for a, b in edges if a not in hubs and b not in hubs])
    below = []
    if len(units) > 1:
        per_row = max(1, width // max(_widest(u, preds) for u in units))
        for upper, lower in zip(units, units[per_row:]):  # every start of a piece below the end of the one above
            inside = set(lower)
            below += [(upper[-1], n) for n in lower if not inside.intersection(preds.get(n, ()))]
    for unit in units:
        if _widest(unit, preds) > width:
            layers: dict = collections.defaultdict(list)
            for nid, r in _ranks(unit, preds).items():
                layers[r].append(nid)
            below += [(row[i], row[i + width]) for row in layers.values() for i in range(len(row) - width)]
    return below


def wrap_rows(g: Graph, width: int = WRAP) -> Graph:
    """``g`` with ``below`` pairs that fold each opened block or run wider than ``width`` nodes into rows.

    Opening SSD's run of 241 slices and concats then shows a block a few
    pieces wide, not one strip of 160 nodes.
    """
    opened = {c.id for c in g.clusters.values() if c.kind in ("block", "fold")}
    if not opened:
        return g
    by_cluster: dict = collections.defaultdict(list)
    for nid, n in g.nodes.items():
        if n.cluster in opened and n.kind not in ("const", "input", "output"):
            by_cluster[n.cluster].append(nid)
    inner: dict = collections.defaultdict(list)
    preds: dict = collections.defaultdict(list)
    for e in g.edges:
        a, b = g.nodes[e.src], g.nodes[e.dst]
        if e.kind == "data" and a.cluster == b.cluster and a.kind not in ("const", "input"):
            inner[a.cluster].append((e.src, e.dst))
            preds[e.dst].append(e.src)
    below = []
    for cluster, nids in by_cluster.items():
        if _widest(nids, preds) > width:
            below += _stack(nids, inner[cluster], preds, width)
    return _remap(g, dict(g.nodes), {}, dict(g.clusters), below)


def fold_chains(g: Graph, min_size: int = 8, chunk: int = 40, keep_open=()) -> Graph:
    """``g`` as a large model is drawn: blocks, folded runs of ops, wide ranks in rows.

    First the model's blocks are grouped (:func:`fold_blocks`). Then, among
    the nodes left drawn, each connected run of at least ``min_size``
    data-movement ops (one cluster, one target) becomes one node: SSD's anchor
    and box-decoding tail. Outside opened blocks, the remaining runs of ops and
    composites of one target are folded in pieces of at most ``chunk`` nodes,
    in binding order, so a backbone without block names reads as a short
    chain. A fold is named ``fold_<first member id>``; one named in
    ``keep_open`` is drawn open, as a cluster ``x_<fold id>``. A graph still
    larger than a few hundred nodes (no block names, thousands of subgraphs)
    is folded by structure (:func:`.structure.fold_structure`). Last, wide
    ranks wrap into rows (:func:`wrap_rows`).
    """
    g = fold_blocks(g, keep_open)
    kinds = ("op", "composite")
    taken: dict = {}
    movers = {nid for nid, n in g.nodes.items() if n.kind in kinds and _moves_data(n)}
    for members in _components(g, movers):
        if len(members) >= min_size:
            taken[f"fold_{members[0]}"] = members
    folded = {m for ms in taken.values() for m in ms}
    in_block = {c.id for c in g.clusters.values() if c.kind == "block"}
    rest = {nid for nid, n in g.nodes.items() if n.kind in kinds and nid not in folded and n.cluster not in in_block}
    for members in _components(g, rest):
        if len(members) >= min_size:
            for i in range(0, len(members), chunk):
                piece = members[i : i + chunk]
                taken[f"fold_{piece[0]}"] = piece
    clusters = dict(g.clusters)
    rename, nodes = {}, {}
    opened = {}
    for fid, ids in taken.items():
        first = g.nodes[ids[0]]
        title = _fold_title(g, set(ids))
        if fid in keep_open:
            label = f"{title} — {len(ids)} ops" if title else f"{len(ids)} ops"
            clusters[f"x_{fid}"] = Box(f"x_{fid}", label, "fold", first.cluster, first.target)
            opened.update({m: f"x_{fid}" for m in ids})
            continue
        nodes[fid] = _group_node(fid, title, [g.nodes[m] for m in ids], first.cluster, "folded")
        rename.update({m: fid for m in ids})
    out: dict = {}
    for nid, n in g.nodes.items():
        if nid in rename:
            fid = rename[nid]
            out.setdefault(fid, nodes[fid])
        else:
            out[nid] = dataclasses.replace(n, cluster=opened[nid]) if nid in opened else n
    g = _remap(g, out, rename, clusters)
    plan = structure.fold_structure(g, keep_open)
    if plan is not None:  # still too large: folded by structure (a model without block names)
        g = _remap(g, plan.nodes, plan.rename, plan.clusters)
    return wrap_rows(_one_edge_per_neighbour(g, set(opened.values()) | (plan.opened if plan else set())))


def _fold_title(g: Graph, members: set) -> str:
    """What a folded run connects, from the blocks around it (``anchors → box decoding``); "" for a
    graph without Gluon block names."""
    around = {"in": [], "out": []}
    for e in g.edges:
        if e.kind != "data":
            continue
        if e.dst in members and e.src not in members and g.nodes[e.src].kind != "const":
            around["in"].append(g.nodes[e.src].var)
        elif e.src in members and e.dst not in members:
            around["out"].append(g.nodes[e.dst].var)
    return blocks.run_title(around["in"], around["out"])


def _one_edge_per_neighbour(g: Graph, opened: set) -> Graph:
    """``g`` with the data edges between an opened run (a cluster in ``opened``) and each node outside
    it drawn once, at the run's border: 80 slices reading one tensor are one edge into the box, not 80
    lines across the diagram."""
    if not opened:
        return g
    seen: set = set()
    edges = []
    for e in g.edges:
        a, b = g.nodes[e.src].cluster, g.nodes[e.dst].cluster
        if e.kind == "data" and (a in opened) != (b in opened):
            key = (e.src, b) if b in opened else (a, e.dst)
            if key in seen:
                continue
            seen.add(key)
            e = dataclasses.replace(e, to_cluster=b if b in opened else None, from_cluster=a if a in opened else None)
        edges.append(e)
    return dataclasses.replace(g, edges=edges)


def node_ids(expand) -> tuple[str, ...]:
    """``expand`` as a tuple of node ids, or a one-line error (a bare id, a number)."""
    if isinstance(expand, str) or not isinstance(expand, (list, tuple, set, frozenset)):
        raise WorkbenchError(
            f"expand must be a list of node ids, got {expand!r:.60}",
            "pass e.g. expand=['main/tensorrt_0'] (the ids a View's nodes are keyed by)",
        )
    if not all(isinstance(e, str) for e in expand):
        raise WorkbenchError("expand must hold node ids (text)", "pass e.g. expand=['main/tensorrt_0']")
    return tuple(expand)


def unopened(g: Graph, expand) -> list:
    """The ids of ``expand`` that open nothing in ``g``: no node of it, nor a box it was drawn open as (``x_<id>``)."""
    return [e for e in expand if e not in g.nodes and f"x_{e}" not in g.clusters]
