"""TVM builds every kind of model the workbench imports for CUDA, on a machine with no GPU: code generation
and the CUDA compiler both (nvcc from the cuda extra), for the H200's sm_90 and the seed's T4, sm_75. Each build
proves nvcc ran: TVM_KERNEL_DUMP (TVM's own switch) makes it keep its PTX and cubin for the asked arch, and an
arch nvcc rejects fails the build in one line.

What TVM 0.27 has no GPU kernel for (devices.CPU_ONLY) is placed on the CPU; a build fails here if such an
op lands in device code, if some other op needs a packed call the GPU cannot make, if an op reads a tensor
on another device than its own, or if a tensor is made in another device's buffer. Running the builds needs
a GPU: benchmarks/gpu_check.py does that; tests/unit/test_devices.py runs a placement's CPU twin.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import tempfile
from pathlib import Path

import pytest
import tvm
from test_zoo_families import OFFLOADED  # one model per family, as the suite's zoo tests offload them
from tvm import relax

from byoc_workbench import stages
from byoc_workbench.backends import registry
from byoc_workbench.core import devices, ir, targets
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.flow import rules
from byoc_workbench.measure.compiler import cuda, execute

SM90 = {"kind": "cuda", "arch": "sm_90"}
SM75 = {"kind": "cuda", "arch": "sm_75"}


@pytest.fixture(scope="module", autouse=True)
def compiler():
    try:
        return cuda.find()
    except Exception as err:  # noqa: BLE001 - said in the skip
        pytest.skip(f"no CUDA compiler here ({err}); make setup EXTRAS=cuda installs nvcc from PyPI")


def _check_build(mod, tvm_target=SM90) -> str:
    """Build ``mod`` for CUDA and check where each op went; returns the CUDA source."""
    placed = devices.place(mod, devices.propose(mod), tvm_target)
    assert devices.crossings(placed) == []
    if devices.placed(placed):  # TVM's memory planner put the SSD's NMS output in a GPU buffer
        assert execute.misplaced_buffers(execute.lower(mod, tvm_target)) == []
    with tempfile.TemporaryDirectory() as kept, pytest.MonkeyPatch.context() as env:
        env.setenv("TVM_KERNEL_DUMP", kept)
        executable = execute.compile(mod, tvm_target)
        _check_nvcc_ran(Path(kept), tvm_target["arch"])
    source = cuda.source(executable)
    kernels = re.findall(r'extern "C" __global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(', source)
    assert kernels, "a CUDA build with no GPU kernel"
    for op in devices.CPU_ONLY:
        name = op.rsplit(".", 1)[1]
        assert not [k for k in kernels if name in k], f"{op} compiled into device code"
    return source


def _check_nvcc_ran(kept: Path, arch: str) -> None:
    """What nvcc leaves where TVM_KERNEL_DUMP points: the PTX it made for ``arch`` and the cubin ptxas made of it."""
    ptx, cubin = kept / "tvm_kernels.ptx", kept / "tvm_kernels.cubin"
    assert ptx.is_file() and cubin.is_file(), "the build ran no nvcc"
    assert f".target {arch}" in ptx.read_text(), f"nvcc made no PTX for {arch}"
    assert cubin.read_bytes()[:4] == b"\x7fELF", "ptxas made no cubin"


def _packed_calls_on_gpu(mod, tvm_target) -> set:
    """Kernels of ``mod`` legalized for the GPU that make packed calls, which device code cannot."""
    with targets.resolve(tvm_target):
        legal = tvm.transform.Sequential([relax.backend.DispatchSortScan(), relax.transform.LegalizeOps()])(
            devices.place(mod, devices.propose(mod), tvm_target)
        )
    bad = set()
    for gv, func in legal.functions.items():
        if isinstance(func, tvm.tirx.PrimFunc):
            on_cpu = func.attrs is not None and "target" in func.attrs and func.attrs["target"].kind.name == "llvm"
            if not on_cpu and "call_packed" in func.script():
                bad.add(gv.name_hint)
    return bad


def test_the_compiler_is_the_projects_own_where_installed(compiler):
    assert compiler.name in ("nvcc", "nvrtc")
    if cuda._pip_nvcc():  # the cuda extra: CI compiles with what it installed
        assert compiler.name == "nvcc" and "site-packages" in compiler.path


def test_demo_loop_builds_for_cuda_and_places_nothing(demo_mod):
    placement = devices.propose(demo_mod)
    assert not placement
    assert devices.place(demo_mod, placement, SM90) is demo_mod
    source = _check_build(demo_mod)
    assert "conv2d" in source


def test_an_arch_nvcc_rejects_fails_the_build_in_one_line(demo_mod, compiler):
    if compiler.name != "nvcc":
        pytest.skip("NVRTC compiles here; this checks nvcc's refusal")
    with pytest.raises(WorkbenchError) as refused:
        _check_build(demo_mod, {"kind": "cuda", "arch": "sm_1000"})
    line = str(refused.value)
    assert "\n" not in line and line.startswith("error: nvcc") and "sm_1000" in line
    assert "Fix: ask for an arch it compiles: sm_75," in line and "sm_90" in line


@pytest.fixture(scope="module")
def kept(demo_mod):
    """The demo's CUDA build as TVM keeps it where its CUDA runtime does not load: the CUDA C, not compiled."""
    if importlib.util.find_spec("cuda") is None or importlib.util.find_spec("cuda.bindings") is None:
        pytest.skip("no NVRTC here (cuda-bindings)")
    executable = execute.compile(demo_mod, SM90)
    if cuda.loads_here():
        pytest.skip("TVM compiled the kernels itself: no source is kept")
    return executable


def test_an_arch_nvrtc_rejects_is_one_line(kept, monkeypatch):
    """NVRTC as find() takes it where no nvcc is, given headers (the cuda extra's), asked for an arch it lacks."""
    if not cuda._pip_nvcc():
        pytest.skip("no CUDA headers of the cuda extra here")
    monkeypatch.setenv("CUDA_PATH", str(Path(cuda._pip_nvcc()).parents[1]))
    with pytest.raises(WorkbenchError) as refused:
        cuda.compile_kept(kept, targets.resolve("cuda -arch=sm_1000"), cuda.Compiler("nvrtc"))
    line = str(refused.value)
    assert "\n" not in line and line.startswith("error: NVRTC (cuda-bindings) cannot compile for sm_1000 (nvrtc")
    assert "Fix: ask for an arch it compiles: sm_75, " in line and "sm_90" in line


def test_nvrtc_without_the_cuda_headers_is_one_line(kept, monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_PATH", str(tmp_path))  # a toolkit with no include/cuda_runtime.h
    with pytest.raises(WorkbenchError) as refused:
        cuda.compile_kept(kept, targets.resolve(SM90), cuda.Compiler("nvrtc"))
    line = str(refused.value)
    assert "\n" not in line and "cannot compile the kernels: it needs the CUDA toolkit's headers" in line
    assert line.endswith("or set CUDA_PATH to a CUDA toolkit whose include/ holds cuda_runtime.h.")


def test_demo_partitioned_builds_for_cuda(demo_mod, byoc):
    """The partitioned demo with its subgraphs back on TVM, as build_and_run(..., backend="tvm") builds it."""
    found = stages.run_stages(demo_mod, byoc.rules, stages.keep_all, backend="tvm")
    mod, generated, _ = registry.run_codegen(found[-1].mod, "tvm")
    assert not generated and not ir.subgraph_functions(mod)
    _check_build(mod)


@pytest.fixture(scope="module")
def ssd():
    from byoc_workbench.models import zoo

    loaded = zoo.load_model(weights="untrained")
    return zoo.import_model(loaded=loaded).mod


def test_ssd_places_nms_on_the_cpu(ssd):
    placement = devices.propose(ssd)
    assert set(placement.cpu_only) == {"relax.vision.get_valid_counts", "relax.vision.non_max_suppression"}
    [crossing] = placement.crossings  # the box list, once, to the CPU; the detections stay there
    assert crossing.to == "cpu" and crossing.shape[-1] == 6
    assert any("non_max_suppression" in line for line in placement.lines())


@pytest.mark.parametrize("tvm_target", [SM90, SM75], ids=["sm_90", "sm_75"])
def test_ssd_builds_for_cuda(ssd, tvm_target):
    assert _packed_calls_on_gpu(ssd, tvm_target) == set()
    source = _check_build(ssd, tvm_target)
    assert "conv2d" in source


@functools.cache
def _family(name: str):
    """One model of a GluonCV family as the package ships it (no MXNet), at the small input test_zoo_families.py
    uses; a segmentation model at its own (the one it ships at), Faster R-CNN with its 1000 proposals (the same
    graph, op for op, as with the eight test_zoo_families.py runs: a build runs nothing)."""
    from test_zoo_families import MODELS

    from byoc_workbench.models import zoo

    small = zoo.model_spec(name).task != "segmentation"
    return zoo.import_model(name, "untrained", input_shape=MODELS[name] if small else None).mod


@pytest.mark.parametrize("name", OFFLOADED)
def test_zoo_family_builds_for_cuda(name):
    mod = _family(name)
    assert _packed_calls_on_gpu(mod, SM90) == set()
    _check_build(mod)


def test_faster_rcnn_proposals_cross_both_ways():
    """NMS picks the proposals on the CPU; ROI Align reads them beside the GPU's feature map, so they go back."""
    placement = devices.propose(_family("faster_rcnn_resnet50_v1b_coco"))
    assert {c.to for c in placement.crossings} == {"cpu", "gpu"}


def test_onnx_file_builds_for_cuda(tmp_path):
    pytest.importorskip("onnx")
    from test_onnx_import import _scoped_model

    from byoc_workbench.session import Workbench

    wb = Workbench.from_onnx(_scoped_model(tmp_path / "scoped.onnx", batch=1), rules.get_target("tensorrt"))
    _check_build(wb.stage("source").mod)


def test_onnx_nms_is_one_line_for_cuda_and_builds_for_llvm(tmp_path):
    """TVM 0.27 compiles the kernels of ONNX's NonMaxSuppression for the GPU even when the placement puts the op
    on the CPU ("Buffer T_gather is used before its definition"): one line says so (round 8)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from byoc_workbench.session import Workbench

    consts = [
        helper.make_tensor("most", TensorProto.INT64, [1], [5]),
        helper.make_tensor("iou", TensorProto.FLOAT, [1], [0.5]),
        helper.make_tensor("least", TensorProto.FLOAT, [1], [0.1]),
    ]
    node = helper.make_node("NonMaxSuppression", ["boxes", "scores", "most", "iou", "least"], ["selected"])
    graph = helper.make_graph(
        [node],
        "nms",
        [
            helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 16, 4]),
            helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 3, 16]),
        ],
        [helper.make_tensor_value_info("selected", TensorProto.INT64, None)],
        consts,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "nms.onnx")
    mod = Workbench.from_onnx(tmp_path / "nms.onnx").mod
    with pytest.raises(WorkbenchError, match="cannot build NonMaxSuppression .* for CUDA"):
        execute.compile(mod, {"kind": "cuda", "arch": "sm_90"})
    assert execute.compile(mod, "llvm") is not None


def test_pytorch_program_builds_for_cuda():
    torch = pytest.importorskip("torch", reason="needs the [pytorch] extra: make test EXTRAS=pytorch")
    torchvision = pytest.importorskip("torchvision", reason="needs the [pytorch] extra")
    from byoc_workbench.session import Workbench

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    wb = Workbench.from_torch(model, torch.randn(1, 3, 64, 64), rules.get_target("tensorrt"))
    _check_build(wb.stage("source").mod)


def test_a_cuda_build_needs_an_arch_where_there_is_no_gpu():
    if tvm.cuda(0).exist:
        pytest.skip("a GPU is here: 'cuda' takes its arch")
    with pytest.raises(WorkbenchError, match="arch"):
        targets.resolve("cuda")
    assert targets.label(SM75) == "cuda sm_75"
