"""Build a stage's module with TVM and run it in the Relax VM."""

from __future__ import annotations

import contextlib
import gc
import os
import threading
import traceback

import numpy as np
import tvm
from tvm import relax

from byoc_workbench.core import devices, devices_kernels, files, ir, ir_types, targets, user_file
from byoc_workbench.core.errors import WorkbenchError, true_or_false
from byoc_workbench.core.tvm_private import items
from byoc_workbench.measure.compiler import compiled, cuda

# Held while a build lowers and compiles: TVM's lowering keeps state of the process, not the thread (TE's TagScope),
# and two threads at once stop on "nested op_tag". Reentrant: a build within a build waits on no one.
_TVM = threading.RLock()


def has_recursion(mod: tvm.IRModule) -> bool:
    """Whether some function reaches itself through calls."""
    graph = ir.calls_between_functions(mod)
    for start in graph:
        seen, todo = set(), list(graph[start])
        while todo:
            f = todo.pop()
            if f == start:
                return True
            if f not in seen:
                seen.add(f)
                todo.extend(graph.get(f, ()))
    return False


def has_branches(mod: tvm.IRModule) -> bool:
    """Whether some Relax function holds an If."""
    return any(
        isinstance(s.value, relax.If)
        for f in mod.functions.values()
        if isinstance(f, relax.Function)
        for s in ir.walk(f, descend=False)
    )


def compile(mod: tvm.IRModule, tvm_target="llvm", *, placed: bool = False) -> relax.VMExecutable:
    """``tvm.compile`` the module for ``tvm_target``: ``"llvm"``, ``"cuda"`` or a dict
    (:mod:`byoc_workbench.core.targets`).

    For a GPU, what TVM has no GPU kernel for is placed on the CPU first
    (:func:`byoc_workbench.core.devices.place`; ``placed``: the caller placed ``mod``
    already, as a profiled build does to name its sites), and the build goes through
    :func:`byoc_workbench.measure.compiler.cuda.pipeline` with the CUDA compiler found here,
    which compiles the kernels even where TVM, without a GPU driver, would keep their
    source (:func:`byoc_workbench.measure.compiler.cuda.compile_kept`).

    TVM 0.27's StaticPlanBlockMemory makes the VM segfault at run time on a
    recursive function (it reuses storage across recursive calls) and on some
    If branches (a reshape in one branch, then a split after the If, for
    one); that pass is only an optimisation, so such modules go without it.
    Nor does a module placed on two devices take it: the pass reuses a GPU
    buffer for a CPU tensor (the SSD's NMS output lands in GPU memory, and the
    CPU kernel that reads it stops on "Mismatched out_tensor.device_type").
    A module compiled before on this machine is loaded from the build cache
    (:mod:`byoc_workbench.measure.compiler.compiled`).
    """
    mod, resolved, disabled = _prepared(mod, tvm_target, placed)

    def build():
        with _building(resolved, disabled):
            executable = tvm.compile(_lower(mod, resolved), target=resolved, relax_pipeline=None)
        if targets.is_gpu(resolved):
            cuda.compile_kept(executable, resolved, cuda.find())
        return executable

    if targets.is_gpu(resolved) and not cuda.loads_here():
        return build()  # compiled here for another machine: a library this runtime cannot load is not kept
    return compiled.load_or_build(mod, str(resolved), disabled, build)[0]


def lower(mod: tvm.IRModule, tvm_target="llvm", *, placed: bool = False) -> tvm.IRModule:
    """The Relax module as :func:`compile` hands it to code generation (``placed`` as there): placed, planned,
    every op a kernel call, every buffer allocated on its device (what the CUDA build tests read)."""
    mod, resolved, disabled = _prepared(mod, tvm_target, placed)
    with _building(resolved, disabled):
        return _lower(mod, resolved)


def _prepared(mod: tvm.IRModule, tvm_target, placed: bool) -> tuple:
    """``(module, resolved target, passes it builds without)``: checked as :func:`compile` and :func:`lower` both
    check it, placed on the GPU and the CPU for a GPU target, unless it was ``placed`` already, and refused in one line
    where a binding reads a tensor on another device than the one it lives on (a kernel handed buffers of two devices,
    which TVM builds without a word) or runs a kernel bound by hand to the other device."""
    _check_ranks(mod)
    ir.check_no_local_calls(mod)
    _check_not_lowered(mod)
    check_gpu_builds(mod, tvm_target)
    resolved = targets.resolve(tvm_target)
    placed = true_or_false(placed, "placed is True or False", "pass placed=True for a module devices.place wrote")
    named = [targets.label(d.target) for d in (mod.global_infos or {}).get("vdevice", [])]
    gpus = [d for d in named if targets.is_gpu(d)]
    if gpus and not targets.is_gpu(resolved):  # TVM builds it, and its first call fails in C++ (a CPU twin builds)
        raise WorkbenchError(
            f"The module is placed on {', '.join(named)} (I.vdevice); the build is for {targets.label(resolved)}",
            f"build it for {gpus[0]}, or pass the module without vdevices (as it was before placing)",
        )
    if placed and targets.is_gpu(resolved) and not devices.placed(mod):
        _check_placed_by_hand(mod, named)
    if placed and named:
        _check_placed_for(mod, resolved)
    if targets.is_gpu(resolved):
        devices.check_not_legalized(mod)
    devices_kernels.check_kernels_bound(mod, resolved)
    placing = targets.is_gpu(resolved) and not placed
    if placing:
        mod = devices.place(mod, devices.propose(mod), resolved)
    wrong = devices.crossings(mod)
    if wrong:
        raise WorkbenchError(
            f"The module reads a tensor on another device than its own ({wrong[0]})",
            "build it for llvm: the workbench's GPU placement does not cover what this module does"
            if placing
            else "copy it there (R.to_vdevice), or pass the module unplaced to be placed",
        )
    unplannable = has_recursion(mod) or has_branches(mod) or devices.placed(mod)
    return mod, resolved, ["StaticPlanBlockMemory"] if unplannable else []


def _check_not_lowered(mod: tvm.IRModule) -> None:
    """Refuse, in one line, a module lowered already (what :func:`lower` gives): a build lowers it again, and one for
    another target than it was lowered for stops in TVM's C++ (lowered for llvm, a CUDA build on tvm_call_packed).
    It is known by the VM's instructions in its functions; a kernel that names a target is no sign of it, as a
    profiled build legalizes the module it places (:mod:`byoc_workbench.measure.time.timing`)."""
    for fname in ir.host_functions(mod):
        for step in ir.walk(mod[fname], descend=False):
            if step.op is not None and step.op.startswith(("relax.vm.", "relax.builtin.alloc_tensor")):
                raise WorkbenchError(
                    f"The module is lowered already: {fname}/{step.var.name} calls {step.op.removeprefix('relax.')}, "
                    "which lowering writes, and a build lowers what it is given",
                    "pass the module as it was before lowering (execute.lower, or a Relax pipeline of TVM's): the "
                    "build lowers it",
                )


def _check_placed_by_hand(mod: tvm.IRModule, named: list) -> None:
    """Refuse, in one line, a GPU build told ``placed=True`` of a module that names fewer than two devices but runs
    an op only on the CPU: its second device, the CPU's, is what placing adds."""
    placement = devices.propose(mod)
    if not placement:
        return  # everything on the GPU: one vdevice (or none) builds as it is
    ops = ", ".join(op.removeprefix("relax.") for op in placement.cpu_only)
    if not named:
        raise WorkbenchError(
            f"placed=True, but the module names no devices, and {ops} runs only on the CPU",
            "pass placed=False (the default): the build places it",
        )
    raise WorkbenchError(
        f"placed=True, but the module names one device ({named[0]}), and {ops} runs only on the CPU: a GPU build "
        "needs the GPU's and the CPU's vdevices",
        "pass the module without vdevices, placed=False (the default): the build places it",
    )


def _check_placed_for(mod: tvm.IRModule, resolved: tvm.target.Target) -> None:
    """Refuse, in one line, a placed module that a GPU build would build otherwise than it was placed: a CPU twin's GPU
    ops on the CPU, kernels for two GPUs (the placed one's and the build's), a device the build has not (another GPU,
    kind or arch, beside those two), a CPU-only op left on the GPU."""
    vdevices = mod.global_infos["vdevice"]
    placed_for, built_for = targets.label(vdevices[0].target), targets.label(resolved)
    if targets.is_gpu(resolved) and placed_for != built_for:
        what = "kernels for two GPUs" if targets.is_gpu(placed_for) else "its GPU ops for the CPU (a CPU twin)"
        raise WorkbenchError(
            f"The module is placed for {placed_for}, the build is for {built_for}: TVM would build {what}",
            f"build it for {placed_for}, or place the module as it was before placing for {built_for}",
        )
    own = [built_for, targets.label(resolved.host)] if targets.is_gpu(resolved) else [built_for]
    for i, vdevice in enumerate(vdevices):
        if targets.label(vdevice.target) not in own:
            raise WorkbenchError(
                f"The module's vdevice {i} is {targets.label(vdevice.target)}, and the build is for "
                f"{' and '.join(own)}: TVM would build the ops placed there for it",
                f"name only {' and '.join(own)} in its vdevices (I.vdevice), or pass it unplaced to be placed",
            )
    if devices.placed(mod):
        devices.check_cpu_only_on_cpu(mod)


@contextlib.contextmanager
def _building(tvm_target: tvm.target.Target, disabled: list):
    """The pass context a build runs in, with the CUDA compiler found here for a GPU (what it refuses that is the
    user's or this machine's is one line: :func:`byoc_workbench.measure.compiler.cuda.compiling`), one thread's at a
    time (``_TVM``): threads that build at once take turns at TVM, each its own nvcc after."""
    gpu = targets.is_gpu(tvm_target)
    toolchain = cuda.compiling(cuda.find(), tvm_target.attrs.get("arch")) if gpu else contextlib.nullcontext()
    with _TVM, tvm.transform.PassContext(opt_level=3, disabled_pass=disabled), toolchain, tvm_target:
        yield


def _lower(mod: tvm.IRModule, tvm_target: tvm.target.Target) -> tvm.IRModule:
    """``mod`` lowered for ``tvm_target``, refused in one line where an op is left that TVM cannot lower (VM code
    generation would stop on it in C++), and where a kernel would read a buffer of another device
    (:func:`misplaced_buffers`) or a GPU kernel is left unbound to threads
    (:func:`~byoc_workbench.core.devices_kernels.check_threads_bound`): TVM builds either without a word, and on a GPU
    the host code is handed a GPU pointer. A placed module's CPU kernels read copies of what legalization left
    elsewhere (as the GPU's pipeline does: the CPU twin, both devices the CPU, builds what a GPU build would)."""
    said = None
    with user_file.native_stderr_held() as held:
        try:
            if targets.is_gpu(tvm_target):
                lowered = cuda.pipeline(tvm_target)(mod)
            else:
                legal = [
                    relax.backend.DispatchSampling(),
                    relax.backend.DispatchSortScan(),
                    relax.transform.LegalizeOps(),
                ]
                first = [*legal, cuda.copies_to_the_cpu()] if devices.placed(mod) else []
                lowered = tvm.transform.Sequential([*first, relax.get_pipeline("default")])(mod)
        except AssertionError as err:
            said = _reshape_not_lowered(mod, err)
            if said is None:
                raise
        if said is not None:  # the builder TVM left with an open block says so as it goes: not a second line
            gc.collect()
            held.dropped = True
    if said is not None:
        raise said
    left = _not_lowered(lowered)
    if left is not None:
        raise WorkbenchError(
            f"TVM 0.27 cannot build {left[1].removeprefix('relax.')} ({left[0]}): the {targets.label(tvm_target)} "
            "build has no kernel or VM instruction for it",
            "write it with other ops, or offload it to a backend that runs it",
        )
    wrong = misplaced_buffers(lowered)
    if wrong:
        raise WorkbenchError(
            f"The {targets.label(tvm_target)} build hands a kernel a buffer of another device ({wrong[0]})",
            "give each kernel the buffers of one device (R.to_vdevice), or build it for llvm",
        )
    devices_kernels.check_threads_bound(lowered, tvm_target)
    return lowered


def _reshape_not_lowered(mod: tvm.IRModule, err: AssertionError) -> WorkbenchError | None:
    """One line for TVM 0.27's bare AssertionError in legalizing a reshape (``reshape_call_te`` asserts that its
    shape is bound to one written out, ``R.shape([...])``), naming the reshape whose shape is not; None for any
    other failure, which is TVM's and keeps its traceback."""
    frame = [f for f in traceback.extract_tb(err.__traceback__) if f.filename.endswith(".py")][-1:]
    if not frame or (frame[0].name, os.path.basename(frame[0].filename)) != ("reshape_call_te", "manipulate.py"):
        return None
    for fname in ir.host_functions(mod):
        made = {}  # handle -> how the function made the variable (None: a shape written out)
        for step in ir.walk(mod[fname], mod, descend=False, name=fname):
            made[step.var.__chandle__()] = _how_made(step)
            if step.op != "relax.reshape" or not ir.is_var(shape := step.value.args[1]):
                continue
            how = made.get(shape.__chandle__(), "a parameter")
            sizes = shape.ty.values if type(shape.ty) is relax.ShapeType else None
            if how is None or sizes is None:
                continue  # written out, or of sizes unknown (which LegalizeOps leaves to the VM)
            dims = ", ".join(str(getattr(d, "value", d)) for d in sizes)
            return WorkbenchError(
                f"TVM 0.27 cannot lower {fname}/{step.var.name}, a reshape to {shape.name} ({how}): it lowers a "
                "reshape only to a shape written out",
                f"write it out: R.reshape({getattr(step.value.args[0], 'name', 'x')}, R.shape([{dims}]))",
            )
    return None


def _how_made(step) -> str | None:
    """How ``step`` made its variable, in a few words (``made by shape_of``, ``an alias of s``); None for a shape
    written out."""
    if type(step.value) is relax.ShapeExpr and type(step.binding) is relax.VarBinding:
        return None
    if type(step.binding) is relax.MatchCast:
        return "bound by match_cast"
    if step.op is not None:
        return f"made by {step.op.removeprefix('relax.')}"
    return f"an alias of {step.value.name}" if ir.is_var(step.value) else f"made by a {type(step.value).__name__}"


def check_gpu_builds(mod: tvm.IRModule, tvm_target) -> None:
    """Refuse, in one line, a GPU build of a module calling an op TVM 0.27 cannot build for CUDA
    (:func:`byoc_workbench.core.devices.no_gpu_build`); a caller that legalizes first checks the module before."""
    found = devices.no_gpu_build(mod) if targets.is_gpu(tvm_target) else []
    if found:
        raise WorkbenchError(
            f"TVM 0.27 cannot build {found[0]} for CUDA, even on the CPU beside the GPU",
            "build this model for llvm, or offload it whole (e.g. --backend onnxruntime)",
        )


def _check_ranks(mod: tvm.IRModule) -> None:
    """Refuse, in one line, an op call on a tensor of unknown rank: TVM cannot lower it.

    Such a call survives every stage (it can be drawn and partitioned), but
    ``tvm.compile`` stops in VM codegen with an internal error and a C++ trace.
    """
    for fname, func in ((gv.name_hint, f) for gv, f in mod.functions.items()):
        if not isinstance(func, relax.Function):
            continue
        for step in ir.walk(func, mod, descend=False, name=fname):
            if not step.op:
                continue
            unknown = [a for a in step.value.args if isinstance(a.ty, relax.TensorType) and a.ty.ndim == -1]
            if unknown:
                arg = unknown[0]
                name = arg.name if ir.is_var(arg) else type(arg).__name__
                raise WorkbenchError(
                    f"TVM cannot build {step.value.op.name} in {fname}: its input {name} has unknown rank",
                    "give the model's inputs a rank, e.g. R.Tensor((n, 3, h, w), 'float32') "
                    "or R.Tensor(ndim=4, dtype='float32')",
                )


def device(tvm_target="llvm") -> tvm.runtime.Device:
    """The device a VM built for ``tvm_target`` takes its inputs on: the first GPU for ``cuda``, else the CPU."""
    return tvm.cuda(0) if targets.is_gpu(tvm_target) else tvm.cpu()


def vm_devices(tvm_target="llvm") -> list:
    """The devices of a VM built for ``tvm_target``, one per virtual device of a placed module (GPU, then CPU; the CPU
    twin's are both the CPU, and a module that names none runs on the first)."""
    return [tvm.cuda(0) if targets.is_gpu(tvm_target) else tvm.cpu(), tvm.cpu()]


def sync_of(tvm_target="llvm"):
    """What waits for ``tvm_target``'s device to finish what was launched (None for the CPU, which never lags)."""
    return device(tvm_target).sync if targets.is_gpu(tvm_target) else None


def synced(fn, tvm_target="llvm"):
    """``fn`` (a VM function) returning once its work is done: on a GPU the VM returns when it has launched
    the kernels, and a timer would see the launches only."""
    sync = sync_of(tvm_target)
    if sync is None:
        return fn

    def run(*args):
        out = fn(*args)
        sync()
        return out

    return run


def build(mod: tvm.IRModule, tvm_target="llvm", *, placed: bool = False) -> relax.VirtualMachine:
    """:func:`compile` the module (``placed`` as there) and load it in a VM on ``tvm_target``'s devices."""
    check_runs_here(tvm_target)
    return virtual_machine(compile(mod, tvm_target, placed=placed), tvm_target)


def virtual_machine(executable: relax.VMExecutable, tvm_target="llvm") -> relax.VirtualMachine:
    """``executable`` loaded in a VM on ``tvm_target``'s devices, refused in one line on a machine that has not the
    device (:func:`check_runs_here`) and for a CPU where it holds CUDA kernels. Its C source modules are compiled and
    linked now, by the system's C compiler in the temporary folder: one that could not write there (``ulimit -f``, a
    full disk) is one line (:func:`~byoc_workbench.core.files.compiler_could_not_write`); any other error keeps its
    traceback."""
    if not isinstance(executable, relax.VMExecutable):
        raise WorkbenchError(
            f"virtual_machine takes what execute.compile gives, got {type(executable).__name__}",
            "pass execute.compile(mod, tvm_target)",
        )
    check_runs_here(tvm_target)
    # A GPU build loaded for the CPU: the VM would run its kernels there.
    if not targets.is_gpu(tvm_target) and cuda.kernel_module(executable) is not None:
        raise WorkbenchError(
            f"The executable holds CUDA kernels (a GPU build), and it is loaded for {targets.label(tvm_target)}",
            "load it for the GPU target execute.compile built it for, on a machine with an NVIDIA GPU",
        )
    try:
        return relax.VirtualMachine(executable, vm_devices(tvm_target))
    except RuntimeError as err:  # tvm.support.cc's "Compilation error:", with the compiler's messages
        said, what = str(err), "TVM could not compile the build's C source"
        could_not_write = said.startswith("Compilation error") and files.compiler_could_not_write(said, what)
        if not could_not_write:
            raise
        raise could_not_write from None


def check_runs_here(tvm_target) -> None:
    """Refuse, in one line and before it compiles, a build for a device this machine does not have: TVM says so
    only when the VM loads it (CUDA without a GPU) or calls it (another CPU's triple), in C++'s words.
    :func:`compile` builds for either all the same. A CPU build, and a GPU build's host (the VM's own code and
    the ops on the CPU are built for it), are checked by :func:`byoc_workbench.core.targets.check_cpu_runs_here`."""
    resolved = targets.resolve(tvm_target)
    targets.check_cpu_runs_here(resolved.host if targets.is_gpu(resolved) else resolved)
    if targets.is_gpu(resolved) and not (cuda.loads_here() and tvm.cuda(0).exist):
        raise WorkbenchError(
            f"The build is for {targets.label(resolved)}, a device this machine does not have "
            "(no NVIDIA GPU that TVM can run on)",
            "run it on a machine with an NVIDIA GPU, its driver and TVM's CUDA runtime; "
            "execute.compile(mod, tvm_target) compiles it here without running it",
        )


def to_numpy(value):
    """VM results as NumPy: a tensor becomes an array, a tuple a list."""
    if isinstance(value, (list, tuple)) or type(value).__name__ in ("Array", "Tuple"):
        return [to_numpy(v) for v in value]
    return value.numpy()


def check_inputs(mod: tvm.IRModule, inputs, entry: str = "main") -> list:
    """``inputs`` as arrays, checked against ``entry``'s parameters (count, rank, static sizes, dtype): a
    mismatch is one line naming the parameter, before TVM stops on it in C++."""
    if entry not in [gv.name_hint for gv in mod.get_global_vars()]:
        raise WorkbenchError(f"The module has no function {entry!r}", "pass entry='main' or a function it has")
    params = list(mod[entry].params)
    if inputs is None or isinstance(inputs, (str, bytes)) or not hasattr(inputs, "__len__"):
        raise WorkbenchError(f"inputs must be a list of arrays, got {type(inputs).__name__}", "pass [x, ...]")
    if len(inputs) != len(params):
        names = ", ".join(p.name for p in params)
        raise WorkbenchError(f"{entry} takes {len(params)} inputs ({names}), got {len(inputs)}", f"pass {names}")
    arrays = []
    for p, a in zip(params, inputs):
        a = np.asarray(a)
        ty = p.ty
        if isinstance(ty, relax.TensorType) and hasattr(ty.shape, "values"):
            want = ir_types.dims(ty)
            if a.ndim != len(want) or any(w is not None and w != g for w, g in zip(want, a.shape)):
                shown = "x".join("?" if w is None else str(w) for w in want)
                raise WorkbenchError(
                    f"input {p.name} has shape {'x'.join(map(str, a.shape)) or '()'}, {entry} takes {shown}",
                    f"pass {p.name} as an array of shape {shown}",
                )
            if str(ty.dtype) != str(a.dtype):
                raise WorkbenchError(
                    f"input {p.name} is {a.dtype}, {entry} takes {ty.dtype}", f"pass {p.name}.astype('{ty.dtype}')"
                )
        arrays.append(a)
    return arrays


def run(mod: tvm.IRModule, inputs, entry: str = "main", vm: relax.VirtualMachine | None = None):
    """Build (unless ``vm`` is given) and run ``entry`` on NumPy inputs (checked first: :func:`check_inputs`)."""
    ir.module_given(mod, "run")
    if vm is not None and not isinstance(vm, relax.VirtualMachine):
        raise WorkbenchError(
            f"vm must be a relax.VirtualMachine, got {type(vm).__name__}", "pass build(mod), or leave it out"
        )
    inputs = check_inputs(mod, inputs, entry)
    vm = vm or build(mod)
    args = [tvm.runtime.tensor(np.asarray(a)) for a in inputs]
    return to_numpy(vm[entry](*args))


def misplaced_buffers(lowered: tvm.IRModule) -> list:
    """Tensors of a lowered module (:func:`lower`) made in a buffer of another
    device than their own, as ``"function/var: on device 1, in storage on 0"``, and kernels handed buffers of two
    devices, as ``"function/kernel: reads alloc (on device 0) on device 1"``, the device of its last buffer (what
    it writes); a constant is on device 0, where the VM loads it (empty for a sound build). A module not lowered is
    refused in one line: it allocates nothing yet, so it would look sound."""
    left = _not_lowered(ir.module_given(lowered, "misplaced_buffers"))
    if left is not None:
        raise WorkbenchError(
            f"misplaced_buffers takes a lowered module; {left[0]} still calls {left[1]}",
            "pass what execute.lower(mod, tvm_target) gives (placed=True for a placed module)",
        )
    out = []
    for fname in ir.host_functions(lowered):
        storage, tensors = {}, {}
        for step in ir.walk(lowered[fname], descend=False):
            if step.op == "relax.vm.alloc_storage":
                storage[step.var.__chandle__()] = int(step.value.args[1].value)
            elif step.op == "relax.vm.alloc_tensor":
                held, own = step.value.args[0], int(step.value.args[4].value)
                tensors[step.var.__chandle__()] = own
                where = storage.get(held.__chandle__(), own)
                if where != own:
                    out.append(f"{fname}/{step.var.name}: on device {own}, in storage on {where}")
            elif type(step.value) is relax.Call and isinstance(step.value.op, tvm.ir.GlobalVar):
                found = [
                    ("a constant", 0) if isinstance(a, tvm.ir.GenericConst) else (a.name, tensors[a.__chandle__()])
                    for a in items(step.value.args)
                    if isinstance(a, tvm.ir.GenericConst) or a.__chandle__() in tensors
                ]
                name, got = next(((n, d) for n, d in found if d != found[-1][1]), (None, None))
                if name is not None:
                    kernel = step.value.op.name_hint
                    out.append(f"{fname}/{kernel}: reads {name} (on device {got}) on device {found[-1][1]}")
    return out


def _not_lowered(lowered: tvm.IRModule) -> tuple | None:
    """``("function/var", op)`` of the first op call left in ``lowered`` that the VM's code generation does not take
    (one that allocates or has a packed function, ``FCallPacked``), else None."""
    vm_ops = ("relax.null_value", "relax.call_builtin_with_ctx")
    for fname in ir.host_functions(lowered):
        for step in ir.walk(lowered[fname], descend=False):
            op = step.op
            if op and not op.startswith("relax.vm.") and op not in vm_ops:
                if not tvm.ir.Op.get(op).get_attr("FCallPacked"):
                    return f"{fname}/{step.var.name}", op
    return None
