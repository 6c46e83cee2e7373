"""benchmarks/bench_search.py --out is checked as the CLI checks its outputs, before minutes of searching: a file
it did not write, a folder, a place that cannot be written are one line at once, and nothing is touched. A signal
stops it in one line, with the search it started and that search's temporary cache gone."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from byoc_workbench.core import files

#: A fresh process (or several) per case, signals and tools: make test runs them, make test-fast does not.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _bench_search(out, cwd: Path, **env):
    cmd = [sys.executable, str(ROOT / "benchmarks" / "bench_search.py"), "--out", str(out)]
    # Past the check it searches the SSD for minutes: a run that gets there fails by its timeout.
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120, env={**os.environ, **env})


@pytest.mark.parametrize(
    ("out", "said"),
    [
        ("notes.txt", "error: --out notes.txt holds something else"),
        ("~/notes.txt", "error: --out {tmp}/notes.txt holds something else"),  # ~ expanded, as by the CLI
        ("mine.json", "error: --out mine.json holds something else"),  # a JSON, not one it wrote
        ("keys.json", "error: --out keys.json holds something else"),  # its keys, and no record that it wrote it
        ("afolder", "error: --out afolder is a directory, not a file. Fix: pass --out afolder/search_bench.json"),
        ("afile/out.json", "error: --out afile/out.json: afile is a file, not a directory."),
        ("", "error: --out is empty. Fix: pass --out a path, e.g. --out search_bench.json."),  # not out.npz
    ],
)
def test_an_out_it_must_not_write_is_refused_before_the_search(tmp_path, out, said):
    """It wrote Path(--out) unchecked at the end: over your notes, into a folder's place, or not at all."""
    (tmp_path / "notes.txt").write_text("my notes")
    (tmp_path / "mine.json").write_text(json.dumps({"search": "my own"}))
    (tmp_path / "keys.json").write_text(json.dumps({"search": "...", "bench": "...", "verdicts": ["good"]}))
    (tmp_path / "afolder").mkdir()
    (tmp_path / "afile").write_text("a file")
    before = {p.name: p.is_file() and p.read_bytes() for p in tmp_path.iterdir()}
    done = _bench_search(out, tmp_path, HOME=str(tmp_path))
    [line] = done.stderr.splitlines()
    assert done.returncode == 2 and done.stdout == "" and line.startswith(said.format(tmp=tmp_path))
    assert ". Fix: " in line and {p.name: p.is_file() and p.read_bytes() for p in tmp_path.iterdir()} == before


def _searches(pid: int) -> list:
    """The children of ``pid`` that run the CLI (not, say, the ldconfig that a library's import runs)."""
    found = []
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        try:
            if b"byoc_workbench.cli" in Path(f"/proc/{child}/cmdline").read_bytes():
                found.append(int(child))
        except OSError:  # it ended meanwhile
            continue
    return found


def _session(sid: int) -> list:
    """The processes of session ``sid``, as /proc shows them (a zombie not yet waited for among them)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # it ended meanwhile
            continue
        if int(fields[3]) == sid:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.parametrize(("signum", "word"), [(signal.SIGINT, "interrupted"), (signal.SIGTERM, "terminated")])
@pytest.mark.parametrize("when", ["while it loads", "while its search runs"])
def test_a_signal_is_one_line_and_stops_the_search_and_removes_its_cache(tmp_path, signum, word, when):
    """SIGTERM was a silent 143 that left its search running for minutes, orphaned, and its temporary cache in
    /tmp; Ctrl-C a KeyboardInterrupt traceback."""
    earlier = tmp_path / "bench.json"  # an earlier run's, as its record proves: accepted, and kept whole
    files.put(earlier, json.dumps({"search": {}, "bench": {}, "verdicts": {}}), record=True)
    before = earlier.read_bytes()
    cmd = [sys.executable, str(ROOT / "benchmarks" / "bench_search.py"), "--out", str(earlier)]
    proc = subprocess.Popen(
        cmd, env={**os.environ, "TMPDIR": str(tmp_path)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while not (_catches(proc.pid, signal.SIGTERM) and (when == "while it loads" or _searches(proc.pid))):
            assert proc.poll() is None and time.monotonic() < deadline, "it never handled SIGTERM"
            time.sleep(0.005)
        search = _searches(proc.pid)
        if search:  # the search's own handlers in: it is past Python's start, loading the workbench
            while not _catches(search[0], signal.SIGTERM):
                assert time.monotonic() < deadline
                time.sleep(0.005)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 128 + signum and out == ""
        assert err.splitlines() == [f"{word}; nothing was written."]
        assert bool(search) == (when == "while its search runs") and all(not _session(pid) for pid in search)
        assert not list(tmp_path.glob("byoc-search-bench-*")) and earlier.read_bytes() == before
    finally:  # a run that failed here is not left searching
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _catches(pid: int, signum: int) -> bool:
    status = Path(f"/proc/{pid}/status").read_text()
    [mask] = [line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")]
    return bool(int(mask, 16) >> (signum - 1) & 1)
