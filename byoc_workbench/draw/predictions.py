"""A zoo model's outputs on its picture, as its task reads them.

- detection: boxes, class names and scores (:mod:`.detections`, under a score slider);
- segmentation: a class-coloured mask over the picture, with a legend of the classes it covers;
- pose: the keypoints and the limbs between them;
- classification: the top-5 classes beside the picture.

The ``*_rows`` functions are the pure twins: plain data, tested without a figure.
:func:`prediction_png` draws any :class:`~byoc_workbench.models.meaning.Prediction`;
with ``mark`` (e.g. "untrained weights") written across the picture and in the title.
"""

from __future__ import annotations

import io

import matplotlib
import matplotlib.patches as patches
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from byoc_workbench.draw import detections
from byoc_workbench.models.meaning import KEYPOINTS, LIMBS

# Classes cycle through 20 distinct colours (matplotlib's tab20), by class id.
_PALETTE = "tab20"


def class_color(class_id: int) -> tuple[float, float, float]:
    """The RGB colour (floats in [0, 1]) a class is drawn in, stable across pictures."""
    return tuple(matplotlib.colormaps[_PALETTE](int(class_id) % 20)[:3])


def mask_rows(mask, class_names=(), top: int = 8) -> list:
    """``[(class id, name, share of the pixels), ...]``, the largest first (the legend's rows)."""
    classes, counts = np.unique(np.asarray(mask), return_counts=True)
    order = np.argsort(-counts, kind="stable")[:top]
    names = [class_names[c] if 0 <= c < len(class_names) else f"class {c}" for c in classes[order]]
    return [(int(classes[i]), n, float(counts[i]) / counts.sum()) for i, n in zip(order, names)]


def keypoint_rows(prediction, min_confidence: float = 0.0) -> list:
    """``[(name, x, y, confidence), ...]`` of the keypoints at least ``min_confidence``."""
    points = np.asarray(prediction["keypoints"])[0]
    confidence = np.asarray(prediction["confidence"])[0, :, 0]
    return [
        (KEYPOINTS[k] if k < len(KEYPOINTS) else f"keypoint {k}", float(x), float(y), float(c))
        for k, ((x, y), c) in enumerate(zip(points, confidence))
        if c >= min_confidence
    ]


def class_rows(prediction, class_names=()) -> list:
    """``[(name, probability), ...]``: the top-5 classes, best first."""
    ids = np.asarray(prediction["top5"])[0]
    probabilities = np.asarray(prediction["top5_probabilities"])[0]
    return [
        (class_names[c] if 0 <= c < len(class_names) else f"class {c}", float(p)) for c, p in zip(ids, probabilities)
    ]


def _mask(ax, picture, prediction, class_names, alpha: float = 0.55) -> str:
    mask = np.asarray(prediction["mask"])[0]
    colors = np.array([class_color(c) for c in range(int(mask.max()) + 1)])
    ax.imshow(picture)
    ax.imshow(colors[mask], alpha=alpha, extent=(0, picture.shape[1], picture.shape[0], 0))
    rows = mask_rows(mask, class_names)
    handles = [patches.Patch(color=class_color(c), label=f"{n} {s:.0%}") for c, n, s in rows]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return f"{len(np.unique(mask))} classes in the mask"


def _pose(ax, picture, prediction, class_names, min_confidence: float = 0.0) -> str:
    ax.imshow(picture)
    points = np.asarray(prediction["keypoints"])[0]
    confidence = np.asarray(prediction["confidence"])[0, :, 0]
    shown = confidence >= min_confidence
    for a, b in LIMBS:
        if a < len(points) and b < len(points) and shown[a] and shown[b]:
            ax.plot(*zip(points[a], points[b]), color=class_color(a), linewidth=2.5)
    ax.scatter(points[shown, 0], points[shown, 1], s=22, c="white", edgecolors="black", zorder=3)
    return f"{int(shown.sum())} of {len(points)} keypoints"


def _classes(ax, picture, prediction, class_names) -> str:
    ax.imshow(picture)
    rows = class_rows(prediction, class_names)
    text = "\n".join(f"{p:6.1%}  {n}" for n, p in rows)
    ax.text(1.02, 1.0, text, transform=ax.transAxes, va="top", ha="left", fontsize=9, family="monospace")
    return f"top 5: {rows[0][0]} {rows[0][1]:.0%}" if rows else "no classes"


_DRAW = {"segmentation": _mask, "pose": _pose, "classification": _classes}


def watermark(ax, mark: str) -> None:
    """``mark`` in capitals across the picture, so that no copy of it loses the warning."""
    if mark:
        ax.text(
            0.5,
            0.5,
            mark.upper(),
            transform=ax.transAxes,
            **detections.MARK_STYLE,
        )


def draw_prediction(picture, prediction, class_names=None, mark: str = "", title: str = "", ax=None, thresh=0.5):
    """Draw ``prediction`` on ``picture`` (RGB, the model's input size) as its task reads it.

    ``class_names`` defaults to the prediction's own; ``thresh`` is the detections'
    score threshold (see :func:`.detections.draw_detections`).
    """
    names = prediction.class_names if class_names is None else class_names
    if prediction.task == "detection":
        return detections.draw_detections(
            picture,
            prediction["ids"],
            prediction["scores"],
            prediction["boxes"],
            names,
            thresh,
            mark=mark,
            title=title,
            ax=ax,
        )
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 7 * picture.shape[0] / picture.shape[1]))
    what = _DRAW[prediction.task](ax, picture, prediction, names)
    ax.axis("off")
    ax.set_title(f"{title}\n{what}" if title else what, fontsize=10)
    watermark(ax, mark)
    return ax


def prediction_png(picture, prediction, class_names=None, mark: str = "", title: str = "", thresh=0.5, dpi=100):
    """:func:`draw_prediction` as PNG bytes, on a figure of its own (nothing shown, no pyplot state)."""
    # The longer side of the picture 6 inches (a tall pose crop must fit a laptop's screen), and
    # room on the right for the legend or the classes.
    height, width = picture.shape[:2]
    scale = 6.0 / max(height, width)
    extra = 0.0 if prediction.task == "detection" else 3.5
    fig = Figure(figsize=(width * scale + extra, height * scale))
    draw_prediction(picture, prediction, class_names, mark, title, ax=fig.subplots(), thresh=thresh)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight", dpi=dpi)
    return buf.getvalue()
