"""A CUDA build's arch and compiler, careless-user round 14: an arch named sm_50 was taken as no arch (F1); an nvcc
that failed without a word (F2), wrote nothing (F3) or wrote garbage (F4) was a traceback or trusted; SIGTERM during
nvcc left TVM's folder in the temporary folder (F5). The broken compilers are fake nvcc scripts standing in for a
broken install, run as nvcc is run (by the path found), and no GPU is needed."""

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest
from tvm.script import ir as I
from tvm.script import relax as R

from byoc_workbench.core import targets
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.measure.compiler import cuda, execute

SM90 = targets.resolve({"kind": "cuda", "arch": "sm_90"})


@I.ir_module
class Relu:
    @R.function
    def main(x: R.Tensor((1, 3, 8, 8), "float32")):
        return R.nn.relu(x)


@pytest.mark.parametrize("named", ["cuda -arch=sm_50", {"kind": "cuda", "arch": "sm_50"}])
def test_an_arch_named_sm_50_is_kept(named):
    """TVM's default arch (sm_50) was read as no arch once resolved: "no NVIDIA GPU is visible ... name the arch"
    here, the GPU's own arch on a GPU machine. nvcc then takes it or says it does not (CUDA 13: Turing on)."""
    resolved = targets.resolve(named)
    assert targets.label(resolved) == targets.label(targets.resolve(resolved)) == "cuda sm_50"
    try:
        cuda.find()
    except WorkbenchError as err:
        pytest.skip(str(err))  # no CUDA compiler here
    try:
        execute.compile(Relu, named)
    except WorkbenchError as err:
        assert "\n" not in str(err) and "cannot compile for sm_50 (" in str(err)


def _nvcc(tmp_path, body: str) -> cuda.Compiler:
    """A fake nvcc of ``body`` (sh); ``$out`` is the file TVM asks for (-o)."""
    fake = tmp_path / "bin" / "nvcc"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\nout=""; prev=""\nfor a; do [ "$prev" = -o ] && out="$a"; prev="$a"; done\n{body}\n')
    fake.chmod(0o755)
    return cuda.Compiler("nvcc", str(fake))


@pytest.mark.parametrize(
    "body, said",
    [
        ("exit 1", "failed without a word compiling the kernels (`nvcc --version` exits 1 too)"),
        ("kill -9 $$", "failed without a word compiling the kernels (`nvcc --version` is killed by SIGKILL too)"),
        ("exit 0", "exited as if it had compiled the kernels, but wrote nothing"),
        (': > "$out"', "exited as if it had compiled the kernels, but wrote nothing"),
        (
            'echo garbage > "$out"',
            "exited as if it had compiled the kernels, but what it wrote is no fatbin or cubin for sm_90 "
            "(it begins b'garbage\\n')",
        ),
    ],
    ids=["exit 1", "SIGKILL", "no file", "empty file", "garbage"],
)
def test_a_broken_nvcc_is_one_line(tmp_path, body, said):
    """A traceback quoting the kernels (F2), TVM's "[Errno 2] ... tvm_kernels.fatbin" (F3), a build that took
    garbage for a fatbin (F4)."""
    compiler = _nvcc(tmp_path, body)
    with pytest.raises(WorkbenchError) as err:
        cuda.check_arch(SM90, compiler)
    assert str(err.value) == (
        f"error: {compiler} {said}. Fix: check the CUDA install (`{compiler.path} --version` should print its "
        f"version), or reinstall it: {cuda.FIX}."
    )


def test_a_fatbin_leaves_nothing_behind(tmp_path):
    try:
        compiler = cuda.find()
    except WorkbenchError as err:
        pytest.skip(str(err))  # no CUDA compiler here
    if compiler.name != "nvcc":
        pytest.skip("NVRTC compiles here: it makes no files")
    handler, folder = signal.getsignal(signal.SIGTERM), tempfile.tempdir
    cuda.check_arch(SM90, _nvcc(tmp_path, f'exec "{compiler.path}" "$@"'))
    assert signal.getsignal(signal.SIGTERM) == handler and tempfile.tempdir == folder


_HANG = """
import sys
from byoc_workbench.core import targets
from byoc_workbench.measure.compiler import cuda
cuda.check_arch(targets.resolve({"kind": "cuda", "arch": "sm_90"}), cuda.Compiler("nvcc", sys.argv[1]))
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_nvcc_runs_leaves_no_folder(tmp_path, signum):
    """TVM's folder for nvcc's files (tvm_kernels.cu) stayed in /tmp after SIGTERM (F5); nvcc that hangs was left
    running (TVM waited for it with no time limit; since round 17 it ends with the build)."""
    pid = tmp_path / "nvcc.pid"
    compiler = _nvcc(tmp_path, f'echo $$ > "{pid}"; exec sleep 60')
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    build = subprocess.Popen(
        [sys.executable, "-c", _HANG, compiler.path],
        env={**os.environ, "TMPDIR": str(temporary)},
        stderr=subprocess.DEVNULL,
    )
    try:
        while not pid.exists() or not pid.read_text().strip():
            assert build.poll() is None, "the build ended before nvcc ran"
            time.sleep(0.05)
        build.send_signal(signum)
        build.wait(timeout=60)
    finally:
        build.kill()
        if pid.exists() and pid.read_text().strip():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid.read_text()), signal.SIGKILL)  # the fake nvcc, orphaned
    assert build.returncode == -signum  # Ctrl-C: a KeyboardInterrupt (round 15), not a RuntimeError
    assert not list(temporary.iterdir())
