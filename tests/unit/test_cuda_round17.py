"""A CUDA build's compiler, careless-user round 17: what nvcc wrote was taken for a build of the arch asked when it
was a header and nothing else, PTX, or a fatbin for another arch (C3); the nvcc checked once was trusted ever after,
and TVM's search of PATH could run another one (C4); Ctrl-C left nvcc running, then a zombie, in a process that lives
on (C5); two threads building at once swapped PATH and the temporary folder under each other (C6); the line shown of
a failure was nvcc's last ("compilation terminated"), not its cause (C7); an nvcc that hangs hung the build. The
broken compilers are fake nvcc scripts standing in for a broken install, or wrap the real nvcc; no GPU is needed."""

import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
import tvm
from test_cuda_round14_careless import SM90, _nvcc  # siblings: pytest puts this folder on sys.path
from test_cuda_round15 import VERSION, _fix, _real_nvcc

from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.measure.compiler import cuda

KERNEL = 'extern "C" __global__ void k(float* x) { x[0] = 1; }\n'


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict:
    """What the real nvcc makes of :data:`KERNEL`, by name."""
    real, folder = _real_nvcc(), tmp_path_factory.mktemp("made")
    (folder / "k.cu").write_text(KERNEL)
    flags = {
        "sm_90 fatbin": ["--fatbin", "-gencode", "arch=compute_90,code=sm_90"],
        "sm_90 fatbin, compressed": ["--fatbin", "-gencode", "arch=compute_90,code=sm_90", "--compress-mode=size"],
        "sm_90 cubin": ["--cubin", "-arch", "sm_90"],
        "sm_75 fatbin": ["--fatbin", "-gencode", "arch=compute_75,code=sm_75"],
        "sm_75 cubin": ["--cubin", "-arch", "sm_75"],
    }
    for name, asked in flags.items():
        subprocess.run([real.path, *asked, "-o", folder / name, folder / "k.cu"], check=True, capture_output=True)
    return {name: (folder / name).read_bytes() for name in flags}


def _cuda_elf_header() -> bytes:
    """A 64-bit ELF header for NVIDIA's GPUs, for sm_90 (CUDA 13's ABI: the SM in the flags' second byte), with no
    section after it."""
    return (
        b"\x7fELF\x02\x01\x01\x41\x08"
        + bytes(7)
        + struct.pack("<HHI", 2, 190, 1)
        + bytes(24)
        + struct.pack("<IHHHHHH", 0x5A00, 64, 0, 0, 64, 0, 0)
    )


JUNK = {
    "a 17-byte fatbin": struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 1) + b"\0",
    "an ELF header alone": _cuda_elf_header(),
    "junk PTX": b".version 9.0\n.target sm_90\njunk, not PTX\n",
}


@pytest.mark.parametrize("name", [*JUNK, "sm_75 fatbin", "sm_75 cubin"])
def test_what_nvcc_wrote_must_be_for_the_arch_asked(tmp_path, request, name):
    """C3: each was taken as a build for sm_90."""
    wrote = JUNK[name] if name in JUNK else request.getfixturevalue("made")[name]
    (tmp_path / "made").write_bytes(wrote)
    compiler = _nvcc(tmp_path, VERSION + f'cat "{tmp_path / "made"}" > "$out"')
    with pytest.raises(WorkbenchError) as err:
        cuda.check_arch(SM90, compiler)
    assert str(err.value).startswith(
        f"error: {compiler} exited as if it had compiled the kernels, but what it wrote is no fatbin or cubin for "
        f"sm_90 (it begins {wrote[:8]!r}). {_fix(compiler)}"
    )


@pytest.mark.parametrize("name", ["sm_90 fatbin", "sm_90 fatbin, compressed", "sm_90 cubin"])
def test_what_nvcc_makes_for_the_arch_is_taken(tmp_path, made, name):
    (tmp_path / "made").write_bytes(made[name])
    cuda.check_arch(SM90, _nvcc(tmp_path, VERSION + f'cat "{tmp_path / "made"}" > "$out"'))


def test_an_nvcc_that_breaks_after_a_check_is_refused_at_the_next(tmp_path):
    """C4: its first `nvcc --version` was kept for the life of the process."""
    compiler = _nvcc(tmp_path, VERSION)
    assert cuda._runs(compiler) == compiler
    Path(compiler.path).write_text("#!/bin/sh\nexit 1\n")
    with pytest.raises(WorkbenchError, match=r"does not run: `nvcc --version` exits 1\. "):
        cuda._runs(compiler)


def _compile_in_the_runtime(compiler):
    """Compile as TVM's CUDA runtime does on a GPU machine: by the name of its callback, within a build's block."""
    with SM90, cuda.compiling(compiler, "sm_90"):
        tvm.get_global_func("tvm_callback_cuda_compile")(KERNEL)


@pytest.mark.parametrize("how", ["kept", "runtime"])
def test_the_nvcc_checked_is_the_one_that_runs(tmp_path, monkeypatch, how):
    """C4: TVM ran "nvcc" from PATH, which passes over a file it cannot run to the next nvcc on PATH."""
    compiler = cuda._runs(_nvcc(tmp_path, VERSION + "exit 0"))
    decoy = tmp_path / "decoy" / "nvcc"
    decoy.parent.mkdir()
    decoy.write_text(f'#!/bin/sh\necho "$0" >> {tmp_path / "decoy.log"}\nexit 1\n')
    decoy.chmod(0o755)
    monkeypatch.setenv("PATH", os.pathsep.join([str(decoy.parent), os.environ["PATH"]]))
    Path(compiler.path).chmod(0o644)  # broken after it was found
    with pytest.raises(WorkbenchError) as err:
        cuda.check_arch(SM90, compiler) if how == "kept" else _compile_in_the_runtime(compiler)
    assert str(err.value).startswith(f"error: {compiler} does not run: [Errno 13] Permission denied: ")
    assert not (tmp_path / "decoy.log").exists()


_INTERRUPTED = """
import sys, time
from pathlib import Path
from byoc_workbench.core import targets
from byoc_workbench.measure.compiler import cuda
try:
    cuda.check_arch(targets.resolve({"kind": "cuda", "arch": "sm_90"}), cuda.Compiler("nvcc", sys.argv[1]))
except KeyboardInterrupt:
    pass
def state(pid):  # R, S, Z (a zombie), or gone
    stat = Path(f"/proc/{pid}/stat")
    return stat.read_text().rpartition(")")[2].split()[0] if stat.exists() else "gone"
folder = Path(sys.argv[1]).parent
pids = [(folder / name).read_text().strip() for name in ("nvcc.pid", "child.pid")]
for _ in range(200):  # a process killed ends soon after; one that is not, never
    if state(pids[1]) in ("gone", "Z"):
        break
    time.sleep(0.05)
print(*map(state, pids))
"""


def test_ctrl_c_ends_nvcc_and_what_it_started_in_a_process_that_lives_on(tmp_path):
    """C5: in a notebook's kernel, nvcc went on after Ctrl-C, then stayed a zombie (nobody waited for it)."""
    folder = tmp_path / "bin"
    body = f'sleep 60 & echo $! > "{folder}/child.tmp"; mv "{folder}/child.tmp" "{folder}/child.pid"\n'
    compiler = _nvcc(tmp_path, VERSION + f'echo $$ > "{folder}/nvcc.pid"\n{body}wait')
    kernel = subprocess.Popen([sys.executable, "-c", _INTERRUPTED, compiler.path], stdout=subprocess.PIPE, text=True)
    try:
        while not (folder / "child.pid").exists():
            assert kernel.poll() is None, "the build ended before nvcc ran"
            threading.Event().wait(0.05)
        kernel.send_signal(signal.SIGINT)
        said = kernel.communicate(timeout=60)[0]
    finally:
        kernel.kill()
        for pid in (folder / "nvcc.pid", folder / "child.pid"):
            if pid.exists():
                subprocess.run(["kill", "-9", pid.read_text().strip()], capture_output=True)
    nvcc, child = said.split()
    assert nvcc == "gone" and child in ("gone", "Z")  # nvcc reaped; what it started killed (its reaper is not ours)


def test_two_threads_build_at_once(tmp_path):
    """C6: each build put its nvcc's folder first on PATH and its folder in tempfile.tempdir, and put back what it
    found: the first to end put back the process's own, the second what it found, the first's. Here A's nvcc (the real
    one, behind a script) waits until B's has started, and B's until A's build is over, so that B's ends last."""
    real = _real_nvcc()
    wait = 'i=0; while [ ! -e "{}" ] && [ $i -lt 6000 ]; do sleep 0.01; i=$((i+1)); done\n'
    started = {name: tmp_path / f"{name}.started" for name in "AB"}
    returned = tmp_path / "A.returned"
    scripts = {
        "A": f'touch "{started["A"]}"\n' + wait.format(started["B"]),
        "B": f'touch "{started["B"]}"\n' + wait.format(returned),
    }
    compilers = {}
    for name, body in scripts.items():
        (tmp_path / name).mkdir()
        compilers[name] = _nvcc(tmp_path / name, VERSION + body + f'exec "{real.path}" "$@"')
    before = os.environ.get("PATH"), os.environ.get("TVM_CUDA_COMPILE_MODE"), tempfile.tempdir
    failed = []

    def build(name):
        try:
            cuda.check_arch(SM90, compilers[name])
        except Exception as err:  # the thread's failure, asserted below
            failed.append(err)
        if name == "A":
            returned.touch()

    threads = {name: threading.Thread(target=build, args=(name,)) for name in "AB"}
    threads["A"].start()
    while not started["A"].exists() and threads["A"].is_alive():
        threading.Event().wait(0.05)
    threads["B"].start()
    for thread in threads.values():
        thread.join(timeout=300)
    assert not failed and (os.environ.get("PATH"), os.environ.get("TVM_CUDA_COMPILE_MODE"), tempfile.tempdir) == before


def test_the_line_shown_is_what_nvcc_failed_on(tmp_path):
    """C7: a toolkit without its headers said "compilation terminated", the line after the cause."""
    real = Path(_real_nvcc().path)
    toolkit = tmp_path / "cuda" / "bin"
    toolkit.mkdir(parents=True)
    (toolkit.parent / "include").mkdir()  # empty: no cuda_runtime.h
    (toolkit / "nvcc").symlink_to(real)
    profile = (real.parent / "nvcc.profile").read_text()  # the real toolkit's, but for its headers
    profile = re.sub(r"^TOP .*$", f"TOP = {real.parents[1]}", profile, flags=re.MULTILINE)
    profile = re.sub(r"^INCLUDES .*$", f'INCLUDES += "-I{toolkit.parent / "include"}"', profile, flags=re.MULTILINE)
    (toolkit / "nvcc.profile").write_text(profile)
    compiler = cuda.Compiler("nvcc", str(toolkit / "nvcc"))
    with pytest.raises(WorkbenchError) as err:
        cuda.check_arch(SM90, compiler)
    assert str(err.value).startswith(
        f"error: {compiler} failed compiling the kernels: <command-line>: fatal error: cuda_runtime.h: No such file or "
        f"directory. {_fix(compiler)}"
    )


@pytest.mark.parametrize("read", ["$", "`", '"'])
def test_a_temporary_folder_nvccs_shell_reads_is_one_line(tmp_path, monkeypatch, read):
    """C7: nvcc runs its tools through a shell, which reads a $ (or a quote) in TMPDIR, and looks elsewhere."""
    compiler = _real_nvcc()
    folder = tmp_path / f"a{read}b"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    with pytest.raises(WorkbenchError) as err:
        cuda.check_arch(SM90, compiler)
    assert str(err.value) == (
        f"error: {compiler} cannot compile the kernels in the temporary folder {folder}: the shell it runs its tools "
        f"with reads the {read} in its path. Fix: set TMPDIR to a folder you can write to, whose path has none of "
        '$ ` ".'
    )


def test_an_nvcc_that_hangs_is_stopped_at_its_time_limit(tmp_path, monkeypatch):
    """An nvcc that hung hung the build: TVM waits for it with no time limit."""
    compiler = _nvcc(tmp_path, VERSION + f'echo $$ > "{tmp_path}/nvcc.pid"\nexec sleep 60')
    monkeypatch.setenv("BYOC_WORKBENCH_NVCC_TIMEOUT_S", "0.5")
    with pytest.raises(WorkbenchError) as err:
        cuda.check_arch(SM90, compiler)
    assert str(err.value) == (
        f"error: {compiler} did not finish compiling the kernels within 0.5 s, and was stopped. Fix: check that "
        f"`{compiler.path} --version` answers, or give it longer: BYOC_WORKBENCH_NVCC_TIMEOUT_S=<seconds>."
    )
    assert not Path(f"/proc/{(tmp_path / 'nvcc.pid').read_text().strip()}").exists()  # killed, and reaped


@pytest.mark.parametrize("given", ["soon", "0", "-1", "inf", "nan"])
def test_a_time_limit_that_is_none_is_one_line(tmp_path, monkeypatch, given):
    monkeypatch.setenv("BYOC_WORKBENCH_NVCC_TIMEOUT_S", given)
    with pytest.raises(WorkbenchError) as err:
        cuda.check_arch(SM90, _nvcc(tmp_path, VERSION))
    assert str(err.value) == (
        f"error: BYOC_WORKBENCH_NVCC_TIMEOUT_S={given!r} is not a number of seconds above 0. Fix: set it to the "
        "seconds nvcc may take to compile a build's kernels (e.g. 600), or unset it."
    )
