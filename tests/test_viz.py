import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402

from byoc_workbench.draw import detections as viz  # noqa: E402


def test_detections_above_filters_and_sorts():
    ids = np.array([[[0], [-1], [2], [1]]], "float32")
    scores = np.array([[[0.6], [0.9], [0.95], [0.2]]], "float32")
    boxes = np.arange(16, dtype="float32").reshape(1, 4, 4)
    rows = viz.detections_above(ids, scores, boxes, thresh=0.5)
    assert [(r[0], round(r[1], 2)) for r in rows] == [(2, 0.95), (0, 0.6)]  # empty (-1) and low rows dropped
    assert rows[0][2] == (8.0, 9.0, 10.0, 11.0)


def test_drawing_says_untrained_and_caps_boxes():
    image = np.zeros((60, 80, 3), "uint8")
    n = 30
    ids = np.zeros((1, n, 1))
    scores = np.linspace(0.99, 0.6, n).reshape(1, n, 1)
    boxes = np.tile([5.0, 5.0, 20.0, 20.0], (1, n, 1))
    ax = viz.draw_detections(image, ids, scores, boxes, ["person"], top=5, mark="untrained weights (seed 0)")
    assert len(ax.patches) == 5
    assert "5 of 30 detections" in ax.get_title()
    assert any(t.get_text() == "UNTRAINED WEIGHTS (SEED 0)" for t in ax.texts)
    assert sum(t.get_text().startswith("person 0.9") for t in ax.texts) >= 1
