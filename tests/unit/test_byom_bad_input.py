"""Careless input to the notebook-facing API of your own model (round 10's B10, B11, B12): NumPy integers are
whole numbers wherever a count is asked for; a word is no bool, a junk result no run, an array no path, and a
huge example no example. Each is taken as meant or one line, never a traceback nor the opposite of what was said."""

import numpy as np
import onnx
import pytest
from messages import refused
from onnx import TensorProto, helper, numpy_helper

from byoc_workbench import exercises
from byoc_workbench.core.errors import whole_number
from byoc_workbench.measure.bench import byom
from byoc_workbench.session import Workbench


@pytest.fixture(scope="module")
def wb(tmp_path_factory):
    path = tmp_path_factory.mktemp("byom") / "conv.onnx"
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["y"])]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], [w]), opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return Workbench.from_onnx(path, "byoc-target")


@pytest.mark.parametrize("value, number", [(3, 3), (np.int64(2), 2), (np.uint8(7), 7), (0, 0), (-1, -1)])
def test_a_whole_number_is_any_integral_python_or_numpy(value, number):
    assert whole_number(value) == number and type(whole_number(value)) is int


@pytest.mark.parametrize("value", [True, np.True_, np.False_, 2.0, np.float64(2), "2", None, [2]])
def test_no_bool_float_or_text_is_a_whole_number(value):
    assert whole_number(value) is None


def test_numpy_integers_count_runs(wb):
    """Round 10: repeat=np.int64(2) was refused as 'repeat must be a whole number ..., got int64 (np.int64(2))'."""
    run = byom.build_run(wb, "tvm", repeat=np.int64(2), warmup=np.int32(1))
    assert run.latency.runs == 2
    refused(lambda: byom.build_run(wb, "tvm", repeat=np.float64(2)), "repeat must be a whole number", "float64")
    refused(lambda: byom.build_run(wb, "tvm", warmup=np.True_), "warmup must be a whole number", "bool")


@pytest.mark.parametrize("seconds", [np.int64(60), np.float32(60), 60, 60.0])
def test_max_seconds_takes_any_real_number_as_pythons_do(wb, seconds):
    assert byom.build_run(wb, "tvm", max_seconds=seconds).latency.runs == 1


@pytest.mark.parametrize("seconds", [np.True_, True, "60", np.float64("nan"), 0])
def test_max_seconds_refuses_a_bool_text_or_no_positive_number(wb, seconds):
    refused(lambda: byom.build_run(wb, "tvm", max_seconds=seconds), "max_seconds is a number of seconds above 0")


@pytest.mark.parametrize("prune", ["no", None, 0, 1.0, np.float64(0)])
def test_offloaded_takes_prune_as_true_or_false_only(wb, prune):
    """Round 10: byom.offloaded(wb, backend, "no") pruned, "no" being truthy."""
    refused(lambda: byom.offloaded(wb, "onnxruntime", prune), "prune is True or False", repr(prune)[:10])


def test_offloaded_takes_numpy_bools_and_a_workbench_only(wb):
    kept = byom.offloaded(wb, None, np.False_)
    assert kept[-1].name == "codegen" and len(kept[-2].subgraphs) == len(byom.offloaded(wb, None, False)[-2].subgraphs)
    refused(lambda: byom.offloaded(None, "onnxruntime"), "Expected a Workbench", "NoneType")


def _ran(**check):
    return {
        "model": "m",
        "ran_on": "tvm alone",
        "weights": "w",
        "build_s": 0.5,
        "run_s": 1e-3,
        "reference": "r",
        "check": {"equal": True, "max_rel": 0.0, "tolerance": 1e-3, **check},
    }


def test_run_text_reads_what_run_gives_and_refuses_wrong_value_types():
    assert "equal (max relative error 0.00e+00" in byom.run_text(_ran())
    assert "detections found 3 of 4" in byom.run_text(_ran(detections={"found": 3, "of": 4}))
    bad = [_ran(max_rel="x"), _ran(equal="yes"), _ran(tolerance=None), _ran(detections=5), {**_ran(), "run_s": "1"}]
    for result in bad:
        refused(lambda r=result: byom.run_text(r), "run_text takes what byom.run gave")


@pytest.mark.parametrize(
    "call, says",
    [
        (lambda: byom.example(size=10**6), "size must be a whole number of pixels, at least 32"),
        (lambda: byom.example(size=1025), "at most 1024 (ResNet-18 was made for 224"),
        (lambda: byom.example(size=96.0), "got float"),
        (lambda: byom.example(size=96, directory=np.array(["x"])), "directory= is a ndarray"),
        (lambda: byom.example(size=96, directory=5), "directory= is a int (5), not a path"),
    ],
    ids=["million", "over-the-most", "float", "array", "int"],
)
def test_example_refuses_a_size_past_its_bound_and_a_directory_that_is_no_path(call, says):
    """Round 10: size=10**6 tried to allocate 12 TB in torch, directory=<an array> was pathlib's TypeError."""
    refused(call, says)


def test_feedback_refuses_a_keyword_it_does_not_take_and_counts_numpy_integers():
    """Round 10: feedback(1, junk=3) was Feedback.__init__'s TypeError."""
    refused(lambda: exercises.feedback(1, junk=3), "feedback takes no keyword 'junk'", "pass only:")
    refused(lambda: exercises.feedback(1, hint="mine"), "feedback takes no keyword 'hint'")
    assert exercises.feedback(np.int64(2), right=["x"]).exercise.startswith("Exercise 2, ")
