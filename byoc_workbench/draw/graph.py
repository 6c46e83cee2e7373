"""A plain graph model of any stage's IRModule, for drawing and inspecting.

No graphviz here: :func:`build_graph` turns a module into dataclasses, which
tests can check directly; :mod:`byoc_workbench.draw.render` draws them.
"""

from __future__ import annotations

import collections
import dataclasses

import numpy as np
import tvm
from tvm import relax

from .. import ir
from . import blocks

HOST = "host"


@dataclasses.dataclass
class Node:
    id: str
    kind: str  # input, const, op, composite, subgraph, packed, call, if, tuple, item, output, fold
    label: str
    target: str = HOST
    op: str = ""
    cluster: str = ""
    ty: str = ""
    input_types: list = dataclasses.field(default_factory=list)
    attrs: dict = dataclasses.field(default_factory=dict)
    rule: str | None = None  # the rule (composite name) that claimed it
    why: str | None = None  # why no rule claimed it
    ops: list = dataclasses.field(default_factory=list)  # ops inside a composite or subgraph
    expandable: bool = False


@dataclasses.dataclass
class Edge:
    src: str
    dst: str
    label: str = ""
    crosses: bool = False  # data crosses a target boundary
    kind: str = "data"  # or "call": from a call node to the function it calls
    to_cluster: str | None = None  # drawn ending at this cluster's border (a callee, an opened run)
    from_cluster: str | None = None  # drawn starting at this cluster's border (an opened run)


@dataclasses.dataclass
class Cluster:
    id: str
    label: str
    kind: str  # function, then, else, region, subgraph, composite
    parent: str | None = None
    target: str = HOST


@dataclasses.dataclass
class Graph:
    nodes: dict = dataclasses.field(default_factory=dict)
    edges: list = dataclasses.field(default_factory=list)
    clusters: dict = dataclasses.field(default_factory=dict)
    # (function or opened node, relax.Var) -> the id of the node drawn for that binding (after
    # fold_chains, of the fold holding it), so measurements of a binding find their node.
    sites: dict = dataclasses.field(default_factory=dict, repr=False)
    # (upper, lower) node pairs: lower is drawn below upper (a wide rank wrapped into rows).
    below: list = dataclasses.field(default_factory=list)

    @property
    def targets(self) -> list:
        return sorted({n.target for n in self.nodes.values()}, key=lambda t: (t != HOST, t))

    def node_by_kind(self, kind: str) -> list:
        return [n for n in self.nodes.values() if n.kind == kind]


def _attrs(call) -> dict:
    attrs = call.attrs
    if attrs is None:
        return {}
    out = {}
    for key in dir(attrs):
        if key.startswith("_") or key in ("same_as", "id_", "is_", "get_int", "get_int_tuple", "get_str", "keys"):
            continue
        try:
            value = getattr(attrs, key)
        except Exception:  # some attribute accessors raise for unset fields
            continue
        if callable(value):
            continue
        out[key] = str(value)
    return out


def short_op(op: str) -> str:
    """``relax.nn.conv2d`` -> ``nn.conv2d``."""
    return op.replace("relax.", "", 1)


class _Walk:
    """The state of drawing one function body: node ids per variable, and clusters per nesting."""

    def __init__(self, prefix: str, cluster: str, target: str):
        self.values = ir.Values()
        self.prefix = {(): prefix}  # frame -> the prefix of its node ids
        self.cluster = {(): cluster}  # frame, or (frame, branch place) -> cluster id
        self.target = target
        self.open_branches: list = []  # (path of a branch, frame, its If node, label, branch)


class _Builder:
    def __init__(self, mod, regions, expand, why_unclaimed, packed, constants=True, layout_only=False, known=None):
        self.mod = mod
        self.known = known or {}  # subgraph name -> (target, ops), from the stage's summary
        self.layout_only = layout_only  # regions group nodes for the layout, unseen and uncoloured
        self.constants = constants
        self.g = Graph()
        self.expand = set(expand or ())
        self.why = why_unclaimed or {}
        self.packed = packed or {}
        # Keyed by handle, as ir.Values is: a new Python object for a variable compares by value through the FFI.
        self.region_of = {v.__chandle__(): r for r in regions or () for v in r.members}
        # A stage before merge holds other variables with the same names (composite calls keep them).
        self.region_named = {(r.func, v.name): r for r in regions or () for v in r.members}
        self.ids: dict = {}  # (prefix, variable's handle) -> (node id, the variable)
        self.taken: set = set()
        self.calls: list = []

    def node_id(self, prefix: str, var) -> str:
        """``<function or opened call>/<variable>``, then ``~k`` for the k-th reuse of a name:
        the same value keeps its id when rules change, so a selection survives a toggle."""
        key = (prefix, var.__chandle__())
        if key not in self.ids:
            base = f"{prefix}/{var.name}"
            nid, k = base, 1
            while nid in self.taken:
                nid, k = f"{base}~{k}", k + 1
            self.taken.add(nid)
            self.ids[key] = (nid, var)
        return self.ids[key][0]

    def add_node(self, node: Node) -> str:
        self.g.nodes[node.id] = node
        return node.id

    def edge(self, src_id: str, dst_id: str, ty: str = ""):
        s, d = self.g.nodes[src_id], self.g.nodes[dst_id]
        crosses = s.target != d.target and s.kind != "const"
        self.g.edges.append(Edge(src_id, dst_id, ty, crosses))

    def cluster(self, cid, label, kind, parent, target=HOST):
        self.g.clusters.setdefault(cid, Cluster(cid, label, kind, parent, target))
        return cid

    # -- values -----------------------------------------------------------------

    def arg_node(self, w: _Walk, frame, expr, consumer: str, k, cluster) -> str | None:
        """The node of an argument: its variable's, or a new constant node ``<consumer>.c<k>``."""
        if ir.is_var(expr):
            return w.values.get(frame, expr)
        if isinstance(expr, tvm.ir.expr.Constant) and self.constants:
            value = np.asarray(expr.value.numpy() if hasattr(expr.value, "numpy") else expr.value)
            text = str(value.item()) if value.size == 1 else f"{value.dtype}{list(value.shape)}"
            return self.add_node(
                Node(f"{consumer}.c{k}", "const", f"const {text}", cluster=cluster, ty=ir.type_str(expr.ty))
            )
        return None

    def connect(self, w: _Walk, frame, args, nid, cluster):
        for k, a in enumerate(ir.items(args)):
            # concat and friends take their inputs as a tuple
            fields = ir.items(a.fields) if type(a) is relax.Tuple else None
            parts = [(f"{k}_{j}", f) for j, f in enumerate(fields)] if fields is not None else [(k, a)]
            for key, part in parts:
                src = self.arg_node(w, frame, part, nid, key, cluster)
                if src:
                    self.edge(src, nid, self.g.nodes[src].ty)

    # -- functions ----------------------------------------------------------------

    def function(self, name: str):
        func = self.mod[name]
        fid = self.cluster(f"fn_{name}", f"fn {name}", "function", None)
        w = _Walk(name, fid, HOST)
        for p in func.params:
            node = Node(self.node_id(name, p), "input", p.name, cluster=fid, ty=ir.type_str(p.ty), op="param")
            w.values.bind((), p, self.add_node(node))
        out = self.body(w, func, name)
        ret = self.add_node(
            Node(f"{name}.return", "output", f"return ({name})", cluster=fid, ty=ir.type_str(func.ret_ty))
        )
        if out:
            self.edge(out, ret, ir.type_str(func.ret_ty))

    def body(self, w: _Walk, func, fname: str) -> str | None:
        """Draw every binding of ``func``; returns the node of its result."""

        def opens(step) -> bool:
            return self.node_id(w.prefix[step.frame], step.var) in self.expand

        for step in ir.walk(func, self.mod, descend=opens, name=fname):
            self.close_branches(w, step.path)
            nid = self.node_id(w.prefix[step.frame], step.var)
            cluster = self.cluster_of(w, step)
            value = self.binding(w, step, nid, cluster)
            if value is not None:
                w.values.bind(step.frame, step.var, value)
        self.close_branches(w, ())
        res = func.body.body
        return w.values.get((), res) if ir.is_var(res) else None

    def cluster_of(self, w: _Walk, step) -> str:
        last = step.path[-1]
        cluster = w.cluster[(step.frame, last)] if last.kind in ("then", "else") else w.cluster[step.frame]
        region = self.region(w, step)
        if region is None:
            return cluster
        if self.layout_only:
            return self.cluster(f"region_{region.id}", "", "layout", cluster)
        return self.cluster(
            f"region_{region.id}", f"region {region.id} → {region.target}", "region", cluster, region.target
        )

    def close_branches(self, w: _Walk, path):
        """Join each branch the walk has left to its If node."""
        while w.open_branches and path[: len(w.open_branches[-1][0])] != w.open_branches[-1][0]:
            _, frame, if_id, label, branch = w.open_branches.pop()
            res = w.values.get(frame, branch.body) if ir.is_var(branch.body) else None
            if res:
                self.g.edges.append(Edge(res, if_id, label))

    def binding(self, w: _Walk, step, nid, cluster) -> str | None:
        v = step.value
        frame = step.frame
        ty = ir.type_str(step.var.ty)
        if ir.is_var(v):
            return w.values.get(frame, v)  # an alias draws no node
        if isinstance(v, relax.If):
            cond = v.cond.name if ir.is_var(v.cond) else ""
            self.add_node(Node(nid, "if", f"if {cond}", cluster=cluster, ty=ty, op="If"))
            src = self.arg_node(w, frame, v.cond, nid, 0, cluster)
            if src:
                self.edge(src, nid, ir.type_str(v.cond.ty))
            for label, branch in (("else", v.false_branch), ("then", v.true_branch)):
                place = ir.Place(label, step.var.name, step.var)
                w.cluster[(frame, place)] = self.cluster(f"{nid}.{label}", label, label, cluster)
                w.open_branches.append((step.path + (place,), frame, nid, label, branch))
            return nid
        if isinstance(v, relax.Tuple):
            self.add_node(Node(nid, "tuple", "tuple", cluster=cluster, ty=ty, target=self.target_of(w, step)))
            self.connect(w, frame, v.fields, nid, cluster)
            return nid
        if isinstance(v, relax.TupleGetItem):
            self.add_node(Node(nid, "item", f"[{v.index}]", cluster=cluster, ty=ty, target=self.target_of(w, step)))
            self.connect(w, frame, [v.tuple_value], nid, cluster)
            return nid
        if not isinstance(v, relax.Call):
            return None
        return self.call(w, step, nid, cluster, ty)

    def target_of(self, w: _Walk, step) -> str:
        if step.composite:
            return step.composite.split(".", 1)[0]
        region = self.region(w, step)
        if region is None or self.layout_only or isinstance(step.value, relax.Call):
            return w.target
        return region.target

    def region(self, w: _Walk, step):
        """The region a top-level binding of a host function belongs to, if any."""
        if step.frame != () or w.target != HOST:
            return None
        if self.layout_only:
            return self.region_named.get((step.function, step.var.name))
        return self.region_of.get(step.var.__chandle__())

    def call(self, w: _Walk, step, nid, cluster, ty) -> str:
        v = step.value
        input_types = [ir.type_str(a.ty) for a in ir.items(v.args) if hasattr(a, "ty")]
        if step.op == "relax.call_dps_packed":
            symbol = str(v.args[0].global_symbol)
            made = self.packed.get(symbol)
            name, target = (made.name, made.target) if made is not None else (symbol, HOST)
            node = Node(nid, "packed", f"{name}\n(generated code)", target=target, op=symbol, cluster=cluster, ty=ty)
            return self.simple(w, step, node, v.args[1].fields)
        if step.op:
            inside = w.target != HOST or step.composite is not None
            node = Node(
                nid,
                "op",
                short_op(step.op),
                op=step.op,
                cluster=cluster,
                ty=ty,
                input_types=input_types,
                attrs=_attrs(v),
                target=self.target_of(w, step),
                rule=step.composite,
                why=None if inside else self.why.get(step.op, "no rule of this target covers this op"),
            )
            return self.simple(w, step, node, v.args)
        comp = ir.func_attr(step.callee, ir.COMPOSITE)
        if comp:
            return self.composite_call(w, step, nid, cluster, ty, comp)
        if ir.func_attr(step.callee, ir.CODEGEN):
            return self.subgraph_call(w, step, nid, cluster, ty)
        callee_name = ir.callee_name(v)
        node = Node(nid, "call", f"call {callee_name}", op=callee_name, cluster=cluster, ty=ty, input_types=input_types)
        self.simple(w, step, node, v.args)
        if callee_name != step.function:
            self.calls.append((nid, callee_name))
        return nid

    def composite_call(self, w: _Walk, step, nid, cluster, ty, comp) -> str | None:
        """A composite call: one node, or (opened) its body in a cluster, drawn by the same walk."""
        v = step.value
        node = Node(
            nid,
            "composite",
            comp,
            target=comp.split(".", 1)[0],
            op=comp,
            cluster=cluster,
            ty=ty,
            input_types=[ir.type_str(a.ty) for a in v.args if hasattr(a, "ty")],
            rule=comp,
            ops=ir.composite_ops(step.callee),
            expandable=True,
        )
        if not step.descended:
            return self.simple(w, step, node, v.args)
        w.prefix[step.callee_frame] = nid
        w.cluster[step.callee_frame] = self.cluster(f"x_{nid}", comp, "composite", cluster, node.target)
        w.values.enter(step, [self.arg_node(w, step.frame, a, nid, k, cluster) for k, a in enumerate(v.args)])
        return None  # the call's variable stands for the callee's result

    def subgraph_call(self, w: _Walk, step, nid, cluster, ty) -> str | None:
        """A call to a subgraph function: one node, or (opened) a walk of its body in a cluster."""
        v, func = step.value, step.callee
        name = ir.callee_name(v)
        target, ops = self.known.get(name) or (ir.subgraph_target(self.mod, name), ir.ops_in(func, self.mod))
        label = f"{name}\n{_op_counts(ops)}"
        types = [ir.type_str(a.ty) for a in ir.items(v.args) if hasattr(a, "ty")]
        node = Node(nid, "subgraph", label, target=target, op=name, cluster=cluster, ty=ty, input_types=types)
        node.ops, node.expandable = ops, True
        if nid not in self.expand:
            return self.simple(w, step, node, v.args)
        inner = _Walk(nid, self.cluster(f"x_{nid}", label.replace("\n", " "), "subgraph", cluster, target), target)
        for k, (p, a) in enumerate(zip(func.params, v.args)):
            inner.values.bind((), p, self.arg_node(w, step.frame, a, nid, k, cluster))
        return self.body(inner, func, name)

    def simple(self, w: _Walk, step, node, args) -> str:
        self.add_node(node)
        self.connect(w, step.frame, args, node.id, node.cluster)
        return node.id

    def link_calls(self):
        """A dotted edge from each call to the function it calls (not for recursion,
        which would point back up); it also stacks the functions top to bottom."""
        for nid, callee in self.calls:
            cid = f"fn_{callee}"
            first = next((n.id for n in self.g.nodes.values() if n.cluster == cid), None)
            if first is not None:
                self.g.edges.append(Edge(nid, first, "calls", kind="call", to_cluster=cid))


def _op_counts(ops, per_line: int = 4) -> str:
    """``nn.conv2d×73, add×16, ...``, most frequent first, a few per line."""
    counts = {}
    for op in ops:
        counts[short_op(op)] = counts.get(short_op(op), 0) + 1
    items = [f"{k}×{n}" if n > 1 else k for k, n in sorted(counts.items(), key=lambda kv: -kv[1])]
    return ",\n".join(", ".join(items[i : i + per_line]) for i in range(0, len(items), per_line))


def build_graph(
    mod: tvm.IRModule,
    regions=None,
    expand=(),
    why_unclaimed=None,
    packed=None,
    constants=True,
    layout_only=False,
    subgraphs=(),
) -> Graph:
    """The graph of a stage's module.

    Node ids come from the variables the nodes stand for (``while_loop/relu``;
    ``<opened node>/<variable>`` inside an opened call), so they stay the same
    when rules change. ``regions`` (from the merge stage) become clusters;
    ``expand`` names the composite and subgraph calls to draw open, by node id;
    ``why_unclaimed`` maps an op name to the reason no rule claimed it;
    ``packed`` maps a generated symbol to the subgraph it runs (a record with
    ``name`` and ``target``); ``constants=False`` leaves constant arguments out (a model's
    weights). With ``layout_only`` the regions are clusters the reader does not see (kind
    ``layout``): a stage before merge is laid out as the merge stage will be. ``subgraphs``
    (the stage's :class:`~byoc_workbench.flow.summary.Subgraph` records) give each subgraph's
    target and ops, which are otherwise found by walking it again.
    """
    known = {sg.name: (sg.target, list(sg.ops)) for sg in subgraphs}
    builder = _Builder(mod, regions, expand, why_unclaimed, packed, constants, layout_only, known)
    for name in ir.host_functions(mod):
        builder.function(name)
    builder.link_calls()
    builder.g.sites = {(key[0], var): nid for key, (nid, var) in builder.ids.items() if nid in builder.g.nodes}
    return builder.g


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
    label = f"{head}{mix}\n{_op_counts(ops)}"
    return Node(nid, "fold", label, target=target, cluster=cluster, ops=ops, expandable=True, op=what)


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
        out.edges.append(dataclasses.replace(e, src=src, dst=dst, crosses=crosses))
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
    items: dict = {}
    many = sum(n.kind == "subgraph" for n in g.nodes.values()) > MANY_SUBGRAPHS
    kinds = BLOCK_KINDS + (("subgraph",) if many else ())
    for n in g.nodes.values():
        if n.kind in kinds and "/" in n.id:
            items.setdefault(n.cluster, []).append((n.id, n.id.rsplit("/", 1)[1], n.op))
    groups = blocks.find_groups(items, [(e.src, e.dst) for e in g.edges], lambda nid: nid.rsplit("/", 1)[0])
    if not groups:
        return g
    keep_open = set(keep_open)
    innermost = {nid: gid for gid, grp in groups.items() for nid in grp.members}

    def chain(gid):  # gid and its enclosing groups, innermost first
        while gid is not None:
            yield gid
            gid = groups[gid].parent

    def shown(gid):  # the group, or the closed group around it, that is drawn as a node
        closed = [x for x in chain(gid) if x not in keep_open]
        return closed[-1] if closed else None

    def place(gid, cluster):  # the cluster a node directly inside ``gid`` is drawn in
        return f"x_{gid}" if gid is not None else cluster

    clusters = dict(g.clusters)
    for gid, grp in groups.items():
        if shown(gid) is None:  # open, and every group around it open
            parent = place(grp.parent, grp.cluster)
            clusters[f"x_{gid}"] = Cluster(f"x_{gid}", grp.label, "block", parent, g.clusters[grp.cluster].target)
    members: dict = collections.defaultdict(list)  # closed group drawn -> the nodes it hides
    rename, nodes = {}, {}
    order = []  # nodes and closed groups, each where its first node was, so binding order holds
    for nid, n in g.nodes.items():
        gid = innermost.get(nid)
        top = shown(gid) if gid is not None else None
        if top is None:
            nodes[nid] = dataclasses.replace(n, cluster=place(gid, n.cluster)) if gid is not None else n
            order.append(nid)
            continue
        if top not in members:
            order.append(top)
        members[top].append(n)
        rename[nid] = top
    for top, hidden in members.items():
        grp = groups[top]
        nodes[top] = _group_node(top, grp.label, hidden, place(grp.parent, grp.cluster), "block")
    return _remap(g, {nid: nodes[nid] for nid in order}, rename, clusters)


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
    ``keep_open`` is drawn open, as a cluster ``x_<fold id>``. Last, wide ranks
    wrap into rows (:func:`wrap_rows`).
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
            clusters[f"x_{fid}"] = Cluster(f"x_{fid}", label, "fold", first.cluster, first.target)
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
    return wrap_rows(_one_edge_per_neighbour(g, set(opened.values())))


def _fold_title(g: Graph, members: set) -> str:
    """What a folded run connects, from the blocks around it (``anchors → box decoding``); "" for a
    graph without Gluon block names."""
    around = {"in": [], "out": []}
    for e in g.edges:
        if e.kind != "data":
            continue
        if e.dst in members and e.src not in members and g.nodes[e.src].kind != "const":
            around["in"].append(e.src.rsplit("/", 1)[-1])
        elif e.src in members and e.dst not in members:
            around["out"].append(e.dst.rsplit("/", 1)[-1])
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
