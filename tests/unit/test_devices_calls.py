"""Kernels a module calls itself in a GPU build (issue 47): ``R.call_tir`` (in place and with a gradient too), and the
packed and builtin calls run where their kernel is built, the GPU, so what they read from the CPU is copied over; and a
module that reads a tensor on another device than its own is refused in one line before TVM builds it without a word.
CUDA placements are IR only; the refusals come before any compiler runs (no GPU, no nvcc needed)."""

import pytest
import tvm
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

from byoc_workbench.core import devices, targets
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.measure.compiler import execute

GPU = {"kind": "cuda", "arch": "sm_90"}
CUDA = targets.resolve(GPU)  # the placed module's first device, as place makes it


@I.ir_module
class KernelsBefore:
    @T.prim_func(private=True)
    def double(x: T.Buffer((1, 8, 6), "float32"), y: T.Buffer((1, 8, 6), "float32")):
        T.func_attr({"s_tir": True})
        for i, j, k in T.grid(1, 8, 6):
            with T.sblock("y"):
                vi, vj, vk = T.axis.remap("SSS", [i, j, k])
                y[vi, vj, vk] = x[vi, vj, vk] * T.float32(2)

    @R.function
    def main(b: R.Tensor((1, 8, 6), "float32")):
        cls = KernelsBefore
        counted = R.vision.get_valid_counts(b, score_threshold=0.2, id_index=0, score_index=1)
        valid = counted[1]
        doubled = R.call_tir(cls.double, (valid,), out_ty=R.Tensor((1, 8, 6), "float32"))
        packed = R.call_dps_packed("my_ext", (valid,), out_ty=R.Tensor((1, 8, 6), "float32"))
        pure = R.call_pure_packed("vm.builtin.reshape", valid, R.shape([8, 6]), ty_args=R.Tensor((8, 6), "float32"))
        return (doubled, packed, pure)


@I.ir_module
class KernelsPlaced:
    """The box filter and its item on the CPU; the item copied to the GPU once, where the three calls read it."""

    I.module_global_infos({"vdevice": [I.vdevice(CUDA, 0, "global"), I.vdevice("llvm", 0, "global")]})

    @T.prim_func(private=True)
    def double(x: T.Buffer((1, 8, 6), "float32"), y: T.Buffer((1, 8, 6), "float32")):
        T.func_attr({"s_tir": True})
        for i, j, k in T.grid(1, 8, 6):
            with T.sblock("y"):
                vi, vj, vk = T.axis.remap("SSS", [i, j, k])
                y[vi, vj, vk] = x[vi, vj, vk] * T.float32(2)

    @R.function
    def main(b: R.Tensor((1, 8, 6), "float32")):
        cls = KernelsPlaced
        b_to_cpu = R.to_vdevice(b, "llvm:0")
        counted = R.vision.get_valid_counts(b_to_cpu, score_threshold=0.2, id_index=0, score_index=1)
        valid = counted[1]
        valid_to_gpu = R.to_vdevice(valid, "cuda:0")
        doubled = R.call_tir(cls.double, (valid_to_gpu,), out_ty=R.Tensor((1, 8, 6), "float32"))
        packed = R.call_dps_packed("my_ext", (valid_to_gpu,), out_ty=R.Tensor((1, 8, 6), "float32"))
        pure = R.call_pure_packed(
            "vm.builtin.reshape", valid_to_gpu, R.shape([8, 6]), ty_args=R.Tensor((8, 6), "float32")
        )
        return (doubled, packed, pure)


def test_a_kernel_call_reading_the_cpu_runs_on_the_gpu_with_a_copy():
    placement = devices.propose(KernelsBefore)
    assert placement.on_cpu == {"main": ("counted", "valid")}
    assert [(c.var, c.to) for c in placement.crossings] == [("b", "cpu"), ("valid", "gpu")]
    placed = devices.place(KernelsBefore, placement, GPU)
    tvm.ir.assert_structural_equal(placed, KernelsPlaced)
    assert devices.crossings(placed) == []


@I.ir_module
class SiblingsBefore:
    """Every other op that names a kernel or a packed function first, each reading what the CPU made."""

    @T.prim_func(private=True)
    def double_in_place(x: T.Buffer((1, 8, 6), "float32")):
        for i, j, k in T.grid(1, 8, 6):
            x[i, j, k] = x[i, j, k] * T.float32(2)

    @T.prim_func(private=True)
    def double(x: T.Buffer((1, 8, 6), "float32"), y: T.Buffer((1, 8, 6), "float32")):
        for i, j, k in T.grid(1, 8, 6):
            y[i, j, k] = x[i, j, k] * T.float32(2)

    @R.function(pure=False)
    def main(b: R.Tensor((1, 8, 6), "float32")):
        cls = SiblingsBefore
        counted = R.vision.get_valid_counts(b, score_threshold=0.2, id_index=0, score_index=1)
        valid = counted[1]
        tir = R.call_tir_inplace(
            cls.double_in_place, (valid,), inplace_indices=[0], out_ty=R.Tensor((1, 8, 6), "float32")
        )
        grad = R.call_tir_with_grad(cls.double, (valid,), out_ty=R.Tensor((1, 8, 6), "float32"), te_grad_name="g")
        packed = R.call_inplace_packed("my_ext", valid, inplace_indices=[0], ty_args=R.Tensor((1, 8, 6), "float32"))
        ctx = R.call_builtin_with_ctx(
            "vm.builtin.reshape", (valid, R.shape([8, 6])), ty_args=R.Tensor((8, 6), "float32")
        )
        return (tir, grad, packed, ctx)


@I.ir_module
class SiblingsPlaced:
    I.module_global_infos({"vdevice": [I.vdevice(CUDA, 0, "global"), I.vdevice("llvm", 0, "global")]})

    @T.prim_func(private=True)
    def double_in_place(x: T.Buffer((1, 8, 6), "float32")):
        for i, j, k in T.grid(1, 8, 6):
            x[i, j, k] = x[i, j, k] * T.float32(2)

    @T.prim_func(private=True)
    def double(x: T.Buffer((1, 8, 6), "float32"), y: T.Buffer((1, 8, 6), "float32")):
        for i, j, k in T.grid(1, 8, 6):
            y[i, j, k] = x[i, j, k] * T.float32(2)

    @R.function(pure=False)
    def main(b: R.Tensor((1, 8, 6), "float32")):
        cls = SiblingsPlaced
        b_to_cpu = R.to_vdevice(b, "llvm:0")
        counted = R.vision.get_valid_counts(b_to_cpu, score_threshold=0.2, id_index=0, score_index=1)
        valid = counted[1]
        v = R.to_vdevice(valid, "cuda:0")
        tir = R.call_tir_inplace(cls.double_in_place, (v,), inplace_indices=[0], out_ty=R.Tensor((1, 8, 6), "float32"))
        grad = R.call_tir_with_grad(cls.double, (v,), out_ty=R.Tensor((1, 8, 6), "float32"), te_grad_name="g")
        packed = R.call_inplace_packed("my_ext", v, inplace_indices=[0], ty_args=R.Tensor((1, 8, 6), "float32"))
        ctx = R.call_builtin_with_ctx("vm.builtin.reshape", (v, R.shape([8, 6])), ty_args=R.Tensor((8, 6), "float32"))
        return (tir, grad, packed, ctx)


def test_every_op_that_calls_a_kernel_or_a_packed_function_runs_on_the_gpu_with_a_copy():
    """They ran on the CPU with a GPU type (their kernel is built for the GPU), and a GPU build of the module, passed
    unplaced, was refused with "pass the module unplaced"."""
    placement = devices.propose(SiblingsBefore)
    assert placement.on_cpu == {"main": ("counted", "valid")}
    assert [(c.var, c.to) for c in placement.crossings] == [("b", "cpu"), ("valid", "gpu")]
    placed = devices.place(SiblingsBefore, placement, GPU)
    tvm.ir.assert_structural_equal(placed, SiblingsPlaced)
    assert devices.crossings(placed) == []


@I.ir_module
class ReadsAcross:
    """What place once made of a kernel call reading the CPU: its result typed for the GPU, its input on the CPU."""

    I.module_global_infos({"vdevice": [I.vdevice(CUDA, 0, "global"), I.vdevice("llvm", 0, "global")]})

    @T.prim_func(private=True)
    def double(x: T.Buffer((1, 8, 6), "float32"), y: T.Buffer((1, 8, 6), "float32")):
        T.func_attr({"s_tir": True})
        for i, j, k in T.grid(1, 8, 6):
            with T.sblock("y"):
                vi, vj, vk = T.axis.remap("SSS", [i, j, k])
                y[vi, vj, vk] = x[vi, vj, vk] * T.float32(2)

    @R.function
    def main(b: R.Tensor((1, 8, 6), "float32")):
        cls = ReadsAcross
        b_to_cpu = R.to_vdevice(b, "llvm:0")
        doubled = R.call_tir(cls.double, (b_to_cpu,), out_ty=R.Tensor((1, 8, 6), "float32"))
        return doubled


@pytest.mark.parametrize("build", [execute.compile, execute.lower])
def test_a_module_reading_a_tensor_on_another_device_is_not_built(build):
    with pytest.raises(WorkbenchError) as err:
        build(ReadsAcross, GPU, placed=True)
    line = str(err.value)
    assert line.startswith(
        "error: The module reads a tensor on another device than its own "
        "(main/doubled: relax.call_tir reads b_to_cpu (llvm) on cuda). Fix: copy it there (R.to_vdevice)"
    )
    assert "\n" not in line


@I.ir_module
class OnnxNms:
    @R.function
    def main(boxes: R.Tensor((1, 16, 4), "float32"), scores: R.Tensor((1, 3, 16), "float32")):
        sel = R.vision.all_class_non_max_suppression(
            boxes, scores, R.const(5, "int64"), R.const(0.5, "float32"), R.const(0.25, "float32"), output_format="onnx"
        )
        picked = sel[0]
        return picked


NO_GPU_BUILD = "error: TVM 0.27 cannot build NonMaxSuppression (as ONNX files hold it) for CUDA"


def test_a_profiled_gpu_build_of_onnx_nms_is_refused_before_it_is_legalized():
    """timing.build legalizes before it builds, which leaves no NMS to find: it looks first (on this machine
    it used to stop on having no GPU; on a GPU one, in TVM's InternalError)."""
    from byoc_workbench import stages
    from byoc_workbench.measure.time import timing

    for build in (lambda: timing.build(stages.run_stages(OnnxNms, ()), GPU), lambda: execute.compile(OnnxNms, GPU)):
        with pytest.raises(WorkbenchError) as err:
            build()
        assert str(err.value).startswith(NO_GPU_BUILD) and "Fix: build this model for llvm" in str(err.value)


def test_the_report_of_a_model_tvm_cannot_build_for_a_gpu_says_so_in_one_line():
    from byoc_workbench.flow import rules
    from byoc_workbench.session import Workbench

    text = Workbench(OnnxNms, rules.get_target("tensorrt")).report().text()
    gpu = [line for line in text.splitlines() if "GPU" in line]
    assert gpu == [
        "no GPU build: TVM 0.27 cannot build NonMaxSuppression (as ONNX files hold it) for CUDA, not even on the CPU"
    ]
