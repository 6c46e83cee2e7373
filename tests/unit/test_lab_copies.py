"""make lab serves working copies: running a notebook never shows up in git status."""

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import lab_copies  # noqa: E402
import pytest  # noqa: E402


def _notebooks(tmp_path):
    source = tmp_path / "notebooks"
    source.mkdir()
    (source / "a.ipynb").write_text('{"v": 1}')
    (source / "b.ipynb").write_text('{"v": 1}')
    return source, tmp_path / "lab"


def test_first_run_copies_every_notebook(tmp_path):
    source, lab = _notebooks(tmp_path)
    assert lab_copies.sync(source, lab) == []
    assert sorted(p.name for p in lab.glob("*.ipynb")) == ["a.ipynb", "b.ipynb"]


def test_the_solution_keys_are_copied_beside_the_notebooks(tmp_path):
    """Lab's file browser shows only what is under lab/: notebook 04's key must be there too."""
    source, lab = _notebooks(tmp_path)
    (source / "solutions").mkdir()
    (source / "solutions" / "codegen.py").write_text("KEY = 1\n")
    assert lab_copies.sync(source, lab) == []
    assert (lab / "solutions" / "codegen.py").read_text() == "KEY = 1\n"
    real = sorted(p.name for p in (ROOT / "notebooks" / "solutions").glob("*.py"))
    assert "codegen.py" in real, "the key notebook 04 names"


def test_a_new_version_replaces_an_untouched_copy_and_keeps_an_edited_one(tmp_path):
    source, lab = _notebooks(tmp_path)
    lab_copies.sync(source, lab)
    (lab / "a.ipynb").write_text('{"v": 1, "outputs": "saved by JupyterLab"}')  # the attendee ran it
    for nb in ("a.ipynb", "b.ipynb"):
        (source / nb).write_text('{"v": 2}')  # git pull brought new versions
    notes = lab_copies.sync(source, lab)
    assert (lab / "b.ipynb").read_text() == '{"v": 2}'
    assert "saved by JupyterLab" in (lab / "a.ipynb").read_text()
    assert len(notes) == 1 and "a.ipynb" in notes[0] and "make lab-fresh" in notes[0]


def test_fresh_keeps_each_edited_copy_beside_the_new_one_and_says_where(tmp_path):
    """make lab-fresh replaced an attendee's edited copy with no backup and no line."""
    source, lab = _notebooks(tmp_path)
    lab_copies.sync(source, lab)
    (lab / "a.ipynb").write_text('{"v": 1, "outputs": "saved by JupyterLab"}')
    (source / "b.ipynb").write_text('{"v": 2}')  # b's copy is untouched: replaced, nothing to keep
    [line] = lab_copies.sync(source, lab, fresh=True)
    [kept] = lab.glob("a.*.bak.ipynb")
    assert line == f"kept your edited {lab / 'a.ipynb'} as {kept}"
    assert kept.read_text() == '{"v": 1, "outputs": "saved by JupyterLab"}'
    assert [(lab / n).read_text() for n in ("a.ipynb", "b.ipynb")] == ['{"v": 1}', '{"v": 2}']
    assert lab_copies.sync(source, lab, fresh=True) == [] and list(lab.glob("*.bak.ipynb")) == [kept]


def test_a_copy_that_links_to_the_shipped_notebook_is_left_alone(tmp_path):
    source, lab = _notebooks(tmp_path)
    lab.mkdir()
    (lab / "a.ipynb").symlink_to(source / "a.ipynb")
    assert lab_copies.sync(source, lab, fresh=True) == []
    assert (lab / "a.ipynb").is_symlink() and (source / "a.ipynb").read_text() == '{"v": 1}'


def _refused(capsys, *argv) -> str:
    assert lab_copies.main([str(a) for a in argv]) == 2
    out, err = capsys.readouterr()
    [line] = err.splitlines()
    assert out == "" and line.startswith("error: ") and ". Fix: " in line
    return line


@pytest.mark.parametrize("argv", [[], ["notebooks"], ["notebooks", "lab", "more"], ["notebooks", "lab", "--Fresh"]])
def test_a_wrong_command_line_is_one_line(capsys, argv):
    """0, 1 or 3 arguments, or a flag mistyped, were a ValueError unpacking them."""
    assert "tools/lab_copies.py --help" in _refused(capsys, *argv)


def test_folders_it_cannot_use_are_refused_before_anything_is_copied(tmp_path, capsys):
    source, lab = _notebooks(tmp_path)
    afile = tmp_path / "afile"
    afile.write_text("mine")
    (source / "link").symlink_to(source)
    assert "does not exist" in _refused(capsys, tmp_path / "no-such", lab)  # it exited 0 having done nothing
    assert "holds no notebook" in _refused(capsys, tmp_path, lab)
    assert "is a file, not a directory" in _refused(capsys, source, afile)  # FileExistsError
    assert "is a file, not a directory" in _refused(capsys, source, afile / "lab")
    assert "itself" in _refused(capsys, source, source)  # shutil.SameFileError
    assert "itself" in _refused(capsys, source, source / "link")
    assert not lab.exists() and afile.read_text() == "mine"
    assert sorted(p.name for p in source.iterdir()) == ["a.ipynb", "b.ipynb", "link"]


def test_the_working_copies_are_ignored_by_git():
    if subprocess.run(["git", "rev-parse"], cwd=ROOT, capture_output=True).returncode != 0:
        pytest.skip("not a git checkout: there is no git status to dirty")
    out = subprocess.run(["git", "check-ignore", "lab/01_byoc_workflow.ipynb"], cwd=ROOT, capture_output=True)
    assert out.returncode == 0, "lab/ must be in .gitignore, or running a notebook dirties git status"
    makefile = (ROOT / "Makefile").read_text()
    assert "--ServerApp.root_dir=lab" in makefile and "tools/lab_copies.py notebooks lab" in makefile


def _lab_copies(*argv, **popen):
    return subprocess.Popen(
        [sys.executable, str(ROOT / "tools" / "lab_copies.py"), *map(str, argv)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )


def test_a_copy_cut_short_is_never_kept_as_an_edited_one(tmp_path):
    """A copy that hit the file-size limit stayed, half-written, and each later run kept it as the user's edit."""
    source, lab = _notebooks(tmp_path)
    (source / "a.ipynb").write_text(json.dumps({"cells": ["x" * 100_000]}))
    limited = _lab_copies(source, lab, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192)))
    out, err = limited.communicate(timeout=120)
    [line] = err.splitlines()
    assert limited.returncode == 2 and line.startswith("error: cannot write ") and "(File too large)" in line
    assert not (lab / "a.ipynb").exists() and not [p for p in lab.rglob("*") if p.is_file()]  # no half, no temporary
    assert lab_copies.sync(source, lab) == []
    assert json.loads((lab / "a.ipynb").read_text()) == {"cells": ["x" * 100_000]}


def test_a_link_in_the_lab_is_never_written_through(tmp_path, capsys):
    """A copy's name that links elsewhere, to nothing yet, had the copy written there, outside LAB_DIR."""
    source, lab = _notebooks(tmp_path)
    lab.mkdir()
    (tmp_path / "w").mkdir()
    (lab / "a.ipynb").symlink_to(tmp_path / "w" / "elsewhere.ipynb")
    line = _refused(capsys, source, lab)
    assert line == (
        f"error: {lab / 'a.ipynb'} is a link to {tmp_path / 'w' / 'elsewhere.ipynb'}, and no copy is written "
        f"through a link. Fix: remove the link {lab / 'a.ipynb'}, or pass another LAB_DIR."
    )
    assert list((tmp_path / "w").iterdir()) == [] and sorted(p.name for p in lab.iterdir()) == ["a.ipynb"]


def test_a_source_that_is_no_plain_file_is_refused_naming_it(tmp_path, capsys):
    """A source linked to /dev/zero was copied until the disk filled; a FIFO was blamed on LAB_DIR."""
    source, lab = _notebooks(tmp_path)
    (source / "a.ipynb").unlink()
    (source / "a.ipynb").symlink_to("/dev/zero")
    line = _refused(capsys, source, lab)
    assert line.startswith(f"error: SOURCE_DIR's {source / 'a.ipynb'} is a device, not a regular file. Fix: put ")
    (source / "a.ipynb").unlink()
    os.mkfifo(source / "a.ipynb")
    line = _refused(capsys, source, lab)
    assert line.startswith(f"error: SOURCE_DIR's {source / 'a.ipynb'} is a FIFO, not a regular file. Fix: put ")
    assert not lab.exists()


def test_no_plain_file_in_the_lab_makes_a_false_has_changed_note(tmp_path, capsys):
    """A FIFO record in .pristine, or a FIFO where a copy goes, each said the notebook had changed: it had not."""
    source, lab = _notebooks(tmp_path)
    lab_copies.sync(source, lab)
    for nb in ("a.ipynb", "b.ipynb"):
        (lab / ".pristine" / nb).unlink()
        os.mkfifo(lab / ".pristine" / nb)  # no record of what the copy was made from
    (lab / "b.ipynb").write_text('{"v": 1, "outputs": "saved by JupyterLab"}')
    [note] = lab_copies.sync(source, lab)
    assert note.startswith(f"note: your copy {lab / 'b.ipynb'} differs from {source / 'b.ipynb'}, and no record ")
    assert (lab / ".pristine" / "a.ipynb").read_text() == '{"v": 1}'  # a's copy untouched: its record made again
    (lab / "a.ipynb").unlink()
    os.mkfifo(lab / "a.ipynb")
    line = _refused(capsys, source, lab, "--fresh")
    assert line.startswith(f"error: {lab / 'a.ipynb'} is a FIFO, not a regular file, where the copy of ")
    assert (lab / "a.ipynb").is_fifo() and not list(lab.glob("*.bak.ipynb"))


def _catches(pid: int, signum: int, mask_of: str = "SigCgt:") -> bool:
    """Whether ``pid`` handles ``signum`` (or, with ``mask_of="SigIgn:"``, ignores it), as /proc says."""
    status = Path(f"/proc/{pid}/status").read_text()
    [mask] = [line.split()[1] for line in status.splitlines() if line.startswith(mask_of)]
    return bool(int(mask, 16) >> (signum - 1) & 1)


@pytest.mark.parametrize(("signum", "word"), [(signal.SIGINT, "interrupted"), (signal.SIGTERM, "terminated")])
def test_a_signal_while_it_loads_is_one_line_and_the_shells_status(tmp_path, signum, word):
    """Ctrl-C while the package loaded TVM was a KeyboardInterrupt traceback; SIGTERM a silent 143."""
    source, lab = _notebooks(tmp_path)
    proc = _lab_copies(source, lab)
    deadline = time.monotonic() + 30
    while not _catches(proc.pid, signal.SIGTERM):  # its handlers are in: the package's imports come next
        assert proc.poll() is None and time.monotonic() < deadline, "it never handled SIGTERM"
        time.sleep(0.005)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum and out == ""
    assert err.splitlines() == [
        f"{word}; no copy is half-made (each is renamed into place whole): run it again to finish."
    ]
    assert not lab.exists()


@pytest.mark.parametrize("linked", [".pristine", "solutions", ".pristine/solutions"])
def test_a_linked_folder_in_the_lab_is_never_written_through(tmp_path, capsys, linked):
    """A .pristine linked to another folder had every notebook written into it, over the user's own."""
    source, lab = _notebooks(tmp_path)
    (source / "solutions").mkdir()
    (source / "solutions" / "codegen.py").write_text("KEY = 1\n")
    mine = tmp_path / "mywork"
    mine.mkdir()
    for name in ("a.ipynb", "codegen.py"):
        (mine / name).write_text("my own work")
    (lab / linked).parent.mkdir(parents=True)
    (lab / linked).symlink_to(mine)
    line = _refused(capsys, source, lab)
    assert line == (
        f"error: {lab / linked} is a link to {mine}, and no copy is written through a link. "
        f"Fix: remove the link {lab / linked}, or pass another LAB_DIR."
    )
    assert {p.name: p.read_text() for p in mine.iterdir()} == {"a.ipynb": "my own work", "codegen.py": "my own work"}
    assert not list(lab.glob("*.ipynb"))


@pytest.mark.parametrize(("make", "what"), [(os.mkfifo, "a FIFO"), (lambda p: p.write_text("mine"), "a file")])
def test_no_folder_at_pristine_is_one_line_naming_it_before_any_copy(tmp_path, capsys, make, what):
    """A FIFO at .pristine was 'cannot write lab/.pristine (File exists). Fix: free some space', a copy made."""
    source, lab = _notebooks(tmp_path)
    lab.mkdir()
    make(lab / ".pristine")
    line = _refused(capsys, source, lab)
    assert line == (
        f"error: {lab / '.pristine'} is {what}, where a folder of the copies goes. "
        f"Fix: remove {lab / '.pristine'}, or pass another LAB_DIR."
    )
    assert [p.name for p in lab.iterdir()] == [".pristine"]


def test_a_signal_once_the_copies_are_in_place_changes_nothing(tmp_path):
    """SIGTERM just after the copies were made was a silent 143: make lab then failed for copies that were made."""
    source, lab = _notebooks(tmp_path)
    proc = _lab_copies(source, lab)
    records = [lab / ".pristine" / n for n in ("a.ipynb", "b.ipynb")]  # written last, each after its copy
    deadline = time.monotonic() + 60
    while not all(r.exists() for r in records):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.001)
    while proc.poll() is None and not _catches(proc.pid, signal.SIGTERM, "SigIgn:"):
        time.sleep(0.001)
    assert proc.poll() is None, "it ended, never ignoring SIGTERM, or too fast to see"
    while proc.poll() is None:  # from the copies in place to the exit
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.01)
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out, err) == (0, "", "")
    assert [(lab / n).read_text() for n in ("a.ipynb", "b.ipynb")] == ['{"v": 1}', '{"v": 1}']
