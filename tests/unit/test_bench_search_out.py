"""benchmarks/bench_search.py --out is checked as the CLI checks its outputs, before minutes of searching: a file
it did not write, a folder, a place that cannot be written are one line at once, and nothing is touched."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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
        ("afolder", "error: --out afolder is a directory, not a file. Fix: pass --out afolder/search_bench.json"),
        ("afile/out.json", "error: --out afile/out.json: afile is a file, not a directory."),
        ("", "error: --out is empty."),
    ],
)
def test_an_out_it_must_not_write_is_refused_before_the_search(tmp_path, out, said):
    """It wrote Path(--out) unchecked at the end: over your notes, into a folder's place, or not at all."""
    (tmp_path / "notes.txt").write_text("my notes")
    (tmp_path / "mine.json").write_text(json.dumps({"search": "my own"}))
    (tmp_path / "afolder").mkdir()
    (tmp_path / "afile").write_text("a file")
    before = {p.name: p.is_file() and p.read_bytes() for p in tmp_path.iterdir()}
    done = _bench_search(out, tmp_path, HOME=str(tmp_path))
    [line] = done.stderr.splitlines()
    assert done.returncode == 2 and done.stdout == "" and line.startswith(said.format(tmp=tmp_path))
    assert ". Fix: " in line and {p.name: p.is_file() and p.read_bytes() for p in tmp_path.iterdir()} == before
