"""The openvino backend on real OpenVINO: the precision it is told, TVM's buffers shared, the boundary timed.

The 52 rules of the TensorRT table go through it in test_onnx_translate.py.
"""

import numpy as np
import pytest

pytest.importorskip("openvino", reason="the openvino backend needs openvino (requirements.txt)")
pytest.importorskip("onnxruntime", reason="the ONNX translator needs onnx")

import openvino as ov  # noqa: E402
import tvm  # noqa: E402

from byoc_workbench import cli  # noqa: E402
from byoc_workbench.backends import openvino as bov  # noqa: E402
from byoc_workbench.core.errors import WorkbenchError  # noqa: E402
from byoc_workbench.draw import latency  # noqa: E402
from byoc_workbench.measure.bench import builds
from byoc_workbench.measure.check import numerics as checks
from byoc_workbench.measure.time import timing
from byoc_workbench.subjects import ModelRef

BF16 = "BF16" in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")


@pytest.fixture(scope="module")
def f32():
    return builds.ready(ModelRef(kind="demo"), "openvino")


def test_f32_is_said_and_equals_tvm(f32):
    built, inputs = f32
    assert {s.backend for s in built.subgraphs.values()} == {"openvino"}
    assert {s.detail for s in built.subgraphs.values()} == {"CPU, f32"}, "the precision is set, never left to the CPU"
    numerics = checks.compare(built, inputs, tolerance=1e-4)
    assert not numerics.over and numerics.rows
    assert "openvino (CPU, f32)" in latency.numerics_text(numerics)


@pytest.mark.skipif(not BF16, reason="this CPU has no bf16: OpenVINO would compute it in f32")
def test_bf16_error_is_reported_per_subgraph(capsys):
    assert cli.main(["compare", "demo", "--backend", "openvino", "--precision", "bf16"]) == 1
    text = capsys.readouterr().out
    rows = [line for line in text.splitlines() if line.startswith("byoc_target_")]
    assert rows and all("openvino (CPU, bf16)" in r and r.endswith("OVER") for r in rows), text


@pytest.mark.skipif(BF16, reason="this CPU has bf16: OpenVINO runs what was asked")
def test_bf16_asked_on_a_cpu_without_it_says_what_ran(capsys):
    """Asked bf16 where the CPU has none, OpenVINO runs f32: every row says so, never a bare f32 or bf16."""
    assert cli.main(["profile", "demo", "--backend", "openvino", "--precision", "bf16"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if "byoc_target_" in line and "subgraph" in line]
    assert rows and all("openvino (CPU, f32, bf16 asked: not on this CPU)" in r for r in rows), rows


def test_tvm_buffers_are_shared_not_copied(f32):
    built, inputs = f32
    compiled = next(iter(built.stages[-1].generated.values()))
    runner = tvm.get_global_func(compiled.symbol)
    assert runner is not None
    x = tvm.runtime.tensor(np.asarray(inputs[0]))
    view = bov.host_view(x)
    assert view.ctypes.data == x.data_ptr() and view.flags.writeable
    view[0, 0, 0, 0] = 42.0
    assert x.numpy()[0, 0, 0, 0] == 42.0


def test_the_boundary_is_on_the_latency_map(f32):
    built, inputs = f32
    profile = timing.profile(built, inputs, runs=2)
    shaded = latency.shade(built, profile)
    assert sum(n.kind == "boundary" for n in shaded.graph.nodes.values()) == 2 * len(built.subgraphs)
    crossings = [e for e in profile.entries if e.kind == "boundary"]
    assert {e.site.backend for e in crossings} == {"openvino"} and all(e.time_s >= 0 for e in crossings)


def test_an_unknown_precision_is_one_line():
    with pytest.raises(WorkbenchError) as err:
        bov.check_precision("int4")
    assert "f32, bf16, f16" in str(err.value) and "\n" not in str(err.value)


def test_whole_model_anchors_run_a_file_on_both(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    from byoc_workbench.measure.bench import anchors

    w = np.random.RandomState(0).uniform(-1, 1, (4, 3, 3, 3)).astype("float32")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4, 8, 8])],
        [onnx.numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    onnx.save(model, tmp_path / "m.onnx")
    x = np.random.RandomState(1).uniform(-1, 1, (1, 3, 8, 8)).astype("float32")
    entries, outputs, skipped = anchors.whole_model_anchors(tmp_path / "m.onnx", [x], repeat=2, progress=False)
    assert skipped == {} and set(entries) == {"onnxruntime_whole_model", "openvino_whole_model"}
    assert entries["openvino_whole_model"]["ran_on"] == "openvino (CPU, f32) on m.onnx"
    np.testing.assert_allclose(outputs["openvino_whole_model"][0], outputs["onnxruntime_whole_model"][0], atol=1e-5)


def test_an_anchor_gets_weights_as_constants_so_batch_norms_fold(tmp_path):
    """MXNet's exporter lists every weight among the graph's inputs; left so, ONNX Runtime keeps each batch
    norm apart from its convolution (an input may change), and the anchor is slower than it need be."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    from byoc_workbench.measure.bench import anchors

    rng = np.random.RandomState(0)
    weights = {"w": rng.uniform(-1, 1, (4, 3, 3, 3))} | {k: rng.uniform(0.5, 1.5, 4) for k in "sbmv"}
    inits = [numpy_helper.from_array(a.astype("float32"), k) for k, a in weights.items()]
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
            helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 8, 8])]
        + [helper.make_tensor_value_info(t.name, TensorProto.FLOAT, list(t.dims)) for t in inits],  # as MXNet does
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4, 8, 8])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "m.onnx")
    x = rng.uniform(-1, 1, (1, 3, 8, 8)).astype("float32")
    folded = anchors._static(tmp_path / "m.onnx", [x], tmp_path / "folded.onnx")
    assert [v.name for v in onnx.load(str(folded)).graph.input] == ["x"]

    def run(path):
        options = ort.SessionOptions()
        options.optimized_model_filepath = str(path) + ".opt.onnx"
        y = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        return y, {n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node}

    (before, ops_before), (after, ops_after) = run(tmp_path / "m.onnx"), run(folded)
    assert "BatchNormalization" in ops_before and "BatchNormalization" not in ops_after
    np.testing.assert_allclose(after, before, rtol=1e-5, atol=1e-5)


def test_openvino_runs_mxnets_own_ssd_export(tmp_path):
    """The export's anchors are sliced to dynamic shapes OpenVINO's CPU plugin cannot compile; folded, it runs."""
    from byoc_workbench.measure.bench import anchors
    from byoc_workbench.models import zoo
    from byoc_workbench.models.images import model_input

    loaded = zoo.load_model("ssd_512_mobilenet1.0_coco", "untrained")
    x, _ = model_input(None, loaded.spec.input_shape)
    path = anchors.export_onnx(loaded, x.shape, tmp_path / "ssd.onnx")
    with pytest.raises(WorkbenchError, match="OpenVINO rejected"):
        bov.whole_model(path)  # as MXNet writes it
    entries, outputs, skipped = anchors.whole_model_anchors(path, [x], repeat=1, progress=False)
    assert skipped == {} and set(entries) == {"onnxruntime_whole_model", "openvino_whole_model"}
    ids = [np.asarray(outputs[k][0]) for k in entries]
    assert ids[0].shape == ids[1].shape == (1, 100, 1)
