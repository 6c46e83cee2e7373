"""One atomic write and one cache directory for the whole package (files.py)."""

import json
from pathlib import Path

import numpy as np
import pytest

from byoc_workbench.core import files, output_paths, streams
from byoc_workbench.core.errors import WorkbenchError


def _left(folder) -> list:
    return sorted(p.name for p in folder.iterdir())


def test_write_atomic_writes_bytes_text_and_a_writer(tmp_path):
    files.write_atomic(tmp_path / "a.bin", b"\x00\x01")
    files.write_atomic(tmp_path / "sub" / "b.txt", "text")  # the directory is made
    files.write_atomic(tmp_path / "c.npz", lambda f: np.savez(f, x=np.arange(3)))
    assert (tmp_path / "a.bin").read_bytes() == b"\x00\x01" and (tmp_path / "sub" / "b.txt").read_text() == "text"
    with np.load(tmp_path / "c.npz") as data:
        assert data["x"].tolist() == [0, 1, 2]
    assert _left(tmp_path) == ["a.bin", "c.npz", "sub"]  # no temporary file left beside them


@pytest.mark.parametrize("failure", [OSError("disk full"), KeyboardInterrupt()])
def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(tmp_path, failure):
    path = tmp_path / "out.json"
    path.write_text("old")

    def writer(f):
        f.write(b"half of the ne")
        raise failure

    with pytest.raises(type(failure)):
        files.write_atomic(path, writer)
    assert path.read_text() == "old" and _left(tmp_path) == ["out.json"]
    with pytest.raises(TypeError):  # not bytes: the write itself fails
        files.write_atomic(path, 3.5)
    assert path.read_text() == "old" and _left(tmp_path) == ["out.json"]


def test_write_file_records_what_it_put_in_place_and_write_atomic_does_not(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "written", [])
    files.write_atomic(tmp_path / "cache.json", "{}")
    files.write_file(tmp_path / "result.json", "{}")
    assert files.written == [tmp_path / "result.json"]


def test_the_cache_variable_is_honoured_the_same_way_everywhere(tmp_path, monkeypatch):
    """``$BYOC_WORKBENCH_CACHE`` is the root of every cache: the weights, the search's measurements,
    the compiled C and TensorRT's engines each in a folder of their own under it."""
    from byoc_workbench.measure.search import Cache
    from byoc_workbench.models import weights

    monkeypatch.setenv(files.CACHE_ENV, str(tmp_path))
    assert weights.weights_dir() == files.cache_dir("models") == tmp_path / "models"
    assert Cache().root == files.cache_dir("search") == tmp_path / "search"
    monkeypatch.setenv(files.CACHE_ENV, "~/elsewhere")
    assert weights.weights_dir().parent == Cache().root.parent == files.cache_dir("c").parent
    assert "~" not in str(files.cache_dir("c"))
    monkeypatch.delenv(files.CACHE_ENV)
    assert weights.weights_dir().parent == Cache().root.parent
    assert str(files.cache_dir("engines")).endswith(".cache/byoc-workbench/engines")


def test_the_search_cache_writes_atomically_under_its_root(tmp_path, monkeypatch):
    from byoc_workbench.measure.search import Cache

    monkeypatch.setenv(files.CACHE_ENV, str(tmp_path))
    cache = Cache()
    cache.put("build", "k", {"a": 1})
    cache.put_arrays("k", [np.ones(2), np.zeros((1, 3))])
    assert cache.get("build", "k") == {"a": 1} and [a.shape for a in cache.get_arrays("k")] == [(2,), (1, 3)]
    assert _left(tmp_path / "search") == ["build", "reference"]
    assert _left(tmp_path / "search" / "build") == ["k.json", "k.json.sum"]  # each entry and its seal
    assert _left(tmp_path / "search" / "reference") == ["k.npz", "k.npz.sum"]
    with pytest.raises(TypeError):  # a value JSON cannot write leaves the old record, and no temporary file
        cache.put("build", "k", {"a": object()})
    assert cache.get("build", "k") == {"a": 1} and _left(tmp_path / "search" / "build") == ["k.json", "k.json.sum"]


def test_json_for_users_is_strict():
    """A refused backend's infinite time is null, not ``Infinity``, which no other JSON reader takes."""
    import json

    from byoc_workbench.core import text

    data = {"c_alone": {"median_s": float("inf"), "runs": [1.0, float("nan")]}, "ok": (0.5,)}
    written = text.to_json(data)
    assert "Infinity" not in written and "NaN" not in written
    assert json.loads(written) == {"c_alone": {"median_s": None, "runs": [1.0, None]}, "ok": [0.5]}


def test_a_sealed_entry_is_intact_until_it_changes(tmp_path):
    lib = files.write_atomic(tmp_path / "k.so", b"\x7fELF" + bytes(100))
    assert not files.intact(lib)  # not sealed yet: a reader must not trust it
    files.seal(lib)
    assert files.intact(lib) and _left(tmp_path) == ["k.so", "k.so.sum"]
    lib.write_bytes(b"\x7fELF" + bytes(50))  # truncated
    assert not files.intact(lib)
    lib.write_bytes(b"\x7fELF" + bytes(99) + b"\x01")  # the same size, other bytes
    assert not files.intact(lib)
    assert not files.intact(tmp_path / "missing.so")


def test_arrays_kept_read_back_whole_or_not_at_all(tmp_path):
    """Arrays of any dtype and shape come back in order; a truncated, foreign or missing entry reads as None."""
    arrays = [np.arange(6, dtype="float32").reshape(2, 3), np.array(7, dtype="int64"), np.zeros((0, 4))]
    path = files.write_arrays(tmp_path / "k.npz", arrays)
    back = files.read_arrays(path)
    assert len(back) == 3 and all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(arrays, back))
    good = path.read_bytes()
    path.write_bytes(good[: len(good) // 2])
    assert files.read_arrays(path) is None
    path.write_text('{"hello": "world"}')
    assert files.read_arrays(path) is None
    assert files.read_arrays(tmp_path / "missing.npz") is None


def test_a_result_never_clobbers_a_link_or_a_fifo(tmp_path, monkeypatch):
    import os
    import threading

    monkeypatch.setattr(files, "written", [])
    target = tmp_path / "kept" / "result.json"
    target.parent.mkdir()
    link = tmp_path / "link.json"
    link.symlink_to(target)
    files.write_file(link, "{}\n")
    assert link.is_symlink() and target.read_text() == "{}\n"  # the link stays; its target is written

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    files.write_file(fifo, b"through the pipe")
    reader.join(timeout=10)
    assert got == [b"through the pipe"] and fifo.is_fifo()  # written through, still a FIFO
    assert files.written == [link, fifo]


def test_a_fifo_nobody_reads_is_one_line_not_a_hang(tmp_path):
    import os
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    raised = []

    def write():
        try:
            files.put(fifo, b"nobody reads this")
        except files.OutputError as err:
            raised.append(str(err))

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    writer.join(timeout=streams.FIFO_WAIT_S + 10)
    assert not writer.is_alive(), "put() waits forever on a FIFO with no reader"
    assert raised == [
        f"error: {fifo} is a FIFO that no program read within 5 s. Fix: start its reader first, or pass a file."
    ]


def test_a_result_that_cannot_be_written_is_one_line_and_leaves_nothing(tmp_path):
    dangling = tmp_path / "out.json"
    dangling.symlink_to(tmp_path / "no" / "such" / "dir" / "out.json")
    with pytest.raises(files.OutputError) as err:
        files.write_file(dangling, "x")
    assert err.value.status == 1 and "is a link to" in err.value.line and "\n" not in err.value.line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]  # the link alone, nothing beside it


def test_an_out_directory_never_writes_through_a_link_to_a_file(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("precious notes")
    out = tmp_path / "out"
    out.mkdir()
    with files.staged(out) as tmp:  # an earlier report, its file then swapped for a link
        (tmp / "report.txt").write_text("the report")
    (out / "report.txt").unlink()
    (out / "report.txt").symlink_to(notes)
    with pytest.raises(WorkbenchError) as err:
        output_paths.check_dir(out, "--out", ["report.txt"])
    assert "as a link to" in err.value.line and str(notes) in err.value.line and "\n" not in err.value.line
    assert notes.read_text() == "precious notes"
    (out / "other.txt").symlink_to(tmp_path / "nowhere.txt")  # a link to nothing yet: the file would be outside
    with pytest.raises(WorkbenchError, match="as a link to"):
        output_paths.check_dir(out, "--out", ["other.txt"])
    assert not (tmp_path / "nowhere.txt").exists()


def test_an_out_directory_refuses_a_fifo_a_socket_or_a_device_before_any_work(tmp_path):
    import os
    import socket

    for k, (name, make) in enumerate(
        [
            (output_paths.WRITTEN, os.mkfifo),  # its record: reading a FIFO would wait for ever
            ("profile.svg", os.mkfifo),
            ("profile.json", lambda p: socket.socket(socket.AF_UNIX).bind(str(p))),  # short: sockets take 107
        ]
    ):
        out = tmp_path / str(k)
        out.mkdir()
        make(out / name)
        with pytest.raises(WorkbenchError) as err:
            output_paths.check_dir(out, "--out", ["profile.svg", "profile.json"])
        assert f"holds {name} as a" in err.value.line and "plain file" in err.value.line
    assert output_paths.check_dir(tmp_path / "fresh", "--out", ["profile.svg"]) == tmp_path / "fresh"


def test_a_home_that_does_not_exist_is_one_line(monkeypatch):
    with pytest.raises(WorkbenchError, match="no home directory for ~no-such-user-here"):
        output_paths.check_dir("~no-such-user-here/out", "--out", ["a.svg"])
    monkeypatch.setenv(files.CACHE_ENV, "~no-such-user-here/cache")
    with pytest.raises(WorkbenchError, match=files.CACHE_ENV):
        files.cache_dir("builds")


@pytest.mark.parametrize(
    "value, reads", [(None, True), ("", True), ("0", True), ("no", True), ("1", False), ("TRUE", False), ("yes", False)]
)
def test_no_cache_means_one_thing_to_every_cache(monkeypatch, tmp_path, value, reads):
    from byoc_workbench.measure.compiler import compiled
    from byoc_workbench.measure.search.measure import Cache

    if value is None:
        monkeypatch.delenv(files.NO_CACHE_ENV, raising=False)
    else:
        monkeypatch.setenv(files.NO_CACHE_ENV, value)
    assert compiled.reading() == reads
    assert Cache(tmp_path).enabled == reads


def test_no_cache_set_to_anything_else_is_one_line(monkeypatch):
    monkeypatch.setenv(files.NO_CACHE_ENV, "maybe")
    with pytest.raises(files.WorkbenchError, match="BYOC_WORKBENCH_NO_CACHE='maybe' is neither yes nor no"):
        files.no_cache()


def test_an_unwritable_search_cache_warns_once_and_measures_on(tmp_path, caplog):
    from byoc_workbench.measure.search.measure import Cache

    root = tmp_path / "a file, not a directory"
    root.write_text("")
    cache = Cache(root)
    cache.put("unit", "k1", {"s": 1.0})
    cache.put("unit", "k2", {"s": 2.0})
    cache.put_arrays("k3", [np.zeros(2)])
    warned = [r for r in caplog.records if "search cache: nothing is kept" in r.getMessage()]
    assert len(warned) == 1 and cache.get("unit", "k1") is None


def test_stale_temporaries_in_the_cache_are_swept_and_only_there(tmp_path, monkeypatch):
    """A process killed mid-write (SIGKILL) leaves ``.<key>.so.XXXXXXXX.part.so`` behind; the next write in that cache
    folder removes what is older than files.STALE_S, and nothing fresh, nothing else, nothing outside the cache."""
    import os
    import time

    monkeypatch.setenv(files.CACHE_ENV, str(tmp_path / "cache"))
    builds, mine = tmp_path / "cache" / "builds", tmp_path / "mine"
    builds.mkdir(parents=True)
    mine.mkdir()
    old = time.time() - files.STALE_S - 60
    stale, fresh = builds / ".abc.so.k3j_9x2q.part.so", builds / ".abc.so.aaaa1111.part.so"
    other = builds / ".notes.txt"
    users = mine / ".out.json.k3j_9x2q.part"
    for f in (stale, fresh, other, users):
        f.write_bytes(b"x")
    for f in (stale, other, users):
        os.utime(f, (old, old))
    files.write_atomic(builds / "entry.npz", b"y")
    files.write_atomic(mine / "out.json", b"{}")
    assert not stale.exists() and fresh.exists() and other.exists() and users.exists()


def test_a_device_or_a_link_to_a_pipe_takes_a_result_as_the_docs_say(tmp_path):
    """``--save-outputs /dev/null`` is written into, not refused (docs/cli.md), and a link to a pipe
    (``/dev/stdout`` under ``| cat``) is written through, not resolved to a ``pipe:[...]`` name that is no path."""
    import os

    assert output_paths.check_file("/dev/null", "--save-outputs") == Path("/dev/null")
    files.put("/dev/null", b"gone")
    assert Path("/dev/null").is_char_device()
    read, write = os.pipe()
    link = tmp_path / "stdout"
    link.symlink_to(f"/proc/self/fd/{write}")
    files.put(link, b"through the link")
    os.close(write)
    assert os.read(read, 100) == b"through the link"
    with pytest.raises(files.WorkbenchError, match="is a device, not a directory"):
        output_paths.check_dir("/dev/null")


def test_a_damaged_entry_is_said_once_per_cache(tmp_path, caplog, monkeypatch):
    """docs/cli.md: a damaged entry is made again, said once, never trusted (the builds and C libraries too)."""
    monkeypatch.setattr(files, "_said_damaged", set())
    a, b = files.write_sealed(tmp_path / "a.so", b"one"), files.write_sealed(tmp_path / "b.so", b"two")
    assert files.trusted(a, "build cache") and not caplog.records
    a.write_bytes(b"ONE")
    b.write_bytes(b"TWO")
    with caplog.at_level("WARNING"):
        assert not files.trusted(a, "build cache") and not files.trusted(b, "build cache")
        assert not files.trusted(tmp_path / "missing.so", "C library cache")  # missing: nothing to say
    assert [r.getMessage() for r in caplog.records] == [
        "build cache: a.so is damaged (it disagrees with its seal); it is made again"
    ]


def test_a_result_replaces_an_earlier_result_never_a_users_file(tmp_path):
    """check_file(ours=...): a bench JSON or a saved-outputs .npz the workbench wrote is replaced; a notebook, a
    user's own JSON object or .npz, a model are refused before any work; an empty file is replaced."""
    from byoc_workbench.cli.earlier import BENCH as bench
    from byoc_workbench.cli.earlier import SAVED_OUTPUTS as saved

    result = {"model": "demo", "backends": {}, "skipped": {}, "notes": []}
    made = {
        "bench.json": json.dumps(result),
        "benches.json": json.dumps([result, {"model": "x", "error": "error: it failed. Fix: this."}]),
        "mine.json": '{"model": "m", "error": 0.3, "backends": ["a"]}',  # round 8: was taken for a bench result
        "empty.json": "",
        "nb.ipynb": '{"cells": [], "metadata": {}, "nbformat": 4}',
        "conf.json": '{"model": "x", "lr": 0.1}',
        "list.json": "[1, 2]",
    }
    for name, content in made.items():
        files.write_file(tmp_path / name, content)  # each recorded as the workbench's: its kind alone decides
    files.write_file(tmp_path / "outputs.npz", lambda f: np.savez(f, output0=np.zeros(2), output1=np.ones(1)))
    np.savez(tmp_path / "mine.npz", weights=np.zeros(2))
    for name in ("bench.json", "benches.json", "empty.json"):
        assert output_paths.check_file(tmp_path / name, "--out", ours=bench) == tmp_path / name
    assert output_paths.check_file(tmp_path / "outputs.npz", "--save-outputs", ours=saved) == tmp_path / "outputs.npz"
    refused = [
        ("nb.ipynb", bench),
        ("conf.json", bench),
        ("list.json", bench),
        ("mine.json", bench),
        ("mine.npz", saved),
    ]
    for name, ours in refused + [("bench.json", saved)]:
        with pytest.raises(files.WorkbenchError, match="holds something else"):
            output_paths.check_file(tmp_path / name, "--out", ours=ours)


def test_an_unwritable_current_directory_is_named(monkeypatch):
    """``cd /proc && ... --save-outputs o.npz`` said "Cannot write to ." """
    monkeypatch.chdir("/proc")
    with pytest.raises(files.WorkbenchError, match=r"Cannot write to /proc \(the current directory\)"):
        output_paths.check_file("o.npz", "--save-outputs")


def test_an_input_that_is_a_fifo_is_said_to_be_one_not_missing(tmp_path):
    import os

    from byoc_workbench.core import user_file
    from byoc_workbench.models import images

    os.mkfifo(tmp_path / "model.py")
    os.mkfifo(tmp_path / "picture.jpg")
    assert output_paths.not_a_file(tmp_path / "model.py") == "is a FIFO, not a regular file"
    assert output_paths.not_a_file(tmp_path / "nothing.py") == "does not exist"
    assert output_paths.not_a_file(tmp_path) == "is a directory"
    with pytest.raises(WorkbenchError, match="model.py is a FIFO, not a regular file"):  # round 8: "does not exist"
        user_file.import_user_file(tmp_path / "model.py", "Model file", "pass a .py file")
    with pytest.raises(WorkbenchError, match="picture.jpg is a FIFO, not a regular file"):
        images.read_image(tmp_path / "picture.jpg")


def test_a_name_whose_temporary_overflows_the_file_system_is_refused_before_the_work(tmp_path):
    """Round 10 (B9): a name of 241 to 255 bytes passed the up-front check; its temporary, 15 bytes longer, then
    failed after the run ("File name too long"), and an --out directory's blamed its writable parent."""
    import os

    most = os.pathconf(tmp_path, "PC_NAME_MAX")
    fits, over = "s" * (most - 19) + ".npz", "s" * (most - 18) + ".npz"  # the longest that fits, one byte more
    with pytest.raises(WorkbenchError) as err:
        output_paths.check_file(tmp_path / over, "--save-outputs")
    line = str(err.value)
    assert f"--save-outputs: the name {over} is {most - 14} bytes, 15 more as .<name>.XXXXXXXX.part" in line
    assert f"over the {most} bytes a name may take in {tmp_path}" in line and f"at most {most - 15} bytes" in line
    files.put(output_paths.check_file(tmp_path / fits, "--save-outputs"), b"result")
    assert (tmp_path / fits).read_bytes() == b"result" and _left(tmp_path) == [fits]
    for out, names, name in [(tmp_path / over, (), over), (tmp_path / "out", ("a.svg", over), over)]:
        with pytest.raises(WorkbenchError, match=f"--out: the name {name} is"):
            output_paths.check_dir(out, "--out", names)
    with pytest.raises(WorkbenchError, match=f"the name {'d' * (most + 1)} is {most + 1} bytes, over the"):
        output_paths.check_dir(tmp_path / ("d" * (most + 1)) / "out", "--out", ["a.svg"])
    with pytest.raises(files.OutputError, match=f"Cannot write {tmp_path / over} \\(File name too long\\)"):
        with files.staged(tmp_path / over):
            pass
    assert _left(tmp_path) == [fits]
