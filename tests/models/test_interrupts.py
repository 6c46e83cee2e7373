"""Ctrl-C (or SIGTERM) anywhere in a measurement ends in one line and exit status 130 (143), whatever TVM's FFI
wraps it in.

TVM turns a KeyboardInterrupt raised inside a Python callback (a backend's
packed function, a timed run) into a RuntimeError; the CLI still knows it was
Ctrl-C. A search is interrupted at several moments after it starts measuring.
Two searches started together on one empty cache share it without tearing it.
"""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("onnxruntime", reason="the search's offloading backend needs onnxruntime")


@pytest.mark.parametrize(
    ("sig", "status", "word"), [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")]
)
@pytest.mark.parametrize("delay", [0.2, 2.0])
def test_ctrl_c_or_sigterm_during_a_search_is_one_line_and_the_shells_status(tmp_path, delay, sig, status, word):
    """SIGTERM (``timeout``, ``docker stop``, a JupyterHub cull) is handled as Ctrl-C is: temporaries removed,
    one line, 143."""
    env = dict(os.environ, BYOC_WORKBENCH_CACHE=str(tmp_path / "cache"), PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "byoc_workbench", "search", "demo", "--backends", "onnxruntime,tvm", "--no-cache"]
    cmd += ["--seams", "3", "--runs", "40"]  # about 6 s of measuring on 2 idle cores: both moments fall inside it
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = proc.stderr.readline()  # the search has begun measuring: the handler is in place
    assert first.startswith("search: "), first
    time.sleep(delay)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    lines = [line for line in (first + err).splitlines() if not line.startswith("search: ")]
    if proc.returncode == 0:
        pytest.skip(f"the search finished within {delay} s of starting to measure")
    assert proc.returncode == status, err
    assert lines and lines[-1].startswith(f"{word}; "), err
    assert "Traceback" not in err
    leftovers = [p for p in (tmp_path / "cache").rglob("*") if p.is_file() and p.name.startswith(".")]
    assert leftovers == [], "no half-written cache entry"


def test_two_searches_at_once_share_one_cache_and_tear_nothing(tmp_path):
    """Two searches of the demo started together on one empty cache both finish; every entry they left is whole
    (no temporary file, every JSON parses), and a third search finds every measurement it needs there."""
    cache = tmp_path / "cache"
    env = dict(os.environ, BYOC_WORKBENCH_CACHE=str(cache))
    cmd = [sys.executable, "-m", "byoc_workbench", "search", "demo", "--backends", "onnxruntime,tvm"]
    cmd += ["--runs", "2", "--top", "1"]
    pipes = dict(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    procs = [subprocess.Popen([*cmd, "--json"], env=env, **pipes) for _ in range(2)]  # started together
    results = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in results]
    assert all(json.loads(out)["chosen"]["assign"] for out, _ in results)
    files = [p for p in cache.rglob("*") if p.is_file()]
    assert files and not [p for p in files if p.name.startswith(".")], "no half-written cache entry"
    for path in files:
        if path.suffix == ".json":
            json.loads(path.read_text())  # whole, not torn
    third = subprocess.run([*cmd, "--cached"], env=env, capture_output=True, text=True, timeout=600)
    assert third.returncode == 0 and "0 builds measured" in third.stdout, third.stderr[-2000:]


def test_ctrl_c_twice_is_still_one_line_and_130(tmp_path):
    """The terminal signals the whole process group, and people press twice: the second Ctrl-C is swallowed."""
    env = dict(os.environ, BYOC_WORKBENCH_CACHE=str(tmp_path / "cache"), PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "byoc_workbench", "search", "demo", "--backends", "onnxruntime,tvm", "--no-cache"]
    cmd += ["--seams", "3", "--runs", "40"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr.readline().startswith("search: ")
    time.sleep(0.5)
    for _ in range(2):
        proc.send_signal(signal.SIGINT)
        time.sleep(0.05)
    out, err = proc.communicate(timeout=120)
    if proc.returncode == 0:
        pytest.skip("the search finished before the Ctrl-C")
    assert proc.returncode == 130 and "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.strip().splitlines()[-1].startswith("interrupted; "), err


@pytest.mark.parametrize(
    ("sig", "status", "word"), [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")]
)
def test_ctrl_c_or_sigterm_while_the_command_loads_is_one_line(sig, status, word):
    """The command loads TVM before it parses a word (a second or more): a Ctrl-C or a SIGTERM then is the same
    one line (round 8: a SIGTERM there ended with 143 and nothing said)."""
    script = os.path.join(os.path.dirname(sys.executable), "byoc-workbench")
    proc = subprocess.Popen([script, "report", "demo"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.4)  # inside the imports: TVM alone takes longer to load
    proc.send_signal(sig)
    # A library's import may catch the KeyboardInterrupt (seen in CI): the signal must still end the command.
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == status and "Traceback" not in err, err
    assert err.strip().splitlines() == [f"{word}; nothing was written."], err


def test_ctrl_c_while_ray_starts_or_runs_stops_every_process_it_started():
    """``--ray auto`` starts a Ray of this machine alone: a Ctrl-C while it starts leaves none of its
    processes behind (Ray's own shutdown left its agents, about 100 MB each, for a minute)."""
    psutil = pytest.importorskip("psutil", reason="comes with the [cluster] extra")
    pytest.importorskip("ray", reason="needs the [cluster] extra")
    ray_cli = os.path.join(os.path.dirname(sys.executable), "ray")  # the venv's, on PATH or not
    if subprocess.run([ray_cli, "status"], capture_output=True).returncode == 0:
        pytest.skip("a Ray cluster runs on this machine, and --ray auto would join it")
    script = os.path.join(os.path.dirname(sys.executable), "byoc-workbench")
    cmd = [script, "search", "demo", "--ray", "auto", "--no-cache"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started, deadline = [], time.time() + 120
    while "ray::DashboardAgent" not in _names(started) and proc.poll() is None:  # the raylet's child
        assert time.time() < deadline, "Ray's agents did not start in 2 minutes"
        time.sleep(0.1)
        with contextlib.suppress(psutil.Error):
            started = psutil.Process(proc.pid).children(recursive=True)
    if proc.poll() is not None:  # it ended before Ray's agents showed (a loaded machine): nothing to interrupt
        _, err = proc.communicate()
        assert proc.returncode == 0, err
        pytest.skip("the search finished before Ray's agents started; nothing was left to interrupt")
    time.sleep(1.0)  # the agents run, and Ray is still starting (for some 5 s more on a 2-core machine)
    with contextlib.suppress(psutil.Error):  # it may end in that second too
        started += psutil.Process(proc.pid).children(recursive=True)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == "interrupted; nothing was written.", err
    _, alive = psutil.wait_procs(started, timeout=5)
    assert not [n for n in _names(alive) if n != "zombie"], _names(alive)


def _names(processes) -> list:
    names = []
    for p in processes:
        with contextlib.suppress(Exception):
            names.append("zombie" if p.status() == "zombie" else p.name())
    return names
