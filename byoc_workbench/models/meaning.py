"""What a zoo model's outputs mean, task by task: boxes, a class mask, keypoints, top classes.

:func:`prediction` turns a model's raw outputs (from TVM's VM or from MXNet, in the
graph's order) into a :class:`Prediction`: a dict of numpy arrays, ready for
``numpy.savez``, that carries where its weights came from and what ran it. The
arrays per task:

- ``detection``: ``ids``, ``scores`` (1, N, 1) and ``boxes`` (1, N, 4) in the input's
  pixels; rows of -1 are empty (SSD, YOLOv3, CenterNet and Faster R-CNN alike);
- ``segmentation``: ``scores`` (1, C, H, W), each pixel's class scores, and ``mask``
  (1, H, W), the best class per pixel;
- ``pose``: ``heatmaps`` (1, K, h, w), and per keypoint ``keypoints`` (1, K, 2), the
  (x, y) of its heatmap's peak in the input's pixels, and ``confidence`` (1, K, 1);
- ``classification``: ``scores`` (1, classes), and ``top5`` (1, 5) and
  ``top5_probabilities`` (1, 5), best first.

Pure numpy: no mxnet, no TVM.
"""

from __future__ import annotations

import logging

import numpy as np

logger = logging.getLogger(__name__)

#: COCO's 17 keypoints, and the limbs GluonCV draws between them (``gluoncv.utils.viz.plot_keypoints``).
KEYPOINTS = (
    "nose",
    "left eye",
    "right eye",
    "left ear",
    "right ear",
    "left shoulder",
    "right shoulder",
    "left elbow",
    "right elbow",
    "left wrist",
    "right wrist",
    "left hip",
    "right hip",
    "left knee",
    "right knee",
    "left ankle",
    "right ankle",
)
LIMBS = (
    (0, 1), (1, 3), (0, 2), (2, 4), (5, 6), (5, 7), (7, 9), (6, 8), (8, 10),
    (5, 11), (6, 12), (11, 12), (11, 13), (12, 14), (13, 15), (14, 16),
)  # fmt: skip


class Prediction(dict):
    """A model's outputs as named numpy arrays (see the module's docstring), plus provenance.

    A plain dict for ``numpy.savez(path, **prediction)``; ``task`` says which arrays it
    holds, ``weights``/``weights_label`` whether the weights were trained, ``backend``
    what ran it (e.g. "onnxruntime (CPU) + tvm (llvm) for the rest") and ``notes`` the
    codegen stage's note per subgraph, and ``class_names`` what its class ids stand for.
    """

    task: str = ""
    weights: str = ""
    weights_label: str = ""
    backend: str = ""
    notes: tuple = ()
    class_names: tuple = ()  # what the class ids of a detector, segmenter or classifier stand for
    warnings: tuple = ()  # e.g. non-finite outputs (see nonfinite_warning)

    def summary(self, top: int = 5) -> str:
        """One line saying what the model found, e.g. ``3 detections: person 0.82, ...``."""
        return SUMMARIES[self.task](self, self.class_names, top)


def _detection_arrays(outputs, input_shape) -> dict:
    ids, scores, boxes = (np.asarray(o) for o in outputs[:3])
    # CenterNet gives (1, N) ids and scores; the others (1, N, 1).
    return {"ids": ids.reshape(len(ids), -1, 1), "scores": scores.reshape(len(scores), -1, 1), "boxes": boxes}


def _segmentation_arrays(outputs, input_shape) -> dict:
    scores = np.asarray(outputs[0])  # the others are the auxiliary head's, used in training
    return {"scores": scores, "mask": scores.argmax(axis=1).astype(np.int32)}


def _pose_arrays(outputs, input_shape) -> dict:
    heatmaps = np.asarray(outputs[0])
    n, k, h, w = heatmaps.shape
    flat = heatmaps.reshape(n, k, -1)
    peak = flat.argmax(axis=-1)
    # A peak's cell, scaled to the input's pixels (the heatmap is a quarter of the input).
    stride_y, stride_x = input_shape[2] / h, input_shape[3] / w
    keypoints = np.stack([(peak % w + 0.5) * stride_x, (peak // w + 0.5) * stride_y], axis=-1)
    return {"heatmaps": heatmaps, "keypoints": keypoints, "confidence": flat.max(axis=-1)[..., None]}


def _classification_arrays(outputs, input_shape) -> dict:
    scores = np.asarray(outputs[0]).reshape(1, -1)
    top = np.argsort(-scores, axis=-1, kind="stable")[:, :5]
    shifted = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probabilities = shifted / shifted.sum(axis=-1, keepdims=True)
    return {"scores": scores, "top5": top, "top5_probabilities": np.take_along_axis(probabilities, top, axis=-1)}


ARRAYS = {
    "detection": _detection_arrays,
    "segmentation": _segmentation_arrays,
    "pose": _pose_arrays,
    "classification": _classification_arrays,
}
#: The names of the arrays the tasks' predictions hold (``run --save-outputs`` of a zoo model writes them).
PREDICTION_ARRAYS = {
    "ids", "scores", "boxes", "mask", "heatmaps", "keypoints", "confidence", "top5", "top5_probabilities",
}  # fmt: skip


def nonfinite_warning(arrays: dict, loaded, what: str = "") -> str | None:
    """One line naming the first of ``arrays`` (name -> array) holding NaN or infinity and the
    likely cause, or None.

    Weights that load but are damaged (flipped bits in a ``.params`` file)
    compute such outputs without any error; the run still finishes.
    """
    for name, out in arrays.items():
        out = np.asarray(out)
        if not np.issubdtype(out.dtype, np.floating):
            continue
        bad = ~np.isfinite(out)
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            if loaded.weights == "untrained":
                cause = "the seeded weights overflow: please report it as a bug"
            else:
                cause = f"the weights ({loaded.weights_label}) are likely corrupted, e.g. a damaged .params file"
            return (
                f"{what or loaded.name}: output {name} holds {int(bad.sum())} non-finite values "
                f"(first {out[where]} at {list(where)}); {cause}: fetch it again (byoc-workbench prefetch) "
                "or compare with --weights untrained"
            )
    return None


def prediction(task: str, outputs, loaded, backend: str = "", notes=()) -> Prediction:
    """A :class:`Prediction` of ``task`` from a model's raw outputs.

    Parameters
    ----------
    task : str
        One of :data:`byoc_workbench.models.weights.TASKS`.
    outputs : sequence of arrays
        The model's outputs in the graph's order (a VM's, or MXNet's).
    loaded : byoc_workbench.models.zoo.LoadedModel
        Gives the input shape and the weights' provenance.
    """
    outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    result = Prediction(ARRAYS[task](outputs, loaded.input_shape))
    result.task = task
    result.weights, result.weights_label = loaded.weights, loaded.weights_label
    result.backend, result.notes = backend, tuple(notes)
    result.class_names = class_names(loaded)
    warning = nonfinite_warning(result, loaded, what=f"{loaded.name} on {backend}" if backend else "")
    result.warnings = (warning,) if warning else ()
    if warning:
        logger.warning("%s", warning)
    # Untrained weights are said by what shows the prediction (its table's line, its picture's title), with
    # result.weights_label: a log line here too said it again at every prediction, in pink in a notebook.
    return result


def _name(class_names, c: int) -> str:
    return class_names[c] if 0 <= c < len(class_names) else f"class {c}"


def _detection_summary(p, class_names, top) -> str:
    keep = np.asarray(p["ids"]).reshape(-1) >= 0
    scores = np.asarray(p["scores"]).reshape(-1)[keep]
    ids = np.asarray(p["ids"]).reshape(-1)[keep].astype(int)
    best = ", ".join(f"{_name(class_names, c)} {s:.2f}" for c, s in list(zip(ids, scores))[:top])
    return f"{int(keep.sum())} detections" + (f": {best}" if best else "")


def _segmentation_summary(p, class_names, top) -> str:
    mask = np.asarray(p["mask"])
    classes, counts = np.unique(mask, return_counts=True)
    order = np.argsort(-counts, kind="stable")[:top]
    shares = ", ".join(f"{_name(class_names, int(classes[i]))} {counts[i] / mask.size:.0%}" for i in order)
    return f"{len(classes)} classes in the mask: {shares}"


def _pose_summary(p, class_names, top) -> str:
    confidence = np.asarray(p["confidence"])[0, :, 0]
    order = np.argsort(-confidence, kind="stable")[:top]
    return f"{len(confidence)} keypoints, most confident: " + ", ".join(
        f"{KEYPOINTS[i] if i < len(KEYPOINTS) else i} {confidence[i]:.2f}" for i in order
    )


def _classification_summary(p, class_names, top) -> str:
    pairs = zip(np.asarray(p["top5"])[0][:top], np.asarray(p["top5_probabilities"])[0][:top])
    return "top 5: " + ", ".join(f"{_name(class_names, int(c))} {q:.2f}" for c, q in pairs)


SUMMARIES = {
    "detection": _detection_summary,
    "segmentation": _segmentation_summary,
    "pose": _pose_summary,
    "classification": _classification_summary,
}


def class_names(loaded) -> tuple[str, ...]:
    """The names of the classes a model tells apart (ImageNet's for classifiers), or ``()``."""
    return tuple(loaded.classes)
