"""A kernel bound to a target by hand, careless-user round 17: bound to llvm (BindTarget, or a "target" attr on the
PrimFunc) and built for CUDA, TVM compiled it for the CPU and handed it GPU buffers without a word, in a "CUDA build"
that may hold no CUDA kernel at all (C1, C2); bound to CUDA and built for llvm, it was a ValueError when it ran (the
mirror). Both are refused in one line where the build starts; a kernel runs where its call's result lives, so one
placed on its own device builds. No GPU: the refusals come before any compiler, and nvcc compiles without one."""

import numpy as np
import pytest
import tvm
from graphs import needs_cuda_compiler
from shared import Tail
from test_placement_round12 import refused
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

from byoc_workbench.core import devices, targets
from byoc_workbench.measure.compiler import execute

GPU = {"kind": "cuda", "arch": "sm_90"}
CUDA = targets.resolve(GPU)
BUILDS = [execute.compile, execute.lower]


@I.ir_module
class AddOne:
    """A kernel of the user's own, and an op after it (a CUDA kernel once built for a GPU)."""

    @T.prim_func(private=True)
    def add_one(x: T.Buffer((8,), "float32"), y: T.Buffer((8,), "float32")):
        for i in range(8):
            y[i] = x[i] + T.float32(1)

    @R.function
    def main(x: R.Tensor((8,), "float32")):
        cls = AddOne
        y = R.call_tir(cls.add_one, (x,), out_ty=R.Tensor((8,), "float32"))
        z = R.add(y, y)
        return z


@I.ir_module
class OnlyCpuKernel:
    """A kernel with a "target" attr written on it, and nothing else: a CUDA build of it holds no CUDA kernel."""

    @T.prim_func(private=True)
    def add_one(x: T.Buffer((8,), "float32"), y: T.Buffer((8,), "float32")):
        T.func_attr({"target": T.target("llvm")})
        for i in range(8):
            y[i] = x[i] + T.float32(1)

    @R.function
    def main(x: R.Tensor((8,), "float32")):
        cls = OnlyCpuKernel
        y = R.call_tir(cls.add_one, (x,), out_ty=R.Tensor((8,), "float32"))
        return y


def _bound(mod, tvm_target):
    return tvm.tirx.transform.BindTarget(targets.resolve(tvm_target))(mod)


ON_GPU = (
    "error: kernel add_one is bound to llvm, but the build targets cuda sm_90 and runs it on cuda (main/y): TVM "
    'would hand it buffers of another device. Fix: remove its target (the PrimFunc\'s "target" attr, which '
    "BindTarget writes) and the build compiles it for cuda; or build for llvm, or place its call on the CPU by hand "
    "(its result on an llvm I.vdevice, R.to_vdevice for its inputs, placed=True)."
)


@pytest.mark.parametrize("build", BUILDS)
def test_a_kernel_bound_to_llvm_in_a_cuda_build_is_refused_in_one_line(build):
    """C1: BindTarget(llvm), then a CUDA build: add_one was built for the CPU and read the GPU's x."""
    assert refused(lambda: build(_bound(AddOne, "llvm"), GPU)) == ON_GPU


@pytest.mark.parametrize("build", BUILDS)
def test_a_cuda_build_of_only_a_kernel_with_an_llvm_target_attr_is_refused_in_one_line(build):
    """C2: a "target" attr on the PrimFunc; the CUDA build held no CUDA kernel and called itself one."""
    assert refused(lambda: build(OnlyCpuKernel, GPU)) == ON_GPU


@pytest.mark.parametrize("call", [execute.compile, execute.lower, execute.build])
def test_a_kernel_bound_to_cuda_in_an_llvm_build_is_refused_in_one_line(call):
    """The mirror: it built, and its first run was TVM's ValueError ("Mismatched x.device_type ... expected cuda")."""
    assert refused(lambda: call(_bound(AddOne, GPU), "llvm")) == (
        "error: kernel add_one is bound to cuda sm_90, but the build targets llvm and runs it on the CPU (main/y): "
        'TVM would hand it buffers of another device. Fix: remove its target (the PrimFunc\'s "target" attr, which '
        "BindTarget writes) and the build compiles it for the CPU; or build for cuda sm_90."
    )
    inputs = [np.arange(8, dtype="float32")]
    assert refused(lambda: execute.run(_bound(AddOne, GPU), inputs)).startswith("error: kernel add_one is bound to")
    np.testing.assert_array_equal(execute.run(AddOne, inputs), 2 * (inputs[0] + 1))  # the Fix: no target, it runs


@I.ir_module
class CpuKernelPlaced:
    """The Fix of C1: add_one's call on the CPU by hand, its input copied there and its result back."""

    I.module_global_infos({"vdevice": [I.vdevice(CUDA, 0, "global"), I.vdevice("llvm", 0, "global")]})

    @T.prim_func(private=True)
    def add_one(x: T.Buffer((8,), "float32"), y: T.Buffer((8,), "float32")):
        T.func_attr({"target": T.target("llvm")})
        for i in range(8):
            y[i] = x[i] + T.float32(1)

    @R.function
    def main(x: R.Tensor((8,), "float32")):
        cls = CpuKernelPlaced
        x_to_cpu = R.to_vdevice(x, "llvm:0")
        y = R.call_tir(cls.add_one, (x_to_cpu,), out_ty=R.Tensor((8,), "float32", "llvm:0"))
        y_to_gpu = R.to_vdevice(y, "cuda:0")
        z = R.add(y_to_gpu, y_to_gpu)
        return z


def test_a_kernel_bound_to_llvm_and_placed_on_the_cpu_builds_for_cuda():
    """The refusal's last Fix builds: the CPU kernel is handed the CPU's buffers."""
    needs_cuda_compiler()
    lowered = execute.lower(CpuKernelPlaced, GPU, placed=True)
    assert execute.misplaced_buffers(lowered) == []
    assert lowered["add_one"].attrs["target"].kind.name == "llvm"


def test_a_kernel_bound_to_cuda_and_placed_on_the_cpu_is_refused_in_one_line():
    """The mirror in a GPU build placed by hand: a CUDA kernel's call on the CPU's vdevice."""
    functions = {
        gv: f.with_attr("target", CUDA) if gv.name_hint == "add_one" else f
        for gv, f in CpuKernelPlaced.functions.items()
    }
    gpu_kernel = tvm.IRModule(functions, global_infos=CpuKernelPlaced.global_infos)
    assert refused(lambda: execute.compile(gpu_kernel, GPU, placed=True)) == (
        "error: kernel add_one is bound to cuda sm_90, but the build targets cuda sm_90 and runs it on the CPU "
        '(main/y): TVM would hand it buffers of another device. Fix: remove its target (the PrimFunc\'s "target" '
        "attr, which BindTarget writes) and the build compiles it for the CPU; or run its call on the GPU (its "
        "result on the GPU's I.vdevice)."
    )


def test_the_kernels_a_profiled_build_legalizes_on_each_device_still_build():
    """What timing builds: a placed module legalized, its CPU kernels bound to llvm, called on the CPU's vdevice."""
    needs_cuda_compiler()
    placed = devices.place(Tail, devices.propose(Tail), GPU)
    with CUDA:
        legal = relax.transform.LegalizeOps()(relax.backend.DispatchSortScan()(placed))
    bound = [gv.name_hint for gv, f in legal.functions.items() if "target" in (f.attrs or {})]
    assert "non_max_suppression_llvm" in bound and "add_cuda" in bound
    assert execute.misplaced_buffers(execute.lower(legal, GPU, placed=True)) == []
