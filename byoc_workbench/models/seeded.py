"""Seeded weights for offline use: a deterministic initialisation that gives sensible detections.

Random weights alone make an SSD useless to look at: activations overflow through
50 layers and every score ties. :func:`seeded_init` measures batch-norm statistics
on a calibration batch and tames the predictors, so that the pictures and tables
made from untrained weights still show boxes, with scores spread out enough that
the NMS order is well defined. Everything made from these weights must say
"untrained weights" (see :attr:`byoc_workbench.models.zoo.LoadedModel.weights_label`).
"""

from __future__ import annotations

import json

import numpy as np

from .frontend import gluon


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
    computes. The class predictors are scaled by ``class_scale`` and favour the
    background class by ``background_logit``, so that scores neither saturate at 1
    (where they would tie exactly) nor crowd around 1/81: near-ties make the NMS
    order arbitrary. With the defaults the 100 kept scores span about 0.1-0.9 and
    consecutive ones differ by 1e-6 or more. The box predictors are scaled by
    ``box_scale`` so that boxes stay near their anchors.
    The calibration batch holds the default picture and seeded noise, so both
    kinds of input give sensible activations.
    """
    mx = gluon.import_mxnet()
    rng = np.random.RandomState(seed)
    block.initialize(force_reinit=False)
    # Gluon infers most shapes lazily; one forward pass makes them known.
    block(mx.nd.zeros(input_shape))
    params = block.collect_params()
    for name, param in sorted(params.items()):
        if param.grad_req == "null" and not _is_bn_stat(name):
            continue  # constants such as the SSD anchors: computed by the model, not learnt
        param.set_data(mx.nd.array(_draw(name, param.shape, rng), dtype=param.dtype))
    _tame_predictors(block, rng, background_logit, class_scale, box_scale, mx)
    _calibrate_batch_norm(block, params, rng, input_shape, mx)


def _is_bn_stat(name: str) -> bool:
    return name.endswith(("running_mean", "running_var", "moving_mean", "moving_var"))


def _draw(name: str, shape, rng: np.random.RandomState) -> np.ndarray:
    if name.endswith("gamma"):
        return rng.uniform(0.5, 1.5, shape)
    if name.endswith("beta"):
        return rng.uniform(-0.2, 0.2, shape)
    if name.endswith(("running_mean", "moving_mean")):
        return np.zeros(shape)
    if name.endswith(("running_var", "moving_var")):
        return np.ones(shape)
    if name.endswith("bias"):
        return rng.uniform(-0.1, 0.1, shape)
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else int(shape[0])
    return rng.normal(0.0, np.sqrt(2.0 / max(fan_in, 1)), shape)


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


def _calibration_batch(rng, input_shape) -> np.ndarray:
    # The default picture (natural image statistics) and seeded noise, at the input size.
    import cv2

    from . import images

    height, width = input_shape[2], input_shape[3]
    picture = cv2.resize(images.read_image(images.default_image_path()), (width, height), interpolation=cv2.INTER_CUBIC)
    noise = rng.uniform(-2.0, 2.0, (1, 3, height, width)).astype(np.float32)
    return np.concatenate([images.to_input(picture), noise])


def _calibrate_batch_norm(block, params, rng, input_shape, mx) -> None:
    # Random moving statistics let activations grow ~1e4x through ResNet-50. In a
    # training-mode pass each BatchNorm normalises with its batch statistics, so the
    # BatchNorm inputs seen in that one pass are exactly what inference sees once the
    # moving statistics equal them. (A training pass does not update the moving
    # statistics here, so they are measured on the inputs instead.)
    traced = gluon.trace(block, [input_shape])
    graph = dict(traced.graph)
    nodes = graph["nodes"]
    taps, heads = [], []
    for node in nodes:
        if node["op"] != "BatchNorm":
            continue
        heads.append([node["inputs"][0][0], node["inputs"][0][1], 0])
        axis = int(node.get("attrs", {}).get("axis", 1))
        taps.append((axis, nodes[node["inputs"][3][0]]["name"], nodes[node["inputs"][4][0]]["name"]))
    if not taps:
        return
    # The same graph with every BatchNorm input as an output.
    graph["heads"] = heads
    group = mx.sym.load_json(json.dumps(graph))
    batch = mx.nd.array(_calibration_batch(rng, input_shape))
    tapped = mx.gluon.SymbolBlock(group, [mx.sym.var(traced.inputs[0])], params=params)
    with mx.autograd.train_mode():
        outputs = tapped(batch)
    for (axis, mean_name, var_name), out in zip(taps, outputs):
        x = out.asnumpy().astype(np.float64)
        axes = tuple(a for a in range(x.ndim) if a != axis % x.ndim)
        params[mean_name].set_data(mx.nd.array(x.mean(axis=axes)))
        # 1x1 feature maps in a batch of two can give a near-zero variance.
        params[var_name].set_data(mx.nd.array(np.maximum(x.var(axis=axes), 1e-2)))
