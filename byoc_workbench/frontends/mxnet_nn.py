"""Converters for MXNet's neural-network ops: convolution, normalisation, pooling."""

from __future__ import annotations

import numpy as np
from tvm import relax
from tvm.relax import op as R

from byoc_workbench.frontends.mxnet_attrs import REQUIRED
from byoc_workbench.frontends.mxnet_common import dtype_of, scalar_like, shape_of, spatial, unsupported

# Layouts by kernel rank, channels first then channels last (the two MXNet knows).
_LAYOUTS = {1: ("NCW", "NWC"), 2: ("NCHW", "NHWC"), 3: ("NCDHW", "NDHWC")}
_CONV = {1: R.nn.conv1d, 2: R.nn.conv2d, 3: R.nn.conv3d}
_MAX_POOL = {1: R.nn.max_pool1d, 2: R.nn.max_pool2d, 3: R.nn.max_pool3d}
_AVG_POOL = {1: R.nn.avg_pool1d, 2: R.nn.avg_pool2d, 3: R.nn.avg_pool3d}


def _kernel_and_layout(attrs, x, op: str) -> tuple[tuple[int, ...], str]:
    # The kernel's rank picks the op (conv1d/2d/3d); the layout must name as many axes as
    # the data has, or TVM fails deep inside with a message about padding lengths.
    kernel = tuple(int(k) for k in attrs.tuple("kernel", REQUIRED))
    rank = len(kernel)
    if rank not in _LAYOUTS:
        unsupported(attrs, f"{op} with a {rank}-d kernel {kernel}", "use a 1-d, 2-d or 3-d kernel")
    layout = attrs.str("layout") or _LAYOUTS[rank][0]
    if layout not in _LAYOUTS[rank]:
        unsupported(attrs, f"{op} layout={layout!r} with a {rank}-d kernel", f"use {' or '.join(_LAYOUTS[rank])}")
    if len(shape_of(x)) != rank + 2:
        unsupported(attrs, f"{op} with a {rank}-d kernel on {len(shape_of(x))}-d data {shape_of(x)}")
    return kernel, layout


def _conv(bb, inputs, attrs):
    kernel, layout = _kernel_and_layout(attrs, inputs[0], "Convolution")
    rank = len(kernel)
    strides, padding = spatial(attrs, "stride", rank, 1), spatial(attrs, "pad", rank, 0)
    dilation = spatial(attrs, "dilate", rank, 1)
    groups = attrs.int("num_group", 1)
    # MXNet keeps the weight as (O, I, *k) for NC* layouts and (O, *k, I) for N*C.
    kernel_layout = "OI" + layout[2:] if layout.startswith("NC") else "O" + layout[1:-1] + "I"
    out = _CONV[rank](inputs[0], inputs[1], strides, padding, dilation, groups, layout, kernel_layout)
    if attrs.bool("no_bias", False):
        return out
    out = bb.normalize(out)
    bias_shape = [1] * len(layout)
    bias_shape[layout.index("C")] = -1
    return R.add(out, R.reshape(inputs[2], bias_shape))


def _deconv(bb, inputs, attrs):
    # MXNet's Deconvolution is the gradient of Convolution: weight (C_in, C_out / groups, *k).
    kernel, layout = _kernel_and_layout(attrs, inputs[0], "Deconvolution")
    rank = len(kernel)
    if rank != 2 or layout != "NCHW":
        unsupported(attrs, f"Deconvolution with a {rank}-d kernel in layout {layout!r}", "use a 2-d NCHW Deconvolution")
    if attrs.tuple("target_shape", ()):
        unsupported(attrs, "Deconvolution with target_shape", "give pad and adj instead")
    strides, padding = spatial(attrs, "stride", rank, 1), spatial(attrs, "pad", rank, 0)
    dilation, output_padding = spatial(attrs, "dilate", rank, 1), spatial(attrs, "adj", rank, 0)
    groups = attrs.int("num_group", 1)
    out = R.nn.conv2d_transpose(
        inputs[0], inputs[1], strides, padding, output_padding, dilation, groups, "NCHW", "IOHW"
    )
    # Unlike Convolution, Deconvolution has no bias unless told otherwise.
    if attrs.bool("no_bias", True):
        return out
    return R.add(bb.normalize(out), R.reshape(inputs[2], (1, -1, 1, 1)))


def _deformable_conv(bb, inputs, attrs):
    """DCNv2 (``_contrib_ModulatedDeformableConvolution``, CenterNet's ``dcnv2`` heads), built from
    Relax ops: each kernel tap samples the data bilinearly at its own offset (``grid_sample``,
    zeros outside), scaled by its mask, and a matmul sums the taps (im2col)."""
    data, offset, mask, weight = inputs[:4]
    kernel, layout = _kernel_and_layout(attrs, data, "ModulatedDeformableConvolution")
    if len(kernel) != 2 or layout != "NCHW":
        unsupported(attrs, f"ModulatedDeformableConvolution with a {len(kernel)}-d kernel in layout {layout!r}")
    groups, deformable = attrs.int("num_group", 1), attrs.int("num_deformable_group", 1)
    if groups != 1 or deformable != 1:
        unsupported(attrs, f"ModulatedDeformableConvolution num_group={groups}, num_deformable_group={deformable}")
    (sh, sw), (ph, pw) = spatial(attrs, "stride", 2, 1), spatial(attrs, "pad", 2, 0)
    dh, dw = spatial(attrs, "dilate", 2, 1)
    n, c, h, w = shape_of(data)
    _, _, ho, wo = shape_of(offset)
    kh, kw = kernel
    taps = kh * kw
    if h < 2 or w < 2:
        unsupported(attrs, f"ModulatedDeformableConvolution on {h}x{w} data")
    # Where each tap k = i * kw + j reads without offset; MXNet's offsets are (dy, dx) per tap.
    i, j = np.divmod(np.arange(taps), kw)
    base_y = (np.arange(ho) * sh - ph)[None, :, None] + (i * dh)[:, None, None] + np.zeros((1, 1, wo))
    base_x = (np.arange(wo) * sw - pw)[None, None, :] + (j * dw)[:, None, None] + np.zeros((1, ho, 1))
    dtype = dtype_of(data)
    pairs = bb.emit(R.reshape(offset, (n, taps, 2, ho, wo)))
    grid = []
    for axis, base, size in ((1, base_x, w), (0, base_y, h)):  # grid_sample wants (x, y)
        delta = R.squeeze(R.strided_slice(pairs, [2], [axis], [axis + 1]), [2])
        position = R.add(delta, relax.const(base.astype(dtype)))
        # align_corners: -1 and 1 are the centres of the first and last pixels.
        grid.append(
            bb.emit(R.subtract(R.multiply(position, scalar_like(2.0 / (size - 1), data)), scalar_like(1.0, data)))
        )
    # (N, 2, H, W), x first: the layout TVM 0.27's grid_sample computes with (not the (N, H, W, 2)
    # its docstring gives).
    grid = bb.emit(R.reshape(R.stack(grid, axis=1), (n, 2, taps * ho, wo)))
    sampled = bb.emit(R.image.grid_sample(data, grid, "bilinear", "NCHW", "zeros", True))
    sampled = bb.emit(R.multiply(R.reshape(sampled, (n, c, taps, ho, wo)), R.reshape(mask, (n, 1, taps, ho, wo))))
    columns = bb.emit(R.reshape(sampled, (n, c * taps, ho * wo)))
    out = bb.emit(R.matmul(R.reshape(weight, (shape_of(weight)[0], c * taps)), columns))
    out = R.reshape(out, (n, shape_of(weight)[0], ho, wo))
    if attrs.bool("no_bias", False):
        return out
    return R.add(bb.normalize(out), R.reshape(inputs[4], (1, -1, 1, 1)))


def _batch_norm(bb, inputs, attrs):
    data, gamma, beta, mean, var = inputs
    # Inference uses the moving statistics whatever use_global_stats says; momentum only
    # matters in training. With fix_gamma MXNet multiplies by 1, not by the stored gamma.
    axis = attrs.int("axis", 1)
    eps = attrs.float("eps", 1e-3)
    fix_gamma = attrs.bool("fix_gamma", True)
    if fix_gamma:
        gamma = R.ones_like(gamma)
    out = R.nn.batch_norm(data, gamma, beta, mean, var, axis=axis, epsilon=eps, training=False)
    return bb.emit(relax.TupleGetItem(bb.emit(out), 0))


def _l2_normalization(bb, inputs, attrs):
    # x / sqrt(sum(x^2) + eps) over each instance, each position's channels, or each channel's positions.
    x = inputs[0]
    ndim = len(shape_of(x))
    mode = attrs.str("mode", "instance")
    axes = {"instance": range(1, ndim), "channel": [1], "spatial": range(2, ndim)}.get(mode)
    if axes is None:
        unsupported(attrs, f"L2Normalization mode={mode!r}")
    total = R.sum(R.multiply(x, x), axis=list(axes), keepdims=True)
    return R.divide(x, R.sqrt(R.add(total, scalar_like(attrs.float("eps", 1e-10), x))))


def _activation(bb, inputs, attrs):
    kind = attrs.str("act_type")
    x = inputs[0]
    if kind == "relu":
        return R.nn.relu(x)
    if kind == "sigmoid":
        return R.sigmoid(x)
    if kind == "tanh":
        return R.tanh(x)
    if kind == "softrelu":
        return R.log(R.add(R.exp(x), scalar_like(1.0, x)))
    if kind == "softsign":
        return R.divide(x, R.add(R.abs(x), scalar_like(1.0, x)))
    unsupported(attrs, f"Activation act_type={kind!r}")


def _leaky_relu(bb, inputs, attrs):
    kind = attrs.str("act_type", "leaky")
    if kind != "leaky":
        unsupported(attrs, f"LeakyReLU act_type={kind!r}")
    return R.nn.leakyrelu(inputs[0], attrs.float("slope", 0.25))


def _pooling(bb, inputs, attrs):
    x = inputs[0]
    kind = attrs.str("pool_type", "max")
    if attrs.bool("global_pool", False):
        # The kernel is ignored here, so the data's rank decides the layout.
        rank = len(shape_of(x)) - 2
        layouts = _LAYOUTS.get(rank, ())
        layout = attrs.str("layout") or (layouts[0] if layouts else None)
        if layout not in layouts:
            unsupported(attrs, f"global Pooling layout={layout!r} on {rank + 2}-d data")
        spatial_axes = tuple(i for i, c in enumerate(layout) if c not in "NC")
        reducers = {"max": R.max, "avg": R.mean, "sum": R.sum}
        if kind not in reducers:
            unsupported(attrs, f"global Pooling pool_type={kind!r}")
        return reducers[kind](x, axis=spatial_axes, keepdims=True)
    kernel, layout = _kernel_and_layout(attrs, x, "Pooling")
    rank = len(kernel)
    strides, padding = spatial(attrs, "stride", rank, 1), spatial(attrs, "pad", rank, 0)
    # "full" is MXNet's ceil mode; "same" would need asymmetric padding.
    convention = attrs.str("pooling_convention", "valid")
    if convention not in ("valid", "full"):
        unsupported(attrs, f"Pooling pooling_convention={convention!r}")
    ceil_mode = convention == "full"
    if kind == "max":
        return _MAX_POOL[rank](x, kernel, strides, padding, ceil_mode=ceil_mode, layout=layout)
    if kind == "avg":
        # MXNet counts the padding in the average unless told otherwise.
        include_pad = attrs.bool("count_include_pad", True)
        return _AVG_POOL[rank](
            x, kernel, strides, padding, ceil_mode=ceil_mode, count_include_pad=include_pad, layout=layout
        )
    unsupported(attrs, f"Pooling pool_type={kind!r}")


def _adaptive_avg_pool(bb, inputs, attrs):
    size = attrs.tuple("output_size", ()) or (1,)
    size = tuple(int(v) for v in (size * 2 if len(size) == 1 else size))
    return R.nn.adaptive_avg_pool2d(inputs[0], size)


def _bilinear_resize(bb, inputs, attrs):
    x = inputs[0]
    height, width = shape_of(x)[2:]
    mode = attrs.str("mode", "size")
    if mode == "like":
        size = shape_of(inputs[1])[2:]
    elif mode == "size":
        scale_h, scale_w = attrs.float("scale_height"), attrs.float("scale_width")
        if scale_h is not None or scale_w is not None:
            size = (int(height * (scale_h or 1.0)), int(width * (scale_w or 1.0)))
        else:
            size = (attrs.int("height", height), attrs.int("width", width))
    else:
        unsupported(attrs, f"BilinearResize2D mode={mode!r}", "use mode 'size' or 'like'")
    # MXNet samples at (i + 0.5) * scale - 0.5 unless align_corners (its default).
    corners = "align_corners" if attrs.bool("align_corners", True) else "half_pixel"
    return R.image.resize2d(x, tuple(int(v) for v in size), method="linear", coordinate_transformation_mode=corners)


def _upsampling(bb, inputs, attrs):
    kind = attrs.str("sample_type", "nearest")
    if kind != "nearest" or len(inputs) != 1:
        unsupported(attrs, f"UpSampling sample_type={kind!r} with {len(inputs)} input(s)", "use nearest, one input")
    scale = attrs.int("scale", 1)
    out = inputs[0]
    for axis in (2, 3):  # nearest with an integer scale repeats each pixel
        out = R.repeat(out, scale, axis=axis)
    return out


def _fully_connected(bb, inputs, attrs):
    x = inputs[0]
    shape = shape_of(x)
    if attrs.bool("flatten", True):
        x = R.reshape(x, (shape[0], int(np.prod(shape[1:]))))
    out = R.matmul(x, R.permute_dims(inputs[1]))
    if not attrs.bool("no_bias", False):
        out = R.add(out, inputs[2])
    return out


def _flatten(bb, inputs, attrs):
    shape = shape_of(inputs[0])
    return R.reshape(inputs[0], (shape[0], int(np.prod(shape[1:], dtype=np.int64))))


def _softmax_family(fn):
    def convert(bb, inputs, attrs):
        x = inputs[0]
        temperature = attrs.float("temperature")
        if temperature not in (None, 1.0):
            x = R.divide(x, scalar_like(temperature, x))
        if len(inputs) > 1 or attrs.bool("use_length", False):
            unsupported(attrs, "softmax with use_length")
        return fn(x, axis=attrs.int("axis", -1))

    return convert


def _dropout(bb, inputs, attrs):
    # Dropout is the identity at inference time, whatever its mode says.
    return inputs[0]


NN_CONVERTERS = {
    "Convolution": _conv,
    "Deconvolution": _deconv,
    "_contrib_ModulatedDeformableConvolution": _deformable_conv,
    "BatchNorm": _batch_norm,
    # At inference SyncBatchNorm is BatchNorm: the statistics are only synchronised in training.
    "_contrib_SyncBatchNorm": _batch_norm,
    "L2Normalization": _l2_normalization,
    "Activation": _activation,
    "LeakyReLU": _leaky_relu,
    "Pooling": _pooling,
    "_contrib_AdaptiveAvgPooling2D": _adaptive_avg_pool,
    "_contrib_BilinearResize2D": _bilinear_resize,
    "UpSampling": _upsampling,
    "FullyConnected": _fully_connected,
    "Flatten": _flatten,
    "flatten": _flatten,
    "softmax": _softmax_family(R.nn.softmax),
    "log_softmax": _softmax_family(R.nn.log_softmax),
    "Dropout": _dropout,
}
