"""A kernel of the user's own with no thread binding, careless-user round 17: written as a loop nest (no ``T.sblock``),
dlight's GPU schedules leave it as it is, and TVM compiled it as host code in a "CUDA build" (it was missing from the
CUDA source) that would hand it GPU buffers, a segfault or garbage on a GPU. Refused in one line once scheduled; what
the refusal's Fix says builds it as a CUDA kernel. No GPU: nvcc compiles without one."""

import re

import pytest
from graphs import needs_cuda_compiler
from shared import Tail
from test_devices_round17 import GPU, AddOne, CpuKernelPlaced
from test_placement_round12 import refused
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

from byoc_workbench.measure.compiler import cuda, execute
from byoc_workbench.models.demo import demo_module

BUILDS = [execute.compile, execute.lower]
ON_THE_HOST = (
    "error: kernel add_one accesses its buffers outside any GPU thread binding after scheduling, so the cuda sm_90 "
    "build would run it as host code on GPU buffers. Fix: write its body in a T.sblock (T.prim_func(s_tir=True), its "
    'axes by T.axis.remap) and no "tirx.is_scheduled" attr, and the build\'s GPU schedules bind it to threads; or '
    'bind its loops yourself (T.thread_binding(n, thread="threadIdx.x")); or build for llvm.'
)


@I.ir_module
class HalfBound:
    """A kernel bound to threads but for its last statement, which the split leaves on the host."""

    @T.prim_func(private=True)
    def add_one(x: T.Buffer((8,), "float32"), y: T.Buffer((8,), "float32")):
        for i in T.thread_binding(8, thread="threadIdx.x"):
            y[i] = x[i] + T.float32(1)
        y[0] = T.float32(0)

    @R.function
    def main(x: R.Tensor((8,), "float32")):
        cls = HalfBound
        y = R.call_tir(cls.add_one, (x,), out_ty=R.Tensor((8,), "float32"))
        return y


@I.ir_module
class MarkedScheduled:
    """A kernel in a block that says it is scheduled: dlight leaves it, unbound."""

    @T.prim_func(private=True, s_tir=True)
    def add_one(x: T.Buffer((8,), "float32"), y: T.Buffer((8,), "float32")):
        T.func_attr({"tirx.is_scheduled": True})
        for i in range(8):
            with T.sblock("add_one"):
                v = T.axis.remap("S", [i])
                y[v] = x[v] + T.float32(1)

    @R.function
    def main(x: R.Tensor((8,), "float32")):
        cls = MarkedScheduled
        y = R.call_tir(cls.add_one, (x,), out_ty=R.Tensor((8,), "float32"))
        return y


@I.ir_module
class InBlock:
    """The Fix's first way: AddOne's loop in a T.sblock, which dlight binds to threads."""

    @T.prim_func(private=True, s_tir=True)
    def add_one(x: T.Buffer((8,), "float32"), y: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.sblock("add_one"):
                v = T.axis.remap("S", [i])
                y[v] = x[v] + T.float32(1)

    @R.function
    def main(x: R.Tensor((8,), "float32")):
        cls = InBlock
        y = R.call_tir(cls.add_one, (x,), out_ty=R.Tensor((8,), "float32"))
        z = R.add(y, y)
        return z


@I.ir_module
class BoundByHand:
    """The Fix's second way: AddOne's loop bound to threads by hand."""

    @T.prim_func(private=True)
    def add_one(x: T.Buffer((8,), "float32"), y: T.Buffer((8,), "float32")):
        for i in T.thread_binding(8, thread="threadIdx.x"):
            y[i] = x[i] + T.float32(1)

    @R.function
    def main(x: R.Tensor((8,), "float32")):
        cls = BoundByHand
        y = R.call_tir(cls.add_one, (x,), out_ty=R.Tensor((8,), "float32"))
        z = R.add(y, y)
        return z


@I.ir_module
class Total:
    """The Fix for a reduction: its axis "R" in the block, which dlight reduces across threads."""

    @T.prim_func(private=True, s_tir=True)
    def total(x: T.Buffer((8,), "float32"), y: T.Buffer((1,), "float32")):
        for i in range(8):
            with T.sblock("total"):
                v = T.axis.remap("R", [i])
                with T.init():
                    y[0] = T.float32(0)
                y[0] = y[0] + x[v]

    @R.function
    def main(x: R.Tensor((8,), "float32")):
        cls = Total
        y = R.call_tir(cls.total, (x,), out_ty=R.Tensor((1,), "float32"))
        return y


def _kernels(executable) -> list:
    """The names of the CUDA kernels a GPU build holds."""
    return re.findall(r'extern "C" __global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(', cuda.source(executable))


@pytest.mark.parametrize("build", BUILDS)
@pytest.mark.parametrize("mod", [AddOne, HalfBound, MarkedScheduled], ids=["loops", "half_bound", "marked"])
def test_a_kernel_left_unbound_by_scheduling_is_refused_in_one_line(build, mod):
    """A CUDA build of AddOne held only R.add's kernel; add_one was compiled for the CPU and handed GPU buffers."""
    needs_cuda_compiler()
    assert refused(lambda: build(mod, GPU)) == ON_THE_HOST


@pytest.mark.parametrize(
    "mod, kernel",
    [(InBlock, "add_one"), (BoundByHand, "add_one"), (Total, "total")],
    ids=["sblock", "thread_binding", "reduction"],
)
def test_what_the_fix_says_builds_the_kernel_for_cuda(mod, kernel):
    """Each way the Fix names makes the user's kernel a CUDA kernel of the build."""
    needs_cuda_compiler()
    assert f"{kernel}_kernel" in _kernels(execute.compile(mod, GPU))


@pytest.mark.parametrize("mod", [demo_module(), Tail], ids=["demo", "tail"])
def test_the_workbenchs_own_models_still_build_for_cuda(mod):
    """Every kernel of the demo and of the SSD's tail (some on the CPU beside the GPU) is bound or the CPU's."""
    needs_cuda_compiler()
    assert _kernels(execute.compile(mod, GPU))


def test_a_kernel_placed_on_the_cpu_by_hand_is_no_host_code_on_gpu_buffers():
    """A kernel bound to llvm, its call on the CPU: the CPU's kernel, which needs no thread binding."""
    needs_cuda_compiler()
    assert execute.misplaced_buffers(execute.lower(CpuKernelPlaced, GPU, placed=True)) == []
