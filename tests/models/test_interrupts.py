"""Ctrl-C anywhere in a measurement ends in one line and exit status 130, whatever TVM's FFI wraps it in.

TVM turns a KeyboardInterrupt raised inside a Python callback (a backend's
packed function, a timed run) into a RuntimeError; the CLI still knows it was
Ctrl-C. A search is interrupted at several moments after it starts measuring.
"""

import os
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("onnxruntime", reason="the search's offloading backend needs onnxruntime")


@pytest.mark.parametrize("delay", [0.2, 2.0])
def test_ctrl_c_during_a_search_is_one_line_and_130(tmp_path, delay):
    env = dict(os.environ, BYOC_WORKBENCH_CACHE=str(tmp_path / "cache"), PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "byoc_workbench", "search", "demo", "--backends", "onnxruntime,tvm", "--no-cache"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = proc.stderr.readline()  # the search has begun measuring: the handler is in place
    assert first.startswith("search: "), first
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    lines = [line for line in (first + err).splitlines() if not line.startswith("search: ")]
    if proc.returncode == 0:
        pytest.skip(f"the search finished within {delay} s of starting to measure")
    assert proc.returncode == 130, err
    assert lines and lines[-1].startswith("interrupted; "), err
    assert "Traceback" not in err
    leftovers = [p for p in (tmp_path / "cache").rglob("*") if p.is_file() and p.name.startswith(".")]
    assert leftovers == [], "no half-written cache entry"
