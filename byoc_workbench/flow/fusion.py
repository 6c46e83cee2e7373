"""The composite stage for rules that each claim one op, built directly: what ``FuseOpsByPattern`` gives.

Upstream's pass makes a function for every match and infers the type of the
call inside it again; TVM's conv2d inference alone costs about a millisecond,
so the 1,500 convolutions of a 6,000-op model cost 1.5 s of the pass's 2.5 s.
Here every call keeps the type it has, and matches that would make the same
function share it, as upstream's do (the BlockBuilder keeps one of each). The
composite calls keep the variables they had, so no renaming is needed after.

:func:`fuse_single_ops` answers only where it gives upstream's module, up to
the names of the composite functions' parameters (here the arguments' names,
upstream's its own ``lv``): every rule one op with wildcard arguments and no
check, host functions of dataflow blocks with no branch, local function, dead
binding or symbolic size in a claimed call. Anything else returns None, and the
caller runs upstream's pass (:func:`fuse_rules`).
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import relax
from tvm.relax import dpl

from byoc_workbench.core import ir, ir_edit, ir_types, tvm_private
from byoc_workbench.flow.names import keep_names
from byoc_workbench.flow.rules import reported_checks


def single_op(rule) -> tuple | None:
    """``(op, arity)`` when ``rule`` claims single calls of one op with any arguments and has no check."""
    if rule.check is not None or rule.ctx_check is not None or rule.annotations:
        return None
    if rule.kind == "op":
        pattern = rule.fusion_pattern().pattern
    else:
        pattern = rule.pattern
    if not (
        type(pattern) is dpl.CallPattern
        and type(pattern.op) is dpl.ExprPattern
        and isinstance(pattern.op.expr, tvm.ir.Op)
        and all(type(a) is dpl.WildcardPattern for a in pattern.args or ())
    ):
        return None
    return pattern.op.expr.name, len(pattern.args or ())


def fuse_single_ops(mod: tvm.IRModule, rules) -> tvm.IRModule | None:
    """``mod`` with each call a rule claims made a call to a ``Composite`` function, or None where
    upstream's pass must run instead (see the module's notes). The first rule that claims an op wins."""
    claims: dict = {}
    for rule in rules:
        key = single_op(rule)
        if key is None:
            return None
        claims.setdefault(key, rule)
    hosts = ir.host_functions(mod)
    bodies = {}
    for name in hosts:
        body = _fused_body(mod[name], claims)
        if body is None:
            return None
        bodies[name] = body
    editor = ir_edit.ModuleEditor(mod)
    made: dict = {}  # signature -> the composite's GlobalVar
    for name in hosts:
        if not any(matches for _, matches in bodies[name]):
            continue
        func, blocks = mod[name], []
        for block, matches in bodies[name]:
            if not matches:
                blocks.append(block)
                continue
            bindings = tvm_private.items(block.bindings)
            for k, (rule, leaves, signature, value) in matches.items():
                gv = made.get(signature)
                if gv is None:
                    gv = made[signature] = editor.add(_name(rule), _composite(rule, value, leaves))
                bindings[k] = relax.VarBinding(bindings[k].var, tvm_private.new_call(gv, list(leaves), value.ty))
            blocks.append(relax.DataflowBlock(bindings))
        body = relax.SeqExpr(blocks, func.body.body)
        editor.update(name, relax.Function(func.params, body, func.ret_ty, func.is_pure, func.attrs))
    return editor.finish() if made else mod


def _name(rule) -> str:
    """Upstream's name for a one-op composite, ``fused_relax_nn_conv2d`` (the BlockBuilder numbers repeats)."""
    return "fused_" + rule.ops[0].replace(".", "_")


def _fused_body(func, claims: dict):
    """``[(block, {binding index: (rule, leaves, signature, value)})]`` for ``func``, or None where
    upstream's pass could differ: a branch, a local function, a dead binding upstream would drop,
    an argument of a kind not handled, or a symbolic size in a claimed call."""
    out = []
    for block in tvm_private.items(func.body.blocks):
        matches: dict = {}
        dataflow = isinstance(block, relax.DataflowBlock)
        read: set = set()
        defined = []
        for k, b in enumerate(tvm_private.items(block.bindings)):
            value = b.value
            if isinstance(value, (relax.If, relax.Function)):
                return None
            if not dataflow:
                continue
            read.update(v.__chandle__() for v in ir.reads(value))
            if isinstance(b.var, relax.DataflowVar):
                defined.append(b.var)
            if type(b) is not relax.VarBinding or type(value) is not relax.Call or not isinstance(value.op, tvm.ir.Op):
                continue
            rule = claims.get((value.op.name, len(value.args)))
            if rule is None:
                continue
            found = _signature(rule, value)
            if found is None:
                return None
            matches[k] = (rule, *found, value)
        if any(v.__chandle__() not in read for v in defined):
            return None  # upstream drops dead bindings from the blocks it rewrites
        out.append((block, matches))
    return out


def _signature(rule, call):
    """``(leaves, signature)``: the call's variables and constants, each once and in order (the
    composite's parameters, upstream's ``bind_constants=False``), and what makes two matches the
    same function; None for an argument left to upstream's pass (a symbolic size, a function)."""
    leaves, where = [], {}
    if not _static(call.ty):
        return None

    def arg(expr):
        if ir.is_var(expr) or _tensor_constant(expr):
            if not _static(expr.ty):
                return None
            h = expr.__chandle__()
            if h not in where:
                where[h] = len(leaves)
                leaves.append(expr)
            # A constant's parameter is named param_k, a variable's after it, but structural equality
            # (the BlockBuilder's, which shares equal functions) ignores names: the first match names it.
            return ("param", where[h], tvm_ffi.structural_hash(expr.ty))
        if isinstance(expr, relax.Tuple):
            fields = tuple(arg(f) for f in expr.fields)
            return None if None in fields else ("tuple", fields)
        if isinstance(expr, relax.ShapeExpr) and all(type(d).__name__ == "IntImm" for d in expr.values):
            return ("leaf", tvm_ffi.structural_hash(expr))
        if type(expr).__name__ in _LEAVES:
            return ("leaf", tvm_ffi.structural_hash(expr))
        return None

    args = tuple(arg(a) for a in tvm_private.items(call.args))
    if None in args:
        return None
    attrs = tvm_ffi.structural_hash(call.attrs) if call.attrs is not None else None
    extra = tuple(tvm_ffi.structural_hash(t) for t in call.ty_args) if call.ty_args else ()
    return leaves, (rule.qualified, call.op.name, attrs, args, extra, tvm_ffi.structural_hash(call.ty))


_LEAVES = ("IntImm", "FloatImm", "StringImm", "DataTypeImm")  # values written in the call, kept in the composite


def _tensor_constant(expr) -> bool:
    """A tensor constant (a parameter of the composite); IntImm and FloatImm are Constants too, written inline."""
    return isinstance(expr, tvm.ir.expr.Constant) and isinstance(expr.ty, relax.TensorType)


def _static(ty) -> bool:
    if isinstance(ty, relax.TupleType):
        return all(_static(f) for f in ty.fields)
    return ir_types.is_static(ty) or not isinstance(ty, relax.TensorType)


def _composite(rule, call, leaves) -> relax.Function:
    """The function upstream makes for one match: a parameter per leaf (constants ``param_0``, ...),
    the call on them, in a dataflow block whose output is ``gv``."""
    params, consts = [], 0
    mapping = {}
    for leaf in leaves:
        if _tensor_constant(leaf):
            name, consts = f"param_{consts}", consts + 1
        else:
            name = leaf.name
        p = tvm_private.new_var(name, leaf.ty, dataflow=False)
        params.append(p)
        mapping[leaf.__chandle__()] = p

    def arg(expr):
        if ir.is_var(expr) or _tensor_constant(expr):
            return mapping[expr.__chandle__()]
        if isinstance(expr, relax.Tuple):
            return ir_edit.typed(relax.Tuple([arg(f) for f in expr.fields]), expr.ty)
        return expr

    inner = tvm_private.new_call(
        call.op, [arg(a) for a in tvm_private.items(call.args)], call.ty, call.attrs, call.ty_args
    )
    gv = tvm_private.new_var("gv", call.ty, dataflow=False)
    body = relax.SeqExpr([relax.DataflowBlock([relax.VarBinding(gv, inner)])], gv)
    func = relax.Function(params, body, call.ty, True)
    return func.with_attrs({ir.COMPOSITE: rule.qualified, "Primitive": True})


def fuse_rules(mod: tvm.IRModule, rules) -> tvm.IRModule:
    """``FuseOpsByPattern`` with ``rules`` on the host functions, each composite call keeping its name:
    built directly where every rule is one op (:mod:`~byoc_workbench.flow.fusion`), else upstream's pass."""
    if not rules:
        return mod
    fused = fuse_single_ops(mod, rules)  # the same module, without inferring every call's type again
    return fused if fused is not None else fuse_upstream(mod, rules)


def fuse_upstream(mod: tvm.IRModule, rules) -> tvm.IRModule:
    """Upstream's ``FuseOpsByPattern`` with ``rules`` on the host functions, each composite call keeping its name."""
    # Patterns must not match inside composites made earlier, so only host functions are entries.
    with reported_checks():  # a user's check that raises is one line naming its rule
        fused = relax.transform.FuseOpsByPattern(
            [r.fusion_pattern() for r in rules],
            bind_constants=False,
            annotate_codegen=False,
            entry_functions=ir.host_functions(mod),
        )(mod)
    return keep_names(mod, fused)
