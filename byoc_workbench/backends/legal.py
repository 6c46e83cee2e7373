"""Which calls of a known op a translator takes: the checks the ONNX translator and the torch backend share.

A check takes a Relax call and returns why it cannot be converted (a layout, a dtype change, a bound
computed at run time), or None when it can. :data:`CHECKS` holds those both converter tables ask;
:mod:`.onnx_ops` and :mod:`.pytorch_ops` add their own on top (:func:`why_not`). The readers of
static values off Relax expressions (:func:`ints`, :func:`python_number`, :func:`static_shape`) live here
too, since converters of both tables read their attributes with them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from tvm import relax

from byoc_workbench.core import ir_types

# --- reading static values off Relax expressions --------------------------------


def python_number(value):
    """A Python number from an int, IntImm, FloatImm or PrimValue."""
    while not isinstance(value, (int, float, bool, np.number)) and hasattr(value, "value"):
        value = value.value
    return value


def ints(values) -> list:
    """Static integers from a ShapeExpr, a Relax tuple of PrimValues or an attribute array."""
    if isinstance(values, relax.ShapeExpr):
        values = values.values
    elif isinstance(values, relax.Tuple):
        values = values.fields
    return [int(python_number(v)) for v in values]


def static_shape(ty) -> list:
    """The static shape of a tensor type, as ints."""
    return ints(ty.shape.values)


def dims_static(ty, start: int = 0) -> bool:
    """Whether a tensor type's dimensions from ``start`` on are all known before the run."""
    return all(type(d).__name__ == "IntImm" for d in list(ty.shape.values)[start:])


# --- the checks ----------------------------------------------------------------------


def known_shapes(call):
    """Symbolic dimensions (``n``) convert; an unknown rank or shape does not."""
    for expr in [*call.args, call]:
        ty = expr.ty
        if isinstance(ty, relax.TensorType) and not hasattr(ty.shape, "values"):
            return f"{call.op.name} on a tensor of unknown shape {ir_types.type_str(ty)}"
    return None


def same_dtype(call):
    """Both tables' ops keep their input's dtype; a different ``out_dtype`` would need a cast TVM does not show."""
    out = getattr(call.attrs, "out_dtype", None)
    out = "" if out is None else str(out)
    if out and out != "void" and out != str(call.args[0].ty.dtype):
        return f"{call.op.name} with out_dtype={out} on {call.args[0].ty.dtype} data"
    return None


def layout_check(*pairs) -> Callable:
    """A check that each ``(attr, expected)`` layout attribute has its expected value."""

    def check(call):
        for attr, want in pairs:
            got = str(getattr(call.attrs, attr))
            if got != want:
                return f"{call.op.name} with {attr}={got} (only {want})"
        return same_dtype(call)

    return check


def _conv_check(spatial: str, transpose: bool) -> Callable:
    kernel = ("IO" if transpose else "OI") + spatial
    return layout_check(("data_layout", "NC" + spatial), ("kernel_layout", kernel), ("out_layout", "NC" + spatial))


def _check_adaptive_pool(call):
    layout = layout_check(("layout", "NCHW"), ("out_layout", "NCHW"))(call)
    if layout:
        return layout
    if not (dims_static(call.args[0].ty, 2) and dims_static(call.ty, 2)):
        return "relax.nn.adaptive_avg_pool2d over symbolic spatial dimensions"
    din, dout = static_shape(call.args[0].ty)[2:], static_shape(call.ty)[2:]
    if any(i % o for i, o in zip(din, dout)):
        return f"relax.nn.adaptive_avg_pool2d from {din} to {dout} (only sizes that divide the input)"
    return None


def _check_layer_norm(call):
    if not dims_static(call.args[1].ty):
        return "relax.nn.layer_norm with a scale of symbolic shape"
    ndim = call.args[0].ty.ndim
    axes = sorted(a % ndim for a in ints(call.attrs.axes))
    if axes != list(range(ndim - len(axes), ndim)):
        return f"relax.nn.layer_norm over axes {axes} (only trailing axes)"
    return None


def _check_pool(call):
    layout = "NC" + "DHW"[5 - call.args[0].ty.ndim :]
    layout = layout_check(("layout", layout), ("out_layout", layout))(call)
    if layout:
        return layout
    if "avg" in call.op.name and any(d != 1 for d in ints(call.attrs.dilation)):
        return f"{call.op.name} with dilation {ints(call.attrs.dilation)} (ONNX AveragePool needs opset 19)"
    return None


def _check_split(call):
    axis = int(call.attrs.axis) % call.args[0].ty.ndim
    if not all(type(f.shape.values[axis]).__name__ == "IntImm" for f in call.ty.fields):
        return "relax.split along a symbolic dimension"
    return None


def _check_strided_slice(call):
    try:
        for v in call.args[1:]:
            ints(v)
    except (TypeError, ValueError, AttributeError):
        return "relax.strided_slice with bounds computed at run time"
    return None


def _check_static_result(call):
    return None if dims_static(call.ty) else "its result's shape is not static"


# Why a call to a known op may still not convert, in both tables; None means it converts.
CHECKS: dict = {
    "relax.split": _check_split,
    "relax.strided_slice": _check_strided_slice,
    "relax.matmul": same_dtype,
    "relax.nn.conv1d": _conv_check("W", False),
    "relax.nn.conv2d": _conv_check("HW", False),
    "relax.nn.conv3d": _conv_check("DHW", False),
    "relax.nn.conv2d_transpose": _conv_check("HW", True),
    "relax.nn.conv3d_transpose": _conv_check("DHW", True),
    "relax.nn.max_pool2d": _check_pool,
    "relax.nn.max_pool3d": _check_pool,
    "relax.nn.avg_pool2d": _check_pool,
    "relax.nn.avg_pool3d": _check_pool,
    "relax.nn.adaptive_avg_pool2d": _check_adaptive_pool,
    "relax.nn.layer_norm": _check_layer_norm,
    "relax.zeros_like": _check_static_result,
    "relax.ones_like": _check_static_result,
    "relax.arange": _check_static_result,
}


def both(*checks) -> Callable:
    """A check asking ``checks`` in turn: the first reason found."""

    def check(call):
        return next((r for c in checks if (r := c(call)) is not None), None)

    return check


def why_not(call: relax.Call, checks: dict) -> str | None:
    """Why a call of an op that has a converter cannot convert, by ``checks`` (a table's): its shapes, then its
    op's check, if any."""
    check = checks.get(call.op.name)
    return known_shapes(call) or (check(call) if check else None)
