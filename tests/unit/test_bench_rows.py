"""What a bench of your own model says of its rows: the weights as its workbench marks them, and no row
credited to a backend that ran nothing of it."""

import dataclasses

import pytest
import shared

from byoc_workbench.frontends.onnx_import import import_onnx
from byoc_workbench.measure.bench.bench import bench_model
from byoc_workbench.session import Workbench

MARK = "seeded weights (numpy seed 0), nothing downloaded"


@pytest.fixture(scope="module")
def relu_onnx(tmp_path_factory):
    """One Relu: the teaching target's rules match none of it, so no build offloads anything."""
    return shared.relu_onnx(tmp_path_factory.mktemp("bench_rows") / "relu.onnx")


def test_a_build_that_offloads_nothing_is_skipped_not_credited_and_the_weights_say_the_mark(relu_onnx):
    wb = Workbench.from_model(dataclasses.replace(import_onnx(relu_onnx), mark=MARK), "byoc-target")
    result = bench_model(wb, ("tvm", "onnxruntime"), progress=False, anchors=False, repeat=2)
    assert result["weights"] == result["weights_label"] == MARK
    assert list(result["backends"]) == ["tvm"] and result["speedup_vs_tvm"] == {}
    for label in ("onnxruntime", "onnxruntime_unpruned"):
        assert result["skipped"][label] == "nothing in this build runs on onnxruntime: it would be tvm alone again"
    assert not [n for n in result["notes"] if n.startswith("onnxruntime")]  # no verdict against tvm
