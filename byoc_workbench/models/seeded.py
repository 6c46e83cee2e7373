"""Seeded weights for offline use: a deterministic initialisation that gives sensible outputs (MXNet's way).

This is how the seeded weights the package ships (:mod:`.shipped`) were made, where MXNet is
(``tools/ship_zoo.py``); a seat regenerates them from the seed and the shipped recipe, without MXNet.

Random weights alone make an SSD useless to look at: activations overflow through
50 layers and every score ties. :func:`seeded_init` measures batch-norm statistics
on a calibration batch and then the outputs of each detector's heads, so that the
pictures and tables made from untrained weights still show boxes, with scores
spread out enough that the NMS order is well defined. Everything made from these weights must say
"untrained weights" (see :attr:`byoc_workbench.models.zoo.LoadedModel.weights_label`).
"""

from __future__ import annotations

import contextlib
import io
import json
import warnings

import numpy as np

from byoc_workbench.frontends import gluon
from byoc_workbench.models import images
from byoc_workbench.models.shipped import draw, is_bn_stat


def seeded_init(
    block,
    seed: int = 0,
    input_shape=(1, 3, 224, 224),
    background_logit: float = 4.0,
    class_scale: float = 0.6,
    box_scale: float = 0.1,
) -> None:
    """Initialise every learnt parameter from ``seed``, deterministically.

    Conv and dense weights are He-normal. Batch-norm statistics are then measured
    on a seeded calibration batch, so activations stay of order one through 50
    layers instead of overflowing (random moving statistics make SSD's boxes
    infinite). The SSD anchors are constants and keep the values the model
    computes. The SSD's class predictors are scaled by ``class_scale`` and favour the
    background class by ``background_logit``, so that scores neither saturate at 1
    (where they would tie exactly) nor crowd around 1/81: near-ties make the NMS
    order arbitrary. With the defaults the 100 kept scores span about 0.1-0.9 and
    consecutive ones differ by 1e-6 or more. Its box predictors are scaled by
    ``box_scale`` so that boxes stay near their anchors. The other detectors' heads
    (:data:`_HEADS`) are measured on the calibration batch instead, layer by layer,
    and set to a seeded mean and a spread: class logits 1 (the background
    ``background_logit`` higher), sigmoid scores (objectness) 1.5, boxes ``box_scale``.
    The calibration batch holds the default picture and seeded noise, so both
    kinds of input give sensible activations.
    """
    mx = gluon.import_mxnet()
    rng = np.random.RandomState(seed)
    with warnings.catch_warnings():
        # GluonCV initialises some heads when it builds them (CenterNet's); all are drawn below.
        warnings.filterwarnings("ignore", message=".*is already initialized", category=UserWarning)
        block.initialize(force_reinit=False)
    # Gluon infers most shapes lazily; one forward pass makes them known.
    block(mx.nd.zeros(input_shape))
    params = block.collect_params()
    for name, param in drawn_params(params):
        param.set_data(mx.nd.array(draw(name, param.shape, rng), dtype=param.dtype))
    _tame_predictors(block, rng, background_logit, class_scale, box_scale, mx)
    batch = _calibration_batch(rng, input_shape)
    traced = gluon.trace(block, [input_shape])
    _calibrate_batch_norm(traced, params, batch, mx)
    spreads = {"class": 1.0, "box": box_scale, "score": 1.5}
    _calibrate_heads(block, traced, params, batch, rng, spreads, background_logit, mx)


def drawn_params(params) -> list:
    """``(name, parameter)`` of what :func:`seeded_init` draws, in the order it draws them: the learnt
    parameters and the batch-norm statistics. Constants such as the SSD's anchors are computed by the
    model, not learnt, and are not drawn."""
    return [(name, p) for name, p in sorted(params.items()) if p.grad_req != "null" or is_bn_stat(name)]


def _tame_predictors(block, rng, background_logit: float, class_scale: float, box_scale: float, mx) -> None:
    classes = getattr(block, "class_predictors", None)
    if classes is None:
        return
    groups = len(block.classes) + 1
    for predictors, scale in ((classes, class_scale), (block.box_predictors, box_scale)):
        for param in predictors.collect_params().values():
            value = param.data().asnumpy() * scale
            if param.name.endswith("bias") and predictors is classes:
                value = rng.uniform(-1.0, 1.0, param.shape)
                value[::groups] += background_logit  # channel c is anchor c // groups, class c % groups
            # An mx.nd array, not numpy: MXNet cannot copy numpy into oneDNN-laid-out memory.
            param.set_data(mx.nd.array(value, dtype=param.dtype))


# The last layers of the other detectors' heads, by the attribute GluonCV keeps them under, and
# what their outputs are: class logits (the background first in Faster R-CNN's dense layer), box
# offsets, or sigmoid scores (the RPN's objectness; YOLOv3's outputs mix boxes, objectness and
# classes, each of which reads well at that spread). SSD keeps its scaling above, which its
# tests and pictures were tuned with.
_HEADS = (
    ("class_predictor", "class"),
    ("box_predictor", "box"),
    ("rpn.rpn_head.score", "score"),
    ("rpn.rpn_head.loc", "box"),
    ("yolo_outputs", "score"),
)


def _head(block, path: str):
    for name in path.split("."):
        block = getattr(block, name, None)
    return block


def _calibrate_heads(block, traced, params, batch, rng, spreads: dict, background_logit: float, mx) -> None:
    """Each head's output channels, measured on ``batch``, set to a seeded mean and ``spreads[kind]``."""
    nodes = traced.graph["nodes"]
    layers, kinds = [], []  # (node index, weight name, bias name) of each head's convs and dense layers
    for path, kind in _HEADS:
        head = _head(block, path)
        names = set(head.collect_params()) if head is not None else set()
        for i, node in enumerate(nodes):
            inputs = [nodes[e[0]]["name"] for e in node["inputs"]]
            if node["op"] in ("Convolution", "FullyConnected") and len(inputs) == 3 and inputs[1] in names:
                layers.append((i, inputs[1], inputs[2]))
                kinds.append(kind)
    if not layers:
        return
    groups = len(getattr(block, "classes", ())) + 1
    outputs = _tap(traced, params, [i for i, _, _ in layers], batch, mx, train=False)
    for (_, weight, bias), kind, out in zip(layers, kinds, outputs):
        axes = tuple(a for a in range(out.ndim) if a != 1)
        mean = out.mean(axis=axes, keepdims=True)
        # One spread per layer: SSD's coarsest maps give a channel two values on this batch, too
        # few to measure it alone, and a channel that happened to vary little would be
        # amplified until it saturates every score on another picture.
        std = max(float(np.sqrt(np.mean((out - mean) ** 2))), 1e-6)
        mean = mean.reshape(-1)
        target = np.zeros_like(mean)
        if kind == "class":
            target = rng.uniform(-1.0, 1.0, mean.shape)
            target[::groups] += background_logit  # channel c is anchor c // groups, class c % groups
        gain = spreads[kind] / std
        w, b = params[weight].data().asnumpy(), params[bias].data().asnumpy()
        # An mx.nd array, not numpy: MXNet cannot copy numpy into oneDNN-laid-out memory.
        params[weight].set_data(mx.nd.array(w * gain, dtype=params[weight].dtype))
        params[bias].set_data(mx.nd.array((b - mean) * gain + target, dtype=params[bias].dtype))


def _tap(traced, params, heads, batch, mx, train: bool) -> list:
    """The outputs of graph nodes ``heads`` on ``batch`` as float64 arrays, in a training-mode
    pass (batch statistics) when ``train``. Graphs that fix the batch at the traced size (Faster
    R-CNN's proposals per picture) see one picture at a time, and each output pools both passes."""
    graph = dict(traced.graph)
    graph["heads"] = [[i, k, 0] for i, k in ((h, 0) if isinstance(h, int) else h for h in heads)]
    group = mx.sym.load_json(json.dumps(graph))
    tapped = mx.gluon.SymbolBlock(group, [mx.sym.var(traced.inputs[0])], params=params)
    parts = [batch] if _takes_batch(group, traced.inputs[0], batch.shape) else [b[None] for b in batch]
    with mx.autograd.train_mode() if train else mx.autograd.predict_mode():
        runs = [[o.asnumpy() for o in _as_list(tapped(mx.nd.array(part)))] for part in parts]
    return [np.concatenate([run[i] for run in runs]).astype(np.float64) for i in range(len(heads))]


def _as_list(out) -> list:
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _calibration_batch(rng, input_shape) -> np.ndarray:
    # The default picture (natural image statistics) and seeded noise, at the input size.
    import cv2

    height, width = input_shape[2], input_shape[3]
    picture = cv2.resize(images.read_image(images.default_image_path()), (width, height), interpolation=cv2.INTER_CUBIC)
    noise = rng.uniform(-2.0, 2.0, (1, 3, height, width)).astype(np.float32)
    return np.concatenate([images.to_input(picture), noise])


def _takes_batch(symbol, data: str, shape) -> bool:
    """Whether the graph runs on a batch of ``shape[0]`` pictures (shape inference, nothing run)."""
    mx = gluon.import_mxnet()
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # MXNet prints the arguments before it raises
            symbol.infer_shape(**{data: tuple(shape)})
    except mx.base.MXNetError:
        return False
    return True


def _calibrate_batch_norm(traced, params, batch, mx) -> None:
    # Random moving statistics let activations grow ~1e4x through ResNet-50. In a
    # training-mode pass each BatchNorm normalises with its batch statistics, so the
    # BatchNorm inputs seen in that one pass are exactly what inference sees once the
    # moving statistics equal them. (A training pass does not update the moving
    # statistics here, so they are measured on the inputs instead.)
    nodes = traced.graph["nodes"]
    taps, heads = [], []
    for node in nodes:
        if node["op"] not in ("BatchNorm", "_contrib_SyncBatchNorm"):
            continue
        heads.append(tuple(node["inputs"][0][:2]))
        axis = int(node.get("attrs", {}).get("axis", 1))
        taps.append((axis, nodes[node["inputs"][3][0]]["name"], nodes[node["inputs"][4][0]]["name"]))
    if not taps:
        return
    for (axis, mean_name, var_name), x in zip(taps, _tap(traced, params, heads, batch, mx, train=True)):
        axes = tuple(a for a in range(x.ndim) if a != axis % x.ndim)
        params[mean_name].set_data(mx.nd.array(x.mean(axis=axes)))
        # 1x1 feature maps in a batch of two can give a near-zero variance.
        params[var_name].set_data(mx.nd.array(np.maximum(x.var(axis=axes), 1e-2)))
