"""Outputs a careless user gave in round 11 of issue 47: the record's own name, a link that leads nowhere, a link
to a long name, a file too large to write, a signal as a result is put in place, a blank cache variable."""

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from byoc_workbench.core import files, output_paths
from byoc_workbench.core.errors import WorkbenchError


def test_an_output_named_like_the_record_is_refused_up_front(tmp_path):
    record = tmp_path / output_paths.WRITTEN
    for check in (
        lambda: output_paths.check_file(record, "--save-outputs"),
        lambda: output_paths.check_file(record, "--out", example="bench.json"),
        lambda: output_paths.check_dir(record, "--out"),
    ):
        with pytest.raises(WorkbenchError, match=f"is named {output_paths.WRITTEN}, the record"):
            check()
    record.write_text("")  # an empty record, reached through a link: the result would go into it, then the record
    (tmp_path / "x.npz").symlink_to(output_paths.WRITTEN)
    with pytest.raises(WorkbenchError, match="the record the workbench keeps") as err:
        output_paths.check_file(tmp_path / "x.npz", "--save-outputs")
    assert err.value.fix == "pass --save-outputs a path with another name"


@pytest.mark.parametrize(
    "link, said", [("dangl", "/nonexistent/deep, which does not exist"), ("loopa", "loopb, in a loop")]
)
@pytest.mark.parametrize("under, check", [("", "dir"), ("x", "dir"), ("x/y.npz", "dir"), ("x/y.npz", "file")])
def test_an_output_at_or_under_a_link_that_leads_nowhere_is_refused_up_front(tmp_path, link, said, under, check):
    (tmp_path / "dangl").symlink_to("/nonexistent/deep")
    (tmp_path / "loopa").symlink_to("loopb")
    (tmp_path / "loopb").symlink_to("loopa")
    out = tmp_path / link / under
    with pytest.raises(WorkbenchError) as err:
        if check == "dir":
            output_paths.check_dir(out, "--out", ["search.json"])
        else:
            output_paths.check_file(out, "--save-outputs")
    assert f"{link} is a link to {said}" in err.value.cause, err.value.line
    assert sorted(os.listdir(tmp_path)) == ["dangl", "loopa", "loopb"]  # nothing made


def test_a_link_to_a_name_too_long_for_its_temporary_is_refused_up_front(tmp_path):
    long = "t" * (os.pathconf(tmp_path, "PC_NAME_MAX") - 6) + ".npz"
    (tmp_path / long).write_bytes(b"")
    (tmp_path / "short.npz").symlink_to(long)
    with pytest.raises(WorkbenchError, match=f"the name {long} is {len(long)} bytes, 15 more as"):
        output_paths.check_file(tmp_path / "short.npz", "--save-outputs")


WRITE_TOO_MUCH = """
import sys
from byoc_workbench.core import files
from byoc_workbench.core.errors import WorkbenchError
try:
    with files.staged(sys.argv[1]) as tmp:
        (tmp / "search.txt").write_text("x" * (1 << 16))
except WorkbenchError as err:
    print(err.line)
"""


def test_a_file_of_an_out_folder_over_ulimit_f_is_one_line_naming_the_folder(tmp_path):
    out = tmp_path / "srf"

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))

    done = subprocess.run(
        [sys.executable, "-c", WRITE_TOO_MUCH, str(out)], preexec_fn=limit, capture_output=True, text=True
    )
    assert done.stdout.startswith(f"error: Cannot write {out} (File too large). Fix: raise the limit"), done
    assert "ulimit -f" in done.stdout and not done.stderr
    assert sorted(os.listdir(tmp_path)) == []  # nothing half-written, no temporary left


#: A SIGTERM sent right after the result's rename returns, the moment the race of round 11's B5 needs (the profile
#: hook only sends it; the workbench's own handler takes it).
TERM_AS_PLACED = """
import os, signal, sys
from pathlib import Path
from byoc_workbench.core import files, signals

def term_after(frame, event, arg):
    if event == "c_return" and arg is os.replace and frame.f_code.co_name in ("write_with", "_moved_into"):
        sys.setprofile(None)
        os.kill(os.getpid(), signal.SIGTERM)

out = Path(sys.argv[1])
with signals.Stop.watch():
    try:
        sys.setprofile(term_after)
        if out.suffix:
            files.write_file(out, "new")
        else:
            with files.staged(out) as tmp:
                (tmp / "a.txt").write_text("new")
                (tmp / "b.txt").write_text("new")
    except KeyboardInterrupt:
        print(signals.stopped_line(signals.Stop.seen))
"""


@pytest.mark.parametrize("out", ["b.json", "set"])
def test_a_signal_as_a_result_is_put_in_place_waits_until_it_is_listed(tmp_path, out):
    out = tmp_path / out
    done = subprocess.run([sys.executable, "-c", TERM_AS_PLACED, str(out)], capture_output=True, text=True)
    results = [out] if out.suffix else [out / "a.txt", out / "b.txt"]
    assert done.stdout == f"terminated; wrote {', '.join(map(str, results))} before that.\n", done
    assert all(p.read_text() == "new" and output_paths.wrote(p) for p in results)
    assert sorted(p.name for p in results[0].parent.iterdir()) == sorted(
        [output_paths.WRITTEN, *(p.name for p in results)]
    )
    assert set(json.loads((results[0].parent / output_paths.WRITTEN).read_text())) == {p.name for p in results}


def test_a_blank_cache_variable_is_read_as_unset(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(files.CACHE_ENV, " ")
    assert files.cache_dir("search") == Path(files.DEFAULT_CACHE).expanduser() / "search"
