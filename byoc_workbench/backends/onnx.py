"""Translate an offloaded Relax subgraph into an ONNX model.

Upstream deleted the Relay ONNX exporter and Relax has none, so this is a
small one: a converter table keyed by Relax op name, built with
``onnx.helper`` only. It covers every op of upstream's TensorRT pattern table
and of the teaching target. ONNX Runtime runs the result on any CPU, and
TensorRT's ONNX parser turns it into an engine.

A subgraph is a global function with ``Codegen``; its body calls local
composite functions. Parameters become graph inputs in order, constants
become initializers, and the function's result (a tensor or a tuple of
tensors) becomes the graph outputs in order.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

import numpy as np
import tvm
from tvm import relax

from .. import ir
from ..errors import WorkbenchError, import_optional

OPSET = 18  # the first opset whose Reduce* ops all take axes as an input
FIX = "switch off the rule that offloads it, or add a converter in byoc_workbench/backends/onnx.py"


def _onnx():
    return import_optional("onnx", "pip install onnx onnxruntime")


# --- reading static values off Relax expressions --------------------------------


def _scalar(value):
    """A Python number from an int, IntImm, FloatImm or PrimValue."""
    while not isinstance(value, (int, float, bool, np.number)) and hasattr(value, "value"):
        value = value.value
    return value


def _ints(values) -> list:
    """Static integers from a ShapeExpr, a Relax tuple of PrimValues or an attribute array."""
    if isinstance(values, relax.ShapeExpr):
        values = values.values
    elif isinstance(values, relax.Tuple):
        values = values.fields
    return [int(_scalar(v)) for v in values]


def _shape(ty) -> list:
    return _ints(ty.shape.values)


def _dtype_name(dt) -> str:
    return "" if dt is None else str(dt)


def _layout_check(*pairs) -> Callable:
    """A check that each ``(attr, expected)`` layout attribute has its expected value."""

    def check(call):
        for attr, want in pairs:
            got = str(getattr(call.attrs, attr))
            if got != want:
                return f"{call.op.name} with {attr}={got} (only {want})"
        return _same_dtype(call)

    return check


def _same_dtype(call):
    """ONNX ops keep their input's dtype; a different ``out_dtype`` would need a cast TVM does not show."""
    out = _dtype_name(getattr(call.attrs, "out_dtype", None))
    if out and out != "void" and out != str(call.args[0].ty.dtype):
        return f"{call.op.name} with out_dtype={out} on {call.args[0].ty.dtype} data"
    return None


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


def _check_adaptive_pool(call):
    layout = _layout_check(("layout", "NCHW"), ("out_layout", "NCHW"))(call)
    if layout:
        return layout
    din, dout = _shape(call.args[0].ty)[2:], _shape(call.ty)[2:]
    if any(i % o for i, o in zip(din, dout)):
        return f"relax.nn.adaptive_avg_pool2d from {din} to {dout} (only sizes that divide the input)"
    return None


def _check_layer_norm(call):
    ndim = call.args[0].ty.ndim
    axes = sorted(a % ndim for a in _ints(call.attrs.axes))
    if axes != list(range(ndim - len(axes), ndim)):
        return f"relax.nn.layer_norm over axes {axes} (only trailing axes)"
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
    if not isinstance(call.args[1], relax.ShapeExpr):
        return "relax.image.resize2d to a size computed at run time"
    return _same_dtype(call)


def _check_pool(call):
    layout = "NC" + "DHW"[5 - call.args[0].ty.ndim :]
    layout = _layout_check(("layout", layout), ("out_layout", layout))(call)
    if layout:
        return layout
    if "avg" in call.op.name and any(d != 1 for d in _ints(call.attrs.dilation)):
        return f"{call.op.name} with dilation {_ints(call.attrs.dilation)} (ONNX AveragePool needs opset 19)"
    return None


def _check_integer_divide(call):
    # TVM divides integers with floor semantics, ONNX Div truncates.
    if not str(call.ty.dtype).startswith(("float", "bfloat")):
        return f"relax.divide on {call.ty.dtype}"
    return None


def _check_static_shapes(call):
    for expr in [*call.args, call]:
        ty = expr.ty
        if isinstance(ty, relax.TensorType) and (ty.shape is None or not _all_static(ty)):
            return f"{call.op.name} on a tensor of dynamic shape {ir.type_str(ty)}"
    return None


def _all_static(ty) -> bool:
    return all(isinstance(_scalar(d), int) for d in ty.shape.values)


# --- the graph being built --------------------------------------------------------


class Graph:
    """An ONNX graph under construction: nodes, initializers and unique names."""

    def __init__(self, fp16: bool = False):
        self.onnx = _onnx()
        self.fp16 = fp16
        self.nodes: list = []
        self.initializers: list = []
        self._used: set = set()
        self._consts: dict = {}

    def name(self, hint: str) -> str:
        base = re.sub(r"[^\w.]", "_", hint) or "t"
        name, k = base, 1
        while name in self._used:
            name, k = f"{base}_{k}", k + 1
        self._used.add(name)
        return name

    def dtype(self, expr_or_dtype) -> str:
        """The ONNX-side dtype of an expression; float32 becomes float16 in an fp16 graph."""
        dt = str(expr_or_dtype.ty.dtype if hasattr(expr_or_dtype, "ty") else expr_or_dtype)
        return "float16" if self.fp16 and dt == "float32" else dt

    def node(self, op_type: str, inputs: list, hint: str = "", outputs: int = 1, **attrs):
        """Add a node; returns its output name, or a list of names when ``outputs > 1``."""
        names = [self.name(hint or op_type.lower()) for _ in range(outputs)]
        self.nodes.append(
            self.onnx.helper.make_node(op_type, list(inputs), names, name=self.name(f"{op_type}_node"), **attrs)
        )
        return names[0] if outputs == 1 else names

    def const(self, value, hint: str = "const", key=None) -> str:
        """An initializer holding ``value``; ``key`` reuses one made for the same Relax constant."""
        if key is not None and key in self._consts:
            return self._consts[key]
        value = np.asarray(value)
        if self.fp16 and value.dtype == np.float32:
            value = value.astype(np.float16)
        name = self.name(hint)
        self.initializers.append(self.onnx.numpy_helper.from_array(np.ascontiguousarray(value), name))
        if key is not None:
            self._consts[key] = name
        return name

    def int64s(self, values, hint: str) -> str:
        return self.const(np.asarray(values, dtype=np.int64), hint)

    def scalar(self, value, like) -> str:
        return self.const(np.asarray(value, dtype=self.dtype(like)), "scalar")


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
        inputs = [x[0]] if axis is None else [x[0], g.int64s(_ints(axis), "axes")]
        return g.node(op_type, inputs, keepdims=int(bool(call.attrs.keepdims)))

    return convert


def _conv(transpose: bool) -> Callable:
    def convert(g, call, x):
        a = call.attrs
        attrs = dict(strides=_ints(a.strides), pads=_ints(a.padding), dilations=_ints(a.dilation), group=int(a.groups))
        if transpose:
            attrs["output_padding"] = _ints(a.output_padding)
        return g.node("ConvTranspose" if transpose else "Conv", [x[0], x[1]], **attrs)

    return convert


def _conv_check(spatial: str, transpose: bool) -> Callable:
    kernel = ("IO" if transpose else "OI") + spatial
    return _layout_check(("data_layout", "NC" + spatial), ("kernel_layout", kernel), ("out_layout", "NC" + spatial))


def _pool(op_type: str) -> Callable:
    def convert(g, call, x):
        a = call.attrs
        attrs = dict(
            kernel_shape=_ints(a.pool_size), strides=_ints(a.strides), pads=_ints(a.padding), ceil_mode=int(a.ceil_mode)
        )
        if op_type == "MaxPool":
            attrs["dilations"] = _ints(a.dilation)
        else:
            attrs["count_include_pad"] = int(a.count_include_pad)
        return g.node(op_type, [x[0]], **attrs)

    return convert


def _adaptive_avg_pool2d(g, call, x):
    din, dout = _shape(call.args[0].ty)[2:], _shape(call.ty)[2:]
    if dout == [1, 1]:
        return g.node("GlobalAveragePool", [x[0]])
    kernel = [i // o for i, o in zip(din, dout)]
    return g.node("AveragePool", [x[0]], kernel_shape=kernel, strides=kernel)


def _silu(g, call, x):
    return g.node("Mul", [x[0], g.node("Sigmoid", [x[0]])])


def _reshape(g, call, x):
    # The call's type holds the static result shape, with any -1 already resolved.
    return g.node("Reshape", [x[0], g.int64s(_shape(call.ty), "shape")])


def _expand_dims(g, call, x):
    return g.node("Unsqueeze", [x[0], g.int64s(_ints(call.attrs.axis), "axes")])


def _squeeze(g, call, x):
    axis = call.attrs.axis
    return g.node("Squeeze", [x[0]] if axis is None else [x[0], g.int64s(_ints(axis), "axes")])


def _permute_dims(g, call, x):
    axes = call.attrs.axes
    perm = list(reversed(range(call.args[0].ty.ndim))) if axes is None else _ints(axes)
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
    sizes = [_shape(f)[axis] for f in call.ty.fields]
    return g.node("Split", [x[0], g.int64s(sizes, "split")], outputs=len(sizes), axis=axis)


def _layer_norm(g, call, x):
    a = call.attrs
    norm_shape = _shape(call.args[1].ty)
    gamma = x[1] if a.scale else g.const(np.ones(norm_shape, str(call.args[1].ty.dtype)), "ones")
    beta = x[2] if a.center else g.const(np.zeros(norm_shape, str(call.args[2].ty.dtype)), "zeros")
    axis = -len(_ints(a.axes))
    return g.node("LayerNormalization", [x[0], gamma, beta], axis=axis, epsilon=float(a.epsilon))


def _clip(g, call, x):
    lo, hi = (_scalar(v) for v in call.args[1:3])
    return g.node("Clip", [x[0], g.scalar(lo, call), g.scalar(hi, call)])


def _strided_slice(g, call, x):
    axes, begin, end = (_ints(v) for v in call.args[1:4])
    strides = _ints(call.args[4]) if len(call.args) > 4 else [1] * len(axes)
    ints = [g.int64s(v, hint) for v, hint in ((begin, "starts"), (end, "ends"), (axes, "axes"), (strides, "steps"))]
    return g.node("Slice", [x[0], *ints])


_RESIZE_MODES = {"nearest_neighbor": "nearest", "linear": "linear", "cubic": "cubic"}
_RESIZE_COORDS = ("asymmetric", "align_corners", "half_pixel", "pytorch_half_pixel")
_NEAREST_MODES = ("floor", "ceil", "round_prefer_ceil", "round_prefer_floor")


def _resize2d(g, call, x):
    a = call.attrs
    sizes = g.int64s(_shape(call.ty), "sizes")
    attrs = dict(
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
}

# Why a call to a known op may still not convert; None means it converts.
CHECKS: dict = {
    "relax.divide": _check_integer_divide,
    "relax.matmul": _same_dtype,
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
    "relax.layout_transform": _check_layout_transform,
    "relax.nn.layer_norm": _check_layer_norm,
    "relax.image.resize2d": _check_resize,
}

SUPPORTED_OPS = frozenset(CONVERTERS)


def unsupported(call: relax.Call) -> str | None:
    """Why the translator cannot convert ``call``, or None when it can."""
    name = call.op.name
    if name not in CONVERTERS:
        return f"{name} (no converter)"
    reason = _check_static_shapes(call)
    if reason is None and name in CHECKS:
        reason = CHECKS[name](call)
    return reason


def convertible(ctx) -> bool:
    """A ``FuseOpsByPattern`` check: the translator converts every op call the match holds.

    Only ops in :data:`SUPPORTED_OPS` are vetted here, for their attributes; a
    match on an op with no converter at all is left to fail at build time with
    a one-line error, so a user's rule that names such an op is not silently
    ignored.
    """
    calls = [ctx.matched_expr, *ctx.annotated_expr.values(), *ctx.matched_bindings.values()]
    for call in calls:
        if isinstance(call, relax.Call) and isinstance(call.op, tvm.ir.Op) and call.op.name in CONVERTERS:
            if unsupported(call) is not None:
                return False
    return True


def guard_rules(rules) -> tuple:
    """``rules`` with :func:`convertible` added to each check, for the ONNX-based backends."""
    return tuple(_guard(r) for r in rules)


def _guard(rule):
    inner = rule.fusion_pattern().check

    def check(ctx) -> bool:
        return convertible(ctx) and (inner is None or bool(inner(ctx)))

    return dataclasses.replace(rule, check=None, ctx_check=check)


# --- walking the subgraph -----------------------------------------------------------


class _Translator:
    def __init__(self, func: relax.Function, fp16: bool):
        self.g = Graph(fp16)
        self.func = func
        self.values = ir.Values(self._leaf)  # Relax var -> ONNX name or tuple of them

    def _leaf(self, expr):
        if isinstance(expr, tvm.ir.expr.Constant) and hasattr(expr.value, "numpy"):
            return self.g.const(expr.value.numpy(), "const", key=expr)
        return None  # ShapeExpr, PrimValue, ...: converters read these from the call

    def value(self, frame: tuple, expr):
        """The ONNX value of a Relax expression: a name, a tuple of values, or None if static."""
        if isinstance(expr, relax.TupleGetItem):
            return self.value(frame, expr.tuple_value)[expr.index]
        return self.values.get(frame, expr)

    def bind(self, step: ir.Step):
        value, frame = step.value, step.frame
        if step.descended:
            self.values.enter(step, [self.value(frame, a) for a in value.args])
        elif step.op is not None:
            out = CONVERTERS[step.op](self.g, value, [self.value(frame, a) for a in value.args])
            self.values.bind(frame, step.var, tuple(out) if isinstance(out, list) else out)
        elif isinstance(value, (relax.Tuple, relax.TupleGetItem, tvm.ir.expr.Constant)) or ir.is_var(value):
            self.values.bind(frame, step.var, self.value(frame, value))
        else:
            raise WorkbenchError(f"The ONNX translator cannot convert a {type(value).__name__} binding.", FIX + ".")

    def run(self, name: str):
        onnx = self.g.onnx
        helper = onnx.helper
        inputs = []
        for i, p in enumerate(self.func.params):
            if not isinstance(p.ty, relax.TensorType):
                raise WorkbenchError(f"{name}: parameter {p.name} is not a tensor ({p.ty}).", FIX + ".")
            x = self.g.name(f"in{i}_{p.name}")
            inputs.append(helper.make_tensor_value_info(x, _onnx_type(p.ty.dtype), _shape(p.ty)))
            cast = self.g.dtype(p) != str(p.ty.dtype)
            self.values.bind((), p, self.g.node("Cast", [x], to=_onnx_type("float16")) if cast else x)
        for step in ir.walk(self.func):
            self.bind(step)
        results = _flatten(self.value((), self.func.body.body))
        types = _flatten_types(self.func.ret_ty)
        outputs, seen = [], {i.name for i in inputs} | {t.name for t in self.g.initializers}
        for k, (res, ty) in enumerate(zip(results, types)):
            if self.g.dtype(ty.dtype) != str(ty.dtype):
                res = self.g.node("Cast", [res], f"out{k}", to=_onnx_type(ty.dtype))
            elif res in seen:  # a graph output must be a tensor of its own
                res = self.g.node("Identity", [res], f"out{k}")
            seen.add(res)
            outputs.append(helper.make_tensor_value_info(res, _onnx_type(ty.dtype), _shape(ty)))
        graph = helper.make_graph(self.g.nodes, name, inputs, outputs, self.g.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="byoc_workbench")
        model.ir_version = min(model.ir_version, 9)  # readable by older ONNX Runtime and TensorRT parsers
        onnx.checker.check_model(model)
        return model


def _onnx_type(dtype) -> int:
    return _onnx().helper.np_dtype_to_tensor_dtype(np.dtype(str(dtype)))


def _flatten(value) -> list:
    return [x for v in value for x in _flatten(v)] if isinstance(value, tuple) else [value]


def _flatten_types(ty) -> list:
    if isinstance(ty, relax.TupleType):
        return [x for f in ty.fields for x in _flatten_types(f)]
    if not isinstance(ty, relax.TensorType):
        raise WorkbenchError(f"A subgraph returns a {ty}, not tensors.", FIX + ".")
    return [ty]


def op_calls(func: relax.Function) -> list:
    """Every Relax op call in ``func``, composites included, in order."""
    return [s.value for s in ir.walk(func) if s.op]


def translate(func: relax.Function, name: str = "subgraph", fp16: bool = False):
    """An ``onnx.ModelProto`` computing ``func``.

    Parameters
    ----------
    func : relax.Function
        A partitioned subgraph (or any Relax function of static shapes without control flow).
    name : str
        The graph's name, used in error messages.
    fp16 : bool
        Compute in float16: float32 weights are stored as float16, float32 inputs are
        cast on the way in and outputs cast back, so the precision lives in the graph
        (TensorRT 11 has no FP16 builder flag).

    Raises
    ------
    WorkbenchError
        Listing every op call it cannot convert, in one line.
    """
    reasons = list(dict.fromkeys(r for r in map(unsupported, op_calls(func)) if r))
    if reasons:
        raise WorkbenchError(f"{name}: the ONNX translator cannot convert {'; '.join(reasons)}.", FIX + ".")
    return _Translator(func, fp16).run(name)


def summary(model) -> str:
    """A readable text of an ONNX model: its inputs, outputs and nodes (weights left out)."""
    helper = _onnx().helper
    g = model.graph
    counts: dict = {}
    for n in g.node:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
    weights = sum(int(np.prod(t.dims)) for t in g.initializer)
    lines = [
        f"# ONNX model {g.name}: opset {model.opset_import[0].version}, {len(g.node)} nodes, "
        f"{len(g.initializer)} initializers ({weights} values)",
        "# nodes by type: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])),
        helper.printable_graph(g),
    ]
    return "\n".join(lines)
