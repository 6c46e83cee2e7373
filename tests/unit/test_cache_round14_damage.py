"""F5 of round 14 (tester c): damaged entries made again without a word. A link to nowhere or to itself at a C
library; kept runs and references swapped, or a FIFO or a folder at them; a FIFO at a search reference under
``only_cached``, said only "not cached". Each is now said once, "<cache>: <entry> is damaged ...; it is made again"
(the search's own wording under ``only_cached``), and what comes back is what an empty cache gives. And a seal's
size is checked before its entry is hashed: a huge sparse file at an entry is told apart unread."""

import logging
import os

import numpy as np
import pytest
from damage import cache
from test_cache_damage import _c, _put, _two_references, _two_runs

from byoc_workbench.core import files


@pytest.fixture
def said(caplog, monkeypatch):
    """The damage lines said while the test runs (each cache says one once per process: reset here)."""
    monkeypatch.setattr(files, "_said_damaged", set())
    caplog.set_level(logging.WARNING)
    return lambda: [r.getMessage() for r in caplog.records if "is damaged" in r.getMessage()]


def _nowhere(path):
    path.symlink_to(path.parent / "gone")


def _loop(path):
    path.symlink_to(path.name)


def _fifo(path):
    os.mkfifo(path)


def _folder(path):
    path.mkdir()


def _same(again, first):
    assert len(again) == len(first)
    for a, b in zip(again, first):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("put", [_nowhere, _loop, _fifo, _folder], ids=lambda f: f.__name__.strip("_"))
def test_a_c_library_that_is_no_file_is_said_damaged(put, said):
    with cache() as root:
        first = _c()
        lib = sorted((root / "c").glob("*.so"))[0]
        lib.unlink()
        put(lib)
        again = _c()
    _same(again, first)
    assert [m.split(": ")[0] for m in said()] == ["C library cache"], said()


# (what computes through the cache, its folder, the name its damage is said under)
KEPT = {"runs": (_two_runs, "runs", "runs cache"), "references": (_two_references, "references", "references cache")}


@pytest.mark.parametrize("kind", sorted(KEPT))
def test_a_swapped_kept_entry_is_said_damaged(kind, said):
    compute, folder, name = KEPT[kind]
    with cache() as root:
        first = compute()
        a, b = sorted((root / folder).glob("*.npz"))[:2]
        for src, dst in ((b, a), (b.with_name(b.name + ".sum"), a.with_name(a.name + ".sum"))):
            _put(src, dst, "copied")
        again = compute()
    _same(again, first)
    assert len(said()) == 1 and said()[0].startswith(f"{name}: {a.name} is damaged"), said()
    assert said()[0].endswith("; it is made again")


@pytest.mark.parametrize("at", ["entry", "seal"])
@pytest.mark.parametrize("put", [_fifo, _folder], ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("kind", sorted(KEPT))
def test_a_fifo_or_folder_at_a_kept_entry_is_said_damaged(kind, put, at, said):
    compute, folder, name = KEPT[kind]
    with cache() as root:
        first = compute()
        entry = sorted((root / folder).glob("*.npz"))[0]
        there = entry if at == "entry" else entry.with_name(entry.name + ".sum")
        there.unlink()
        put(there)
        again = compute()
    _same(again, first)
    assert len(said()) == 1 and said()[0].startswith(f"{name}: {entry.name} is damaged"), said()


def test_a_fifo_at_a_search_reference_under_only_cached_is_said_damaged(tmp_path, caplog):
    from byoc_workbench.measure import search

    subject = search.load({"kind": "demo"})
    options = dict(runs=2, top=1, seams=0, anchors=False)
    search.search(subject, ("onnxruntime", "tvm"), cache=search.Cache(tmp_path), **options)
    for entry in (tmp_path / "reference").glob("*.npz"):
        entry.unlink()
        os.mkfifo(entry)
    with caplog.at_level(logging.WARNING), pytest.raises(search.NotCached):
        search.search(subject, ("onnxruntime", "tvm"), cache=search.Cache(tmp_path), only_cached=True, **options)
    [line] = [r.getMessage() for r in caplog.records if "is damaged" in r.getMessage()]
    assert line.endswith("is damaged; it is not used (only cached measurements asked for)"), line


def test_a_huge_file_at_a_sealed_entry_is_told_apart_unread(tmp_path, said, monkeypatch):
    entry = files.write_sealed(tmp_path / "k.bin", b"the entry")
    with open(entry, "r+b") as f:
        f.truncate(20 << 30)  # sparse: hashing it whole takes tens of seconds
    monkeypatch.setattr(files, "_digest", lambda path: pytest.fail(f"{path} was hashed whole"))
    assert not files.trusted(entry, "test cache")
    assert said() == ["test cache: k.bin is damaged (it disagrees with its seal); it is made again"]
    entry.with_name("k.bin.sum").write_bytes(b"k.bin 9 " + b"0" * (20 << 20))  # no seal is this long: not read whole
    assert not files.intact(entry)
