"""Round 17: where ``--save-outputs`` goes when it names no plain file: a descriptor (``/dev/fd/1`` under ``| cat``,
one not open, stdin), a FIFO in a folder nobody may write, ``/dev/tty`` with no terminal, a path back out of a
folder that does not exist; and what a signal that stops a write into a pipe says was written."""

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from onnx import TensorProto, helper, save
from shared import ROOT, relu_onnx, run_cli

from byoc_workbench.core import output_paths
from byoc_workbench.core.errors import WorkbenchError


def _python(code: str, **run) -> subprocess.CompletedProcess:
    """``code`` run by Python in a process of its own, its output as text."""
    argv = [*run.pop("prefix", []), sys.executable, "-c", code]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, **run)


CHECK = "from byoc_workbench.core import output_paths as o\ntry: o.check_file({!r}, '--save-outputs')\n"
CHECK += "except o.WorkbenchError as err: print(err.line)\nelse: print('accepted')"


@pytest.mark.slow
@pytest.mark.parametrize("out", ["/dev/fd/1", "/proc/self/fd/1"])
def test_a_descriptor_open_on_a_pipe_takes_the_outputs(tmp_path, out):
    """``--save-outputs /dev/fd/1 | cat`` was refused: the check made a temporary file in /dev/fd, which none holds."""
    relu_onnx(tmp_path / "m.onnx")
    done = run_cli(["run", "m.onnx", "--save-outputs", out], tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert done.returncode == 0, done.stderr
    start = done.stdout.index(b"PK\x03\x04")  # the .npz, after the lines printed before it
    assert b"m.onnx on tvm alone" in done.stdout[:start]
    assert done.stdout.endswith(f"saved 1 output to {out}\n".encode())


@pytest.mark.slow
def test_a_descriptor_that_is_not_open_or_is_stdin_is_said_as_such(tmp_path):
    """``/dev/fd/57`` with nothing open there is its own line; ``/dev/fd/0`` (stdin, here a file) said "move 0 away"."""
    assert _python(CHECK.format("/dev/fd/57")).stdout == (
        "error: --save-outputs /dev/fd/57: descriptor 57 is not open. Fix: open it for writing in the shell"
        " (57> file), or pass --save-outputs the path of a file.\n"
    )
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    with open(notes) as stdin:
        said = _python(CHECK.format("/dev/fd/0"), stdin=stdin).stdout
    assert said == (
        "error: --save-outputs /dev/fd/0 is stdin, which the command reads: it takes no result. Fix: pass"
        " --save-outputs the path of a file to write, e.g. --save-outputs outputs.npz.\n"
    )
    with open(notes) as held:  # open for reading only
        fd = held.fileno()
        said = _python(CHECK.format(f"/dev/fd/{fd}"), pass_fds=[fd]).stdout
    assert said == (
        f"error: --save-outputs /dev/fd/{fd}: descriptor {fd} is open for reading only. Fix: open it for writing in"
        f" the shell ({fd}> file), or pass --save-outputs the path of a file.\n"
    )
    assert notes.read_text() == "my notes\n"


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() == 0 and not shutil.which("setpriv"), reason="root, and no setpriv to drop its rights")
def test_a_fifo_in_a_folder_nobody_may_write_is_checked_by_itself(tmp_path):
    """A FIFO (or ``/dev/null`` for a seat's user) in a folder the user cannot write was refused: the check made a
    temporary file in the folder. Root writes any folder, so it runs without that right (setpriv)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    os.mkfifo(folder / "fifo", 0o666)
    folder.chmod(0o555)
    prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"] if os.geteuid() == 0 else []
    try:
        assert _python(CHECK.format(str(folder / "fifo")), prefix=prefix).stdout == "accepted\n"
        (folder / "fifo").chmod(0o444)  # and one it may not write is refused, as such
        said = _python(CHECK.format(str(folder / "fifo")), prefix=prefix).stdout
    finally:
        folder.chmod(0o755)
    assert said.startswith(f"error: Cannot write {folder / 'fifo'} (Permission denied). Fix: ")


@pytest.mark.slow
def test_dev_tty_without_a_terminal_is_said_before_the_work(tmp_path):
    """Under setsid, /dev/tty is no device: it waited 5 s after the work, then called it a FIFO nobody read."""
    relu_onnx(tmp_path / "m.onnx")
    argv = ["run", "m.onnx", "--save-outputs", "/dev/tty"]
    done = run_cli(argv, tmp_path, capture_output=True, text=True, start_new_session=True)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "error: --save-outputs /dev/tty: no terminal controls this command, so /dev/tty is no device. Fix: pass"
        " --save-outputs the path of a file instead.\n"
    )
    code = "from byoc_workbench.core import files\ntry: files.put('/dev/tty', b'x')\n"
    code += "except files.OutputError as err: print(err.line)"
    assert "no terminal controls this command" in _python(code, start_new_session=True).stdout


@pytest.mark.parametrize("check", [output_paths.check_file, output_paths.check_dir])
def test_a_path_back_out_of_a_missing_folder_is_refused(tmp_path, monkeypatch, check):
    """``--save-outputs ./sub/../l3.txt > l3.txt`` made sub/ to follow the path, and so replaced l3.txt, the file
    the shell had opened for stdout."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(WorkbenchError) as err:
        check("./sub/../l3.txt", "--save-outputs")
    assert err.value.line == (
        "error: --save-outputs sub/../l3.txt goes back out of sub with '..', but there is no folder sub. Fix: write"
        " the path without sub/.., or make the folder sub first."
    )
    (tmp_path / "sub").mkdir()
    assert check("./sub/../l3.txt", "--save-outputs") == Path("sub/../l3.txt")


@pytest.mark.slow
def test_a_path_back_out_of_a_missing_folder_keeps_the_shells_stdout(tmp_path):
    relu_onnx(tmp_path / "m.onnx")
    with open(tmp_path / "l3.txt", "wb") as stdout:
        done = run_cli(["run", "m.onnx", "--save-outputs", "./sub/../l3.txt"], tmp_path, stdout=stdout)
    assert done.returncode == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["l3.txt", "m.onnx"]


def _big_relu(path: Path, size: int) -> Path:
    """An ONNX Relu of one output of ``size`` floats: a .npz larger than a pipe holds."""
    x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, size]) for n in "xy")
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "big", [x], [y])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_writing_into_a_pipe_says_how_much_went(tmp_path, sig):
    """A signal while the outputs went into a pipe that was not read said "nothing was written": part was."""
    _big_relu(tmp_path / "m.onnx", 1 << 17)
    read, write = os.pipe()  # it holds 64 KiB: the writer waits for the reader long before the .npz is written
    argv = ["run", "m.onnx", "--backend", "tvm", "--save-outputs", "/dev/stdout"]
    run = subprocess.Popen(
        [sys.executable, str(ROOT / "byoc_workbench_cli.py"), *argv],
        stdin=subprocess.DEVNULL,
        stdout=write,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    os.close(write)
    try:
        got = b""
        while b"PK\x03\x04" not in got and (more := os.read(read, 1 << 16)):  # read until the .npz comes, no more
            got += more
        run.send_signal(sig)
        got += b"".join(iter(lambda: os.read(read, 1 << 16), b""))
        err = run.stderr.read().decode()
        assert run.wait(timeout=60) == 128 + sig, err
    finally:
        if run.poll() is None:
            run.kill()
        os.close(read)
    sent = len(got) - got.index(b"PK\x03\x04")  # what went into the pipe of the .npz
    word = "terminated" if sig == signal.SIGTERM else "interrupted"
    said = re.fullmatch(f"{word}; wrote {sent} of (\\d+) bytes of /dev/stdout before that.\n", err.splitlines(True)[-1])
    assert said and 0 < sent < int(said[1]), err
