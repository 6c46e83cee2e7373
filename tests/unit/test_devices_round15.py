"""A GPU build's placement, careless-user round 15: a CPU-only op bound by R.match_cast was not placed, and a CUDA
build compiled it as host code handed GPU buffers (C1); with NMS in the match_cast, the build's own placement was
refused with a Fix telling the user to place it (C2); a module lowered once and built again stopped in TVM's C++
(C3). No GPU: placements are IR, and nvcc compiles without one."""

import numpy as np
import pytest
import tvm
from graphs import needs_cuda_compiler
from shared import NMS, Tail, tail_inputs
from test_placement_round12 import refused
from tvm.script import ir as I
from tvm.script import relax as R

from byoc_workbench.core import devices, targets
from byoc_workbench.measure.compiler import cuda, execute

GPU = {"kind": "cuda", "arch": "sm_90"}
CUDA = targets.resolve(GPU)
KW = {"score_threshold": 0.2, "id_index": 0, "score_index": 1}


@I.ir_module
class FilterCast:
    """The box filter bound by a match_cast, as an importer may write it."""

    @R.function
    def main(boxes: R.Tensor((1, 64, 6), "float32")):
        counted = R.match_cast(
            R.vision.get_valid_counts(boxes, **KW),
            R.Tuple(R.Tensor((1,), "int32"), R.Tensor((1, 64, 6), "float32"), R.Tensor((1, 64), "int32")),
        )
        valid = counted[1]
        out = R.add(valid, boxes)
        return out


@I.ir_module
class FilterCastExpected:
    """FilterCast placed as the unwrapped box filter is: the match_cast on the CPU, its type there too."""

    I.module_global_infos({"vdevice": [I.vdevice(CUDA, 0, "global"), I.vdevice("llvm", 0, "global")]})

    @R.function
    def main(boxes: R.Tensor((1, 64, 6), "float32")):
        boxes_to_cpu = R.to_vdevice(boxes, "llvm:0")
        counted = R.match_cast(
            R.vision.get_valid_counts(boxes_to_cpu, **KW),
            R.Tuple(
                R.Tensor((1,), "int32", "llvm:0"), R.Tensor((1, 64, 6), "float32", "llvm:0"),
                R.Tensor((1, 64), "int32", "llvm:0"),
            ),
        )  # fmt: skip
        valid = counted[1]
        valid_to_gpu = R.to_vdevice(valid, "cuda:0")
        out: R.Tensor((1, 64, 6), "float32") = R.add(valid_to_gpu, boxes)
        return out


@I.ir_module
class NmsCast:
    """NMS bound by a match_cast, after the box filter."""

    @R.function
    def main(boxes: R.Tensor((1, 64, 6), "float32")):
        counted = R.vision.get_valid_counts(boxes, **KW)
        count = counted[0]
        valid = counted[1]
        order = counted[2]
        kept = R.match_cast(R.vision.non_max_suppression(valid, count, order, **NMS), R.Tensor((1, 64, 6), "float32"))
        out = R.add(kept, boxes)
        return out


@I.ir_module
class NmsCastExpected:
    I.module_global_infos({"vdevice": [I.vdevice(CUDA, 0, "global"), I.vdevice("llvm", 0, "global")]})

    @R.function
    def main(boxes: R.Tensor((1, 64, 6), "float32")):
        boxes_to_cpu = R.to_vdevice(boxes, "llvm:0")
        counted = R.vision.get_valid_counts(boxes_to_cpu, **KW)
        count = counted[0]
        valid = counted[1]
        order = counted[2]
        kept = R.match_cast(
            R.vision.non_max_suppression(valid, count, order, **NMS), R.Tensor((1, 64, 6), "float32", "llvm:0")
        )
        kept_to_gpu = R.to_vdevice(kept, "cuda:0")
        out: R.Tensor((1, 64, 6), "float32") = R.add(kept_to_gpu, boxes)
        return out


def test_a_cpu_only_op_bound_by_match_cast_is_placed_as_the_op_is():
    """C1: propose skipped every binding but a VarBinding: FilterCast's placement was empty, and NmsCast's left NMS on
    the GPU, which place then refused as the user's mistake (C2)."""
    assert devices.propose(FilterCast).on_cpu == {"main": ("counted", "valid")}
    for before, expected in [(FilterCast, FilterCastExpected), (NmsCast, NmsCastExpected)]:
        placed = devices.place(before, devices.propose(before), GPU)
        tvm.ir.assert_structural_equal(placed, expected)
        assert devices.crossings(placed) == []
        twin = devices.place(before, devices.propose(before), "llvm", "llvm")  # both devices the CPU: it runs here
        boxes = tail_inputs()[0]
        np.testing.assert_array_equal(execute.run(twin, [boxes]), execute.run(before, [boxes]))


def test_a_gpu_build_runs_a_cpu_only_op_bound_by_match_cast_on_the_cpu():
    """C1: the box filter's kernel named no target (host code handed GPU buffers); C2: NmsCast was refused."""
    needs_cuda_compiler()
    for mod, kernel in [(FilterCast, "get_valid_counts"), (NmsCast, "non_max_suppression")]:
        lowered = execute.lower(mod, GPU)
        assert execute.misplaced_buffers(lowered) == []
        [target] = [f.attrs.get("target") for gv, f in lowered.functions.items() if gv.name_hint.startswith(kernel)]
        assert target is not None and target.kind.name == "llvm"
        executable = execute.compile(mod, GPU)
        assert "add" in cuda.source(executable) and kernel not in cuda.source(executable)


def test_placed_true_of_an_unplaced_match_cast_module_says_the_build_places_it():
    """placed=True built FilterCast as it was: no placement saw its box filter."""
    assert refused(lambda: execute.compile(FilterCast, GPU, placed=True)) == (
        "error: placed=True, but the module names no devices, and vision.get_valid_counts runs only on the CPU. "
        "Fix: pass placed=False (the default): the build places it."
    )


@I.ir_module
class NmsCastByHand:
    """NmsCastExpected with its match_cast typed on the GPU by hand."""

    I.module_global_infos({"vdevice": [I.vdevice(CUDA, 0, "global"), I.vdevice("llvm", 0, "global")]})

    @R.function
    def main(boxes: R.Tensor((1, 64, 6), "float32")):
        boxes_to_cpu = R.to_vdevice(boxes, "llvm:0")
        counted = R.vision.get_valid_counts(boxes_to_cpu, **KW)
        count = R.to_vdevice(counted[0], "cuda:0")
        valid = R.to_vdevice(counted[1], "cuda:0")
        order = R.to_vdevice(counted[2], "cuda:0")
        kept = R.match_cast(R.vision.non_max_suppression(valid, count, order, **NMS), R.Tensor((1, 64, 6), "float32"))
        out = R.add(kept, boxes)
        return out


def test_place_before_placing_is_said_only_of_a_module_placed_by_hand(monkeypatch):
    """C2: the workbench's own placement, leaving NMS on the GPU, was refused with a Fix to place it, which the user
    had not done. A placement's own slip is a bug and keeps its traceback; a hand-placed module is the user's."""
    assert refused(lambda: execute.compile(NmsCastByHand, GPU, placed=True)) == (
        "error: The placed module runs vision.non_max_suppression in main (main/kept) on cuda, for which TVM 0.27 has "
        "no GPU kernel. Fix: pass the module as it was before placing, to be placed (devices.propose, then "
        "devices.place)."
    )
    real = devices._on_cpu  # a placement that forgets NMS
    monkeypatch.setattr(
        devices, "_on_cpu", lambda step, cpu: step.op != "relax.vision.non_max_suppression" and real(step, cpu)
    )
    slipped = devices.propose(NmsCast)
    with pytest.raises(
        RuntimeError,
        match=r"devices.place left an op on the GPU: .* vision.non_max_suppression in main \(main/kept\) on cuda",
    ):
        devices.place(NmsCast, slipped, GPU)


FIX = (
    "Fix: pass the module as it was before lowering (execute.lower, or a Relax pipeline of TVM's): the build lowers it."
)


def test_a_lowered_module_built_again_is_refused_in_one_line():
    """C3: lowered for llvm, then built for CUDA, it stopped in C++ ("Unresolved call tirx.tvm_call_packed")."""
    line = (
        "error: The module is lowered already: main/storage calls vm.alloc_storage, which lowering writes, and a "
        "build lowers what it is given. Fix: pass the module as it was before lowering (execute.lower, or a Relax "
        "pipeline of TVM's): the build lowers it."
    )
    lowered = execute.lower(Tail, "llvm")
    for call in (
        lambda: execute.compile(lowered, "llvm"),
        lambda: execute.lower(lowered, "llvm"),
        lambda: execute.compile(lowered, GPU),
        lambda: execute.compile(lowered, GPU, placed=True),
    ):
        assert refused(call) == line
    assert execute.run(Tail, tail_inputs())[0][0, 0, 1] > 0.2  # the Fix: the module before lowering runs


def test_a_module_lowered_for_cuda_built_again_is_refused_in_one_line():
    """The reverse: lowered for CUDA, built for llvm or again for CUDA; the Fix builds."""
    needs_cuda_compiler()
    lowered = execute.lower(Tail, GPU)
    for tvm_target in ("llvm", GPU):
        for placed in (False, True):
            line = refused(lambda t=tvm_target, p=placed: execute.compile(lowered, t, placed=p))
            assert line.startswith("error: The module is lowered already: main/")
            assert line.endswith(FIX)
    execute.compile(Tail, GPU)
