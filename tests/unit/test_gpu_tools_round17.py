"""The GPU tools as a careless user met them in round 17: a CUDA driver that crashes TVM as it loads (exit 139, no
line, even for --target llvm), a closed terminal (SIGHUP) during the unpack, which left it half done, and a wrong
argument to tools/gpu_run.sh, whose fix named gpu_check.py's help and its --out, which gpu_run sets."""

import ast
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_gpu_check_round15 import DEMO, _driver, _gpu_check
from test_gpu_round13_tools import ARGS, _module
from test_gpu_run_checks import _dest, _env, _pack, _tree

ROOT = Path(__file__).resolve().parents[2]
GPU_PACK = [sys.executable, str(ROOT / "tools" / "gpu_pack.py")]
GPU_RUN = ["bash", str(ROOT / "tools" / "gpu_run.sh")]
#: The files of the GPU tools: each under the limits tests/unit/test_limits.py keeps for the package.
TOOLS = ["tools/gpu_pack.py", "tools/gpu_unpack.py", *(f"benchmarks/gpu_check{s}.py" for s in ("", "_args", "_probe"))]


@pytest.fixture
def probe():
    return _module(ROOT / "benchmarks" / "gpu_check_probe.py")


@pytest.mark.slow
@pytest.mark.parametrize("target", ["llvm", "cuda"])
def test_a_driver_that_crashes_tvm_as_it_loads_is_one_line_on_the_cpu_too(tmp_path, target):
    """--target llvm loaded TVM in the run's own process: torch asks the driver for a device as TVM loads it, and
    the segfault was exit 139 with no line. For cuda the line's fix said to pass --target llvm, which crashed."""
    env = _driver(tmp_path, "onedev")
    done = _gpu_check(*DEMO, "--runs", "1", "--target", target, "--out", str(tmp_path / "r.json"), env=env)
    [line] = done.stderr.splitlines()
    assert done.returncode == 1 and done.stdout == ""
    assert line.startswith(
        "error: measured nothing, tvm: TVM does not load: the process that asked died of signal 11 (Segmentation "
        "fault) while loading TVM. Fix: repair what crashes it"
    )
    assert "--target llvm" not in line.partition(". Fix: ")[2]


@pytest.mark.parametrize(
    ("kind", "child", "said"),
    [
        ("llvm", "print('loaded')", None),
        ("cuda", "print('loaded'); print('seen')", None),
        ("llvm", "import os; os.kill(os.getpid(), 11)", ("died of signal 11 (Segmentation fault) while loading TVM",)),
        ("cuda", "import os; os.abort()", ("died of signal 6 (Aborted) while loading TVM",)),
        (
            "cuda",
            "print('loaded', flush=True); import os; os.abort()",
            ("died of signal 6 (Aborted) while asking TVM for a CUDA device",),
        ),
    ],
)
def test_the_child_that_loads_tvm_says_what_it_was_doing_when_it_died(probe, monkeypatch, kind, child, said):
    """Only a cuda run asked in a child; a crash while loading TVM was blamed on the CUDA device, its fix llvm."""
    monkeypatch.setattr(probe, "PROBE", child)
    got = probe.tvm_unloaded(kind)
    if said is None:
        assert got is None
        return
    why, fix = got
    doing = said[0].rpartition(" while ")[2]
    assert why.endswith(f": the process that asked {said[0]}")
    assert why.startswith(probe.NO_CUDA if doing != "loading TVM" else "TVM does not load")
    assert fix == (probe.CUDA_FIX if doing != "loading TVM" else probe.LOAD_FIX)


def _stopped_by_a_hangup(cmd: list, started, **popen) -> str:
    """``cmd``'s stderr, its process group given SIGHUP (a closed terminal) once ``started()``; it exits 129."""
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    run = subprocess.Popen(cmd, start_new_session=True, text=True, **pipes, **popen)
    while not started():
        assert run.poll() is None, run.communicate()
        time.sleep(0.01)
    os.killpg(run.pid, signal.SIGHUP)
    _, stderr = run.communicate(timeout=60)
    assert run.returncode == 129, (run.returncode, stderr)
    return stderr


@pytest.mark.slow
def test_a_hangup_during_the_unpack_leaves_nothing_it_made(tmp_path):
    """SIGHUP ended the unpack at once: a half-unpacked folder left, and its parents."""
    pack, into = _pack(tmp_path / "pack", files=20000), tmp_path / "new" / "into"
    stderr = _stopped_by_a_hangup([*GPU_PACK, "--out", str(pack), "--unpack", str(into)], (into / "site").exists)
    assert stderr.splitlines() == ["hung up; run it again to finish."]
    assert os.listdir(tmp_path) == ["pack"]


@pytest.mark.slow
def test_a_hangup_to_gpu_run_during_the_unpack_is_one_line_and_the_last_unpack_is_kept(tmp_path):
    pack, dest = _pack(tmp_path / "pack", files=20000), _dest(tmp_path / "dest")
    before = _tree(dest)
    started = lambda: any(dest.glob("unpack.*/site"))  # noqa: E731
    stderr = _stopped_by_a_hangup(GPU_RUN, started, env=_env(pack, dest))
    assert stderr.splitlines() == ["hung up; nothing was measured."]
    assert _tree(dest) == before


def test_a_hangup_waits_for_files_put_in_place_together():
    """held() (a pack's files replacing the last pack's, a JSON and its record) let SIGHUP through at once."""
    came = []
    old = signal.signal(signal.SIGHUP, lambda signum, _: came.append(signum))
    try:
        with ARGS.held():
            os.kill(os.getpid(), signal.SIGHUP)
            assert came == []
        assert came == [signal.SIGHUP]
    finally:
        signal.signal(signal.SIGHUP, old)


OUT_OWNED = (
    "error: --out is not for tools/gpu_run.sh, which writes the JSON to $OUT/gpu_check.json. "
    "Fix: pass OUT=<a folder> to gpu_run.sh instead of --out."
)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--runs", "0"], "error: argument --runs: '0' is not a whole number, 1 or more."),
        (["--modles", "demo"], "error: unrecognized arguments: --modles demo."),
        (["--out"], OUT_OWNED),
        (["--ou", "x.json"], OUT_OWNED),
        (["--runs", "2", "--out=x.json"], OUT_OWNED),
    ],
)
def test_a_wrong_argument_to_gpu_run_names_gpu_runs_help(tmp_path, args, said):
    """Its fix was `gpu_check.py --help`, which lists --out; a lone --out was 'expected one argument'."""
    env = _env(tmp_path / "pack", tmp_path / "dest")
    done = subprocess.run([*GPU_RUN, *args], env=env, capture_output=True, text=True, timeout=60)
    fix = "" if said == OUT_OWNED else " Fix: see `bash tools/gpu_run.sh --help`."
    assert done.returncode == 1 and done.stderr.splitlines() == [said + fix]
    assert os.listdir(tmp_path) == []


def test_gpu_check_itself_still_names_its_own_help():
    cmd = [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--runs", "0"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stderr.splitlines() == [
        "error: argument --runs: '0' is not a whole number, 1 or more. Fix: see `gpu_check.py --help`."
    ]


@pytest.mark.parametrize("name", TOOLS)
def test_each_gpu_tool_keeps_the_packages_limits_and_travels(name):
    """gpu_pack.py and gpu_check.py were at 500 lines, which test_limits.py does not measure outside the package.
    Each file travels to the GPU machine in the working tree: none may be ignored by git."""
    source = (ROOT / name).read_text()
    assert len(source.splitlines()) <= 500
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef):
            assert node.end_lineno - node.lineno < 80, node.name
    assert subprocess.run(["git", "check-ignore", "-q", name], cwd=ROOT).returncode == 1
