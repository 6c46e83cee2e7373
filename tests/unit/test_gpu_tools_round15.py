"""The GPU tools as a careless user met them in round 15: a signal whose unpack was already gone, a PY other than
the pack's Python, a kept libraries' archive its stamp did not seal, a pack folder that is immutable or append-only,
a piece cut in a huge number, an archive that is no xz or holds files outside site/, a last JSON whose aside name was
taken, and gpu_run.sh --help."""

import contextlib
import gzip
import io
import os
import resource
import signal
import subprocess
import sys
import tarfile
import time
import zlib
from pathlib import Path

import pytest
from test_gpu_round13_tools import _flagged, _hanging_python
from test_gpu_round14_tools import _wheels
from test_gpu_run_checks import _dest, _pack, _tree, stopping_python

ROOT = Path(__file__).resolve().parents[2]
GPU_PACK = [sys.executable, str(ROOT / "tools" / "gpu_pack.py")]
GPU_RUN = ["bash", str(ROOT / "tools" / "gpu_run.sh")]
AGAIN = "Fix: run tools/gpu_pack.py again and carry what it prints."
HERE = f"{sys.version_info.major}.{sys.version_info.minor}"
OTHER = "3.11" if HERE != "3.11" else "3.12"


@pytest.fixture
def gpu_pack(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "tools"))
    import gpu_pack

    return gpu_pack


def _env(tmp_path: Path, **env) -> dict:
    env = {"PACK": str(tmp_path / "pack"), "DEST": str(tmp_path / "dest"), "PY": stopping_python(tmp_path), **env}
    return {**{k: v for k, v in os.environ.items() if k != "OUT"}, **env}


def _gpu_run(tmp_path: Path, *args: str, **env: str):
    return subprocess.run([*GPU_RUN, *args], env=_env(tmp_path, **env), capture_output=True, text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "word"), [(signal.SIGINT, "interrupted"), (signal.SIGTERM, "terminated")])
def test_a_signal_whose_unpack_is_already_gone_is_still_one_line(tmp_path, signum, word):
    """The trap's kill of an unpack bash had already reaped failed under set -e: exit 1, and no line. A kill that
    fails (its target gone) stands for that race here."""
    _pack(tmp_path / "pack")
    env = _env(tmp_path, DEST=str(tmp_path / "new" / "dest"), PY=_hanging_python(tmp_path))
    env["BASH_FUNC_kill%%"] = "() { return 1; }"
    run = subprocess.Popen(GPU_RUN, env=env, start_new_session=True, stderr=subprocess.PIPE, text=True)
    pid = tmp_path / "unpacking.pid"
    try:
        while not pid.exists() or not pid.read_text():
            assert run.poll() is None, run.communicate()
            time.sleep(0.02)
        os.killpg(run.pid, signum)  # as a terminal signals the group: the unpack ends on its own
        _, stderr = run.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGKILL)
    assert run.returncode == 128 + signum and stderr.splitlines() == [f"{word}; nothing was measured."], stderr
    assert not (tmp_path / "new").exists()


@pytest.mark.slow
def test_a_python_other_than_the_packs_is_refused_before_the_unpack(tmp_path, gpu_pack):
    """The pack holds TVM for --python 3.12; a PY of Python 3.13 unpacked it all, then failed importing tvm_ffi with
    a Fix that said to unpack it."""
    wheels = _wheels(tmp_path / "wheels", b"a library")
    (tmp_path / "pack").mkdir()
    gpu_pack.write(wheels, tmp_path / "pack", 64, python=OTHER)
    dest = _dest(tmp_path / "dest")
    before = _tree(dest)
    done = _gpu_run(tmp_path)
    assert done.returncode == 1 and done.stdout.startswith("call 1 of 1 carries ")  # what the pack is: then no unpack
    assert done.stderr.splitlines() == [
        f"error: the pack in {tmp_path}/pack holds TVM for Python {OTHER}, and {sys.executable} is Python {HERE}. "
        f"Fix: pass PY=<a Python {OTHER}> (e.g. PY=python{OTHER}), or pack for this one: tools/gpu_pack.py --python "
        f"{HERE}, and carry what it prints."
    ]
    assert _tree(dest) == before
    gpu_pack.write(wheels, tmp_path / "pack", 64, python=HERE)
    done = _gpu_run(tmp_path)
    assert done.returncode == 3 and done.stderr.splitlines()[-1] == "error: the check starts"
    assert (dest / "site" / "apache_tvm" / "libapache_tvm.so").read_bytes() == b"a library"
    for bad in ("312", "3", "three"):
        done = subprocess.run([*GPU_PACK, "--python", bad], capture_output=True, text=True)
        assert done.returncode == 1 and done.stderr.splitlines() == [
            f"error: argument --python: {bad!r} is not a Python version X.Y (e.g. 3.12). "
            "Fix: see python tools/gpu_pack.py --help."
        ]


def test_a_kept_libraries_archive_must_be_the_one_its_stamp_seals(tmp_path, gpu_pack, capsys):
    """An archive swapped in beside the stamp of the wheels was kept: a 'pack' with no TVM libraries in it."""
    out = tmp_path / "pack"
    out.mkdir()
    wheels = _wheels(tmp_path / "wheels", b"the libraries")
    gpu_pack.write(wheels, out, 64)
    libs, stamp = (out / "tvm-libs.tar.xz").read_bytes(), (out / "tvm-libs.tar.xz.sha256").read_text()
    assert "compressing the libraries" in capsys.readouterr().err
    gpu_pack.write(wheels, out, 64)  # the same wheels, rules and archive: kept
    assert "compressing" not in capsys.readouterr().err and (out / "tvm-libs.tar.xz.sha256").read_text() == stamp
    other = _pack(tmp_path / "other")
    (out / "tvm-libs.tar.xz").write_bytes((other / "tvm-libs.tar.xz").read_bytes())  # whole, of other files
    gpu_pack.write(wheels, out, 64)
    assert "compressing the libraries" in capsys.readouterr().err
    assert (out / "tvm-libs.tar.xz").read_bytes() == libs and (out / "tvm-libs.tar.xz.sha256").read_text() == stamp
    (out / "tvm-libs.tar.xz.sha256").write_text(stamp[::-1])  # an older rule's stamp
    gpu_pack.write(wheels, out, 64)
    assert "compressing the libraries" in capsys.readouterr().err
    assert (out / "tvm-libs.tar.xz.sha256").read_text() == stamp


@contextlib.contextmanager
def _pack_folder(tmp_path: Path):
    """A folder under the checkout's build/ (gpu_pack's --out must be in it, and ignored), removed after."""
    build = ROOT / "build"
    made = not build.exists()
    folder = build / f"round15-{tmp_path.name}"
    folder.mkdir(parents=True)
    try:
        yield folder
    finally:
        subprocess.run(["rm", "-rf", str(folder)], check=True)
        if made:
            with contextlib.suppress(OSError):
                build.rmdir()


@pytest.mark.parametrize(("flag", "kind"), [("i", "immutable"), ("a", "append-only")])
def test_a_pack_folder_that_is_or_is_in_a_stuck_one_is_refused_before_anything(
    tmp_path, gpu_pack, monkeypatch, capsys, flag, kind
):
    """Immutable: a PermissionError traceback (at the download, or making the folder in it). Append-only: minutes of
    xz, then a .pack.*.part folder left that nothing could remove."""
    monkeypatch.setattr(gpu_pack, "download", lambda *_: pytest.fail("downloaded"))
    with _pack_folder(tmp_path) as folder, _flagged(folder, flag):
        for out in (folder, folder / "sub"):
            assert gpu_pack.main(["--out", str(out)]) == 1
            where = "is" if out == folder else f"would be made in {folder}, which is"
            assert capsys.readouterr().err.splitlines() == [
                f"error: --out {out} {where} {kind}, so a pack could not be put in it. Fix: run chattr -i -a "
                f"{folder}, or pass another folder under build/ (the default: build/gpu-pack)."
            ]
            assert os.listdir(folder) == []


def test_a_piece_cut_in_a_huge_number_is_refused_at_once(tmp_path):
    """tvm-libs.tar.xz.1of99999999999999999999: --check (so --unpack and gpu_run.sh) built a list of that many
    names, and hung."""
    pack = _pack(tmp_path / "pack")
    (pack / "tvm-libs.tar.xz").rename(pack / "tvm-libs.tar.xz.1of99999999999999999999")

    def small():  # a list of that many names fails here, and does not take the machine's memory
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    check = [*GPU_PACK, "--check", "--out", str(pack)]
    done = subprocess.run(check, capture_output=True, text=True, timeout=60, preexec_fn=small)
    assert done.returncode == 1 and done.stderr.splitlines() == [
        f"error: {pack} holds the pieces 1of99999999999999999999 of tvm-libs.tar.xz, not those of one cut. "
        "Fix: carry every piece of the cut tools/gpu_pack.py printed last, and remove the others."
    ]


def test_unpack_checks_as_check_does_and_takes_xz_files_under_site_alone(tmp_path):
    """A gzip tar named .tar.xz was 'not whole' to --check, and --unpack unpacked it, with a file outside site/."""
    pack = _pack(tmp_path / "pack")
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        member = tarfile.TarInfo("site/a.txt")
        member.size = 1
        tar.addfile(member, io.BytesIO(b"a"))
    (pack / "tvm-libs.tar.xz").write_bytes(gzip.compress(data.getvalue()))
    into = tmp_path / "into"
    for args, said in [
        (["--check"], f"{pack}/tvm-libs.tar.xz is not an xz archive"),
        (["--unpack", str(into)], f"cannot unpack {pack}/tvm-libs.tar.xz (it is not an xz archive)"),
    ]:
        done = subprocess.run([*GPU_PACK, "--out", str(pack), *args], capture_output=True, text=True)
        assert done.returncode == 1 and done.stderr.splitlines() == [f"error: {said}. {AGAIN}"]
        assert not into.exists()
    stray = tarfile.TarInfo("mkpack.py")
    stray.size = 4
    pack = _pack(tmp_path / "stray", [(stray, b"code")])
    done = subprocess.run([*GPU_PACK, "--out", str(pack), "--unpack", str(into)], capture_output=True, text=True)
    assert done.returncode == 1 and done.stderr.splitlines() == [
        f"error: the archives in {pack} hold mkpack.py, outside the site/ folder a pack holds. {AGAIN}"
    ]
    assert not into.exists()


@pytest.mark.slow
def test_the_last_json_is_moved_aside_when_its_aside_name_is_taken(tmp_path):
    """mv -n exits 0 without moving where the aside name exists (coreutils 9.1): the check then replaced the JSON."""
    _pack(tmp_path / "pack")
    out = _dest(tmp_path / "dest") / "out"
    when = subprocess.run(["date", "-r", str(out / "gpu_check.json"), "+%Y%m%d-%H%M%S.%N"], capture_output=True)
    taken = out / f"gpu_check.{when.stdout.decode().strip()}.json"
    taken.write_text('{"another run": 1}')
    done = _gpu_run(tmp_path)
    assert done.returncode == 3 and done.stderr.splitlines()[-1] == "error: the check starts"
    assert not (out / "gpu_check.json").exists() and taken.read_text() == '{"another run": 1}'
    assert sorted(p.read_text() for p in out.iterdir()) == ['{"another run": 1}', '{"the last run": true}']


@pytest.mark.slow
@pytest.mark.parametrize("ask", ["--help", "-h", "--he"])
def test_gpu_run_help_is_its_own_usage_before_anything(tmp_path, ask):
    """--help unpacked everything, moved the last JSON aside, then printed gpu_check's help with its --out."""
    dest = _dest(tmp_path / "dest")
    before = _tree(dest)
    done = _gpu_run(tmp_path, "--models", "demo", ask)  # no pack there: nothing is unpacked
    assert done.returncode == 0 and done.stderr == "" and _tree(dest) == before
    assert done.stdout.startswith("usage: [PACK=<folder>] [DEST=<folder>] [OUT=<folder>] [PY=<python>] bash ")
    for said in ("  PACK ", "  DEST ", "  OUT ", "  PY ", "--models", "--target", "--runs"):
        assert said in done.stdout
    assert "--out" not in done.stdout


def _framed(pack: Path, size: int) -> None:
    """tvm-libs.tar.xz in four sparse pieces, ``size`` bytes in all, that --check takes for one whole xz stream: its
    header first, and last an index of one block (the zeros between, slow enough to join) and its footer."""

    def crc(data: bytes) -> bytes:
        return zlib.crc32(data).to_bytes(4, "little")

    def number(n: int) -> bytes:  # xz's multibyte integer
        return bytes([*(0x80 | (n >> s) & 0x7F for s in (0, 7, 14)), n >> 21])  # four bytes, for n < 2**28

    flags = b"\0\x01"
    block = size - 12 - 24  # the header, then the index (12 bytes, for four bytes of size) and the footer
    index = b"\0\x01" + number(block) + b"\x01\0"
    index += crc(index)
    backward = (len(index) // 4 - 1).to_bytes(4, "little")
    head, tail = b"\xfd7zXZ\0" + flags + crc(flags), index + crc(backward + flags) + backward + flags + b"YZ"
    for k in range(1, 5):
        with open(pack / f"tvm-libs.tar.xz.{k}of4", "wb") as piece:
            piece.truncate(size // 4)
            piece.seek(0 if k == 1 else size // 4 - len(tail))
            piece.write(head if k == 1 else tail if k == 4 else b"")


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "word"), [(signal.SIGINT, "interrupted"), (signal.SIGTERM, "terminated")])
def test_a_signal_during_the_join_leaves_the_folder_as_it_was(tmp_path, signum, word):
    """test_gpu_tools_round12's join stage, on pieces that are whole as --check sees them: --unpack checks that
    first now, and refused its pieces of zeros before any join."""
    pack = _pack(tmp_path / "pack")
    (pack / "tvm-libs.tar.xz").unlink()
    _framed(pack, 192 << 20)
    check = subprocess.run([*GPU_PACK, "--out", str(pack), "--check", "--limit-mib", "1000"], capture_output=True)
    assert check.returncode == 0, check.stderr
    into = tmp_path / "empty"
    into.mkdir()
    run = subprocess.Popen(
        [*GPU_PACK, "--out", str(pack), "--unpack", str(into), "--limit-mib", "1000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    while not any(into.glob(".tvm-libs.tar.xz.*.joined")):
        assert run.poll() is None, run.communicate()
        time.sleep(0.002)
    run.send_signal(signum)
    _, stderr = run.communicate(timeout=60)
    assert run.returncode == 128 + signum and stderr.splitlines() == [f"{word}; run it again to finish."]
    assert into.is_dir() and os.listdir(into) == []
