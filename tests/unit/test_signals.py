"""Ctrl-C and SIGTERM sent to real processes: an export stopped while its kernel runs is one line, its status
130 or 143, and leaves no kernel, connection file or output; a signal after a command's last line, while the
interpreter tears TVM down, leaves the finished command's exit status 0."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from byoc_workbench.core.output_paths import WRITTEN

CLI = os.path.join(os.path.dirname(sys.executable), "byoc-workbench")
EXPORT = [CLI, "export"]


def _notebook(path: Path, source: str) -> Path:
    cell = {"cell_type": "code", "execution_count": None, "id": "c", "metadata": {}, "outputs": [], "source": source}
    path.write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


def _masks(pid: int) -> dict:
    """The process's signal masks, as Linux's /proc says: ``{"SigIgn": ..., "SigCgt": ...}``."""
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {line[:6]: int(line.split()[1], 16) for line in lines if line[:6] in ("SigIgn", "SigCgt")}


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize(
    ("sig", "group", "before", "word"),
    [
        (signal.SIGINT, True, [], "interrupted"),  # Ctrl-C: the terminal signals the whole process group
        (signal.SIGTERM, False, ["ok.ipynb"], "terminated"),  # kill PID: the process alone
    ],
)
def test_an_export_stopped_while_its_kernel_runs_is_one_line_and_leaves_nothing_running(
    tmp_path, sig, group, before, word
):
    """Both were nbclient's AssertionError after ipykernel's traceback, status 1, its cleanup run twice."""
    _notebook(tmp_path / "ok.ipynb", "x = 1")
    _notebook(  # says its kernel's pid and connection file, then runs until it is stopped
        tmp_path / "slow.ipynb",
        "import os, time, ipykernel\n"
        "open('started', 'w').write(f'{os.getpid()} {ipykernel.get_connection_file()}')\n"
        "time.sleep(120)",
    )
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"))
    cmd = [*EXPORT, *before, "slow.ipynb", "--out", "out"]
    pipes = dict(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, start_new_session=group, **pipes)
    deadline = time.time() + 120
    while not (tmp_path / "started").exists():
        assert proc.poll() is None and time.time() < deadline, proc.communicate()
        time.sleep(0.05)
    time.sleep(0.2)  # the cell is in its sleep
    if group:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err
    assert "Traceback" not in err and "Task was destroyed" not in err, err
    kernel, connection = (tmp_path / "started").read_text().split()
    deadline = time.time() + 5
    while _running(int(kernel)):
        assert time.time() < deadline, "the kernel outlived the export"
        time.sleep(0.05)
    assert not Path(connection).exists()
    if before:  # the notebook before it is whole, and said
        assert err.splitlines()[-1] == f"{word}; wrote out/ok.html, out/ok.ipynb before that.", err
        assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(["ok.html", "ok.ipynb", WRITTEN])
    else:
        assert err.splitlines()[-1] == f"{word}; nothing was written.", err
        assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("cmd", "sig"),
    [
        ([CLI, "stages", "demo", "--format", "dot", "--out", "out"], signal.SIGTERM),
        ([*EXPORT, "ok.ipynb", "--out", "out"], signal.SIGINT),
    ],
    ids=["byoc-workbench", "export"],
)
def test_a_signal_after_the_last_line_leaves_the_finished_command_its_status_0(tmp_path, cmd, sig):
    """Sent as the interpreter tears TVM down (half a second), it was a silent 130 or 143 after 'wrote ...'."""
    _notebook(tmp_path / "ok.ipynb", "x = 1")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = [proc.stdout.readline()]
    while not lines[-1].startswith("wrote "):
        assert lines[-1], (lines, proc.communicate())
        lines.append(proc.stdout.readline())
    ignored = False
    while not ignored and proc.poll() is None:  # the command has returned: its handlers are gone
        try:
            masks = _masks(proc.pid)
        except FileNotFoundError:
            break
        ignored = bool(masks["SigIgn"] >> (sig - 1) & 1) and not masks["SigCgt"] >> (sig - 1) & 1
    assert ignored, "the signal was not ignored after the command's last line"
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and not out, (out, err)
    assert "interrupted" not in err and "terminated" not in err and "Traceback" not in err, err
