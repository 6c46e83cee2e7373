"""A CUDA build's compiler, careless-user round 15: an nvcc failing with words nobody knows (C4), and one without a
host compiler (C5), dumped the kernels' CUDA C with a traceback; find() took a folder named nvcc, or a script whose
interpreter is missing, and TVM then ran another nvcc from PATH (C6); junk beginning like a cubin or PTX was taken as
compiled (C7); Ctrl-C while nvcc ran was a bare RuntimeError (C8). Round 17 runs nvcc itself, by its path. The broken
compilers are fake nvcc scripts (or a fake gcc) standing in for a broken install; no GPU is needed."""

import contextlib
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_cuda_round14_careless import SM90, _nvcc  # a sibling: pytest puts this folder on sys.path

from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.measure.compiler import cuda

# A fake nvcc that says its version, as every nvcc does, then does ``body``.
VERSION = 'case "$1" in --version) echo "Cuda compilation tools"; exit 0;; esac\n'


def _fix(compiler) -> str:
    return f"Fix: check the CUDA install (`{compiler.path} --version` should print its version), or reinstall it"


def test_nvcc_failing_with_unknown_words_is_one_line(tmp_path):
    """C4: a RuntimeError quoting all the CUDA C, then "@@@ junk"."""
    compiler = _nvcc(tmp_path, VERSION + 'echo "some words"; echo "@@@ junk"; exit 3')
    with pytest.raises(WorkbenchError) as err:
        cuda.check_arch(SM90, compiler)
    assert str(err.value).startswith(f"error: {compiler} failed compiling the kernels: @@@ junk. {_fix(compiler)}")


def test_an_error_in_the_kernels_or_elsewhere_is_tvms(tmp_path):
    """What nvcc says of the CUDA C TVM wrote is TVM's bug, and so is a RuntimeError that is no compile's."""
    said = 'echo "/tmp/x/tvm_kernels.cu(3): error: identifier \\"y\\" is undefined"; exit 1'
    with pytest.raises(RuntimeError, match=r"tvm_kernels\.cu\(3\): error"):
        cuda.check_arch(SM90, _nvcc(tmp_path, VERSION + said))
    with (
        pytest.raises(RuntimeError, match="^a bug of TVM's$"),
        cuda.compiling(cuda.Compiler("nvcc", "/x/nvcc"), "sm_90"),
    ):
        raise RuntimeError("a bug of TVM's")


def _real_nvcc() -> cuda.Compiler:
    try:
        compiler = cuda.find()
    except WorkbenchError as err:
        pytest.skip(str(err))  # no CUDA compiler here
    if compiler.name != "nvcc":
        pytest.skip("NVRTC compiles here: it needs no host compiler")
    return compiler


FIX_GCC = "Fix: install gcc and g++ (e.g. `apt install g++`), or put the folder of a working gcc first on PATH."


def test_no_gcc_on_path_is_one_line(tmp_path, monkeypatch):
    """C5: a GPU machine without build tools; nvcc needs nothing else on PATH (an empty folder)."""
    compiler = _real_nvcc()
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(WorkbenchError) as err:
        cuda.check_arch(SM90, compiler)
    assert str(err.value).startswith(
        f"error: {compiler} cannot compile the kernels: it needs a host compiler, and no gcc is on PATH (gcc: No such"
    )
    assert str(err.value).endswith(FIX_GCC)


def test_a_broken_gcc_is_one_line(tmp_path, monkeypatch):
    compiler = _real_nvcc()
    gcc = tmp_path / "gcc"
    gcc.write_text("#!/bin/sh\necho 'gcc: junk failure'; exit 1\n")
    gcc.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(WorkbenchError) as err:
        cuda.check_arch(SM90, compiler)
    assert str(err.value).startswith(
        f"error: {compiler} cannot compile the kernels: it needs a host compiler, and gcc ({gcc}) fails "
        "(nvcc fatal : Failed to preprocess host compiler properties)"
    )
    assert str(err.value).endswith(FIX_GCC)


def _shadow(tmp_path, body: str | None):
    """A package ``nvidia`` whose ``cu13/bin/nvcc`` is ``body`` (sh; None: a folder), shadowing pip's for a process
    run with :func:`_python`, so that find() takes it first."""
    nvcc = tmp_path / "nvidia" / "cu13" / "bin" / "nvcc"
    nvcc.mkdir(parents=True) if body is None else nvcc.parent.mkdir(parents=True)
    (tmp_path / "nvidia" / "__init__.py").write_text("")
    if body is not None:
        nvcc.write_text(body)
        nvcc.chmod(0o755)
    return nvcc


def _python(tmp_path, script: str, **popen) -> subprocess.Popen:
    """``script`` run by a Python that finds :func:`_shadow`'s nvcc, with an nvcc that logs that it ran first on
    PATH (the one TVM would run, were it to run "nvcc" from PATH), and a temporary folder of its own."""
    decoy = tmp_path / "decoy" / "nvcc"
    decoy.parent.mkdir()
    decoy.write_text(f'#!/bin/sh\necho "$0" >> {tmp_path / "decoy.log"}\nexit 1\n')
    decoy.chmod(0o755)
    (tmp_path / "tmp").mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p),
        "PATH": os.pathsep.join([str(decoy.parent), os.environ["PATH"]]),
        "TMPDIR": str(tmp_path / "tmp"),
        "BYOC_WORKBENCH_CACHE": str(tmp_path / "cache"),
    }
    (tmp_path / "script.py").write_text(script)
    return subprocess.Popen([sys.executable, str(tmp_path / "script.py")], env=env, text=True, **popen)


_FIND = """
from byoc_workbench.core import targets
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.measure.compiler import cuda
try:
    found = [cuda.find() for _ in range(3)][0]
    cuda.check_arch(targets.resolve({"kind": "cuda", "arch": "sm_90"}), found)
    print(found)
except WorkbenchError as err:
    print(err)
"""


@pytest.mark.parametrize(
    "body, said",
    [
        (None, "is not a program (it is a folder)"),
        ("#!/nonexistent/interp\n", "does not run: `nvcc --version` fails: its interpreter is missing"),
        ("#!/bin/sh\nexit 1\n", "does not run: `nvcc --version` exits 1"),
    ],
    ids=["a folder", "no interpreter", "exits 1"],
)
def test_find_takes_no_nvcc_that_does_not_run(tmp_path, body, said):
    """C6: find() took it, TVM's search of PATH passed over it, and the decoy compiled."""
    nvcc = _shadow(tmp_path, body)
    with _python(tmp_path, _FIND, stdout=subprocess.PIPE) as build:
        out = build.communicate(timeout=300)[0].strip()
    compiler = cuda.Compiler("nvcc", str(nvcc))
    assert out == f"error: {compiler} {said}. {_fix(compiler)}: {cuda.FIX}."
    assert not (tmp_path / "decoy.log").exists()


def test_the_nvcc_found_is_checked_at_each_find_and_is_what_compiles(tmp_path):
    """C6: exactly the file find() took compiles, and it is asked for its version at each find() (round 17: an nvcc
    can break while a process lives)."""
    log, real = tmp_path / "nvcc.log", _real_nvcc()
    nvcc = _shadow(tmp_path, f'#!/bin/sh\necho "$0 $1" >> {log}\nexec "{real.path}" "$@"\n')
    with _python(tmp_path, _FIND, stdout=subprocess.PIPE) as build:
        assert build.communicate(timeout=300)[0].strip() == str(cuda.Compiler("nvcc", str(nvcc)))
    ran = log.read_text().splitlines()
    assert ran[:3] == [f"{nvcc} --version"] * 3 and len(ran) == 4 and ran[3].startswith(f"{nvcc} --fatbin")
    assert not (tmp_path / "decoy.log").exists()


def test_an_nvcc_mended_is_taken_in_the_same_process(tmp_path):
    """The Fix of a broken nvcc is to mend it: a notebook's next try takes it (a failure is not kept)."""
    compiler = _nvcc(tmp_path, "exit 1")
    with pytest.raises(WorkbenchError, match="does not run: `nvcc --version` exits 1"):
        cuda._runs(compiler)
    Path(compiler.path).write_text("#!/bin/sh\nexit 0\n")
    assert cuda._runs(compiler) == compiler


def _elf(machine: int) -> bytes:
    """A 64-bit little-endian ELF header for ``machine``."""
    return b"\x7fELF\x02\x01\x01" + bytes(9) + struct.pack("<HH", 2, machine) + bytes(44)


_FATBIN = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 8)


@pytest.mark.parametrize(
    "made",
    [
        b"\x7fELFjunkjunk",
        _elf(62),  # x86-64
        _elf(190),  # EM_CUDA, but a header and nothing else (round 17)
        b"// hello\nnot ptx at all",
        b"//\n.version 9.0\n.target sm_90\n.address_size 64\n",  # PTX: the runtime is handed a fatbin or a cubin
        _FATBIN + bytes(4),  # its header says 8 bytes follow
        _FATBIN + bytes(8),  # no entry in them (round 17)
    ],
    ids=["ELF junk", "x86 ELF", "ELF header", "comment", "PTX", "short fatbin", "empty fatbin"],
)
def test_what_nvcc_wrote_is_checked(tmp_path, made):
    """C7: junk beginning with ELF's magic, or with a comment, was taken as compiled."""
    (tmp_path / "made").write_bytes(made)
    compiler = _nvcc(tmp_path, f'cat "{tmp_path / "made"}" > "$out"')
    handlers = [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)]
    with pytest.raises(WorkbenchError) as err:
        cuda.check_arch(SM90, compiler)
    assert [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)] == handlers
    assert str(err.value).startswith(
        f"error: {compiler} exited as if it had compiled the kernels, but what it wrote is no fatbin or cubin for "
        f"sm_90 (it begins {made[:8]!r}). {_fix(compiler)}"
    )


_BUILD = """
from tvm.script import ir as I
from tvm.script import relax as R
from byoc_workbench.measure.compiler import execute
@I.ir_module
class Relu:
    @R.function
    def main(x: R.Tensor((8,), "float32")):
        return R.nn.relu(x)
execute.compile(Relu, {"kind": "cuda", "arch": "sm_90"})
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_nvcc_builds_stops_it_cleanly(tmp_path, signum):
    """C8: Ctrl-C while nvcc ran was a bare RuntimeError (TVM's FFI made one of the KeyboardInterrupt raised in its
    callback): now a KeyboardInterrupt, which ends Python with SIGINT's status (130 in a shell). SIGTERM ends it as
    it did. Either leaves nothing in the temporary folder."""
    pid = tmp_path / "nvcc.pid"
    _shadow(tmp_path, f'#!/bin/sh\n{VERSION}echo $$ > "{pid}"\nexec sleep 60\n')
    build = _python(tmp_path, _BUILD, stderr=subprocess.PIPE)
    try:
        while not pid.exists() or not pid.read_text().strip():
            assert build.poll() is None, "the build ended before nvcc ran"
            time.sleep(0.05)
        build.send_signal(signum)
        said = build.communicate(timeout=60)[1]
    finally:
        build.kill()
        if pid.exists() and pid.read_text().strip():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid.read_text()), signal.SIGKILL)  # the fake nvcc, orphaned
    assert build.returncode == -signum, said
    if signum == signal.SIGINT:
        assert said.strip().splitlines()[-1] == "KeyboardInterrupt" and "RuntimeError" not in said
    assert not list((tmp_path / "tmp").iterdir())
    assert not (tmp_path / "decoy.log").exists()
