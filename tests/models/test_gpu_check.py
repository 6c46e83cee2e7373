"""benchmarks/gpu_check.py on a machine without a GPU: one line per missing piece, exit 0, and the same
measurements run on the CPU when asked (``--target llvm``), each build split and checked against TVM alone."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import tvm

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"


def _run(tmp_path, *args):
    out = tmp_path / "gpu_check.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out), *args], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(out.read_text()), done.stderr


def test_without_a_gpu_it_says_why_in_one_line_per_piece(tmp_path):
    if tvm.cuda(0).exist:
        pytest.skip("a GPU is here")
    report, stderr = _run(tmp_path, "--models", "demo")
    assert report["models"] == {}
    [line] = [m for m in report["missing"] if m.startswith("tvm:")]
    assert "no CUDA device" in line and "Fix: run on an NVIDIA GPU, or pass --target llvm." in line
    for m in report["missing"]:
        assert "\n" not in m and ". Fix: " in m
    assert f"missing: {line}" in stderr


def test_on_the_cpu_the_same_measurements_run_and_agree(tmp_path):
    pytest.importorskip("onnxruntime")
    report, _ = _run(tmp_path, "--target", "llvm", "--models", "demo", "--runs", "2", "--warmup", "1")
    demo = report["models"]["demo"]
    expected = {"tvm alone (llvm)", "onnxruntime", "onnxruntime, unpruned"}
    if importlib.util.find_spec("torch") and importlib.util.find_spec("torchvision"):
        expected |= {"torch", "torch, unpruned", "torch (its own target: every op it runs)"}
    assert set(demo["builds"]) == expected
    for label, check in demo["equal"].items():
        assert check["equal"], (label, check)
    for build in demo["builds"].values():
        assert build["median_s"] > 0 and build["build_s"] > 0
        assert build["by_device_s"] == {}  # a CPU build: nothing to split
    assert not report["errors"]
