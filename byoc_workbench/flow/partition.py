"""Apply regions: lift each into a global function, and prune some back.

``partition`` is the seed's ``PartitionGraph``: each region becomes a global
function with the attributes ``Codegen`` and ``global_symbol``, holding its
composite functions as local functions (as upstream ``MergeCompositeFunctions``
does), and the host calls it. ``prune`` is the reverse for chosen subgraphs:
their ops return to the host function, inline.

Both rebuild a function block by block, through If branches, so they work
where the upstream passes fail (control flow, recursion).
"""

from __future__ import annotations

import collections
import heapq

import tvm
from tvm import relax

from byoc_workbench.core import ir, ir_edit, ir_types, tvm_private
from byoc_workbench.flow.regions import Region
from byoc_workbench.flow.rules import codegen_name


class _Copies:
    """Copies of composite functions with fresh variables, one per placement after the first.

    FuseOpsByPattern gives identical matches one function (all 1,500 convolutions of a
    6,000-op model), but a variable may be bound only once in a module, so each placement
    after the first takes a copy. Copies are kept across partitions (IR never changes, and
    within one module each copy is placed once): a rule toggle takes the copies the run
    before it made instead of making 4,500 again.
    """

    # composite's handle -> (composite, its copies made so far); the composite kept alive keeps its handle its own
    _pool: collections.OrderedDict = collections.OrderedDict()
    KEPT = 512  # composites whose copies are kept

    def __init__(self):
        self._used: dict = {}  # composite's handle -> placements in this module

    def take(self, composite: relax.Function) -> relax.Function:
        h = composite.__chandle__()
        k = self._used.get(h, 0)
        self._used[h] = k + 1
        if k == 0:
            return composite
        _, pool = self._pool.setdefault(h, (composite, []))
        self._pool.move_to_end(h)
        while len(self._pool) > self.KEPT:
            self._pool.popitem(last=False)
        while len(pool) < k:
            pool.append(ir_edit.copy_with_new_vars(composite))
        return pool[k - 1]


def _region_function(mod, members: list, region: Region, outputs: list, name: str, copies: _Copies):
    """``(function, inputs, type)``: the lifted function of a region (its member bindings, in order), the
    variables it takes, and the type of its call in the caller's sizes (see :func:`_defines_sizes`).

    A composite becomes a local function, a copy of it where it is placed twice (see :class:`_Copies`)."""
    # Each binding's variable and value read once: every read through the FFI makes a new Python object.
    pairs = [(b.var, b.value) for b in members]
    defined = {var.__chandle__() for var, _ in pairs}
    inputs, seen = [], set()
    for _, value in pairs:
        for v in ir.free_vars(value):
            h = v.__chandle__()
            if h not in defined and h not in seen:
                seen.add(h)
                inputs.append(v)
    types = [v.ty for v in inputs]
    params = [tvm_private.new_var(v.name, ty, dataflow=False) for v, ty in zip(inputs, types)]
    mapping = ir_edit.by_handle(zip(inputs, params))  # keyed by handle, as everything here (see ir_edit.by_handle)
    out_handles = {o.__chandle__() for o in outputs}
    new_bindings = []
    for var, value in pairs:
        composite = None
        if type(value) is relax.Call and type(value.op) is tvm.ir.GlobalVar:  # exact type tests, as ir.walk's
            composite = ir.callee(mod, value)
        if composite is not None:
            args = [ir_edit.substitute(a, mapping, same_types=True) for a in tvm_private.items(value.args)]
            local = copies.take(composite)
            # Bound to a variable of its own, as Normalize would bind it, so that Normalize is not run
            # here: it would make every local function anew, and what is kept per function with it.
            lv = tvm_private.new_var("lv", local.ty)
            new_bindings.append(relax.VarBinding(lv, local))
            value = tvm_private.new_call(lv, args, value.ty)
        else:
            value = ir_edit.substitute(value, mapping, same_types=True)
        h = var.__chandle__()
        new_var = mapping[h] = ir_edit.fresh_var(var, dataflow=h not in out_handles)
        new_bindings.append(relax.VarBinding(new_var, value))
    outs = [mapping[o.__chandle__()] for o in outputs]
    ret_ty = outs[0].ty if len(outs) == 1 else relax.TupleType([o.ty for o in outs])
    result = outs[0] if len(outs) == 1 else ir_edit.typed(relax.Tuple(outs), ret_ty)
    body = ir_edit.typed(relax.SeqExpr([relax.DataflowBlock(new_bindings)], result), ret_ty)
    # Made with its attributes: with_attrs would make the function a second time.
    attrs = tvm.ir.DictAttrs({ir.CODEGEN: codegen_name(region.target), ir.GLOBAL_SYMBOL: name})
    func = relax.Function(params, body, ret_ty, True, attrs)
    if any(_defines_sizes(ty) for ty in types):
        # A symbolic size (a batch n) is defined by the one function whose parameters name it: the
        # lifted function takes new ones (upstream's copy renews them; it is the rare path, 1 ms).
        func = relax.utils.copy_with_new_vars(func)
    return func, inputs, ret_ty


def _defines_sizes(ty) -> bool:
    """Whether a parameter of type ``ty`` defines symbolic sizes (``n`` in ``R.Tensor((n, 3))``)."""
    return not ir_types.is_static(ty) and bool(relax.analysis.definable_tir_vars_in_type(ty))


def _topo_units(units: list) -> list:
    """Order units (lists of bindings) so each comes after what it reads, keeping source order; a unit
    ``defines`` variables by handle and ``reads`` variables."""
    unit_of = {}  # variable's handle -> its unit
    for k, unit in enumerate(units):
        for h in unit["defines"]:
            unit_of[h] = k
    deps = {
        k: {unit_of[h] for h in map(_handle, unit["reads"]) if h in unit_of and unit_of[h] != k}
        for k, unit in enumerate(units)
    }
    users = {k: [] for k in range(len(units))}
    for k, ds in deps.items():
        for d in ds:
            users[d].append(k)
    ready = [(units[k]["order"], k) for k, ds in deps.items() if not ds]
    heapq.heapify(ready)
    done = []
    waiting = {k: len(ds) for k, ds in deps.items()}
    while ready:
        _, k = heapq.heappop(ready)
        done.append(k)
        for u in users[k]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, (units[u]["order"], u))
    if len(done) != len(units):
        raise RuntimeError("partition made a cycle between regions; this is a bug in byoc_workbench.flow.regions")
    return [units[k] for k in done]


def subgraph_names(regions: list, given: dict | None = None) -> dict[int, str]:
    """``{region id: name}``: the function each region is lifted into, ``<codegen>_<k>`` numbered in
    region order per codegen, unless ``given`` (``{region id: name}``) names it."""
    given, names, counters = given or {}, {}, {}
    for region in regions:
        cg = codegen_name(region.target)
        names[region.id] = given.get(region.id) or f"{cg}_{counters.get(cg, 0)}"
        counters[cg] = counters.get(cg, 0) + 1
    return names


def partition(mod: tvm.IRModule, regions: list, names: dict | None = None) -> tvm.IRModule:
    """Lift every region into a global function named ``<codegen>_<k>``, numbered in region order,
    unless ``names`` (``{region id: name}``) names it."""
    editor = ir_edit.ModuleEditor(mod)
    names = subgraph_names(regions, names)
    copies = _Copies()
    called: set = set()  # the global functions the host functions call once partitioned
    for fname in ir.host_functions(mod):
        region_of = {v.__chandle__(): r for r in regions if r.func == fname for v in r.members}
        if not region_of:
            called.update(*ir.calls_between_functions(mod, [fname]).values())
            continue

        def rewrite(is_df, bindings, region_of=region_of):
            by_region: dict = {}  # region id -> (index of its first binding, its bindings), in order
            handles = [b.var.__chandle__() for b in bindings]
            for j, (b, h) in enumerate(zip(bindings, handles)):
                region = region_of.get(h)
                if region is not None:
                    by_region.setdefault(region.id, (j, []))[1].append(b)
                else:
                    called.update(_global_callee(b.value))
            if not by_region:
                return bindings
            units = []
            for rid, (first, members) in by_region.items():
                inside = [b.var.__chandle__() for b in members]
                region = region_of[inside[0]]
                outputs = list(region.outputs)  # propose_regions found who reads what
                sub, inputs, host_ty = _region_function(mod, members, region, outputs, names[rid], copies)
                gv = editor.add(names[rid], sub, normal=True)
                call = tvm_private.new_call(gv, list(inputs), host_ty)
                if len(outputs) == 1:
                    new = [relax.VarBinding(outputs[0], call)]
                else:
                    # Named after its first output, so the name stays when other regions come and go.
                    tup = (relax.DataflowVar if is_df else relax.Var)(f"{outputs[0].name}_outs", host_ty)
                    new = [relax.VarBinding(tup, call)]
                    new += [
                        relax.VarBinding(o, ir_edit.typed(relax.TupleGetItem(tup, k), o.ty))
                        for k, o in enumerate(outputs)
                    ]
                units.append({"bindings": new, "defines": inside, "reads": inputs, "order": first})
            for j, (b, h) in enumerate(zip(bindings, handles)):
                if h not in region_of:
                    units.append({"bindings": [b], "defines": [h], "reads": _reads(b), "order": j})
            return [b for unit in _topo_units(units) for b in unit["bindings"]]

        editor.update(fname, ir_edit.rebuild(mod[fname], rewrite))
    new_mod = editor.finish()
    # Composites now live inside the subgraphs as local functions: only host functions still call global ones.
    # (The module's own functions are asked, not the new module's thousands of subgraphs.)
    unused = [
        gv.name_hint for gv, f in mod.functions.items() if ir.func_attr(f, ir.COMPOSITE) and gv.name_hint not in called
    ]
    for name in unused:
        del new_mod[new_mod.get_global_var(name)]
    return new_mod


def _global_callee(value) -> tuple:
    """The name of the global function a binding's value calls, if it calls one."""
    if type(value) is relax.Call and type(value.op) is tvm.ir.GlobalVar:
        return (value.op.name_hint,)
    return ()


def _handle(var) -> int:
    return var.__chandle__()


def _reads(binding) -> list:
    """Variables a binding reads from outside itself; an If reads what its branches read."""
    value = binding.value
    if not isinstance(value, relax.If):
        return ir.free_vars(value)
    inner = [s for branch in (value.true_branch, value.false_branch) for s in ir.walk(branch, descend=False)]
    defined = {s.var.__chandle__() for s in inner}
    reads = ir.reads(value) + [v for s in inner for v in ir.reads(s.value)]
    return [v for v in reads if v.__chandle__() not in defined]


def inline_subgraphs(mod: tvm.IRModule, names) -> tvm.IRModule:
    """Return the subgraphs ``names`` to their host functions, as plain ops."""
    names = set(names)
    if not names:
        return mod

    def inline(binding, is_df):
        v = binding.value
        if isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.GlobalVar) and v.op.name_hint in names:
            return _inline_call(mod[v.op], v.args, binding.var, is_df)
        return None

    return ir_edit.map_bindings(mod, inline, remove=sorted(names))


def _inline_call(func: relax.Function, args, result_var, is_df: bool) -> list:
    """Bindings that compute ``result_var = func(*args)`` in place, composites flattened."""
    func = _in_sizes_of(func, args)
    steps = list(ir.walk(func))
    # Follow the result through the composite calls that compute it, so that the binding
    # which finally computes it binds ``result_var`` itself.
    calls = {(s.frame, s.var): (s.callee_frame, s.callee.body.body) for s in steps if s.descended}
    final = ((), func.body.body)
    while final in calls:
        final = calls[final]
    # The binding that computes a composite's result takes the name of the call it replaces
    # (FuseOpsByPattern names it gv), so a node keeps its name, and its id, when it returns to the host.
    names = {(s.callee_frame, s.callee.body.body): s.var.name for s in steps if s.descended}
    values = ir.Values(pack=lambda fields: relax.Tuple(list(fields)))
    for p, a in zip(func.params, args):
        values.bind((), p, a)
    out = []
    for s in steps:
        if s.descended:
            values.enter(s, [values.get(s.frame, a) for a in s.value.args])
            continue
        name = names.get((s.frame, s.var))
        var = result_var if (s.frame, s.var) == final else ir_edit.fresh_var(s.var, name, dataflow=is_df)
        value = ir_edit.substitute(
            s.value, ir_edit.by_handle((v, values.get(s.frame, v)) for v in ir.free_vars(s.value))
        )
        out.append(relax.VarBinding(var, value))
        values.bind(s.frame, s.var, var)
    if not any(b.var.same_as(result_var) for b in out):
        out.append(relax.VarBinding(result_var, values.get(*final)))
    return out


def _in_sizes_of(func: relax.Function, args) -> relax.Function:
    """``func`` with the symbolic sizes that its parameters define, and those its local composites'
    define, given as ``args`` give them: inlined, its bindings must use the caller's ``n``, not their own."""
    sizes = _sizes_between(tvm_private.items(func.params), args)
    if sizes:
        func = func.bind_symbolic_vars(sizes)
    own = {}  # local function's variable (handle) -> its sizes, as its call's arguments give them
    for s in ir.walk(func, descend=False):
        if s.callee is not None and ir.is_var(s.value.op):
            found = _sizes_between(tvm_private.items(s.callee.params), tvm_private.items(s.value.args))
            if found:
                own[s.value.op.__chandle__()] = found
    if not own:  # static sizes: nothing to bind
        return func

    def bind(is_df, bindings):
        out = []
        for b in bindings:
            found = own.get(b.var.__chandle__()) if type(b.value) is relax.Function else None
            out.append(relax.VarBinding(b.var, b.value.bind_symbolic_vars(found)) if found else b)
        return out

    return ir_edit.rebuild(func, bind)


def _sizes_between(params: list, args) -> dict:
    """``{size: value}``: each symbolic size named by a parameter's type, as its argument's type gives it."""
    sizes: dict = {}

    def match(p, a):
        if isinstance(p, relax.TupleType) and isinstance(a, relax.TupleType):
            for fp, fa in zip(tvm_private.items(p.fields), tvm_private.items(a.fields)):
                match(fp, fa)
        elif hasattr(getattr(p, "shape", None), "values") and hasattr(getattr(a, "shape", None), "values"):
            for dp, da in zip(tvm_private.items(p.shape.values), tvm_private.items(a.shape.values)):
                if type(dp).__name__ in ("Var", "SizeVar") and not dp.same_as(da):
                    sizes.setdefault(dp, da)

    for p, a in zip(params, args):
        if not ir_types.is_static(p.ty):
            match(p.ty, a.ty)
    return sizes


def flatten_subgraphs(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with each subgraph's composites inlined and its ``Codegen`` attribute dropped.

    TVM then compiles the subgraphs itself, so a partition can be run, and
    checked against the source, on a target whose codegen is not installed.
    """
    editor = ir_edit.ModuleEditor(mod)
    for name in ir.subgraph_functions(mod):
        func = mod[name]
        result = relax.Var("result", func.ret_ty)
        body = relax.SeqExpr([relax.DataflowBlock(_inline_call(func, func.params, result, True))], result)
        editor.update(
            name, relax.Function(func.params, body, func.ret_ty, func.is_pure).with_attr(ir.GLOBAL_SYMBOL, name)
        )
    return editor.finish()
