"""A GPU build's placement and compiler, careless-user round 13: a module legalized before the build hid its CPU-only
ops from the placement (N1), a vdevice of another GPU than the build's was built for that GPU (N7), an op TVM cannot
lower was blamed on the placement (N9), and nvcc that could not write its files was a traceback (N12). No GPU: the
refusals come before anything runs, and nvcc compiles without one."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tvm
from shared import NMS, Tail, tail_inputs
from tvm import relax, topi
from tvm.script import ir as I
from tvm.script import relax as R

from byoc_workbench.core import devices, targets
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.measure.compiler import cuda, execute

GPU = {"kind": "cuda", "arch": "sm_90"}
CUDA = targets.resolve(GPU)
SM80 = targets.resolve({"kind": "cuda", "arch": "sm_80"})


def refused(call) -> str:
    with pytest.raises(WorkbenchError) as err:
        call()
    assert "\n" not in str(err.value)
    return str(err.value)


def _kernel_named(name: str) -> tvm.IRModule:
    """TOPI's kernel of the box filter called by hand, under a name of the user's."""
    bb = relax.BlockBuilder()
    boxes = relax.Var("boxes", relax.TensorType((1, 8, 6), "float32"))
    with bb.function("main", [boxes]):
        counted = bb.emit(
            bb.call_te(topi.vision.get_valid_counts, boxes, 0.2, id_index=0, score_index=1, primfunc_name_hint=name),
            name_hint="counted",
        )
        bb.emit_func_output(counted)
    return bb.get()


def test_a_module_legalized_before_a_gpu_build_is_refused_in_one_line():
    """LegalizeOps left kernel calls only: propose placed NMS and the box filter on the GPU, and the build stopped in
    C++ ("Unresolved call tirx.tvm_call_packed"). The kernel is known by its block, whatever it is called."""
    legal = relax.transform.LegalizeOps()(Tail)
    assert not devices.propose(legal)  # a kernel call runs on the GPU
    line = (
        "error: main/counted calls get_valid_counts, the kernel LegalizeOps made of vision.get_valid_counts, which "
        "TVM 0.27 has no GPU kernel for: a GPU build would make it device code. Fix: pass the module before "
        "LegalizeOps: a GPU build legalizes it, vision.get_valid_counts on the CPU."
    )
    for call in (
        lambda: execute.compile(legal, GPU),
        lambda: execute.compile(legal, GPU, placed=True),
        lambda: execute.lower(legal, GPU, placed=True),
        lambda: devices.place(legal, devices.propose(legal), GPU),
    ):
        assert refused(call) == line
    assert refused(lambda: devices.check_not_legalized(_kernel_named("my_filter"))).startswith(
        "error: main/counted calls my_filter, the kernel LegalizeOps made of vision.get_valid_counts,"
    )
    # Built for the CPU, or as the CPU twin, it is what it was.
    twin = devices.place(legal, devices.propose(legal), "llvm", "llvm")
    for got in (execute.run(legal, tail_inputs()), execute.run(twin, tail_inputs())):
        for a, b in zip(execute.run(Tail, tail_inputs()), got, strict=True):
            np.testing.assert_array_equal(a, b)


@I.ir_module
class Nms:
    @R.function
    def main(b: R.Tensor((1, 8, 6), "float32"), n: R.Tensor((1,), "int32"), order: R.Tensor((1, 8), "int32")):
        kept = R.vision.non_max_suppression(b, n, order, **NMS)
        return kept


@I.ir_module
class AllClass:
    @R.function
    def main(boxes: R.Tensor((1, 8, 4), "float32"), scores: R.Tensor((1, 2, 8), "float32")):
        limit, iou, score = R.const(3, "int64"), R.const(0.5, "float32"), R.const(0.1, "float32")
        kept = R.vision.all_class_non_max_suppression(boxes, scores, limit, iou, score)
        return kept


@pytest.mark.parametrize("mod, op", [(Nms, "non_max_suppression"), (AllClass, "all_class_non_max_suppression")])
def test_each_cpu_only_op_is_known_by_its_legalized_kernel(mod, op):
    line = refused(lambda: devices.check_not_legalized(relax.transform.LegalizeOps()(mod)))
    assert f"the kernel LegalizeOps made of vision.{op}," in line


def test_a_placed_builds_kernels_for_the_cpu_are_not_taken_for_a_legalized_module():
    """What a profiled build legalizes after placing (the CPU-only kernels name the CPU's target) still builds."""
    placed = devices.place(Tail, devices.propose(Tail), GPU)
    with CUDA:
        legal = relax.transform.LegalizeOps()(placed)
    devices.check_not_legalized(legal)


@I.ir_module
class ThirdDevice:
    """Placed by hand for sm_90, with a third vdevice, sm_80, that relu runs on."""

    I.module_global_infos(
        {"vdevice": [I.vdevice(CUDA, 0, "global"), I.vdevice("llvm", 0, "global"), I.vdevice(SM80, 0, "global")]}
    )

    @R.function
    def main(x: R.Tensor((8,), "float32", "cuda:0")):
        there = R.to_vdevice(x, "cuda:1")
        relu = R.nn.relu(there)
        out = R.to_vdevice(relu, "cuda:0")
        return out


@I.ir_module
class OneDevice:
    """Placed by hand for sm_80 only: one vdevice, nothing on the CPU."""

    I.module_global_infos({"vdevice": [I.vdevice(SM80, 0, "global")]})

    @R.function
    def main(x: R.Tensor((8,), "float32", "cuda:0")):
        relu = R.nn.relu(x)
        return relu


def test_every_vdevice_of_a_placed_module_is_one_the_build_has():
    """Only the first vdevice was compared with the build's target: ThirdDevice's relu was built for sm_80 in a build
    for sm_90, and OneDevice (one vdevice, so not "placed") was not compared at all."""
    assert refused(lambda: execute.compile(ThirdDevice, GPU, placed=True)) == (
        "error: The module's vdevice 2 is cuda sm_80, and the build is for cuda sm_90 and llvm: TVM would build the "
        "ops placed there for it. Fix: name only cuda sm_90 and llvm in its vdevices (I.vdevice), or pass it "
        "unplaced to be placed."
    )
    assert refused(lambda: execute.lower(OneDevice, GPU, placed=True)) == (
        "error: The module is placed for cuda sm_80, the build is for cuda sm_90: TVM would build kernels for two "
        "GPUs. Fix: build it for cuda sm_80, or place the module as it was before placing for cuda sm_90."
    )


@I.ir_module
class Fma:
    @R.function
    def main(a: R.Tensor((4,), "float32"), b: R.Tensor((4,), "float32")):
        out = R.ewise_fma(a, b, a)
        return out


def test_an_op_tvm_cannot_lower_is_not_blamed_on_the_placement():
    """Every build said "misplaced_buffers takes a lowered module" of it, as if the placement had failed."""
    assert refused(lambda: execute.compile(Fma, "llvm")) == (
        "error: TVM 0.27 cannot build ewise_fma (main/out): the llvm build has no kernel or VM instruction for it. "
        "Fix: write it with other ops, or offload it to a backend that runs it."
    )


# Each case in a process of its own: Python's tempfile keeps the folder it found first.
_COMPILE = """
import resource, sys
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.core import targets
from byoc_workbench.measure.compiler import cuda
limit = int(sys.argv[1])
if limit >= 0:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
try:  # what a build for a GPU compiles, where TVM's CUDA runtime does not load
    cuda.check_arch(targets.resolve({"kind": "cuda", "arch": "sm_90"}), cuda.find())
except WorkbenchError as err:
    print(err)
"""


def test_nvcc_with_a_tmpdir_that_is_missing_compiles_in_the_folder_python_found():
    """Was "could not open output file '/nonexistent/...'": nvcc read $TMPDIR itself. Since round 17 its own
    environment names the workbench's folder for its files, made where Python's tempfile found room (/tmp)."""
    try:
        cuda.find()
    except WorkbenchError as err:
        pytest.skip(str(err))  # no CUDA compiler here
    env = {**os.environ, "TMPDIR": "/nonexistent/tmp"}
    done = subprocess.run([sys.executable, "-c", _COMPILE, "-1"], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0 and done.stdout == "", (done.stdout, done.stderr)


@pytest.mark.parametrize(
    "tmpdir, limit, line",
    [
        (None, 2048, "the compiler could not write its output in "),  # nvcc killed by SIGXFSZ, without a word
        (None, 0, "No usable temporary directory found in "),  # TVM's folder for nvcc's files
    ],
    ids=["ulimit -f 4", "ulimit -f 0"],
)
def test_nvcc_that_cannot_write_its_files_is_one_line(tmpdir, limit, line):
    """Each was a RuntimeError with TVM's traceback (under ulimit -f 0, one more when Python exited)."""
    try:
        compiler = cuda.find()
    except WorkbenchError as err:
        pytest.skip(str(err))  # no CUDA compiler here
    if compiler.name != "nvcc":
        pytest.skip("NVRTC writes no files")
    env = {**os.environ, "TMPDIR": tmpdir} if tmpdir else None
    done = subprocess.run(
        [sys.executable, "-c", _COMPILE, str(limit)], capture_output=True, text=True, env=env, timeout=300
    )
    said = done.stdout.strip()
    assert said.startswith(f"error: {compiler} could not compile the kernels: ") and line in said, done.stderr
    assert "\n" not in said and "Traceback" not in done.stderr
    fix = "set TMPDIR to a folder you can write to" if tmpdir else "raise the limit on a file's size"
    assert f"Fix: {fix}" in said
