"""The MXNet importer: each op family against MXNet, and the three zoo models end to end (TVM LLVM
against MXNet, same weights; make test-mxnet). What needs no MXNet is in tests/unit/test_frontend_mxnet_json.py,
and here the SSD's inventory, summary and run errors, on the shipped model."""

from __future__ import annotations

import copy
import json
import zlib

import numpy as np
import pytest
from messages import one_line
from mxnet_check import check_symbol, mxnet_or_skip, run_tvm

from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.frontends import (
    MXNetImportError,
    find_unsupported,
    from_mxnet,
    op_inventory,
)
from byoc_workbench.frontends.mxnet import with_outputs
from byoc_workbench.subjects import ModelRef

RTOL, ATOL = 1e-3, 1e-4


# --- single ops against MXNet ---------------------------------------------------------


def _op_cases():
    return {**_nn_cases(), **_tensor_cases()}


def _nn_cases():
    """Convolution, BatchNorm, Pooling and FullyConnected, each in the variants the zoo uses and more."""
    return {
        "conv_group_dilate_pad": lambda s, d: s.Convolution(
            d, kernel=(3, 3), num_filter=8, stride=(2, 1), pad=(1, 2), dilate=(2, 1), num_group=2, name="c"
        ),
        "conv_no_bias": lambda s, d: s.Convolution(d, kernel=(1, 1), num_filter=4, no_bias=True, name="c"),
        "conv_depthwise": lambda s, d: s.Convolution(
            d, kernel=(3, 3), num_filter=4, num_group=4, pad=(1, 1), no_bias=True, name="c"
        ),
        "bn_fix_gamma_default": lambda s, d: s.BatchNorm(d, name="bn"),
        "bn_learnt_gamma": lambda s, d: s.BatchNorm(d, fix_gamma=False, eps=1e-5, momentum=0.9, name="bn"),
        "bn_global_stats": lambda s, d: s.BatchNorm(d, fix_gamma=False, use_global_stats=True, name="bn"),
        "bn_axis_last": lambda s, d: s.BatchNorm(d, axis=-1, fix_gamma=False, name="bn"),
        "pool_max_valid": lambda s, d: s.Pooling(d, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="max"),
        "pool_max_full": lambda s, d: s.Pooling(
            d, kernel=(3, 3), stride=(2, 2), pool_type="max", pooling_convention="full"
        ),
        "pool_avg_pad": lambda s, d: s.Pooling(d, kernel=(3, 3), stride=(1, 1), pad=(1, 1), pool_type="avg"),
        "pool_avg_nopad": lambda s, d: s.Pooling(
            d, kernel=(3, 3), stride=(1, 1), pad=(1, 1), pool_type="avg", count_include_pad=False
        ),
        "pool_global_avg": lambda s, d: s.Pooling(d, kernel=(1, 1), global_pool=True, pool_type="avg"),
        "pool_global_max": lambda s, d: s.Pooling(d, kernel=(1, 1), global_pool=True, pool_type="max"),
        "fc_flatten": lambda s, d: s.FullyConnected(d, num_hidden=5, name="fc"),
        "conv1d": lambda s, d: s.Convolution(
            d, kernel=(3,), num_filter=5, stride=(2,), pad=(1,), dilate=(2,), name="c"
        ),
        "conv3d": lambda s, d: s.Convolution(
            d, kernel=(3, 2, 3), num_filter=6, stride=(1, 2, 1), pad=(1, 0, 1), num_group=3, name="c"
        ),
        "pool1d": lambda s, d: s.Group(
            [
                s.Pooling(d, kernel=(3,), stride=(2,), pad=(1,), pool_type="max"),
                s.Pooling(d, kernel=(2,), stride=(2,), pool_type="avg", pooling_convention="full"),
            ]
        ),
        "pool3d": lambda s, d: s.Group(
            [
                s.Pooling(d, kernel=(2, 3, 3), stride=(2, 2, 1), pad=(1, 1, 1), pool_type="max"),
                s.Pooling(d, kernel=(3, 3, 2), stride=(1, 2, 2), pad=(1, 1, 0), pool_type="avg"),
                s.Pooling(d, kernel=(1, 1, 1), global_pool=True, pool_type="avg"),
            ]
        ),
        # MXNet's CPU build cannot run an NHWC Convolution (oneDNN refuses it), so only pooling is compared.
        "pool_nhwc": lambda s, d: s.Group(
            [
                s.Pooling(d, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="max", layout="NHWC"),
                s.Pooling(d, kernel=(1, 1), global_pool=True, pool_type="max", layout="NHWC"),
            ]
        ),
    }


def _tensor_cases():
    """Activations, shapes, slices, elementwise and reductions."""
    return {
        "activations": lambda s, d: s.Group(
            [s.Activation(d, act_type=a) for a in ("relu", "sigmoid", "tanh", "softrelu", "softsign")]
        ),
        "softmax_flatten_transpose": lambda s, d: s.Group(
            [s.softmax(d, axis=1), s.Flatten(d), s.transpose(d, axes=(0, 2, 3, 1)), s.transpose(d)]
        ),
        "reshape_concat": lambda s, d: s.Concat(
            s.Reshape(d, shape=(0, -1, 4)), s.Reshape(d, shape=(0, -3, -2), reverse=False).reshape((2, -1, 4)), dim=1
        ),
        "slices": lambda s, d: s.Group(
            [
                s.slice_axis(d, axis=-1, begin=1, end=None),
                s.slice_axis(d, axis=1, begin=-2, end=-1),
                s.slice(d, begin=(None, 1, 0), end=(None, 3, 4), step=(1, 1, 2)),
                s.slice(d, begin=(1, None), end=(None, 0), step=(1, -1)),
            ]
        ),
        "slice_like_zeros_ones_where": lambda s, d: s.Group(
            [
                s.slice_like(d, d * 0, axes=(2, 3)),
                s.where(d > 0.1, s.ones_like(d), s.zeros_like(d) - 1),
                s.broadcast_add(d, s.reshape(s.arange(start=8), (1, 1, 1, 8))),
            ]
        ),
        "scalar_and_binary": lambda s, d: s.Group(
            [
                d * 3 + 1,
                2 - d,
                1 / (s.abs(d) + 1),
                d / 4,
                s.elemwise_add(d, d),
                s.broadcast_mul(d, d),
                s.broadcast_maximum(d, s.zeros_like(d)),
                d < 0.2,
                s.broadcast_greater(d, s.ones_like(d)),
            ]
        ),
        "reduce": lambda s, d: s.Group(
            [
                s.sum(d, axis=(1, 2)),
                s.mean(d, axis=1, keepdims=True),
                s.max(d),
                s.min(d, axis=(0,), exclude=True),
                s.expand_dims(d, axis=0).squeeze(axis=0),
            ]
        ),
    }


@pytest.mark.mxnet
@pytest.mark.parametrize("case", sorted(_op_cases()))
def test_op_matches_mxnet(case):
    mx = mxnet_or_skip()
    sym = _op_cases()[case](mx.sym, mx.sym.var("data"))
    shape = _CASE_SHAPES.get(case, (2, 4, 6, 8))
    check_symbol(sym, {"data": shape}, np.random.RandomState(zlib.crc32(case.encode())))


_CASE_SHAPES = {
    "fc_flatten": (2, 3, 4),
    "bn_axis_last": (2, 5, 6, 4),
    "reshape_concat": (2, 4, 2, 4),
    "conv1d": (2, 4, 11),
    "pool1d": (2, 4, 11),
    "conv3d": (2, 3, 5, 6, 7),
    "pool3d": (2, 3, 5, 6, 7),
    "pool_nhwc": (2, 6, 7, 3),
}


@pytest.mark.mxnet
def test_round_takes_halves_away_from_zero_as_mxnet_does():
    mx = mxnet_or_skip()
    halves = np.arange(-6, 7) + 0.5
    # 0.49999997 is the float32 below 0.5: |x| + 0.5 would round up to 1 there.
    edges = np.array([0.49999997, -0.49999997, 0.0, 1e7 + 1, -3.7, 3.2], dtype="float32")
    x = np.concatenate([halves, edges, np.random.RandomState(0).uniform(-50, 50, 64)]).astype("float32")
    expected = mx.nd.round(mx.nd.array(x)).asnumpy()
    assert expected[:4].tolist() == [-6, -5, -4, -3]  # -5.5, -4.5, -3.5, -2.5: away from zero, not to even
    mod, _ = from_mxnet(mx.sym.round(mx.sym.var("data")), {}, {}, {"data": x.shape})
    np.testing.assert_array_equal(run_tvm(mod, x)[0], expected)


@pytest.mark.mxnet
@pytest.mark.parametrize("fmt, clip", [("center", -1.0), ("corner", 1.0)])
def test_box_decode_matches_mxnet(fmt, clip):
    mx = mxnet_or_skip()
    rng = np.random.RandomState(0)
    anchors = rng.uniform(10, 60, (1, 50, 4))
    if fmt == "corner":
        anchors[..., 2:] += anchors[..., :2]
    sym = mx.sym.contrib.box_decode(
        mx.sym.var("data"), mx.sym.var("anchors"), std0=0.1, std1=0.1, std2=0.2, std3=0.2, clip=clip, format=fmt
    )
    check_symbol(sym, {"data": (2, 50, 4)}, rng, params={"anchors": anchors}, rtol=1e-5, atol=1e-4)


def _nms_data(rng, batch=2, n=60, classes=3):
    # Well-separated scores (a shuffled ramp) so the sort order is unique.
    scores = rng.permutation(np.linspace(0.02, 0.98, batch * n)).reshape(batch, n, 1)
    scores[:, :5] = 0.005  # below valid_thresh
    ids = rng.randint(-1, classes, (batch, n, 1)).astype("float64")
    xy = rng.uniform(0, 40, (batch, n, 2))
    wh = rng.uniform(5, 30, (batch, n, 2))
    return np.concatenate([ids, scores, xy, xy + wh], axis=-1)


NMS_CASES = {
    "per_class": dict(overlap_thresh=0.45, valid_thresh=0.01, topk=40, coord_start=2, score_index=1, id_index=0),
    "force_suppress": dict(
        overlap_thresh=0.3, valid_thresh=0.01, topk=-1, coord_start=2, score_index=1, id_index=0, force_suppress=True
    ),
    "class_agnostic": dict(overlap_thresh=0.5, valid_thresh=0.1, topk=-1, coord_start=2, score_index=1, id_index=-1),
    "background": dict(
        overlap_thresh=0.45, valid_thresh=0.01, topk=20, coord_start=2, score_index=1, id_index=0, background_id=1
    ),
    "center_in_out": dict(
        overlap_thresh=0.45,
        valid_thresh=0.01,
        topk=-1,
        coord_start=2,
        score_index=1,
        id_index=0,
        in_format="center",
        out_format="center",
    ),
    "corner_to_center": dict(
        overlap_thresh=0.45, valid_thresh=0.01, coord_start=2, score_index=1, id_index=0, out_format="center"
    ),
}


@pytest.mark.mxnet
@pytest.mark.parametrize("case", sorted(NMS_CASES))
def test_box_nms_matches_mxnet(case):
    mx = mxnet_or_skip()
    rng = np.random.RandomState(sorted(NMS_CASES).index(case))
    data = _nms_data(rng)
    if NMS_CASES[case].get("in_format") == "center":
        data[..., 4:] -= data[..., 2:4]  # (x1, y1) -> (w, h)
        data[..., 2:4] += data[..., 4:] / 2
    sym = mx.sym.contrib.box_nms(mx.sym.var("data"), **NMS_CASES[case])
    expected = sym.bind(mx.cpu(), {"data": mx.nd.array(data)}).forward(is_train=False)[0].asnumpy()
    mod, _ = from_mxnet(sym, {}, {}, {"data": data.shape})
    got = run_tvm(mod, data.astype("float32"))[0]
    assert (expected[..., 1] > 0).sum() > 5, "the case keeps some boxes"
    np.testing.assert_array_equal(got[..., 0], expected[..., 0])
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.mxnet
def test_from_gluon_matches_the_block():
    mx = mxnet_or_skip()
    net = mx.gluon.nn.HybridSequential()
    net.add(
        mx.gluon.nn.Conv2D(4, 3, padding=1),
        mx.gluon.nn.BatchNorm(),
        mx.gluon.nn.Activation("relu"),
        mx.gluon.nn.MaxPool2D(),
        mx.gluon.nn.Dense(3),
    )
    net.initialize(mx.init.Xavier())
    net.hybridize()
    x = np.random.RandomState(0).randn(2, 3, 8, 8).astype("float32")
    expected = net(mx.nd.array(x)).asnumpy()
    from byoc_workbench.frontends import from_gluon

    mod, params = from_gluon(net, {"data": x.shape})
    assert params, "weights came along"
    np.testing.assert_allclose(run_tvm(mod, x)[0], expected, rtol=1e-5, atol=1e-5)


@pytest.mark.mxnet
def test_from_gluon_with_the_wrong_input_shape_is_one_line():
    mx = mxnet_or_skip()
    from byoc_workbench.frontends import from_gluon

    net = mx.gluon.nn.Conv2D(4, 3, in_channels=3)
    net.initialize()
    with pytest.raises(MXNetImportError) as info:
        from_gluon(net, {"data": (1, 5, 8, 8)})
    assert "(1, 5, 8, 8)" in one_line(info)


# --- the three zoo models, end to end -------------------------------------------------


@pytest.fixture(scope="module")
def loaded():
    """``loaded(name)``: a zoo model with seeded (untrained) weights, as (model, graph, params), loaded once
    in this module and let go after it."""
    from byoc_workbench.models import zoo

    models = {}

    def get(name):
        if name not in models:
            model = zoo.load_model(name, "untrained", seed=0)
            models[name] = (model, *zoo.symbol_and_params(model))
        return models[name]

    yield get
    models.clear()


def _with_nms_input(graph):
    """The graph with the box_nms input (the raw detections) added to its outputs."""
    names = [graph["nodes"][h[0]]["name"] for h in graph["heads"]]
    nms = [n for n in graph["nodes"] if n["op"] == "_contrib_box_nms"]
    raw = [graph["nodes"][n["inputs"][0][0]]["name"] for n in nms]
    return with_outputs(graph, raw + names), len(raw)


def _in_dtype(graph, dtype):
    # _arange carries its own dtype; follow the model's so both sides stay uniform.
    graph = copy.deepcopy(graph)
    for node in graph["nodes"]:
        if node["op"] == "_arange":
            node["attrs"]["dtype"] = dtype
    return graph


def _mxnet_outputs(graph, params, x, dtype):
    mx = mxnet_or_skip()
    sym = mx.sym.load_json(json.dumps(graph))
    args = {n: mx.nd.array(x if n == "data" else params[n], dtype=dtype) for n in sym.list_arguments()}
    aux = {n: mx.nd.array(params[n], dtype=dtype) for n in sym.list_auxiliary_states()}
    exe = sym.bind(mx.cpu(), args, aux_states=aux, grad_req="null")
    return [o.asnumpy() for o in exe.forward(is_train=False)]


def _compare(loaded, name, size, dtype):
    _, graph, params = loaded(name)
    graph, n_raw = _with_nms_input(_in_dtype(graph, dtype))
    x = np.random.RandomState(1).uniform(-2, 2, (1, 3, size, size)).astype(dtype)
    mod, _ = from_mxnet(graph, params, None, {"data": x.shape}, dtype=dtype)
    return run_tvm(mod, x), _mxnet_outputs(graph, params, x, dtype), n_raw


def _assert_detections(got, expected, box_atol=ATOL):
    ids, scores, boxes = got
    ref_ids, ref_scores, ref_boxes = expected
    assert (ref_scores > 0).sum() >= 20, "enough detections to make the check mean something"
    np.testing.assert_array_equal(ids, ref_ids)
    np.testing.assert_allclose(scores, ref_scores, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(boxes, ref_boxes, rtol=RTOL, atol=box_atol)


MODEL_SIZES = {"ssd_512_resnet50_v1_coco": 256, "ssd_512_mobilenet1.0_coco": 256, "resnet50_v1": 224}


@pytest.mark.mxnet
@pytest.mark.parametrize("name", sorted(MODEL_SIZES))
def test_zoo_model_matches_mxnet_float64(loaded, name):
    """Same seeded weights, same input: raw tensors and detections agree to rtol 1e-3, atol 1e-4.

    In float64 the two runtimes differ only by rounding, so this checks the
    importer's semantics op by op (SSD at 256x256: the anchors are sliced with
    slice_like). The NMS itself runs in float32 (TVM's sort kernel is float32 only).
    """
    got, expected, n_raw = _compare(loaded, name, MODEL_SIZES[name], "float64")
    if n_raw:
        raw, ref_raw = got[0], expected[0]
        np.testing.assert_array_equal(raw[..., 0], ref_raw[..., 0])  # class ids, -1 below valid_thresh
        np.testing.assert_allclose(raw, ref_raw, rtol=RTOL, atol=ATOL)
        _assert_detections(got[1:], expected[1:])
    else:
        np.testing.assert_allclose(got[0], expected[0], rtol=RTOL, atol=ATOL)
        assert (np.argsort(-got[0][0])[:5] == np.argsort(-expected[0][0])[:5]).all()


@pytest.mark.mxnet
def test_classifier_matches_mxnet_float32(loaded):
    """float32, as deployed: the logits to rtol 1e-3/atol 1e-3 (oneDNN and LLVM accumulate in different
    orders), the same class on top. The SSD's float32 check is ``test_ssd_run``'s: TVM alone's detections
    on the default picture at 512x512 against MXNet's, as ``run ssd`` gives them."""
    got, expected, _ = _compare(loaded, "resnet50_v1", MODEL_SIZES["resnet50_v1"], "float32")
    np.testing.assert_allclose(got[0], expected[0], rtol=RTOL, atol=1e-3)
    assert np.argmax(got[0]) == np.argmax(expected[0])


# --- the SSD helpers the CLI uses -----------------------------------------------------


def test_op_inventory_of_ssd_resnet50(loaded):
    _, graph, _ = loaded("ssd_512_resnet50_v1_coco")
    inventory = op_inventory(graph)
    assert sum(inventory.values()) == 528
    assert inventory["Convolution"] == 73 and inventory["BatchNorm"] == 61
    assert inventory["_contrib_box_nms"] == 1 and inventory["slice_axis"] == 166
    assert not find_unsupported(graph)


def test_import_summary_shape():
    from byoc_workbench import workflow

    summary = workflow.import_summary(ModelRef.parse("ssd_512_resnet50_v1_coco", weights="untrained"))
    assert set(summary) == {"model", "task", "family", "input_shape", "op_count", "ops", "params", "weights"}
    assert summary["weights"] == "untrained" and summary["task"] == "detection" and summary["family"] == "SSD"
    assert summary["ops"]["relax.nn.conv2d"] == 73
    assert summary["ops"]["relax.vision.non_max_suppression"] == 1
    assert summary["op_count"] == sum(summary["ops"].values())
    assert summary["params"] > 30_000_000
    json.dumps(summary)


def test_run_rejects_an_unknown_backend_and_model():
    from byoc_workbench import workflow
    from byoc_workbench.backends import tensorrt
    from byoc_workbench.models import zoo

    with pytest.raises(workflow.WorkflowError, match="Unknown backend 'tvm-cuda'"):
        workflow.run(backend="tvm-cuda")
    with pytest.raises(zoo.UnknownModelError, match="yolo9000"):
        workflow.run(ModelRef(kind="zoo", name="yolo9000"))
    why = tensorrt.missing()
    if why is not None:  # tensorrt is a backend now; where it cannot run, it says why in one line, at once
        with pytest.raises(WorkbenchError) as err:
            workflow.run(backend="tensorrt")
        assert err.value.line == why.line and "\n" not in why.line and "Fix:" in why.line


@pytest.mark.mxnet
def test_run_mxnet_backend_marks_untrained_weights():
    from byoc_workbench import workflow

    result = workflow.run(ModelRef.parse("ssd_512_mobilenet1.0_coco", weights="untrained"), backend="mxnet")
    assert set(result) == {"ids", "scores", "boxes"} and result.task == "detection"
    assert result["ids"].shape == (1, 100, 1) and result["boxes"].shape == (1, 100, 4)
    assert "untrained weights" in result.weights_label


@pytest.mark.mxnet
def test_run_classifier_gives_its_top_five():
    from byoc_workbench import workflow

    result = workflow.run(ModelRef.parse("mobilenetv3_small", weights="untrained"), backend="mxnet")
    assert result.task == "classification" and result["top5"].shape == (1, 5)
    assert result.summary().startswith("top 5: ") and len(result.class_names) == 1000
    probabilities = result["top5_probabilities"][0]
    assert (np.diff(probabilities) <= 0).all() and 0 < probabilities.sum() <= 1
