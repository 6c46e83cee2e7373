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
    assert "showing 5 of 30 detections with score ≥ 0.50" in ax.get_title()
    assert any(t.get_text() == "UNTRAINED WEIGHTS (SEED 0)" for t in ax.texts)
    assert any(t.get_text() == "1 person 0.99" for t in ax.texts)


def _rect(x, y, text, width):
    unit = width / (72 * viz.FIGURE_IN)
    return (x, y, x + len(text) * viz.CHAR_PT * unit, y + viz.LINE_PT * unit)


def test_labels_never_cover_each_other_and_the_rest_go_to_the_table():
    width, height = 512, 512
    boxes = [(100.0 + k, 100.0 + k, 300.0, 300.0) for k in range(20)]  # 20 boxes on one spot, as untrained weights give
    texts = [viz.label_text(k + 1, "person", 0.9) for k in range(20)]
    spots = viz.place_labels(boxes, texts, width, height)
    placed = [_rect(*xy, t, width) for xy, t in zip(spots, texts) if xy is not None]
    assert 2 <= len(placed) < 20, "some labels fit, not all of them"
    for i, a in enumerate(placed):
        assert 0 <= a[0] and a[2] <= width + 1e-6 and 0 <= a[1] and a[3] <= height + 1e-6
        for b in placed[i + 1 :]:
            assert not viz._overlaps(a, b), (a, b)
    rows = [("person", 0.9, b) for b in boxes]
    table = viz.table_html(rows)
    assert table.count("<tr>") == 21 and "<td>20</td>" in table


def test_the_watermark_sits_over_the_boxes():
    image = np.zeros((400, 300, 3), "uint8")
    ids, scores = np.zeros((1, 2, 1)), np.array([[[0.9], [0.8]]])
    boxes = np.array([[[10.0, 20.0, 60.0, 80.0], [40.0, 30.0, 90.0, 100.0]]])
    assert viz.marks_box([b for b in boxes[0]], 300, 400) == (50.0, 60.0)
    ax = viz.draw_detections(image, ids, scores, boxes, ["person"], mark="untrained weights")
    (mark,) = [t for t in ax.texts if t.get_text() == "UNTRAINED WEIGHTS"]
    assert mark.get_position() == (50.0, 60.0)  # the middle of the boxes, not of the picture (150, 200)
