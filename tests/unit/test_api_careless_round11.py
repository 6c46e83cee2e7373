"""Round 11's careless user (R12, R13, R14): each public argument of the wrong type or shape is one line naming it."""

import nbformat
import numpy as np
import pytest
from messages import refused

from byoc_workbench import cli, exercises, export, subjects, workflow
from byoc_workbench.exercises_codegen import EmitterFeedback
from byoc_workbench.models import demo
from byoc_workbench.session import Workbench


@pytest.fixture(scope="module")
def wb():
    return Workbench(demo.demo_module(), "byoc-target")


@pytest.fixture
def ok(tmp_path):
    path = tmp_path / "ok.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), path)
    return path


def test_feedback_checks_its_keywords_type_and_shape():
    """R12: cls=5 was dataclasses' TypeError; right="yes" was shown a letter a line."""
    refused(lambda: exercises.feedback(1, cls=5), "cls is a Feedback subclass; got 5", "pass a Feedback subclass")
    refused(lambda: exercises.feedback(1, cls=None), "cls is a Feedback subclass; got None")
    refused(lambda: exercises.feedback(1, right="yes"), "right is a list of str; got str ('yes')", "right=['yes']")
    refused(lambda: exercises.feedback(1, wrong=[1]), "wrong is a list of str; got list ([1])")
    refused(lambda: exercises.feedback(1, tries=True), "tries is int; got bool (True)")
    refused(lambda: exercises.feedback(6, EmitterFeedback, emit=[]), "emit is a dict with str keys; got list")
    fb = exercises.feedback(np.int64(1), right=["yes"])
    assert repr(fb).splitlines()[1:] == ["  right: yes"] and type(fb.number) is int
    assert exercises.feedback(6, EmitterFeedback, emit={"relu": print}).emit == {"relu": print}


def test_export_takes_one_path_as_a_str_and_says_which_argument_is_wrong(tmp_path, ok):
    """R13: a str where the list belongs was read a letter a path ("/ is a directory"); a str timeout was a
    traitlets TraitError; read_notebook of a str an AttributeError."""
    out = tmp_path / "out"
    refused(lambda: export.export(str(tmp_path / "gone.ipynb"), out), "gone.ipynb does not exist")
    refused(lambda: export.export(5, out), "paths is a list of notebooks' paths; got int (5)")
    refused(lambda: export.export([ok, 5], out), "paths[1] is the path of a notebook (.ipynb); got int (5)")
    refused(lambda: export.export([ok], None), "out_dir is the path of a folder; got NoneType (None)")
    for bad in (-1, "x", 1.5, True):
        refused(lambda bad=bad: export.export([ok], out, timeout=bad), "timeout is a whole number of seconds")
        refused(lambda bad=bad: export.execute(ok, timeout=bad), "pass timeout=1800 (the default), or 0 for no limit")
    refused(lambda: export.read_notebook(5), "path is the path of a notebook (.ipynb); got int (5)")
    for blank in ("", " "):  # Path("") is the working folder: the export was written there
        refused(lambda blank=blank: export.export([ok], blank), "out_dir is empty", "pass out_dir the path of a folder")
        refused(lambda blank=blank: export.export([blank], out), "paths[0] is empty")
    assert not out.exists()
    assert export.read_notebook(str(ok)).cells[0].source == "x = 1"
    assert export.export(str(ok), out, timeout=0) == [out / "ok.html"]  # one notebook, run with no limit
    assert (out / "ok.ipynb").is_file()


def test_the_export_command_says_its_own_flag_for_an_empty_out(tmp_path, capsys, ok, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["export", "--out", "", str(ok)]) == 2
    assert capsys.readouterr().err.startswith("error: --out is empty. Fix: ")  # the flag, not out_dir
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.ipynb"]


def test_the_export_command_refuses_a_negative_timeout(tmp_path, capsys, ok):
    """R13: ``--timeout -1`` was taken, though only 0 is documented (no limit)."""
    assert cli.main(["export", "--out", str(tmp_path / "out"), "--timeout", "-1", str(ok)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert "--timeout" in line and "0 or more" in line and not (tmp_path / "out").exists()


def test_subjects_of_and_of_own_name_the_argument(wb):
    """R13: of(None, None) was a TypeError, of_own("x") an AttributeError."""
    refused(lambda: subjects.of(None, None), "workbench must be a Workbench, got NoneType (None)")
    refused(lambda: subjects.of(wb, None), "inputs must be a list of arrays of numbers, got NoneType")
    refused(lambda: subjects.of(wb, [None]), "inputs must be a list of arrays of numbers, got list ([None])")
    refused(lambda: subjects.of(wb, demo.demo_inputs(), detection="no"), "detection is True or False; got str")
    refused(lambda: subjects.of_own("x"), "wb must be a Workbench holding your own model, got str ('x')")
    refused(lambda: subjects.of_own(wb), "wb must be a Workbench holding your own model, got Workbench")
    subject = subjects.of(wb, demo.demo_inputs(), name="demo")
    assert subject.workbench is wb and all(isinstance(x, np.ndarray) for x in subject.inputs)


@pytest.mark.parametrize("strict", ["no", None, 0, 1.0])
def test_graph_and_view_take_strict_as_true_or_false(wb, strict):
    """R14: strict="no" was read as strict, strict=None or 0 as not; collapse= beside it was checked."""
    refused(lambda: wb.graph("prune", expand=["nope"], strict=strict), "strict is True or False", "strict=False")
    refused(lambda: wb.view("prune", expand=["nope"], strict=strict, svg=False), "strict is True or False")
    assert wb.graph("prune", expand=["nope"], strict=np.bool_(False)).nodes


def test_the_workflow_takes_progress_as_true_or_false():
    """R14: workflow.run(..., progress="no") ran; byom's progress= was checked. Refused before any import."""
    refused(lambda: workflow.run("resnet18_v1", progress="no"), "progress is True or False; got str ('no')")
    refused(lambda: workflow.zoo_report("resnet18_v1", progress=None), "progress is True or False; got NoneType")


def test_the_export_run_as_a_module_says_where_it_went():
    """``python -m byoc_workbench.export NB --out DIR`` did nothing and exited 0 once export became a subcommand."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "byoc_workbench.export", "a.ipynb", "--out", "x"], capture_output=True, text=True
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        "error: python -m byoc_workbench.export runs nothing. Fix: run byoc-workbench export NOTEBOOK... --out DIR.\n"
    )
