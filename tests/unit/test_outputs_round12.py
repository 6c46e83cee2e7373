"""Outputs a careless user gave in round 12 of issue 47: an append-only output folder (``chattr +a``), a notebook
cell past ``--timeout``, a compiler under ``ulimit -f``, a file where the weights cache's folder goes, ``doctor``
stopped."""

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from shared import relu_onnx

from byoc_workbench import cli
from byoc_workbench.core import files, output_paths
from byoc_workbench.models import weights

#: A fresh process per case (a kernel, a compiler, a signal): make test runs them, make test-fast does not.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CLI = os.path.join(os.path.dirname(sys.executable), "byoc-workbench")


@pytest.fixture
def append_only(tmp_path):
    """A folder made append-only (``chattr +a``: files can be made in it, never renamed or removed), the flag taken
    away again whatever the test did."""
    folder = tmp_path / "apd"
    folder.mkdir()
    if shutil.which("chattr") is None:
        pytest.skip("no chattr on this machine")
    done = subprocess.run(["chattr", "+a", str(folder)], capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"chattr +a needs root and a file system with flags: {done.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["chattr", "-a", str(folder)], check=True)


def _notebook(path: Path, source: str) -> Path:
    cell = {"cell_type": "code", "execution_count": None, "id": "c", "metadata": {}, "outputs": [], "source": source}
    path.write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "{onnx}", "--save-outputs", "{apd}/o.npz"],  # each failed after the work, leaving its .part
        ["bench", "demo", "--repeat", "2", "--out", "{apd}/b.json"],
        ["stages", "demo", "--out", "{apd}/st"],  # these two said "wrote", leaving an empty .part folder
        ["export", "{nb}", "--out", "{apd}"],
        ["search", "{onnx}", "--runs", "1", "--out", "{apd}/s"],
    ],
)
def test_an_append_only_out_folder_is_refused_before_any_work(tmp_path, capsys, append_only, argv):
    onnx, nb = relu_onnx(tmp_path / "net.onnx"), _notebook(tmp_path / "nb.ipynb", "x = 1")
    assert cli.main([a.format(apd=append_only, onnx=onnx, nb=nb) for a in argv]) == 2
    out, err = capsys.readouterr()
    [line] = err.splitlines()
    assert f"{append_only} is append-only, so no file in it can be renamed or removed" in line, line
    assert f"Fix: run chattr -a {append_only}, or pass " in line and os.listdir(append_only) == []


def test_the_tools_refuse_an_append_only_folder_too(tmp_path, append_only):
    """``lab_copies`` said it after the first copy; ``zoo_support --out`` after its walk (20 minutes for all)."""
    said = f"{append_only} is append-only, so no file in it can be renamed or removed, as putting a result in place"
    said += " does"
    fix = f"Fix: run chattr -a {append_only}, or pass"
    for argv, line in (
        (
            ["tools/lab_copies.py", "notebooks", str(append_only), "--fresh"],
            f"error: LAB_DIR {append_only}: {said}. {fix} LAB_DIR a directory you can write to.",
        ),
        (
            ["tools/zoo_support.py", "--models", "simple_pose_resnet18_v1b", "--out", str(append_only / "z.json")],
            f"error: --out {append_only / 'z.json'}: {said}. {fix} --out the path of a file in a directory you can"
            " write to.",
        ),
    ):
        done = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 2 and done.stderr.splitlines() == [line], done.stderr
    assert os.listdir(append_only) == []


def test_a_folder_to_make_in_an_append_only_one_is_fine(append_only):
    """Only the folder a result is renamed in matters: one made in an append-only folder has no such flag."""
    out = output_paths.check_file(append_only / "new" / "o.npz", "--save-outputs")
    files.write_file(out, b"result")
    assert out.read_bytes() == b"result" and sorted(os.listdir(out.parent)) == [output_paths.WRITTEN, "o.npz"]


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_cell_past_the_timeout_is_one_line_saying_to_raise_it(tmp_path):
    """It was nbclient's error line, the dying kernel's 40-line ZMQError traceback, then a line whose Fix said to open
    Jupyter and see a traceback."""
    _notebook(tmp_path / "slow.ipynb", "import os, time\nopen('pid', 'w').write(str(os.getpid()))\ntime.sleep(300)")
    done = subprocess.run(
        [CLI, "export", "slow.ipynb", "--timeout", "3", "--out", "exs"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and done.stderr.splitlines() == [
        "error: slow.ipynb, cell 1 of 1 ran past the timeout of 3 seconds per cell. Fix: raise --timeout"
        " (timeout= in Python) above 3, or make it 0 for no limit."
    ], done.stderr
    assert not (tmp_path / "exs").exists()
    kernel, deadline = int((tmp_path / "pid").read_text()), time.time() + 10
    while _running(kernel):
        assert time.time() < deadline, "the kernel outlived the export"
        time.sleep(0.05)


@pytest.mark.parametrize(
    "argv, what",
    [
        (["search", "net.onnx", "--runs", "1"], "TVM could not compile the build's C source"),  # a traceback
        (["compare", "demo", "--backend", "c"], "cc could not compile the C of byoc_target_1"),  # "fix the emitter"
    ],
)
def test_a_compiler_under_ulimit_f_is_one_line_saying_to_raise_it(tmp_path, argv, what):
    relu_onnx(tmp_path / "net.onnx")

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    env = {**os.environ, files.CACHE_ENV: str(tmp_path / "cache")}
    done = subprocess.run(
        [CLI, *argv], cwd=tmp_path, env=env, preexec_fn=limit, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 1 and done.stderr.splitlines()[-1] == (
        f"error: {what}: the compiler could not write its output in {tempfile.gettempdir()} (File too large)."
        " Fix: raise the limit on a file's size (ulimit -f unlimited)."
    ), done.stderr
    assert "Traceback" not in done.stderr


def test_a_real_compile_error_is_no_full_disk():
    said = "Compilation error:\nlib0.c:3:1: error: unknown type name 'flaot'\nCommand line: /usr/bin/g++ -shared ..."
    assert files.compiler_could_not_write(said, "TVM") is None  # it keeps its traceback
    full = files.compiler_could_not_write("ld: final link failed: No space left on device", "TVM")
    assert "No space left on device" in full.cause and "set TMPDIR to a folder on another disk" in full.fix


def test_a_file_where_the_weights_folder_goes_is_said_as_one(tmp_path):
    """prefetch said "(File exists)", then to put the weights inside that file."""
    (tmp_path / "models").write_text("mine")
    cache = tmp_path / "models"
    with pytest.raises(weights.DownloadError) as err:  # one line for all models since round 13 (A-N4)
        weights.prefetch(["mobilenetv3_small"], cache=cache, repo_url="http://127.0.0.1:9/")
    assert err.value.cause == f"The weights cache {cache} cannot be a folder: {cache} is a file"
    assert err.value.fix.startswith(f"move or remove {cache}")
    os.mkfifo(tmp_path / "c")  # the C library cache's folder: its warning said "File exists" too
    with pytest.raises(NotADirectoryError, match="a FIFO is there, not a folder"):
        files.write_atomic(tmp_path / "c" / "x.so", b"")


def test_doctor_stopped_says_no_word_of_writing():
    """``doctor`` writes nothing, yet said "interrupted; nothing was written."."""
    proc = subprocess.Popen([CLI, "doctor"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and err.splitlines()[-1] == "interrupted.", err
