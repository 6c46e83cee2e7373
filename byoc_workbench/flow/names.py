"""Composite calls keep the names of the values they compute.

``FuseOpsByPattern`` binds each composite call to a fresh variable named
``gv`` or ``lv``, so after the composite stage ``relu = conv2d_bias_relu(...)``
reads ``gv = ...``, and which call is the second ``gv`` depends on the rules
switched on. The diagram derives node ids from variable names, and a
selection must survive a rule toggle, so each composite call is renamed after
the variable its pattern's root was bound to before fusion.

The match is structural: each binding after fusion is keyed by its op, its
attributes and the variables (mapped back to before fusion) it reads; a
composite call is followed through its body. A binding without a match keeps
its name.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import relax

from byoc_workbench.core import ir, ir_edit


def _key(value, seen: dict):
    """A hashable key for an ANF value, reading variables through ``seen`` (keyed by handle: both
    modules are alive while names are matched, and a variable's handle is compared without the FFI)."""
    if ir.is_var(value):
        mapped = seen.get(value.__chandle__(), value)
        return mapped.__chandle__() if ir.is_var(mapped) else mapped
    if isinstance(value, relax.Call):
        op = ir.callee_name(value)
        attrs = tvm_ffi.structural_hash(value.attrs) if value.attrs is not None else None
        return ("call", op, attrs, tuple(_key(a, seen) for a in value.args))
    if isinstance(value, relax.Tuple):
        return ("tuple", tuple(_key(f, seen) for f in value.fields))
    if isinstance(value, relax.TupleGetItem):
        return ("item", _key(value.tuple_value, seen), value.index)
    if isinstance(value, relax.ShapeExpr):
        return ("shape", tuple(str(v) for v in value.values))
    if isinstance(value, relax.If):
        return ("if", _key(value.cond, seen))
    return value  # constants (FuseOpsByPattern passes the same object on) and integers, equal by value


def _renames(before: relax.Function, after: relax.Function, mod: tvm.IRModule) -> dict:
    """``{variable after fusion: name before}`` for the composite calls of one function."""
    produced: dict = {}
    for s in ir.walk(before, descend=False):
        produced.setdefault(_key(s.value, {}), []).append(s.var)
    seen = {a.__chandle__(): b for a, b in zip(after.params, before.params)}

    def match(value):
        candidates = produced.get(_key(value, seen))
        return candidates.pop(0) if candidates else None

    names = {}
    for s in ir.walk(after, mod, descend=False):
        if s.callee is not None and ir.func_attr(s.callee, ir.COMPOSITE):
            inner = {
                p.__chandle__(): seen.get(a.__chandle__(), a) if ir.is_var(a) else a
                for p, a in zip(s.callee.params, s.value.args)
            }
            for b in ir.walk(s.callee, descend=False):
                found = produced.get(_key(b.value, inner))
                if found:
                    inner[b.var.__chandle__()] = found.pop(0)
            result = s.callee.body.body
            found = inner.get(result.__chandle__()) if ir.is_var(result) else None
            if found is None or not ir.is_var(found):
                continue
            seen[s.var.__chandle__()] = found
            if found.name != s.var.name:
                names[s.var] = found.name
        else:
            found = match(s.value)
            if found is not None:
                seen[s.var.__chandle__()] = found
    return names


def keep_names(before: tvm.IRModule, after: tvm.IRModule) -> tvm.IRModule:
    """``after`` with each composite call bound to the name its value had in ``before``."""
    editor = None
    known = {gv.name_hint for gv in before.get_global_vars()}
    for name in ir.host_functions(after):
        if name not in known:
            continue
        names = _renames(before[name], after[name], after)
        if names:
            editor = editor or ir_edit.ModuleEditor(after)
            editor.update(name, ir_edit.rename_vars(after[name], names))
    return editor.finish() if editor else after
