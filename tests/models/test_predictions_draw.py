"""What each task's outputs mean and how they are drawn: masks, keypoints and limbs, top-5 classes
(models/outputs.py, draw/predictions.py, widgets/prediction_view.py); no model is run here."""

from __future__ import annotations

import numpy as np
import pytest

from byoc_workbench.draw import predictions as viz
from byoc_workbench.measure.check import compare as matching
from byoc_workbench.models import meaning, shipped, weights, zoo


def _predict(task, raw, shape=(1, 3, 64, 48)):
    """A prediction of ``task`` from arrays made here, as a zoo model of that task would give it (its classes as
    the package ships them: ImageNet's for a classifier)."""
    spec = next(s for s in weights.MODELS.values() if s.task == task)
    classes = shipped.read_shipped(spec.name).classes
    return meaning.prediction(task, raw, zoo.LoadedModel(spec.name, {}, {}, "untrained", spec, 0, shape, classes))


def test_segmentation_mask_is_the_best_class_per_pixel():
    scores = np.zeros((1, 3, 4, 5), dtype="float32")
    scores[0, 2, :2] = 1.0
    scores[0, 1, 2:] = 1.0
    p = _predict("segmentation", [scores, scores * 0])  # the auxiliary head's output is ignored
    assert p["mask"].shape == (1, 4, 5) and (p["mask"][0, :2] == 2).all() and (p["mask"][0, 2:] == 1).all()
    assert viz.mask_rows(p["mask"], ("sky", "road", "tree")) == [(1, "road", 0.5), (2, "tree", 0.5)]
    assert p.summary().startswith("2 classes in the mask")


def test_untrained_weights_travel_with_the_prediction_and_are_not_logged_again(caplog):
    """The mark is said by what shows the prediction (once in the chooser's status, on each table and
    picture); a log line at every prediction said it again, in pink in a notebook."""
    scores = np.zeros((1, 3, 4, 5), dtype="float32")
    with caplog.at_level("INFO"):
        p = _predict("segmentation", [scores, scores])
    assert p.weights_label == "untrained weights (seed 0)"
    assert not caplog.records, [r.getMessage() for r in caplog.records]


def test_pose_keypoint_is_its_heatmap_peak_in_input_pixels():
    heatmaps = np.zeros((1, 17, 16, 12), dtype="float32")
    heatmaps[0, 0, 3, 5] = 0.9  # the nose's peak: row 3, column 5 of a heatmap a quarter of 64x48
    p = _predict("pose", heatmaps)
    assert p["keypoints"][0, 0].tolist() == [(5 + 0.5) * 4, (3 + 0.5) * 4]
    assert p["confidence"][0, 0, 0] == pytest.approx(0.9)
    assert viz.keypoint_rows(p, min_confidence=0.5) == [("nose", 22.0, 14.0, pytest.approx(0.9))]


def test_classification_top5_is_sorted_with_probabilities():
    scores = np.arange(10, dtype="float32")[None]
    p = _predict("classification", scores, (1, 3, 32, 32))
    assert p["top5"][0].tolist() == [9, 8, 7, 6, 5]
    rows = viz.class_rows(p, tuple(f"c{i}" for i in range(10)))
    assert [n for n, _ in rows] == ["c9", "c8", "c7", "c6", "c5"]
    assert rows[0][1] == pytest.approx(np.exp(9) / np.exp(np.arange(10)).sum(), rel=1e-5)


def test_ties_are_forgiven_and_real_changes_are_not():
    scores = np.array([[3.0, 1.0, 3.0, 0.0, -1.0, 2.0]], dtype="float32")
    ref = _predict("classification", scores, (1, 3, 8, 8))
    tied = _predict("classification", scores, (1, 3, 8, 8))
    tied["top5"] = tied["top5"][:, [1, 0, 2, 3, 4]]  # classes 0 and 2 score 3.0 both: a tie
    assert matching.differences(ref, tied) == []
    changed = _predict("classification", scores + np.array([[0, 0, 0, 0, 0, 0.5]]), (1, 3, 8, 8))
    assert matching.differences(ref, changed)


@pytest.mark.parametrize("task", ["segmentation", "pose", "classification"])
def test_each_task_draws_with_the_mark(task):
    raw = {
        "segmentation": np.random.RandomState(0).randn(1, 4, 64, 48).astype("float32"),
        "pose": np.random.RandomState(0).rand(1, 17, 16, 12).astype("float32"),
        "classification": np.random.RandomState(0).randn(1, 1000).astype("float32"),
    }[task]
    p = _predict(task, raw, (1, 3, 64, 48))
    picture = np.full((64, 48, 3), 128, dtype=np.uint8)
    png = viz.prediction_png(picture, p, mark="untrained weights", title=task)
    assert png.startswith(b"\x89PNG") and len(png) > 2000
    from byoc_workbench.widgets.prediction_view import prediction_view

    box = prediction_view(picture, p, mark="untrained weights")
    assert box.children[0].value.endswith("— untrained weights</div>") and box.children[1].value == viz.prediction_png(
        picture, p, mark="untrained weights"
    )
