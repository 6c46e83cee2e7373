"""A GPU build's devices, careless-user round 14: a module with one vdevice of its own was told it names none, then sent
back (F6); a CUDA build loaded in a VM without a GPU, or for the CPU, was a C++ error (F7); a reshape to R.shape_of's
shape was a bare AssertionError (F12); lower took what compile refuses (F13). No GPU: nothing here runs on one."""

import numpy as np
import pytest
from shared import NMS, tail_inputs
from test_placement_round12 import refused
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.measure.compiler import execute

GPU = {"kind": "cuda", "arch": "sm_90"}


@I.ir_module
class OneDevice:
    """The box filter, with the one vdevice its author wrote: the GPU's."""

    I.module_global_infos({"vdevice": [I.vdevice(GPU, 0)]})

    @R.function
    def main(x: R.Tensor((1, 64, 6), "float32", "cuda")):
        counted = R.vision.get_valid_counts(x, score_threshold=0.2, id_index=0, score_index=1)
        return counted


@I.ir_module
class NoDevice:
    """OneDevice without its vdevice: what its Fix says to pass."""

    @R.function
    def main(x: R.Tensor((1, 64, 6), "float32")):
        counted = R.vision.get_valid_counts(x, score_threshold=0.2, id_index=0, score_index=1)
        return counted


@I.ir_module
class OneDeviceOnTheGpu:
    """One vdevice, the GPU's, and nothing that runs only on the CPU."""

    I.module_global_infos({"vdevice": [I.vdevice(GPU, 0)]})

    @R.function
    def main(x: R.Tensor((8,), "float32", "cuda")):
        relu = R.nn.relu(x)
        return relu


def test_a_module_with_one_vdevice_is_told_what_it_holds_and_a_fix_that_builds():
    """placed=True said "the module names no devices" and sent the user to placed=False, which said "names its devices
    already"; for llvm it said "placed on a GPU and the CPU (devices.place)" of one vdevice nobody placed."""
    assert refused(lambda: execute.compile(OneDevice, GPU, placed=True)) == (
        "error: placed=True, but the module names one device (cuda sm_90), and vision.get_valid_counts runs only on "
        "the CPU: a GPU build needs the GPU's and the CPU's vdevices. Fix: pass the module without vdevices, "
        "placed=False (the default): the build places it."
    )
    assert refused(lambda: execute.compile(OneDevice, GPU)) == (
        "error: The module names its devices already (I.vdevice). Fix: pass it with no vdevice in its types."
    )
    for mod in (OneDevice, OneDeviceOnTheGpu):
        assert refused(lambda mod=mod: execute.compile(mod, "llvm")) == (
            "error: The module is placed on cuda sm_90 (I.vdevice); the build is for llvm. Fix: build it for cuda "
            "sm_90, or pass the module without vdevices (as it was before placing)."
        )
    # The Fix builds: the build places the box filter on the CPU.
    assert execute.misplaced_buffers(execute.lower(NoDevice, GPU)) == []
    # One GPU vdevice and nothing for the CPU builds as it was written, placed=True.
    assert execute.misplaced_buffers(execute.lower(OneDeviceOnTheGpu, GPU, placed=True)) == []


@I.ir_module
class Relu:
    @R.function
    def main(x: R.Tensor((8,), "float32")):
        relu = R.nn.relu(x)
        return relu


def test_a_vm_of_a_cuda_build_is_refused_in_one_line_where_it_cannot_run():
    """On a machine without a GPU: "InternalError: Device API cuda is not enabled"; loaded for llvm: "RuntimeError:
    CUDA runtime is not linked into this build", each with a traceback."""
    executable = execute.compile(Relu, GPU)
    assert refused(lambda: execute.virtual_machine(executable, "llvm")) == (
        "error: The executable holds CUDA kernels (a GPU build), and it is loaded for llvm. Fix: load it for the GPU "
        "target execute.compile built it for, on a machine with an NVIDIA GPU."
    )
    try:
        execute.check_runs_here(GPU)
    except WorkbenchError as err:
        assert refused(lambda: execute.virtual_machine(executable, GPU)) == str(err)
    else:
        pytest.skip("a GPU is here: the VM loads")


@I.ir_module
class ShapeFromNms:
    @R.function
    def main(boxes: R.Tensor((1, 64, 6), "float32")):
        counted = R.vision.get_valid_counts(boxes, score_threshold=0.2, id_index=0, score_index=1)
        kept = R.vision.non_max_suppression(counted[1], counted[0], counted[2], **NMS)
        shape = R.shape_of(kept)
        moved = R.reshape(boxes, shape)
        return (moved, kept)


@I.ir_module
class ShapeWritten:
    """ShapeFromNms with its Fix."""

    @R.function
    def main(boxes: R.Tensor((1, 64, 6), "float32")):
        counted = R.vision.get_valid_counts(boxes, score_threshold=0.2, id_index=0, score_index=1)
        kept = R.vision.non_max_suppression(counted[1], counted[0], counted[2], **NMS)
        moved = R.reshape(boxes, R.shape([1, 64, 6]))
        return (moved, kept)


@I.ir_module
class ShapeOfSizes:
    @R.function
    def main(x: R.Tensor(("n", 3), "float32")):
        size = R.shape_of(x)
        flat = R.reshape(x, size)
        return flat


@I.ir_module
class ShapeOfSizesWritten:
    @R.function
    def main(x: R.Tensor(("n", 3), "float32")):
        n = T.int64()
        flat = R.reshape(x, R.shape([n, 3]))
        return flat


def test_a_reshape_to_a_shape_not_written_out_is_one_line_with_the_shape_written_out(capfd):
    """TVM's lowering of reshape stopped on a bare AssertionError (legalize_ops/manipulate.py), llvm and cuda alike,
    and its BlockBuilder, left with an open block, said so in a second line."""
    line = (
        "error: TVM 0.27 cannot lower main/moved, a reshape to shape (made by shape_of): it lowers a reshape only to "
        "a shape written out. Fix: write it out: R.reshape(boxes, R.shape([1, 64, 6]))."
    )
    for call in (
        lambda: execute.compile(ShapeFromNms, "llvm"),
        lambda: execute.lower(ShapeFromNms, GPU),
        lambda: execute.compile(ShapeFromNms, GPU),
    ):
        assert refused(call) == line
    assert "BlockBuilder" not in capfd.readouterr().err
    assert "R.reshape(x, R.shape([n, 3]))." in refused(lambda: execute.compile(ShapeOfSizes, "llvm"))
    # The Fix builds, and runs as the module meant.
    moved, kept = execute.run(ShapeWritten, tail_inputs()[:1])
    np.testing.assert_array_equal(moved, tail_inputs()[0])
    assert kept.shape == (1, 64, 6)
    assert execute.misplaced_buffers(execute.lower(ShapeWritten, GPU)) == []
    x = np.arange(6, dtype="float32").reshape(2, 3)
    np.testing.assert_array_equal(execute.run(ShapeOfSizesWritten, [x]), x)


@I.ir_module
class ReshapeOfAParameter:
    @R.function
    def main(x: R.Tensor((2, 3), "float32"), given: R.Shape([3, 2])):
        again = R.reshape(x, given)
        return again


def test_only_tvms_assertion_on_a_reshape_is_translated():
    assert refused(lambda: execute.compile(ReshapeOfAParameter, "llvm")) == (
        "error: TVM 0.27 cannot lower main/again, a reshape to given (a parameter): it lowers a reshape only to a "
        "shape written out. Fix: write it out: R.reshape(x, R.shape([3, 2]))."
    )
    with pytest.raises(AssertionError) as raised:  # one raised anywhere else: a bug, which keeps its traceback
        assert ShapeFromNms is None
    assert execute._reshape_not_lowered(ShapeFromNms, raised.value) is None


@I.ir_module
class AllClass:
    @R.function
    def main(boxes: R.Tensor((1, 8, 4), "float32"), scores: R.Tensor((1, 2, 8), "float32")):
        limit, iou, score = R.const(3, "int64"), R.const(0.5, "float32"), R.const(0.1, "float32")
        kept = R.vision.all_class_non_max_suppression(boxes, scores, limit, iou, score)
        return kept


def test_lower_refuses_what_compile_refuses():
    """lower gave a lowered module of ONNX's NMS for CUDA, which compile refuses (devices.NO_GPU_BUILD)."""
    line = refused(lambda: execute.compile(AllClass, GPU))
    assert line.startswith("error: TVM 0.27 cannot build NonMaxSuppression (as ONNX files hold it) for CUDA")
    assert refused(lambda: execute.lower(AllClass, GPU)) == line
    assert execute.misplaced_buffers(execute.lower(AllClass, "llvm")) == []
