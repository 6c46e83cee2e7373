"""Placing a model for a GPU build: what TVM has no GPU kernel for runs on the CPU, with copies where the two
sides meet. Checked on a small detector tail (boxes, the box filter, NMS, slices, and a GPU op reading both
sides), by the placement's own record, by a check of the placed module, and by running it with both
devices the CPU (the CPU twin: what the copies and retyped bindings compute, without a GPU)."""

import collections
import re

import numpy as np
import pytest
import tvm
from shared import Tail, tail_inputs
from tvm import relax

from byoc_workbench.core import devices, targets
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.measure.compiler import execute


def test_proposal_places_the_box_filter_nms_and_what_reads_only_them_on_the_cpu():
    placement = devices.propose(Tail)
    assert set(placement.on_cpu["main"]) == {"counted", "count", "valid", "order", "kept", "top"}
    assert set(placement.cpu_only) == {"relax.vision.get_valid_counts", "relax.vision.non_max_suppression"}
    crossings = {(c.var, c.to) for c in placement.crossings}
    assert crossings == {("scaled", "cpu"), ("top", "gpu")}  # the boxes go over; the slice comes back for add
    assert placement.copied_bytes == 64 * 6 * 4 + 10 * 6 * 4
    assert "2 copies between GPU and CPU, 1.8 kB per run" in "\n".join(placement.lines())


def test_placed_module_reads_every_tensor_where_its_op_runs():
    """Tail's outputs both placed; test_devices_placement.py writes out the placed module of Tail less one."""
    placed = devices.place(Tail, devices.propose(Tail), {"kind": "cuda", "arch": "sm_90"})
    assert [v.target.kind.name for v in placed.global_infos["vdevice"]] == ["cuda", "llvm"]
    assert devices.crossings(placed) == []
    tvm.ir.assert_structural_equal(placed, relax.transform.Normalize()(placed))
    where = {
        b.var.name: (b.var.ty.vdevice.target.kind.name if b.var.ty.vdevice is not None else "gpu (the default)")
        for block in placed["main"].body.blocks
        for b in block.bindings
        if isinstance(b.var.ty, relax.TensorType)
    }
    assert where["kept"] == where["top"] == where["scaled_to_cpu"] == "llvm"
    assert where["top_to_gpu"] == "cuda" and where["shifted"] != "llvm"


def test_a_gpu_build_allocates_each_tensor_on_its_own_device():
    """Lowered as compile lowers it (no GPU needed): the CPU side's tensors in CPU buffers, and no tensor in
    another device's buffer (TVM's memory planner put the SSD's NMS output in a GPU one)."""
    try:
        lowered = execute.lower(Tail, {"kind": "cuda", "arch": "sm_90"})
    except WorkbenchError as err:
        pytest.skip(str(err))  # no CUDA compiler here
    assert execute.misplaced_buffers(lowered) == []
    text = lowered["main"].script()
    assert "get_valid_counts_llvm" in text and "add_cuda" in text
    assert len(re.findall(r"alloc_storage\([^)]*\), 1,", text)) >= 4  # on the CPU: counts, boxes, order, NMS


def test_cpu_twin_computes_what_the_module_did():
    twin = devices.place(Tail, devices.propose(Tail), "llvm", "llvm")
    vm = relax.VirtualMachine(tvm.compile(twin, target="llvm"), [tvm.cpu(), tvm.cpu()])
    inputs = tail_inputs()
    got = execute.to_numpy(vm["main"](*[tvm.runtime.tensor(a) for a in inputs]))
    want = execute.run(Tail, inputs)
    assert want[0][0, 0, 1] > 0.2  # NMS kept something: the comparison sees real detections
    for a, b in zip(want, got):
        np.testing.assert_array_equal(a, b)


def test_a_profiled_gpu_build_is_placed_once(monkeypatch):
    """timing.build places the module (its sites are the placed module's bindings) and hands execute the placed
    module, which execute.compile would otherwise place again: one proposal, one rewrite, counted by spies on the
    real functions. Compiled for CUDA (nvcc needs no GPU); without a GPU the VM cannot load the CUDA kernels, so
    the build stops there, after its one placement (neither a CPU twin's devices nor CPU-only TVM load them)."""
    from byoc_workbench import stages
    from byoc_workbench.measure.compiler import cuda
    from byoc_workbench.measure.time import timing

    try:
        cuda.find()
    except WorkbenchError as err:
        pytest.skip(str(err))  # no CUDA compiler here
    found = stages.run_stages(Tail, ())
    calls = collections.Counter()

    def spy(name):
        real = getattr(devices, name)

        def counted(*args, **kwargs):
            calls[name] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(devices, name, counted)

    spy("propose")
    spy("place")
    if not tvm.cuda(0).exist:
        with pytest.raises(WorkbenchError, match="a device this machine does not have"):
            timing.build(found, {"kind": "cuda", "arch": "sm_90"})
        assert calls == {"propose": 1, "place": 1}
        return
    built = timing.build(found, "cuda")
    assert calls == {"propose": 1, "place": 1}
    assert "kept" in built.placement.on_cpu["main"]  # the build's own record: no caller proposes again
    where = {s.name: s.device for s in built.sites.values() if s.kind == "kernel"}
    assert where["main/counted"] == "cpu" and where["main/shifted"] == "gpu"


def test_a_module_with_nothing_to_place_is_left_as_it_is(demo_mod):
    placement = devices.propose(demo_mod)
    assert not placement
    assert devices.place(demo_mod, placement, {"kind": "cuda", "arch": "sm_90"}) is demo_mod


def test_a_placement_places_only_the_module_it_was_proposed_for():
    """The record names variables by their handles (names repeat): another module's are not these."""
    copy = tvm.IRModule({"main": relax.utils.copy_with_new_vars(Tail["main"])})
    with pytest.raises(WorkbenchError, match="^error: The placement was proposed for another module"):
        devices.place(copy, devices.propose(Tail), "llvm", "llvm")


@pytest.mark.parametrize(
    "tvm_target, expected",
    [("llvm", "llvm"), ({"kind": "cuda", "arch": "sm_75"}, "cuda sm_75"), ({"kind": "llvm"}, "llvm")],
)
def test_targets_in_a_few_words(tvm_target, expected):
    assert targets.label(tvm_target) == expected
    assert targets.is_gpu(tvm_target) == expected.startswith("cuda")


def test_unknown_target_is_one_line():
    with pytest.raises(WorkbenchError, match="Unknown TVM target 'metal'"):
        targets.resolve("metal")


@pytest.mark.parametrize("arch", ["sm_90", "sm_90a", "sm_1000"])  # any sm_ and two digits or more; nvcc judges
def test_a_target_as_text_keeps_its_arch(arch):
    """TVM 0.27 reads targets as dicts only: the text's options become the dict's, not this machine's GPU's."""
    assert targets.label(f"cuda -arch={arch}") == f"cuda {arch}"
    assert targets.resolve(f"cuda -arch={arch}").host.kind.name == "llvm"
    assert targets.resolve("llvm -mcpu=skylake").attrs["mcpu"] == "skylake"


NAME_TARGET = (
    "name 'llvm' (the CPU) or 'cuda' (an NVIDIA GPU), as text ('cuda -arch=sm_90') or a dict "
    "({'kind': 'cuda', 'arch': 'sm_90'})"
)


@pytest.mark.parametrize(
    "tvm_target, cause",
    [
        (None, "Unknown TVM target None"),
        (["cuda"], "Unknown TVM target ['cuda']"),
        ("garbage", "Unknown TVM target 'garbage'"),
        ({"arch": "sm_90"}, "Unknown TVM target {'arch': 'sm_90'}"),
        ("cuda -arch", "Cannot read the option '-arch' of the target 'cuda -arch'"),
    ],
)
def test_a_malformed_target_is_one_line(tvm_target, cause):
    for ask in (targets.resolve, targets.label):
        with pytest.raises(WorkbenchError) as err:
            ask(tvm_target)
        line = str(err.value)
        assert line.startswith(f"error: {cause}") and "\n" not in line
        assert line.endswith(f"Fix: {NAME_TARGET}.")


def test_report_and_diagram_mark_what_a_gpu_build_runs_on_the_cpu():
    from byoc_workbench.flow import rules
    from byoc_workbench.session import Workbench

    wb = Workbench(Tail, rules.get_target("tensorrt"))
    report = wb.report()
    assert set(report.gpu_build.cpu_only) == {"relax.vision.get_valid_counts", "relax.vision.non_max_suppression"}
    assert "on the CPU in a GPU build: 6 binding(s)" in report.text()
    assert report.to_json()["gpu_build"]["copies"][0]["var"] == "scaled"
    view = wb.view("codegen")
    marked = {nid for nid, d in view.nodes.items() if d.get("on_cpu_in_a_gpu_build")}
    assert {"main/counted", "main/kept", "main/top"} <= marked
    assert "main/shifted" not in marked and "main/scaled" not in marked
    assert "packed sort" in view.nodes["main/kept"]["on_cpu_in_a_gpu_build"]
    assert view.dot.count("peripheries=2") == len(marked)
    assert "double border: on the CPU in a GPU build" in view.dot


def test_a_model_without_cpu_only_ops_has_no_gpu_note(demo_mod, byoc):
    from byoc_workbench.session import Workbench

    wb = Workbench(demo_mod, byoc)
    assert wb.report().gpu_build is None
    assert "peripheries" not in wb.view("codegen").dot


@pytest.mark.parametrize(
    "tvm_target, line",
    [
        ("cuda -arch=sm_5", "'sm_5' in the target 'cuda -arch=sm_5' is not a CUDA arch. Fix: name one such as sm_90"),
        ("cuda -arch=sm_90,sm_80", "'sm_90,sm_80' in the target 'cuda -arch=sm_90,sm_80' is not a CUDA arch."),
        ("cuda -arch=sm_90 -arch=sm_80", "The target 'cuda -arch=sm_90 -arch=sm_80' gives -arch twice. Fix: give"),
        ("cuda -arch=sm_90 -host=cuda", "The target 'cuda -arch=sm_90 -host=cuda' has the host 'cuda'. Fix: leave"),
        ("cuda -arch=sm_90 -max_threads_per_block=0", "max_threads_per_block=0 in the target"),
        ({"kind": "cuda", "arch": "sm_90", "max_shared_memory_per_block": -1}, "max_shared_memory_per_block=-1 in"),
        ("cuda --arch=sm_90", "Cannot read the option '--arch=sm_90' of the target 'cuda --arch=sm_90'"),
        ("cuda -arch=sm_90 -max_threads_per_block=--5", "max_threads_per_block='--5' in the target"),
        ("cuda -arch=sm_90 -max_threads_per_block=²", "max_threads_per_block='²' in the target"),
        ({"kind": "cuda", "arch": "sm_90", "max_threads_per_block": True}, "max_threads_per_block=True in"),
        ({"kind": "cuda", "arch": "sm_90", "max_threads_per_block": 10**12}, "max_threads_per_block=1000000000000"),
        ("cuda -arch=sm_90 -thread_warp_size=0", "thread_warp_size=0 in the target"),  # SIGFPE in a reduction
        ({"kind": "cuda", "arch": "sm_90", "keys": ["cpu"]}, "The target {'kind': 'cuda', 'arch': 'sm_90', 'keys'"),
        ("cuda -arch=sm_90 -registers_per_block=0", "registers_per_block=0 in the target"),
    ],
)
def test_a_cuda_target_tvm_would_fail_on_in_the_build_is_one_line_first(tvm_target, line):
    """What TVM 0.27 takes in a target and fails on later, in nvcc's wrapper or its own code generation."""
    with pytest.raises(WorkbenchError) as err:
        targets.resolve(tvm_target)
    assert str(err.value).startswith(f"error: {line}") and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "tvm_target, line",
    [
        ("llvm -mcpu=nonsense", "'nonsense' in the target 'llvm -mcpu=nonsense' is not a CPU LLVM knows for this"),
        ("llvm -mtriple=aarch64-linux-gnu -mcpu=skylake", "'skylake' in the target 'llvm -mtriple=aarch64-linux"),
        ({"kind": "llvm", "mtriple": "nonsense"}, "'nonsense' in the target {'kind': 'llvm', 'mtriple': 'nonsense'}"),
    ],
)
def test_a_cpu_target_llvm_would_build_otherwise_or_die_on_is_one_line(tvm_target, line):
    """LLVM builds for a generic CPU in place of a CPU it does not know (a log line, exit 0), and a triple of no
    architecture it has is a segfault as TVM asks for its CPUs."""
    with pytest.raises(WorkbenchError) as err:
        targets.resolve(tvm_target)
    assert str(err.value).startswith(f"error: {line}") and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "tvm_target",
    ["llvm -mcpu=x86-64", "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72", "llvm -mtriple=i686-linux-gnu"],
)
def test_a_cpu_target_llvm_knows_is_taken(tvm_target):
    assert targets.label(tvm_target) == "llvm"


@pytest.mark.parametrize(
    "spec, host, line",
    [
        ({"kind": "cuda", "arch": "sm_90", "keys": ["cpu"]}, "llvm", "The target {'kind': 'cuda', 'keys': ['cpu'],"),
        ({"kind": "cuda", "arch": "sm_90", "thread_warp_size": 0}, "llvm", "thread_warp_size=0 in the target {"),
        ({"kind": "cuda", "arch": "sm_9"}, "llvm", "'sm_9' in the target {'kind': 'cuda',"),
        ({"kind": "cuda", "arch": "sm_90", "max_threads_per_block": 4096}, "llvm", "max_threads_per_block=4096 in"),
        ({"kind": "cuda", "arch": "sm_90", "max_shared_memory_per_block": 0}, "llvm", "max_shared_memory_per_block=0"),
        ({"kind": "cuda", "arch": "sm_90"}, {"kind": "c"}, "The target {'kind': 'cuda',"),
        ({"kind": "c"}, None, "Unknown TVM target {'kind': 'c'"),
    ],
)
def test_a_target_object_is_checked_as_the_dict_it_was_made_from(spec, host, line):
    """A Target (a warp of 0 killed Python with SIGFPE in the build; keys ['cpu'] built no GPU kernel)."""
    with pytest.raises(WorkbenchError) as err:
        targets.resolve(tvm.target.Target(spec, host=host))
    assert str(err.value).startswith(f"error: {line}") and "\n" not in str(err.value)


def test_a_resolved_target_resolves_to_itself():
    for tvm_target in ("llvm -mcpu=skylake", "cuda -arch=sm_75 -max_threads_per_block=512"):
        once = targets.resolve(tvm_target)
        assert str(targets.resolve(once)) == str(once)


def test_a_target_object_made_without_an_arch_is_taken_as_cuda_the_text():
    """TVM 0.27 writes its default arch (sm_50) into a Target made without one where it sees no GPU: it was refused
    as sm_50, an arch the user never named (nvcc cannot compile for it), when the Target had another option too.
    TVM's default is read as no arch, wherever it stands among the options."""
    made = tvm.target.Target({"kind": "cuda"}, host="llvm")
    limited = tvm.target.Target({"kind": "cuda", "max_threads_per_block": 512})
    assert targets.label(tvm.target.Target({"kind": "cuda", "arch": "sm_90"})) == "cuda sm_90"
    if tvm.cuda(0).exist:
        assert targets.label(made) == targets.label(limited) == targets.label("cuda")
        return
    for tvm_target in (made, limited, "cuda"):
        with pytest.raises(WorkbenchError) as err:
            targets.resolve(tvm_target)
        assert str(err.value).startswith("error: A CUDA build needs the GPU's arch, and no NVIDIA GPU is visible here")
