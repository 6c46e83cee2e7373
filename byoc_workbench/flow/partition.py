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

import heapq

import tvm
from tvm import relax

from .. import ir
from .regions import Region
from .rules import codegen_name


def _uses(func: relax.Function) -> dict:
    """``{var: [(block_index, binding_index), ...]}`` for every use of a variable;
    ``(None, None)`` marks a use as a function or branch result."""
    uses = []

    def visit(seq, counter):
        for block in seq.blocks:
            index = counter[0]
            counter[0] += 1
            for j, binding in enumerate(block.bindings):
                value = binding.value
                if isinstance(value, relax.If):
                    uses.extend((index, j, v) for v in ir.free_vars(value.cond))
                    visit(value.true_branch, counter)
                    visit(value.false_branch, counter)
                else:
                    uses.extend((index, j, v) for v in ir.free_vars(value))
        uses.extend((None, None, v) for v in ir.free_vars(seq.body))

    visit(func.body, [0])
    by_var: dict = {}
    for bi, j, v in uses:
        by_var.setdefault(v, []).append((bi, j))
    return by_var


def _region_function(mod, block_bindings, region: Region, outputs: list, name: str):
    """The lifted function of a region and the variables it takes."""
    members = [block_bindings[i] for i in region.bindings]
    defined = [b.var for b in members]
    inputs = []
    for b in members:
        for v in ir.free_vars(b.value):
            if not any(v.same_as(d) for d in defined) and not any(v.same_as(x) for x in inputs):
                inputs.append(v)
    mapping = {v: relax.Var(v.name, v.ty) for v in inputs}
    params = [mapping[v] for v in inputs]
    new_bindings = []
    for b in members:
        value = b.value
        composite = ir.callee(mod, value)
        args = [ir.substitute(a, mapping) for a in value.args]
        if composite is not None and isinstance(value.op, tvm.ir.GlobalVar):
            value = relax.Call(relax.utils.copy_with_new_vars(composite), args)
        else:
            value = ir.substitute(value, mapping)
        is_out = any(b.var.same_as(o) for o in outputs)
        new_var = ir.fresh_var(b.var, dataflow=not is_out)
        mapping[b.var] = new_var
        new_bindings.append(relax.VarBinding(new_var, value))
    outs = [mapping[o] for o in outputs]
    result = outs[0] if len(outs) == 1 else relax.Tuple(outs)
    ret_ty = outs[0].ty if len(outs) == 1 else relax.TupleType([o.ty for o in outs])
    func = relax.Function(params, relax.SeqExpr([relax.DataflowBlock(new_bindings)], result), ret_ty)
    func = func.with_attrs({ir.CODEGEN: codegen_name(region.target), ir.GLOBAL_SYMBOL: name})
    return func, inputs


def _topo_units(units: list) -> list:
    """Order units (lists of bindings) so each comes after what it reads, keeping source order."""
    unit_of = {}
    for k, unit in enumerate(units):
        for b in unit["defines"]:
            unit_of[b] = k
    deps = {k: {unit_of[v] for v in unit["reads"] if v in unit_of and unit_of[v] != k} for k, unit in enumerate(units)}
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


def partition(mod: tvm.IRModule, regions: list) -> tvm.IRModule:
    """Lift every region into a global function named ``<codegen>_<k>``, numbered in region order."""
    editor = ir.ModuleEditor(mod)
    names: dict = {}
    counters: dict = {}
    for region in regions:
        cg = codegen_name(region.target)
        names[region.id] = f"{cg}_{counters.get(cg, 0)}"
        counters[cg] = counters.get(cg, 0) + 1
    for fname in ir.host_functions(mod):
        func = mod[fname]
        mine = [r for r in regions if r.func == fname]
        if not mine:
            continue
        uses = _uses(func)

        def rewrite(block_index, is_df, bindings, mine=mine, uses=uses):
            here = [r for r in mine if r.block == block_index]
            if not here:
                return bindings
            in_region = {i: r for r in here for i in r.bindings}
            units = []
            for r in here:
                members = set(r.bindings)
                member_vars = [bindings[i].var for i in r.bindings]
                outputs = [
                    v for v in member_vars if any(not (bi == block_index and j in members) for bi, j in uses.get(v, ()))
                ]
                sub, inputs = _region_function(mod, bindings, r, outputs, names[r.id])
                gv = editor.add(names[r.id], sub)
                call = relax.Call(gv, list(inputs))
                if len(outputs) == 1:
                    new = [relax.VarBinding(outputs[0], call)]
                else:
                    tup = (relax.DataflowVar if is_df else relax.Var)(f"{names[r.id]}_out", sub.ret_ty)
                    new = [relax.VarBinding(tup, call)]
                    new += [relax.VarBinding(o, relax.TupleGetItem(tup, k)) for k, o in enumerate(outputs)]
                units.append({"bindings": new, "defines": member_vars, "reads": inputs, "order": r.bindings[0]})
            for j, b in enumerate(bindings):
                if j not in in_region:
                    units.append({"bindings": [b], "defines": [b.var], "reads": _reads(b), "order": j})
            return [b for unit in _topo_units(units) for b in unit["bindings"]]

        editor.update(fname, ir.rebuild(func, rewrite))
    new_mod = editor.finish()
    # Composites now live inside the subgraphs as local functions.
    called = set().union(*ir.calls_between_functions(new_mod).values())
    unused = [
        gv.name_hint
        for gv, f in new_mod.functions.items()
        if ir.func_attr(f, ir.COMPOSITE) and gv.name_hint not in called
    ]
    for name in unused:
        del new_mod[new_mod.get_global_var(name)]
    return new_mod


def _reads(binding) -> list:
    value = binding.value
    if isinstance(value, relax.If):
        reads = ir.free_vars(value.cond)
        for branch in (value.true_branch, value.false_branch):
            reads += _free_in_seq(branch)
        return reads
    return ir.free_vars(value)


def _free_in_seq(seq) -> list:
    """Variables a branch reads from outside itself."""
    defined, reads = [], []
    for _, block in ir.blocks_of(seq):
        for b in block.bindings:
            defined.append(b.var)
            reads += _reads(b) if not isinstance(b.value, relax.If) else ir.free_vars(b.value.cond)
    reads += ir.free_vars(seq.body)
    return [v for v in reads if not any(v.same_as(d) for d in defined)]


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

    return ir.map_bindings(mod, inline, remove=sorted(names))


def _inline_call(func: relax.Function, args, result_var, is_df: bool) -> list:
    """Bindings that compute ``result_var = func(*args)`` in place, composites flattened."""
    mapping = dict(zip(func.params, args))
    local: dict = {}
    out = []
    result = func.body.body
    for _, block in ir.blocks_of(func.body):
        for b in block.bindings:
            value = b.value
            if isinstance(value, relax.Function):
                local[b.var] = value  # a composite, flattened where it is called
                continue
            is_result = ir.is_var(result) and b.var.same_as(result)
            target_var = result_var if is_result else ir.fresh_var(b.var, dataflow=is_df)
            inner = ir.called_function(None, value, local) if isinstance(value, relax.Call) else None
            if inner is not None:
                inner_args = [ir.substitute(a, mapping) for a in value.args]
                out.extend(_inline_call(inner, inner_args, target_var, is_df))
            else:
                out.append(relax.VarBinding(target_var, ir.substitute(value, mapping)))
            mapping[b.var] = target_var
    if not ir.is_var(result):
        out.append(relax.VarBinding(result_var, ir.substitute(result, mapping)))
    return out
