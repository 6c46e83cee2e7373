"""Every workflow of the CLI on zoo models beyond the SSD: run, import, stages, profile, compare,
bench and prefetch, named by ``--model`` or by the model's own name, on small models."""

from __future__ import annotations

import json

import numpy as np
import pytest
from messages import one_line

from byoc_workbench import cli
from byoc_workbench.models import zoo

POSE = "simple_pose_resnet18_v1b"  # 256x192, one subgraph: the cheapest zoo model to build
CLASSIFIER = "mobilenetv3_small"


def test_unknown_zoo_model_is_one_line_listing_the_zoo(capsys):
    assert cli.main(["run", "yolo9000", "--backend", "mxnet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "yolo9000" in err and POSE in one_line(err.strip())


def test_prefetch_lists_the_zoo_with_tasks_and_families(capsys):
    assert cli.main(["prefetch", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == list(zoo.MODELS)
    row = next(line for line in lines if line.startswith("yolo3_mobilenet1.0_voc"))
    assert row.split()[1:3] == ["detection", "YOLOv3"] and "416x416" in row


def test_import_summary_of_a_classifier(capsys):
    assert cli.main(["import", CLASSIFIER, "--weights", "untrained", "--summary"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["model"] == CLASSIFIER and summary["task"] == "classification"
    assert summary["input_shape"] == [1, 3, 224, 224] and summary["ops"]["relax.nn.conv2d"] > 20


@pytest.fixture(scope="module")
def pose_tvm(tmp_path_factory):
    out = tmp_path_factory.mktemp("pose") / "tvm.npz"
    assert (
        cli.main(
            ["run", "ssd", "--model", POSE, "--backend", "tvm", "--weights", "untrained"] + ["--save-outputs", str(out)]
        )
        == 0
    )
    return dict(np.load(out))


def test_run_pose_offloaded_saves_keypoints_equal_to_tvm_alone(pose_tvm, tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    from byoc_workbench.measure.check import compare as matching
    from byoc_workbench.models import meaning

    out = tmp_path / "ort.npz"
    assert (
        cli.main(["run", POSE, "--backend", "onnxruntime", "--weights", "untrained", "--save-outputs", str(out)]) == 0
    )
    printed = capsys.readouterr().out
    assert f"{POSE} on onnxruntime: 17 keypoints" in printed and "untrained weights" in printed
    assert "ran on: onnxruntime (CPU) + tvm (llvm) for the rest" in printed
    got = dict(np.load(out))
    assert sorted(got) == ["confidence", "heatmaps", "keypoints"] and got["keypoints"].shape == (1, 17, 2)
    ref, offloaded = meaning.Prediction(pose_tvm), meaning.Prediction(got)
    ref.task = offloaded.task = "pose"
    assert matching.differences(ref, offloaded) == []


def test_stages_profile_and_compare_take_a_zoo_name(tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    assert cli.main(["stages", POSE, "--out", str(tmp_path), "--format", "dot", "--weights", "untrained"]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    by = {s["name"]: s for s in summary["stages"]}
    assert summary["model"] == POSE and "untrained weights" in summary["weights"]
    assert len(by["partition"]["subgraphs"]) == len(by["prune"]["subgraphs"]) == 1
    capsys.readouterr()
    assert cli.main(["compare", POSE, "--weights", "untrained", "--json"]) == 0
    checks = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in checks["subgraphs"]] == ["tensorrt_0"] and checks["over_tolerance"] == []
    assert cli.main(["profile", POSE, "--weights", "untrained", "--runs", "2", "--json"]) == 0
    profile = json.loads(capsys.readouterr().out)
    assert profile["subgraphs"] == {"tensorrt_0": "onnxruntime (CPU)"} and profile["weights"]


def test_bench_a_classifier_in_bench_ssds_json_shape(capsys):
    """Without MXNet (a seat) its anchor is skipped with why; with it (make test-mxnet) it is timed and matched."""
    pytest.importorskip("onnxruntime")
    from byoc_workbench.frontends import gluon
    from byoc_workbench.measure.bench import anchors

    args = ["bench", CLASSIFIER, "--weights", "untrained", "--backends", "tvm,onnxruntime", "--repeat", "2"]
    assert cli.main([*args, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    for key in ("backends", "anchors", "speedup_vs_tvm", "outputs_match", "weights", "machine", "skipped"):
        assert key in result, key
    assert result["model"] == CLASSIFIER and result["task"] == "classification"
    assert list(result["backends"]) == ["tvm", "onnxruntime", "onnxruntime_unpruned"]
    assert "onnxruntime_whole_model" in result["anchors"] or "onnxruntime_whole_model" in result["skipped"]
    if gluon.has_mxnet():
        assert "mxnet" in result["anchors"] and result["outputs_match"]["mxnet"]
    else:
        assert "mxnet" not in result["anchors"] and result["skipped"]["mxnet"] == anchors.NO_MXNET
    assert all(result["outputs_match"].values()) and "onnxruntime" in result["outputs_match"]
    assert result["speedup_vs_tvm"]["onnxruntime"] > 0


@pytest.mark.mxnet
def test_the_mxnet_anchor_keeps_a_lone_output_whole():
    """A pose net returns one array, not a tuple: bench's MXNet anchor must not iterate over its batch."""
    from byoc_workbench.measure.bench import anchors

    loaded = zoo.load_model(POSE, "untrained")
    _, out = anchors.mxnet_anchor(loaded.block(), np.zeros(loaded.input_shape, "float32"), 1, progress=False)
    assert len(out) == 1 and out[0].shape == (1, 17, 64, 48)
