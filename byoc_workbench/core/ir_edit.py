"""Building Relax IR out of old: substitution, new variables, rebuilt functions, edited modules.

Stage functions build new functions out of the bindings of old ones. All
bindings they move are in A-normal form (a call, tuple or tuple item whose
leaves are variables, constants or shapes), so a substitution over those few
expression kinds is all they need. Reading IR is :mod:`byoc_workbench.core.ir`'s.
"""

from __future__ import annotations

from collections.abc import Callable

import tvm
from tvm import relax

from byoc_workbench.core.ir import host_functions, is_var
from byoc_workbench.core.tvm_private import items, new_call, new_var, set_type


def substitute(expr, mapping: dict, same_types: bool = False):
    """``expr`` with every variable in ``mapping`` replaced (ANF expressions only).

    ``mapping`` is keyed by handle (see :func:`by_handle`): a dict keyed by variables compares each
    new Python object for one by value, through the FFI, a few microseconds a lookup.
    ``same_types`` says that each variable's replacement has its type (a fresh copy
    of it): the new expression then keeps the old one's type, so that
    ``Normalize`` has nothing to infer (inferring is most of its time: a second
    on 6,000 ops).
    """
    if is_var(expr) or isinstance(expr, tvm.ir.GlobalVar):
        return mapping.get(expr.__chandle__(), expr)
    if isinstance(expr, relax.Call):
        op = substitute(expr.op, mapping) if isinstance(expr.op, tvm.ir.GlobalVar) else expr.op
        args = [substitute(a, mapping, same_types) for a in items(expr.args)]
        if same_types:
            return new_call(op, args, expr.ty, expr.attrs, expr.ty_args)
        new = relax.Call(op, args, expr.attrs, expr.ty_args)
    elif isinstance(expr, relax.Tuple):
        new = relax.Tuple([substitute(f, mapping, same_types) for f in expr.fields])
    elif isinstance(expr, relax.TupleGetItem):
        new = relax.TupleGetItem(substitute(expr.tuple_value, mapping, same_types), expr.index)
    else:
        return expr
    return typed(new, expr.ty) if same_types else new


def by_handle(pairs) -> dict[int, relax.Expr]:
    """``{handle: new}`` from ``(variable, new)`` pairs: the mapping :func:`substitute` takes."""
    return {v.__chandle__(): new for v, new in pairs}


def typed(expr, ty):
    """``expr`` (just built) given the type ``ty``, when ``ty`` is known: what ``Normalize`` would infer."""
    # The bare Type is what an expression not yet inferred has; some constructors infer on their own.
    if type(ty) is not tvm.ir.Type and type(expr.ty) is tvm.ir.Type:
        set_type(expr, ty)
    return expr


def fresh_var(like, name: str | None = None, dataflow: bool = True):
    """A new variable with the type of ``like``."""
    return new_var(name or like.name, like.ty, dataflow)


class ModuleEditor:
    """Adds, replaces and removes functions of a copy of a module.

    A new function gets a GlobalVar of its type, which the calls built to it need. Only what was
    added or replaced is normalized, in a module of its own: every other function stays the very
    object it was, so what is kept per function (walks, attributes, composite copies) stays valid.
    (A BlockBuilder would do the same, but hashes every function it is given, and the whole module
    first: half of partition's time on 6,000 ops.)
    """

    def __init__(self, mod: tvm.IRModule):
        self._mod = mod.clone()
        self._names = {gv.name_hint for gv in mod.get_global_vars()}
        self._made: dict = {}  # name -> (GlobalVar, function, whether it is in normal form already)

    def global_var(self, name: str) -> tvm.ir.GlobalVar:
        return self._made[name][0] if name in self._made else self._mod.get_global_var(name)

    def add(self, name: str, func: relax.Function, normal: bool = False) -> tvm.ir.GlobalVar:
        """Add ``func`` under ``name``, or ``name1``, ``name2``... where the name is taken (as a BlockBuilder
        names). ``normal`` says that ``func`` is in normal form already, every expression typed and each
        local function bound to a variable: it is kept as it is (Normalize would make its local functions anew)."""
        unique, k = name, 0
        while unique in self._names:
            k += 1
            unique = f"{name}{k}"
        gv = tvm.ir.GlobalVar(unique)
        set_type(gv, func.ty)
        self._names.add(unique)
        self._made[unique] = (gv, func, normal)
        return gv

    def update(self, name: str, func: relax.Function) -> None:
        self._made[name] = (self.global_var(name), func, False)

    def finish(self, remove=()) -> tvm.IRModule:
        mod = self._mod
        todo = tvm.IRModule({gv: func for gv, func, normal in self._made.values() if not normal})
        normalized = relax.transform.Normalize()(todo)
        for gv, func, normal in self._made.values():
            mod[gv] = func if normal else normalized[gv]
        for name in remove:
            del mod[mod.get_global_var(name)]
        return mod


def map_blocks(body: relax.SeqExpr, fn: Callable, result: Callable | None = None) -> relax.SeqExpr:
    """Rebuild ``body``, through If branches; ``fn(is_dataflow, bindings)`` returns each block's new bindings.

    ``result``, when given, rewrites each sequence's result (the body's, and each branch's).
    """
    new_blocks = []
    for block in items(body.blocks):
        bindings = []
        for binding in items(block.bindings):
            value = binding.value
            if type(value) is relax.If:
                branches = (map_blocks(value.true_branch, fn, result), map_blocks(value.false_branch, fn, result))
                binding = relax.VarBinding(binding.var, relax.If(value.cond, *branches))
            bindings.append(binding)
        is_df = isinstance(block, relax.DataflowBlock)
        bindings = fn(is_df, bindings)
        new_blocks.append(relax.DataflowBlock(bindings) if is_df else relax.BindingBlock(bindings))
    return relax.SeqExpr(new_blocks, result(body.body) if result else body.body)


def rebuild(func: relax.Function, fn: Callable, result: Callable | None = None) -> relax.Function:
    """``func`` with each block's bindings replaced by ``fn`` (see :func:`map_blocks`)."""
    body = map_blocks(func.body, fn, result)
    return relax.Function(func.params, body, func.ret_ty, func.is_pure, func.attrs)


def copy_with_new_vars(func: relax.Function) -> relax.Function:
    """``func`` with new variables for its parameters and bindings, so that it can be bound a second
    time in one module; every expression keeps its type (Normalize has nothing to do). Upstream's
    ``relax.utils.copy_with_new_vars`` takes about a millisecond on a one-op composite, which
    partition pays per placement; this takes a twentieth of that on the flat functions composites
    are, and hands anything else (branches, local functions, match_cast) to upstream."""
    blocks = [(type(block) is relax.DataflowBlock, items(block.bindings)) for block in items(func.body.blocks)]
    for _, bindings in blocks:
        for b in bindings:
            if type(b) is not relax.VarBinding or type(b.value) in (relax.If, relax.Function):
                return relax.utils.copy_with_new_vars(func)
    old = items(func.params)
    params = [fresh_var(p, dataflow=type(p) is relax.DataflowVar) for p in old]
    mapping = by_handle(zip(old, params))
    new_blocks = []
    for is_df, bindings in blocks:
        new = []
        for b in bindings:
            value = substitute(b.value, mapping, same_types=True)
            old_var = b.var
            var = mapping[old_var.__chandle__()] = fresh_var(old_var, dataflow=type(old_var) is relax.DataflowVar)
            new.append(relax.VarBinding(var, value))
        new_blocks.append(relax.DataflowBlock(new) if is_df else relax.BindingBlock(new))
    result = substitute(func.body.body, mapping, same_types=True)
    body = typed(relax.SeqExpr(new_blocks, result), func.body.ty)
    return relax.Function(params, body, func.ret_ty, func.is_pure, func.attrs)


def rename_vars(func: relax.Function, names: dict) -> relax.Function:
    """``func`` with each variable in ``names`` bound under its new name; every use follows."""
    mapping = by_handle((v, fresh_var(v, name, dataflow=isinstance(v, relax.DataflowVar))) for v, name in names.items())

    def rename(is_df, bindings):
        out = []
        for b in bindings:
            v = b.value
            if isinstance(v, relax.If):
                v = relax.If(substitute(v.cond, mapping), v.true_branch, v.false_branch)
            else:
                v = substitute(v, mapping, same_types=True)
            var = mapping.get(b.var.__chandle__(), b.var)
            # a match_cast defines the symbolic sizes of its type (an NMS's count): keep it one
            out.append(relax.MatchCast(var, v, b.ty) if isinstance(b, relax.MatchCast) else relax.VarBinding(var, v))
        return out

    return rebuild(func, rename, result=lambda expr: substitute(expr, mapping, same_types=True))


def map_bindings(mod: tvm.IRModule, fn: Callable, remove=()) -> tvm.IRModule:
    """Rewrite every binding of every host function, through If branches.

    ``fn(binding, is_dataflow)`` returns the bindings to put in its place, or
    None to keep it. Functions named in ``remove`` are dropped afterwards.
    """
    editor = ModuleEditor(mod)
    for name in host_functions(mod):

        def per_block(is_df, bindings):
            out = []
            for b in bindings:
                new = fn(b, is_df)
                out.extend([b] if new is None else new)
            return out

        editor.update(name, rebuild(mod[name], per_block))
    return editor.finish(remove=remove)
