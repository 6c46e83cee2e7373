"""tools/gpu_run.sh says everything in one line, before the unpack where it can: a signal during the unpack, an
archive with a member that would land outside its folder (on any Python, tarfile's filter or not), a last JSON it
could not move aside, a set of pieces that is not one cut."""

import io
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

#: A fresh process (or several) per case, signals and tools: make test runs them, make test-fast does not.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
MARK = ".unpacked-by-gpu_run"
#: A Python older than 3.11.4, whose TarFile.extractall has no filter= (Debian 12's 3.11.2), where one is here.
OLD_PY = next((p for p in ("/usr/bin/python3.11", "/usr/bin/python3.10") if os.access(p, os.X_OK)), None)


def _pack(folder: Path, members=(), files: int = 1) -> Path:
    """Archives in tools/gpu_pack.py's form: ``files`` small files under site/, and ``members`` (TarInfo, bytes)."""
    folder.mkdir()
    for part, count in (("tvm-libs.tar.xz", files), ("site.tar.xz", 1)):
        with tarfile.open(folder / part, "w:xz", preset=0) as tar:
            for k in range(count):
                member = tarfile.TarInfo(f"site/{part}/{k}.txt")
                member.size = 4
                tar.addfile(member, io.BytesIO(b"data"))
            for member, data in members if part == "site.tar.xz" else ():
                tar.addfile(member, io.BytesIO(data))
    return folder


def _dest(folder: Path) -> Path:
    """A $DEST a run left: an unpack and its JSON."""
    (folder / "site").mkdir(parents=True)
    (folder / "site" / MARK).write_text("unpacked by tools/gpu_run.sh")
    (folder / "out").mkdir()
    (folder / "out" / "gpu_check.json").write_text('{"the last run": true}')
    return folder


def _tree(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): p.is_symlink() or p.is_dir() or p.read_bytes() for p in folder.rglob("*")}


def _env(pack: Path, dest: Path, py: str = sys.executable) -> dict:
    return {**{k: v for k, v in os.environ.items() if k != "OUT"}, "PACK": str(pack), "DEST": str(dest), "PY": py}


def _gated_python(path: Path, gate: Path) -> str:
    """This Python, whose unpack (``gpu_pack.py --unpack``) starts once ``gate``.open exists (``gate``.waiting
    says it waits)."""
    path.write_text(
        "#!/bin/bash\n"
        f'case " $* " in *" --unpack "*) touch "{gate}.waiting"\n'
        f'  until [ -e "{gate}.open" ]; do sleep 0.02; done;; esac\n'
        f'exec "{sys.executable}" "$@"\n'
    )
    path.chmod(0o755)
    return str(path)


def stopping_python(folder: Path, py: str = sys.executable) -> str:
    """``py``, which stops where gpu_check.py would start (exit 3 and one line): what is tested is the unpack."""
    path = folder / "stopping-python"
    stop = 'case "$1" in */gpu_check.py) echo "error: the check starts" >&2; exit 3;; esac'
    path.write_text(f'#!/bin/bash\n{stop}\nexec "{py}" "$@"\n')
    path.chmod(0o755)
    return str(path)


def _gpu_run(pack: Path, dest: Path, py: str = sys.executable):
    cmd = ["bash", str(ROOT / "tools" / "gpu_run.sh"), "--target", "llvm"]
    env = _env(pack, dest, stopping_python(pack.parent, py))
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(("signum", "word"), [(signal.SIGINT, "interrupted"), (signal.SIGTERM, "terminated")])
def test_a_signal_during_the_unpack_is_one_line_and_the_last_unpack_is_kept(tmp_path, signum, word):
    """Ctrl-C was a KeyboardInterrupt traceback from the unpacker, SIGTERM bash's 'Terminated'. The unpack's own line
    is the script's to say: one line, whoever was signalled."""
    pack, dest = _pack(tmp_path / "pack", files=20000), _dest(tmp_path / "dest")
    before = _tree(dest)
    run = subprocess.Popen(  # a group of its own, signalled as a terminal signals it: the script and its Python
        ["bash", str(ROOT / "tools" / "gpu_run.sh")],
        env=_env(pack, dest),
        start_new_session=True,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    while not any(dest.glob("unpack.*/site")):  # the unpack is under way
        assert run.poll() is None, run.communicate()
        time.sleep(0.02)
    os.killpg(run.pid, signum)
    _, stderr = run.communicate(timeout=60)
    assert run.returncode == 128 + signum and stderr.splitlines() == [f"{word}; nothing was measured."], stderr
    assert _tree(dest) == before  # no unpack.* left, the last site and JSON as they were
    gate = tmp_path / "gate"  # the unpack waits for the signal: however late it comes, it comes during the unpack
    run = subprocess.Popen(
        ["bash", str(ROOT / "tools" / "gpu_run.sh")],
        env=_env(pack, dest, _gated_python(tmp_path / "python", gate)),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    while not gate.with_suffix(".waiting").exists():
        assert run.poll() is None, run.communicate()
        time.sleep(0.02)
    run.send_signal(signum)  # the script alone: it hands the signal on to the unpack, and says the line
    gate.with_suffix(".open").touch()
    _, stderr = run.communicate(timeout=120)
    assert run.returncode == 128 + signum and stderr.splitlines() == [f"{word}; nothing was measured."], stderr
    assert _tree(dest) == before


@pytest.mark.parametrize("py", [sys.executable, OLD_PY], ids=["this python", "python < 3.11.4"])
def test_an_archive_member_outside_its_folder_is_refused_in_one_line_on_any_python(tmp_path, py):
    """On Python 3.11.2 extractall(filter=...) was a TypeError traceback; its own check now decides there."""
    if py is None:
        pytest.skip("no Python older than 3.11.4 here")
    fine = _gpu_run(_pack(tmp_path / "fine"), _dest(tmp_path / "d0"), py)
    assert fine.returncode == 3 and fine.stderr.splitlines()[-1] == "error: the check starts"  # unpacked
    assert (tmp_path / "d0" / "site" / "site.tar.xz" / "0.txt").read_bytes() == b"data"
    link = tarfile.TarInfo("site/passwd")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    fifo = tarfile.TarInfo("site/fifo")
    fifo.type = tarfile.FIFOTYPE
    bad = [(tarfile.TarInfo("site/../../escaped"), "would be written outside the folder it unpacks into")]
    bad += [(tarfile.TarInfo("/tmp/absolute"), "would be written outside the folder it unpacks into")]
    bad += [(link, "is a link, a device or a FIFO, which no pack holds"), (fifo, "is a link, a device or a FIFO")]
    for k, (member, why) in enumerate(bad):
        dest = _dest(tmp_path / f"d{k + 1}")
        before = _tree(dest)
        pack = _pack(tmp_path / f"pack{k}", [(member, b"")])
        done = _gpu_run(pack, dest, py)
        line = done.stderr.splitlines()[-1]
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert line.startswith(f"error: cannot unpack {pack / 'site.tar.xz'} (TarError: {member.name} {why}")
        assert line.endswith("Fix: run tools/gpu_pack.py again and carry what it prints.")
        assert _tree(dest) == before and not (tmp_path / "escaped").exists()


def test_a_last_json_that_cannot_be_moved_aside_is_refused_before_the_unpack(tmp_path):
    """An immutable one was a raw mv error, a link that leads nowhere gpu_check's refusal: both after the unpack."""
    pack = _pack(tmp_path / "pack")
    dest = _dest(tmp_path / "dest")
    json_ = dest / "out" / "gpu_check.json"
    json_.unlink()
    json_.symlink_to("/nonexistent/x.json")
    before = _tree(dest)
    done = _gpu_run(pack, dest)
    assert done.returncode == 1 and done.stdout == "" and _tree(dest) == before
    assert done.stderr.splitlines() == [
        f"error: {json_} is a link to /nonexistent/x.json, which leads nowhere. "
        "Fix: remove the link, or pass another OUT."
    ]
    json_.unlink()
    json_.mkdir()
    done = _gpu_run(pack, dest)
    assert done.returncode == 1 and done.stdout == "" and done.stderr.startswith(f"error: {json_} is not a plain file")
    json_.rmdir()
    json_.write_text('{"the last run": true}')
    made = subprocess.run(["chattr", "+i", str(json_)], capture_output=True, text=True)
    if made.returncode:
        pytest.skip(f"chattr +i fails here: {made.stderr.strip()}")
    try:
        before = _tree(dest)
        done = _gpu_run(pack, dest)
    finally:
        subprocess.run(["chattr", "-i", str(json_)], check=True)
    assert done.returncode == 1 and done.stdout == "" and _tree(dest) == before
    assert done.stderr.splitlines() == [
        f"error: {json_} is immutable, so it cannot be moved aside. Fix: run chattr -i -a {json_}, or pass another OUT."
    ]


@pytest.mark.parametrize("names", [["0of2", "2of2"], ["1of1", "1of2"], ["1of2", "2of2", "3of3"], ["01of2", "2of2"]])
def test_pieces_that_are_not_one_cut_are_refused(tmp_path, names):
    """X.0of2 with 2of2, and 1of1 with 1of2, were two calls 'fine'; the broken join was found by the unpack."""
    pack = _pack(tmp_path / "pack")
    whole = (pack / "tvm-libs.tar.xz").read_bytes()
    for name in names:
        (pack / f"tvm-libs.tar.xz.{name}").write_bytes(whole[: len(whole) // 2])
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gpu_pack.py"), "--check", "--out", str(pack)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"error: {pack} holds the pieces {', '.join(names)} of tvm-libs.tar.xz, not those of one cut. "
        "Fix: carry every piece of the cut tools/gpu_pack.py printed last, and remove the others."
    ]
    for name in names:
        (pack / f"tvm-libs.tar.xz.{name}").unlink()
    halves = [whole[: len(whole) // 2], whole[len(whole) // 2 :]]
    for k, half in enumerate(halves, 1):
        (pack / f"tvm-libs.tar.xz.{k}of2").write_bytes(half)
    (pack / "tvm-libs.tar.xz").unlink()
    dest = _dest(tmp_path / "dest")
    done = _gpu_run(pack, dest)  # one cut, whole: joined and unpacked
    assert done.returncode == 3 and done.stderr.splitlines()[-1] == "error: the check starts"
    assert (dest / "site" / "tvm-libs.tar.xz" / "0.txt").read_bytes() == b"data"
    shutil.rmtree(pack)
