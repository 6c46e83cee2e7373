"""The torch backend against TVM alone: every op its target claims, offloaded alone and run, then the seed's
demo and a detector's tail (the box filter, NMS, slices) through the stages. Without torch the backend is one
line naming the extra."""

import numpy as np
import pytest
from tvm import relax

from byoc_workbench import stages
from byoc_workbench.backends import registry
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.measure.compiler import execute
from byoc_workbench.measure.time import runner
from byoc_workbench.models import demo

torch = pytest.importorskip("torch", reason="needs the [pytorch] extra: make test EXTRAS=pytorch")
pytest.importorskip("torchvision", reason="needs the [pytorch] extra: make test EXTRAS=pytorch")
from shared import Tail, tail_inputs  # noqa: E402
from test_onnx_translate import CASES as ONNX_CASES  # noqa: E402
from test_onnx_translate import TRT_RULES, module  # noqa: E402

from byoc_workbench.backends import pytorch, pytorch_ops  # noqa: E402

op = relax.op
# What a static subgraph runs as: recorded as a CUDA graph where torch sees a GPU, eager elsewhere (and said so).
EAGER = "eager, CUDA graph on GPU" if torch.cuda.is_available() else "eager"


# op -> (build the call from the parameters, parameter shapes, input range): the ONNX translator's cases for
# upstream's TensorRT table, where torch takes the op (a negative stride it refuses: test_refusals_*), then
# the ops of the detectors' box arithmetic that table lacks.
CASES = {
    TRT_RULES[name].ops[0]: case
    for name, case in ONNX_CASES.items()
    if TRT_RULES[name].ops[0] in pytorch_ops.SUPPORTED_OPS and name != "strided_slice_2"
}
COMPARE = ([(2, 3, 4, 5), (3, 1, 5)], (-2.0, 2.0))
CASES |= {
    "relax.equal": ((lambda x, y: op.equal(op.floor(x), op.floor(y))), *COMPARE),
    "relax.not_equal": ((lambda x, y: op.not_equal(op.floor(x), op.floor(y))), *COMPARE),
    "relax.greater": (op.greater, *COMPARE),
    "relax.greater_equal": (op.greater_equal, *COMPARE),
    "relax.less": (op.less, *COMPARE),
    "relax.less_equal": (op.less_equal, *COMPARE),
    "relax.where": ((lambda x, y: op.where(op.greater(x, y), x, y)), *COMPARE),
    "relax.astype": ((lambda x: op.astype(op.floor(x), "int32")), [(2, 3, 4, 5)], (-2.0, 2.0)),
    "relax.zeros_like": ((lambda x: op.add(x, op.zeros_like(x))), [(2, 3)], (-1.0, 1.0)),
    "relax.ones_like": ((lambda x: op.add(x, op.ones_like(x))), [(2, 3)], (-1.0, 1.0)),
    "relax.arange": ((lambda x: op.add(x, op.astype(op.arange(0, 5, 1, "int64"), "float32"))), [(2, 5)], (-1, 1)),
}


def flat(x):
    return [np.asarray(a) for a in x] if isinstance(x, list) else [np.asarray(x)]


TORCH = registry.DEFAULT.targets.get("torch")


def offload(mod, **options):
    found = stages.run_stages(mod, TORCH.rules, stages.keep_all, backend="torch", options=options)
    return found[-1], found[-2]


def test_the_cases_cover_every_op_the_target_claims():
    claimed = {o for rule in TORCH.rules for o in rule.ops}
    vision = {"relax.vision.get_valid_counts", "relax.vision.non_max_suppression"}  # test_detector_tail_*
    assert claimed == pytorch_ops.SUPPORTED_OPS and set(CASES) | vision == claimed


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_offloaded_to_torch_equals_tvm(name):
    make, shapes, low_high = CASES[name]
    mod = module(make, shapes)
    codegen, partition = offload(mod)
    assert partition.subgraphs, f"the torch target claimed nothing of {name}"
    assert codegen.generated and all(c.backend == "torch" for c in codegen.generated.values())
    x = [np.random.RandomState(0).uniform(*low_high, s).astype("float32") for s in shapes]
    got = flat(runner.build_and_run(codegen, x, repeat=1, progress=False).outputs)
    want = flat(execute.run(mod, x))
    for w, g in zip(want, got):
        assert w.shape == g.shape and w.dtype == g.dtype
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_detector_tail_box_filter_and_nms_equal_tvm():

    codegen, partition = offload(Tail)
    [subgraph] = partition.subgraphs
    assert {"relax.vision.get_valid_counts", "relax.vision.non_max_suppression"} <= set(subgraph.ops)
    for seed in range(5):
        x = tail_inputs(seed)
        want = flat(execute.run(Tail, x))
        got = flat(runner.build_and_run(codegen, x, repeat=1, progress=False).outputs)
        assert (want[0][0, :, 1] > 0).sum() > 1  # several survivors: the order and the suppression both count
        for w, g in zip(want, got):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_a_cuda_graph_records_only_what_never_waits_for_the_host():
    """NMS counts its boxes on the host, so its subgraph stays eager; a static conv is recorded on a GPU (on
    the CPU it runs eagerly: nothing recorded); graphs=False keeps it eager."""

    codegen, _ = offload(Tail)
    [nms] = codegen.generated.values()
    assert nms.detail == "eager, f32"
    make, shapes, _ = CASES["relax.nn.conv2d"]
    for graphs, detail in ((True, f"{EAGER}, f32"), (False, "eager, f32")):
        codegen, _ = offload(module(make, shapes), graphs=graphs)
        [conv] = codegen.generated.values()
        assert conv.detail == detail


def test_demo_offloaded_to_torch_equals_tvm(demo_mod, byoc, reference_output):
    found = stages.run_stages(demo_mod, byoc.rules, backend="torch")
    run = runner.build_and_run(found[-1], demo.demo_inputs(), 2, progress=False)
    assert run.backend.startswith(f"torch ({EAGER}, f32)")
    np.testing.assert_allclose(flat(run.outputs)[0], flat(reference_output)[0], rtol=1e-4, atol=1e-4)
    assert "nn.conv2d(" in run.artifact()


@pytest.mark.parametrize("precision, tolerance", [("f16", 2e-2), ("bf16", 1e-1)])
def test_reduced_precision_is_said_and_close(precision, tolerance):
    make, shapes, low_high = CASES["relax.nn.conv2d"]
    mod = module(make, shapes)
    codegen, _ = offload(mod, precision=precision)
    [compiled] = codegen.generated.values()
    assert compiled.detail == f"{EAGER}, {precision}"
    x = [np.random.RandomState(0).uniform(*low_high, s).astype("float32") for s in shapes]
    got = flat(runner.build_and_run(codegen, x, repeat=1, progress=False).outputs)[0]
    want = flat(execute.run(mod, x))[0]
    assert got.dtype == np.float32
    assert 0 < np.abs(got - want).max() <= tolerance * np.abs(want).max()


def test_refusals_are_one_line():
    mod = module(lambda x: op.strided_slice(x, axes=[2], begin=[3], end=[0], strides=[-1]), [(2, 3, 5, 6)])
    with pytest.raises(WorkbenchError, match="negative stride"):
        pytorch.compile_subgraph("s", mod["main"])
    with pytest.raises(WorkbenchError, match="Unknown precision 'f8'"):
        pytorch.compile_subgraph("s", mod["main"], precision="f8")


def test_a_subgraph_of_0d_tensors_keeps_them_0d(demo_mod, byoc, reference_output):
    """The demo unpruned: its loop counter's add is a subgraph of 0-d tensors (a 0-d constant among them)."""
    found = stages.run_stages(demo_mod, byoc.rules, stages.keep_all, backend="torch")
    assert any(c.source.count("add(") for c in found[-1].generated.values())
    run = runner.build_and_run(found[-1], demo.demo_inputs(), 1, progress=False)
    np.testing.assert_allclose(flat(run.outputs)[0], flat(reference_output)[0], rtol=1e-4, atol=1e-4)
