"""The detections under a score-threshold slider; its pure twin is :func:`..draw.detections.at_threshold`."""

from __future__ import annotations

from ..draw import detections as viz


def detections_slider(
    picture,
    detections,
    class_names=(),
    thresh: float = 0.5,
    top: int = 20,
    mark: str = "",
    title: str = "",
):
    """A slider over the score threshold above the picture with its boxes, class names and scores.

    ``detections`` is ``(ids, scores, boxes)`` or a dict with those keys (a
    VM's outputs, :class:`~byoc_workbench.models.ssd.Detections`). ``mark``
    (e.g. "untrained weights") is written across the picture and in the caption.
    """
    import ipywidgets as widgets
    import matplotlib.pyplot as plt

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

    def show(thresh):
        view = viz.at_threshold(ids, scores, boxes, class_names, thresh, top, mark)
        caption.value = view["caption"]
        viz.draw_detections(picture, ids, scores, boxes, class_names, thresh, top, mark, title)
        plt.show()

    out = widgets.interactive_output(show, {"thresh": slider})
    return widgets.VBox([slider, caption, out])
