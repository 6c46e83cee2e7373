"""The detections under a score-threshold slider; its pure twin is :func:`..draw.detections.at_threshold`."""

from __future__ import annotations

import ipywidgets as widgets

from byoc_workbench.draw.detections import at_threshold, detections_png, table_html


def detections_slider(picture, detections, class_names=(), thresh: float = 0.5, **drawing):
    """A slider over the score threshold above the picture with its boxes, class names and scores.

    ``detections`` is ``(ids, scores, boxes)`` or a dict with those keys (a
    VM's outputs, :class:`~byoc_workbench.models.meaning.Prediction`). ``drawing``
    takes ``top``, ``mark`` and ``title`` as :func:`..draw.detections.draw_detections`
    does; ``mark`` (e.g. "untrained weights") is written across the picture and in the caption.
    """
    top, mark = drawing.get("top", 20), drawing.get("mark", "")
    if isinstance(detections, dict):
        detections = (detections["ids"], detections["scores"], detections["boxes"])
    ids, scores, boxes = detections
    slider = widgets.FloatSlider(
        value=thresh,
        min=0.0,
        max=1.0,
        step=0.01,
        description="score ≥",
        continuous_update=False,
        readout_format=".2f",
        layout=widgets.Layout(width="420px"),
    )
    caption = widgets.Label()
    # An Image widget takes the PNG directly: no Output widget, whose capture of the inline
    # backend stalled a kernel for 40 s (stream flushes timing out) under nbclient.
    picture_widget = widgets.Image(format="png", layout=widgets.Layout(max_width="640px"))
    table = widgets.HTML(layout=widgets.Layout(max_height="520px", overflow="auto", margin="0 0 0 12px"))
    table.add_class("byoc-detections-table")

    def show(change=None):
        t = slider.value
        view = at_threshold(ids, scores, boxes, class_names, t, top, mark)
        caption.value = view.caption
        picture_widget.value = detections_png(picture, ids, scores, boxes, class_names, t, **drawing)
        table.value = table_html(view.shown)

    slider.observe(show, names="value")
    show()
    # The table beside the picture holds every box shown, by the rank drawn on it, labelled or not.
    body = widgets.HBox([picture_widget, table], layout=widgets.Layout(align_items="flex-start"))
    return widgets.VBox([slider, caption, body])
