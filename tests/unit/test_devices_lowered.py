"""What a GPU build hands each kernel once lowered (issue 47, round 10's B1): TVM 0.27 legalizes ``zeros_like`` and
``ones_like`` of a CPU tensor into a kernel that names no device, built for the GPU, and folds it into a constant that
the VM loads on the GPU; a CPU kernel read it. The build copies it to the CPU, and a lowered module in which a kernel
still takes buffers of two devices is refused in one line. Lowered as compile lowers them (no GPU; the CUDA pipeline
needs a CUDA compiler found), and run on the CPU twin (both devices the CPU)."""

import numpy as np
import pytest
import tvm
from graphs import needs_cuda_compiler
from tvm.relax.backend.cuda import pipeline as upstream
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

from byoc_workbench.core import devices, targets
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.measure.compiler import execute

GPU = {"kind": "cuda", "arch": "sm_90"}
CUDA = targets.resolve(GPU)


@pytest.fixture(autouse=True)
def _compiler():
    needs_cuda_compiler()


@I.ir_module
class Like:
    @R.function
    def main(b: R.Tensor((1, 8, 6), "float32")):
        counted = R.vision.get_valid_counts(b, score_threshold=0.2, id_index=0, score_index=1)
        valid = counted[1]
        zeros = R.zeros_like(valid)
        ones = R.full_like(valid, R.const(1.0))
        out = R.add(R.add(zeros, ones), valid)
        return out


@I.ir_module
class OnesOfIndices:
    @R.function
    def main(b: R.Tensor((1, 8, 6), "float32")):
        counted = R.vision.get_valid_counts(b, score_threshold=0.2, id_index=0, score_index=1)
        order = counted[2]
        out = R.add(order, R.ones_like(order))
        return out


@I.ir_module
class InBranch:
    @R.function
    def main(b: R.Tensor((1, 8, 6), "float32"), flag: R.Tensor((), "bool")):
        counted = R.vision.get_valid_counts(b, score_threshold=0.2, id_index=0, score_index=1)
        valid = counted[1]
        if flag:
            out = R.add(R.zeros_like(valid), valid)
        else:
            out = R.multiply(valid, valid)
        return out


@I.ir_module
class ThroughTupleAndCast:
    @R.function
    def main(b: R.Tensor((1, 8, 6), "float32")):
        counted = R.vision.get_valid_counts(b, score_threshold=0.2, id_index=0, score_index=1)
        pair = (counted[1], counted[2])
        ones = R.ones_like(pair[1])
        zeros = R.astype(R.astype(R.zeros_like(pair[0]), "float16"), "float32")
        return (R.add(ones, counted[2]), R.add(zeros, counted[1]))


def _boxes() -> np.ndarray:
    rng = np.random.RandomState(0)
    boxes = rng.uniform(0, 1, (1, 8, 6)).astype("float32")
    boxes[..., 0] = rng.randint(0, 3, 8)
    return boxes


@pytest.mark.parametrize("mod", [Like, OnesOfIndices, InBranch, ThroughTupleAndCast], ids=lambda m: m.__name__)
def test_what_tvm_folds_out_of_a_cpu_tensor_is_copied_to_the_cpu_kernel_that_reads_it(mod):
    """misplaced_buffers found 'main/add_llvm: reads a constant (on device 0) on device 1', and compile said nothing."""
    lowered = execute.lower(mod, GPU)
    assert execute.misplaced_buffers(lowered) == []
    assert "to_cpu" in lowered["main"].script()
    twin = devices.place(mod, devices.propose(mod), "llvm", "llvm")
    vm = tvm.relax.VirtualMachine(execute.compile(twin, "llvm"), [tvm.cpu(), tvm.cpu()])
    for flag in [None] if len(mod["main"].params) == 1 else [True, False]:
        inputs = [_boxes()] if flag is None else [_boxes(), np.array(flag)]
        got = execute.to_numpy(vm["main"](*[tvm.runtime.tensor(a) for a in inputs]))
        want = execute.run(mod, inputs)
        for g, w in zip(got if isinstance(got, list) else [got], want if isinstance(want, list) else [want]):
            np.testing.assert_array_equal(g, w)


def test_misplaced_buffers_finds_what_upstreams_pipelines_hand_a_cpu_kernel():
    """Upstream's CUDA pipeline folds the GPU's zeros into a constant; its CPU one keeps the kernel, on device 0."""
    with tvm.transform.PassContext(opt_level=3, disabled_pass=["StaticPlanBlockMemory"]):
        on_gpu = upstream.get_default_pipeline(CUDA)(devices.place(Like, devices.propose(Like), GPU))
        twin = tvm.relax.get_pipeline("default")(devices.place(Like, devices.propose(Like), "llvm", "llvm"))
    assert execute.misplaced_buffers(on_gpu) == ["main/add_llvm: reads a constant (on device 0) on device 1"]
    [found] = execute.misplaced_buffers(twin)
    assert found.startswith("main/add_llvm: reads alloc") and found.endswith(" (on device 0) on device 1")


@I.ir_module
class WritesTwoDevices:
    """Placed by hand: one kernel writes a CPU tensor and a GPU one (crossings checks an op of one device)."""

    I.module_global_infos({"vdevice": [I.vdevice(CUDA, 0, "global"), I.vdevice("llvm", 0, "global")]})

    @T.prim_func(private=True)
    def twice(x: T.Buffer((8,), "float32"), y: T.Buffer((8,), "float32"), z: T.Buffer((8,), "float32")):
        for i in range(8):
            y[i] = x[i]
            z[i] = x[i]

    @R.function
    def main(x: R.Tensor((8,), "float32")):
        cls = WritesTwoDevices
        x_to_cpu = R.to_vdevice(x, "llvm:0")
        both = R.call_tir(
            cls.twice, (x_to_cpu,), out_ty=[R.Tensor((8,), "float32", "llvm:0"), R.Tensor((8,), "float32")]
        )
        return both


@pytest.mark.parametrize("build", [execute.compile, execute.lower])
def test_a_build_that_hands_a_kernel_buffers_of_two_devices_is_refused_in_one_line(build):
    assert devices.crossings(WritesTwoDevices) == []
    with pytest.raises(WorkbenchError) as err:
        build(WritesTwoDevices, GPU, placed=True)
    line = str(err.value)
    assert line.startswith("error: The cuda sm_90 build hands a kernel a buffer of another device (main/twice: reads ")
    assert "\n" not in line and "Fix: give each kernel the buffers of one device (R.to_vdevice)" in line
