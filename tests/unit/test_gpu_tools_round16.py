"""The GPU tools as a careless user met them in round 16: ``--out /``, a pack whose Python record is no X.Y or too
old, pip failing or a wheels folder that is no folder, a run that measured nothing claiming to be whole, the CUDA
probe under PYTHONSAFEPATH, and a failing gpu_run.sh removing a DEST another run unpacks in."""

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from test_gpu_run_checks import stopping_python

ROOT = Path(__file__).resolve().parents[2]
GPU_PACK = [sys.executable, str(ROOT / "tools" / "gpu_pack.py")]
GPU_CHECK = [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py")]
HERE = f"{sys.version_info.major}.{sys.version_info.minor}"


@pytest.fixture
def gpu_pack(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "tools"))
    import gpu_pack

    return gpu_pack


def _pack(folder: Path, record: bytes) -> Path:
    """Archives in tools/gpu_pack.py's form, ``record`` first in site.tar.xz as the Python it is for."""
    folder.mkdir()
    for part, members in (("tvm-libs.tar.xz", []), ("site.tar.xz", [(".packed-for-python", record)])):
        with tarfile.open(folder / part, "w:xz", preset=0) as tar:
            for name, data in [*members, (f"{part}.txt", b"data")]:
                member = tarfile.TarInfo(f"site/{name}")
                member.size = len(data)
                tar.addfile(member, io.BytesIO(data))
    return folder


def _unpack(tmp_path: Path, record: bytes, *dest: str):
    pack = _pack(tmp_path / "pack", record)
    cmd = [*GPU_PACK, "--out", str(pack), "--unpack", str(tmp_path / "into"), *dest]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def _one_line(done) -> str:
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    return done.stderr


@pytest.mark.parametrize("out", ["/", "."])
def test_out_root_is_one_line_not_a_stopiteration(out):
    """``/`` has no parent, which _too_long looked for: a StopIteration traceback."""
    done = subprocess.run([*GPU_CHECK, "--target", "llvm", "--models", "demo", "--out", out], cwd="/", **_text())
    assert _one_line(done).startswith("error: --out") and "is a folder" in done.stderr


def _text() -> dict:
    return {"capture_output": True, "text": True, "timeout": 300}


@pytest.mark.parametrize("record", [b"hello\nworld\n", b"\x1b[2J3.12", b"3.12\0", b"cp312", b"", b"\xff\xfe3.12"])
def test_a_python_record_that_is_no_version_is_a_damaged_pack(tmp_path, record):
    """Garbage was echoed into a multi-line error and its Fix; an empty or non-UTF-8 record was taken as none."""
    line = _one_line(_unpack(tmp_path, record))
    assert "is damaged" in line and "Fix: run tools/gpu_pack.py again" in line
    assert "\x1b" not in line and "\0" not in line and "hello" not in line
    assert not (tmp_path / "into").exists()


def test_a_record_with_a_micro_version_is_compared_by_x_y(tmp_path):
    """``3.13.1`` on a 3.13 was refused as another Python."""
    done = _unpack(tmp_path, f"{HERE}.1\n".encode())
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "into" / "site" / "tvm-libs.tar.xz.txt").is_file()


def test_a_pack_for_a_python_gpu_run_refuses_is_not_told_to_use_it(tmp_path):
    """A 3.9 pack's Fix said PY=python3.9, which gpu_run.sh refuses (3.10 or later)."""
    line = _one_line(_unpack(tmp_path, b"3.9\n", "--dest", str(tmp_path)))
    assert "Python 3.9" in line and "python3.9" not in line and f"--python {HERE}" in line.split("Fix:")[1]


@pytest.mark.parametrize("version", ["3.9", "3.0", "3.9.18"])
def test_gpu_pack_refuses_a_python_gpu_run_refuses(tmp_path, version):
    done = subprocess.run([*GPU_PACK, "--python", version, "--out", str(tmp_path / "p")], **_text())
    assert "older than 3.10" in _one_line(done) and not (tmp_path / "p").exists()


def test_pip_failing_is_one_line_and_the_wheels_folder_it_made_removed(gpu_pack, tmp_path, monkeypatch, capsys):
    """pip finding no wheel (no index here, as with --python 3.99 or an unreachable one) was a traceback."""
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    (tmp_path / "out").mkdir()
    with pytest.raises(SystemExit) as stopped:
        gpu_pack.download("3.99", tmp_path / "out" / "wheels" / "3.99")
    assert stopped.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("error: pip got no wheels") and err.count("\n") == 1 and "Python 3.99" in err
    assert os.listdir(tmp_path / "out") == []


@pytest.mark.parametrize("kind", ["wheels file", "version file", "dangling link"])
def test_a_wheels_folder_that_is_no_folder_is_one_line(gpu_pack, tmp_path, kind, capsys):
    out = tmp_path / "out"
    (out if kind == "wheels file" else out / "wheels").mkdir(parents=True)
    if kind == "dangling link":
        (out / "wheels" / "3.12").symlink_to("/nonexistent/x")
    else:
        (out / ("wheels" if kind == "wheels file" else "wheels/3.12")).write_text("note")
    with pytest.raises(SystemExit) as stopped:
        gpu_pack.download("3.12", out / "wheels" / "3.12")
    assert stopped.value.code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a folder" in err and "Fix: move it" in err


@pytest.mark.slow
def test_a_run_that_measured_nothing_never_says_it_is_whole(tmp_path):
    """It wrote ``"complete": true``, which then kept a later partial run's measurements out. A tqdm that does not
    import (a user's broken install) stops it before any model."""
    (tmp_path / "shim").mkdir()
    (tmp_path / "shim" / "tqdm.py").write_text('raise ImportError("a broken tqdm")\n')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "shim"), *sys.path])}
    out = tmp_path / "a.json"
    cmd = [*GPU_CHECK, "--target", "llvm", "--models", "demo", "--out", str(out)]
    done = subprocess.run(cmd, env=env, **_text())
    assert done.returncode == 1 and "measured nothing" in done.stderr, done.stderr
    report = json.loads(out.read_text())
    assert report["complete"] is False and report["not_reached"] == ["demo"] and report["models"] == {}
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from gpu_check_args import whole_json
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    assert not whole_json(out)


def test_the_cuda_probe_keeps_pythonpath_under_safe_paths(tmp_path, monkeypatch):
    """Under PYTHONSAFEPATH=1 the probe dropped the first PYTHONPATH entry (gpu_run's unpacked site, with TVM)."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    from gpu_check_probe import PROBE

    paths = PROBE.split("import tvm")[0] + "print(sys.path)\n"
    for safe in ("1", ""):
        env = {**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONSAFEPATH": safe}
        done = subprocess.run([sys.executable, "-c", paths], env=env, cwd=tmp_path / "..", **_text())
        seen = eval(done.stdout)  # noqa: S307  (a list this test's child printed)
        assert str(tmp_path) in seen and "" not in seen, (safe, seen)


@pytest.mark.slow
def test_a_failing_run_leaves_a_dest_another_run_unpacks_in(tmp_path):
    """Two runs at once on a new DEST: the failing one removed DEST, the other's unpack in it (a traceback)."""
    pack = _pack(tmp_path / "pack", b"cp312")  # damaged: this run's unpack fails
    dest = tmp_path / "new" / "dest"
    other = dest / "unpack.other" / "site"  # the other run's, made as this one's unpack starts
    py = tmp_path / "py"
    made = f'case "$*" in *--unpack*) mkdir -p "{other}"; echo x >"{other}/x";; esac'
    py.write_text(f'#!/bin/bash\n{made}\nexec "{stopping_python(tmp_path)}" "$@"\n')
    py.chmod(0o755)
    env = {**os.environ, "PACK": str(pack), "DEST": str(dest), "PY": str(py)}
    env.pop("OUT", None)
    done = subprocess.run(["bash", str(ROOT / "tools" / "gpu_run.sh"), "--target", "llvm"], env=env, **_text())
    assert done.returncode == 1 and "is damaged" in done.stderr, done.stderr
    assert (other / "x").read_text() == "x\n" and "Traceback" not in done.stderr
    assert sorted(os.listdir(dest)) == ["unpack.other"]
