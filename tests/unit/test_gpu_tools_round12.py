"""The GPU tools refuse up front what they would destroy or find only after the work: gpu_check's --out named as the
record or through a link that leads nowhere; gpu_pack --unpack into a folder with files in it, a file or a FIFO (and
a signal or a failure leaves the folder as it was, the joined pieces' temporary gone); gpu_run.sh's $DEST/site as a
link, wrong arguments for the check, an --out of its own and an append-only OUT."""

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_gpu_run_checks import _pack, stopping_python  # a sibling: pytest puts this folder on sys.path

from byoc_workbench.core import output_paths

#: A fresh process (or several) per case, signals and tools: make test runs them, make test-fast does not.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PACK = [sys.executable, str(ROOT / "tools" / "gpu_pack.py")]


def _tree(folder: Path) -> dict:
    """Each path under ``folder``: a link's target, a FIFO's "FIFO", a file's bytes, True for a folder."""

    def what(p: Path):
        return os.readlink(p) if p.is_symlink() else "FIFO" if p.is_fifo() else p.is_dir() or p.read_bytes()

    return {p.relative_to(folder).as_posix(): what(p) for p in folder.rglob("*")}


def _unpack(pack: Path, into: Path, *more: str):
    return subprocess.run([*PACK, "--out", str(pack), "--unpack", str(into), *more], capture_output=True, text=True)


def test_gpu_check_args_keeps_the_workbench_record_name():
    """gpu_check_args cannot import the workbench (a bare GPU machine may lack TVM): its copy of the name agrees."""
    spec = importlib.util.spec_from_file_location("gpu_check_args", ROOT / "benchmarks" / "gpu_check_args.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.WRITTEN == output_paths.WRITTEN


def test_gpu_check_refuses_the_record_name_and_a_link_that_leads_nowhere(tmp_path):
    """--out DIR/.byoc-workbench-wrote exited 0 with the record written over the JSON; a link to another folder's
    record, which did not exist yet, was written through."""
    (tmp_path / "s10").mkdir()
    (tmp_path / "gq5").mkdir()
    (tmp_path / "gq6").mkdir()
    (tmp_path / "gq6" / "e.json").symlink_to(f"../gq5/{output_paths.WRITTEN}")
    (tmp_path / "gq6" / "d.json").symlink_to("/nonexistent/x.json")
    record = f"is {output_paths.WRITTEN} (or a link to one), the record kept beside each result"
    cases = [
        (f"s10/{output_paths.WRITTEN}", f"{record}: it would be written over the JSON", "pass --out a path"),
        ("gq6/e.json", record, "pass --out a path with another name"),
        ("gq6/d.json", "is a link that leads nowhere (a loop, or a missing target)", "remove the link, or pass"),
    ]
    before = _tree(tmp_path)
    for out, why, fix in cases:
        cmd = [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--target", "llvm", "--models", "demo"]
        done = subprocess.run([*cmd, "--out", out], cwd=tmp_path, capture_output=True, text=True, timeout=120)
        [line] = done.stderr.splitlines()
        assert done.returncode == 1 and done.stdout == "" and line.startswith(f"error: --out {out} {why}"), line
        assert f". Fix: {fix}" in line
    assert _tree(tmp_path) == before


def test_unpack_refuses_a_folder_with_files_a_file_and_a_fifo(tmp_path):
    """--unpack into the pack's own folder deleted its tvm-libs.tar.xz; into a folder with a site/ of the user's, it
    wrote over their files; a file or a FIFO was a traceback."""
    pack = _pack(tmp_path / "pk")
    mine = tmp_path / "u1" / "site" / "tvm"
    mine.mkdir(parents=True)
    (mine / "__init__.py").write_text("my edits")
    (tmp_path / "u2file").write_text("a file")
    os.mkfifo(tmp_path / "u3fifo")
    before = _tree(tmp_path)
    for into, why in [
        (pack, "holds files already, which the unpack would write over"),
        (tmp_path / "u1", "holds files already, which the unpack would write over"),
        (tmp_path / "u1" / "missing" / "..", "holds files already, which the unpack would write over"),
        (tmp_path / "u2file", "is a file, not a folder"),
        (tmp_path / "u3fifo", "is a FIFO, not a folder"),
    ]:
        done = _unpack(pack, into)
        assert done.returncode == 1 and done.stdout == "", done.stderr  # refused before the pack is measured
        assert done.stderr.splitlines() == [
            f"error: --unpack {os.path.abspath(into)} {why}. Fix: pass a new or empty folder."
        ]
    assert _tree(tmp_path) == before


def test_unpack_joins_the_pieces_under_a_name_of_its_own_into_a_folder_it_makes(tmp_path):
    """The pieces were joined over FOLDER/tvm-libs.tar.xz, then it was deleted, pieces or not; into a folder still to
    make, the join said the pack was broken."""
    pack = _pack(tmp_path / "pk4")
    whole = (pack / "tvm-libs.tar.xz").read_bytes()
    (pack / "tvm-libs.tar.xz.1of2").write_bytes(whole[:100])
    (pack / "tvm-libs.tar.xz.2of2").write_bytes(whole[100:])
    before = _tree(pack)
    into = tmp_path / "new" / "deep"
    done = _unpack(pack, into)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert _tree(into) == {
        "site": True,
        "site/tvm-libs.tar.xz": True,
        "site/tvm-libs.tar.xz/0.txt": b"data",
        "site/site.tar.xz": True,
        "site/site.tar.xz/0.txt": b"data",
    }
    assert _tree(pack) == before
    (pack / "tvm-libs.tar.xz.2of2").write_bytes(whole[100:101])  # cut: said, and the folder goes as it came
    done = _unpack(pack, tmp_path / "cut")
    [line] = done.stderr.splitlines()
    assert done.returncode == 1 and line.startswith(f"error: cannot unpack {pack}/tvm-libs.tar.xz, its pieces joined,")
    assert not (tmp_path / "cut").exists()
    (pack / "tvm-libs.tar.xz.2of2").write_bytes(whole[100:])
    (pack / "site.tar.xz").write_bytes(b"damaged")  # the libraries unpacked, then removed with the folder
    (tmp_path / "empty").mkdir()
    done = _unpack(pack, tmp_path / "empty")
    assert done.returncode == 1 and done.stderr.startswith(f"error: cannot unpack {pack}/site.tar.xz (")
    assert os.listdir(tmp_path / "empty") == []


@pytest.mark.parametrize(("signum", "word"), [(signal.SIGINT, "interrupted"), (signal.SIGTERM, "terminated")])
def test_a_signal_leaves_the_folder_as_it_was(tmp_path, signum, word):
    """A signal left the folder half unpacked (during the join: test_gpu_tools_round15.py)."""
    pack = _pack(tmp_path / "pack", files=20000)
    into = tmp_path / "empty"
    into.mkdir()
    run = subprocess.Popen(
        [*PACK, "--out", str(pack), "--unpack", str(into), "--limit-mib", "1000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    while not (into / "site").exists():
        assert run.poll() is None, run.communicate()
        time.sleep(0.002)
    run.send_signal(signum)
    _, stderr = run.communicate(timeout=60)
    assert run.returncode == 128 + signum and stderr.splitlines() == [f"{word}; run it again to finish."]
    assert into.is_dir() and os.listdir(into) == []


def test_pack_check_of_no_folder_says_so(tmp_path):
    """--out /dev/null --check said /dev/null/tvm-libs.tar.xz is missing."""
    done = subprocess.run([*PACK, "--out", "/dev/null", "--check"], capture_output=True, text=True)
    assert done.returncode == 1 and done.stderr.splitlines() == [
        "error: --out /dev/null is a device, not a folder. Fix: pass the folder tools/gpu_pack.py wrote."
    ]


def _gpu_run(tmp_path: Path, *args: str, **env: str):
    env = {"PACK": str(tmp_path / "pack"), "DEST": str(tmp_path / "dest"), "PY": stopping_python(tmp_path), **env}
    env = {**{k: v for k, v in os.environ.items() if k != "OUT"}, **env}
    cmd = ["bash", str(ROOT / "tools" / "gpu_run.sh"), *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)


def test_gpu_run_refuses_a_site_link_and_the_checks_arguments_before_the_unpack(tmp_path):
    """A $DEST/site link that led nowhere was mv's error after the unpack; --runs 0 was refused after it; a user's
    --out took the JSON elsewhere than the script said."""
    _pack(tmp_path / "pack")
    (tmp_path / "dest").mkdir()
    (tmp_path / "dest" / "site").symlink_to("/nonexistent/site")
    done = _gpu_run(tmp_path)
    said = f"error: {tmp_path}/dest/site is a link to /nonexistent/site, which the unpack would replace with a folder."
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [f"{said} Fix: move the link away, or pass another DEST."]
    (tmp_path / "dest" / "site").unlink()
    for args, line in [
        (
            ["--runs", "0"],
            "error: argument --runs: '0' is not a whole number, 1 or more. Fix: see `bash tools/gpu_run.sh --help`.",
        ),
        (
            ["--target", "llvm", "--out", "mine.json"],
            "error: --out is not for tools/gpu_run.sh, which writes the JSON to $OUT/gpu_check.json. "
            "Fix: pass OUT=<a folder> to gpu_run.sh instead of --out.",
        ),
    ]:
        done = _gpu_run(tmp_path, *args)
        assert done.returncode == 1 and done.stdout == "" and done.stderr.splitlines() == [line]  # nothing unpacked
        assert os.listdir(tmp_path / "dest") == []


def test_gpu_run_refuses_an_append_only_out_and_leaves_no_probe(tmp_path):
    """Its probe was left in an append-only OUT, with rm's raw 'cannot remove' line."""
    _pack(tmp_path / "pack")
    out = tmp_path / "apg"
    out.mkdir()
    made = subprocess.run(["chattr", "+a", str(out)], capture_output=True, text=True)
    if made.returncode:
        pytest.skip(f"chattr +a fails here: {made.stderr.strip()}")
    try:
        done = _gpu_run(tmp_path, OUT=str(out))
        left = os.listdir(out)
    finally:
        subprocess.run(["chattr", "-a", str(out)], check=True)
    assert done.returncode == 1 and done.stdout == "" and left == []
    assert done.stderr.splitlines() == [
        f"error: {out} is append-only, so what is written in it cannot be replaced or removed. "
        f"Fix: run chattr -i -a {out}, or pass other DEST and OUT folders."
    ]
