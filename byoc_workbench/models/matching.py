"""Whether two runs of a detector found the same objects.

Rows are matched as a set, not by position: with near-equal scores (untrained
weights give many) NMS may emit tied detections in another order when two
builds round floats differently, e.g. TVM alone against an offloaded build.
"""

from __future__ import annotations

import numpy as np


def _rows(detections) -> tuple:
    """``(ids, scores, boxes)`` of the first image, as 2-d arrays, from a Detections dict or a sequence."""
    if isinstance(detections, dict):
        detections = (detections["ids"], detections["scores"], detections["boxes"])
    ids, scores, boxes = (np.asarray(a)[0] for a in detections)
    return ids.reshape(len(ids), -1)[:, 0], scores.reshape(len(scores), -1)[:, 0], boxes.reshape(len(boxes), -1)


def unmatched(ref, got, score_tol: float = 1e-4, box_tol: float = 0.05) -> list:
    """Rows of ``ref`` with no equal row in ``got``: same class id, score within
    ``score_tol``, every box coordinate within ``box_tol`` pixels. Each row of
    ``got`` matches at most one row of ``ref``."""
    ids, scores, boxes = _rows(ref)
    ids2, scores2, boxes2 = _rows(got)
    free = np.ones(len(ids2), dtype=bool)
    missing = []
    for i in range(len(ids)):
        ok = free & (ids2 == ids[i]) & (np.abs(scores2 - scores[i]) <= score_tol)
        ok &= np.abs(boxes2 - boxes[i]).max(axis=1) <= box_tol
        hits = np.flatnonzero(ok)
        if len(hits):
            free[hits[0]] = False
        else:
            missing.append(i)
    return missing


def same_detections(ref, got, score_tol: float = 1e-4, box_tol: float = 0.05) -> bool:
    """Both runs hold the same detections (see :func:`unmatched`), in any order."""
    return len(_rows(ref)[0]) == len(_rows(got)[0]) and not unmatched(ref, got, score_tol, box_tol)
