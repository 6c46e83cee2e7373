"""A-N4 of round 13: a file (a FIFO, a link that leads nowhere) where the weights cache's folder should be. ``prefetch``
printed a "MISSING" line per model whose fix named the folder no file can go in, ``prefetch --list`` called every
model "not cached", and ``doctor`` told the user to put the weights in that folder; each is one line now."""

import os

import pytest

from byoc_workbench import cli, doctor
from byoc_workbench.models import weights

NAME = "resnet18_v1"


def _file(root):
    (root / "models").write_text("not a folder")
    return root / "models"


def _fifo(root):
    os.mkfifo(root / "models")
    return root / "models"


def _nowhere(root):
    (root / "models").symlink_to(root / "gone")
    return root / "models"


def _root_a_file(root):
    (root / "cache").write_text("not a folder")
    return root / "cache"


@pytest.fixture(params=[_file, _fifo, _nowhere, _root_a_file], ids=["file", "FIFO", "link to nowhere", "root a file"])
def blocked(request, tmp_path, monkeypatch):
    """The cache root set, and what blocks its models folder; no download can reach a network."""
    there = request.param(tmp_path)
    monkeypatch.setenv(weights.CACHE_ENV, str(tmp_path / "cache" if request.param is _root_a_file else tmp_path))
    monkeypatch.setenv(weights.REPO_ENV, "http://127.0.0.1:9/")
    return there


def _line(there) -> str:
    return (
        f"error: The weights cache {weights.weights_dir()} cannot be a folder: {there} is "
        f"{'a link that leads nowhere' if not there.exists() else 'a FIFO' if there.is_fifo() else 'a file'}. "
        f"Fix: move or remove {there}, or set ${weights.CACHE_ENV} to another folder."
    )


@pytest.mark.parametrize("argv", [["prefetch", "--models", NAME], ["prefetch", "--list"]], ids=["fetch", "list"])
def test_prefetch_says_the_cache_is_blocked_in_one_line(blocked, argv, capsys):
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == _line(blocked) + "\n"


def test_the_library_says_it_too(blocked):
    for call in (lambda: weights.prefetch([NAME]), lambda: weights.download_weights(NAME)):
        with pytest.raises(weights.DownloadError) as err:
            call()
        assert str(err.value) == _line(blocked)


def test_doctor_reports_a_failed_check_with_the_fix(blocked, capsys):
    check = doctor.check_weights()
    assert not check.ok and f"error: {check.found}. Fix: {check.fix}." == _line(blocked)
    assert cli.main(["doctor"]) == 0  # Part 1 needs no weights
    assert f"fix: move or remove {blocked}, or set" in capsys.readouterr().out
