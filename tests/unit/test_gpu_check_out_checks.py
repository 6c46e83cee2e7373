"""benchmarks/gpu_check.py --out is refused in one line before anything is built where the JSON or its record could
not be written after it: a record of the workbench's that is a folder, a FIFO or a link of yours (never replaced), a
name whose temporary is over NAME_MAX. Its lines are cut between words, never inside one."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from byoc_workbench.core import output_paths

#: A fresh process (or several) per case, signals and tools: make test runs them, make test-fast does not.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
WRITTEN = output_paths.WRITTEN


def _gpu_check(out: Path):
    cmd = [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--target", "llvm", "--models", "demo"]
    cmd += ["--runs", "1", "--warmup", "0", "--out", str(out)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("kind", ["folder", "FIFO", "link"])
def test_a_record_that_is_no_plain_file_is_refused_before_anything_is_built(tmp_path, kind):
    """A folder there stopped the run after its first build; a FIFO or a link of yours was replaced by a file."""
    record = tmp_path / WRITTEN
    (tmp_path / "notes.txt").write_text("my notes")
    if kind == "folder":
        record.mkdir()
    elif kind == "FIFO":
        os.mkfifo(record)
    else:
        record.symlink_to("notes.txt")
    done = _gpu_check(tmp_path / "r.json")
    what = {"folder": "a folder", "FIFO": "a FIFO", "link": "a link to notes.txt"}[kind]
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"error: --out {tmp_path / 'r.json'} is in {tmp_path}, which holds {WRITTEN} as {what}, where the record of "
        f"what it wrote goes. Fix: remove or rename {record}, or pass another --out."
    ]
    assert sorted(os.listdir(tmp_path)) == sorted([WRITTEN, "notes.txt"]) and not (tmp_path / "r.json").exists()
    assert {"folder": record.is_dir, "FIFO": record.is_fifo, "link": record.is_symlink}[kind]()
    assert (tmp_path / "notes.txt").read_text() == "my notes"


@pytest.mark.parametrize("size", [241, 250, 255, 256])
def test_a_name_whose_temporary_is_too_long_is_refused_before_anything_is_built(tmp_path, size):
    """A name of 241 to 255 bytes was taken, then failed after the first build, its cause cut mid-word."""
    out = tmp_path / ("g" * (size - 5) + ".json")
    done = _gpu_check(out)
    most = os.pathconf(tmp_path, "PC_NAME_MAX")
    assert done.returncode == 1 and done.stdout == "" and os.listdir(tmp_path) == []
    assert done.stderr.splitlines() == [
        f"error: --out {out} has a name of {size} bytes, {size + 15} as .<name>.XXXXXXXX.part, its temporary: over the "
        f"{most} bytes a name may take in {tmp_path}. Fix: pass an --out whose names take at most {most - 15} bytes "
        "each."
    ]
    folder = tmp_path / ("f" * (most + 1))
    done = _gpu_check(folder / "r.json")  # a folder to make: said as such, no traceback
    assert done.returncode == 1 and done.stderr.splitlines() == [
        f"error: --out {folder / 'r.json'} has a folder name over the {most} bytes a name may take in {tmp_path}. "
        f"Fix: pass an --out whose names take at most {most - 15} bytes each."
    ]


def test_a_line_is_cut_between_words_never_inside_one():
    """The cause was cut at 300 characters: 'File name too lon', with no closing parenthesis."""
    spec = importlib.util.spec_from_file_location("gpu_check_probe", ROOT / "benchmarks" / "gpu_check_probe.py")
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    why = "cannot load\n" + " ".join(f"/lib/{k}/libcudart.so.13" for k in range(40))
    line = probe.missing_line("tvm", why)
    said = line.removeprefix("tvm: ").partition(" [...]. Fix: ")[0].split()
    assert said == why.split()[: len(said)] and 30 < len(" ".join(said)) <= 300 and "\n" not in line
    assert line.endswith(f" [...]. Fix: {probe.FIXES['tvm']}.")
    path = "/x" * 200  # one word longer than the cut: kept whole
    assert probe.missing_line("tvm", path, "pass another") == f"tvm: {path}. Fix: pass another."
