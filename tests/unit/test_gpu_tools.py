"""tools/gpu_pack.py and tools/gpu_run.sh never lose or destroy: a damaged archive stops gpu_run.sh in one line
with $DEST and the last JSON as they were; a whole one replaces $DEST/site alone and keeps the last JSON; what one
call carries is checked again before a run; a pack folder a call cannot carry is refused before minutes of xz."""

import importlib.util
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from test_gpu_run_checks import stopping_python  # a sibling: pytest puts this folder on sys.path

from byoc_workbench.core import output_paths
from byoc_workbench.core.files import put

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = b"the compiler library, as unpacked\n" * 1000


def _pack(folder: Path, damaged: str = "", top: str = "site") -> Path:
    """Archives in the form tools/gpu_pack.py writes, small; ``damaged`` (a file name) cut in half; ``top`` the
    folder their files are in."""
    folder.mkdir()
    parts = {
        "tvm-libs.tar.xz": {f"{top}/tvm/lib/libtvm_compiler.so": LIBRARY},
        "site.tar.xz": {f"{top}/new.txt": b"new"},
    }
    for part, files in parts.items():
        with tarfile.open(folder / part, "w:xz") as tar:
            for name, data in files.items():
                member = tarfile.TarInfo(name)
                member.size = len(data)
                tar.addfile(member, io.BytesIO(data))
    if damaged:
        whole = (folder / damaged).read_bytes()
        (folder / damaged).write_bytes(whole[: len(whole) // 2])
    return folder


MARK = ".unpacked-by-gpu_run"  # what an unpack leaves in $DEST/site, and the next one looks for


def _dest(folder: Path) -> Path:
    """A $DEST a run left: an unpack, a cache, and its JSON."""
    (folder / "site").mkdir(parents=True)
    (folder / "site" / "old.txt").write_text("the last unpack")
    (folder / "site" / MARK).write_text("unpacked by tools/gpu_run.sh")
    (folder / "cache").mkdir()
    (folder / "cache" / "entry").write_text("a cached build")
    (folder / "out").mkdir()
    (folder / "out" / "gpu_check.json").write_text('{"the last run": true}')
    return folder


def _files(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _gpu_run(pack: Path, dest: Path, *args, cwd=None, **env):
    env = {"PACK": str(pack), "DEST": str(dest), "PY": sys.executable, **env}
    env = {**{k: v for k, v in os.environ.items() if k != "OUT"}, **env}
    cmd = ["bash", str(ROOT / "tools" / "gpu_run.sh"), *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=cwd)


@pytest.mark.parametrize("damaged", ["tvm-libs.tar.xz", "site.tar.xz"])
def test_a_damaged_archive_stops_the_run_in_one_line_and_touches_nothing(tmp_path, damaged):
    dest = _dest(tmp_path / "dest")
    before = _files(dest)
    done = _gpu_run(_pack(tmp_path / "pack", damaged), dest)
    assert done.returncode != 0
    [line] = done.stderr.splitlines()
    assert line.startswith(f"error: cannot unpack {tmp_path / 'pack' / damaged} (")
    assert line.endswith(". Fix: run tools/gpu_pack.py again and carry what it prints.")
    assert _files(dest) == before and sorted(p.name for p in dest.iterdir()) == ["cache", "out", "site"]


def test_archives_with_no_site_stop_the_run_in_one_line_and_keep_the_last_unpack(tmp_path):
    """Whole archives of other files: the last unpack was moved aside, then removed with the fresh folder."""
    dest = _dest(tmp_path / "dest")
    before = _files(dest)
    done = _gpu_run(_pack(tmp_path / "pack", top="other"), dest)
    [line] = done.stderr.splitlines()
    assert done.returncode == 1 and line.startswith(f"error: the archives in {tmp_path / 'pack'} hold no site/ folder.")
    assert line.endswith(". Fix: run tools/gpu_pack.py again and carry what it prints.")
    assert _files(dest) == before and sorted(p.name for p in dest.iterdir()) == ["cache", "out", "site"]


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"OUT": "{dest}/site/out"}, "error: OUT={dest}/site/out is inside {dest}/site, which the unpack replaces."),
        ({"OUT": "{dest}/site"}, "error: OUT={dest}/site is inside {dest}/site, which the unpack replaces."),
        ({"PY": "{dest}/no-python"}, "error: PY={dest}/no-python is not a program here."),
    ],
)
def test_an_out_the_unpack_replaces_or_a_missing_python_is_refused_before_anything(tmp_path, env, said):
    """An OUT in $DEST/site went with the last unpack, its JSON with it; a missing PY was bash's own error."""
    dest = _dest(tmp_path / "dest")
    before = _files(dest)
    env = {k: v.format(dest=dest) for k, v in env.items()}
    done = _gpu_run(_pack(tmp_path / "pack"), dest, **env)
    [line] = done.stderr.splitlines()
    assert done.returncode == 1 and line.startswith(said.format(dest=dest)) and ". Fix: " in line
    assert done.stdout == "" and _files(dest) == before


@pytest.mark.slow  # over 10 s: `make test` and `make test-slow` run it, not test-fast
def test_a_whole_pack_replaces_the_site_alone_and_keeps_the_last_json(tmp_path):
    dest = _dest(tmp_path / "dest")
    os.mkfifo(dest / "out" / "gpu_check.json.tmp")  # the check's JSON went through that name, and hung on a FIFO
    # No CUDA device here: the check runs, measures nothing and says so, after the unpack.
    done = _gpu_run(_pack(tmp_path / "pack"), dest, "--models", "demo")
    assert done.returncode == 1 and done.stderr.splitlines()[-1].startswith("error: measured nothing, tvm: ")
    after = _files(dest)
    assert after.pop("site/tvm/lib/libtvm_compiler.so") == LIBRARY
    assert after.pop("site/new.txt") == b"new"
    assert after.pop(f"site/{MARK}").startswith(b"unpacked by tools/gpu_run.sh from ")
    assert after.pop("cache/entry") == b"a cached build"
    assert b"TVM sees no CUDA device" in after.pop("out/gpu_check.json")
    assert output_paths.wrote(dest / "out" / "gpu_check.json") and after.pop(f"out/{output_paths.WRITTEN}")
    [(kept, last)] = after.items()  # the last run's JSON, under its time; the old unpack is gone
    assert kept.startswith("out/gpu_check.") and kept.endswith(".json") and last == b'{"the last run": true}'
    assert sorted(p.name for p in (dest / "out").iterdir()) == sorted(
        [kept[4:], "gpu_check.json", "gpu_check.json.tmp", output_paths.WRITTEN]
    )


def test_a_site_no_unpack_made_and_a_pack_inside_the_site_are_refused_and_kept(tmp_path):
    """A $DEST/site of the user's own was replaced, and removed; archives kept in $DEST/site went with it."""
    mine = tmp_path / "mine"
    (mine / "site").mkdir(parents=True)
    (mine / "site" / "thesis.txt").write_text("my thesis")
    done = _gpu_run(_pack(tmp_path / "pack"), mine)
    [line] = done.stderr.splitlines()
    assert done.returncode == 1 and done.stdout == ""
    assert line == (
        f"error: {mine}/site holds no {MARK}, so no earlier unpack made it, and this one would replace it. "
        f"Fix: move {mine}/site away, or pass another DEST."
    )
    assert _files(mine) == {"site/thesis.txt": b"my thesis"}
    dest = _dest(tmp_path / "dest")
    pack = _pack(dest / "site" / "pack")  # an earlier unpack's site/, the archives copied into it
    before = _files(dest)
    done = _gpu_run(pack, dest)
    [line] = done.stderr.splitlines()
    assert done.returncode == 1 and line.startswith(f"error: PACK={pack} is inside {dest}/site, which the unpack")
    assert ". Fix: move the archives out of " in line and _files(dest) == before


@pytest.mark.parametrize(
    ("where", "said"),
    [
        ({"DEST": "/sys/byoc-gpu"}, "error: cannot write in DEST=/sys/byoc-gpu ("),
        ({"DEST": "{tmp}/afile/dest"}, "error: cannot write in DEST={tmp}/afile/dest (Not a directory)."),
        ({"OUT": "/sys/out"}, "error: cannot write in OUT=/sys/out ("),
    ],
)
def test_a_dest_or_out_that_cannot_be_written_is_one_line_before_anything(tmp_path, where, said):
    """A DEST that mktemp could not write in was its own error line, with no Fix."""
    (tmp_path / "afile").write_text("a file")
    where = {k: v.format(tmp=tmp_path) for k, v in where.items()}
    done = _gpu_run(_pack(tmp_path / "pack"), tmp_path / "dest", **where)
    [line] = done.stderr.splitlines()
    assert done.returncode == 1 and done.stdout == "" and line.startswith(said.format(tmp=tmp_path))
    [(name, _)] = where.items()
    assert "). Fix: pass a" in line and f" {name} you can write in (or leave it out: " in line
    assert (tmp_path / "afile").read_text() == "a file" and not any((tmp_path / "dest").glob("unpack.*"))


def test_relative_paths_are_the_callers_and_a_run_replaces_the_site_the_last_one_made(tmp_path):
    """PACK=pack DEST=dest OUT=out were taken in the checkout, where the script went first."""
    _pack(tmp_path / "pack")
    for _ in range(2):  # the second replaces the site/ the first unpacked
        done = _gpu_run("pack", "dest", cwd=tmp_path, OUT="out", PY=stopping_python(tmp_path))  # unpacked
        assert done.returncode == 3 and done.stderr.splitlines()[-1] == "error: the check starts"
        assert done.stdout.startswith("call 1 of 1 carries ")  # gpu_pack.py --check found the archives
        assert _files(tmp_path / "dest") == {
            "site/new.txt": b"new",
            "site/tvm/lib/libtvm_compiler.so": LIBRARY,
            f"site/{MARK}": f"unpacked by tools/gpu_run.sh from {tmp_path / 'pack'}\n".encode(),
        }
    assert (tmp_path / "out").is_dir() and not (ROOT / "dest").exists() and not (ROOT / "out").exists()


def test_what_one_call_carries_is_checked_again_before_a_run(tmp_path):
    pack = _pack(tmp_path / "pack")
    check = [sys.executable, str(ROOT / "tools" / "gpu_pack.py"), "--check", "--out", str(pack)]
    fits = subprocess.run(check, capture_output=True, text=True)
    assert fits.returncode == 0 and fits.stdout.startswith("call 1 of 1 carries ") and "to spare" in fits.stdout
    over = subprocess.run([*check, "--limit-mib", "1"], capture_output=True, text=True)
    [line] = over.stderr.splitlines()
    assert over.returncode == 1 and line.startswith("error: call 1 would carry ") and "working tree" in line
    with open(pack / "tvm-libs.tar.xz", "r+b") as grown:  # sparse: as large as a call, with the tree too large
        grown.truncate(64 << 20)
    dest = _dest(tmp_path / "dest")
    before = _files(dest)
    done = _gpu_run(pack, dest)
    [line] = done.stderr.splitlines()
    assert done.returncode == 1 and line.startswith("error: call 1 would carry ") and _files(dest) == before
    (pack / "site.tar.xz").unlink()
    os.mkfifo(pack / "site.tar.xz")  # it was called missing
    done = subprocess.run(check, capture_output=True, text=True)
    [line] = done.stderr.splitlines()
    assert done.returncode == 1 and line.startswith(f"error: {pack / 'site.tar.xz'} is a FIFO, not an archive. Fix: ")


@pytest.mark.slow  # over 10 s: `make test` and `make test-slow` run it, not test-fast
def test_a_pack_too_big_for_one_call_goes_in_pieces_that_the_run_joins(tmp_path, monkeypatch):
    """The libraries' archive is cut so that each call carries, beside the tree, what the limit allows; the
    pieces gather on the machine (kept warm between calls) and gpu_run.sh joins them before it unpacks."""
    monkeypatch.syspath_prepend(str(ROOT / "tools"))
    import gpu_pack

    pack = _pack(tmp_path / "pack")
    libs = (pack / "tvm-libs.tar.xz").read_bytes()
    limit = (gpu_pack.tree_bytes() + len(libs) // 2) / gpu_pack.MIB + gpu_pack.SPARE_MIB  # room for half of it
    calls = gpu_pack.cut(pack, limit)
    assert len(calls) >= 2 and calls[-1][-1].name == "site.tar.xz"
    assert b"".join(p.read_bytes() for p in gpu_pack.pieces(pack)) == libs
    (pack / f"{gpu_pack.PARTS[0]}.{len(calls)}of{len(calls)}.bak").write_bytes(b"a stray copy, no piece")
    assert gpu_pack.fits(pack, limit) == 0
    (pack / "tvm-libs.tar.xz").unlink()  # not carried: only the pieces travel
    dest = _dest(tmp_path / "dest")
    done = _gpu_run(pack, dest, "--models", "demo")
    assert done.stderr.splitlines()[-1].startswith("error: measured nothing, tvm: ")  # unpacked, then ran
    assert (dest / "site" / "tvm" / "lib" / "libtvm_compiler.so").read_bytes() == LIBRARY
    gpu_pack.pieces(pack)[0].unlink()  # a call's piece that did not arrive
    done = _gpu_run(pack, dest)
    [line] = done.stderr.splitlines()
    assert done.returncode == 1 and "of tvm-libs.tar.xz, not those of one cut" in line


def test_a_pack_folder_a_call_cannot_carry_is_refused_before_packing(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    refused = [(tmp_path / "pack", "is outside the checkout"), (ROOT / "tests" / "pack", "is not ignored")]
    (tmp_path / "afile").write_text("a file")
    refused += [(tmp_path / "fifo", "is not a folder"), (tmp_path / "afile" / "pack", "is not a folder")]
    for out, why in refused:
        done = subprocess.run(
            [sys.executable, str(ROOT / "tools" / "gpu_pack.py"), "--out", str(out)], capture_output=True, text=True
        )
        [line] = done.stderr.splitlines()
        assert done.returncode == 1 and line.startswith(f"error: --out {out} {why}")
        assert out.is_fifo() if out.name == "fifo" else not out.exists()
    for limit in ("nan", "0", "-1"):
        done = subprocess.run(
            [sys.executable, str(ROOT / "tools" / "gpu_pack.py"), "--check", "--limit-mib", limit],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 1 and done.stderr.startswith(f"error: --limit-mib {float(limit)} is not a size.")
    for bad in (["--limit-mib", "0x10"], ["--nope"]):  # argparse's own refusals: one line too, not its usage
        done = subprocess.run(
            [sys.executable, str(ROOT / "tools" / "gpu_pack.py"), *bad], capture_output=True, text=True
        )
        [line] = done.stderr.splitlines()
        assert done.returncode == 1 and line.startswith("error: ") and "Fix: see" in line


def test_gpu_check_out_expands_the_home_as_the_workbench_options_do(tmp_path):
    """--out ~/g.json was a folder named ~ in the current one, which did not exist."""
    (tmp_path / "notes.json").write_text("my notes")
    (tmp_path / "afile").write_text("a file")
    env = {**os.environ, "HOME": str(tmp_path)}
    check = [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--target", "llvm", "--out"]
    for out, why in [("~/notes.json", "is not an earlier GPU check's JSON"), ("~/afile/g.json", "is in ")]:
        done = subprocess.run([*check, out], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        [line] = done.stderr.splitlines()
        assert done.returncode == 1 and line.startswith(f"error: --out {tmp_path / out[2:]} {why}")
    assert line.startswith(f"error: --out {tmp_path}/afile/g.json is in {tmp_path}/afile, which is not a folder.")
    assert (tmp_path / "notes.json").read_text() == "my notes" and sorted(os.listdir(tmp_path)) == [
        "afile",
        "notes.json",
    ]


@pytest.mark.slow  # gpu_check imports TVM and builds (4 to 9 s): `make test` runs it, not test-fast
def test_gpu_check_that_cannot_write_its_json_says_so_in_one_line(tmp_path):
    """A full disk was an OSError traceback after the whole run (here: a file system of 4 kB, which the
    JSON outgrows once the demo is measured)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode:
        pytest.skip(f"a small file system cannot be mounted here: {mounted.stderr.decode().strip()}")
    try:
        out = disk / "g.json"
        cmd = [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--target", "llvm", "--models", "demo"]
        done = subprocess.run([*cmd, "--runs", "2", "--warmup", "0", "--out", str(out)], capture_output=True, text=True)
        line = done.stderr.splitlines()[-1]
        assert done.returncode == 1 and line.startswith(f"error: cannot write --out {out} (No space left"), line
        # No temporary left; at most a checkpoint of the run, whole, and its record.
        assert sorted(os.listdir(disk)) in ([], ["g.json"], [output_paths.WRITTEN, "g.json"])
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def _gpu_check(out: Path):
    cmd = [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--target", "llvm", "--models", "demo"]
    cmd += ["--runs", "1", "--warmup", "0", "--out", str(out)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


@pytest.mark.slow  # gpu_check imports TVM and builds (4 to 9 s): `make test` runs it, not test-fast
def test_gpu_check_out_replaces_only_a_json_its_record_proves(tmp_path):
    """A JSON of yours with its keys (models, missing) was taken for an earlier run's, and replaced."""
    mine = tmp_path / "mine.json"
    mine.write_text('{"models": ["resnet", "bert"], "missing": ["the GPU I ordered"], "notes": "my list"}')
    done = _gpu_check(mine)
    [line] = done.stderr.splitlines()
    assert done.returncode == 1 and done.stdout == ""
    assert line == (
        f"error: --out {mine} is not an earlier GPU check's JSON ({output_paths.WRITTEN} beside it does not record "
        f"it): it would be replaced. Fix: pass another --out, or move {mine} away first."
    )
    assert json.loads(mine.read_text())["notes"] == "my list"
    out = tmp_path / "g.json"
    for _ in range(2):  # the second replaces the first's JSON: the record it keeps, in the workbench's form, proves it
        done = _gpu_check(out)
        assert done.returncode == 0, done.stderr
        assert output_paths.wrote(out) and json.loads(out.read_text())["models"]["demo"]["builds"]


@pytest.mark.parametrize(("flag", "kind"), [("i", "immutable"), ("a", "append-only")])
def test_gpu_check_refuses_an_out_it_cannot_replace_before_anything_is_built(tmp_path, flag, kind):
    """An immutable or append-only earlier JSON was a PermissionError traceback after the builds."""
    out = tmp_path / "g.json"
    put(out, json.dumps({"models": {}, "missing": []}), record=True)  # an earlier run's, as recorded
    before = out.read_bytes()
    for stuck in (out, tmp_path / output_paths.WRITTEN):  # the record too: it is replaced beside the JSON
        made = subprocess.run(["chattr", f"+{flag}", str(stuck)], capture_output=True, text=True)
        if made.returncode:
            pytest.skip(f"chattr +{flag} fails here: {made.stderr.strip()}")
        try:
            done = _gpu_check(out)
        finally:
            subprocess.run(["chattr", f"-{flag}", str(stuck)], check=True)
        [line] = done.stderr.splitlines()
        assert done.returncode == 1 and done.stdout == ""
        assert line == (
            f"error: --out {out} cannot be replaced: {stuck} is {kind}. "
            f"Fix: run chattr -i -a {stuck}, or pass another --out."
        )
    assert out.read_bytes() == before and output_paths.wrote(out)


ELSEWHERE = "llvm -mtriple=" + ("x86_64" if os.uname().machine == "aarch64" else "aarch64") + "-linux-gnu"


@pytest.mark.slow  # gpu_check imports TVM and builds (4 to 9 s): `make test` runs it, not test-fast
@pytest.mark.parametrize("target", ["cuda -arch=sm_90", "cuda -arch=sm_1000", ELSEWHERE])
def test_gpu_check_refuses_a_target_this_machine_cannot_run_before_anything_is_built(tmp_path, target):
    """Only --target cuda was: 'cuda -arch=sm_90' without a GPU imported and built every model (minutes for the SSD)
    before it said 'measured nothing'."""
    import tvm

    if target.startswith("cuda") and tvm.cuda(0).exist:
        pytest.skip("a GPU is here")
    out = tmp_path / "r.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--target", target, "--models", "demo"]
    done = subprocess.run([*cmd, "--out", str(out)], capture_output=True, text=True, timeout=300)
    [line] = done.stderr.splitlines()
    assert done.returncode == 1 and done.stdout == ""
    if target.startswith("cuda"):  # as --target cuda: the one line of a run that measured nothing, its JSON written
        assert line.startswith("error: measured nothing, tvm: TVM sees no CUDA device")
        assert json.loads(out.read_text())["models"] == {}
    else:
        assert line.startswith(f"error: --target {target}: The build is for ") and "Fix: run it on such a" in line
        assert not out.exists()


def test_gpu_check_refuses_an_arch_the_cuda_compiler_does_not_take_before_anything_is_built():
    """On a GPU machine 'cuda -arch=sm_1000' failed build by build; check_target runs before the first."""
    from byoc_workbench.core.errors import WorkbenchError
    from byoc_workbench.measure.compiler import cuda

    try:
        compiler = cuda.find()
    except WorkbenchError as err:
        pytest.skip(str(err))  # no CUDA compiler here
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    with pytest.raises(SystemExit) as stop:
        gpu_check.check_target("cuda -arch=sm_1000")
    line = str(stop.value)
    assert line.startswith(f"error: --target cuda -arch=sm_1000: {compiler} cannot compile for sm_1000 (")
    assert "\n" not in line and "Fix: ask for an arch it compiles: " in line


def test_a_run_whose_tvm_alone_failed_for_every_model_measured_nothing():
    """``--target "llvm -host=cuda"`` failed every TVM build and exited 0, the torch anchor its only number: with no
    TVM alone to time the others against, the run measured nothing."""
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    report = {
        "models": {"demo": {"builds": {"torch (its own target: every op it runs)": {"ms": 1.0}}}},
        "errors": {"demo: tvm alone (llvm)": "InternalError: Check failed"},
        "missing": [],
    }
    line = gpu_check.nothing_measured(report, None)
    assert line.startswith("error: measured nothing, demo: tvm alone (llvm): InternalError: Check failed. Fix: ")
    report["models"]["demo"]["builds"]["tvm alone (llvm)"] = {"ms": 2.0}
    assert gpu_check.nothing_measured(report, None) is None
