"""Results and caches a careless user tried in round 15: ``--save-outputs /dev/stdout`` into a file, a C trial
stopped by Ctrl-C or SIGTERM, two searches at once on one cache, ``/dev/full``, a build-cache entry linked to
itself."""

import logging
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from shared import relu_onnx

from byoc_workbench.core import files

#: A fresh process per case (a CLI run, a signal): make test runs them, make test-fast does not.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CLI = os.path.join(os.path.dirname(sys.executable), "byoc-workbench")


@pytest.mark.parametrize("out", ["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1", "{log}"])
def test_outputs_saved_to_stdout_into_a_file_keep_the_printed_lines(tmp_path, out):
    """``run m.onnx --save-outputs /dev/stdout > log.txt`` renamed the .npz over log.txt: the lines went to the
    unlinked file. Now the outputs are written into the stream, after the lines printed before them."""
    onnx, log = relu_onnx(tmp_path / "m.onnx"), tmp_path / "log.txt"
    env = dict(os.environ, BYOC_WORKBENCH_CACHE=str(tmp_path / "cache"))
    with open(log, "wb") as stdout:
        argv = [CLI, "run", str(onnx), "--save-outputs", out.format(log=log)]
        done = subprocess.run(argv, stdout=stdout, stderr=subprocess.PIPE, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    data = log.read_bytes()
    start = data.index(b"PK\x03\x04")  # the .npz, after the lines printed before it
    assert b"m.onnx on tvm alone" in data[:start], data[:start]
    assert data.rstrip().endswith(f"saved 1 output to {out.format(log=log)}".encode()), data[-200:]
    with zipfile.ZipFile(log) as saved:  # a zip reader finds it past the text before it
        [name] = saved.namelist()
    assert name.endswith(".npy")


def test_a_result_into_the_file_open_on_stderr_is_appended_to_it(tmp_path):
    """The same for fd 2, named by its file's own name: written through the descriptor, never renamed over."""
    log = tmp_path / "err.txt"
    code = "import sys; from byoc_workbench.core import files; print('said', file=sys.stderr, flush=True); "
    code += f"files.put({str(log)!r}, b'DATA'); print('after', file=sys.stderr)"
    with open(log, "wb") as stderr:
        subprocess.run([sys.executable, "-c", code], stderr=stderr, cwd=ROOT, check=True, timeout=60)
    assert log.read_bytes() == b"said\nDATAafter\n"


LOOP = """
from byoc_workbench import op_rule, register_codegen


def add(op):
    return "for (volatile long j = 0; ; ++j) {}"


rules = [op_rule("loopchip", "add", "relax.add")]
loopchip = register_codegen("loopchip", emit={"add": add}, language="c", rules=rules)
"""


def _trial_child(parent: subprocess.Popen) -> int | None:
    """The forked trial child of ``parent``: a child running the same command line (a compiler runs another)."""
    with open(f"/proc/{parent.pid}/cmdline", "rb") as f:
        line = f.read()
    for pid in Path(f"/proc/{parent.pid}/task").glob("*/children"):
        for child in pid.read_text().split():
            try:
                if Path(f"/proc/{child}/cmdline").read_bytes() == line:
                    return int(child)
            except OSError:
                continue
    return None


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_c_trial_that_never_ends_is_killed_with_its_parent(tmp_path, sig):
    """Ctrl-C or SIGTERM while a C trial spins: the forked child (inside C, so its inherited Python handler never
    runs) was left spinning for ever once the parent had gone."""
    (tmp_path / "loopchip.py").write_text(LOOP)
    env = dict(os.environ, BYOC_WORKBENCH_CACHE=str(tmp_path / "cache"))
    argv = [CLI, "compare", "demo", "--no-prune", "--backend", str(tmp_path / "loopchip.py")]
    parent = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path)
    child = None
    try:
        deadline = time.monotonic() + 240
        while child is None and parent.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
            child = _trial_child(parent)
        assert child is not None, parent.communicate(timeout=30)
        time.sleep(0.5)  # well inside the spinning C
        parent.send_signal(sig)
        _, err = parent.communicate(timeout=60)
        assert parent.returncode == 128 + sig, err
        for _ in range(50):  # its reaper (init) may take a moment once the parent is gone
            if _gone(child):
                break
            time.sleep(0.1)
        assert _gone(child), f"the trial child {child} still runs"
    finally:
        if parent.poll() is None:
            parent.kill()
        if child is not None and not _gone(child):
            os.kill(child, signal.SIGKILL)


def test_a_full_device_is_not_a_full_disk(tmp_path):
    """``--save-outputs /dev/full``: freeing space on a disk does nothing for a device."""
    with pytest.raises(files.OutputError) as caught:
        files.write_file("/dev/full", b"x" * 100000)
    assert "No space left on device" in caught.value.cause
    assert "free some space" not in caught.value.fix and "pass the path of a file" in caught.value.fix


def test_a_build_entry_linked_to_itself_is_said_damaged(tmp_path, monkeypatch, caplog):
    """``ln -s K.so K.so`` in the build cache: rebuilt, and said, like any damaged entry."""
    from byoc_workbench.measure.compiler import compiled

    monkeypatch.setenv(files.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(files, "_said_damaged", set())
    lib = tmp_path / "builds" / "k.so"
    lib.parent.mkdir()
    lib.symlink_to(lib.name)
    with caplog.at_level(logging.WARNING):
        assert compiled._load(lib) is None
    assert [r.getMessage() for r in caplog.records] == [
        "build cache: k.so is damaged (it disagrees with its seal); it is made again"
    ]


def test_a_cached_search_names_the_finalists_whose_finals_are_not_cached(tmp_path):
    """Two searches at once on one cache mixed their measurements: the finalists these choose were timed by
    neither, and the finals kept are another set's. "the finals are not cached" was untrue."""
    from byoc_workbench.measure import search
    from byoc_workbench.measure.search import finals

    subject = search.load({"kind": "demo"})
    options = dict(runs=2, top=1, seams=0, anchors=False)
    result = search.search(subject, ("onnxruntime", "tvm"), cache=search.Cache(tmp_path), **options)
    [entry] = (tmp_path / "finals").glob("*.json")
    other = entry.with_name("0" * 40 + ".json")  # the finals of another set of finalists
    entry.rename(other)
    entry.with_name(entry.name + ".sum").unlink()
    files.seal(other)
    with pytest.raises(search.NotCached) as caught:
        search.search(subject, ("onnxruntime", "tvm"), cache=search.Cache(tmp_path), only_cached=True, **options)
    picked = [r.what for r in finals.finalists(result.placements)]
    said = f"the finals of the finalists the cached measurements now choose ({'; '.join(picked)}) are not cached"
    assert picked and caught.value.cause == said
    assert caught.value.fix == "run the search once with measuring on"
