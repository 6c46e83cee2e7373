"""Running nvcc for a CUDA build, and reading what a CUDA compiler made.

TVM runs "nvcc" from ``PATH`` in a ``Popen`` of its own and waits for it with no time limit. Here nvcc is run
as TVM would run it (the same flags, :func:`_command`), but by the path of the file that was checked, with its
files, its own and its tools' temporary ones (``tmpxft_*``) alike, in a folder of its own, removed as the run ends,
and in a session of its own that ends with the run: at its time limit (:func:`time_limit`), on Ctrl-C and on
SIGTERM, its processes are killed and it is reaped. Only nvcc's environment names that folder: nothing of the
process (its environment, its temporary folder) is changed, so threads may build at once.

What it made is read as the CUDA runtime would load it (:func:`made_for`): a fatbin, or a cubin (an ELF for
the GPU), for the arch asked.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import re
import signal
import struct
import subprocess
import tempfile
from pathlib import Path

import tvm
from tvm.support import nvcc as tvm_nvcc

from byoc_workbench.core.errors import WorkbenchError

#: The environment variable that sets how long nvcc may take to compile a build's kernels, in seconds.
TIME_LIMIT = "BYOC_WORKBENCH_NVCC_TIMEOUT_S"
_DEFAULT_S = 600.0


@dataclasses.dataclass(frozen=True)
class Ran:
    """What an nvcc run left: its exit status (negative: the signal that ended it; None: it ran past
    :func:`time_limit` and was stopped), what it said (its stdout and stderr), and the file it made (``b""``: none)."""

    status: int | None
    said: str
    made: bytes


def time_limit() -> float:
    """How long nvcc may take to compile a build's kernels: :data:`TIME_LIMIT`'s seconds, else 600."""
    given = os.environ.get(TIME_LIMIT, "").strip()
    if not given:
        return _DEFAULT_S
    try:
        seconds = float(given)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < float("inf"):
        raise WorkbenchError(
            f"{TIME_LIMIT}={given!r} is not a number of seconds above 0",
            f"set it to the seconds nvcc may take to compile a build's kernels (e.g. {_DEFAULT_S:g}), or unset it",
        )
    return seconds


def fatbin(path: str, code: str, arch: str, limit: float) -> Ran:
    """``code`` (CUDA C) compiled by the nvcc at ``path`` into a fatbin for ``arch`` (``sm_90``), as TVM's CUDA
    runtime asks for it, within ``limit`` s (:func:`time_limit`); its files are removed as the run ends, however it
    ends. An nvcc that cannot be started is an OSError."""
    with _ended_by_signals(), _folder() as where:
        kept = _kept() or where
        source, out = Path(kept, "tvm_kernels.cu"), Path(kept, "tvm_kernels.fatbin")
        source.write_text(code)
        status, said = _run(_command(path, arch, source, out), where, limit)
        return Ran(status, said, out.read_bytes() if out.is_file() else b"")


def _kept() -> str | None:
    """The folder TVM keeps nvcc's files in, where asked to (``TVM_KERNEL_DUMP``, else the pass context's
    ``cuda.kernels_output_dir``), made if missing; None where not."""
    kept = os.environ.get("TVM_KERNEL_DUMP") or tvm.transform.PassContext.current().config.get(
        "cuda.kernels_output_dir"
    )
    if kept:
        os.makedirs(kept, exist_ok=True)
    return str(kept) if kept else None


def _folder() -> tempfile.TemporaryDirectory:
    """A folder for nvcc's files (the kernels' CUDA C, the fatbin, what it and its tools write in their temporary
    folder) in the temporary folder, removed as it ends."""
    return tempfile.TemporaryDirectory(prefix="byoc_workbench_nvcc_", ignore_cleanup_errors=True)


def _command(path: str, arch: str, source: Path, out: Path) -> list:
    """TVM's nvcc command for a fatbin (``tvm.support.nvcc._compile_cuda_nvcc``, TVM 0.27), with ``path`` for
    "nvcc"."""
    suffix, dump = arch.removeprefix("sm_"), os.environ.get("TVM_KERNEL_DUMP")
    return [
        path,
        "--fatbin",
        "-O3",
        *(["-lineinfo", "--keep", f"--keep-dir={dump}"] if dump else []),  # TVM's switch: nvcc keeps its PTX, cubin
        *(["-g", "-G"] if os.environ.get("TVM_KERNEL_DEBUG", "0") == "1" else []),
        "-gencode",
        f"arch=compute_{suffix},code=sm_{suffix}",
        "-U__CUDA_NO_HALF_OPERATORS__",
        "-U__CUDA_NO_HALF_CONVERSIONS__",
        "-U__CUDA_NO_BFLOAT16_OPERATORS__",
        "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
        "-U__CUDA_NO_BFLOAT162_OPERATORS__",
        "-U__CUDA_NO_BFLOAT162_CONVERSIONS__",
        "--expt-relaxed-constexpr",
        "--expt-extended-lambda",
        *([] if os.environ.get("TVM_CUDA_NVCC_NO_FAST_MATH") else ["--use_fast_math"]),
        f"--ptxas-options={','.join(tvm_nvcc._ptxas_option_flags())}",  # TVM's, read from its environment variables
        "-o",
        str(out),
        str(source),
    ]


def _run(command: list, folder: str, limit: float) -> tuple:
    """``(exit status, what it said)`` of ``command`` run in ``folder``, its temporary folder too (status None: it ran
    past ``limit`` s): killed, nvcc leaves there the files it would have removed (``tmpxft_*``). Its own session, so
    that a terminal's Ctrl-C reaches Python only, and every process it started is killed with it: at the limit, and on
    any exception (Ctrl-C, SIGTERM), after which it is reaped, never left a zombie."""
    env = {**os.environ, "TMPDIR": folder, "TMP": folder, "TEMP": folder}
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=folder, env=env, start_new_session=True
    )
    try:
        said = proc.communicate(timeout=limit)[0]
    except BaseException as err:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.stdout.close()
        proc.wait()
        if isinstance(err, subprocess.TimeoutExpired):
            return None, ""
        raise
    return proc.returncode, said.decode("utf-8", errors="replace")


@contextlib.contextmanager
def _ended_by_signals():
    """Within the block, SIGTERM and SIGINT end it with a KeyboardInterrupt (nvcc stopped, its folder removed);
    after it, SIGTERM ends the process, as it would have."""
    came = []

    def stop(signum, _frame):
        came.append(signum)
        raise KeyboardInterrupt

    old = _handle(stop)
    try:
        yield
    finally:
        for signum, handler in old.items():
            signal.signal(signum, handler)
        if signal.SIGTERM in came:
            signal.raise_signal(signal.SIGTERM)


def _handle(stop) -> dict:
    """``stop`` made the handler of SIGTERM and SIGINT where they have Python's own (a caller's, the CLI's, ends the
    block itself): the handlers it replaced, by signal. Set again by Python, SIGINT's handler is Python's once more
    (a CUDA build leaves the signal with a handler of TVM's). Only the main thread sets handlers: in another, none."""
    python = {signal.SIGTERM: signal.SIG_DFL, signal.SIGINT: signal.default_int_handler}
    try:
        return {
            signum: signal.signal(signum, stop) for signum, own in python.items() if signal.getsignal(signum) == own
        }
    except ValueError:  # not the main thread: no handler runs in this one
        return {}


def version_problem(path: str) -> str:
    """What goes wrong where ``path --version`` runs, in words ("" where it exits 0), asked anew each time: an
    nvcc can break, or be mended, while a process lives."""
    try:
        status = subprocess.run([path, "--version"], capture_output=True, timeout=60).returncode
    except OSError as err:
        return f"fails: {start_problem(err, path)}"
    except subprocess.TimeoutExpired as err:
        return f"fails: {err}"
    if status < 0:
        return f"is killed by {signal.Signals(-status).name}"
    return f"exits {status}" if status else ""


def start_problem(err: OSError, path: str) -> str:
    """Why ``path`` could not be started, in words."""
    if err.errno == errno.ENOENT and os.path.isfile(path):  # a file that is there but "not found"
        return "its interpreter is missing"
    return str(err)


def made_for(binary: bytes, arch: str) -> bool:
    """Whether ``binary`` is what the CUDA runtime loads for ``arch`` (``sm_90``; ``sm_90a`` is SM 90 too): a cubin
    for it, or a fatbin holding one (compressed, its entry's SM is all that is read)."""
    sm = int(re.match(r"sm_(\d+)", arch).group(1))
    if binary[:4] == b"\x7fELF":
        return _cubin_for(binary, sm)
    return any(
        kind == _ELF_ENTRY and entry_sm == sm and (flags & _COMPRESSED or _cubin_for(payload, sm))
        for kind, entry_sm, flags, payload in _fatbin_entries(binary)
    )


_FATBIN_MAGIC, _ELF_ENTRY, _COMPRESSED = 0xBA55ED50, 2, 0x2000 | 0x8000  # magic; kind of a cubin; LZ4, ZSTD
_EM_CUDA, _CUDA_ABI_V2 = 190, 8  # ELF's machine for NVIDIA's GPUs; the ELF ABI (CUDA 12.8 on) that moved the SM


def _fatbin_entries(binary: bytes) -> list:
    """``(kind, SM, flags, payload)`` of each entry of a fatbin whose sizes all fit; [] for anything else."""
    if len(binary) < 16 or struct.unpack_from("<I", binary)[0] != _FATBIN_MAGIC:
        return []
    header, size = struct.unpack_from("<HQ", binary, 6)
    end, at, entries = header + size, header, []
    if header < 16 or end > len(binary):
        return []
    while at < end:
        if at + 48 > end:
            return []
        kind, _, entry_header, payload = struct.unpack_from("<HHIQ", binary, at)
        (sm,), (flags,) = struct.unpack_from("<I", binary, at + 28), struct.unpack_from("<Q", binary, at + 40)
        start, at = at + entry_header, at + entry_header + payload
        if entry_header < 48 or at > end:
            return []
        entries.append((kind, sm, flags, binary[start:at]))
    return entries


def _cubin_for(elf: bytes, sm: int) -> bool:
    """Whether ``elf`` is a cubin for ``sm``: a 64-bit ELF for the GPU whose flags name ``sm``, with code (a
    ``.text.<kernel>`` section that is not empty)."""
    if elf[:6] != b"\x7fELF\x02\x01" or len(elf) < 64 or struct.unpack_from("<H", elf, 18)[0] != _EM_CUDA:
        return False
    (flags,) = struct.unpack_from("<I", elf, 48)
    if (flags >> 8 if elf[8] >= _CUDA_ABI_V2 else flags) & 0xFF != sm:
        return False
    return any(name.startswith(b".text.") and size for name, size in _sections(elf))


def _sections(elf: bytes) -> list:
    """``(name, size)`` of each section of a 64-bit little-endian ELF whose section table fits; [] for one that
    does not."""
    (table,), (entry, count, names_at) = struct.unpack_from("<Q", elf, 40), struct.unpack_from("<HHH", elf, 58)
    if entry != 64 or count == 0 or names_at >= count or table + count * entry > len(elf):
        return []
    headers = [struct.unpack_from("<I4xQQQQ", elf, table + i * entry) for i in range(count)]
    _, _, _, start, size = headers[names_at]
    names = elf[start : start + size]
    if start + size > len(elf):
        return []
    return [(names[at : names.find(b"\0", at)], length) for at, _, _, _, length in headers if at < len(names)]
