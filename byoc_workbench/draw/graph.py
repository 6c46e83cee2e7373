"""A plain graph model of any stage's IRModule, for drawing and inspecting.

No graphviz here: :func:`build_graph` turns a module into dataclasses, which
tests can check directly; :mod:`byoc_workbench.draw.render` draws them.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tvm
from tvm import relax

from .. import ir

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
    to_cluster: str | None = None  # a call edge ends at the callee's cluster


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


def _short(op: str) -> str:
    return op.replace("relax.", "", 1)


class _Builder:
    def __init__(self, mod, regions, expand, why_unclaimed, packed_targets, constants=True):
        self.mod = mod
        self.constants = constants
        self.g = Graph()
        self.expand = set(expand or ())
        self.why = why_unclaimed or {}
        self.packed_targets = packed_targets or {}
        self.region_of = {}
        for r in regions or ():
            for i in r.bindings:
                self.region_of[(r.func, r.block, i)] = r
        self.counter = 0
        self.calls: list = []

    def new_id(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

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

    def arg_node(self, expr, env, cluster) -> str | None:
        if ir.is_var(expr):
            return env.get(expr)
        if isinstance(expr, tvm.ir.expr.Constant) and self.constants:
            value = np.asarray(expr.value.numpy() if hasattr(expr.value, "numpy") else expr.value)
            text = str(value.item()) if value.size == 1 else f"{value.dtype}{list(value.shape)}"
            return self.add_node(
                Node(self.new_id("c"), "const", f"const {text}", cluster=cluster, ty=ir.type_str(expr.ty))
            )
        return None

    def function(self, name: str):
        func = self.mod[name]
        fid = self.cluster(f"fn_{name}", f"fn {name}", "function", None)
        env = {}
        for p in func.params:
            env[p] = self.add_node(
                Node(self.new_id("in"), "input", p.name, cluster=fid, ty=ir.type_str(p.ty), op="param")
            )
        counter = [0]
        out = self.seq(name, func.body, env, fid, counter)
        ret = self.add_node(
            Node(self.new_id("out"), "output", f"return ({name})", cluster=fid, ty=ir.type_str(func.ret_ty))
        )
        if out:
            self.edge(out, ret, ir.type_str(func.ret_ty))

    def seq(self, fname, seq, env, cluster, counter) -> str | None:
        for block in seq.blocks:
            index = counter[0]
            counter[0] += 1
            for j, b in enumerate(block.bindings):
                region = self.region_of.get((fname, index, j))
                where = cluster
                if region is not None:
                    where = self.cluster(
                        f"region_{region.id}", f"region {region.id} → {region.target}", "region", cluster, region.target
                    )
                env[b.var] = self.binding(fname, b, env, where, counter)
        result = seq.body
        if ir.is_var(result):
            return env.get(result)
        return self.arg_node(result, env, cluster)

    def binding(self, fname, b, env, cluster, counter) -> str | None:
        v = b.value
        ty = ir.type_str(b.var.ty)
        if ir.is_var(v):
            return env.get(v)  # an alias draws no node
        if isinstance(v, relax.If):
            nid = self.add_node(
                Node(
                    self.new_id("if"),
                    "if",
                    f"if {v.cond.name if ir.is_var(v.cond) else ''}",
                    cluster=cluster,
                    ty=ty,
                    op="If",
                )
            )
            cond = self.arg_node(v.cond, env, cluster)
            if cond:
                self.edge(cond, nid, ir.type_str(v.cond.ty))
            for label, branch in (("then", v.true_branch), ("else", v.false_branch)):
                bc = self.cluster(self.new_id(f"{label}_"), label, label, cluster)
                res = self.seq(fname, branch, dict(env), bc, counter)
                if res:
                    self.g.edges.append(Edge(res, nid, label))
            return nid
        if isinstance(v, relax.Tuple):
            nid = self.add_node(Node(self.new_id("t"), "tuple", "tuple", cluster=cluster, ty=ty))
            self.connect(v.fields, env, nid, cluster)
            return nid
        if isinstance(v, relax.TupleGetItem):
            nid = self.add_node(Node(self.new_id("g"), "item", f"[{v.index}]", cluster=cluster, ty=ty))
            self.connect([v.tuple_value], env, nid, cluster)
            return nid
        if isinstance(v, relax.Function):
            return None
        if not isinstance(v, relax.Call):
            return None
        return self.call(fname, b, v, env, cluster, ty)

    def connect(self, args, env, nid, cluster):
        for a in args:
            if isinstance(a, relax.Tuple):  # concat and friends take their inputs as a tuple
                self.connect(a.fields, env, nid, cluster)
                continue
            src = self.arg_node(a, env, cluster)
            if src:
                self.edge(src, nid, self.g.nodes[src].ty)

    def call(self, fname, b, v, env, cluster, ty) -> str:
        input_types = [ir.type_str(a.ty) for a in v.args if hasattr(a, "ty")]
        if isinstance(v.op, tvm.ir.Op) and v.op.name == "relax.call_dps_packed":
            symbol = str(v.args[0].global_symbol)
            subgraph = symbol.split(".")[1] if symbol.startswith("byoc_workbench.") else symbol
            target = self.packed_targets.get(subgraph, HOST)
            nid = self.add_node(
                Node(
                    self.new_id("p"),
                    "packed",
                    f"{subgraph}\n(generated code)",
                    target=target,
                    op=symbol,
                    cluster=cluster,
                    ty=ty,
                )
            )
            self.connect(v.args[1].fields, env, nid, cluster)
            return nid
        if isinstance(v.op, tvm.ir.Op):
            why = self.why.get(v.op.name, "no rule of this target covers this op")
            nid = self.add_node(
                Node(
                    self.new_id("n"),
                    "op",
                    _short(v.op.name),
                    op=v.op.name,
                    cluster=cluster,
                    ty=ty,
                    input_types=input_types,
                    attrs=_attrs(v),
                    why=why,
                )
            )
            self.connect(v.args, env, nid, cluster)
            return nid
        func = ir.callee(self.mod, v)
        comp = ir.func_attr(func, ir.COMPOSITE) if func is not None else None
        codegen = ir.func_attr(func, ir.CODEGEN) if func is not None else None
        callee_name = ir.callee_name(v)
        if comp:
            target = comp.split(".", 1)[0]
            nid = self.new_id("k")
            ops = ir.ops_in(func, self.mod)
            node = Node(
                nid,
                "composite",
                comp,
                target=target,
                op=comp,
                cluster=cluster,
                ty=ty,
                input_types=input_types,
                rule=comp,
                ops=ops,
                expandable=True,
            )
            return (
                self.expanded(node, func, v.args, env, cluster)
                if (nid in self.expand or comp in self.expand)
                else self.simple(node, v.args, env, cluster)
            )
        if codegen:
            target = ir.subgraph_target(self.mod, callee_name)
            ops = ir.ops_in(func, self.mod)
            label = f"{callee_name}\n{_op_counts(ops)}"
            node = Node(
                self.new_id("s"),
                "subgraph",
                label,
                target=target,
                op=callee_name,
                cluster=cluster,
                ty=ty,
                input_types=input_types,
                ops=ops,
                expandable=True,
            )
            return (
                self.expanded(node, func, v.args, env, cluster)
                if callee_name in self.expand
                else self.simple(node, v.args, env, cluster)
            )
        nid = self.add_node(
            Node(
                self.new_id("f"),
                "call",
                f"call {callee_name}",
                op=callee_name,
                cluster=cluster,
                ty=ty,
                input_types=input_types,
            )
        )
        self.connect(v.args, env, nid, cluster)
        if callee_name != fname:
            self.calls.append((nid, callee_name))
        return nid

    def link_calls(self):
        """A dotted edge from each call to the function it calls (not for recursion,
        which would point back up); it also stacks the functions top to bottom."""
        for nid, callee in self.calls:
            cid = f"fn_{callee}"
            first = next((n.id for n in self.g.nodes.values() if n.cluster == cid), None)
            if first is not None:
                self.g.edges.append(Edge(nid, first, "calls", kind="call", to_cluster=cid))

    def simple(self, node, args, env, cluster) -> str:
        self.add_node(node)
        self.connect(args, env, node.id, cluster)
        return node.id

    def expanded(self, node, func, args, env, cluster) -> str:
        """Draw ``func``'s body inside a cluster in place of one node."""
        kind = node.kind
        cid = self.cluster(f"x_{node.id}", node.label.replace("\n", " "), kind, cluster, node.target)
        inner_env = {}
        for p, a in zip(func.params, args):
            src = self.arg_node(a, env, cluster)
            if src:
                inner_env[p] = src
        local = {}
        for _, block in ir.blocks_of(func.body):
            for b in block.bindings:
                if isinstance(b.value, relax.Function):
                    local[b.var] = b.value
                    continue
                inner = ir.called_function(self.mod, b.value, local) if isinstance(b.value, relax.Call) else None
                if inner is not None and b.value.op in local:
                    comp = ir.func_attr(inner, ir.COMPOSITE)
                    sub = Node(
                        self.new_id("k"),
                        "composite",
                        comp or "fn",
                        target=node.target,
                        op=comp or "",
                        cluster=cid,
                        ty=ir.type_str(b.var.ty),
                        rule=comp,
                        ops=ir.ops_in(inner, self.mod),
                        expandable=True,
                    )
                    inner_env[b.var] = (
                        self.expanded(sub, inner, b.value.args, inner_env, cid)
                        if (comp in self.expand or sub.id in self.expand)
                        else self.simple(sub, b.value.args, inner_env, cid)
                    )
                    continue
                nid = self.binding(node.op, b, inner_env, cid, [0])
                if nid and self.g.nodes[nid].kind == "op":
                    self.g.nodes[nid].target = node.target
                    self.g.nodes[nid].rule = node.rule
                    self.g.nodes[nid].why = None
                inner_env[b.var] = nid
        res = func.body.body
        return inner_env.get(res) if ir.is_var(res) else None


def _op_counts(ops, per_line: int = 4) -> str:
    """``nn.conv2d×73, add×16, ...``, most frequent first, a few per line."""
    counts = {}
    for op in ops:
        counts[_short(op)] = counts.get(_short(op), 0) + 1
    items = [f"{k}×{n}" if n > 1 else k for k, n in sorted(counts.items(), key=lambda kv: -kv[1])]
    return ",\n".join(", ".join(items[i : i + per_line]) for i in range(0, len(items), per_line))


def build_graph(
    mod: tvm.IRModule, regions=None, expand=(), why_unclaimed=None, packed_targets=None, constants=True
) -> Graph:
    """The graph of a stage's module.

    ``regions`` (from the merge stage) become clusters; ``expand`` names
    composites (by composite name or node id) and subgraphs (by function name)
    to draw open; ``why_unclaimed`` maps an op name to the reason no rule
    claimed it; ``packed_targets`` maps a compiled subgraph name to its target;
    ``constants=False`` leaves constant arguments out (a model's weights).
    """
    builder = _Builder(mod, regions, expand, why_unclaimed, packed_targets, constants)
    for name in ir.host_functions(mod):
        builder.function(name)
    builder.link_calls()
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
    parent = {nid: nid for nid in eligible}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for e in g.edges:
        if e.src in eligible and e.dst in eligible:
            a, b = g.nodes[e.src], g.nodes[e.dst]
            if a.cluster == b.cluster and a.target == b.target:
                parent[find(e.src)] = find(e.dst)
    groups: dict = {}
    for nid in g.nodes:  # node order is binding order, so members come out in order
        if nid in eligible:
            groups.setdefault(find(nid), []).append(nid)
    return list(groups.values())


def _moves_data(n: Node) -> bool:
    ops = n.ops if n.kind == "composite" else [n.op]
    return bool(ops) and all(op in DATA_MOVEMENT for op in ops)


def fold_chains(g: Graph, min_size: int = 8, chunk: int = 40, keep_open=()) -> Graph:
    """``g`` with long runs of ops folded into expandable ``fold`` nodes.

    First, each connected run of at least ``min_size`` data-movement ops (one
    cluster, one target) becomes one node: SSD's anchor and box-decoding tail.
    Then the remaining runs of ops and composites of one target are folded in
    pieces of at most ``chunk`` nodes, in binding order, so a backbone reads as
    a short chain. A fold is named ``fold_<first member id>``; those named in
    ``keep_open`` stay open.
    """
    kinds = ("op", "composite")
    taken: dict = {}
    movers = {nid for nid, n in g.nodes.items() if n.kind in kinds and _moves_data(n)}
    for members in _components(g, movers):
        if len(members) >= min_size:
            taken[f"fold_{members[0]}"] = members
    folded = {m for ms in taken.values() for m in ms}
    rest = {nid for nid, n in g.nodes.items() if n.kind in kinds and nid not in folded}
    for members in _components(g, rest):
        if len(members) >= min_size:
            for i in range(0, len(members), chunk):
                piece = members[i : i + chunk]
                taken[f"fold_{piece[0]}"] = piece
    out = Graph(clusters=dict(g.clusters))
    rename: dict = {}
    for fid, members in taken.items():
        if fid in keep_open:
            continue
        ops = [op for m in members for op in (g.nodes[m].ops if g.nodes[m].kind == "composite" else [g.nodes[m].op])]
        first = g.nodes[members[0]]
        label = f"{len(ops)} ops\n{_op_counts(ops)}"
        out.nodes[fid] = Node(
            fid, "fold", label, target=first.target, cluster=first.cluster, ops=ops, expandable=True, op="folded"
        )
        rename.update({m: fid for m in members})
    for nid, n in g.nodes.items():
        if nid not in rename:
            out.nodes[nid] = n
    seen = set()
    for e in g.edges:
        src, dst = rename.get(e.src, e.src), rename.get(e.dst, e.dst)
        if src == dst or (src, dst) in seen:
            continue
        seen.add((src, dst))
        a, b = out.nodes[src], out.nodes[dst]
        crosses = e.kind == "data" and a.target != b.target and a.kind != "const"
        out.edges.append(Edge(src, dst, e.label, crosses, e.kind, e.to_cluster))
    return out
