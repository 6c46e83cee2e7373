"""Bounding boxes on a picture, saying so when the weights are untrained."""

from __future__ import annotations

import numpy as np

from .render import target_color


def detections_above(ids, scores, boxes, thresh: float = 0.5) -> list:
    """``[(class_id, score, (x0, y0, x1, y1)), ...]`` with score >= ``thresh``, best first."""
    ids, scores, boxes = (np.asarray(a).reshape(-1, n) for a, n in ((ids, 1), (scores, 1), (boxes, 4)))
    rows = [
        (int(i[0]), float(s[0]), tuple(float(v) for v in b))
        for i, s, b in zip(ids, scores, boxes)
        if i[0] >= 0 and s[0] >= thresh
    ]
    return sorted(rows, key=lambda r: -r[1])


def named(rows, class_names=()) -> list:
    """``detections_above`` rows with their class names: ``[(name, score, box), ...]``."""
    return [(class_names[c] if 0 <= c < len(class_names) else f"class {c}", s, b) for c, s, b in rows]


def at_threshold(ids, scores, boxes, class_names=(), thresh: float = 0.5, top: int = 20, mark: str = "") -> dict:
    """What the score slider shows at ``thresh`` (the pure twin of the notebook's slider).

    Returns ``{"shown": [(name, score, box)] (the ``top`` best), "found": how
    many score at least ``thresh``, "caption": one line, "mark"}``; the caption
    ends with ``mark`` (e.g. "untrained weights") when there is one.
    """
    found = detections_above(ids, scores, boxes, thresh)
    shown = named(found[:top], class_names)
    caption = f"{len(shown)} of {len(found)} detections with score >= {thresh:.2f}"
    if shown:
        caption += ": " + ", ".join(f"{n} {s:.2f}" for n, s, _ in shown[:5]) + (" …" if len(shown) > 5 else "")
    return {"shown": shown, "found": len(found), "caption": caption + (f" — {mark}" if mark else ""), "mark": mark}


def draw_detections(
    image,
    ids,
    scores,
    boxes,
    class_names=(),
    thresh: float = 0.5,
    top: int = 20,
    mark: str = "",
    title: str = "",
    ax=None,
):
    """Draw the ``top`` best detections scoring at least ``thresh``; ``mark`` (e.g.
    "untrained weights") is written across the picture."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 7 * image.shape[0] / image.shape[1]))
    ax.imshow(image)
    ax.axis("off")
    found = detections_above(ids, scores, boxes, thresh)
    rows = found[:top]
    for name, score, (x0, y0, x1, y1) in named(rows, class_names):
        color = target_color(name) if not name.startswith("#") else name
        color = _rgb(color)
        ax.add_patch(plt.Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, edgecolor=color, linewidth=2))
        ax.text(
            x0,
            y0 - 2,
            f"{name} {score:.2f}",
            fontsize=8,
            color="white",
            bbox=dict(facecolor=color, alpha=0.8, pad=1, edgecolor="none"),
        )
    shown = f"{len(rows)} of {len(found)} detections with score >= {thresh}"
    ax.set_title(f"{title}\n{shown}" if title else shown, fontsize=10)
    if mark:
        ax.text(
            0.5,
            0.5,
            mark.upper(),
            transform=ax.transAxes,
            ha="center",
            va="center",
            rotation=30,
            fontsize=22,
            color="#c92a2a",
            alpha=0.55,
            fontweight="bold",
        )
    return ax


def detections_png(image, ids, scores, boxes, class_names=(), thresh=0.5, top=20, mark="", title="", dpi=100) -> bytes:
    """:func:`draw_detections` as PNG bytes, on a figure of its own (nothing shown, no pyplot state)."""
    import io

    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 7 * image.shape[0] / image.shape[1]))
    draw_detections(image, ids, scores, boxes, class_names, thresh, top, mark, title, ax=fig.subplots())
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight", dpi=dpi)
    return buf.getvalue()


def _rgb(color: str):
    if color.startswith("#"):
        return color
    import colorsys

    h, s, v = (float(x) for x in color.split())
    return colorsys.hsv_to_rgb(h, min(1.0, s * 2.2), v * 0.8)
