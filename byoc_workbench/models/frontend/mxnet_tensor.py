"""Converters for MXNet's tensor ops: elementwise, reduce, shape and slicing.

Families of ops are built by factories (unary, binary, scalar, compare, reduce),
so adding an op of a known family is one table entry.
"""

from __future__ import annotations

import numpy as np
from tvm.relax import op as R

from .mxnet_attrs import REQUIRED
from .mxnet_common import dtype_of, norm_axis, scalar, shape_of, unsupported

# --- factories -------------------------------------------------------------------------


def unary(fn):
    """Converter for a one-input op with no attributes."""
    return lambda bb, inputs, attrs: fn(inputs[0])


def binary(fn):
    """Converter for elemwise_*/broadcast_* (Relax broadcasts like MXNet's broadcast_*)."""
    return lambda bb, inputs, attrs: fn(inputs[0], inputs[1])


def compare(fn):
    """Comparison of two tensors; MXNet returns 1/0 in the input's dtype, Relax a bool."""
    return lambda bb, inputs, attrs: R.astype(fn(inputs[0], inputs[1]), dtype_of(inputs[0]))


def with_scalar(fn, reverse=False, is_compare=False):
    """Converter for ``_*_scalar`` ops: ``fn(x, scalar)``, or ``fn(scalar, x)`` for ``_r*``."""

    def convert(bb, inputs, attrs):
        x = inputs[0]
        s = scalar(attrs.float("scalar", 0.0), x)
        out = fn(s, x) if reverse else fn(x, s)
        return R.astype(out, dtype_of(x)) if is_compare else out

    return convert


def reduce(fn):
    """Converter for sum/mean/max/min/prod with MXNet's axis, keepdims and exclude."""

    def convert(bb, inputs, attrs):
        x = inputs[0]
        ndim = len(shape_of(x))
        axis = attrs.tuple("axis")
        axes = None if axis in (None, ()) else [norm_axis(int(a), ndim) for a in axis]
        if attrs.bool("exclude", False) and axes is not None:
            axes = [a for a in range(ndim) if a not in axes]
        out = bb.normalize(fn(x, axis=axes, keepdims=attrs.bool("keepdims", False)))
        # MXNet never returns a 0-d tensor: a full reduction has shape (1,).
        return R.reshape(out, (1,)) if not shape_of(out) else out

    return convert


# --- shape ops -------------------------------------------------------------------------


def mxnet_reshape_shape(in_shape, spec, reverse=False) -> tuple[int, ...]:
    """Resolve MXNet's Reshape codes (0 copy, -1 infer, -2 copy rest, -3 merge two, -4 split).

    Parameters
    ----------
    in_shape : tuple of int
    spec : tuple of int
        The ``shape`` attribute.
    reverse : bool
        Match the special codes from the right, as MXNet's ``reverse=True`` does.
    """
    if reverse:
        return tuple(reversed(mxnet_reshape_shape(tuple(reversed(in_shape)), _reverse_spec(spec))))
    out, src, i = [], 0, 0
    spec = list(spec)
    while i < len(spec):
        code = spec[i]
        if code == 0:
            out.append(in_shape[src])
            src += 1
        elif code == -1:
            out.append(-1)
            src += 1
        elif code == -2:
            out.extend(in_shape[src:])
            src = len(in_shape)
        elif code == -3:
            out.append(in_shape[src] * in_shape[src + 1])
            src += 2
        elif code == -4:
            d1, d2 = spec[i + 1], spec[i + 2]
            whole = in_shape[src]
            d1 = whole // d2 if d1 == -1 else d1
            d2 = whole // d1 if d2 == -1 else d2
            out.extend([d1, d2])
            src += 1
            i += 2
        else:
            out.append(int(code))
            src += 1
        i += 1
    if -1 in out:
        known = int(np.prod([d for d in out if d != -1]))
        out[out.index(-1)] = int(np.prod(in_shape)) // max(known, 1)
    return tuple(int(d) for d in out)


def _reverse_spec(spec):
    # -4 takes two following values; keep each group together when reversing.
    groups, i = [], 0
    spec = list(spec)
    while i < len(spec):
        step = 3 if spec[i] == -4 else 1
        groups.append(spec[i : i + step])
        i += step
    return [v for g in reversed(groups) for v in ([g[0], g[2], g[1]] if g[0] == -4 else g)]


def _reshape(bb, inputs, attrs):
    spec = attrs.tuple("shape", ())
    new_shape = mxnet_reshape_shape(shape_of(inputs[0]), spec, attrs.bool("reverse", False))
    return R.reshape(inputs[0], new_shape)


def _transpose(bb, inputs, attrs):
    axes = attrs.tuple("axes", ())
    return R.permute_dims(inputs[0], list(axes) if axes else None)


def _concat(bb, inputs, attrs):
    return R.concat(inputs, axis=attrs.int("dim", 1))


def _stack(bb, inputs, attrs):
    return R.stack(inputs, axis=attrs.int("axis", 0))


def _expand_dims(bb, inputs, attrs):
    return R.expand_dims(inputs[0], attrs.int("axis", REQUIRED))


def _squeeze(bb, inputs, attrs):
    axis = attrs.tuple("axis")
    return R.squeeze(inputs[0], None if axis is None else list(axis))


def _slice_axis(bb, inputs, attrs):
    x = inputs[0]
    shape = shape_of(x)
    axis = norm_axis(attrs.int("axis", REQUIRED), len(shape))
    begin, end = attrs.int("begin", REQUIRED), attrs.int("end")
    begin = begin + shape[axis] if begin < 0 else begin
    end = shape[axis] if end is None else (end + shape[axis] if end < 0 else end)
    return R.strided_slice(x, [axis], [begin], [end])


def _slice(bb, inputs, attrs):
    x = inputs[0]
    shape = shape_of(x)
    begin, end = attrs.tuple("begin", REQUIRED), attrs.tuple("end", REQUIRED)
    step = attrs.tuple("step", ()) or (None,) * len(begin)
    axes, begins, ends, strides = [], [], [], []
    for axis, (b, e, s) in enumerate(zip(begin, end, step)):
        s = 1 if s is None else int(s)
        if s > 0:
            b = 0 if b is None else b
            e = shape[axis] if e is None else e
        else:
            # A negative step walks from the end; an open end runs past index 0.
            b = shape[axis] - 1 if b is None else b
            e = -shape[axis] - 1 if e is None else e
        axes.append(axis)
        begins.append(int(b))
        ends.append(int(e))
        strides.append(s)
    return R.strided_slice(x, axes, begins, ends, strides)


def _slice_like(bb, inputs, attrs):
    x, like = inputs
    shape, like_shape = shape_of(x), shape_of(like)
    axes = attrs.tuple("axes", ())
    axes = [norm_axis(int(a), len(shape)) for a in axes] if axes else list(range(len(like_shape)))
    return R.strided_slice(x, axes, [0] * len(axes), [like_shape[a] for a in axes])


def _where(bb, inputs, attrs):
    cond, x, y = inputs
    # MXNet takes any nonzero condition as true.
    return R.where(R.not_equal(cond, scalar(0, cond)), x, y)


def _arange(bb, inputs, attrs):
    start, stop = attrs.float("start", 0.0), attrs.float("stop")
    step, repeat = attrs.float("step", 1.0), attrs.int("repeat", 1)
    dtype = attrs.str("dtype", "float32")
    if attrs.bool("infer_range", False):
        unsupported(attrs, "_arange with infer_range=True")
    if stop is None:
        start, stop = 0.0, start
    # Whole numbers go in as ints so that the length is computed exactly.
    start, stop, step = (int(v) if float(v).is_integer() else v for v in (start, stop, step))
    out = R.arange(start, stop, step, dtype=dtype)
    return R.repeat(out, repeat, axis=0) if repeat > 1 else out


def _clip(bb, inputs, attrs):
    return R.clip(inputs[0], attrs.float("a_min", REQUIRED), attrs.float("a_max", REQUIRED))


def _cast(bb, inputs, attrs):
    return R.astype(inputs[0], attrs.str("dtype", REQUIRED))


def _like(fn):
    return lambda bb, inputs, attrs: fn(inputs[0])


def _identity(bb, inputs, attrs):
    return inputs[0]


def _round(bb, inputs, attrs):
    # MXNet rounds halves away from zero (-2.5 -> -3); R.round rounds them to even.
    # sign(x) * floor(|x| + 0.5) would be wrong at 0.49999997, where |x| + 0.5 rounds
    # up to 1 in float32; the fraction |x| - floor(|x|) is exact, so compare that.
    x = inputs[0]
    if not dtype_of(x).startswith(("float", "bfloat")):
        return x
    magnitude = bb.emit(R.abs(x))
    whole = bb.emit(R.floor(magnitude))
    up = R.astype(R.greater_equal(R.subtract(magnitude, whole), scalar(0.5, x)), dtype_of(x))
    return R.multiply(R.sign(x), R.add(whole, up))


def _power_scalar(bb, inputs, attrs):
    return R.power(inputs[0], scalar(attrs.float("scalar"), inputs[0]))


def _rpower_scalar(bb, inputs, attrs):
    return R.power(scalar(attrs.float("scalar"), inputs[0]), inputs[0])


# --- the table -------------------------------------------------------------------------

_BINARY = {"add": R.add, "sub": R.subtract, "mul": R.multiply, "div": R.divide}
_BROADCAST = {**_BINARY, "maximum": R.maximum, "minimum": R.minimum, "power": R.power}
_COMPARE = {
    "greater": R.greater,
    "greater_equal": R.greater_equal,
    "lesser": R.less,
    "lesser_equal": R.less_equal,
    "equal": R.equal,
    "not_equal": R.not_equal,
}

TENSOR_CONVERTERS = {
    **{f"elemwise_{k}": binary(f) for k, f in _BINARY.items()},
    **{f"broadcast_{k}": binary(f) for k, f in _BROADCAST.items()},
    **{f"_{k}": binary(f) for k, f in _BINARY.items()},
    "_plus": binary(R.add),
    "_minus": binary(R.subtract),
    "_Plus": binary(R.add),
    "_Minus": binary(R.subtract),
    "_Mul": binary(R.multiply),
    "_Div": binary(R.divide),
    "_maximum": binary(R.maximum),
    "_minimum": binary(R.minimum),
    **{f"broadcast_{k}": compare(f) for k, f in _COMPARE.items()},
    **{f"_{k}": compare(f) for k, f in _COMPARE.items()},
    "_plus_scalar": with_scalar(R.add),
    "_minus_scalar": with_scalar(R.subtract),
    "_rminus_scalar": with_scalar(R.subtract, reverse=True),
    "_mul_scalar": with_scalar(R.multiply),
    "_div_scalar": with_scalar(R.divide),
    "_rdiv_scalar": with_scalar(R.divide, reverse=True),
    "_maximum_scalar": with_scalar(R.maximum),
    "_minimum_scalar": with_scalar(R.minimum),
    "_power_scalar": _power_scalar,
    "_rpower_scalar": _rpower_scalar,
    **{f"_{k}_scalar": with_scalar(f, is_compare=True) for k, f in _COMPARE.items()},
    "relu": unary(R.nn.relu),
    "sigmoid": unary(R.sigmoid),
    "tanh": unary(R.tanh),
    "exp": unary(R.exp),
    "log": unary(R.log),
    "sqrt": unary(R.sqrt),
    "rsqrt": unary(R.rsqrt),
    "abs": unary(R.abs),
    "negative": unary(R.negative),
    "square": unary(R.square),
    "floor": unary(R.floor),
    "ceil": unary(R.ceil),
    "round": _round,
    "sign": unary(R.sign),
    "sum": reduce(R.sum),
    "mean": reduce(R.mean),
    "max": reduce(R.max),
    "min": reduce(R.min),
    "prod": reduce(R.prod),
    "Reshape": _reshape,
    "reshape": _reshape,
    "transpose": _transpose,
    "Concat": _concat,
    "concat": _concat,
    "stack": _stack,
    "expand_dims": _expand_dims,
    "squeeze": _squeeze,
    "slice_axis": _slice_axis,
    "slice": _slice,
    "crop": _slice,
    "slice_like": _slice_like,
    "zeros_like": _like(R.zeros_like),
    "ones_like": _like(R.ones_like),
    "where": _where,
    "_arange": _arange,
    "clip": _clip,
    "Cast": _cast,
    "cast": _cast,
    "_copy": _identity,
    "identity": _identity,
    "BlockGrad": _identity,
    "stop_gradient": _identity,
}
