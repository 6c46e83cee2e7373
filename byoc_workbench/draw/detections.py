"""Bounding boxes on a picture, saying so when the weights are untrained."""

from __future__ import annotations

import colorsys
import html
import io
from typing import NamedTuple

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from byoc_workbench.draw.render import target_color

#: The weights' mark ("untrained weights") across a picture: large, red, diagonal, half seen through.
MARK_STYLE = {
    "ha": "center",
    "va": "center",
    "rotation": 30,
    "fontsize": 22,
    "color": "#c92a2a",
    "alpha": 0.55,
    "fontweight": "bold",
}


def detections_above(ids, scores, boxes, thresh: float = 0.5) -> list:
    """``[(class_id, score, (x0, y0, x1, y1)), ...]`` with score >= ``thresh``, best first."""
    ids, scores, boxes = (np.asarray(a).reshape(-1, n) for a, n in ((ids, 1), (scores, 1), (boxes, 4)))
    rows = [
        (int(i[0]), float(s[0]), tuple(float(v) for v in b))
        for i, s, b in zip(ids, scores, boxes)
        if i[0] >= 0 and s[0] >= thresh
    ]
    return sorted(rows, key=lambda r: -r[1])


def with_class_names(rows, class_names=()) -> list:
    """``detections_above`` rows with their class names: ``[(name, score, box), ...]``."""
    return [(class_names[c] if 0 <= c < len(class_names) else f"class {c}", s, b) for c, s, b in rows]


def caption(shown: int, found: int, thresh: float) -> str:
    """``showing 20 of 100 detections with score ≥ 0.50``, or ``showing all 15 …`` when every one is shown."""
    if shown == found:
        many = f"all {found} detections" if found > 1 else f"{found} detection{'s' if found != 1 else ''}"
        return f"showing {many} with score ≥ {thresh:.2f}"
    return f"showing {shown} of {found} detections with score ≥ {thresh:.2f}"


class ThresholdView(NamedTuple):
    """What the score slider shows: ``shown`` rows ``(name, score, box)``, how many were ``found``, the caption."""

    shown: list
    found: int
    caption: str
    mark: str


def at_threshold(
    ids, scores, boxes, class_names=(), thresh: float = 0.5, top: int = 20, mark: str = ""
) -> ThresholdView:
    """What the score slider shows at ``thresh`` (the pure twin of the notebook's slider).

    Returns ``shown``: ``[(name, score, box)]`` (the ``top`` best), ``found``: how
    many score at least ``thresh``, ``caption``: one line, and ``mark``; the caption
    ends with ``mark`` (e.g. "untrained weights") when there is one.
    """
    found = detections_above(ids, scores, boxes, thresh)
    shown = with_class_names(found[:top], class_names)
    text = caption(len(shown), len(found), thresh)
    return ThresholdView(shown, len(found), text + (f" — {mark}" if mark else ""), mark)


# Label size in points (the picture is drawn FIGURE_IN inches wide, so a point is width / (72 * FIGURE_IN) pixels).
FIGURE_IN = 7.0
FONT_PT = 8.0
CHAR_PT = 0.62 * FONT_PT  # a DejaVu Sans character, on average
LINE_PT = 1.45 * FONT_PT  # the text and its box's padding


def label_text(rank: int, name: str, score: float) -> str:
    return f"{rank} {name} {score:.2f}"


def _overlaps(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


LABELS_MAX = 8  # labels on the picture at most; the table beside it lists every box


def place_labels(boxes, texts, width: int, height: int, most: int = LABELS_MAX) -> list:
    """Where each box's label goes, in picture pixels: ``(x, y)`` of its top-left corner, or None where
    every spot near the box is taken by a label placed before it (best score first), or ``most``
    labels are placed already.

    The spots tried: above the box's top-left corner, inside it, below it, and the same on the right.
    """
    unit = width / (72 * FIGURE_IN)  # picture pixels per point
    placed, spots = [], []
    for (x0, y0, x1, y1), text in zip(boxes, texts):
        w, h = len(text) * CHAR_PT * unit, LINE_PT * unit
        found = None
        if len(placed) >= most:
            spots.append(None)
            continue
        for x, y in ((x0, y0 - h), (x0, y0), (x0, y1), (x1 - w, y0 - h), (x1 - w, y0), (x1 - w, y1 - h)):
            x, y = min(max(x, 0.0), max(width - w, 0.0)), min(max(y, 0.0), max(height - h, 0.0))
            rect = (x, y, x + w, y + h)
            gap = (x - 2 * unit, y - 2 * unit, x + w + 2 * unit, y + h + 2 * unit)  # a little air between labels
            if not any(_overlaps(gap, r) for r in placed):
                found = (x, y)
                placed.append(rect)
                break
        spots.append(found)
    return spots


def marks_box(boxes, width: int, height: int) -> tuple[float, float]:
    """The centre ``(x, y)`` of the boxes' area, clipped to the picture, where a watermark goes."""
    if not boxes:
        return width / 2, height / 2
    x0 = max(0.0, min(b[0] for b in boxes))
    y0 = max(0.0, min(b[1] for b in boxes))
    x1 = min(float(width), max(b[2] for b in boxes))
    y1 = min(float(height), max(b[3] for b in boxes))
    return (x0 + x1) / 2, (y0 + y1) / 2


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
    """Draw the ``top`` best detections scoring at least ``thresh``, each box with its rank; a label
    ("3 person 0.61") where it fits without covering another one (the rest are listed by
    :func:`table_html`). ``mark`` (e.g. "untrained weights") is written across the boxes' area."""
    if ax is None:
        _, ax = plt.subplots(figsize=(FIGURE_IN, FIGURE_IN * image.shape[0] / image.shape[1]))
    height, width = image.shape[:2]
    ax.imshow(image)
    ax.axis("off")
    found = detections_above(ids, scores, boxes, thresh)
    rows = with_class_names(found[:top], class_names)
    texts = [label_text(k + 1, name, score) for k, (name, score, _) in enumerate(rows)]
    spots = place_labels([b for _, _, b in rows], texts, width, height)
    for (name, _score, (x0, y0, x1, y1)), text, spot in zip(rows, texts, spots):
        color = _rgb(target_color(name))
        ax.add_patch(plt.Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, edgecolor=color, linewidth=2))
        if spot is not None:
            ax.text(
                spot[0],
                spot[1],
                text,
                fontsize=FONT_PT,
                color="white",
                va="top",
                bbox=dict(facecolor=color, alpha=0.85, pad=1, edgecolor="none"),
            )
    labelled = sum(s is not None for s in spots)
    shown = caption(len(rows), len(found), thresh)
    if labelled < len(rows):
        shown += f"; {labelled} labelled here, all {len(rows)} in the table"
    ax.set_title(f"{title}\n{shown}" if title else shown, fontsize=10)
    if mark:
        cx, cy = marks_box([b for _, _, b in rows], width, height)
        ax.text(
            cx,
            cy,
            mark.upper(),
            **MARK_STYLE,
            clip_on=True,
        )
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)
    return ax


def table_html(rows) -> str:
    """The detections shown (``at_threshold(...).shown``) as a table: rank (as on the picture), class,
    score and box."""
    body = "".join(
        f"<tr><td>{k}</td><td>{html.escape(name)}</td><td>{score:.2f}</td>"
        f"<td style='white-space:nowrap'>{', '.join(f'{v:.0f}' for v in box)}</td></tr>"
        for k, (name, score, box) in enumerate(rows, 1)
    )
    return (
        '<table class="byoc-detections" style="font-size:12px"><tr><th>#</th><th>class</th><th>score</th>'
        f"<th>box (x0, y0, x1, y1 px)</th></tr>{body}</table>"
    )


def detections_png(image, ids, scores, boxes, class_names=(), thresh=0.5, top=20, mark="", title="", dpi=100) -> bytes:
    """:func:`draw_detections` as PNG bytes, on a figure of its own (nothing shown, no pyplot state)."""
    fig = Figure(figsize=(FIGURE_IN, FIGURE_IN * image.shape[0] / image.shape[1]))
    draw_detections(image, ids, scores, boxes, class_names, thresh, top, mark, title, ax=fig.subplots())
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight", dpi=dpi)
    return buf.getvalue()


def _rgb(color: str):
    if color.startswith("#"):
        return color
    h, s, v = (float(x) for x in color.split())
    return colorsys.hsv_to_rgb(h, min(1.0, s * 2.2), v * 0.8)
