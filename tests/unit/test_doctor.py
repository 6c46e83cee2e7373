"""``byoc-workbench doctor`` on this very machine: real checks, no stand-ins."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from byoc_workbench import cli, doctor
from byoc_workbench.draw import renderers

HAS_MXNET = importlib.util.find_spec("mxnet") is not None and importlib.util.find_spec("gluoncv") is not None
HAS_GPU = Path("/proc/driver/nvidia").exists()
HAS_TRT = importlib.util.find_spec("tensorrt") is not None


@pytest.fixture(scope="module")
def report():
    return doctor.diagnose()


def test_part1_ready_and_exit_code_zero(report, capsys):
    assert report["parts"]["part1"] == {
        "title": doctor.PART_TITLES["part1"],
        "ready": True,
        "missing": [],
        "fixes": {},
    }
    assert report["exit_code"] == 0
    assert cli.main(["doctor"]) == 0
    text = capsys.readouterr().out
    assert "Notebook 01, Part 1 (the demo graph): ready" in text


def test_tvm_flags_are_reported(report):
    tvm = report["checks"]["tvm"]
    assert tvm["ok"] and tvm["info"]["flags"]["USE_LLVM"] is True
    assert set(tvm["info"]["flags"]) == {
        "USE_LLVM",
        "USE_CUDA",
        "USE_TENSORRT_CODEGEN",
        "USE_TENSORRT_RUNTIME",
        "relax.ext.tensorrt",
    }
    assert "LLVM on" in tvm["found"]


def test_part2_and_the_zoo_are_ready_without_mxnet_and_say_mxnet_is_a_cross_check(report):
    part = report["parts"]["part2_cpu"]
    assert part["ready"] and part["missing"] == [], part
    assert report["parts"]["zoo"]["ready"]
    assert "mxnet" not in {n for p in report["parts"].values() for n in p["missing"]}
    zoo = report["checks"]["zoo"]
    assert zoo["ok"] and zoo["info"]["models"] >= 100 and zoo["info"]["opencv"]
    mxnet = report["checks"]["mxnet"]
    assert mxnet["ok"] == HAS_MXNET
    assert "cross-check" in mxnet["found"] and ("" if HAS_MXNET else "requirements-mxnet.txt") in mxnet["fix"]
    expected = "onnxruntime" if report["checks"]["onnxruntime"]["ok"] else "teaching"
    assert part["backend"].startswith(expected)


@pytest.mark.skipif(HAS_GPU or HAS_TRT, reason="this machine has a GPU or TensorRT")
def test_tensorrt_unavailable_names_package_and_gpu(report, capsys):
    part = report["parts"]["part2_tensorrt"]
    assert not part["ready"]
    assert {"tensorrt", "gpu"} <= set(part["missing"])
    assert "pip install -e .[tensorrt]" in part["fixes"]["tensorrt"]
    assert "NVIDIA GPU" in part["fixes"]["gpu"]
    assert report["checks"]["tensorrt"]["info"] == {"installed": False}
    print(doctor.render(report))
    text = capsys.readouterr().out
    assert "Notebook 02 with TensorRT: not ready, missing tensorrt, gpu" in text


def test_weights_cache_lists_every_model(report):
    from byoc_workbench.models import weights as zoo

    weights = report["checks"]["weights"]["info"]
    assert set(weights["models"]) == set(zoo.MODELS)
    assert weights["cache"] == str(zoo.weights_dir())


def test_json_has_the_same_data(capsys):
    assert cli.main(["doctor", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"checks", "parts", "exit_code"}
    assert set(data["parts"]) == {"part1", "part1_c", "part2_cpu", "part2_tensorrt", "own_models", "zoo"}
    titles = [p["title"] for p in data["parts"].values()]
    for notebook in ("01", "02", "03", "04", "05", "06"):  # a verdict per notebook
        assert any(notebook in t for t in titles), (notebook, titles)
    names = [fn.__name__.removeprefix("check_") for fn in doctor.SEAT_CHECKS]
    assert list(data["checks"]) == names
    for check in data["checks"].values():
        assert set(check) == {"name", "ok", "found", "fix", "seconds", "info"}
        assert check["ok"] or check["fix"], check  # whatever is missing comes with its fix


def test_the_command_on_path_is_this_installs(monkeypatch, tmp_path):
    """Lab's terminal from make lab finds this install's byoc-workbench; a shell without the venv is told how."""
    import os
    import sys

    monkeypatch.setenv("PATH", os.pathsep.join([os.path.dirname(sys.executable), "/usr/bin", "/bin"]))
    assert doctor.check_path().ok
    monkeypatch.setenv("PATH", str(tmp_path))
    check = doctor.check_path()
    assert not check.ok and "none is on PATH" in check.found
    assert f"source {os.path.dirname(sys.executable)}/activate" in check.fix


def test_torch_is_checked_for_notebook_05(report, monkeypatch):
    import importlib.util

    want = importlib.util.find_spec("torch") is not None and importlib.util.find_spec("torchvision") is not None
    assert report["checks"]["torch"]["ok"] == want
    assert ("torch" in report["parts"]["own_models"]["missing"]) == (not want)
    monkeypatch.setattr(doctor, "_installed", lambda module, dist=None: None)
    check = doctor.check_torch()
    assert not check.ok and check.fix == "make setup EXTRAS=pytorch" and "missing torch, torchvision" in check.found


def test_the_c_compiler_is_checked(report, monkeypatch, tmp_path):
    cc = report["checks"]["cc"]
    assert cc["ok"] and cc["info"]["command"] and report["parts"]["part1_c"]["ready"]
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    check = doctor.check_cc()
    assert not check.ok and check.found.startswith("No C compiler found")
    assert "apt-get install gcc" in check.fix and "conda install -c conda-forge compilers" in check.fix


def test_missing_graphviz_means_part1_cannot_run(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no dot on PATH
    monkeypatch.setattr(renderers, "FINDERS", (renderers._system_dot,))  # and no graphviz-pure wheel
    report = doctor.diagnose()
    assert report["parts"]["part1"]["missing"] == ["graphviz"]
    assert "pip install graphviz-pure" in report["parts"]["part1"]["fixes"]["graphviz"]
    assert report["exit_code"] == 1


def test_doctor_does_not_import_mxnet():
    code = "import sys; from byoc_workbench import doctor; doctor.diagnose(); print('mxnet' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_corrupt_cached_file_is_reported(monkeypatch, tmp_path):
    from byoc_workbench.models import weights as zoo

    monkeypatch.setenv(zoo.CACHE_ENV, str(tmp_path))
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / zoo.params_file_name(zoo.DEFAULT_MODEL)).write_bytes(b"not the weights")
    check = doctor.check_weights()
    assert check.info["cache"] == str(tmp_path / "models")
    assert check.info["models"][zoo.DEFAULT_MODEL]["state"] == "wrong sha1, ignored"
    assert not check.ok and "byoc-workbench prefetch" in check.fix


@pytest.mark.slow  # over 10 s: `make test` and `make test-slow` run it, not test-fast
def test_a_fifo_in_the_weights_cache_blocks_nothing(tmp_path):
    """A FIFO (or device) where trained weights go is named and passed over: reading it would wait forever."""
    import os

    from byoc_workbench.models import weights as zoo

    (tmp_path / "models").mkdir()
    os.mkfifo(tmp_path / "models" / zoo.params_file_name(zoo.DEFAULT_MODEL))
    env = {**os.environ, zoo.CACHE_ENV: str(tmp_path)}
    code = "from byoc_workbench import doctor; print(doctor.check_weights().info['models'])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert f"'{zoo.DEFAULT_MODEL}': {{'state': 'not a regular file, ignored'" in out.stdout, out.stderr
    listed = subprocess.run(
        [sys.executable, "-m", "byoc_workbench", "prefetch", "--list"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert listed.returncode == 0 and zoo.DEFAULT_MODEL in listed.stdout, listed.stderr


def test_binder_files_agree_with_requirements():
    root = Path(__file__).resolve().parents[2]
    env = (root / "environment.yml").read_text().splitlines()
    assert "  - python=3.13" in env  # the newest Python every pin has a wheel for
    assert {"      - -r requirements.txt", "      - -e ."} <= set(env)  # the same pins, not a second copy
    lines = [line.partition(";")[0] for line in (root / "requirements.txt").read_text().splitlines()]
    pins = dict(line.split("==") for line in lines if "==" in line)
    assert int(pins["numpy"].split(".")[0]) >= 2 and "mxnet" not in pins and "gluoncv" not in pins
    assert "graphviz-pure" in pins  # diagrams without a system Graphviz
    apt = [line.partition("#")[0].strip() for line in (root / "apt.txt").read_text().splitlines()]
    assert "gcc" in apt and "graphviz" not in apt and "libgomp1" not in apt  # nothing for MXNet, no system dot


def test_openvino_is_checked_with_the_precision_it_would_pick(report):
    ov = report["checks"]["openvino"]
    if importlib.util.find_spec("openvino") is None:
        assert not ov["ok"] and "pip install openvino" in ov["fix"]
        return
    assert ov["ok"], ov
    assert ov["info"]["default_precision"] == ("bf16" if "BF16" in ov["info"]["capabilities"] else "f32")
    assert "the backend sets f32" in ov["found"]
