"""Relax types read for diagrams, messages and generated code: as short text, and whether static.

Each is kept per type object (:class:`~byoc_workbench.core.ir.PerObject`): a stage's variables keep their
types from stage to stage, and every node of every diagram reads its type.
"""

from __future__ import annotations

import tvm_ffi
from tvm import relax

from byoc_workbench.core.ir import PerObject
from byoc_workbench.core.tvm_private import items


def type_str(ty) -> str:
    """``float32[1, 32, 56, 56]`` (or ``[n, 3, h, w]``, ``[...]``) for a tensor type; a short text otherwise.

    Kept per type object: a stage's variables keep their types from stage to stage, and reading a
    shape through the FFI costs a microsecond a dimension, on every node of every diagram."""
    return _type_texts(ty) if hasattr(ty, "__chandle__") else _type_text(ty)


def _type_text(ty) -> str:
    if isinstance(ty, relax.TensorType):
        if hasattr(ty.shape, "values"):
            shape = ", ".join(prim_text(d) for d in items(ty.shape.values))
        else:  # unknown: only the rank, or not even that
            shape = "..." if ty.ndim < 0 else ", ".join("?" * ty.ndim)
        return f"{ty.dtype}[{shape}]"
    if isinstance(ty, relax.TupleType):
        return "(" + ", ".join(type_str(f) for f in items(ty.fields)) + ")"
    return str(ty)


_by_structure: dict = {}  # structural hash -> (a type, its text)


def _shared_text(ty) -> str:
    """The text of ``ty``, shared by the types structurally equal to it: thousands of variables have
    equal types that are not one object, and hashing one (4 µs) is a ninth of writing its text."""
    key = tvm_ffi.structural_hash(ty)
    seen = _by_structure.get(key)
    if seen is not None and tvm_ffi.structural_equal(seen[0], ty):
        return seen[1]
    if len(_by_structure) >= 16384:
        _by_structure.clear()
    text = _type_text(ty)
    _by_structure[key] = (ty, text)
    return text


_type_texts = PerObject(_shared_text, 65536)


# Binary PrimExpr kinds as Python operators, with their precedence (higher binds tighter).
_PRIM_BINARY = {"Add": ("+", 1), "Sub": ("-", 1), "Mul": ("*", 2), "FloorDiv": ("//", 2), "FloorMod": ("%", 2)}


def prim_text(expr, names: dict | None = None) -> str:
    """A shape dimension as short Python text: ``3``, ``n``, ``n * h * w * 8``, ``max(n, 1)``.

    ``names`` maps a symbolic variable's name to the text to write for it (by
    default its own name). TVM's printer writes ``T.int64(8)``; diagrams and
    generated code want ``8``.
    """

    def text(e, outer: int = 0) -> str:
        kind = type(e).__name__
        if isinstance(e, int) or kind == "IntImm":
            return str(int(getattr(e, "value", e)))
        if kind in ("Var", "SizeVar"):
            return (names or {}).get(e.name, e.name)
        if kind in _PRIM_BINARY:
            op, prec = _PRIM_BINARY[kind]
            # The right operand of - // % needs brackets at equal precedence: n - (h - 1).
            body = f"{text(e.a, prec)} {op} {text(e.b, prec + (kind != 'Add' and kind != 'Mul'))}"
            return f"({body})" if prec < outer else body
        if kind in ("Max", "Min"):
            return f"{kind.lower()}({text(e.a)}, {text(e.b)})"
        return str(e)

    return text(expr)


def dims(ty) -> list:
    """A tensor type's dimensions as ints, None where one is symbolic (``n``)."""
    return [int(d.value) if type(d).__name__ == "IntImm" else None for d in items(ty.shape.values)]


def is_static(ty) -> bool:
    """Whether a tensor type has a known shape of plain integers (no symbolic dimension); kept per type
    object, as :func:`type_str` is (each dimension is read through the FFI)."""
    return _static_types(ty) if hasattr(ty, "__chandle__") else _is_static(ty)


def _is_static(ty) -> bool:
    shape = getattr(ty, "shape", None)
    return shape is not None and all(type(d).__name__ == "IntImm" for d in items(shape.values))


_static_types = PerObject(_is_static, 65536)
