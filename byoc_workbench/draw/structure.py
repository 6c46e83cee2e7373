"""Large graphs that no block hierarchy groups, drawn small: repeated patterns and segments folded.

A model whose names carry no blocks (``lv12``), or a partition that splits it
into thousands of subgraphs, still has to be drawn in a few hundred nodes.
:func:`fold_structure` folds each drawn cluster's nodes, in binding order:

- runs of one repeated pattern become one node, ``1,499 × {relu on host, then
  add + nn.conv2d + add on tensorrt}`` (a motif of up to :data:`PERIOD` nodes,
  repeated at least :data:`MIN_REPS` times);
- if that still leaves more than the cluster's share of :data:`AIM` nodes,
  what is left is cut into segments, each named by its first and last node.

Every fold opens like a block (its id in ``keep_open``: a cluster ``x_<id>``);
an opened fold too large to draw shows its content in pieces, folded again,
so that no view draws more than a few hundred nodes. A fold's label says
what it holds: subgraphs, ops by target and MAC ops. All of it is linear in
the nodes drawn; no graphviz here.
"""

from __future__ import annotations

import collections
import dataclasses
import math
from typing import NamedTuple

from byoc_workbench.core import ir
from byoc_workbench.draw.graph import Box, Graph, Node, on_cpu_of, short_op

START = 300  # a view of at most this many nodes is drawn as it is
AIM = 150  # a folded cluster (or an opened fold) draws about this many nodes at most
MIN_AIM = 16  # no cluster is folded below this many nodes
MIN_REPS = 3  # a pattern repeated this many times is a run
MIN_RUN = 8  # ... when the run holds at least this many nodes
PERIOD = 8  # the longest pattern looked for, in nodes
PIECE = 60  # an opened fold too large to draw shows pieces of about this many nodes
UNFOLDED = ("input", "output", "const")  # drawn where they are, never folded
# Clusters that do not order what they hold (merge regions, their unseen layout twins, opened runs
# of ops): their nodes are folded with the cluster around them, and the box follows what stays drawn.
SEE_THROUGH = ("region", "layout", "fold")


@dataclasses.dataclass
class _Fold:
    """A folded run (``period`` nodes repeated ``reps`` times) or segment (``period`` 0) of ``items``
    (node ids, or folds); ``flat`` is every node id it hides, in binding order."""

    id: str
    items: list
    flat: list
    period: int = 0
    reps: int = 0


def _run(ids: list, period: int) -> _Fold:
    reps = len(ids) // period
    return _Fold(f"run_{ids[0]}×{reps}", list(ids), list(ids), period, reps)


def _segment(items: list) -> _Fold:
    flat = [m for it in items for m in (it.flat if isinstance(it, _Fold) else [it])]
    return _Fold(f"seg_{flat[0]}+{len(flat)}", list(items), flat)


def _size(n: int, aim: int, piece: int = PIECE) -> int:
    """Pieces of this many of ``n`` items: at most ``aim`` pieces, each of at most about ``piece``
    items (or the square root of ``n``, if less) unless that would make more than ``aim`` pieces."""
    return max(math.ceil(n / aim), min(math.ceil(math.sqrt(n)), piece), 2)


def _signature(n: Node) -> tuple:
    """What two nodes of one repeated pattern share: kind, target and ops (not names)."""
    if n.kind in ("subgraph", "fold", "composite"):
        return n.kind, n.target, tuple(sorted(collections.Counter(n.ops).items()))
    return n.kind, n.target, n.op


def find_runs(ids: list, sigs: list) -> list:
    """``ids`` with each run of a repeated pattern (``sigs[i]`` is ``ids[i]``'s pattern key) folded.

    At each place the period covering most nodes wins (the shortest among equals); the scan
    moves past a run at once, so this is linear in ``len(ids)`` times :data:`PERIOD`.
    """
    items, i, n = [], 0, len(ids)
    while i < n:
        covered, period = 0, 0
        for p in range(1, PERIOD + 1):
            j = i
            while j + p < n and sigs[j] == sigs[j + p]:
                j += 1
            reps = (j - i + p) // p
            if reps >= MIN_REPS and reps * p >= MIN_RUN and reps * p > covered:
                covered, period = reps * p, p
        if covered:
            items.append(_run(ids[i : i + covered], period))
            i += covered
        else:
            items.append(ids[i])
            i += 1
    return items


def segments(items: list, aim: int) -> list:
    """``items`` cut into at most about ``aim`` segments in order (one item stays as it is)."""
    size = _size(len(items), aim)
    out = []
    for k in range(0, len(items), size):
        chunk = items[k : k + size]
        out.append(chunk[0] if len(chunk) == 1 else _segment(chunk))
    return out


def opened(fold: _Fold, aim: int = AIM) -> list:
    """What an opened fold draws: its content, or (too large) its content in pieces, folded again."""
    if fold.period:
        if len(fold.flat) <= aim:
            return list(fold.flat)
        per = _size(fold.reps, aim, max(1, PIECE // fold.period)) * fold.period  # whole repetitions
        out: list = []
        for k in range(0, len(fold.flat), per):
            piece = fold.flat[k : k + per]
            if len(piece) > fold.period:
                out.append(_run(piece, fold.period))
            else:
                out.extend(piece)
        return out
    return list(fold.items) if len(fold.items) <= aim else segments(fold.items, aim)


def _ops(n: Node) -> list:
    if n.kind in ("subgraph", "fold", "composite"):
        return list(n.ops)
    return [n.op] if n.kind == "op" and n.op else []


def _describe(n: Node) -> str:
    """One node of a pattern: ``add + nn.conv2d on tensorrt``."""
    if n.kind == "op":
        what = short_op(n.op)
    elif n.kind == "subgraph":
        what = " + ".join(f"{short_op(op)}×{k}" if k > 1 else short_op(op) for op, k in _counted(n.ops))
    elif n.kind == "fold":
        what = f"{len(n.ops)} ops"
    else:
        what = n.label.split("\n")[0]
    return f"{what} on {n.target}"


def _counted(ops) -> list:
    return list(collections.Counter(ops).items())


def _head(n: Node) -> str:
    """How a segment names its first and last node: ``nn.conv2d lv12``, a subgraph's name."""
    first = n.label.split("\n")[0]
    return f"{first} {n.id.rsplit('/', 1)[-1]}" if n.kind == "op" else first


def title(g: Graph, fold: _Fold) -> str:
    """A fold's first line: its pattern and repetitions, or its first and last node."""
    if fold.period:
        nodes = [g.nodes[m] for m in fold.flat[: fold.period]]
        # a call's tuple of outputs and their items are plumbing: the pattern is its ops
        motif = [_describe(n) for n in nodes if n.kind not in ("tuple", "item")] or [_describe(nodes[0])]
        shown = motif if len(motif) <= 3 else motif[:3] + ["…"]
        return f"{fold.reps:,} × {{{', then '.join(shown)}}}"
    return f"{_head(g.nodes[fold.flat[0]])} … {_head(g.nodes[fold.flat[-1]])}"


class Contents(NamedTuple):
    """What some nodes hold: the label's lines, their ops, and the target holding most of them."""

    lines: list[str]
    ops: list[str]
    target: str


def contents(g: Graph, members) -> Contents:
    """``(label lines, ops, main target)``: what nodes ``members`` hold, subgraphs, ops by target, MAC ops."""
    ops: list = []
    by_target: collections.Counter = collections.Counter()
    subgraphs = 0
    for m in members:
        n = g.nodes[m]
        inner = _ops(n)
        ops += inner
        by_target[n.target] += len(inner)
        subgraphs += n.kind == "subgraph"
    by_target = +by_target or collections.Counter(g.nodes[m].target for m in members)
    where = ", ".join(f"{t} {k:,}" for t, k in by_target.most_common())
    head = f"{subgraphs:,} subgraph{'s' if subgraphs != 1 else ''}, " if subgraphs else ""
    macs = collections.Counter(short_op(op) for op in ops if op in ir.MAC_OPS)
    mac = ", ".join(f"{op}×{k:,}" for op, k in macs.most_common()) if macs else "none"
    lines = [f"{head}{len(ops):,} ops: {where}", f"MAC ops: {mac}"]
    return Contents(lines, ops, by_target.most_common(1)[0][0])


@dataclasses.dataclass
class FoldPlan:
    """How :func:`fold_structure` redraws a graph: its new ``nodes`` (in binding order), ``rename``
    (hidden node id -> the fold drawing it), ``clusters``, and the ids of the opened folds' clusters."""

    nodes: dict
    rename: dict
    clusters: dict
    opened: set


class _Placer:
    """Where each node goes: into a closed fold, or drawn in a cluster (an opened fold's, or its own)."""

    def __init__(self, g: Graph, keep_open, aim: int):
        self.g, self.keep_open, self.aim = g, set(keep_open), aim
        self.placed: dict = {}  # node id -> the cluster it is drawn in
        self.closed: dict = {}  # fold id -> (fold, cluster)
        self.clusters = dict(g.clusters)
        self.opened: set = set()

    def place(self, items: list, cluster: str) -> None:
        for it in items:
            if not isinstance(it, _Fold):
                self.placed[it] = cluster
            elif it.id in self.keep_open:
                inner = f"x_{it.id}"
                lines, _, target = contents(self.g, it.flat)
                self.clusters[inner] = Box(inner, f"{title(self.g, it)} — {lines[0]}", "fold", cluster, target)
                self.opened.add(inner)
                self.place(opened(it, self.aim), inner)
            else:
                self.closed[it.id] = (it, cluster)

    def fold_node(self, fid: str) -> Node:
        fold, cluster = self.closed[fid]
        lines, ops, target = contents(self.g, fold.flat)
        label = "\n".join([title(self.g, fold), *lines])
        what = "run" if fold.period else "segment"
        node = Node(fid, "fold", label, target=target, cluster=cluster, ops=ops, expandable=True, op=what)
        node.on_cpu = on_cpu_of(self.g.nodes[m] for m in fold.flat)
        return node


def fold_structure(g: Graph, keep_open=(), start: int = START, aim: int = AIM) -> FoldPlan | None:
    """How to draw ``g`` in about ``aim`` nodes per level, by structure alone; None when ``g`` has at
    most ``start`` nodes (drawn as it is).

    Each cluster that orders its nodes (a function, an If branch, an opened block or call) folds
    its share of ``aim``: runs of a repeated pattern first (:func:`find_runs`), then segments
    (:func:`segments`). Fold ids are ``run_<first node>×<repetitions>`` and ``seg_<first
    node>+<nodes>``; one in ``keep_open`` is drawn open, as a cluster ``x_<fold id>``.
    """
    if len(g.nodes) <= start:
        return None
    home: dict = {}

    def home_of(cid):  # the cluster that orders a node: its own, or the one around see-through ones
        if cid not in home:
            c = g.clusters.get(cid)
            up = c.parent if c is not None and c.kind in SEE_THROUGH and c.parent is not None else None
            home[cid] = cid if up is None else home_of(up)
        return home[cid]

    seqs: dict = collections.defaultdict(list)
    for nid, n in g.nodes.items():
        if n.kind not in UNFOLDED:
            seqs[home_of(n.cluster)].append(nid)
    total = sum(map(len, seqs.values())) or 1
    keys: dict = {}
    placer = _Placer(g, keep_open, aim)
    for cid, ids in seqs.items():
        share = max(MIN_AIM, round(aim * len(ids) / total))
        if len(ids) <= share:
            continue
        items = find_runs(ids, [keys.setdefault(_signature(g.nodes[m]), len(keys)) for m in ids])
        placer.place(items if len(items) <= share else segments(items, share), cid)
    if not placer.closed and not placer.opened:
        return None
    return _plan(g, placer, home_of)


def _plan(g: Graph, placer: _Placer, home_of) -> FoldPlan:
    """The nodes and clusters :class:`_Placer` decided on; a see-through cluster (a merge region)
    moves into the opened fold its first drawn node is in, and goes when none of its nodes is drawn."""
    rename = {m: fid for fid, (fold, _) in placer.closed.items() for m in fold.flat}
    clusters = placer.clusters
    nodes: dict = {}
    moved: set = set()
    for nid, n in g.nodes.items():
        fid = rename.get(nid)
        if fid is not None:
            if fid not in nodes:
                nodes[fid] = placer.fold_node(fid)
            continue
        where = placer.placed.get(nid)
        if where is None or home_of(n.cluster) != n.cluster:  # in a see-through cluster: it stays there
            if where is not None and where != home_of(n.cluster):
                top = n.cluster  # the outermost see-through cluster around it, as ``g`` nests them
                while g.clusters[top].parent != home_of(n.cluster):
                    top = g.clusters[top].parent
                if top not in moved:
                    moved.add(top)
                    clusters[top] = dataclasses.replace(clusters[top], parent=where)
            nodes[nid] = n
        else:
            nodes[nid] = n if n.cluster == where else dataclasses.replace(n, cluster=where)
    used: set = set()
    for n in nodes.values():
        cid = n.cluster
        while cid and cid not in used:
            used.add(cid)
            cid = clusters[cid].parent if cid in clusters else None
    for cid in [c for c, cl in clusters.items() if cl.kind in SEE_THROUGH and c not in used]:
        del clusters[cid]
    return FoldPlan(nodes, rename, clusters, placer.opened)
