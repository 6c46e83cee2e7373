"""A plain graph model of any stage's IRModule, for drawing and inspecting.

No graphviz here: :func:`build_graph` turns a module into dataclasses, which
tests can check directly; :mod:`byoc_workbench.draw.render` draws them, and
:mod:`byoc_workbench.draw.folding` folds a large one to a readable size first.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Literal

import numpy as np
import tvm
from tvm import relax

from byoc_workbench.core import devices, ir, ir_types, tvm_private
from byoc_workbench.flow.summary import HOST, function_steps

NodeKind = Literal[
    "input",
    "const",
    "op",
    "composite",
    "subgraph",
    "packed",
    "call",
    "if",
    "tuple",
    "item",
    "output",
    "fold",
    "boundary",
]  # boundary: a subgraph's way in or out, in the latency view
EdgeKind = Literal["data", "call"]
BoxKind = Literal["function", "then", "else", "region", "layout", "subgraph", "composite", "block", "fold"]


@dataclasses.dataclass
class Node:
    id: str
    kind: NodeKind
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
    on_cpu: str = ""  # why it runs on the CPU when TVM builds for a GPU ("" when it runs on the GPU)
    # ``id`` is ``<scope>/<var>`` for a node a binding makes (``main``, ``relu~1``) and for a closed block
    # (``main``, ``ssd0_resnetv10_``): its parts, kept; "" for others (constants, returns, folded runs).
    scope: str = ""
    var: str = ""


@dataclasses.dataclass
class Edge:
    src: str
    dst: str
    label: str = ""
    crosses: bool = False  # data crosses a target boundary
    kind: EdgeKind = "data"  # call: from a call node to the function it calls
    to_cluster: str | None = None  # drawn ending at this cluster's border (a callee, an opened run)
    from_cluster: str | None = None  # drawn starting at this cluster's border (an opened run)


@dataclasses.dataclass
class Box:
    """A box drawn around nodes (Graphviz's cluster subgraph): a function, a branch, a region, a subgraph."""

    id: str
    label: str
    kind: BoxKind
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
        self.parts: dict = {}  # node id -> (scope, var), for every id given out
        self.calls: list = []

    def node_id(self, prefix: str, var) -> str:
        """``<function or opened call>/<variable>``, then ``~k`` for the k-th reuse of a name:
        the same value keeps its id when rules change, so a selection survives a toggle."""
        key = (prefix, var.__chandle__())
        if key not in self.ids:
            name, k = var.name, 1
            while f"{prefix}/{name}" in self.parts:
                name, k = f"{var.name}~{k}", k + 1
            nid = f"{prefix}/{name}"
            self.ids[key] = (nid, var)
            self.parts[nid] = (prefix, name)
        return self.ids[key][0]

    def add_node(self, node: Node) -> str:
        node.scope, node.var = self.parts.get(node.id, (node.scope, node.var))
        self.g.nodes[node.id] = node
        return node.id

    def edge(self, src_id: str, dst_id: str, ty: str = ""):
        s, d = self.g.nodes[src_id], self.g.nodes[dst_id]
        crosses = s.target != d.target and s.kind != "const"
        self.g.edges.append(Edge(src_id, dst_id, ty, crosses))

    def cluster(self, cid, label, kind: BoxKind, parent, target=HOST):
        self.g.clusters.setdefault(cid, Box(cid, label, kind, parent, target))
        return cid

    # -- values -----------------------------------------------------------------

    def arg_node(self, w: _Walk, frame, expr, consumer: str, k, cluster) -> str | None:
        """The node of an argument: its variable's, or a new constant node ``<consumer>.c<k>``."""
        if ir.is_var(expr):
            return w.values.get(frame, expr)
        if self.constants and isinstance(expr, tvm.ir.expr.Constant):
            value = np.asarray(expr.value.numpy() if hasattr(expr.value, "numpy") else expr.value)
            text = str(value.item()) if value.size == 1 else f"{value.dtype}{list(value.shape)}"
            return self.add_node(
                Node(f"{consumer}.c{k}", "const", f"const {text}", cluster=cluster, ty=ir_types.type_str(expr.ty))
            )
        return None

    def connect(self, w: _Walk, frame, args, nid, cluster):
        for k, a in enumerate(tvm_private.items(args)):
            # concat and friends take their inputs as a tuple
            fields = tvm_private.items(a.fields) if type(a) is relax.Tuple else None
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
            node = Node(self.node_id(name, p), "input", p.name, cluster=fid, ty=ir_types.type_str(p.ty), op="param")
            w.values.bind((), p, self.add_node(node))
        out = self.body(w, func, name)
        ret = self.add_node(
            Node(f"{name}.return", "output", f"return ({name})", cluster=fid, ty=ir_types.type_str(func.ret_ty))
        )
        if out:
            self.edge(out, ret, ir_types.type_str(func.ret_ty))

    def body(self, w: _Walk, func, fname: str) -> str | None:
        """Draw every binding of ``func``; returns the node of its result."""

        def opens(step) -> bool:
            return self.node_id(w.prefix[step.frame], step.var) in self.expand

        # With nothing opened, the walk is the one the stage's census made (kept: see function_steps).
        steps = (
            ir.walk(func, self.mod, descend=opens, name=fname) if self.expand else function_steps(func, self.mod, fname)
        )
        for step in steps:
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
        ty = ir_types.type_str(step.var.ty)
        if ir.is_var(v):
            return w.values.get(frame, v)  # an alias draws no node
        kind = type(v)  # exact type tests, as ir.walk's: an isinstance that fails goes through abc
        if kind is relax.Call:
            return self.call(w, step, nid, cluster, ty)
        if kind is relax.If:
            cond = v.cond.name if ir.is_var(v.cond) else ""
            self.add_node(Node(nid, "if", f"if {cond}", cluster=cluster, ty=ty, op="If"))
            src = self.arg_node(w, frame, v.cond, nid, 0, cluster)
            if src:
                self.edge(src, nid, ir_types.type_str(v.cond.ty))
            for label, branch in (("else", v.false_branch), ("then", v.true_branch)):
                place = ir.Place(label, step.var.name, step.var)
                w.cluster[(frame, place)] = self.cluster(f"{nid}.{label}", label, label, cluster)
                w.open_branches.append((step.path + (place,), frame, nid, label, branch))
            return nid
        if kind is relax.Tuple:
            self.add_node(Node(nid, "tuple", "tuple", cluster=cluster, ty=ty, target=self.target_of(w, step)))
            self.connect(w, frame, v.fields, nid, cluster)
            return nid
        if kind is relax.TupleGetItem:
            self.add_node(Node(nid, "item", f"[{v.index}]", cluster=cluster, ty=ty, target=self.target_of(w, step)))
            self.connect(w, frame, [v.tuple_value], nid, cluster)
            return nid
        return None

    def target_of(self, w: _Walk, step) -> str:
        if step.composite:
            return step.composite.split(".", 1)[0]
        region = self.region(w, step)
        if region is None or self.layout_only or type(step.value) is relax.Call:
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
        args = tvm_private.items(v.args)
        input_types = _types_of(args)
        if step.op == "relax.call_dps_packed":
            symbol = str(v.args[0].global_symbol)
            made = self.packed.get(symbol)
            name, target = (made.name, made.target) if made is not None else (symbol, HOST)
            packed_args = tvm_private.items(v.args[1].fields)
            node = Node(
                nid,
                "packed",
                f"{name}\n(generated code)",
                target=target,
                op=symbol,
                cluster=cluster,
                ty=ty,
                input_types=_types_of(packed_args),
            )
            return self.simple(w, step, node, packed_args)
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
            return self.simple(w, step, node, args)
        comp = ir.func_attr(step.callee, ir.COMPOSITE)
        if comp:
            return self.composite_call(w, step, nid, cluster, ty, comp, args, input_types)
        if ir.func_attr(step.callee, ir.CODEGEN):
            return self.subgraph_call(w, step, nid, cluster, ty, args, input_types)
        callee_name = ir.callee_name(v)
        node = Node(nid, "call", f"call {callee_name}", op=callee_name, cluster=cluster, ty=ty, input_types=input_types)
        self.simple(w, step, node, args)
        if callee_name != step.function:
            self.calls.append((nid, callee_name))
        return nid

    def composite_call(self, w: _Walk, step, nid, cluster, ty, comp, args, input_types) -> str | None:
        """A composite call (its ``args`` and their types): one node, or (opened) its body in a cluster,
        drawn by the same walk."""
        node = Node(
            nid,
            "composite",
            comp,
            target=comp.split(".", 1)[0],
            op=comp,
            cluster=cluster,
            ty=ty,
            input_types=input_types,
            rule=comp,
            ops=ir.composite_ops(step.callee),
            expandable=True,
        )
        if not step.descended:
            return self.simple(w, step, node, args)
        w.prefix[step.callee_frame] = nid
        w.cluster[step.callee_frame] = self.cluster(f"x_{nid}", comp, "composite", cluster, node.target)
        w.values.enter(step, [self.arg_node(w, step.frame, a, nid, k, cluster) for k, a in enumerate(args)])
        return None  # the call's variable stands for the callee's result

    def subgraph_call(self, w: _Walk, step, nid, cluster, ty, args, types) -> str | None:
        """A call to a subgraph function (its ``args`` and their types): one node, or (opened) a walk
        of its body in a cluster."""
        v, func = step.value, step.callee
        name = str(ir.callee_name(v))  # a plain string: a GlobalVar's name is an FFI one
        target, ops = self.known.get(name) or (ir.subgraph_target(self.mod, name), ir.ops_in(func, self.mod))
        label = f"{name}\n{_op_counts_of(tuple(ops))}"
        node = Node(nid, "subgraph", label, target=target, op=name, cluster=cluster, ty=ty, input_types=types)
        node.ops, node.expandable = ops, True
        if nid not in self.expand:
            return self.simple(w, step, node, args)
        inner = _Walk(nid, self.cluster(f"x_{nid}", label.replace("\n", " "), "subgraph", cluster, target), target)
        for k, (p, a) in enumerate(zip(func.params, args)):
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


def _types_of(args: list) -> list:
    """The types of a call's arguments as text (those that have one)."""
    out = []
    for a in args:
        ty = getattr(a, "ty", _NO_TYPE)  # read once: each read through the FFI makes a new object
        if ty is not _NO_TYPE:
            out.append(ir_types.type_str(ty))
    return out


_NO_TYPE = object()


@functools.lru_cache(maxsize=256)
def _op_counts_of(ops: tuple) -> str:
    """:func:`ops_label`, kept per list of ops: a partition's thousands of subgraphs have a few."""
    return ops_label(ops)


def ops_label(ops, per_line: int = 4) -> str:
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
    _mark_cpu(builder.g, mod)
    return builder.g


def on_cpu_of(members) -> str:
    """What a group of nodes drawn as one says of the CPU: why, when every member runs there in a GPU build."""
    members = list(members)
    if not members or not all(m.on_cpu for m in members):
        return ""
    whys = {m.on_cpu for m in members}
    if len(whys) == 1:
        return whys.pop()
    none = sorted({short_op(m.op) for m in members if m.op in devices.CPU_ONLY})
    return f"no GPU kernel in TVM 0.27 for {', '.join(none)}; the rest reads only what they made"


def _mark_cpu(g: Graph, mod: tvm.IRModule) -> None:
    """Each node that a GPU build runs on the CPU says why (:func:`byoc_workbench.core.devices.propose`)."""
    if not any(n.op in devices.CPU_ONLY for n in g.nodes.values()):
        return  # nearly every model: no second walk of the module on a rule toggle's redraw
    placement = devices.propose(mod)
    if not placement:
        return
    for (function, var), nid in g.sites.items():
        if placement.runs_on_cpu(function, var.name) and g.nodes[nid].kind != "input":
            node = g.nodes[nid]
            why = placement.cpu_only.get(node.op)
            node.on_cpu = f"no GPU kernel in TVM 0.27: {why}" if why else "reads only what the CPU made"
