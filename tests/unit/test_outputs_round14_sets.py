"""Round 14 of issue 47: an ``--out`` set written over an earlier one of another model or format (F2), and a cache
folder made append-only (F6)."""

import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from byoc_workbench import cli, stages
from byoc_workbench.cli.stages import STAGES_SET
from byoc_workbench.core import files, output_paths
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.models.synthetic import model_source

CLI = os.path.join(os.path.dirname(sys.executable), "byoc-workbench")


def _flagged(path, flag: str):
    """``chattr +<flag> path``, or the test skipped where chattr cannot (no root, a file system without flags)."""
    if shutil.which("chattr") is None:
        pytest.skip("no chattr on this machine")
    done = subprocess.run(["chattr", f"+{flag}", str(path)], capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"chattr +{flag} is refused here: {done.stderr.strip()}")
    return path


def _unflag(path, flag: str) -> None:
    subprocess.run(["chattr", f"-{flag}", str(path)], check=True)


def _names(folder) -> list:
    return sorted(p.name for p in folder.iterdir())


def _stage_names(fmt: str) -> list:
    return [f"{i:02d}-{s}.{fmt}" for i, s in enumerate(stages.STAGES)] + ["summary.json"]


def test_a_stages_set_replaces_the_earlier_sets_files_and_leaves_yours(tmp_path):
    """F2: `stages resnet18 --out stx` then `stages demo --out stx` left resnet18's opened groups beside the demo's
    stages, and `--format dot` left the .svg set beside it. Now the earlier set the workbench wrote goes whole;
    a file of yours stays, even one named like a diagram, and so does one of its diagrams you changed since."""
    model = tmp_path / "residual.py"
    model.write_text(model_source(400).replace("residual_model(400)", "residual_model(400, blocks_per_stage=50)"))
    out = tmp_path / "stx"
    assert cli.main(["stages", str(model), "--target", "tensorrt", "--format", "dot", "--out", str(out)]) == 0
    groups = [f"00-source--main-stage{k}.dot" for k in (0, 1)]
    assert set(groups) < set(_names(out))
    (out / "notes.txt").write_text("mine")
    (out / "00-source--mine.dot").write_text("digraph mine {}")
    (out / groups[1]).write_text("digraph edited {}")  # changed since: no longer the workbench's

    yours = ["00-source--mine.dot", groups[1], "notes.txt"]
    assert cli.main(["stages", "demo", "--format", "dot", "--out", str(out)]) == 0
    assert _names(out) == sorted([output_paths.WRITTEN, *_stage_names("dot"), *yours])
    assert "stage0" not in (out / output_paths.WRITTEN).read_text()  # the record forgets what went

    assert cli.main(["stages", "demo", "--out", str(out)]) == 0
    assert _names(out) == sorted([output_paths.WRITTEN, *_stage_names("svg"), *yours])
    assert (out / "notes.txt").read_text() == "mine"


def _earlier_set(out: Path) -> None:
    with files.staged(out, STAGES_SET) as tmp:
        for name in ("00-source.svg", "00-source--a.svg", "00-source--b.svg", "summary.json"):
            (tmp / name).write_text(f"first {name}")


def test_a_set_that_fails_puts_back_the_earlier_files_it_removed(tmp_path):
    """The earlier set's files are removed as part of the set: a rename that fails after them puts them back."""
    out = tmp_path / "st"
    _earlier_set(out)
    old = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(files.OutputError, match=r"Cannot write .*summary\.json \(Not a directory\)"):
        with files.staged(out, STAGES_SET) as tmp:
            (tmp / "00-source.dot").write_text("second")
            (tmp / "summary.json").mkdir()  # out holds a file there: its rename fails, after the removals
    assert {p.name: p.read_bytes() for p in out.iterdir()} == old
    assert _names(tmp_path) == ["st"]


def test_an_earlier_file_that_cannot_be_removed_is_refused_before_the_work(tmp_path):
    """An immutable file of the earlier set would stop the set after the work: check_dir says so first."""
    out = tmp_path / "st"
    _earlier_set(out)
    _flagged(out / "00-source--b.svg", "i")
    try:
        with pytest.raises(WorkbenchError) as err:
            output_paths.check_dir(out, "--out", ["00-source.dot", "summary.json"], replaces=STAGES_SET)
        assert err.value.line == (
            f"error: --out: {out / '00-source--b.svg'} is immutable, so it cannot be replaced."
            f" Fix: run chattr -i {out / '00-source--b.svg'}, or pass another --out."
        )
    finally:
        _unflag(out / "00-source--b.svg", "i")


@pytest.fixture
def append_only_cache(tmp_path, monkeypatch):
    """``$BYOC_WORKBENCH_CACHE`` whose ``c`` folder is append-only (files can be made there, never renamed)."""
    folder = tmp_path / "cache" / "c"
    folder.mkdir(parents=True)
    monkeypatch.setenv(files.CACHE_ENV, str(tmp_path / "cache"))
    _flagged(folder, "a")
    try:
        yield folder
    finally:
        _unflag(folder, "a")


def test_an_append_only_cache_folder_keeps_nothing_and_leaves_no_temporary(append_only_cache, monkeypatch, caplog):
    """F6: an entry written into an append-only cache folder left `.<key>.c.XXXXXXXX.part` there for good (its
    rename and its removal both refused). Now the folder is checked first: one warning, nothing written."""
    monkeypatch.setattr(files, "_unkept", set())
    with caplog.at_level(logging.WARNING, "byoc_workbench.core.files"):
        kept = files.keep("c", lambda: files.write_sealed(append_only_cache / "k-0123.so", b"\x7fELF"))
    assert kept is False
    assert os.listdir(append_only_cache) == []
    assert [r.getMessage() for r in caplog.records] == [
        f"c cache: nothing is kept in {append_only_cache} (the folder is append-only, so no file can be put in"
        " place there; chattr -a undoes it); it is computed again next time"
    ]


@pytest.mark.slow
def test_a_c_build_into_an_append_only_cache_runs_and_leaves_nothing(append_only_cache):
    """F6 as the user met it: `compare demo --backend c` with the C cache append-only works, says one line."""
    env = {**os.environ, files.CACHE_ENV: str(append_only_cache.parent)}
    done = subprocess.run([CLI, "compare", "demo", "--backend", "c"], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"warning: c cache: nothing is kept in {append_only_cache} (the folder is append-only, so no file can be"
        " put in place there; chattr -a undoes it); it is computed again next time"
    ]
    assert os.listdir(append_only_cache) == []
