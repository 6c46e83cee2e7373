"""The converter table of the ONNX translator: one entry per Relax op, keyed by its name.

Each converter takes ``(graph, call, inputs)`` and adds ONNX nodes to the graph
(see :class:`byoc_workbench.backends.onnx.OnnxGraph`); families of ops share a
factory (unary, binary, reduce, conv, pool). ``CHECKS`` says why a call to a
known op may still not convert: the checks the torch backend shares (:mod:`.legal`), then ONNX's own
(a rounding mode ONNX lacks, a reshape it cannot spell).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tvm_ffi
from tvm import relax

from byoc_workbench.backends import legal
from byoc_workbench.backends.legal import dims_static, ints, python_number, same_dtype, static_shape
from byoc_workbench.core import ir_types


def onnx_dims(ty) -> list | None:
    """A tensor type's shape for an ONNX value: ints, and names (``n``, ``n * 8``) for symbolic dimensions.

    None for an unknown rank. ONNX Runtime runs named dynamic dimensions as they come.
    """
    if not hasattr(ty.shape, "values"):
        return None
    return [int(d.value) if type(d).__name__ == "IntImm" else ir_types.prim_text(d) for d in ty.shape.values]


def _permutation(index_map):
    """The axes of a layout_transform that only permutes axes, else None."""
    initial = list(index_map.initial_indices)
    final = list(index_map.final_indices)
    perm = [next((i for i, v in enumerate(initial) if v.same_as(f)), None) for f in final]
    return perm if None not in perm and sorted(perm) == list(range(len(initial))) else None


def _check_layout_transform(call):
    if _permutation(call.attrs.index_map) is None:
        return f"relax.layout_transform with index map {call.attrs.index_map} (only axis permutations)"
    return None


def _check_resize(call):
    a = call.attrs
    if str(a.layout) != "NCHW":
        return f"relax.image.resize2d with layout {a.layout} (only NCHW)"
    if a.coordinate_transformation_mode not in _RESIZE_COORDS:
        return f"relax.image.resize2d with coordinate_transformation_mode={a.coordinate_transformation_mode}"
    if a.method == "nearest_neighbor" and a.rounding_method not in _NEAREST_MODES:
        # ONNX has no ties-to-even rounding, which Relax's "round" is.
        return f"relax.image.resize2d nearest_neighbor with rounding_method={a.rounding_method}"
    if not isinstance(call.args[1], relax.ShapeExpr) or not dims_static(call.ty, 2):
        return "relax.image.resize2d to a size computed at run time"
    return same_dtype(call)


def _check_integer_divide(call):
    # TVM divides integers with floor semantics, ONNX Div truncates.
    if not str(call.ty.dtype).startswith(("float", "bfloat")):
        return f"relax.divide on {call.ty.dtype}"
    return None


def _reshape_target(call) -> list | None:
    """ONNX Reshape's shape for a call: ints, 0 (the input's dimension) and at most one -1; None if it needs more."""
    out = list(call.ty.shape.values)
    ins = list(call.args[0].ty.shape.values)
    target = []
    for i, d in enumerate(out):
        if type(d).__name__ == "IntImm":
            target.append(int(d.value))
        elif i < len(ins) and tvm_ffi.structural_equal(d, ins[i]):
            target.append(0)  # ONNX: copy the input's dimension at the same index
        else:
            target.append(-1)
    return target if target.count(-1) <= 1 else None


def _check_reshape(call):
    if _reshape_target(call) is None:
        return f"relax.reshape to {ir_types.type_str(call.ty)} (more than one dimension computed at run time)"
    return None


# --- converters: (graph, call, inputs) -> output name(s) ---------------------------
# ``inputs`` holds the ONNX name of each tensor argument (a list for a tuple argument,
# None for a static argument such as a ShapeExpr, which converters read from the call).


def _unary(op_type: str) -> Callable:
    return lambda g, call, x: g.node(op_type, [x[0]])


def _binary(op_type: str) -> Callable:
    return lambda g, call, x: g.node(op_type, [x[0], x[1]])


def _reduce(op_type: str) -> Callable:
    def convert(g, call, x):
        axis = call.attrs.axis
        inputs = [x[0]] if axis is None else [x[0], g.int64s(ints(axis), "axes")]
        return g.node(op_type, inputs, keepdims=int(bool(call.attrs.keepdims)))

    return convert


def _conv(transpose: bool) -> Callable:
    def convert(g, call, x):
        a = call.attrs
        attrs = dict(strides=ints(a.strides), pads=ints(a.padding), dilations=ints(a.dilation), group=int(a.groups))
        if transpose:
            attrs["output_padding"] = ints(a.output_padding)
        return g.node("ConvTranspose" if transpose else "Conv", [x[0], x[1]], **attrs)

    return convert


def _pool(op_type: str) -> Callable:
    def convert(g, call, x):
        a = call.attrs
        attrs = dict(
            kernel_shape=ints(a.pool_size), strides=ints(a.strides), pads=ints(a.padding), ceil_mode=int(a.ceil_mode)
        )
        if op_type == "MaxPool":
            attrs["dilations"] = ints(a.dilation)
        else:
            attrs["count_include_pad"] = int(a.count_include_pad)
        return g.node(op_type, [x[0]], **attrs)

    return convert


def _adaptive_avg_pool2d(g, call, x):
    din, dout = static_shape(call.args[0].ty)[2:], static_shape(call.ty)[2:]
    if dout == [1, 1]:
        return g.node("GlobalAveragePool", [x[0]])
    kernel = [i // o for i, o in zip(din, dout)]
    return g.node("AveragePool", [x[0]], kernel_shape=kernel, strides=kernel)


def _silu(g, call, x):
    return g.node("Mul", [x[0], g.node("Sigmoid", [x[0]])])


def _reshape(g, call, x):
    # The call's type holds the result shape, any -1 resolved; symbolic dimensions become 0 or -1.
    return g.node("Reshape", [x[0], g.int64s(_reshape_target(call), "shape")])


def _expand_dims(g, call, x):
    return g.node("Unsqueeze", [x[0], g.int64s(ints(call.attrs.axis), "axes")])


def _squeeze(g, call, x):
    axis = call.attrs.axis
    return g.node("Squeeze", [x[0]] if axis is None else [x[0], g.int64s(ints(axis), "axes")])


def _permute_dims(g, call, x):
    axes = call.attrs.axes
    perm = list(reversed(range(call.args[0].ty.ndim))) if axes is None else ints(axes)
    return g.node("Transpose", [x[0]], perm=perm)


def _layout_transform(g, call, x):
    return g.node("Transpose", [x[0]], perm=_permutation(call.attrs.index_map))


def _concat(g, call, x):
    parts = x[0]
    if call.attrs.axis is None:  # Relax flattens every input first
        flat = g.int64s([-1], "flat")
        return g.node("Concat", [g.node("Reshape", [p, flat]) for p in parts], axis=0)
    return g.node("Concat", list(parts), axis=int(call.attrs.axis))


def _split(g, call, x):
    axis = int(call.attrs.axis)
    sizes = [static_shape(f)[axis] for f in call.ty.fields]
    return g.node("Split", [x[0], g.int64s(sizes, "split")], outputs=len(sizes), axis=axis)


def _layer_norm(g, call, x):
    a = call.attrs
    norm_shape = static_shape(call.args[1].ty)
    gamma = x[1] if a.scale else g.const(np.ones(norm_shape, str(call.args[1].ty.dtype)), "ones")
    beta = x[2] if a.center else g.const(np.zeros(norm_shape, str(call.args[2].ty.dtype)), "zeros")
    axis = -len(ints(a.axes))
    return g.node("LayerNormalization", [x[0], gamma, beta], axis=axis, epsilon=float(a.epsilon))


def _clip(g, call, x):
    lo, hi = (python_number(v) for v in call.args[1:3])
    return g.node("Clip", [x[0], g.scalar(lo, call), g.scalar(hi, call)])


def _strided_slice(g, call, x):
    axes, begin, end = (ints(v) for v in call.args[1:4])
    strides = ints(call.args[4]) if len(call.args) > 4 else [1] * len(axes)
    bounds = [g.int64s(v, hint) for v, hint in ((begin, "starts"), (end, "ends"), (axes, "axes"), (strides, "steps"))]
    return g.node("Slice", [x[0], *bounds])


def _cast(g, call, x):
    to = g.onnx.helper.np_dtype_to_tensor_dtype(np.dtype(g.dtype(call)))
    return g.node("Cast", [x[0]], to=int(to))


def _filled(value) -> Callable:
    """``zeros_like``/``ones_like``: a constant of the call's static shape and dtype (its shape is known)."""

    def convert(g, call, x):
        return g.const(np.full(static_shape(call.ty), value, dtype=g.dtype(call)), "filled")

    return convert


def _not_equal(g, call, x):
    return g.node("Not", [g.node("Equal", [x[0], x[1]])])


def _arange(g, call, x):
    start, end, step = (python_number(v) for v in call.args[:3])
    return g.node("Range", [g.scalar(start, call), g.scalar(end, call), g.scalar(step, call)])


_RESIZE_MODES = {"nearest_neighbor": "nearest", "linear": "linear", "cubic": "cubic"}
_RESIZE_COORDS = ("asymmetric", "align_corners", "half_pixel", "pytorch_half_pixel")
_NEAREST_MODES = ("floor", "ceil", "round_prefer_ceil", "round_prefer_floor")


def _resize2d(g, call, x):
    a = call.attrs
    if dims_static(call.ty):
        sizes, axes = g.int64s(static_shape(call.ty), "sizes"), {}
    else:  # a symbolic batch or channel count: resize the spatial axes alone (Resize-18's axes)
        sizes, axes = g.int64s(ints(call.ty.shape.values[2:]), "sizes"), {"axes": [2, 3]}
    attrs = dict(
        **axes,
        mode=_RESIZE_MODES[a.method],
        coordinate_transformation_mode=a.coordinate_transformation_mode,
        cubic_coeff_a=float(a.cubic_alpha),
        exclude_outside=int(a.cubic_exclude),
    )
    if a.method == "nearest_neighbor":
        attrs["nearest_mode"] = a.rounding_method
    return g.node("Resize", [x[0], "", "", sizes], **attrs)


_UNARY = {
    "relax.nn.relu": "Relu",
    "relax.sigmoid": "Sigmoid",
    "relax.tanh": "Tanh",
    "relax.exp": "Exp",
    "relax.log": "Log",
    "relax.sqrt": "Sqrt",
    "relax.abs": "Abs",
    "relax.negative": "Neg",
    "relax.sin": "Sin",
    "relax.cos": "Cos",
    "relax.atan": "Atan",
    "relax.ceil": "Ceil",
    "relax.floor": "Floor",
    "relax.erf": "Erf",
}
_BINARY = {
    "relax.add": "Add",
    "relax.subtract": "Sub",
    "relax.multiply": "Mul",
    "relax.divide": "Div",
    "relax.power": "Pow",
    "relax.maximum": "Max",
    "relax.minimum": "Min",
    "relax.matmul": "MatMul",
    "relax.equal": "Equal",
    "relax.greater": "Greater",
    "relax.greater_equal": "GreaterOrEqual",
    "relax.less": "Less",
    "relax.less_equal": "LessOrEqual",
}
_REDUCE = {
    "relax.sum": "ReduceSum",
    "relax.prod": "ReduceProd",
    "relax.max": "ReduceMax",
    "relax.min": "ReduceMin",
    "relax.mean": "ReduceMean",
}

CONVERTERS: dict = {
    **{op: _unary(t) for op, t in _UNARY.items()},
    **{op: _binary(t) for op, t in _BINARY.items()},
    **{op: _reduce(t) for op, t in _REDUCE.items()},
    "relax.nn.silu": _silu,
    "relax.nn.softmax": lambda g, call, x: g.node("Softmax", [x[0]], axis=int(call.attrs.axis)),
    "relax.nn.batch_flatten": lambda g, call, x: g.node("Flatten", [x[0]], axis=1),
    "relax.expand_dims": _expand_dims,
    "relax.squeeze": _squeeze,
    "relax.permute_dims": _permute_dims,
    "relax.layout_transform": _layout_transform,
    "relax.reshape": _reshape,
    "relax.concat": _concat,
    "relax.split": _split,
    "relax.nn.conv1d": _conv(False),
    "relax.nn.conv2d": _conv(False),
    "relax.nn.conv3d": _conv(False),
    "relax.nn.conv2d_transpose": _conv(True),
    "relax.nn.conv3d_transpose": _conv(True),
    "relax.nn.max_pool2d": _pool("MaxPool"),
    "relax.nn.max_pool3d": _pool("MaxPool"),
    "relax.nn.avg_pool2d": _pool("AveragePool"),
    "relax.nn.avg_pool3d": _pool("AveragePool"),
    "relax.nn.adaptive_avg_pool2d": _adaptive_avg_pool2d,
    "relax.nn.layer_norm": _layer_norm,
    "relax.clip": _clip,
    "relax.strided_slice": _strided_slice,
    "relax.image.resize2d": _resize2d,
    "relax.where": lambda g, call, x: g.node("Where", [x[0], x[1], x[2]]),
    "relax.not_equal": _not_equal,
    "relax.astype": _cast,
    "relax.zeros_like": _filled(0),
    "relax.ones_like": _filled(1),
    "relax.arange": _arange,
}

# Beyond the checks both tables share (:data:`.legal.CHECKS`): the ops only ONNX converts, and ONNX's own limits.
CHECKS: dict = {
    **legal.CHECKS,
    "relax.reshape": _check_reshape,
    "relax.divide": _check_integer_divide,
    "relax.layout_transform": _check_layout_transform,
    "relax.image.resize2d": _check_resize,
}

SUPPORTED_OPS = frozenset(CONVERTERS)


def unsupported(call: relax.Call) -> str | None:
    """Why the translator cannot convert ``call``, or None when it can."""
    name = call.op.name
    if name not in CONVERTERS:
        return f"{name} (no converter)"
    return legal.why_not(call, CHECKS)
