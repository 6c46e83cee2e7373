"""Converters for MXNet's detection ops: ``_contrib_box_decode``, ``_contrib_box_nms`` and ``ROIAlign``.

``box_nms`` is built from Relax's MXNet-style ``get_valid_counts`` and
``non_max_suppression``, which keep MXNet's output layout: kept boxes first,
sorted by score, every other row filled with -1.
"""

from __future__ import annotations

import numpy as np
from tvm import relax
from tvm.relax import op as R

from byoc_workbench.frontends.mxnet_attrs import REQUIRED
from byoc_workbench.frontends.mxnet_common import dtype_of, scalar_like, shape_of, unsupported


def _split4(x, start=0):
    # Four (…, 1) slices of the last axis, starting at ``start``.
    axis = len(shape_of(x)) - 1
    return [R.strided_slice(x, [axis], [start + i], [start + i + 1]) for i in range(4)]


def _corner_to_center(bb, coords):
    x0, y0, x1, y1 = coords
    w, h = bb.emit(R.subtract(x1, x0)), bb.emit(R.subtract(y1, y0))
    half = scalar_like(0.5, x0)
    return [R.add(x0, R.multiply(w, half)), R.add(y0, R.multiply(h, half)), w, h]


def _center_to_corner(bb, coords):
    x, y, w, h = coords
    half = scalar_like(0.5, x)
    hw, hh = bb.emit(R.multiply(w, half)), bb.emit(R.multiply(h, half))
    return [R.subtract(x, hw), R.subtract(y, hh), R.add(x, hw), R.add(y, hh)]


def _box_decode(bb, inputs, attrs):
    data, anchors = inputs
    fmt = attrs.str("format", "center")
    if fmt not in ("center", "corner"):
        unsupported(attrs, f"box_decode format={fmt!r}")
    stds = [attrs.float(f"std{i}", 1.0) for i in range(4)]
    clip = attrs.float("clip", -1.0)
    a = [bb.emit(c) for c in _split4(anchors)]
    ax, ay, aw, ah = [bb.emit(c) for c in (_corner_to_center(bb, a) if fmt == "corner" else a)]
    d = [bb.emit(c) for c in _split4(data)]
    ox = bb.emit(R.add(R.multiply(R.multiply(d[0], scalar_like(stds[0], data)), aw), ax))
    oy = bb.emit(R.add(R.multiply(R.multiply(d[1], scalar_like(stds[1], data)), ah), ay))
    dw = R.multiply(d[2], scalar_like(stds[2], data))
    dh = R.multiply(d[3], scalar_like(stds[3], data))
    if clip > 0:
        dw, dh = R.minimum(dw, scalar_like(clip, data)), R.minimum(dh, scalar_like(clip, data))
    half = scalar_like(0.5, data)
    hw = bb.emit(R.multiply(R.multiply(R.exp(dw), aw), half))
    hh = bb.emit(R.multiply(R.multiply(R.exp(dh), ah), half))
    parts = [R.subtract(ox, hw), R.subtract(oy, hh), R.add(ox, hw), R.add(oy, hh)]
    return R.concat([bb.emit(p) for p in parts], axis=-1)


def _replace_coords(bb, data, coord_start, coords):
    # Rebuild the rows with new coordinates in place of the old four columns.
    width = shape_of(data)[-1]
    axis = len(shape_of(data)) - 1
    parts = []
    if coord_start > 0:
        parts.append(R.strided_slice(data, [axis], [0], [coord_start]))
    parts.extend(coords)
    if coord_start + 4 < width:
        parts.append(R.strided_slice(data, [axis], [coord_start + 4], [width]))
    return R.concat([bb.emit(p) for p in parts], axis=-1)


def _convert_format(bb, data, coord_start, to_corner):
    coords = [bb.emit(c) for c in _split4(data, coord_start)]
    new = _center_to_corner(bb, coords) if to_corner else _corner_to_center(bb, coords)
    return bb.emit(_replace_coords(bb, data, coord_start, [bb.emit(c) for c in new]))


def _box_nms(bb, inputs, attrs):
    data = inputs[0]
    shape = shape_of(data)
    overlap = attrs.float("overlap_thresh", 0.5)
    valid_thresh = attrs.float("valid_thresh", 0.0)
    topk = attrs.int("topk", -1)
    coord_start = attrs.int("coord_start", 2)
    score_index = attrs.int("score_index", 1)
    id_index = attrs.int("id_index", -1)
    background_id = attrs.int("background_id", -1)
    force_suppress = attrs.bool("force_suppress", False)
    in_format, out_format = attrs.str("in_format", "corner"), attrs.str("out_format", "corner")
    if {in_format, out_format} - {"corner", "center"}:
        unsupported(attrs, f"box_nms in_format={in_format!r}/out_format={out_format!r}")

    # Relax's NMS wants (batch, boxes, width); MXNet allows any number of batch axes.
    x = data if len(shape) == 3 else bb.emit(R.reshape(data, (-1, shape[-2], shape[-1])))
    # MXNet drops the rows whose id equals background_id (default -1); Relax's
    # get_valid_counts drops the rows whose id is negative. They agree for the default.
    count_id_index = id_index
    if id_index >= 0 and background_id != -1:
        ids = bb.emit(R.strided_slice(x, [2], [id_index], [id_index + 1]))
        is_bg = R.equal(ids, scalar_like(background_id, x))
        # Fill background rows with -1 so their score fails valid_thresh; keep id -1 rows.
        x = bb.emit(R.where(is_bg, R.full_like(x, scalar_like(-1.0, x)), x))
        count_id_index = -1
    if in_format == "center":
        x = _convert_format(bb, x, coord_start, to_corner=True)

    dtype = dtype_of(x)
    if dtype != "float32":
        # TVM's NMS sort kernel only takes float32 (checked in 0.27).
        x = bb.emit(R.astype(x, "float32"))
    counts = bb.emit(R.vision.get_valid_counts(x, valid_thresh, count_id_index, score_index))
    valid_count = bb.emit(relax.TupleGetItem(counts, 0))
    moved = bb.emit(relax.TupleGetItem(counts, 1))
    indices = bb.emit(relax.TupleGetItem(counts, 2))
    out = bb.emit(
        R.vision.non_max_suppression(
            moved,
            valid_count,
            indices,
            max_output_size=-1,
            iou_threshold=overlap,
            force_suppress=force_suppress,
            top_k=topk,
            coord_start=coord_start,
            score_index=score_index,
            id_index=id_index,
            return_indices=False,
            invalid_to_bottom=True,
        )
    )
    if dtype != "float32":
        out = bb.emit(R.astype(out, dtype))
    if out_format == "center":
        converted = _convert_format(bb, out, coord_start, to_corner=False)
        # Rows of -1 are padding and stay -1 in either format.
        is_minus_one = R.astype(R.equal(out, scalar_like(-1.0, out)), dtype)
        is_pad = R.greater(R.min(is_minus_one, axis=-1, keepdims=True), scalar_like(0.5, out))
        out = bb.emit(R.where(is_pad, out, converted))
    return out if len(shape) == 3 else R.reshape(out, shape)


def _roi_align(bb, inputs, attrs):
    # rois are (n, 5) rows of (batch index, x0, y0, x1, y1), as Relax's roi_align takes them.
    if attrs.bool("position_sensitive", False):
        unsupported(attrs, "ROIAlign with position_sensitive=True")
    pooled = tuple(int(v) for v in attrs.tuple("pooled_size", REQUIRED))
    scale = attrs.float("spatial_scale", REQUIRED)
    data, rois = inputs
    aligned = attrs.bool("aligned", False)
    if aligned:
        # MXNet's aligned mode (Detectron2's) samples half a feature pixel earlier; Relax's
        # aligned only drops the 1-pixel minimum size. Shift the corners by half a pixel.
        shift = np.array([0.0] + [0.5 / scale] * 4, dtype=dtype_of(rois))
        rois = R.subtract(rois, relax.const(shift, dtype_of(rois)))
    pooled = pooled * 2 if len(pooled) == 1 else pooled
    # MXNet gives zeros for a row whose batch index is negative (FPN marks the ROIs of the other
    # pyramid levels so); Relax would read before the first picture. Point those rows at picture 0
    # and zero their output.
    index = bb.emit(R.strided_slice(rois, [1], [0], [1]))
    skipped = bb.emit(R.less(index, scalar_like(0.0, rois)))
    rois = R.concat([R.maximum(index, scalar_like(0.0, rois)), R.strided_slice(rois, [1], [1], [5])], axis=1)
    out = bb.emit(
        R.vision.roi_align(data, rois, pooled, scale, sample_ratio=attrs.int("sample_ratio", -1), aligned=aligned)
    )
    return R.where(R.reshape(skipped, (-1, 1, 1, 1)), R.zeros_like(out), out)


DETECTION_CONVERTERS = {
    "_contrib_ROIAlign": _roi_align,
    "_contrib_box_decode": _box_decode,
    "_contrib_box_nms": _box_nms,
    "_contrib_box_non_maximum_suppression": _box_nms,
    "box_nms": _box_nms,
}
