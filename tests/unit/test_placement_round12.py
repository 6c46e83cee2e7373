"""A placed module is checked, not trusted (careless-user round 12): a placement proposed for a module whose helper
changed, a CPU-only op typed on the GPU by hand, a CPU twin or another arch's placement handed to a GPU build were
each built without a word; the CPU twin run through `execute` failed in TVM's C++; `misplaced_buffers` called a
module not lowered sound. A placement is IR only: no GPU or CUDA compiler needed."""

import numpy as np
import pytest
import tvm
from shared import Tail, tail_inputs
from tvm.script import ir as I
from tvm.script import relax as R

from byoc_workbench.core import devices, targets
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.measure.compiler import execute

GPU = {"kind": "cuda", "arch": "sm_90"}
CUDA = targets.resolve(GPU)
KW = {"score_threshold": 0.2, "id_index": 0, "score_index": 1}


def refused(call) -> str:
    with pytest.raises(WorkbenchError) as err:
        call()
    assert "\n" not in str(err.value)
    return str(err.value)


@I.ir_module
class HelperBefore:
    """The box filter in main, and a helper with nothing to place: the proposal has no plan for the helper."""

    @R.function
    def helper(x: R.Tensor((1, 8, 6), "float32")) -> R.Tensor((1, 8, 6), "float32"):
        relu = R.nn.relu(x)
        return relu

    @R.function
    def main(boxes: R.Tensor((1, 8, 6), "float32")):
        cls = HelperBefore
        counted = R.vision.get_valid_counts(boxes, **KW)
        valid = counted[1]
        helped = cls.helper(boxes)
        out = R.add(helped, valid)
        return out


@I.ir_module
class HelperChanged:
    """HelperBefore, its helper now calling the box filter too."""

    @R.function
    def helper(x: R.Tensor((1, 8, 6), "float32")) -> R.Tensor((1, 8, 6), "float32"):
        counted = R.vision.get_valid_counts(x, **KW)
        valid = counted[1]
        return valid

    @R.function
    def main(boxes: R.Tensor((1, 8, 6), "float32")):
        cls = HelperChanged
        counted = R.vision.get_valid_counts(boxes, **KW)
        valid = counted[1]
        helped = cls.helper(boxes)
        out = R.add(helped, valid)
        return out


@I.ir_module
class HelperChangedExpected:
    """HelperChanged placed by its own proposal: both box filters on the CPU, the helper's result copied back."""

    I.module_global_infos({"vdevice": [I.vdevice(CUDA, 0, "global"), I.vdevice("llvm", 0, "global")]})

    @R.function
    def helper(x: R.Tensor((1, 8, 6), "float32")) -> R.Tensor((1, 8, 6), "float32", "cuda:0"):
        x_to_cpu = R.to_vdevice(x, "llvm:0")
        counted = R.vision.get_valid_counts(x_to_cpu, **KW)
        valid = counted[1]
        valid_to_gpu = R.to_vdevice(valid, "cuda:0")
        return valid_to_gpu

    @R.function
    def main(boxes: R.Tensor((1, 8, 6), "float32")):
        cls = HelperChangedExpected
        boxes_to_cpu = R.to_vdevice(boxes, "llvm:0")
        counted = R.vision.get_valid_counts(boxes_to_cpu, **KW)
        valid = counted[1]
        valid_to_gpu = R.to_vdevice(valid, "cuda:0")
        helped: R.Tensor((1, 8, 6), "float32") = cls.helper(boxes)
        out: R.Tensor((1, 8, 6), "float32") = R.add(helped, valid_to_gpu)
        return out


@I.ir_module
class Nothing:
    """A module with nothing to place: its proposal is empty, and place returned any module it was handed as it was."""

    @R.function
    def main(x: R.Tensor((1, 8, 6), "float32")):
        return x


def test_a_placement_is_refused_for_a_module_whose_helper_without_a_plan_changed():
    """Only functions with a plan were compared: the changed helper's box filter stayed on the GPU, every check
    passed, and the CUDA build made it device code. A function added, or an empty proposal of another module, too."""
    stale = devices.propose(HelperBefore)
    added = tvm.IRModule({**{gv.name_hint: f for gv, f in HelperBefore.functions.items()}, "extra": Tail["main"]})
    for mod, placement in [(HelperChanged, stale), (added, stale), (HelperChanged, devices.propose(Nothing))]:
        line = refused(lambda mod=mod, placement=placement: devices.place(mod, placement, GPU))
        assert line == "error: The placement was proposed for another module. Fix: pass what devices.propose(mod) gave."
    placed = devices.place(HelperChanged, devices.propose(HelperChanged), GPU)
    tvm.ir.assert_structural_equal(placed, HelperChangedExpected)


@I.ir_module
class HandPlaced:
    """Placed by hand: the box filter typed on the GPU, which nothing read as wrong (no tensor crosses)."""

    I.module_global_infos({"vdevice": [I.vdevice(CUDA, 0, "global"), I.vdevice("llvm", 0, "global")]})

    @R.function
    def main(boxes: R.Tensor((1, 8, 6), "float32", "cuda:0")):
        counted = R.vision.get_valid_counts(boxes, **KW)
        out = R.add(counted[1], boxes)
        return out


def test_a_placed_build_refuses_a_cpu_only_op_left_on_the_gpu():
    """placed=True built HandPlaced's box filter as device code (get_valid_counts_cuda); devices.crossings was []."""
    assert devices.crossings(HandPlaced) == []
    for call in (
        lambda: devices.check_cpu_only_on_cpu(HandPlaced),
        lambda: execute.compile(HandPlaced, GPU, placed=True),
        lambda: execute.lower(HandPlaced, GPU, placed=True),
    ):
        assert refused(call) == (
            "error: The placed module runs vision.get_valid_counts in main (main/counted) on cuda, for which TVM 0.27 "
            "has no GPU kernel. Fix: pass the module as it was before placing, to be placed (devices.propose, then "
            "devices.place)."
        )


def test_a_placed_module_is_built_only_for_the_gpu_it_was_placed_for():
    """The CPU twin built for CUDA made its GPU ops llvm kernels; a module placed for sm_80 built for sm_90 made
    add for sm_80 and relu for sm_90, under the label cuda sm_90."""
    placement = devices.propose(Tail)
    twin = devices.place(Tail, placement, "llvm", "llvm")
    sm80 = devices.place(Tail, placement, {"kind": "cuda", "arch": "sm_80"})
    assert refused(lambda: execute.compile(twin, GPU, placed=True)) == (
        "error: The module is placed for llvm, the build is for cuda sm_90: TVM would build its GPU ops for the CPU "
        "(a CPU twin). Fix: build it for llvm, or place the module as it was before placing for cuda sm_90."
    )
    assert refused(lambda: execute.lower(sm80, GPU, placed=True)) == (
        "error: The module is placed for cuda sm_80, the build is for cuda sm_90: TVM would build kernels for two "
        "GPUs. Fix: build it for cuda sm_80, or place the module as it was before placing for cuda sm_90."
    )


def test_the_cpu_twin_runs_through_execute():
    """execute.run and execute.build gave the twin's VM one device for its two: InternalError "The device index is
    out of VM physical devices list" at its first call."""
    twin = devices.place(Tail, devices.propose(Tail), "llvm", "llvm")
    inputs = tail_inputs()
    want = execute.run(Tail, inputs)
    assert want[0][0, 0, 1] > 0.2  # NMS kept something: the comparison sees real detections
    for got in (execute.run(twin, inputs), execute.run(twin, inputs, vm=execute.build(twin, "llvm", placed=True))):
        for a, b in zip(want, got, strict=True):
            np.testing.assert_array_equal(a, b)


def test_misplaced_buffers_refuses_a_module_not_lowered():
    """It answered [] ("sound") for a module that allocates nothing yet."""
    placed = devices.place(Tail, devices.propose(Tail), GPU)
    for mod in (Tail, placed):
        assert refused(lambda mod=mod: execute.misplaced_buffers(mod)) == (
            "error: misplaced_buffers takes a lowered module; main/scaled still calls relax.multiply. "
            "Fix: pass what execute.lower(mod, tvm_target) gives (placed=True for a placed module)."
        )
    assert execute.misplaced_buffers(execute.lower(Tail, "llvm")) == []


def test_the_new_checks_given_no_module_or_an_unplaced_one_say_so():
    """Round 13 (N3): None, a str or an unplaced module were a KeyError or an AttributeError inside them."""
    assert "devices.placed takes a tvm.IRModule, got NoneType" in refused(lambda: devices.placed(None))
    assert "takes a tvm.IRModule, got str" in refused(lambda: devices.check_cpu_only_on_cpu("mod"))
    assert "takes a placed module" in refused(lambda: devices.check_cpu_only_on_cpu(HelperBefore))
    assert "virtual_machine takes what execute.compile gives" in refused(lambda: execute.virtual_machine(None))
