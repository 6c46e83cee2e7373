"""Results replace only what the workbench wrote, as one set, and nothing they leave behind stays (issue 47)."""

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from byoc_workbench.cli import earlier
from byoc_workbench.core import files, output_paths
from byoc_workbench.core.errors import WorkbenchError


@contextlib.contextmanager
def immutable(path):
    """``chattr +i path`` for the block (which stops even root), or the test skipped where chattr cannot."""
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"chattr +i is refused here: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def _report(out, text: str) -> None:
    with files.staged(out) as tmp:
        (tmp / "report.txt").write_text(text)
        (tmp / "report.json").write_text("{}")


def _contents(folder) -> dict:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_a_file_in_the_set_that_cannot_be_replaced_is_found_before_the_work(tmp_path):
    """Round 9, N6 (#85): `chattr +i rp/report.txt` was found only after the whole report, and the folder then
    held two runs' files; now check_dir refuses it up front, and a set that meets one anyway stays the old set."""
    out = tmp_path / "rp"
    _report(out, "the pruned report")
    old = _contents(out)
    for name in (output_paths.WRITTEN, "report.txt"):
        with immutable(out / name):
            with pytest.raises(WorkbenchError) as err:
                output_paths.check_dir(out, "--out", ["report.json", "report.txt"])
            assert err.value.line == (
                f"error: --out: {out / name} is immutable, so it cannot be replaced."
                f" Fix: run chattr -i {out / name}, or pass another --out."
            )
            with pytest.raises(files.OutputError) as err:
                _report(out, "the unpruned report")
            assert f"Cannot write {out / name} (Operation not permitted)" in err.value.line
            assert "free some space" not in err.value.line and "pass a path you can write to" in err.value.line
            assert _contents(out) == old  # the old set whole: no file of the second run among them
    assert [p.name for p in tmp_path.iterdir()] == ["rp"]  # nothing staged left beside it


def test_a_set_that_fails_half_way_is_put_back_whole(tmp_path):
    """A rename that fails after others succeeded (here a folder the block made where out holds a file) puts
    every file already moved back: the record and report.json are the old ones, and the new extra.txt is gone."""
    out = tmp_path / "rp"
    _report(out, "first")
    old = _contents(out)
    with pytest.raises(files.OutputError, match=r"Cannot write .*report\.txt \(Not a directory\)"):
        with files.staged(out) as tmp:
            (tmp / "report.json").write_text('{"second": true}')
            (tmp / "extra.txt").write_text("new")
            (tmp / "report.txt").mkdir()
    assert _contents(out) == old


def test_a_link_in_a_set_is_replaced_never_written_through(tmp_path):
    """A link put at a result's name after check_dir refused none is replaced as a name; its target is untouched."""
    target = tmp_path / "elsewhere.json"
    target.write_text("mine")
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").symlink_to(target)
    with files.staged(out) as tmp:
        (tmp / "summary.json").write_text("[]")
    assert not (out / "summary.json").is_symlink() and (out / "summary.json").read_text() == "[]"
    assert target.read_text() == "mine"


def test_an_output_file_that_cannot_be_replaced_is_found_before_the_work(tmp_path):
    """Round 9, N6: `bench --out b1.json` (#86) and `run --save-outputs lnk.npz` (#92), a link to an earlier
    result in a folder that cannot be written, failed only after the work; the link's own folder was probed."""
    b1 = files.write_file(tmp_path / "b1.json", '{"model": "demo", "backends": {}, "skipped": {}, "notes": []}\n')
    with immutable(b1):
        with pytest.raises(WorkbenchError, match=r"b1\.json is immutable, so it cannot be replaced. Fix: run chattr"):
            output_paths.check_file(b1, "--out", ours=earlier.BENCH)
    kept = tmp_path / "kept"
    saved = files.write_file(kept / "earlier.npz", lambda f: np.savez(f, output0=np.zeros(2)))
    link = tmp_path / "lnk.npz"
    link.symlink_to(saved)
    assert output_paths.check_file(link, "--save-outputs", ours=earlier.SAVED_OUTPUTS) == link
    with immutable(kept):
        with pytest.raises(WorkbenchError, match=rf"Cannot write to {kept} \(Operation not permitted\)"):
            output_paths.check_file(link, "--save-outputs", ours=earlier.SAVED_OUTPUTS)
        with pytest.raises(files.OutputError) as err:  # were it written anyway: what to do, not "free some space"
            files.write_file(link, b"new")
        assert err.value.line.endswith("Fix: pass a path you can write to.")


def test_the_record_proves_a_file_by_its_size_and_hash_not_its_name(tmp_path):
    """Round 9, N7 (#152): a file put later at a recorded name, even of the same size, is the user's."""
    out = tmp_path / "nd"
    _report(out, "the report")
    assert output_paths.check_dir(out, "--out", ["report.txt", "report.json"]) == out  # its own: replaced
    for notes in ("my notes about the partition", "the rep0rt"):  # another size; the same size
        (out / "report.txt").unlink()
        (out / "report.txt").write_text(notes)
        with pytest.raises(WorkbenchError, match="holds a report.txt that the workbench did not write"):
            output_paths.check_dir(out, "--out", ["report.txt", "report.json"])
    copied = tmp_path / "notes"  # a results folder copied, record and all, and its report then edited
    copied.mkdir()
    for name in (output_paths.WRITTEN, "report.json"):
        (copied / name).write_bytes((out / name).read_bytes())
    assert output_paths.wrote(copied / "report.json") and not output_paths.wrote(out / "report.txt")


def test_a_directory_named_like_the_record_is_refused_up_front(tmp_path):
    """Round 9, N7 (#4): it passed the check, and the command failed after the whole report."""
    (tmp_path / "e1" / output_paths.WRITTEN).mkdir(parents=True)
    with pytest.raises(WorkbenchError) as err:
        output_paths.check_dir(tmp_path / "e1", "--out", ["report.txt"])
    assert f"holds a directory named {output_paths.WRITTEN}" in err.value.line and "\n" not in err.value.line


@pytest.mark.parametrize("make", [os.mkdir, os.mkfifo, lambda p: os.symlink(os.devnull, p)], ids=["dir", "fifo", "ln"])
def test_a_file_outputs_record_that_is_no_plain_file_is_refused_up_front(tmp_path, make):
    """Round 10, A5 (#16-#18, #186): --save-outputs and bench --out wrote their result, then failed on a directory
    named like the record beside it, or replaced a FIFO or a link there with a plain file."""
    make(tmp_path / output_paths.WRITTEN)
    with pytest.raises(WorkbenchError, match=f"holds .*{output_paths.WRITTEN}"):
        output_paths.check_file(tmp_path / "o.npz", "--save-outputs", ours=earlier.SAVED_OUTPUTS)
    assert output_paths.check_file(os.devnull, "--save-outputs") == Path(os.devnull)  # a device: nothing recorded


def test_saved_outputs_replace_only_an_npz_the_workbench_wrote(tmp_path):
    """Round 9, N8 (#154): a user's .npz whose arrays have prediction-like names was replaced."""
    mine = tmp_path / "myscores.npz"
    np.savez(mine, scores=np.arange(1000.0), boxes=np.ones((5, 4)), ids=np.zeros(5))
    ours = files.write_file(tmp_path / "outputs.npz", lambda f: np.savez(f, scores=np.ones(3), output0=np.ones(1)))
    assert output_paths.check_file(ours, "--save-outputs", ours=earlier.SAVED_OUTPUTS) == ours
    np.savez(ours, scores=np.zeros(3), output0=np.zeros(1))  # the user's now, though it looks the same
    for path in (mine, ours):
        with pytest.raises(WorkbenchError, match="holds something else than a result --save-outputs wrote"):
            output_paths.check_file(path, "--save-outputs", ours=earlier.SAVED_OUTPUTS)


def test_a_temporary_of_any_suffix_left_by_sigterm_is_swept(tmp_path, monkeypatch):
    """Round 9, N10 (#144): SIGTERM during byom.example's torch export left `.resnet18.onnx.XXXXXXXX.onnx` in
    the cache, which no sweep recognised; write_with's temporaries of every suffix are now swept alike."""
    cache, ready = tmp_path / "cache", tmp_path / "ready"
    folder = cache / "examples" / "64x64-seed3"
    script = f"""
        import pathlib, time
        from byoc_workbench.core import files
        def save(name):
            pathlib.Path(name).write_bytes(b"half an ONNX file")
            pathlib.Path({str(ready)!r}).touch()
            time.sleep(60)
        files.write_with({str(folder / "resnet18.onnx")!r}, save, ".onnx")
    """
    env = {**os.environ, files.CACHE_ENV: str(cache)}
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], env=env)
    deadline = time.monotonic() + 120
    while not ready.exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=30) == -signal.SIGTERM
    [left] = folder.iterdir()
    assert left.name.startswith(".resnet18.onnx.") and left.name.endswith(".onnx")
    old = time.time() - files.STALE_S - 60
    os.utime(left, (old, old))
    monkeypatch.setenv(files.CACHE_ENV, str(cache))
    files.write_atomic(folder / "resnet18.onnx", b"whole")
    assert [p.name for p in folder.iterdir()] == ["resnet18.onnx"]


def test_the_examples_fallback_folder_taken_by_a_file_is_one_of_its_own(tmp_path, monkeypatch, caplog):
    """Round 9, N12 (#14): a file at /tmp/byoc-byom-<uid>-<name> was a FileExistsError traceback."""
    pytest.importorskip("torchvision", reason="the torch half of byom.example")
    import tempfile

    from byoc_workbench.measure.bench import byom

    blocker = tmp_path / "cfile"
    blocker.write_text("x")
    monkeypatch.setenv(files.CACHE_ENV, str(blocker))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    taken = tmp_path / f"byoc-byom-{os.getuid()}-33x33-seed7"
    taken.write_text("somebody's file")
    with caplog.at_level("WARNING"):
        example = byom.example(size=33, seed=7)
    assert example.onnx_path.parent.parent == tmp_path and example.onnx_path.stat().st_size > 1000
    assert example.onnx_path.parent != taken and taken.read_text() == "somebody's file"
    assert "writing it to" in caplog.text
