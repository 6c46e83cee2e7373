"""Building for an NVIDIA GPU: the CUDA compiler TVM calls, and the pipeline it builds with.

TVM turns each kernel into CUDA C and hands it to a compiler: NVRTC by default
(``cuda-bindings``), or ``nvcc``. Neither needs a GPU, so CI compiles for CUDA on
a CPU-only machine. :func:`find` looks for ``nvcc`` in pip's CUDA toolkit
(``make setup EXTRAS=cuda`` installs it: ``cuda-toolkit[nvcc,cccl]``), then on
``PATH``, then in ``/usr/local/cuda``; failing all three it
takes NVRTC where ``cuda-bindings`` imports (PyTorch's CUDA wheels bring it).
The nvcc found is the one that runs: by its path, checked at each build, in a run of
our own (:mod:`byoc_workbench.measure.compiler.nvcc`), not TVM's search of ``PATH``.

The pipeline is upstream's for CUDA (``relax.backend.cuda.pipeline``), but for
its GPU schedules: some of dlight's rules stop on a kernel they do not handle
(the reduction rule asserts on Faster R-CNN's ``roi_align``) instead of passing it
on. Here such a rule passes the kernel to the next one, ending with dlight's
``Fallback``, which schedules any kernel, so every op of the zoo has a GPU kernel.

Where TVM's CUDA runtime does not load (no GPU driver), TVM calls no compiler: code
generation keeps the CUDA C in a module that cannot run. :func:`compile_kept` then
compiles it as TVM would on a GPU machine, so a build here still proves the compiler
takes its kernels for the asked arch.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import glob
import importlib.util
import logging
import os
import re
import resource
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import tvm
from tvm import relax
from tvm.relax.backend.cuda import pipeline as upstream
from tvm.s_tir import dlight
from tvm.support import nvcc as tvm_nvcc

from byoc_workbench.backends import base
from byoc_workbench.core import devices, files, ir_edit
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.measure.compiler import nvcc

logger = logging.getLogger(__name__)

FIX = "make setup EXTRAS=cuda (pip install 'byoc-workbench[cuda]': nvcc from PyPI, no GPU needed)"


@dataclasses.dataclass(frozen=True)
class Compiler:
    """What compiles TVM's CUDA C: ``nvcc`` (at ``path``, a file named nvcc) or ``nvrtc``."""

    name: str
    path: str = ""

    def __str__(self) -> str:
        return f"nvcc ({self.path})" if self.name == "nvcc" else "NVRTC (cuda-bindings)"


def _pip_nvcc() -> str | None:
    """``nvcc`` from pip's ``nvidia-cuda-nvcc`` (``site-packages/nvidia/cu*/bin/nvcc``, the newest), if installed."""
    spec = importlib.util.find_spec("nvidia")
    roots = spec.submodule_search_locations if spec and spec.submodule_search_locations else ()
    found = [
        path for root in roots for path in sorted(glob.glob(os.path.join(root, "cu*", "bin", "nvcc")), reverse=True)
    ]
    return found[0] if found else None


def find() -> Compiler:
    """The CUDA compiler a build here uses: the first nvcc found, which must be a program that runs, else one line;
    NVRTC where no nvcc is; a one-line error naming the extra where there is neither."""
    # The project's own (pinned by the cuda extra) before the machine's, so CI compiles with what it installed.
    for candidate in (_pip_nvcc(), shutil.which("nvcc"), *sorted(glob.glob("/usr/local/cuda*/bin/nvcc"))):
        if candidate:
            return _runs(Compiler("nvcc", os.path.abspath(candidate)))
    if importlib.util.find_spec("cuda") is not None and importlib.util.find_spec("cuda.bindings") is not None:
        return Compiler("nvrtc")
    raise WorkbenchError("No CUDA compiler here: neither nvcc nor NVRTC (cuda-bindings) was found", FIX)


def _runs(with_compiler: Compiler) -> Compiler:
    """``nvcc``, checked to be a file that runs (``nvcc --version``, asked at each call: an nvcc can break, or be
    mended, while a process lives); else one line."""
    path = with_compiler.path
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        raise _broken(with_compiler, "is not a program" + (" (it is a folder)" if os.path.isdir(path) else ""))
    wrong = nvcc.version_problem(path)
    if wrong:
        raise _broken(with_compiler, f"does not run: `nvcc --version` {wrong}")
    return with_compiler


_BLOCK = threading.local()  # a thread's compiling() block: (compiler, arch) it asks for, and what its compile raised


@contextlib.contextmanager
def compiling(with_compiler: Compiler, arch: str):
    """Within the block, TVM's CUDA runtime (on a GPU machine, where it compiles a build's kernels) compiles them with
    ``with_compiler`` for ``arch`` (:func:`_compile`): what the compiler refuses that is the user's or this machine's
    is one line, anything else TVM's, with its traceback. The block is its thread's: threads build at once, each with
    its own compiler, and nothing of the process (its environment, its temporary folder) is swapped."""
    _take_tvms_callback()
    outer = getattr(_BLOCK, "asked", None)
    _BLOCK.asked, _BLOCK.raised = (with_compiler, str(arch)), None
    try:
        yield
    except RuntimeError:  # TVM's FFI makes a RuntimeError of what its callback raised, a KeyboardInterrupt too
        raised, _BLOCK.raised = _BLOCK.raised, None
        if raised is None:
            raise
        raise raised from None
    finally:
        _BLOCK.asked = outer


@functools.cache
def _take_tvms_callback() -> None:
    """Make :func:`_callback` TVM's ``tvm_callback_cuda_compile``, once a process: its CUDA runtime compiles a build's
    kernels by calling the function of that name (TVM's own runs "nvcc" from PATH, in a Popen it waits on forever)."""
    base.register_global("tvm_callback_cuda_compile", _callback)


def _callback(code: str) -> bytes:
    """``tvm_callback_cuda_compile``: in a :func:`compiling` block, its compiler for its arch; elsewhere TVM's own."""
    asked = getattr(_BLOCK, "asked", None)
    if asked is None:
        return tvm_nvcc.tvm_callback_cuda_compile(code)
    try:
        return _compile(code, asked[1], asked[0])
    except BaseException as err:
        _BLOCK.raised = err
        raise


class _PassOn(dlight.ScheduleRule):
    """A dlight rule that passes a kernel it stops on to the next rule, instead of ending the build."""

    def __init__(self, rule: dlight.ScheduleRule):
        self.rule = rule

    def apply(self, func, target, tunable):
        try:
            return self.rule.apply(func, target, tunable)
        except (AssertionError, ValueError, RuntimeError) as err:  # dlight asserts; a schedule primitive raises
            logger.info("%s does not schedule this kernel (%s); the next rule does", type(self.rule).__name__, err)
            return None


def schedules() -> tvm.transform.Pass:
    """dlight's GPU rules in upstream's order, each passing on what it stops on, ``Fallback`` last."""
    rules = [dlight.gpu.Matmul(), dlight.gpu.GEMV(), dlight.gpu.Reduction(), dlight.gpu.GeneralReduction()]
    return dlight.ApplyDefaultSchedule(*(_PassOn(r) for r in rules), dlight.gpu.Fallback())


def pipeline(tvm_target: tvm.target.Target) -> tvm.transform.Pass:
    """Upstream's CUDA pipeline with :func:`schedules` for its last legalization pass, and
    :func:`copies_to_the_cpu` once constants are folded (before fusion, which a copy keeps apart)."""
    legalize = upstream.legalize_passes(tvm_target)
    names = [p.info.name for p in legalize[:4]]
    if type(legalize[-1]).__name__ != "ApplyDefaultSchedule" or names[2:] != ["FoldConstant", "FuseOps"]:
        raise RuntimeError("upstream's CUDA pipeline changed: its legalization passes are no longer in that order")

    @tvm.transform.module_pass(opt_level=0)
    def _pipeline(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        with tvm_target:
            passes = [
                *upstream.library_dispatch_passes(tvm_target),
                *legalize[:3],
                copies_to_the_cpu(),
                *legalize[3:-1],
                schedules(),
                *upstream.dataflow_lower_passes(tvm_target),
                *upstream.finalize_passes(tvm_target),
            ]
            return tvm.transform.Sequential(passes)(mod)

    return _pipeline


def copies_to_the_cpu() -> tvm.transform.Pass:
    """For a placed module (:func:`byoc_workbench.core.devices.place`), once legalized: what a kernel on the CPU reads
    from elsewhere, copied to the CPU first (``R.to_vdevice``).

    TVM 0.27 legalizes ``zeros_like`` and ``ones_like`` of a CPU tensor into a kernel that names no device, so it is
    built for the GPU, the module's first device; FoldConstant then makes a constant of it, which the VM loads on the
    GPU. Either way a CPU kernel would be handed a GPU buffer (what ``execute.misplaced_buffers`` finds).
    """

    @tvm.transform.module_pass(opt_level=0, name="CopiesToTheCPU")
    def _copies(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        if not devices.placed(mod):
            return mod
        gpu, bb = mod.global_infos["vdevice"][0], relax.BlockBuilder()

        def copied(binding, is_dataflow):
            value, where = binding.value, _device(binding.var.ty)
            if type(binding) is not relax.VarBinding or type(value) is not relax.Call or value.op.same_as(_TO_VDEVICE):
                return None
            if where is None or _same(where, gpu):
                return None  # it runs on the GPU
            copies: list = []

            def on_cpu(arg):
                if type(arg) is relax.Tuple:  # call_tir's arguments
                    return relax.Tuple([on_cpu(a) for a in arg.fields])
                if not isinstance(arg.ty, relax.TensorType) or _same(where, arg.ty.vdevice):
                    return arg
                moved = bb.normalize(relax.op.to_vdevice(arg, where))
                copy = (relax.DataflowVar if is_dataflow else relax.Var)(
                    f"{getattr(arg, 'name', 'constant')}_to_cpu", moved.ty
                )
                copies.append(relax.VarBinding(copy, moved))
                return copy

            call = relax.Call(value.op, [on_cpu(a) for a in value.args], value.attrs, value.ty_args)
            return [*copies, relax.VarBinding(binding.var, call)] if copies else None

        return ir_edit.map_bindings(mod, copied)

    return _copies


_TO_VDEVICE = tvm.ir.Op.get("relax.to_vdevice")


def _device(ty):
    """The virtual device a value of type ``ty`` names (a tuple's first tensor's), or None."""
    if isinstance(ty, relax.TupleType):
        return next((d for d in map(_device, ty.fields) if d is not None), None)
    return ty.vdevice if isinstance(ty, relax.TensorType) else None


def _same(device, other) -> bool:
    """Whether two virtual devices are one: TVM finds a device's index by identity (two CPUs, the twin's, are equal)
    and 0.27's ``VDevice.same_as`` recurses forever."""
    return other is not None and device.__chandle__() == other.__chandle__()


def kernel_module(executable: relax.VMExecutable):
    """The module holding a GPU build's kernels, or None for a CPU build."""
    todo = list(executable.mod.imports_)
    while todo:
        m = todo.pop()
        if m.kind == "cuda":
            return m
        todo.extend(m.imports_)
    return None


def source(executable: relax.VMExecutable) -> str:
    """The CUDA C of a GPU build's kernels ("" for a CPU build)."""
    kernels = kernel_module(executable)
    return kernels.inspect_source() if kernels is not None else ""


def compile_kept(
    executable: relax.VMExecutable, tvm_target: tvm.target.Target, with_compiler: Compiler
) -> bytes | None:
    """Compile the CUDA C that TVM kept in ``executable`` for ``tvm_target``'s arch: the binary, or None where
    TVM compiled it.

    TVM compiles a kernel module only through its CUDA runtime; without one it keeps the
    source in a module that cannot run, so an arch the compiler rejects would build. This
    compiles that source as TVM's runtime does on a GPU machine (:func:`_compile`: same flags,
    same format); a module that runs was compiled by TVM already.
    A build with no GPU kernel (every op on the CPU) has no compiler look at its arch, so it
    is checked all the same (:func:`check_arch`; None). An arch the compiler rejects is the
    user's error, a compiler that shows itself broken (it fails without a word or on no error in
    the kernels, or makes no binary for the arch) this machine's, an error in the kernels TVM's.
    """
    kernels = kernel_module(executable)
    if kernels is None:
        check_arch(tvm_target, with_compiler)
        return None
    arch = str(tvm_target.attrs["arch"])
    return None if kernels.is_runnable() else _compile(kernels.inspect_source("cuda"), arch, with_compiler)


def check_arch(tvm_target: tvm.target.Target, with_compiler: Compiler) -> None:
    """Refuse, in one line, a ``tvm_target`` whose arch ``with_compiler`` does not compile for, before anything is
    built: it compiles a kernel that does nothing, as TVM's runtime would compile the build's."""
    kernel = 'extern "C" __global__ void byoc_workbench_arch_check() {}\n'
    _compile(kernel, str(tvm_target.attrs["arch"]), with_compiler)


def _compile(code: str, arch: str, with_compiler: Compiler) -> bytes:
    """``code`` (CUDA C) compiled by ``with_compiler`` for ``arch`` (``sm_90``) as TVM's CUDA runtime asks for it
    (nvcc: a fatbin, NVRTC: a cubin), which must be what the runtime loads for that arch."""
    started = time.perf_counter()
    binary = _nvcc_fatbin(code, arch, with_compiler) if with_compiler.name == "nvcc" else _nvrtc(code, arch)
    if not nvcc.made_for(binary, arch):
        said = f"what it wrote is no fatbin or cubin for {arch} (it begins {binary[:8]!r})"
        raise _broken(with_compiler, f"exited as if it had compiled the kernels, but {said}")
    kib = len(code) // 1024
    logger.info(
        "%s compiled %d KiB of CUDA C for %s in %.1f s", with_compiler, kib, arch, time.perf_counter() - started
    )
    return binary


def _nvcc_fatbin(code: str, arch: str, with_compiler: Compiler) -> bytes:
    """What :func:`~byoc_workbench.measure.compiler.nvcc.fatbin` makes with ``with_compiler``; what the run shows to
    be the user's or this machine's is one line."""
    _check_temporary_folder(with_compiler)
    limit = nvcc.time_limit()
    try:
        ran = nvcc.fatbin(with_compiler.path, code, arch, limit)
    except OSError as err:
        if err.filename != with_compiler.path:  # not the start of nvcc
            raise
        raise _broken(with_compiler, f"does not run: {nvcc.start_problem(err, with_compiler.path)}") from None
    if ran.status is None:
        raise WorkbenchError(
            f"{with_compiler} did not finish compiling the kernels within {limit:g} s, and was stopped",
            f"check that `{with_compiler.path} --version` answers, or give it longer: {nvcc.TIME_LIMIT}=<seconds>",
        )
    if ran.status:
        raise _nvcc_failed(ran, code, arch, with_compiler)
    if not ran.made:
        raise _broken(with_compiler, "exited as if it had compiled the kernels, but wrote nothing")
    return ran.made


def _nvrtc(code: str, arch: str) -> bytes:
    """``code`` compiled by TVM's NVRTC call for ``arch`` (a cubin); what NVRTC refuses of the user's or this
    machine's (an arch, the toolkit's headers) is one line."""
    try:
        return bytes(tvm_nvcc.compile_cuda(code, target_format="cubin", arch=arch, compiler="nvrtc"))
    except RuntimeError as err:
        lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
        refused = _no_arch(lines, arch, Compiler("nvrtc"))
        said = next((ln for ln in lines if any(words in ln for words in _NO_HEADERS)), None)
        if refused is None and said is not None:
            refused = WorkbenchError(
                f"{Compiler('nvrtc')} cannot compile the kernels: it needs the CUDA toolkit's headers ({said})",
                f"{FIX}, or set CUDA_PATH to a CUDA toolkit whose include/ holds cuda_runtime.h",
            )
        if refused is None:
            raise
        raise refused from None


# What the compilers say of an arch they do not know (nvcc, NVRTC), and where NVRTC (which reads the toolkit's
# headers; nvcc brings its own) finds none: TVM's words when it has no path, no cuda_runtime.h, then NVRTC's.
_NO_ARCH = ("Unsupported gpu architecture", "invalid value for --gpu-architecture")
_NO_HEADERS = ("Cannot find CUDA path", "Cannot find CUDA headers", "cannot open source file")
# What nvcc says where it cannot write in $TMPDIR (missing, read-only), and what its shell reads in a path it is
# given (the temporary folder's): it then looks for its files elsewhere.
_NO_FOLDER = "Could not open output file"
_TMPDIR_FIX = "set TMPDIR to a folder you can write to"
_SHELL_READS = '$`"'
# What nvcc says where the host compiler it runs (gcc, from PATH) is missing, fails, or is too new for it; and where
# what failed is the CUDA C TVM wrote (nvcc's, ptxas's error in it), TVM's.
_NO_HOST = (
    "gcc: No such file or directory",
    "Failed to preprocess host compiler properties",
    "unsupported GNU version",
)
_IN_THE_KERNELS = re.compile(r"tvm_kernels\.cu\(\d+\): (catastrophic )?error|^ptxas error", re.MULTILINE)
# A line that says why nvcc stopped (nvcc's "nvcc fatal :", a tool's "error:" or "fatal error:"), not what followed
# it ("compilation terminated").
_CAUSE = re.compile(r"\berror\s*:|\bfatal\b", re.IGNORECASE)


def _nvcc_failed(ran: nvcc.Ran, code: str, arch: str, with_compiler: Compiler) -> Exception:
    """For an nvcc run that failed, one line: an arch it does not take, files it could not write, no host compiler,
    or this machine's nvcc, with the first line that says why; an error in the CUDA C TVM wrote stays TVM's (a
    RuntimeError quoting it, as TVM raises it)."""
    lines = [ln for ln in (said.strip().rstrip(".") for said in ran.said.splitlines()) if ln]
    if _IN_THE_KERNELS.search(ran.said):
        return RuntimeError(f"{code}\nCompilation error:\n{ran.said}")
    failed = _could_not_write(lines, ran.said, with_compiler) or _no_arch(lines, arch, with_compiler)
    if failed is not None:
        return failed
    if not lines:
        return _broken(with_compiler, f"failed without a word compiling the kernels ({_version_check(with_compiler)})")
    host = next((ln for ln in lines if any(words in ln for words in _NO_HOST)), None)
    if host is None:
        cause = next((ln for ln in lines if _CAUSE.search(ln)), lines[-1])
        return _broken(with_compiler, f"failed compiling the kernels: {cause}")
    gcc = shutil.which("gcc")
    return WorkbenchError(
        f"{with_compiler} cannot compile the kernels: it needs a host compiler, and "
        f"{f'gcc ({gcc}) fails' if gcc else 'no gcc is on PATH'} ({host})",
        "install gcc and g++ (e.g. `apt install g++`), or put the folder of a working gcc first on PATH",
    )


def _no_arch(lines: list, arch: str, with_compiler: Compiler) -> WorkbenchError | None:
    """One line for a compiler that says it does not know ``arch``; else None."""
    said = next((ln for ln in reversed(lines) if any(words in ln for words in _NO_ARCH)), None)
    if said is None:
        return None
    return WorkbenchError(
        f"{with_compiler} cannot compile for {arch} ({said})", f"ask for an arch it compiles: {_archs(with_compiler)}"
    )


def _broken(with_compiler: Compiler, what: str) -> WorkbenchError:
    """The line for a compiler that shows it is broken (it says nothing of a failure, or exits as if it had
    compiled, having made nothing that is one): no fault of the kernels, nor something TVM can go on with."""
    check = f"`{with_compiler.path} --version` should print its version" if with_compiler.name == "nvcc" else ""
    return WorkbenchError(
        f"{with_compiler} {what}", f"check the CUDA install{f' ({check})' if check else ''}, or reinstall it: {FIX}"
    )


def _version_check(with_compiler: Compiler) -> str:
    """What ``nvcc --version`` does, in words: a failure without a word may be the compiler's own."""
    wrong, command = nvcc.version_problem(with_compiler.path), f"`{Path(with_compiler.path).name} --version`"
    return f"{command} {wrong} too" if wrong else f"though {command} runs"


def _could_not_write(lines: list, said: str, with_compiler: Compiler) -> WorkbenchError | None:
    """One line for an nvcc that could not write its files (a file-size limit, a full disk, a ``TMPDIR`` it cannot
    write in), no fault of the kernels (:func:`~byoc_workbench.core.files.compiler_could_not_write`); else None."""
    what = f"{with_compiler} could not compile the kernels"
    folder = next((ln for ln in lines if _NO_FOLDER in ln), None)
    if folder is not None:
        return files.OutputError(f"{what}: it could not write its files ({folder})", _TMPDIR_FIX)
    limited = resource.getrlimit(resource.RLIMIT_FSIZE)[0] != resource.RLIM_INFINITY
    return files.compiler_could_not_write("File size limit exceeded" if not lines and limited else said, what)


def _check_temporary_folder(with_compiler: Compiler) -> None:
    """Refuse, in one line, a temporary folder nvcc cannot use, before a folder is made in it for nvcc's files: none
    to write in (``ulimit -f 0``, every folder read-only), or one whose path has what nvcc's shell reads."""
    try:
        folders = [tempfile.gettempdir(), os.environ.get("TMPDIR", "")]
    except FileNotFoundError as err:
        size = resource.getrlimit(resource.RLIMIT_FSIZE)[0] != resource.RLIM_INFINITY
        raise files.OutputError(
            f"{with_compiler} could not compile the kernels: {err.strerror or err}",
            "raise the limit on a file's size (ulimit -f unlimited)" if size else _TMPDIR_FIX,
        ) from None
    read = next((folder for folder in folders if any(c in folder for c in _SHELL_READS)), None)
    if read is not None:
        raise files.OutputError(
            f"{with_compiler} cannot compile the kernels in the temporary folder {read}: the shell it runs its tools "
            f"with reads the {', '.join(c for c in _SHELL_READS if c in read)} in its path",
            f"{_TMPDIR_FIX}, whose path has none of {' '.join(_SHELL_READS)}",
        )


def _archs(with_compiler: Compiler) -> str:
    """The archs ``with_compiler`` compiles for, as ``sm_75, sm_80, ...``."""
    if with_compiler.name == "nvcc":
        listed = subprocess.run([with_compiler.path, "--list-gpu-code"], capture_output=True, text=True, timeout=60)
        return ", ".join(listed.stdout.split())
    from cuda.bindings import nvrtc  # noqa: PLC0415 - optional: find() takes NVRTC only where it imports

    return ", ".join(f"sm_{a}" for a in nvrtc.nvrtcGetSupportedArchs()[1])


def loads_here() -> bool:
    """Whether this machine's TVM runtime can load a CUDA library (a GPU build kept on disk)."""
    return tvm.get_global_func("ffi.Module.load_from_bytes.cuda", allow_missing=True) is not None
