"""The GPU tools as a careless user met them in round 14: a PY that is no Python, a DEST or OUT whose name starts
with -, a TMPDIR that is not there, a disk that fills during the unpack or under the check's JSON, a pack stopped
part way, the log temporary every run left, PACK a file and DEST a link that leads nowhere."""

import os
import signal
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest
from test_gpu_round13_tools import ARGS, _gpu_run
from test_gpu_run_checks import _dest, _pack, _tree, stopping_python

ROOT = Path(__file__).resolve().parents[2]
GPU_PACK = [sys.executable, str(ROOT / "tools" / "gpu_pack.py")]


@pytest.fixture
def gpu_pack(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "tools"))
    import gpu_pack

    return gpu_pack


@pytest.fixture
def small_disk(tmp_path):
    """A file system of 1 MiB (tmpfs), unmounted after."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode:
        pytest.skip(f"a small file system cannot be mounted here: {mounted.stderr.decode().strip()}")
    yield disk
    subprocess.run(["umount", str(disk)], check=True)


PY_FIX = "Fix: pass PY=/path/to/python3 (or leave it out: python3)."


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"PY": "false"}, f"error: PY=false is not a Python 3.10 or later. {PY_FIX}"),
        ({"PY": "true"}, f"error: PY=true is not a Python 3.10 or later. {PY_FIX}"),
        ({"PY": "ls"}, f"error: PY=ls is not a Python 3.10 or later. {PY_FIX}"),
        ({"PY": "yes"}, f"error: PY=yes is not a Python 3.10 or later. {PY_FIX}"),
        (
            {"PACK": "{tmp}/afile"},
            "error: PACK={tmp}/afile is a file, not the folder of the archives. Fix: pass PACK=<the folder "
            f"tools/gpu_pack.py wrote> (or leave it out: {ROOT}/build/gpu-pack).",
        ),
        (
            {"DEST": "{tmp}/dangling"},
            "error: DEST={tmp}/dangling is a link to {tmp}/gone, which leads nowhere. Fix: remove the link, or pass "
            "another DEST (or leave it out: /tmp/byoc-gpu).",
        ),
        (
            {"TMPDIR": "{tmp}/notmp"},
            "error: cannot make a temporary file in TMPDIR={tmp}/notmp (No such file or directory). Fix: pass "
            "TMPDIR=<a folder you can write in> (or leave it out: /tmp).",
        ),
    ],
)
def test_what_is_wrong_before_the_unpack_is_one_line_naming_it(tmp_path, env, said):
    """PY=false exited 1 saying nothing, PY=true passed every check then failed in bash's words, PY=ls said ls's own
    usage; PACK a file was said as gpu_pack.py's --out; a DEST link to nothing was said as an OUT that cannot be
    written; a missing TMPDIR was mktemp's line, then a Fix about space."""
    _pack(tmp_path / "pack")
    (tmp_path / "afile").write_text("a file")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    stopping_python(tmp_path)
    before = _tree(tmp_path)
    done = _gpu_run(tmp_path, "--target", "llvm", **{k: v.format(tmp=tmp_path) for k, v in env.items()})
    assert done.returncode == 1 and done.stdout == "" and done.stderr.splitlines() == [said.format(tmp=tmp_path)]
    assert _tree(tmp_path) == before  # nothing made


def test_a_run_leaves_no_log_temporary(tmp_path):
    """The script ends with exec, so its EXIT trap never removed $TMPDIR/tmp.XXXXXXXXXX: one more per run."""
    _pack(tmp_path / "pack")
    (tmp_path / "tmpd").mkdir()
    for _ in range(2):
        done = _gpu_run(tmp_path, "--target", "llvm", TMPDIR=str(tmp_path / "tmpd"))
        assert done.returncode == 3 and done.stderr.splitlines()[-1] == "error: the check starts"
    assert os.listdir(tmp_path / "tmpd") == []


def test_no_space_left_in_dest_is_said_as_such_not_as_a_damaged_pack(tmp_path, small_disk):
    """A full disk during the unpack was 'cannot unpack .../site.tar.xz (OSError: [Errno 28] ...). Fix: run
    tools/gpu_pack.py again': the archives were fine."""
    big = tarfile.TarInfo("site/big.bin")
    big.size = 2 << 20
    pack = _pack(tmp_path / "pack", members=[(big, os.urandom(big.size))])
    dest = _dest(small_disk / "dest")
    before = _tree(dest)
    done = _gpu_run(tmp_path, DEST=str(dest))
    assert done.returncode == 1 and done.stderr.splitlines() == [
        f"error: no space left in DEST={dest} (No space left on device). Fix: free some space there, or pass "
        "another DEST."
    ]
    assert _tree(dest) == before
    into = small_disk / "u1"
    done = subprocess.run([*GPU_PACK, "--out", str(pack), "--unpack", str(into)], capture_output=True, text=True)
    assert done.returncode == 1 and done.stderr.splitlines() == [
        f"error: no space left in --unpack {into} (No space left on device). Fix: free some space there, or pass "
        "another --unpack FOLDER on another disk."
    ]
    assert not into.exists()


def test_a_json_that_does_not_fit_leaves_the_json_and_its_record_as_they_were(small_disk):
    """The JSON was put in place, then its record hit the full disk: the next run refused the check's own JSON."""
    out, record = small_disk / "gpu_check.json", small_disk / ARGS.WRITTEN
    record.write_text('{"other.json": "2 00"}\n')
    free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
    (small_disk / "filler").write_bytes(b"x" * (free - (2 << 12)))  # room for two pages
    with pytest.raises(OSError, match="No space left"):  # the JSON's two pages fit; its record's page does not
        ARGS.write_recorded(out, '{"models": {}, "missing": []}' + " " * 7000)
    assert sorted(os.listdir(small_disk)) == [ARGS.WRITTEN, "filler"]
    assert record.read_text() == '{"other.json": "2 00"}\n'
    (small_disk / "filler").unlink()
    ARGS.write_recorded(out, '{"models": {}, "missing": []}')  # an earlier run's, recorded
    before = _tree(small_disk)
    free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
    (small_disk / "filler").write_bytes(b"x" * (free - (1 << 12)))
    with pytest.raises(OSError, match="No space left"):
        ARGS.write_recorded(out, '{"models": {"demo": {}}, "missing": []}' + " " * 5000)
    (small_disk / "filler").unlink()
    assert _tree(small_disk) == before and ARGS._earlier_json(out)


def test_check_refuses_an_archive_cut_short(tmp_path):
    """A pack stopped part way left a cut-short site.tar.xz under its name, and --check passed it."""
    pack = _pack(tmp_path / "pack")
    check = [*GPU_PACK, "--check", "--out", str(pack)]
    assert subprocess.run(check, capture_output=True).returncode == 0
    whole = (pack / "site.tar.xz").read_bytes()
    fix = "Fix: run tools/gpu_pack.py again and carry what it prints."
    for cut in (len(whole) // 2, len(whole) - 1):
        (pack / "site.tar.xz").write_bytes(whole[:cut])
        done = subprocess.run(check, capture_output=True, text=True)
        assert done.returncode == 1 and done.stderr.splitlines() == [
            f"error: {pack}/site.tar.xz is not whole (no xz stream ends it: a pack or a carry stopped part way). {fix}"
        ]
    (pack / "site.tar.xz").write_bytes(whole)
    libs = (pack / "tvm-libs.tar.xz").read_bytes()
    (pack / "tvm-libs.tar.xz.1of2").write_bytes(libs[:100])
    (pack / "tvm-libs.tar.xz.2of2").write_bytes(libs[100:-20])
    done = subprocess.run(check, capture_output=True, text=True)
    assert done.returncode == 1 and done.stderr.splitlines() == [
        f"error: {pack}/tvm-libs.tar.xz, its pieces joined, is not whole (no xz stream ends it: a pack or a carry "
        f"stopped part way). {fix}"
    ]


def _wheels(folder: Path, library: bytes) -> list:
    """Two wheels as TVM's: a shared library (``library``) and a Python file each."""
    folder.mkdir(exist_ok=True)
    found = []
    for name in ("apache_tvm", "apache_tvm_ffi"):
        wheel = folder / f"{name}-0-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as z:  # dated 1980: the same bytes each time
            z.writestr(zipfile.ZipInfo(f"{name}/lib{name}.so"), library)
            z.writestr(zipfile.ZipInfo(f"{name}/__init__.py"), "")
        found.append(wheel)
    return found


def test_a_pack_replaces_the_last_as_a_set(tmp_path, gpu_pack):
    """cut() removed the last cut's pieces before the new ones were written; a cut with fewer pieces leaves none of
    the last one's."""
    out = tmp_path / "pack"
    out.mkdir()
    wheels = _wheels(tmp_path / "wheels", os.urandom(150_000))
    limit = gpu_pack.tree_bytes() / gpu_pack.MIB + gpu_pack.SPARE_MIB + 0.1  # for a part of the libraries
    calls = gpu_pack.write(wheels, out, limit)
    assert len(calls) > 1 and calls[-1][-1] == out / "site.tar.xz"
    assert all(p.is_file() for files in calls for p in files) and gpu_pack.fits(out, limit) == 0
    assert gpu_pack.write(wheels, out, 64) == [[out / "tvm-libs.tar.xz", out / "site.tar.xz"]]
    assert sorted(os.listdir(out)) == ["site.tar.xz", "tvm-libs.tar.xz", "tvm-libs.tar.xz.sha256"]
    assert gpu_pack.whole(out) == 0


@pytest.mark.slow
def test_a_pack_stopped_part_way_leaves_the_last_pack_as_it_was(tmp_path, gpu_pack):
    """Ctrl-C while packing left a cut-short archive under its own name, over the whole one."""
    out = tmp_path / "pack"
    out.mkdir()
    last = _wheels(tmp_path / "wheels", b"the last libraries")
    gpu_pack.write(last, out, 64)
    before = _tree(out)
    wheels = _wheels(tmp_path / "new", os.urandom(2 << 20))  # minutes of xz's best, for random bytes
    code = (
        f"import sys; from pathlib import Path; sys.path.insert(0, {str(ROOT / 'tools')!r}); import gpu_pack\n"
        "gpu_pack.exit_on_signals('run it again to finish.')  # as its __main__ does (byoc_workbench_cli's)\n"
        f"gpu_pack.write([Path(w) for w in {[str(w) for w in wheels]!r}], Path({str(out)!r}), 64)\n"
    )
    run = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True)
    assert run.stderr.readline().startswith("compressing the libraries")
    time.sleep(0.5)  # part of the archive written
    run.send_signal(signal.SIGINT)
    _, stderr = run.communicate(timeout=60)
    assert run.returncode == 130 and stderr.splitlines() == ["interrupted; run it again to finish."]
    assert _tree(out) == before
    (out / "tvm-libs.tar.xz").write_bytes((out / "tvm-libs.tar.xz").read_bytes()[:-30])  # an older pack's, cut short
    gpu_pack.write(last, out, 64)  # its stamp alone is no proof: packed again
    assert gpu_pack.whole(out) == 0


@pytest.mark.slow
def test_gpu_run_takes_a_dest_and_out_named_as_options_and_ends_with_its_check(tmp_path):
    """DEST=-dd was mktemp's usage error; OUT=-oo was unpacked, then 'argument --out: expected one argument' and an
    empty -oo left."""
    _pack(tmp_path / "pack")
    (tmp_path / "tmpd").mkdir()
    env = {**{k: v for k, v in os.environ.items() if k != "OUT"}, "DEST": "-dd", "OUT": "-oo", "PY": sys.executable}
    env |= {"PACK": "pack", "TMPDIR": str(tmp_path / "tmpd"), "BYOC_WORKBENCH_CACHE": str(tmp_path / "cache")}
    cmd = ["bash", str(ROOT / "tools" / "gpu_run.sh"), "--models", "demo", "--target", "llvm", "--runs", "1"]
    done = subprocess.run([*cmd, "--warmup", "0"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "-dd" / "site" / "site.tar.xz").is_dir()
    assert ARGS._earlier_json(tmp_path / "-oo" / "gpu_check.json")
    assert not [n for n in os.listdir(tmp_path / "tmpd") if n.startswith("tmp.")]  # the log temporary


@pytest.mark.slow
def test_gpu_check_on_a_full_disk_keeps_the_earlier_json_and_says_so(small_disk):
    """The line said the JSON could not be written, where a part was; the next run refused the check's own JSON."""
    out = small_disk / "gpu_check.json"
    ARGS.write_recorded(out, '{"models": {}, "missing": ["an earlier run"]}')
    before = _tree(small_disk)
    free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
    (small_disk / "filler").write_bytes(b"x" * free)
    cmd = [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--models", "demo", "--target", "llvm"]
    cmd += ["--runs", "1", "--warmup", "0", "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and done.stderr.splitlines()[-1] == (
        f"error: cannot write --out {out} (No space left on device); it holds the earlier run's JSON. "
        f"Fix: free some space in {small_disk}, or pass another --out."
    )
    (small_disk / "filler").unlink()
    assert _tree(small_disk) == before
    ARGS.check_out(str(out))  # still the check's own
