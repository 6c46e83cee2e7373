"""Converters for MXNet's indexing and sorting ops: split, gather, top-k, argsort, shape.

GluonCV's detectors decode their outputs with these (CenterNet's top-k peaks and
``gather_nd``, Mask R-CNN's argsort). MXNet gives indices as floats unless told
otherwise, Relax as ints: each converter casts to the dtype MXNet would return.
"""

from __future__ import annotations

import numpy as np
from tvm import relax
from tvm.relax import op as R

from byoc_workbench.frontends.mxnet_attrs import REQUIRED
from byoc_workbench.frontends.mxnet_common import dtype_of, norm_axis, shape_of, unsupported


def _split(bb, inputs, attrs):
    x = inputs[0]
    ndim = len(shape_of(x))
    axis = norm_axis(attrs.int("axis", 1), ndim)
    count = attrs.int("num_outputs", REQUIRED)
    if count == 1:  # Relax's split into one part is the tensor itself, not a tuple
        outs = [x]
    else:
        parts = bb.emit(R.split(x, count, axis))
        outs = [bb.emit(relax.TupleGetItem(parts, i)) for i in range(count)]
    return [R.squeeze(o, [axis]) for o in outs] if attrs.bool("squeeze_axis", False) else outs


def _shape_array(bb, inputs, attrs):
    # Every shape is static here, so the shape is a constant.
    return relax.const(np.array(shape_of(inputs[0]), dtype="int64"), "int64")


def _gather_nd(bb, inputs, attrs):
    # MXNet's indices are (M, ...): row m indexes axis m. Relax's are (..., M).
    data, indices = inputs
    ndim = len(shape_of(indices))
    indices = R.astype(indices, "int64") if dtype_of(indices) != "int64" else indices
    return R.gather_nd(data, R.permute_dims(indices, [*range(1, ndim), 0]))


def _topk(bb, inputs, attrs):
    x = inputs[0]
    axis = norm_axis(attrs.int("axis", -1), len(shape_of(x)))
    ret = attrs.str("ret_typ", "indices")
    index_dtype = attrs.str("dtype", "float32")
    if ret not in ("value", "indices", "both"):
        unsupported(attrs, f"topk ret_typ={ret!r}")
    both = bb.emit(R.topk(x, attrs.int("k", 1), axis, "both", not attrs.bool("is_ascend", False), "int64"))
    values, indices = (bb.emit(relax.TupleGetItem(both, i)) for i in range(2))
    indices = R.astype(indices, index_dtype)
    return {"value": values, "indices": indices, "both": [values, indices]}[ret]


def _argsort(bb, inputs, attrs):
    x = inputs[0]
    axis = attrs.int("axis", -1)
    if axis is None:
        x, axis = R.reshape(x, (-1,)), 0
    out = R.argsort(x, axis, not attrs.bool("is_ascend", True), "int64")
    return R.astype(out, attrs.str("dtype", "float32"))


INDEX_CONVERTERS = {
    "SliceChannel": _split,
    "split": _split,
    "shape_array": _shape_array,
    "gather_nd": _gather_nd,
    "topk": _topk,
    "argsort": _argsort,
}
