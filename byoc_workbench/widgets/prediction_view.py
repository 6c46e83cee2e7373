"""A zoo model's outputs on its picture, whatever its task; the pure twins are in :mod:`..draw.predictions`."""

from __future__ import annotations

import ipywidgets as widgets

from byoc_workbench.draw.predictions import prediction_png
from byoc_workbench.widgets.detection_view import detections_slider
from byoc_workbench.widgets.html import esc


def prediction_view(picture, prediction, mark: str = "", title: str = "", thresh: float = 0.5):
    """Detections under the score slider (:func:`.detection_view.detections_slider`); a mask, keypoints
    or top-5 classes as a picture with a one-line caption. ``mark`` (e.g. "untrained weights") is
    written across the picture and in the caption."""
    if prediction.task == "detection":
        return detections_slider(picture, prediction, prediction.class_names, thresh, mark=mark, title=title)
    caption = prediction.summary() + (f" — {mark}" if mark else "")
    image = widgets.Image(
        value=prediction_png(picture, prediction, mark=mark, title=title),
        format="png",
        layout=widgets.Layout(max_width="860px", max_height="600px", object_fit="contain"),
    )
    # A Label never wraps (a long caption is cut mid-word); HTML wraps at the picture's width.
    words = widgets.HTML(f"<div style='max-width:860px; white-space:normal'>{esc(caption)}</div>")
    return widgets.VBox([words, image])
