"""A module's kernels (its PrimFuncs, called by ``R.call_tir`` and its kin) and the device a build runs each on.

TVM compiles a kernel for the target it names (a ``target`` attr, as ``BindTarget`` or LegalizeOps of a placed module
write it), else for the build's, and hands it the buffers of the device its call's result lives on, without checking
that the two agree. Two cases reach a build that way: a kernel LegalizeOps made of an op TVM 0.27 has no GPU kernel for
(:func:`check_not_legalized`), and a kernel bound by hand to the other device (:func:`check_kernels_bound`). A third
is a GPU kernel left with no thread binding after scheduling, which TVM compiles as host code
(:func:`check_threads_bound`).
"""

from __future__ import annotations

import tvm
from tvm import relax, s_tir, tirx
from tvm.s_tir.schedule.analysis import has_block

from byoc_workbench.core import ir, targets
from byoc_workbench.core.errors import WorkbenchError

# The block TOPI names each CPU-only op's kernel by (devices.CPU_ONLY's ops): what LegalizeOps leaves of the op is an
# R.call_tir of a PrimFunc holding it (whatever the PrimFunc is named), which TVM builds for the GPU unless the
# PrimFunc names a CPU target.
_KERNEL_BLOCKS = {
    "relax.vision.non_max_suppression": "non_max_suppression",
    "relax.vision.get_valid_counts": "get_valid_counts",
    "relax.vision.all_class_non_max_suppression": "all_class_nms",
}


def _kernel_calls(mod: tvm.IRModule):
    """``(function, step, kernel)`` for each call of one of ``mod``'s PrimFuncs in its Relax functions: an op that
    calls a kernel (``call_tir``, ``call_tir_inplace``...) names it first."""
    for fname in ir.host_functions(mod):
        for step in ir.walk(mod[fname], mod, descend=False, name=fname):
            kernel = next(iter(step.value.args), None) if step.op is not None else None
            if isinstance(kernel, tvm.ir.GlobalVar) and isinstance(mod[kernel], tvm.tirx.PrimFunc):
                yield fname, step, kernel


def check_not_legalized(mod: tvm.IRModule) -> None:
    """Refuse, in one line, a module for a GPU build that calls the kernel LegalizeOps made of an op of
    ``devices.CPU_ONLY``: ``devices.propose`` sees a kernel call, which runs on the GPU, and TVM builds it as device
    code."""
    made_of: dict = {}  # kernel's name -> the op it was made of, or None
    for fname, step, kernel in _kernel_calls(ir.module_given(mod, "devices.check_not_legalized")):
        if kernel.name_hint not in made_of:
            made_of[kernel.name_hint] = _legalized_from(mod[kernel])
        if made_of[kernel.name_hint] is not None:
            short = made_of[kernel.name_hint].removeprefix("relax.")
            raise WorkbenchError(
                f"{fname}/{step.var.name} calls {kernel.name_hint}, the kernel LegalizeOps made of {short}, "
                "which TVM 0.27 has no GPU kernel for: a GPU build would make it device code",
                f"pass the module before LegalizeOps: a GPU build legalizes it, {short} on the CPU",
            )


def _legalized_from(kernel) -> str | None:
    """The op of ``devices.CPU_ONLY`` LegalizeOps made ``kernel`` (a PrimFunc) of, found by its block
    (:data:`_KERNEL_BLOCKS`), whatever it is named; None for any other, and for one that names a CPU target (as a
    placed build's lowering makes them): TVM builds it for the CPU."""
    target = (kernel.attrs or {}).get("target")
    if target is not None and not targets.is_gpu(target):
        return None
    schedule = tvm.s_tir.Schedule(kernel)
    return next((op for op, block in _KERNEL_BLOCKS.items() if has_block(schedule, block)), None)


def check_kernels_bound(mod: tvm.IRModule, tvm_target) -> None:
    """Refuse, in one line, a build that runs a kernel bound by hand to one side (the CPU, or a GPU kind) on the other:
    TVM hands a CPU kernel GPU buffers without a word, and a CUDA kernel CPU ones stops its first run on a ValueError.

    A call runs where its result lives: its vdevice, else the module's first, else the build's target (so a kernel
    placed on its own device, the CPU's in a GPU build, builds).
    """
    built = targets.resolve(tvm_target)
    vdevices = (ir.module_given(mod, "devices.check_kernels_bound").global_infos or {}).get("vdevice", [])
    default = vdevices[0].target if vdevices else built
    for fname, step, kernel in _kernel_calls(mod):
        bound = (mod[kernel].attrs or {}).get("target")
        runs = [t.vdevice.target if t.vdevice is not None else default for t in _tensor_types(step.var.ty)]
        there = next((d for d in runs if _side(d) != _side(bound)), None) if bound is not None else None
        if there is None:
            continue
        raise WorkbenchError(
            f"kernel {kernel.name_hint} is bound to {_named(bound)}, but the build targets {targets.label(built)} and "
            f"runs it on {_side(there)} ({fname}/{step.var.name}): TVM would hand it buffers of another device",
            'remove its target (the PrimFunc\'s "target" attr, which BindTarget writes) and the build compiles it '
            f"for {_side(there)}; or {_run_where_bound(bound, there, built)}",
        )


def check_threads_bound(lowered: tvm.IRModule, tvm_target) -> None:
    """Refuse, in one line, a GPU build of ``lowered`` (lowered and scheduled, as a build lowers it) in which a GPU
    kernel reads or writes a buffer outside any thread binding: TVM's split of host and device code leaves that code
    on the host, which dereferences the GPU buffers it is handed, without a word. dlight schedules only a kernel
    written in blocks (``T.sblock``), so a loop nest of the user's own is left as it was written.

    It is TVM's own check (``verify_memory``), which the build runs only once buffers are flattened, where it no longer
    sees them (TVM 0.27); it reads thread bindings as launches, so the blocks are lowered first, as the build does.
    """
    built = targets.resolve(tvm_target)
    if not targets.is_gpu(built):
        return
    kernels = tvm.IRModule({gv: f for gv, f in lowered.functions.items() if isinstance(f, tirx.PrimFunc)})
    launches = tvm.transform.Sequential(
        [
            tirx.transform.BindTarget(built),  # as the build binds it: a kernel that names no target, or a host one
            s_tir.transform.LowerCrossThreadReduction(),
            s_tir.transform.LowerInitBlock(),
            s_tir.transform.ConvertBlocksToOpaque(),
            s_tir.transform.LowerOpaqueBlock(),
        ]
    )(kernels)
    host = next((gv.name_hint for gv, f in launches.functions.items() if not tirx.analysis.verify_memory(f)), None)
    if host is not None:
        raise WorkbenchError(
            f"kernel {host} accesses its buffers outside any GPU thread binding after scheduling, so the "
            f"{targets.label(built)} build would run it as host code on GPU buffers",
            "write its body in a T.sblock (T.prim_func(s_tir=True), its axes by T.axis.remap) and no "
            '"tirx.is_scheduled" attr, and the build\'s GPU schedules bind it to threads; or bind its loops yourself '
            '(T.thread_binding(n, thread="threadIdx.x")); or build for llvm',
        )


def _run_where_bound(bound: tvm.target.Target, there: tvm.target.Target, built: tvm.target.Target) -> str:
    """How to run a kernel bound to ``bound``, called on ``there``, where it is bound: the refusal's other Fix."""
    if _side(bound) == "the CPU":
        return (
            "build for llvm, or place its call on the CPU by hand (its result on an llvm I.vdevice, R.to_vdevice for "
            "its inputs, placed=True)"
        )
    if _side(there) == "the CPU" and targets.is_gpu(built):
        return "run its call on the GPU (its result on the GPU's I.vdevice)"
    return f"build for {_named(bound)}"


def _tensor_types(ty) -> list:
    """The tensor types a value of type ``ty`` holds: a tuple's, in order."""
    if isinstance(ty, relax.TupleType):
        return [t for field in ty.fields for t in _tensor_types(field)]
    return [ty] if isinstance(ty, relax.TensorType) else []


def _side(target: tvm.target.Target) -> str:
    """Where ``target``'s code runs: "the CPU" (llvm, c), else the GPU's kind (cuda)."""
    return "the CPU" if "cpu" in target.keys else target.kind.name


def _named(target: tvm.target.Target) -> str:
    """``llvm``, ``cuda sm_90``: a kernel's target in a few words, whatever its kind (TVM binds any)."""
    arch = target.attrs.get("arch")
    return f"{target.kind.name} {arch}" if arch else target.kind.name
