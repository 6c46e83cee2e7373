"""Backends chosen by name through the codegen stage, and through upstream RunCodegen."""

import numpy as np
import pytest
from tvm import relax
from tvm.relax.dpl import is_op, wildcard

from byoc_workbench import stages
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.flow import rules
from byoc_workbench.measure.compiler import execute
from byoc_workbench.models import demo

pytest.importorskip("onnxruntime", reason="the ONNX backends need onnx and onnxruntime")
from byoc_workbench.backends import registry, tensorrt  # noqa: E402

TRT_MISSING = tensorrt.missing()
needs_trt = pytest.mark.skipif(TRT_MISSING is not None, reason=f"TensorRT cannot run here: {TRT_MISSING}")


def codegen_stage(mod, rule_set, backend, **kw):
    return stages.run_stages(mod, rule_set, backend=backend, **kw)[-1]


def test_demo_through_onnxruntime_equals_tvm_alone(demo_mod, byoc, reference_output):
    final = codegen_stage(demo_mod, byoc.rules, "onnxruntime")
    assert sorted(final.generated) == ["byoc_target_1", "byoc_target_2"]
    assert {g.backend for g in final.generated.values()} == {"onnxruntime"}
    assert final.notes == [f"{n}: compiled by onnxruntime" for n in final.generated]
    assert "Conv" in final.generated["byoc_target_1"].source, "the artifact shown is the ONNX graph"
    out = execute.run(final.mod, demo.demo_inputs())
    np.testing.assert_allclose(out, reference_output, rtol=1e-5, atol=1e-5)


def test_without_a_backend_the_demo_keeps_the_teaching_codegen(demo_mod, byoc):
    final = codegen_stage(demo_mod, byoc.rules, None)
    assert {g.backend for g in final.generated.values()} == {"teaching"}
    assert "def byoc_target_1" in final.generated["byoc_target_1"].source


def test_auto_falls_through_to_onnxruntime_and_says_so(demo_mod, byoc, reference_output):
    if TRT_MISSING is None:
        pytest.skip("TensorRT runs here, so auto picks it")
    final = codegen_stage(demo_mod, byoc.rules, "auto")
    for g in final.generated.values():
        assert g.backend == "onnxruntime"
        assert [b for b, _ in g.tried] == ["tensorrt"]
    assert all("compiled by onnxruntime (tensorrt refused: tensorrt is not importable" in n for n in final.notes)
    np.testing.assert_allclose(execute.run(final.mod, demo.demo_inputs()), reference_output, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(TRT_MISSING is None, reason="TensorRT and a GPU are present")
def test_tensorrt_without_tensorrt_or_gpu_is_one_line(demo_mod, byoc):
    with pytest.raises(WorkbenchError) as err:
        codegen_stage(demo_mod, byoc.rules, "tensorrt")
    line = str(err.value)
    assert "\n" not in line and line.startswith("error: ") and "Fix: " in line
    assert ("tensorrt is not importable" in line and "pip install .[tensorrt]" in line) or "GPU" in line


def cumsum_module():
    x = relax.Var("x", relax.TensorType((2, 8), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            c = bb.emit(relax.op.cumsum(x, axis=1))
            r = bb.emit_output(relax.op.nn.relu(c))
        bb.emit_func_output(r)
    return bb.get()


def test_a_rule_offloading_an_op_without_converter_is_one_line():
    mine = (rules.op_rule("mychip", "cumsum", "relax.cumsum"), rules.op_rule("mychip", "relu", "relax.nn.relu"))
    with pytest.raises(WorkbenchError) as err:
        codegen_stage(cumsum_module(), mine, "onnxruntime", prune_rule=stages.keep_all)
    line = str(err.value)
    assert "\n" not in line and "mychip_0: the ONNX translator cannot convert relax.cumsum (no converter)" in line
    assert "switch off the rule" in line


def test_auto_leaves_what_no_backend_takes_to_tvm():
    mod = cumsum_module()
    mine = (rules.op_rule("mychip", "cumsum", "relax.cumsum"),)
    final = codegen_stage(mod, mine, "auto", prune_rule=stages.keep_all)
    assert not final.generated and not final.subgraphs
    (note,) = final.notes
    assert note.startswith("mychip_0: not compiled, tensorrt refused") and "TVM runs it on the host" in note
    assert "onnxruntime refused: mychip_0: the ONNX translator cannot convert relax.cumsum" in note
    x = np.random.RandomState(0).uniform(-1, 1, (2, 8)).astype("float32")
    np.testing.assert_allclose(execute.run(final.mod, [x]), execute.run(mod, [x]), rtol=1e-6)


def test_backend_tvm_offloads_nothing_and_unknown_backends_are_one_line(demo_mod, byoc, reference_output):
    final = codegen_stage(demo_mod, byoc.rules, "tvm")
    assert not final.generated and all("TVM runs it on the host" in n for n in final.notes)
    np.testing.assert_allclose(execute.run(final.mod, demo.demo_inputs()), reference_output, rtol=1e-6)
    with pytest.raises(WorkbenchError, match="Unknown backend 'tensorflow'.*choose one of: auto, tvm"):
        codegen_stage(demo_mod, byoc.rules, "tensorflow")


def conv_module():
    rng = np.random.RandomState(0)
    w = relax.const(rng.uniform(-0.3, 0.3, (8, 3, 3, 3)).astype("float32"))
    x = relax.Var("x", relax.TensorType((1, 3, 16, 16), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            c = bb.emit(relax.op.nn.conv2d(x, w, padding=1))
            r = bb.emit(relax.op.nn.relu(c))
            p = bb.emit(relax.op.nn.max_pool2d(r, pool_size=2, strides=2))
            out = bb.emit_output(relax.op.add(p, relax.op.sum(p, axis=[1], keepdims=True)))
        bb.emit_func_output(out)
    return bb.get()


def test_upstream_run_codegen_drives_relax_ext_onnxruntime():
    mod = conv_module()
    patterns = [
        (f"onnxruntime.{name}", is_op(op)(*[wildcard()] * n))
        for name, op, n in [
            ("conv2d", "relax.nn.conv2d", 2),
            ("relu", "relax.nn.relu", 1),
            ("pool", "relax.nn.max_pool2d", 1),
        ]
    ]
    part = relax.transform.FuseOpsByPattern(patterns, bind_constants=True, annotate_codegen=True)(mod)
    part = relax.transform.MergeCompositeFunctions()(part)
    assert [gv.name_hint for gv, f in part.functions.items() if "Codegen" in (f.attrs or {})]
    assert registry.register_ext("onnxruntime") == "relax.ext.onnxruntime"
    built = relax.transform.RunCodegen()(part)
    assert "R.call_dps_packed" in built.script(show_meta=False)
    x = np.random.RandomState(1).uniform(-1, 1, (1, 3, 16, 16)).astype("float32")
    np.testing.assert_allclose(execute.run(built, [x]), execute.run(mod, [x]), rtol=1e-5, atol=1e-5)


@needs_trt
def test_tensorrt_runs_the_demo_and_caches_its_engines(demo_mod, byoc, reference_output, tmp_path, monkeypatch):
    monkeypatch.setenv("BYOC_WORKBENCH_CACHE", str(tmp_path))
    final = codegen_stage(demo_mod, byoc.rules, "tensorrt")
    assert {g.backend for g in final.generated.values()} == {"tensorrt"}
    assert len(list((tmp_path / "engines").glob("*.engine"))) == 2
    np.testing.assert_allclose(execute.run(final.mod, demo.demo_inputs()), reference_output, rtol=1e-3, atol=1e-3)
    again = codegen_stage(demo_mod, byoc.rules, "tensorrt")
    assert all("from the cache" in g.source for g in again.generated.values())


@needs_trt
def test_tensorrt_fp16_is_in_the_graph(demo_mod, byoc, reference_output, tmp_path, monkeypatch):
    monkeypatch.setenv("BYOC_WORKBENCH_CACHE", str(tmp_path))
    final = codegen_stage(demo_mod, byoc.rules, "tensorrt", options={"fp16": True})
    assert all(", fp16, " in g.source for g in final.generated.values())
    np.testing.assert_allclose(execute.run(final.mod, demo.demo_inputs()), reference_output, rtol=5e-2, atol=5e-2)


def test_the_registry_names_every_choice():
    assert registry.choices()[:7] == ("auto", "tvm", "teaching", "c", "onnxruntime", "openvino", "tensorrt")
    assert registry.backends_for(None, "byoc_target") == ("teaching",)
    assert registry.backends_for(None, "tensorrt") == ()
    assert registry.backends_for("auto", "tensorrt") == ("tensorrt", "onnxruntime", "openvino", "teaching")


@pytest.fixture(scope="module")
def ssd256():
    from byoc_workbench.core import transforms
    from byoc_workbench.models import zoo

    imported = zoo.import_model(weights="untrained", input_shape=(1, 3, 256, 256))
    x = np.random.RandomState(0).uniform(-2, 2, (1, 3, 256, 256)).astype("float32")
    return imported.mod, transforms.prepare(imported.mod), x, execute.run(imported.mod, [x])


def test_ssd_offloaded_to_onnxruntime_finds_what_tvm_alone_finds(ssd256):
    from byoc_workbench.measure.check import compare as matching

    _, prepared, x, alone = ssd256
    final = codegen_stage(prepared, rules.get_target("tensorrt").rules, "onnxruntime")
    assert [(n, g.backend) for n, g in final.generated.items()] == [("tensorrt_0", "onnxruntime")]
    assert "Conv 73," in final.generated["tensorrt_0"].source, "all 73 conv2d run in ONNX Runtime"
    offloaded = execute.run(final.mod, [x])
    assert (np.asarray(alone[0]) >= 0).sum() > 10, "the seeded model detects something to compare"
    assert matching.unmatched(alone, offloaded) == []
    shifted = [np.asarray(a).copy() for a in offloaded]
    shifted[2][0, 0, 0] += 0.1
    assert matching.unmatched(alone, shifted) != [], "the comparison sees a box moved by 0.1 px"


def test_ssd_offloaded_whole_to_torch_finds_what_tvm_alone_finds(ssd256):
    """The torch target takes the whole SSD, its box filter and NMS included, as one subgraph."""
    pytest.importorskip("torchvision", reason="the torch backend needs the [pytorch] extra")
    from byoc_workbench.measure.check import compare as matching

    _, prepared, x, alone = ssd256
    final = codegen_stage(prepared, registry.DEFAULT.targets.get("torch").rules, "torch", prune_rule=stages.keep_all)
    [(name, compiled)] = final.generated.items()
    assert compiled.backend == "torch" and "vision.non_max_suppression(" in compiled.source
    offloaded = execute.run(final.mod, [x])
    assert (np.asarray(alone[0]) >= 0).sum() > 10, "the seeded model detects something to compare"
    assert matching.unmatched(alone, offloaded) == []


def test_torch_compile_runs_the_demo_and_says_so(demo_mod, byoc, reference_output):
    """compile=True: each subgraph under torch.compile (its first call compiles, with the C compiler on a CPU)."""
    pytest.importorskip("torchvision", reason="the torch backend needs the [pytorch] extra")
    from byoc_workbench.measure.time import runner
    from byoc_workbench.models import demo

    found = stages.run_stages(demo_mod, byoc.rules, backend="torch", options={"compile": True})
    assert all(c.detail == "torch.compile, f32" for c in found[-1].generated.values())
    run = runner.build_and_run(found[-1], demo.demo_inputs(), repeat=2, progress=False)
    assert run.backend.startswith("torch (torch.compile, f32)")
    np.testing.assert_allclose(np.asarray(run.outputs), np.asarray(reference_output), rtol=1e-4, atol=1e-4)
