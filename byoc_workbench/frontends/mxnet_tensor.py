"""Converters for MXNet's tensor ops: elementwise, reduce, shape and slicing.

Families of ops are built by factories (unary, binary, scalar, comparison, reduce),
so adding an op of a known family is one table entry.
"""

from __future__ import annotations

import numpy as np
from tvm import relax
from tvm.relax import op as R

from byoc_workbench.frontends.mxnet_attrs import REQUIRED
from byoc_workbench.frontends.mxnet_common import dtype_of, norm_axis, scalar_like, shape_of, unsupported

# --- factories -------------------------------------------------------------------------


def unary(fn):
    """Converter for a one-input op with no attributes."""
    return lambda bb, inputs, attrs: fn(inputs[0])


def binary(fn):
    """Converter for elemwise_*/broadcast_* (Relax broadcasts like MXNet's broadcast_*)."""
    return lambda bb, inputs, attrs: fn(inputs[0], inputs[1])


def comparison(fn):
    """Comparison of two tensors; MXNet returns 1/0 in the input's dtype, Relax a bool."""
    return lambda bb, inputs, attrs: R.astype(fn(inputs[0], inputs[1]), dtype_of(inputs[0]))


def with_scalar(fn, reverse=False, is_compare=False):
    """Converter for ``_*_scalar`` ops: ``fn(x, scalar)``, or ``fn(scalar, x)`` for ``_r*``."""

    def convert(bb, inputs, attrs):
        x = inputs[0]
        s = scalar_like(attrs.float("scalar", 0.0), x)
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
    rank = len(shape_of(x))
    if len(shape_of(cond)) == 1 < rank:
        # A 1-d condition picks whole rows of x or y (FPN's choice of pyramid level per ROI).
        cond = R.reshape(cond, (-1,) + (1,) * (rank - 1))
    # MXNet takes any nonzero condition as true.
    return R.where(R.not_equal(cond, scalar_like(0, inputs[0])), x, y)


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


def _tile(bb, inputs, attrs):
    return R.tile(inputs[0], [int(r) for r in attrs.tuple("reps", REQUIRED)])


def _repeat(bb, inputs, attrs):
    axis = attrs.int("axis")
    x = inputs[0]
    if axis is None:  # MXNet flattens first, as numpy does
        x = R.reshape(x, (-1,))
        axis = 0
    return R.repeat(x, attrs.int("repeats", REQUIRED), axis=axis)


def _reverse(bb, inputs, attrs):
    out = inputs[0]
    for axis in attrs.tuple("axis", REQUIRED):
        out = R.flip(out, int(axis))
    return out


def _swap_axis(bb, inputs, attrs):
    ndim = len(shape_of(inputs[0]))
    axes = list(range(ndim))
    a, b = norm_axis(attrs.int("dim1", 0), ndim), norm_axis(attrs.int("dim2", 0), ndim)
    axes[a], axes[b] = axes[b], axes[a]
    return R.permute_dims(inputs[0], axes)


def _broadcast_axis(bb, inputs, attrs):
    shape = list(shape_of(inputs[0]))
    for axis, size in zip(attrs.tuple("axis", ()), attrs.tuple("size", ())):
        shape[norm_axis(int(axis), len(shape))] = int(size)
    return R.broadcast_to(inputs[0], shape)


def _like_shape(attrs, lhs, rhs, prefix: str) -> list:
    """The target shape of ``*_like``: ``rhs``'s, or ``lhs``'s with the chosen axes taken from ``rhs``."""
    lhs_shape, rhs_shape = list(shape_of(lhs)), list(shape_of(rhs))
    if prefix == "broadcast":
        lhs_axes, rhs_axes = attrs.tuple("lhs_axes"), attrs.tuple("rhs_axes")
        if lhs_axes is None:
            return rhs_shape
        for a, b in zip(lhs_axes, rhs_axes):
            lhs_shape[norm_axis(int(a), len(lhs_shape))] = rhs_shape[norm_axis(int(b), len(rhs_shape))]
        return lhs_shape

    # reshape_like: lhs[lhs_begin:lhs_end] is replaced by rhs[rhs_begin:rhs_end].
    def span(shape, begin, end):
        begin = 0 if begin is None else norm_axis(begin, len(shape))
        end = len(shape) if end is None else norm_axis(end, len(shape))
        return begin, end

    lb, le = span(lhs_shape, attrs.int("lhs_begin"), attrs.int("lhs_end"))
    rb, re_ = span(rhs_shape, attrs.int("rhs_begin"), attrs.int("rhs_end"))
    return lhs_shape[:lb] + rhs_shape[rb:re_] + lhs_shape[le:]


def _broadcast_like(bb, inputs, attrs):
    return R.broadcast_to(inputs[0], _like_shape(attrs, inputs[0], inputs[1], "broadcast"))


def _reshape_like(bb, inputs, attrs):
    return R.reshape(inputs[0], _like_shape(attrs, inputs[0], inputs[1], "reshape"))


def _add_n(bb, inputs, attrs):
    out = inputs[0]
    for x in inputs[1:]:
        out = R.add(out, x)
    return out


def _log2(bb, inputs, attrs):
    # Relax has no log2; log(x) / log(2) in float64 rounds to log2 in float32, so a floor of it
    # (FPN's choice of pyramid level) agrees with MXNet's log2f.
    x = inputs[0]
    dtype = dtype_of(x)
    wide = bb.normalize(R.astype(x, "float64")) if dtype == "float32" else x
    out = R.divide(R.log(wide), scalar_like(float(np.log(2.0)), wide))
    return R.astype(out, dtype) if dtype == "float32" else out


def _batch_dot(bb, inputs, attrs):
    a, b = inputs
    if attrs.bool("transpose_a", False):
        a = R.permute_dims(a, [0, 2, 1])
    if attrs.bool("transpose_b", False):
        b = R.permute_dims(b, [0, 2, 1])
    return R.matmul(a, b)


def _filled(value=None):
    """``_zeros``/``_ones``/``_full``: a constant of the node's shape and dtype."""

    def convert(bb, inputs, attrs):
        shape = tuple(int(d) for d in attrs.tuple("shape", REQUIRED))
        fill = attrs.float("value", REQUIRED) if value is None else value
        dtype = attrs.str("dtype", "float32")
        return relax.const(np.full(shape, fill, dtype=dtype), dtype)

    return convert


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
    up = R.astype(R.greater_equal(R.subtract(magnitude, whole), scalar_like(0.5, x)), dtype_of(x))
    return R.multiply(R.sign(x), R.add(whole, up))


def _power_scalar(bb, inputs, attrs):
    return R.power(inputs[0], scalar_like(attrs.float("scalar"), inputs[0]))


def _rpower_scalar(bb, inputs, attrs):
    return R.power(scalar_like(attrs.float("scalar"), inputs[0]), inputs[0])


# --- the table -------------------------------------------------------------------------

_BINARY = {"add": R.add, "sub": R.subtract, "mul": R.multiply, "div": R.divide}
# MXNet's mod takes the divisor's sign, as floor_mod does.
_BROADCAST = {**_BINARY, "maximum": R.maximum, "minimum": R.minimum, "power": R.power, "mod": R.floor_mod}
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
    **{f"broadcast_{k}": comparison(f) for k, f in _COMPARE.items()},
    **{f"_{k}": comparison(f) for k, f in _COMPARE.items()},
    "_plus_scalar": with_scalar(R.add),
    "_minus_scalar": with_scalar(R.subtract),
    "_rminus_scalar": with_scalar(R.subtract, reverse=True),
    "_mul_scalar": with_scalar(R.multiply),
    "_div_scalar": with_scalar(R.divide),
    "_rdiv_scalar": with_scalar(R.divide, reverse=True),
    "_mod": binary(R.floor_mod),
    "_mod_scalar": with_scalar(R.floor_mod),
    "_rmod_scalar": with_scalar(R.floor_mod, reverse=True),
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
    "tile": _tile,
    "repeat": _repeat,
    "reverse": _reverse,
    "SwapAxis": _swap_axis,
    "swapaxes": _swap_axis,
    "broadcast_axis": _broadcast_axis,
    "broadcast_axes": _broadcast_axis,
    "broadcast_like": _broadcast_like,
    "reshape_like": _reshape_like,
    "add_n": _add_n,
    "ElementWiseSum": _add_n,
    "log2": _log2,
    "batch_dot": _batch_dot,
    "_zeros": _filled(0.0),
    "_ones": _filled(1.0),
    "_full": _filled(),
    "clip": _clip,
    "Cast": _cast,
    "cast": _cast,
    "_copy": _identity,
    "identity": _identity,
    "BlockGrad": _identity,
    "stop_gradient": _identity,
}
