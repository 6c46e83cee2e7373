"""What `devices.place` and `execute.compile` are handed the wrong way round (careless-user round 11): two devices
swapped, a placement claimed but not made, a module placed for a GPU built for the CPU, a local function the
placement cannot see into. Each was built or placed without a word; each is one line now."""

import pytest
import tvm
from tvm.script import ir as I
from tvm.script import relax as R

from byoc_workbench.core import devices
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.measure.compiler import execute

GPU = {"kind": "cuda", "arch": "sm_90"}


@I.ir_module
class TailBefore:
    """The box filter, which has no GPU kernel, between two ops that have."""

    @R.function
    def main(boxes: R.Tensor((1, 64, 6), "float32")):
        scaled = R.multiply(boxes, R.const(1.5, "float32"))
        counted = R.vision.get_valid_counts(scaled, score_threshold=0.2, id_index=0, score_index=1)
        shifted = R.add(counted[1], scaled)
        return shifted


def test_place_refuses_its_two_devices_swapped():
    """Swapped, the box filter was typed on the GPU, the copy named b_to_cpu went to the GPU, and every check passed."""
    with pytest.raises(WorkbenchError) as err:
        devices.place(TailBefore, devices.propose(TailBefore), "llvm", GPU)
    assert str(err.value).startswith("error: place takes the GPU's target, then the CPU's: got 'llvm', then {'kind'")


def test_compile_refuses_a_placement_it_was_not_given_or_cannot_build():
    """placed=True on an unplaced module built the box filter for the GPU; a module placed for CUDA built for llvm
    failed in TVM's C++ at its first call; placed="no" was read as True."""
    placed = devices.place(TailBefore, devices.propose(TailBefore), GPU)
    cases = [
        (lambda: execute.compile(TailBefore, GPU, placed=True), "placed=True, but the module names no devices"),
        (lambda: execute.compile(TailBefore, GPU, placed="no"), "placed is True or False"),
        (lambda: execute.compile(placed, "llvm"), "The module is placed on cuda sm_90, llvm (I.vdevice); the build"),
    ]
    for call, line in cases:
        with pytest.raises(WorkbenchError) as err:
            call()
        assert str(err.value).startswith(f"error: {line}"), str(err.value)


@I.ir_module
class LocalHelper:
    """A CPU-only op inside a function main defines and calls: propose said nothing runs on the CPU."""

    @R.function
    def main(boxes: R.Tensor((1, 64, 6), "float32")):
        @R.function
        def inner(b: R.Tensor((1, 64, 6), "float32")):
            counted = R.vision.get_valid_counts(b, score_threshold=0.2, id_index=0, score_index=1)
            return counted[1]

        out = inner(boxes)
        return out


def test_a_local_function_is_one_line_with_how_to_lift_it():
    for call in (lambda: devices.propose(LocalHelper), lambda: execute.compile(LocalHelper, "llvm")):
        with pytest.raises(WorkbenchError) as err:
            call()
        assert str(err.value) == (
            "error: The module calls a local function (main/out), which TVM 0.27 cannot build. "
            "Fix: lift it into a global function first: mod = relax.transform.LambdaLift()(mod)."
        )
    lifted = tvm.relax.transform.LambdaLift()(LocalHelper)
    assert devices.propose(lifted).cpu_only  # lifted, its box filter is seen
