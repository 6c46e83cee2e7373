"""A GPU placement sees every binding (issue 47): a value made on the CPU and read on the GPU is copied, whatever
binds it (an If's branch, an alias, a tuple, a helper's return, a loop's recursive call), and `crossings` finds
the copy a placed module lacks. Written as upstream's test_transform_realize_vdevice.py writes its cases: the
module before, the module `place` must give, and `assert_structural_equal` (a CUDA placement is IR only: no GPU
or CUDA compiler needed)."""

import numpy as np
import pytest
import tvm
from shared import NMS
from tvm.script import ir as I
from tvm.script import relax as R

from byoc_workbench.core import devices, targets
from byoc_workbench.core.errors import WorkbenchError

GPU = {"kind": "cuda", "arch": "sm_90"}
CUDA = targets.resolve(GPU)  # the placed module's first device, as place makes it


def verify(before, expected):
    placed = devices.place(before, devices.propose(before), GPU)
    tvm.ir.assert_structural_equal(placed, expected)
    assert devices.crossings(placed) == []


# --- a detector's tail: the box filter and NMS on the CPU, what reads them on the GPU ----------------------------


@I.ir_module
class TailBefore:
    """shared.Tail less its first output: written out with it, TVMScript (0.27) loses ``shifted`` (an output
    typed without the device its value has, after an output copy); test_devices.py checks Tail itself."""

    @R.function
    def main(boxes: R.Tensor((1, 64, 6), "float32"), bias: R.Tensor((1, 10, 6), "float32")):
        with R.dataflow():
            scaled = R.multiply(boxes, R.const(1.5, "float32"))
            counted = R.vision.get_valid_counts(scaled, score_threshold=0.2, id_index=0, score_index=1)
            count = counted[0]
            valid = counted[1]
            order = counted[2]
            kept = R.vision.non_max_suppression(valid, count, order, **NMS)
            top = R.strided_slice(kept, axes=[1], begin=[0], end=[10])
            shifted = R.add(top, bias)
            R.output(shifted)
        return shifted


@I.ir_module
class TailPlaced:
    """The box filter, NMS and the slice that reads only NMS's output on the CPU, the boxes copied over once
    after they are made, the slice copied back once for the GPU's add, which keeps its type (the GPU, the
    module's first device, is where a tensor that names none lives)."""

    I.module_global_infos({"vdevice": [I.vdevice(CUDA, 0, "global"), I.vdevice("llvm", 0, "global")]})

    @R.function
    def main(boxes: R.Tensor((1, 64, 6), "float32"), bias: R.Tensor((1, 10, 6), "float32")):
        with R.dataflow():
            scaled = R.multiply(boxes, R.const(1.5, "float32"))
            scaled_to_cpu = R.to_vdevice(scaled, "llvm:0")
            counted = R.vision.get_valid_counts(scaled_to_cpu, score_threshold=0.2, id_index=0, score_index=1)
            count = counted[0]
            valid = counted[1]
            order = counted[2]
            kept = R.vision.non_max_suppression(valid, count, order, **NMS)
            top = R.strided_slice(kept, axes=[1], begin=[0], end=[10])
            top_to_gpu = R.to_vdevice(top, "cuda:0")
            shifted: R.Tensor((1, 10, 6), "float32") = R.add(top_to_gpu, bias)
            R.output(shifted)
        return shifted


def test_placement_puts_what_has_no_gpu_kernel_on_the_cpu_with_a_copy_each_way():
    verify(TailBefore, TailPlaced)
    placement = devices.propose(TailBefore)
    assert placement.on_cpu == {"main": ("counted", "count", "valid", "order", "kept", "top")}
    assert [(c.var, c.to) for c in placement.crossings] == [("scaled", "cpu"), ("top", "gpu")]


# --- an If whose branch ends with a CPU-only op, read by a GPU op after the If (the bug) --------------


@I.ir_module
class BranchBefore:
    @R.function
    def main(boxes: R.Tensor((1, 8, 6), "float32"), flag: R.Tensor((), "bool")):
        if flag:
            counted = R.vision.get_valid_counts(boxes, score_threshold=0.2, id_index=0, score_index=1)
            valid = counted[1]
            res = valid
        else:
            res = boxes
        out = R.add(res, boxes)
        return out


@I.ir_module
class BranchExpected:
    I.module_global_infos({"vdevice": [I.vdevice(CUDA, 0, "global"), I.vdevice("llvm", 0, "global")]})

    @R.function
    def main(boxes: R.Tensor((1, 8, 6), "float32"), flag: R.Tensor((), "bool")) -> R.Tensor((1, 8, 6), "float32"):
        boxes_to_cpu = R.to_vdevice(boxes, "llvm:0")
        if flag:
            counted = R.vision.get_valid_counts(boxes_to_cpu, score_threshold=0.2, id_index=0, score_index=1)
            valid = counted[1]
            valid_to_gpu = R.to_vdevice(valid, "cuda:0")  # the If's value lives on the GPU: each branch's too
            res: R.Tensor((1, 8, 6), "float32") = valid_to_gpu
        else:
            res: R.Tensor((1, 8, 6), "float32") = boxes
        out = R.add(res, boxes)
        return out


@I.ir_module
class BranchUnsound:
    """BranchExpected less the branch's copy: what place gave before, a CPU tensor handed to a CUDA kernel."""

    I.module_global_infos({"vdevice": [I.vdevice(CUDA, 0, "global"), I.vdevice("llvm", 0, "global")]})

    @R.function
    def main(boxes: R.Tensor((1, 8, 6), "float32"), flag: R.Tensor((), "bool")) -> R.Tensor((1, 8, 6), "float32"):
        boxes_to_cpu = R.to_vdevice(boxes, "llvm:0")
        if flag:
            counted = R.vision.get_valid_counts(boxes_to_cpu, score_threshold=0.2, id_index=0, score_index=1)
            valid = counted[1]
            res: R.Tensor((1, 8, 6), "float32") = valid
        else:
            res: R.Tensor((1, 8, 6), "float32") = boxes
        out = R.add(res, boxes)
        return out


def test_a_branch_made_on_the_cpu_is_copied_to_the_gpu_before_the_if_hands_it_on():
    verify(BranchBefore, BranchExpected)


def test_crossings_finds_a_branch_result_left_on_the_cpu():
    assert devices.crossings(BranchUnsound) == ["main/res: if reads valid (llvm) on cuda"]


# --- an alias and a tuple of a CPU value ----------------------------------------------------------------------


@I.ir_module
class AliasTupleBefore:
    @R.function
    def main(boxes: R.Tensor((1, 8, 6), "float32"), bias: R.Tensor((1, 16, 6), "float32")):
        with R.dataflow():
            counted = R.vision.get_valid_counts(boxes, score_threshold=0.2, id_index=0, score_index=1)
            valid = counted[1]
            alias = valid
            pair = (alias, valid)
            joined = R.concat(pair, axis=1)
            out = R.add(joined, bias)
            shifted = R.add(alias, boxes)
            R.output(out, shifted)
        return (out, shifted)


@I.ir_module
class AliasTupleExpected:
    I.module_global_infos({"vdevice": [I.vdevice(CUDA, 0, "global"), I.vdevice("llvm", 0, "global")]})

    @R.function
    def main(boxes: R.Tensor((1, 8, 6), "float32"), bias: R.Tensor((1, 16, 6), "float32")):
        boxes_to_cpu = R.to_vdevice(boxes, "llvm:0")
        with R.dataflow():
            counted = R.vision.get_valid_counts(boxes_to_cpu, score_threshold=0.2, id_index=0, score_index=1)
            valid = counted[1]
            alias = valid  # an alias lives where what it names does: copied where a GPU op reads it
            alias_to_gpu = R.to_vdevice(alias, "cuda:0")
            pair = (alias, valid)
            joined = R.concat(pair, axis=1)  # it reads a tuple of CPU tensors: it runs on the CPU
            joined_to_gpu = R.to_vdevice(joined, "cuda:0")
            out: R.Tensor((1, 16, 6), "float32") = R.add(joined_to_gpu, bias)  # the GPU's keep their types
            shifted: R.Tensor((1, 8, 6), "float32") = R.add(alias_to_gpu, boxes)
            R.output(out, shifted)
        return (out, shifted)


@I.ir_module
class TupleUnsound:
    """A tuple of CPU tensors read whole by a GPU op: no op of it reads a tensor variable of its own."""

    I.module_global_infos({"vdevice": [I.vdevice(CUDA, 0, "global"), I.vdevice("llvm", 0, "global")]})

    @R.function
    def main(boxes: R.Tensor((1, 8, 6), "float32", "llvm:0")) -> R.Tensor((1, 16, 6), "float32"):
        pair = (boxes, boxes)
        joined: R.Tensor((1, 16, 6), "float32") = R.concat(pair, axis=1)
        return joined


def test_an_alias_and_a_tuple_of_a_cpu_value_are_copied_where_the_gpu_reads_them():
    verify(AliasTupleBefore, AliasTupleExpected)
    assert devices.crossings(TupleUnsound) == ["main/joined: relax.concat reads pair (llvm) on cuda"]


# --- a helper function returning a CPU-only op's result --------------------------------------------------------


@I.ir_module
class HelperBefore:
    @R.function
    def filter_boxes(boxes: R.Tensor((1, 8, 6), "float32")):
        counted = R.vision.get_valid_counts(boxes, score_threshold=0.2, id_index=0, score_index=1)
        return counted

    @R.function
    def main(boxes: R.Tensor((1, 8, 6), "float32")):
        cls = HelperBefore
        counted = cls.filter_boxes(boxes)
        valid = counted[1]
        out = R.add(valid, boxes)
        return out


_COUNTED = R.Tuple(R.Tensor((1,), "int32"), R.Tensor((1, 8, 6), "float32"), R.Tensor((1, 8), "int32"))


@I.ir_module
class HelperExpected:
    I.module_global_infos({"vdevice": [I.vdevice(CUDA, 0, "global"), I.vdevice("llvm", 0, "global")]})

    @R.function
    def filter_boxes(boxes: R.Tensor((1, 8, 6), "float32")):
        boxes_to_cpu = R.to_vdevice(boxes, "llvm:0")
        counted = R.vision.get_valid_counts(boxes_to_cpu, score_threshold=0.2, id_index=0, score_index=1)
        # its caller reads the result on the GPU; to_vdevice takes a tensor, so the tuple goes item by item
        counted_0 = counted[0]
        counted_0_to_gpu = R.to_vdevice(counted_0, "cuda:0")
        counted_1 = counted[1]
        counted_1_to_gpu = R.to_vdevice(counted_1, "cuda:0")
        counted_2 = counted[2]
        counted_2_to_gpu = R.to_vdevice(counted_2, "cuda:0")
        counted_to_gpu = (counted_0_to_gpu, counted_1_to_gpu, counted_2_to_gpu)
        return counted_to_gpu

    @R.function
    def main(boxes: R.Tensor((1, 8, 6), "float32")) -> R.Tensor((1, 8, 6), "float32"):
        cls = HelperExpected
        counted: _COUNTED = cls.filter_boxes(boxes)  # main is left as it was: nothing of it runs on the CPU
        valid = counted[1]
        out = R.add(valid, boxes)
        return out


def test_a_helper_hands_its_caller_what_it_made_on_the_cpu_copied_to_the_gpu():
    verify(HelperBefore, HelperExpected)
    placement = devices.propose(HelperBefore)
    assert [(c.var, c.to) for c in placement.crossings if c.to == "gpu"] == [
        ("counted[0]", "gpu"),
        ("counted[1]", "gpu"),
        ("counted[2]", "gpu"),
    ]


# --- a loop: the seed's while loop, as Relax writes it, a recursive helper with an If ------------------------


@I.ir_module
class LoopBefore:
    @R.function
    def loop(i: R.Tensor((), "int32"), boxes: R.Tensor((1, 8, 6), "float32")) -> R.Tensor((1, 8, 6), "float32"):
        cls = LoopBefore
        cond = R.less(i, R.const(2, "int32"))
        if cond:
            counted = R.vision.get_valid_counts(boxes, score_threshold=0.2, id_index=0, score_index=1)
            valid = counted[1]
            inc = R.add(i, R.const(1, "int32"))
            res = cls.loop(inc, valid)
        else:
            res = boxes
        return res

    @R.function
    def main(boxes: R.Tensor((1, 8, 6), "float32")):
        cls = LoopBefore
        out = cls.loop(R.const(0, "int32"), boxes)
        return out


def _loop(copied: bool):
    """LoopBefore placed; without ``copied``, the recursive call is handed the CPU's boxes as they are."""

    @I.ir_module
    class Loop:
        I.module_global_infos({"vdevice": [I.vdevice(CUDA, 0, "global"), I.vdevice("llvm", 0, "global")]})

        @R.function
        def loop(i: R.Tensor((), "int32"), boxes: R.Tensor((1, 8, 6), "float32")) -> R.Tensor((1, 8, 6), "float32"):
            cls = Loop
            boxes_to_cpu = R.to_vdevice(boxes, "llvm:0")
            cond = R.less(i, R.const(2, "int32"))
            if cond:
                counted = R.vision.get_valid_counts(boxes_to_cpu, score_threshold=0.2, id_index=0, score_index=1)
                valid = counted[1]
                valid_to_gpu = R.to_vdevice(valid, "cuda:0")
                inc = R.add(i, R.const(1, "int32"))
                res = cls.loop(inc, valid_to_gpu if copied else valid)  # the loop's parameters are on the GPU
            else:
                res = boxes
            return res

        @R.function
        def main(boxes: R.Tensor((1, 8, 6), "float32")):
            cls = Loop
            out = cls.loop(R.const(0, "int32"), boxes)
            return out

    return Loop


def test_a_loop_hands_its_next_turn_the_cpu_boxes_copied_to_the_gpu():
    verify(LoopBefore, _loop(copied=True))
    [found] = devices.crossings(_loop(copied=False))
    assert found.endswith(": loop reads valid (llvm) on cuda") and found.startswith("loop/")


# --- both branches on the CPU: placed and run (the CPU twin, both devices the CPU) ------------------------------


@I.ir_module
class BothBranches:
    @R.function
    def main(boxes: R.Tensor((1, 8, 6), "float32"), flag: R.Tensor((), "bool")):
        if flag:
            c = R.vision.get_valid_counts(boxes, score_threshold=0.2, id_index=0, score_index=1)
            res = c[1]
        else:
            d = R.vision.get_valid_counts(boxes, score_threshold=0.5, id_index=0, score_index=1)
            res = d[1]
        out = R.multiply(res, boxes)
        return out


def test_a_twin_with_the_cpu_in_both_branches_computes_what_the_module_did():
    """Built the workbench's way (execute.compile: TVM's tvm.compile planned the branches' storage across devices
    and crashed in the else branch, the README's troubleshooting), each branch gives the unplaced module's result."""
    from byoc_workbench.measure.compiler import execute

    twin = devices.place(BothBranches, devices.propose(BothBranches), "llvm", "llvm")
    assert devices.crossings(twin) == []
    vm = tvm.relax.VirtualMachine(execute.compile(twin, "llvm"), [tvm.cpu(), tvm.cpu()])
    boxes = np.random.default_rng(0).random((1, 8, 6)).astype("float32")
    for flag in (True, False):
        got = vm["main"](tvm.runtime.tensor(boxes), tvm.runtime.tensor(np.array(flag))).numpy()
        np.testing.assert_array_equal(got, execute.run(BothBranches, [boxes, np.array(flag)]))


# --- constants: the VM loads every one on the module's first device, the GPU -------------------------------------

ONES = np.ones((1, 8, 6), "float32")


@I.ir_module
class ConstBefore:
    @R.function
    def main(boxes: R.Tensor((1, 8, 6), "float32")):
        counted = R.vision.get_valid_counts(R.const(ONES), score_threshold=0.2, id_index=0, score_index=1)
        valid = counted[1]
        shifted = R.add(valid, R.const(ONES))
        out = R.multiply(shifted, boxes)
        return out


@I.ir_module
class ConstExpected:
    I.module_global_infos({"vdevice": [I.vdevice(CUDA, 0, "global"), I.vdevice("llvm", 0, "global")]})

    @R.function
    def main(boxes: R.Tensor((1, 8, 6), "float32")) -> R.Tensor((1, 8, 6), "float32"):
        ones = R.to_vdevice(R.const(ONES), "llvm:0")  # each made once, where every binding of main sees it
        more = R.to_vdevice(R.const(ONES), "llvm:0")
        counted = R.vision.get_valid_counts(ones, score_threshold=0.2, id_index=0, score_index=1)
        valid = counted[1]
        shifted = R.add(valid, more)
        shifted_to_gpu = R.to_vdevice(shifted, "cuda:0")
        out: R.Tensor((1, 8, 6), "float32") = R.multiply(shifted_to_gpu, boxes)
        return out


def test_a_constant_read_on_the_cpu_is_copied_there_once_at_the_start():
    placement = devices.propose(ConstBefore)
    copies = [(c.var, c.to) for c in placement.crossings]
    assert copies == [("constant", "cpu"), ("constant", "cpu"), ("shifted", "gpu")]
    verify(ConstBefore, ConstExpected)


@I.ir_module
class ConstUnsound:
    """ConstBefore placed as place placed it before: the CPU's add handed the GPU's constant."""

    I.module_global_infos({"vdevice": [I.vdevice(CUDA, 0, "global"), I.vdevice("llvm", 0, "global")]})

    @R.function
    def main(boxes: R.Tensor((1, 8, 6), "float32", "llvm:0")) -> R.Tensor((1, 8, 6), "float32", "llvm:0"):
        shifted = R.add(boxes, R.const(ONES))
        return shifted


def test_crossings_find_a_constant_read_on_the_cpu_and_the_placed_build_hands_its_kernel_a_copy():
    """The lowered half skipped always: lower refuses ConstUnsound (test_devices_lowered.py finds it lowered)."""
    from byoc_workbench.measure.compiler import cuda, execute

    assert devices.crossings(ConstUnsound) == ["main/shifted: relax.add reads constant (cuda) on llvm"]
    try:
        cuda.find()
    except WorkbenchError as err:
        pytest.skip(str(err))  # no CUDA compiler here
    assert execute.misplaced_buffers(execute.lower(ConstBefore, GPU)) == []


# --- ONNX's NonMaxSuppression: a packed sort, on the CPU; its boxes per class stay a constant --------------------


@I.ir_module
class OnnxNmsBefore:
    @R.function
    def main(boxes: R.Tensor((1, 16, 4), "float32"), scores: R.Tensor((1, 3, 16), "float32")):
        sel = R.vision.all_class_non_max_suppression(
            boxes, scores, R.const(5, "int64"), R.const(0.5, "float32"), R.const(0.25, "float32"), output_format="onnx"
        )
        picked = sel[0]
        return picked


@I.ir_module
class OnnxNmsExpected:
    I.module_global_infos({"vdevice": [I.vdevice(CUDA, 0, "global"), I.vdevice("llvm", 0, "global")]})

    @R.function
    def main(boxes: R.Tensor((1, 16, 4), "float32"), scores: R.Tensor((1, 3, 16), "float32")):
        boxes_to_cpu = R.to_vdevice(boxes, "llvm:0")
        scores_to_cpu = R.to_vdevice(scores, "llvm:0")
        iou = R.to_vdevice(R.const(0.5, "float32"), "llvm:0")  # its kernel reads the thresholds
        least = R.to_vdevice(R.const(0.25, "float32"), "llvm:0")
        # the legalization reads the boxes per class as a number, when it builds: it stays a constant
        sel = R.vision.all_class_non_max_suppression(
            boxes_to_cpu, scores_to_cpu, R.const(5, "int64"), iou, least, output_format="onnx"
        )
        picked = sel[0]
        return picked


def test_onnx_nms_runs_on_the_cpu_with_its_thresholds_copied_there():
    from byoc_workbench.measure.compiler import execute

    placement = devices.propose(OnnxNmsBefore)
    assert placement.on_cpu == {"main": ("sel", "picked")}
    assert "packed sort" in placement.cpu_only["relax.vision.all_class_non_max_suppression"]
    verify(OnnxNmsBefore, OnnxNmsExpected)
    twin = devices.place(OnnxNmsBefore, placement, "llvm", "llvm")
    vm = tvm.relax.VirtualMachine(execute.compile(twin, "llvm"), [tvm.cpu(), tvm.cpu()])
    rng = np.random.default_rng(0)
    boxes, scores = rng.random((1, 16, 4), "float32"), rng.random((1, 3, 16), "float32")
    got = vm["main"](tvm.runtime.tensor(boxes), tvm.runtime.tensor(scores)).numpy()
    want = execute.run(OnnxNmsBefore, [boxes, scores])
    assert want.shape[0] <= 15  # 5 boxes per class at most: the twin kept the constant's value
    np.testing.assert_array_equal(got, want)


# --- what place refuses ---------------------------------------------------------------------------------------


@I.ir_module
class NamesItsDevice:
    I.module_global_infos({"vdevice": [I.vdevice("llvm", 0, "global")]})

    @R.function
    def main(boxes: R.Tensor((1, 8, 6), "float32", "llvm:0")):
        counted = R.vision.get_valid_counts(boxes, score_threshold=0.2, id_index=0, score_index=1)
        valid = counted[1]
        out = R.add(valid, boxes)
        return out


def test_place_refuses_a_module_that_names_its_devices_and_what_is_no_module_or_placement():
    cases = [
        (lambda: devices.place(NamesItsDevice, devices.propose(NamesItsDevice), GPU), "The module names its devices"),
        (lambda: devices.place(TailBefore, None, GPU), "place takes a Placement, got NoneType"),
        (lambda: devices.place(None, devices.propose(TailBefore), GPU), "place takes a tvm.IRModule, got NoneType"),
        (lambda: devices.crossings(None), "crossings takes a tvm.IRModule, got NoneType"),
        (lambda: devices.crossings("main"), "crossings takes a tvm.IRModule, got str"),
    ]
    for call, cause in cases:
        with pytest.raises(WorkbenchError) as err:
            call()
        assert str(err.value).startswith(f"error: {cause}") and "\n" not in str(err.value)
