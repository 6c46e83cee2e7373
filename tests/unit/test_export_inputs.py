"""``byoc-workbench export``: every path checked before the first notebook runs, one line each."""

import os
from pathlib import Path

import nbformat
import pytest

from byoc_workbench import cli


def _refused(capsys, *argv) -> str:
    assert cli.main(["export", *(str(a) for a in argv)]) == 2
    out, err = capsys.readouterr()
    [line] = err.splitlines()
    assert out == "" and line.startswith("error: ") and ". Fix: " in line
    return line


@pytest.fixture
def ok(tmp_path):
    path = tmp_path / "ok.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), path)
    return path


@pytest.mark.parametrize(
    ("name", "make", "said"),
    [
        ("missing.ipynb", None, "does not exist"),  # each was a traceback
        ("bad.ipynb", "not json", "is not a notebook nbformat can read: Notebook does not appear to be JSON"),
        ("list.ipynb", "[1]", "is not a notebook nbformat can read"),
        ("script.py", "print(1)", "is not a notebook (its name does not end in .ipynb)"),
        ("folder", Path.mkdir, "is a directory. Fix: pass its notebooks: "),
        ("fifo.ipynb", os.mkfifo, "is a FIFO, not a regular file"),  # it waited for ever
        ("null.ipynb", lambda p: p.symlink_to(os.devnull), "is a device, not a regular file"),  # /dev/zero: no end
    ],
)
def test_what_is_not_a_notebook_is_one_line_and_nothing_runs(tmp_path, capsys, ok, name, make, said):
    """Given after a good notebook too: ``ok.ipynb missing.ipynb`` wrote ok's export, then a traceback."""
    path = tmp_path / name
    if isinstance(make, str):
        path.write_text(make)
    elif make is not None:
        make(path)
    assert _refused(capsys, "--out", tmp_path / "out", ok, path) == _refused(capsys, "--out", tmp_path / "out", path)
    assert said in _refused(capsys, "--out", tmp_path / "out", path) and not (tmp_path / "out").exists()


def test_an_out_that_cannot_hold_the_pages_is_one_line(tmp_path, capsys, ok):
    afile = tmp_path / "afile"
    afile.write_text("mine")
    assert "is a file, not a directory" in _refused(capsys, "--out", afile, ok)  # FileExistsError
    assert "is a file, not a directory" in _refused(capsys, "--out", afile / "sub", ok)  # NotADirectoryError
    assert afile.read_text() == "mine"


def test_an_export_never_replaces_a_notebook_it_reads(tmp_path, capsys, ok):
    """``--out`` the notebooks' own folder: the executed copy would have replaced the notebook."""
    before = ok.read_bytes()
    assert "which this command reads" in _refused(capsys, "--out", tmp_path, ok)
    (tmp_path / "sub").mkdir()
    twin = tmp_path / "sub" / "ok.ipynb"
    twin.write_bytes(before)
    assert "two notebooks are named ok.ipynb" in _refused(capsys, "--out", tmp_path / "out", ok, twin)
    assert ok.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["ok.ipynb", "sub"]
