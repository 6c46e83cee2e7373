"""Whether two runs of a model gave the same outputs: the same objects, mask, keypoints or classes.

Detections are matched as a set, not by position: with near-equal scores
(untrained weights give many) NMS may emit tied detections in another order when
two builds round floats differently, e.g. TVM alone against an offloaded build.
Likewise a mask pixel, a keypoint or a top-5 class may differ only where two
scores are closer than float32 noise.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from byoc_workbench.core.errors import WorkbenchError


def _rows(detections) -> tuple:
    """``(ids, scores, boxes)`` of the first image, as 2-d arrays, from a Detections dict or a sequence."""
    if isinstance(detections, dict):
        detections = (detections["ids"], detections["scores"], detections["boxes"])
    ids, scores, boxes = (np.asarray(a)[0] for a in detections)
    return ids.reshape(len(ids), -1)[:, 0], scores.reshape(len(scores), -1)[:, 0], boxes.reshape(len(boxes), -1)


def unmatched(ref, got, score_tol: float = 1e-4, box_tol: float = 0.05, box_rtol: float = 0.0) -> list:
    """Rows of ``ref`` with no equal row in ``got``: same class id, score within
    ``score_tol``, every box coordinate within ``box_tol`` pixels plus ``box_rtol``
    of its size. Each row of ``got`` matches at most one row of ``ref``."""
    ids, scores, boxes = _rows(ref)
    ids2, scores2, boxes2 = _rows(got)
    free = np.ones(len(ids2), dtype=bool)
    missing = []
    for i in range(len(ids)):
        ok = free & (ids2 == ids[i]) & (np.abs(scores2 - scores[i]) <= score_tol)
        ok &= (np.abs(boxes2 - boxes[i]) <= box_tol + box_rtol * np.abs(boxes[i])).all(axis=1)
        hits = np.flatnonzero(ok)
        if len(hits):
            free[hits[0]] = False
        else:
            missing.append(i)
    return missing


def same_detections(ref, got, score_tol: float = 1e-4, box_tol: float = 0.05) -> bool:
    """Both runs hold the same detections (see :func:`unmatched`), in any order."""
    return len(_rows(ref)[0]) == len(_rows(got)[0]) and not unmatched(ref, got, score_tol, box_tol)


# The project's float32 tolerance against MXNet, and between builds (see the README).
RTOL, ATOL, BOX_ATOL = 1e-3, 1e-4, 0.05


def _close(name: str, ref, got, rtol: float, atol: float) -> list:
    ref, got = np.asarray(ref, dtype=np.float64), np.asarray(got, dtype=np.float64)
    if ref.shape != got.shape:
        return [f"{name}: shape {got.shape}, expected {ref.shape}"]
    # Summation order changes a float32 result in proportion to the tensor's scale, not to each
    # element's: a logit near zero after a 2048-channel conv is as noisy as a large one.
    bad = np.abs(got - ref) > atol + rtol * (np.abs(ref) + np.abs(ref).max(initial=0.0))
    if bad.any():
        worst = float(np.abs(got - ref).max())
        return [f"{name}: {int(bad.sum())} of {bad.size} values differ (largest by {worst:.3g})"]
    return []


def _ties_only(name: str, scores, picked_ref, picked_got, tol: float) -> list:
    """Where two picks along the last axis of ``scores`` differ (argmaxes, top-5), ``ref``'s
    scores at both must be within ``tol``: the two builds only broke a tie differently."""
    scores = np.asarray(scores, dtype=np.float64)
    picked_ref, picked_got = np.asarray(picked_ref), np.asarray(picked_got)
    differ = picked_ref != picked_got
    at_ref = np.take_along_axis(scores, picked_ref, -1)
    at_got = np.take_along_axis(scores, picked_got, -1)
    real = differ & (np.abs(at_ref - at_got) > tol)
    return [f"{name}: {int(real.sum())} of {differ.size} differ beyond a tie"] if real.any() else []


def differences(ref: dict, got: dict, rtol: float = RTOL, atol: float = ATOL, box_atol: float = BOX_ATOL) -> list:
    """What differs between two :class:`~byoc_workbench.models.meaning.Prediction` of one task, one
    line each; ``[]`` when they agree to the tolerances.

    Detections: as a set (:func:`unmatched`), scores within ``atol``, boxes within
    ``box_atol`` pixels plus ``rtol``. Masks, keypoints and top-5 classes: equal except
    where ``ref``'s two candidates score within float32 noise of each other; the scores and
    heatmaps themselves to ``rtol``/``atol``.
    """
    task = getattr(ref, "task", "") or "detection"
    if task == "detection":
        rows = len(_rows(ref)[0])
        missing = unmatched(ref, got, atol, box_atol, rtol)
        if len(_rows(got)[0]) != rows or missing:
            return [f"detections: {rows - len(missing)} of {rows} found"]
        return []
    key = "heatmaps" if task == "pose" else "scores"
    scores = np.asarray(ref[key])
    found = _close(key, scores, got[key], rtol, atol)
    tol = 2 * (atol + rtol * float(np.abs(scores).max()))
    if task == "segmentation":  # each pixel's class: argmax over the class axis
        by_pixel = np.moveaxis(scores, 1, -1)
        return found + _ties_only("mask pixels", by_pixel, ref["mask"][..., None], got["mask"][..., None], tol)
    if task == "pose":  # each keypoint's heatmap peak
        flat = scores.reshape(*scores.shape[:2], -1)
        peaks = [np.asarray(p["heatmaps"]).reshape(flat.shape).argmax(-1)[..., None] for p in (ref, got)]
        return found + _ties_only("keypoints", flat, *peaks, tol)
    return found + _ties_only("top-5 classes", scores, ref["top5"], got["top5"], tol)


class MaxError(NamedTuple):
    """The largest error of an output against its reference: absolute, and relative to ``max |ref|``."""

    max_abs: float
    max_rel: float


def output_error(got: np.ndarray, ref: np.ndarray) -> MaxError:
    """:class:`MaxError` (``max_abs``, ``max_rel``) of ``got`` against ``ref``; ``max_rel`` divides by ``max |ref|``,
    so values near zero do not blow it up. A NaN where the other has none is an infinite error."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape:
        return MaxError(float("inf"), float("inf"))
    if got.size == 0:
        return MaxError(0.0, 0.0)
    nan = np.isnan(got) != np.isnan(ref)
    if nan.any():
        return MaxError(float("inf"), float("inf"))
    diff = np.abs(np.nan_to_num(got - ref, nan=0.0))
    max_abs = float(diff.max())
    scale = float(np.abs(np.nan_to_num(ref, nan=0.0)).max())
    return MaxError(max_abs, (max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else float("inf"))))


#: Equal to the reference: the largest error at most this fraction of the output's largest magnitude
#: (:func:`byoc_workbench.measure.check.compare.output_error`), as ``compare`` checks each subgraph.
TOLERANCE = 1e-3


def as_list(outputs) -> list:
    """A run's outputs as a flat list of numpy arrays."""
    if isinstance(outputs, (list, tuple)):
        return [a for o in outputs for a in as_list(o)]
    return [np.asarray(outputs)]


def found(rows: int, missed: int) -> dict[str, int]:
    """How many of the reference's ``rows`` detections a run holds, as JSON: ``{"found": k, "of": rows}``."""
    return {"found": rows - missed, "of": rows}


def found_text(detections: dict) -> str:
    """A :func:`found` record in words: ``"98 of 100"``."""
    return f"{detections['found']} of {detections['of']}"


def check_outputs(ref, got, tolerance: float = TOLERANCE, detection: bool = False) -> dict[str, Any]:
    """Each output of ``got`` against ``ref`` (see :data:`TOLERANCE`); detections are matched as sets.

    Plain JSON (a search's measurements keep it on disk): ``outputs`` (one row each), ``max_abs``,
    ``max_rel``, ``tolerance``, ``equal``, and for a detector ``detections`` (:func:`found`)."""
    ref, got = as_list(ref), as_list(got)
    if len(ref) != len(got):
        raise WorkbenchError(
            f"The build returned {len(got)} outputs, the reference {len(ref)}",
            "report it: the import changed the model's outputs",
        )
    rows = []
    for k, (a, b) in enumerate(zip(ref, got)):
        max_abs, max_rel = output_error(b, a)
        rows.append({"output": k, "shape": list(a.shape), "max_abs": max_abs, "max_rel": max_rel})
    out = {
        "outputs": rows,
        "max_abs": max((r["max_abs"] for r in rows), default=0.0),
        "max_rel": max((r["max_rel"] for r in rows), default=0.0),
        "tolerance": tolerance,
    }
    if detection:
        out["equal"] = bool(same_detections(ref[:3], got[:3]))
        out["detections"] = found(len(ref[0][0]), len(unmatched(ref[:3], got[:3])))
    else:
        out["equal"] = out["max_rel"] <= tolerance
    return out
