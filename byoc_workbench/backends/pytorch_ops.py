"""The converter table of the torch backend: one entry per Relax op, each a few torch calls.

A converter takes ``(torch, call, inputs, device)`` and returns a tensor (or a
tuple of them): ``inputs`` holds the torch tensor of each tensor argument, a
list for a tuple argument, and None for a static one (a ShapeExpr, a PrimValue),
which the converter reads from the call. Families of ops share a factory.
Which calls of a known op convert is mostly the ONNX translator's question too (a
layout, bounds known before the run): :func:`unsupported` asks the checks both
share (:mod:`.legal`), with this table's own on top (:data:`CHECKS`).

TVM's classic NMS is torchvision's ``batched_nms`` per class, after TVM's own
``get_valid_counts`` filter, written here in torch; the boxes a run keeps are
TVM's, up to boxes whose overlap equals the threshold exactly (TVM suppresses
those, torchvision keeps them).
"""

from __future__ import annotations

from collections.abc import Callable

from tvm import relax

from byoc_workbench.backends import legal
from byoc_workbench.backends.legal import ints, python_number, static_shape
from byoc_workbench.core import ir_types


def _unary(name: str) -> Callable:
    return lambda t, call, x, dev: getattr(t, name)(x[0])


def _binary(name: str) -> Callable:
    return lambda t, call, x, dev: getattr(t, name)(x[0], x[1])


def _reduce(name: str) -> Callable:
    def convert(t, call, x, dev):
        axis, keep = call.attrs.axis, bool(call.attrs.keepdims)
        if axis is None:
            out = getattr(t, name)(x[0])
            return out.reshape([1] * x[0].dim()) if keep else out
        dims = [a % x[0].dim() for a in ints(axis)]
        if name in ("amax", "amin", "sum", "mean"):
            return getattr(t, name)(x[0], dim=dims, keepdim=keep)
        out = x[0]  # prod: one axis at a time, highest first
        for d in sorted(dims, reverse=True):
            out = t.prod(out, dim=d, keepdim=keep)
        return out

    return convert


def _pads(padding, spatial: int) -> tuple:
    """Relax's ``(begin..., end...)`` padding as torch's ``F.pad`` order (last axis first), and whether it is even."""
    p = ints(padding)
    begin, end = p[:spatial], p[spatial:] if len(p) == 2 * spatial else p[:spatial]
    pad = [v for axis in reversed(range(spatial)) for v in (begin[axis], end[axis])]
    return pad, begin == end


def _conv(spatial: int, transpose: bool) -> Callable:
    def convert(t, call, x, dev):
        a = call.attrs
        f = t.nn.functional
        strides, dilation, groups = ints(a.strides), ints(a.dilation), int(a.groups)
        pad, even = _pads(a.padding, spatial)
        if transpose:
            fn = getattr(f, f"conv_transpose{spatial}d")
            begin = pad[::2][::-1]
            return fn(x[0], x[1], None, strides, begin, ints(a.output_padding), groups, dilation)
        data = x[0] if even else f.pad(x[0], pad)
        padding = pad[::2][::-1] if even else 0
        return getattr(f, f"conv{spatial}d")(data, x[1], None, strides, padding, dilation, groups)

    return convert


def _pool(kind: str, spatial: int) -> Callable:
    def convert(t, call, x, dev):
        a = call.attrs
        f = t.nn.functional
        kernel, strides = ints(a.pool_size), ints(a.strides)
        pad, even = _pads(a.padding, spatial)
        data, padding = x[0], pad[::2][::-1]
        if not even:  # torch pools pad evenly: pad first, with what the pool ignores
            data = f.pad(data, pad, value=float("-inf") if kind == "max" else 0.0)
            padding = 0
        if kind == "max":
            fn = getattr(f, f"max_pool{spatial}d")
            return fn(data, kernel, strides, padding, ints(a.dilation), bool(a.ceil_mode))
        fn = getattr(f, f"avg_pool{spatial}d")
        return fn(data, kernel, strides, padding, bool(a.ceil_mode), bool(a.count_include_pad))

    return convert


def _torch_dtype(t, dtype) -> object:
    return {"bool": t.bool}.get(str(dtype), getattr(t, str(dtype)))


def _reshape(t, call, x, dev):
    shape = [-1 if d is None else d for d in ir_types.dims(call.ty)]  # at most one symbolic: the check says
    return x[0].reshape(shape)


def _expand_dims(t, call, x, dev):
    ndim = x[0].dim() + len(ints(call.attrs.axis))
    out = x[0]
    for axis in sorted(a % ndim for a in ints(call.attrs.axis)):
        out = out.unsqueeze(axis)
    return out


def _squeeze(t, call, x, dev):
    axis = call.attrs.axis
    if axis is None:
        return x[0].squeeze()
    out = x[0]
    for a in sorted((a % x[0].dim() for a in ints(axis)), reverse=True):
        out = out.squeeze(a)
    return out


def _permute_dims(t, call, x, dev):
    axes = call.attrs.axes
    return x[0].permute(list(reversed(range(x[0].dim()))) if axes is None else ints(axes))


def _concat(t, call, x, dev):
    if call.attrs.axis is None:
        return t.cat([p.reshape(-1) for p in x[0]])
    return t.cat(list(x[0]), dim=int(call.attrs.axis))


def _split(t, call, x, dev):
    axis = int(call.attrs.axis) % x[0].dim()
    sizes = [static_shape(f)[axis] for f in call.ty.fields]
    return tuple(t.split(x[0], sizes, dim=axis))


def _strided_slice(t, call, x, dev):
    axes, begin, end = (ints(v) for v in call.args[1:4])
    strides = ints(call.args[4]) if len(call.args) > 4 else [1] * len(axes)
    index = [slice(None)] * x[0].dim()
    for axis, b, e, s in zip(axes, begin, end, strides):
        index[axis] = slice(b, e, s)  # Python's slicing clamps out-of-range bounds, as Relax does
    return x[0][tuple(index)]


def _layer_norm(t, call, x, dev):
    a = call.attrs
    shape = static_shape(call.args[1].ty)
    weight = x[1] if a.scale else None
    bias = x[2] if a.center else None
    return t.nn.functional.layer_norm(x[0], shape, weight, bias, float(a.epsilon))


def _adaptive_avg_pool2d(t, call, x, dev):
    return t.nn.functional.adaptive_avg_pool2d(x[0], static_shape(call.ty)[2:])


def _filled(value) -> Callable:
    def convert(t, call, x, dev):
        return t.full(static_shape(call.ty), value, dtype=_torch_dtype(t, call.ty.dtype), device=dev)

    return convert


def _arange(t, call, x, dev):
    start, end, step = (python_number(v) for v in call.args[:3])
    return t.arange(start, end, step, dtype=_torch_dtype(t, call.ty.dtype), device=dev)


def _divide(t, call, x, dev):
    floor = not str(call.ty.dtype).startswith(("float", "bfloat"))  # TVM divides integers with floor semantics
    return t.div(x[0], x[1], rounding_mode="floor" if floor else None)


def _get_valid_counts(t, call, x, dev):
    """TVM's box filter: each picture's boxes scoring above the threshold (of a class >= 0), moved to the
    front in their order, with their count and first indices; the rest filled with -1."""
    a = call.attrs
    data = x[0]
    valid = data[..., int(a.score_index)] > float(a.score_threshold)
    if int(a.id_index) >= 0:
        valid &= data[..., int(a.id_index)] >= 0
    order = t.argsort((~valid).to(t.int8), dim=1, stable=True)
    count = valid.sum(dim=1).to(t.int32)
    rank = t.arange(data.shape[1], device=data.device).unsqueeze(0)
    kept = rank < count.unsqueeze(1)
    boxes = t.where(kept.unsqueeze(-1), data.gather(1, order.unsqueeze(-1).expand_as(data)), -1.0)
    return count, boxes.to(data.dtype), t.where(kept, order.to(t.int32), -1)


def _non_max_suppression(t, call, x, dev):
    """TVM's classic NMS, each picture's valid boxes sorted by score, the top ``top_k`` kept, then per class
    (all classes at once with ``force_suppress``) with torchvision; the survivors first, the rest -1."""
    import torchvision

    a = call.attrs
    data, count = x[0], x[1]
    score, start, cls = int(a.score_index), int(a.coord_start), int(a.id_index)
    out = t.full_like(data, -1.0)
    for b in range(data.shape[0]):
        boxes = data[b, : int(count[b])]
        order = t.argsort(boxes[:, score], descending=True, stable=True)
        if int(a.top_k) > 0:
            order = order[: int(a.top_k)]
        boxes = boxes[order]
        coords, scores = boxes[:, start : start + 4], boxes[:, score]
        if bool(a.force_suppress) or cls < 0:
            keep = torchvision.ops.nms(coords, scores, float(a.iou_threshold))
        else:
            keep = torchvision.ops.batched_nms(coords, scores, boxes[:, cls], float(a.iou_threshold))
        if int(a.max_output_size) > 0:
            keep = keep[: int(a.max_output_size)]
        out[b, : keep.numel()] = boxes[keep]
    return out


def _check_nms(call):
    a = call.attrs
    if bool(a.return_indices) or not bool(a.invalid_to_bottom):
        return "relax.vision.non_max_suppression returning indices or leaving gaps (only survivors first)"
    if float(a.soft_nms_sigma) != 0.0:
        return "relax.vision.non_max_suppression with soft NMS"
    return None


def _check_reshape(call):
    dims = ir_types.dims(call.ty)
    return None if dims.count(None) <= 1 else f"relax.reshape to a shape with {dims.count(None)} symbolic dimensions"


def _check_positive_strides(call):
    strides = ints(call.args[4]) if len(call.args) > 4 else []
    return "relax.strided_slice with a negative stride" if any(s <= 0 for s in strides) else None


_UNARY = {
    "relax.nn.relu": "relu",
    "relax.sigmoid": "sigmoid",
    "relax.tanh": "tanh",
    "relax.exp": "exp",
    "relax.log": "log",
    "relax.sqrt": "sqrt",
    "relax.abs": "abs",
    "relax.negative": "neg",
    "relax.sin": "sin",
    "relax.cos": "cos",
    "relax.atan": "atan",
    "relax.ceil": "ceil",
    "relax.floor": "floor",
    "relax.erf": "erf",
}
_BINARY = {
    "relax.add": "add",
    "relax.subtract": "sub",
    "relax.multiply": "mul",
    "relax.power": "pow",
    "relax.maximum": "maximum",
    "relax.minimum": "minimum",
    "relax.matmul": "matmul",
    "relax.equal": "eq",
    "relax.not_equal": "ne",
    "relax.greater": "gt",
    "relax.greater_equal": "ge",
    "relax.less": "lt",
    "relax.less_equal": "le",
}
_REDUCE = {"relax.sum": "sum", "relax.prod": "prod", "relax.max": "amax", "relax.min": "amin", "relax.mean": "mean"}

CONVERTERS: dict = {
    **{op: _unary(fn) for op, fn in _UNARY.items()},
    **{op: _binary(fn) for op, fn in _BINARY.items()},
    **{op: _reduce(fn) for op, fn in _REDUCE.items()},
    "relax.divide": _divide,
    "relax.nn.silu": lambda t, call, x, dev: t.nn.functional.silu(x[0]),
    "relax.nn.softmax": lambda t, call, x, dev: t.softmax(x[0], dim=int(call.attrs.axis)),
    "relax.nn.batch_flatten": lambda t, call, x, dev: x[0].flatten(1),
    "relax.expand_dims": _expand_dims,
    "relax.squeeze": _squeeze,
    "relax.permute_dims": _permute_dims,
    "relax.reshape": _reshape,
    "relax.concat": _concat,
    "relax.split": _split,
    "relax.nn.conv1d": _conv(1, False),
    "relax.nn.conv2d": _conv(2, False),
    "relax.nn.conv3d": _conv(3, False),
    "relax.nn.conv2d_transpose": _conv(2, True),
    "relax.nn.max_pool2d": _pool("max", 2),
    "relax.nn.avg_pool2d": _pool("avg", 2),
    "relax.nn.adaptive_avg_pool2d": _adaptive_avg_pool2d,
    "relax.nn.layer_norm": _layer_norm,
    "relax.clip": lambda t, call, x, dev: t.clamp(x[0], python_number(call.args[1]), python_number(call.args[2])),
    "relax.strided_slice": _strided_slice,
    "relax.where": lambda t, call, x, dev: t.where(x[0], x[1], x[2]),
    "relax.astype": lambda t, call, x, dev: x[0].to(_torch_dtype(t, call.ty.dtype)),
    "relax.zeros_like": _filled(0),
    "relax.ones_like": _filled(1),
    "relax.arange": _arange,
    "relax.vision.get_valid_counts": _get_valid_counts,
    "relax.vision.non_max_suppression": _non_max_suppression,
}
# Beyond the checks both tables share (:data:`.legal.CHECKS`): torch's own limits.
CHECKS: dict = {
    **legal.CHECKS,
    "relax.reshape": _check_reshape,
    "relax.strided_slice": legal.both(legal.CHECKS["relax.strided_slice"], _check_positive_strides),
    "relax.vision.non_max_suppression": _check_nms,
}
SUPPORTED_OPS = frozenset(CONVERTERS)


def unsupported(call: relax.Call) -> str | None:
    """Why the torch backend cannot run ``call``, or None when it can."""
    name = call.op.name
    if name not in CONVERTERS:
        return f"{name} (no torch converter)"
    return legal.why_not(call, CHECKS)
