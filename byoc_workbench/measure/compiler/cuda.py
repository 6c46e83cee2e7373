"""Building for an NVIDIA GPU: the CUDA compiler TVM calls, and the pipeline it builds with.

TVM turns each kernel into CUDA C and hands it to a compiler: NVRTC by default
(``cuda-bindings``), or ``nvcc``. Neither needs a GPU, so CI compiles for CUDA on
a CPU-only machine. :func:`compiler` looks for ``nvcc`` in pip's CUDA toolkit
(``make setup EXTRAS=cuda`` installs it: ``cuda-toolkit[nvcc,cccl]``), then on
``PATH``, then in ``/usr/local/cuda``; failing all three it
takes NVRTC where ``cuda-bindings`` imports (PyTorch's CUDA wheels bring it).

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
import errno
import glob
import importlib.util
import logging
import os
import re
import resource
import shutil
import signal
import struct
import subprocess
import tempfile
import time
from pathlib import Path

import tvm
from tvm import relax
from tvm.relax.backend.cuda import pipeline as upstream
from tvm.s_tir import dlight

from byoc_workbench.core import devices, files, ir_edit
from byoc_workbench.core.errors import WorkbenchError

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
        nvcc for root in roots for nvcc in sorted(glob.glob(os.path.join(root, "cu*", "bin", "nvcc")), reverse=True)
    ]
    return found[0] if found else None


def find() -> Compiler:
    """The CUDA compiler a build here uses: the first nvcc found, which must be a program that runs, else one line
    (TVM runs "nvcc" from PATH, whose search passes over a file that cannot run, to another nvcc); NVRTC where no
    nvcc is; a one-line error naming the extra where there is neither."""
    # The project's own (pinned by the cuda extra) before the machine's, so CI compiles with what it installed.
    for candidate in (_pip_nvcc(), shutil.which("nvcc"), *sorted(glob.glob("/usr/local/cuda*/bin/nvcc"))):
        if candidate:
            return _runs(Compiler("nvcc", os.path.abspath(candidate)))
    if importlib.util.find_spec("cuda") is not None and importlib.util.find_spec("cuda.bindings") is not None:
        return Compiler("nvrtc")
    raise WorkbenchError("No CUDA compiler here: neither nvcc nor NVRTC (cuda-bindings) was found", FIX)


def _runs(nvcc: Compiler) -> Compiler:
    """``nvcc``, checked to be a file that runs (``nvcc --version``, once a process); else one line."""
    if not os.path.isfile(nvcc.path) or not os.access(nvcc.path, os.X_OK):
        raise _broken(nvcc, "is not a program" + (" (it is a folder)" if os.path.isdir(nvcc.path) else ""))
    wrong = _version_run(nvcc.path)
    if wrong:
        raise _broken(nvcc, f"does not run: `nvcc --version` {wrong}")
    return nvcc


@contextlib.contextmanager
def compiling(with_compiler: Compiler, arch=None):
    """Within the block, TVM compiles CUDA C with ``with_compiler`` (TVM reads two environment variables; it runs
    "nvcc" from PATH, where the block puts the folder of ``with_compiler.path`` first), for ``arch``: what the
    compiler refuses that is the user's or this machine's, or that shows it broken (:func:`_refusal`), is one line,
    anything else TVM's, with its traceback. nvcc's files are removed as the block ends (:func:`_nvcc_folder`).

    TVM waits for nvcc with no time limit (``Popen.communicate()`` in ``tvm.support.nvcc``, also where its runtime
    calls it on a GPU machine), so an nvcc that hangs hangs the build: bounding it would take a copy of TVM's call.
    """
    if with_compiler.name == "nvcc":
        _check_temporary_folder(with_compiler)
    saved = {k: os.environ.get(k) for k in ("TVM_CUDA_COMPILE_MODE", "PATH")}
    os.environ["TVM_CUDA_COMPILE_MODE"] = with_compiler.name
    if with_compiler.name == "nvcc":  # TVM runs "nvcc" from PATH
        os.environ["PATH"] = os.pathsep.join([str(Path(with_compiler.path).parent), saved["PATH"] or ""])
    try:
        with _nvcc_folder() if with_compiler.name == "nvcc" else contextlib.nullcontext():
            yield
    except RuntimeError as err:  # TVM quotes the whole source, then what the compiler said
        refused = _refusal(err, arch, with_compiler)
        if refused is None:
            raise
        raise refused from None
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


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
    runs TVM's own compile callback on that source, the one its runtime calls on a GPU
    machine (same flags, same format); a module that runs was compiled by TVM already.
    A build with no GPU kernel (every op on the CPU) has no compiler look at its arch, so it
    is checked all the same (:func:`check_arch`; None). An arch the compiler rejects is the
    user's error, a compiler that shows itself broken (it fails without a word or on no error in
    the kernels, or makes no binary) this machine's, an error in the kernels TVM's.
    """
    kernels = kernel_module(executable)
    if kernels is None:
        check_arch(tvm_target, with_compiler)
        return None
    return None if kernels.is_runnable() else _compile(kernels.inspect_source("cuda"), tvm_target, with_compiler)


def check_arch(tvm_target: tvm.target.Target, with_compiler: Compiler) -> None:
    """Refuse, in one line, a ``tvm_target`` whose arch ``with_compiler`` does not compile for, before anything is
    built: it compiles a kernel that does nothing, as TVM's runtime would compile the build's."""
    _compile('extern "C" __global__ void byoc_workbench_arch_check() {}\n', tvm_target, with_compiler)


def _compile(code: str, tvm_target: tvm.target.Target, with_compiler: Compiler) -> bytes:
    started = time.perf_counter()
    with tvm_target, compiling(with_compiler, tvm_target.attrs.get("arch")):
        binary = bytes(tvm.get_global_func("tvm_callback_cuda_compile")(code))
    if not _compiled(binary):  # TVM hands on whatever nvcc wrote
        said = f"what it wrote is no fatbin, cubin or PTX (it begins {binary[:8]!r})"
        raise _broken(with_compiler, f"exited as if it had compiled the kernels, but {said}")
    logger.info(
        "%s compiled %d KiB of CUDA C for %s in %.1f s",
        with_compiler,
        len(code) // 1024,
        tvm_target.attrs.get("arch"),
        time.perf_counter() - started,
    )
    return binary


def _compiled(binary: bytes) -> bool:
    """Whether ``binary`` is what a CUDA compiler makes: a fatbin whose header's sizes fit the file, a cubin (an ELF
    for EM_CUDA), or PTX (with its ``.version`` and ``.target``)."""
    if binary[:4] == _FATBIN and len(binary) >= 16:
        header, size = struct.unpack_from("<HQ", binary, 6)
        return header >= 16 and 0 < size <= len(binary) - header
    if binary[:4] == b"\x7fELF" and len(binary) >= 52 and binary[5] in (1, 2):  # 1, 2: little-, big-endian
        return struct.unpack_from("<H" if binary[5] == 1 else ">H", binary, 18)[0] == _EM_CUDA
    return bool(_PTX_VERSION.search(binary) and _PTX_TARGET.search(binary))


_FATBIN, _EM_CUDA = b"\x50\xed\x55\xba", 190  # a fatbin's magic (0xBA55ED50, little-endian); ELF's machine: CUDA
_PTX_VERSION = re.compile(rb"^\s*\.version\s+\d+\.\d+", re.MULTILINE)
_PTX_TARGET = re.compile(rb"^\s*\.target\s+\w+", re.MULTILINE)
# What TVM says of an nvcc that made nothing (or an empty file) though it exited 0, and where nvcc said nothing.
_NO_OUTPUT = re.compile(r"No such file or directory: '.*tvm_kernels\.\w+'|Compilation error: empty result")
_SAID_NOTHING = ["Compilation error:"]
# What the compilers say of an arch they do not know (nvcc, NVRTC), and where NVRTC (which reads the toolkit's
# headers; nvcc brings its own) finds none: TVM's words when it has no path, no cuda_runtime.h, then NVRTC's.
_NO_ARCH = ("Unsupported gpu architecture", "invalid value for --gpu-architecture")
_NO_HEADERS = ("Cannot find CUDA path", "Cannot find CUDA headers", "cannot open source file")
# What nvcc says where it cannot write in $TMPDIR (missing, read-only).
_NO_FOLDER = "Could not open output file"
_TMPDIR_FIX = "set TMPDIR to a folder you can write to"
# What nvcc says where the host compiler it runs (gcc, from PATH) is missing, fails, or is too new for it; and where
# what failed is the CUDA C TVM wrote (nvcc's, ptxas's error in it), TVM's.
_NO_HOST = (
    "gcc: No such file or directory",
    "Failed to preprocess host compiler properties",
    "unsupported GNU version",
)
_IN_THE_KERNELS = re.compile(r"tvm_kernels\.cu\(\d+\): (catastrophic )?error|^ptxas error", re.MULTILINE)


def _refusal(err: RuntimeError, arch, with_compiler: Compiler) -> WorkbenchError | None:
    """The user's or this machine's error in what compiling CUDA C raised (an arch the compiler does not take,
    headers NVRTC cannot find, an output it could not write, nvcc or its host compiler failing), as one line; None
    for anything else (an error in the CUDA C TVM wrote, no compile's failure), which is TVM's."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    could_not_write = _could_not_write(str(err), lines, with_compiler)
    if could_not_write is not None:
        return could_not_write
    if _NO_OUTPUT.search(str(err)):
        return _broken(with_compiler, "exited as if it had compiled the kernels, but wrote nothing")
    if lines[-1:] == _SAID_NOTHING and with_compiler.name == "nvcc":
        return _broken(with_compiler, f"failed without a word compiling the kernels ({_version_check(with_compiler)})")
    said = next((ln for ln in reversed(lines) if any(words in ln for words in _NO_ARCH)), None)
    if said is not None:
        fix = f"ask for an arch it compiles: {_archs(with_compiler)}"
        return WorkbenchError(f"{with_compiler} cannot compile for {arch} ({said})", fix)
    said = next((ln for ln in lines if any(words in ln for words in _NO_HEADERS)), None)
    if said is not None:
        return WorkbenchError(
            f"{with_compiler} cannot compile the kernels: it needs the CUDA toolkit's headers ({said})",
            f"{FIX}, or set CUDA_PATH to a CUDA toolkit whose include/ holds cuda_runtime.h",
        )
    return _nvcc_failed(str(err), with_compiler)


def _nvcc_failed(said: str, with_compiler: Compiler) -> WorkbenchError | None:
    """For nvcc failing as TVM quotes it (the CUDA C, then ``Compilation error:``, then what nvcc said), one line:
    its host compiler's, or this machine's nvcc's; None where what failed is the CUDA C (TVM's), or for no
    compile's failure."""
    _, compiled, nvcc_said = said.rpartition("\nCompilation error:\n")
    lines = [ln for ln in (said.strip().rstrip(".") for said in nvcc_said.splitlines()) if ln]
    if with_compiler.name != "nvcc" or not compiled or not lines or _IN_THE_KERNELS.search(nvcc_said):
        return None
    host = next((ln for ln in lines if any(words in ln for words in _NO_HOST)), None)
    if host is None:
        return _broken(with_compiler, f"failed compiling the kernels: {lines[-1]}")
    gcc = shutil.which("gcc")
    return WorkbenchError(
        f"{with_compiler} cannot compile the kernels: it needs a host compiler, and "
        f"{f'gcc ({gcc}) fails' if gcc else 'no gcc is on PATH'} ({host})",
        "install gcc and g++ (e.g. `apt install g++`), or put the folder of a working gcc first on PATH",
    )


def _broken(with_compiler: Compiler, what: str) -> WorkbenchError:
    """The line for a compiler that shows it is broken (it says nothing of a failure, or exits as if it had
    compiled, having made nothing that is one): no fault of the kernels, nor something TVM can go on with."""
    check = f"`{with_compiler.path} --version` should print its version" if with_compiler.name == "nvcc" else ""
    return WorkbenchError(
        f"{with_compiler} {what}", f"check the CUDA install{f' ({check})' if check else ''}, or reinstall it: {FIX}"
    )


def _version_check(with_compiler: Compiler) -> str:
    """What ``nvcc --version`` does, in words: TVM keeps no exit status of the compile it ran."""
    wrong, command = _version_run(with_compiler.path), f"`{Path(with_compiler.path).name} --version`"
    return f"{command} {wrong} too" if wrong else f"though {command} runs"


def _version_run(path: str) -> str:
    """What goes wrong where ``path --version`` runs, in words ("" where it exits 0): once a process for an nvcc
    that runs, every time for one that does not (it may be mended meanwhile)."""
    if path in _RAN:
        return ""
    try:
        status = subprocess.run([path, "--version"], capture_output=True, timeout=60).returncode
    except OSError as err:  # a file that is there but "not found": the interpreter it names is not
        missing = err.errno == errno.ENOENT and os.path.isfile(path)
        return "fails: its interpreter is missing" if missing else f"fails: {err}"
    except subprocess.TimeoutExpired as err:
        return f"fails: {err}"
    if status < 0:
        return f"is killed by {signal.Signals(-status).name}"
    if status:
        return f"exits {status}"
    _RAN.add(path)
    return ""


_RAN: set = set()  # the nvcc paths whose --version ran


def _could_not_write(said: str, lines: list, with_compiler: Compiler) -> WorkbenchError | None:
    """One line for a compiler that could not write its files (a file-size limit, a full disk, a ``TMPDIR`` it
    cannot write in), no fault of the kernels (:func:`~byoc_workbench.core.files.compiler_could_not_write`); else
    None."""
    what = f"{with_compiler} could not compile the kernels"
    folder = next((ln for ln in lines if _NO_FOLDER in ln), None)
    if folder is not None:
        return files.OutputError(f"{what}: it could not write its files ({folder})", _TMPDIR_FIX)
    silent = lines[-1:] == ["Compilation error:"]  # nvcc killed by SIGXFSZ says nothing
    limited = resource.getrlimit(resource.RLIMIT_FSIZE)[0] != resource.RLIM_INFINITY
    return files.compiler_could_not_write("File size limit exceeded" if silent and limited else said, what)


@contextlib.contextmanager
def _nvcc_folder():
    """Within the block, TVM makes its folder for nvcc's files (the kernels' CUDA C, nvcc's output) in one of ours,
    removed as the block ends: on Ctrl-C, and on SIGTERM, which left to its default ends the process at once and
    leaves TVM's folder behind. Here SIGTERM ends the block first, then the process, as it would have; Ctrl-C is a
    KeyboardInterrupt, which TVM's FFI makes a RuntimeError of where it is raised in TVM's compile callback."""
    came = []

    def stop(signum, _frame):
        came.append(signum)
        raise KeyboardInterrupt

    old = _handle(stop)
    saved = tempfile.tempdir
    try:
        with tempfile.TemporaryDirectory(prefix="byoc_workbench_nvcc_", ignore_cleanup_errors=True) as folder:
            tempfile.tempdir = folder  # what TVM's utils.tempdir() makes its folder in
            yield
    finally:
        tempfile.tempdir = saved
        for signum, handler in old.items():
            signal.signal(signum, handler)
        if signal.SIGTERM in came:
            signal.raise_signal(signal.SIGTERM)
        if came:
            raise KeyboardInterrupt from None


def _handle(stop) -> dict:
    """``stop`` made the handler of SIGTERM and SIGINT where they have Python's own (a caller's, the CLI's, ends the
    block itself): the handlers it replaced, by signal. Set by Python, it interrupts TVM's read of nvcc's output,
    which Python's handler of SIGINT no longer does once a CUDA build is lowered (it is left with SA_RESTART)."""
    python = {signal.SIGTERM: signal.SIG_DFL, signal.SIGINT: signal.default_int_handler}
    try:
        return {
            signum: signal.signal(signum, stop) for signum, own in python.items() if signal.getsignal(signum) == own
        }
    except ValueError:  # not the main thread: no handler runs in this one
        return {}


def _check_temporary_folder(with_compiler: Compiler) -> None:
    """Refuse, in one line, a process that finds no temporary folder to write in (``ulimit -f 0``, every folder
    read-only), before TVM makes one for nvcc's files: it would fail and leave a traceback behind, at exit."""
    try:
        tempfile.gettempdir()
    except FileNotFoundError as err:
        size = resource.getrlimit(resource.RLIMIT_FSIZE)[0] != resource.RLIM_INFINITY
        raise files.OutputError(
            f"{with_compiler} could not compile the kernels: {err.strerror or err}",
            "raise the limit on a file's size (ulimit -f unlimited)" if size else _TMPDIR_FIX,
        ) from None


def _archs(with_compiler: Compiler) -> str:
    """The archs ``with_compiler`` compiles for, as ``sm_75, sm_80, ...``."""
    if with_compiler.name == "nvcc":
        listed = subprocess.run([with_compiler.path, "--list-gpu-code"], capture_output=True, text=True).stdout
        return ", ".join(listed.split())
    from cuda.bindings import nvrtc  # noqa: PLC0415 - optional: find() takes NVRTC only where it imports

    return ", ".join(f"sm_{a}" for a in nvrtc.nvrtcGetSupportedArchs()[1])


def loads_here() -> bool:
    """Whether this machine's TVM runtime can load a CUDA library (a GPU build kept on disk)."""
    return tvm.get_global_func("ffi.Module.load_from_bytes.cuda", allow_missing=True) is not None
