"""Pack what a bare GPU machine lacks for benchmarks/gpu_check.py into archives that travel in one call.

The GPU machine this project is lent (Python 3.12, numpy 2, PyTorch, no MXNet, no network) takes at most 64 MiB per
call, the working tree included. TVM's wheel is 100 MB and its compiler library 259 MB unpacked, so:

- ``tvm-libs.tar.xz``: the shared libraries of the apache-tvm and apache-tvm-ffi wheels for that Python (``--python``),
  the compiler's 259 MB among them, xz with the x86 filter (about 57 MiB);
- ``site.tar.xz``: the rest (no CUTLASS headers, C++ sources, web runtime), a few MiB, first the Python it is for.

The workbench travels in the working tree, its shipped zoo with it: the GPU check regenerates a zoo model's seeded
weights there, so the pack carries no model. Run here::

    .venv/bin/python tools/gpu_pack.py            # writes build/gpu-pack/, prints the call

then, on the GPU machine, ``bash tools/gpu_run.sh`` unpacks both and runs the check. A pack replaces the last one as a
set once all of it is written (stopped part way, it leaves the last one as it was). ``--check`` measures again what one
call would carry (gpu_run.sh does, before it unpacks): the tree grows after packing; an archive cut short (no xz stream
ends it) is refused too. ``--unpack FOLDER`` checks the same, then unpacks the archives into ``FOLDER``, new or empty
(gpu_run.sh's fresh one), on the Python the pack is for: nothing but plain files and folders, all in its ``site/``; a
failure leaves ``FOLDER`` as it was (or not there, with no parent it made), and one in or under an immutable or
append-only folder is refused first. Ctrl-C or SIGTERM stops it in one line, exit 130 or 143, ``FOLDER`` as it was too.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import functools
import hashlib
import inspect
import io
import lzma
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from gpu_check_args import held, resists  # noqa: E402

from byoc_workbench_cli import exit_on_signals  # noqa: E402  (the standard library alone, as is all of this)

MIB = 1 << 20
SPARE_MIB = 1.0  # room each call leaves for the tree to grow between packing and running
WHEELS = ("apache-tvm==0.27.0.post1", "apache-tvm-ffi==0.1.15.post2")
# Headers for CUTLASS, C++ sources, the wasm runtime, and the sources tvm-ffi builds its backtraces from.
LEFT_OUT = ("tvm/3rdparty/", "tvm/web/", "tvm/src/", "tvm_ffi/3rdparty/libbacktrace/")
PARTS = ("tvm-libs.tar.xz", "site.tar.xz")
FOR_PYTHON = ".packed-for-python"  # site.tar.xz's first file: the Python (X.Y) the wheels are for
# The x86 filter turns relative calls absolute, so that machine code repeats more and xz packs it tighter.
X86 = [{"id": lzma.FILTER_X86}, {"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME}]


def download(python: str, into: Path) -> list:
    """TVM's two wheels for ``python`` (e.g. 3.12) on x86-64 Linux, from the package index (kept in ``into``); a
    failure is one line, the folders made for them removed."""
    if stray := next((p for p in (into.parent, into) if os.path.lexists(p) and not p.is_dir()), None):
        raise SystemExit(_refused(f"{stray} is not a folder, yet the wheels go there", "move it, or pass other --out"))
    made, found = next((p for p in (into.parent, into) if not p.exists()), None), []
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", "-d", str(into)]
    cmd += ["--python-version", python, "--implementation", "cp", *WHEELS]
    cmd += [f"--platform=manylinux{tag}_x86_64" for tag in ("_2_28", "_2_27", "_2_24", "2014")]
    try:
        into.mkdir(parents=True, exist_ok=True)
        pip = subprocess.run(cmd, stderr=subprocess.PIPE, text=True, errors="replace")
        got = [sorted(into.glob(f"{s.replace('-', '_').replace('==', '-')}-*.whl"))[-1:] for s in WHEELS]
        found = sum(got, []) if pip.returncode == 0 else []
    finally:
        if made and len(found) < len(WHEELS):  # a failure or a signal
            shutil.rmtree(made, ignore_errors=True)
    if len(found) < len(WHEELS):
        why = f"pip got no wheels of {' and '.join(WHEELS)} for Python {python}"
        said = " ".join((pip.stderr.strip().splitlines() or ["it saved none"])[-1].split())
        raise SystemExit(_refused(f"{why} ({said})", "check the index is reachable, and pass a --python they are for"))
    return found


def _files(wheels: list, libraries: bool):
    """``(name, bytes)`` of the wheels' shared libraries (``libraries``) or of their other files, but what the
    check never reads."""
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as z:
            for info in z.infolist():
                name = info.filename
                if info.is_dir() or name.startswith(LEFT_OUT) or ".dist-info/" in name:
                    continue
                if (name.endswith(".so") or ".so." in name) == libraries:
                    yield name, z.read(info)


def pack(files, target: Path, filters, mode: int = 0o644) -> Path:
    """``target``, a tar of ``files`` (``(name, bytes)``) under ``site/``, each of ``mode``, xz-compressed with
    ``filters``."""
    with (
        lzma.open(target, "wb", format=lzma.FORMAT_XZ, filters=filters) as xz,
        tarfile.open(fileobj=xz, mode="w|") as tar,
    ):
        for name, data in files:
            member = tarfile.TarInfo(f"site/{name}")
            member.size, member.mode = len(data), mode
            tar.addfile(member, io.BytesIO(data))
    return target


def _seal(wheels: list, archive: Path) -> str:
    """The libraries' archive's stamp: one digest of what decides its content (the wheels, and the code and
    settings that pick and compress their files) and of its own bytes. It proves that this archive is the one made
    of these wheels by these rules: no other archive, nor one an older rule made, matches it."""
    rules = "".join(inspect.getsource(f) for f in (_files, pack)) + repr((LEFT_OUT, X86))
    digests = [hashlib.sha256(p.read_bytes()).digest() for p in (*wheels, archive)]
    return hashlib.sha256(rules.encode() + b"".join(digests)).hexdigest()


def pack_libraries(wheels: list, out: Path, new: Path) -> None:
    """The shared libraries' archive and its stamp (:func:`_seal`) into ``new``: ``out``'s own, linked, where its
    stamp seals it, as their minutes of xz are most of a pack's; else compressed again."""
    kept = [out / PARTS[0], out / f"{PARTS[0]}.sha256"]
    if all(p.is_file() for p in kept) and kept[1].read_text() == _seal(wheels, kept[0]):
        for path in kept:
            os.link(path, new / path.name)
        return
    print("compressing the libraries, TVM's compiler among them (minutes)...", file=sys.stderr)
    pack(_files(wheels, True), new / PARTS[0], X86, 0o755)
    (new / kept[1].name).write_text(_seal(wheels, new / PARTS[0]))


def write(wheels: list, out: Path, limit_mib: float, python: str = "3.12") -> list:
    """The pack of ``wheels`` (for ``python``) put in ``out`` as one set (:func:`staged`): its calls (:func:`cut`)."""
    with staged(out) as new:
        pack_libraries(wheels, out, new)
        site = [(FOR_PYTHON, f"{python}\n".encode()), *_files(wheels, False)]
        pack(site, new / PARTS[1], [{"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME}])
        calls = cut(new, limit_mib)
    return [[out / f.name for f in files] for files in calls]


@contextlib.contextmanager
def staged(out: Path):
    """A fresh folder in ``out`` to write a pack into, whose files replace ``out``'s as one set at the block's end,
    the pieces of an earlier cut it has not made again removed: ``out`` holds the earlier pack or this one, never a
    mix of two nor an archive cut short under its own name. A failure or a signal leaves ``out`` as it was."""
    new = Path(tempfile.mkdtemp(dir=out, prefix=".pack.", suffix=".part"))
    try:
        yield new
        names = sorted(os.listdir(new))  # the libraries' archive before its stamp
        with held():
            for old in (p for p in pieces(out) if p.name not in names):
                old.unlink()
            for name in names:
                os.replace(new / name, out / name)
    finally:
        shutil.rmtree(new, ignore_errors=True)


def tree_bytes() -> int:
    """What the working tree adds to a call: the files git lists (tracked, and untracked but not ignored); where git
    cannot list them (the device's copy of the tree has no git), every file here but the top-level ``build/`` (the
    pack, counted on its own) and Python's caches: what travelled."""
    try:
        cmd = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
        listed = subprocess.run(cmd, cwd=ROOT, capture_output=True, check=True).stdout.decode()
        return sum((ROOT / n).stat().st_size for n in listed.split("\0") if n and (ROOT / n).is_file())
    except (OSError, subprocess.CalledProcessError):
        total = 0
        for folder, dirs, files in os.walk(ROOT):
            dirs[:] = [d for d in dirs if d not in (".git", "__pycache__") and (folder, d) != (str(ROOT), "build")]
            total += sum(os.path.getsize(os.path.join(folder, f)) for f in files)
        return total


def pieces(out: Path) -> list:
    """The libraries' archive cut in pieces (``tvm-libs.tar.xz.1of2``...), in order; empty where it is whole."""
    found = [p for p in out.glob(f"{PARTS[0]}.*of*") if p.suffix[1:].replace("of", "", 1).isdecimal()]
    return sorted(found, key=lambda p: [int(n) for n in p.suffix[1:].split("of")])  # a stray .2of2.bak is no piece


def cut(out: Path, limit_mib: float) -> list:
    """The calls that carry the pack, a list of files each: both archives in one where they fit beside the working
    tree, else the libraries' archive in as many pieces as it takes, the last call with ``site.tar.xz``. A warm device
    machine keeps what a call carried for the next (ignored files stay), so the pieces gather there; ``gpu_run.sh``
    joins them. ``out`` is a pack :func:`staged`, which has no pieces yet."""
    whole, site = out / PARTS[0], out / PARTS[1]
    room = limit_mib * MIB - tree_bytes() - SPARE_MIB * MIB
    if whole.stat().st_size + site.stat().st_size <= room:
        return [[whole, site]]
    data = whole.read_bytes()
    n = -(-(len(data) + site.stat().st_size) // int(room))
    size = -(-len(data) // n)
    for k in range(n):
        (out / f"{PARTS[0]}.{k + 1}of{n}").write_bytes(data[k * size : (k + 1) * size])
    found = pieces(out)
    return [[piece] for piece in found[:-1]] + [[found[-1], site]]


def fits(out: Path, limit_mib: float) -> int:
    """0 where each call carries, beside the working tree, at most ``limit_mib`` (one line says so, with the
    headroom), else 1 and one line saying why: checked when packing and again before a run, since the tree
    grows. The files are the pieces found, else the whole archives."""
    found = pieces(out)
    have = [p.suffix[1:] for p in found]
    if have != [f"{k}of{len(found)}" for k in range(1, len(found) + 1)]:  # 1 to N of one N, N those found
        fix = "carry every piece of the cut tools/gpu_pack.py printed last, and remove the others"
        return _refused(f"{out} holds the pieces {', '.join(have)} of {PARTS[0]}, not those of one cut", fix)
    calls = [[p] for p in found[:-1]] + [[found[-1], out / PARTS[1]]] if found else [[out / name for name in PARTS]]
    tree = tree_bytes()
    for k, files in enumerate(calls, 1):
        for part in files:
            if not part.is_file():
                said = f"is {_kind(part)}, not an archive" if part.exists() else "is missing"
                return _refused(f"{part} {said}", "run tools/gpu_pack.py and carry what it prints")
        sizes = {p.name: p.stat().st_size for p in files} | {"working tree": tree}
        total = sum(sizes.values())
        said = ", ".join(f"{name} {size / MIB:.1f}" for name, size in sizes.items())
        if total > limit_mib * MIB:
            fix = "run tools/gpu_pack.py again (it cuts the pack to fit), or shrink what the tree ships"
            return _refused(f"call {k} would carry {total / MIB:.1f} MiB ({said}), over {limit_mib:g} MiB", fix)
        print(
            f"call {k} of {len(calls)} carries {total / MIB:.1f} MiB of {limit_mib:g} ({said}): "
            f"{limit_mib - total / MIB:.1f} to spare"
        )
    return 0


def whole(out: Path, unpacking: bool = False) -> int:
    """0 where each archive of ``out`` (the pieces joined), there as :func:`fits` found, is a whole xz stream, else
    1 and one line (``cannot unpack`` it, ``unpacking``): what ``--check`` adds to :func:`fits`, as an archive cut
    short starts as a whole one does; ``--unpack`` checks it first too."""
    found = pieces(out)
    for files in (found or [out / PARTS[0]], [out / PARTS[1]]):
        if why := _not_xz(files):
            said = f"{out / PARTS[0]}, its pieces joined," if found and files == found else files[0]
            said = f"cannot unpack {said} (it {why})" if unpacking else f"{said} {why}"
            return _refused(said, "run tools/gpu_pack.py again and carry what it prints")
    return 0


def _not_xz(files: list) -> str:
    """Why ``files``, joined, are not one whole xz stream, else ``""``: its start, and its end, a footer that points
    back to an index whose blocks, with the header, index and footer, add up to the size of the whole."""
    size = sum(p.stat().st_size for p in files)
    with open(files[0], "rb") as f:
        header = f.read(6)
    if header != b"\xfd7zXZ\0"[: len(header)]:  # a start too short to tell is a stream cut short
        return "is not an xz archive"
    cut = "is not whole (no xz stream ends it: a pack or a carry stopped part way)"
    footer = _tail(files, 12)
    number = functools.partial(int.from_bytes, byteorder="little")
    if size < 32 or footer[10:] != b"YZ" or zlib.crc32(footer[4:10]) != number(footer[:4]):
        return cut
    index_size = (number(footer[4:8]) + 1) * 4
    index = _tail(files, index_size + 12)[:index_size] if index_size <= size - 24 else b""
    if index[:1] != b"\0" or zlib.crc32(index[:-4]) != number(index[-4:]):
        return cut
    values, value, shift = [], 0, 0  # the index's numbers: how many blocks, then each one's sizes (two numbers)
    for byte in index[1:-4]:
        value, shift = value | (byte & 0x7F) << shift, shift + 7
        if not byte & 0x80:
            values, value, shift = [*values, value], 0, 0
    blocks = values[1 : 1 + 2 * values[0] : 2] if values else []
    return "" if 24 + sum(-(-unpadded // 4) * 4 for unpadded in blocks) + index_size == size else cut


def _tail(files: list, n: int) -> bytes:
    """The last ``n`` bytes of ``files`` joined."""
    got = b""
    for part in reversed(files):
        with open(part, "rb") as f:
            f.seek(max(f.seek(0, os.SEEK_END) - (n - len(got)), 0))
            got = f.read() + got  # nothing once it has n
    return got


#: tarfile's own "data" filter, where it has one (Python 3.11.4 on); before that, :func:`_unsafe` decides alone.
SAFE = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}


def unpack(out: Path, into: Path, limit_mib: float, dest: str | None = None) -> int:
    """The archives of ``out`` (the pieces joined), checked as ``--check`` does and for this Python, unpacked into
    ``into``, a new or empty folder: 0 once it holds their ``site/`` alone, else 1 and one line (a folder with files
    in it or in an immutable or append-only one, a pack for another Python, a damaged archive, a member that is no
    plain file or folder, or is outside ``site/``, no space left), ``into`` left as it was, no folder made for it; on
    a signal too. ``dest``: gpu_run.sh's ``DEST``, ``into``'s parent, named where no space is left."""
    into = Path(os.path.abspath(into))  # "a/missing/.." is a: never made, nor written into by the other name
    fix = "pass a new or empty folder"
    if into.is_symlink():
        return _refused(f"--unpack {into} is a link to {os.readlink(into)}, not a folder", fix)
    if into.exists() and not into.is_dir():
        return _refused(f"--unpack {into} is {_kind(into)}, not a folder", fix)
    if into.is_dir() and any(into.iterdir()):
        return _refused(f"--unpack {into} holds files already, which the unpack would write over", fix)
    top = next(p for p in (into, *into.parents) if os.path.lexists(p.parent))  # the first folder to make, or into
    base = into if into.exists() else top.parent  # where a failed unpack removes what it made
    if stuck := resists(base):
        where = "is" if base == into else f"would be made in {base}, which is"
        why = f"--unpack {into} {where} {stuck}, so what a failed unpack made there could not be removed"
        return _refused(why, f"run chattr -i -a {base}, or {fix}")
    if fits(out, limit_mib) or whole(out, True) or _other_python(out, dest):
        return 1
    made, done = not into.exists(), False
    try:
        into.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        if made and top.is_dir():  # its parents, made before it failed
            _remove(top)
        cannot = f"cannot make --unpack {into} ({err.strerror})", "pass a folder you can write in"
        return _refused(*(_no_space(err, into, dest) or cannot))
    try:
        why, fix = _extract(out, into, dest)
        why = why or _not_site(out, into)
        done = not why
    finally:
        if not done:  # a failure or a signal: all that is there is what this unpack made, its parents too
            for path in [top] if made else list(into.iterdir()):
                _remove(path)
    return _refused(why, fix or "run tools/gpu_pack.py again and carry what it prints") if why else 0


def _other_python(out: Path, dest: str | None) -> int:
    """1 and one line where the pack is for another Python (X.Y) than this one, whose TVM this one cannot import, or
    its record of it is no X.Y (a damaged pack); else 0, also where the pack does not say (an older gpu_pack's) or
    cannot be read (the unpack says why)."""
    try:
        with tarfile.open(out / PARTS[1], "r|xz") as tar:
            first = tar.next()
            said = first and first.name == f"site/{FOR_PYTHON}" and first.isfile() and tar.extractfile(first).read(64)
    except (OSError, EOFError, lzma.LZMAError, tarfile.TarError):
        return 0
    if not isinstance(said, bytes):
        return 0
    if not (found := re.fullmatch(rb"\s*(\d+)\.(\d+)(\.\d+)?\s*", said)):
        why = f"the pack in {out} is damaged: its record of the Python it is for ({FOR_PYTHON}) is no X.Y"
        return _refused(why, "run tools/gpu_pack.py again and carry what it prints")
    packed, here = (int(found[1]), int(found[2])), sys.version_info[:2]
    if packed == here:
        return 0
    named, here = ".".join(map(str, packed)), ".".join(map(str, here))
    why = f"the pack in {out} holds TVM for Python {named}, and {sys.executable} is Python {here}"
    fix = f"pack for this one: tools/gpu_pack.py --python {here}, and carry what it prints"
    use = f"pass PY=<a Python {named}> (e.g. PY=python{named}), or " if dest else f"run it with a Python {named}, or "
    return _refused(why, fix if packed < (3, 10) else use + fix)  # gpu_run.sh runs on 3.10 or later alone


def _not_site(out: Path, into: Path) -> str:
    """Why what the archives of ``out`` put in ``into`` is not a pack (a ``site/`` folder alone), else ``""``."""
    if not (into / "site").is_dir():
        return f"the archives in {out} hold no site/ folder"
    stray = sorted(set(os.listdir(into)) - {"site"})
    return f"the archives in {out} hold {stray[0]}, outside the site/ folder a pack holds" if stray else ""


def _no_space(err: OSError, into: Path, dest: str | None) -> tuple | None:
    """``(why, fix)`` where ``err`` found no space (a full disk or quota) where ``into`` is, else None."""
    if err.errno not in (errno.ENOSPC, errno.EDQUOT):
        return None
    where, other = (f"DEST={dest}", "DEST") if dest else (f"--unpack {into}", "--unpack FOLDER on another disk")
    return f"no space left in {where} ({err.strerror})", f"free some space there, or pass another {other}"


def _extract(out: Path, into: Path, dest: str | None) -> tuple:
    """The archives of ``out`` unpacked into ``into``, the pieces joined first into a temporary of its own there
    (removed after): ``("", "")``, else ``(why not, its fix or "")``."""
    found, archives = pieces(out), [out / PARTS[0], out / PARTS[1]]
    if found:  # the pieces several calls carried (fits() found them all)
        fd, joined = tempfile.mkstemp(dir=into, prefix=f".{PARTS[0]}.", suffix=".joined")
        archives[0] = Path(joined)
    path = archives[0]
    try:
        if found:
            with open(fd, "wb") as whole:
                for piece in found:
                    with open(piece, "rb") as f:
                        shutil.copyfileobj(f, whole, 1 << 24)
        for path in archives:
            with tarfile.open(path, "r:xz") as tar:
                for member in tar:  # one pass: each member checked, then written
                    if unsafe := _unsafe(member):
                        raise tarfile.TarError(f"{member.name} {unsafe}")
                    tar.extract(member, into, **SAFE)
    except (OSError, EOFError, lzma.LZMAError, tarfile.TarError) as err:
        if full := isinstance(err, OSError) and _no_space(err, into, dest):
            return full
        said = f"{out / PARTS[0]}, its pieces joined," if found and path == archives[0] else path
        return f"cannot unpack {said} ({' '.join(f'{type(err).__name__}: {err}'.split())})", ""
    finally:
        if found:
            os.unlink(joined)
    return "", ""


def _remove(path: Path) -> None:
    shutil.rmtree(path, True) if path.is_dir() and not path.is_symlink() else path.unlink(missing_ok=True)


def _refused(why: str, fix: str) -> int:
    print(f"error: {why}. Fix: {fix}.", file=sys.stderr)
    return 1


def _unsafe(member: tarfile.TarInfo) -> str:
    """Why ``member`` of an archive may not be unpacked, else ``""``: a pack holds plain files and folders only, by
    relative names that stay inside the folder they unpack into (no link, device or FIFO, no ``..``)."""
    if not (member.isfile() or member.isdir()):
        return "is a link, a device or a FIFO, which no pack holds"
    if os.path.isabs(member.name) or ".." in Path(member.name).parts:
        return "would be written outside the folder it unpacks into"
    return ""


def _kind(path: Path) -> str:
    """What is at ``path``: a folder, a file, a FIFO, a socket or a device."""
    kinds = {"a folder": path.is_dir, "a file": path.is_file, "a FIFO": path.is_fifo, "a socket": path.is_socket}
    return next((kind for kind, test in kinds.items() if test()), "a device")


def travelling(out: Path) -> Path:
    """``out`` relative to the checkout, refused in one line before minutes of xz where a call cannot carry it:
    outside the checkout (a call carries paths in it) or not ignored by git (it would travel twice)."""
    fix = "pass a folder under build/ (the default: build/gpu-pack)"
    if any(p.exists() and not p.is_dir() for p in (out, *out.parents)):
        raise SystemExit(f"error: --out {out} is not a folder, or is in something that is not one. Fix: {fix}.")
    if not out.is_relative_to(ROOT):
        raise SystemExit(f"error: --out {out} is outside the checkout {ROOT}. Fix: {fix}.")
    if subprocess.run(["git", "check-ignore", "-q", str(out)], cwd=ROOT).returncode != 0:
        raise SystemExit(f"error: --out {out} is not ignored by git, so it would travel twice. Fix: {fix}.")
    return out.relative_to(ROOT)


def make_out(out: Path) -> int:
    """0 once ``out`` is there or made, else 1 and one line, before minutes of xz: where it, what a pack replaces in
    it, or the folder it would be made in is immutable or append-only (nor could its temporary be removed)."""
    base = next(p for p in (out, *out.parents) if os.path.lexists(p))
    touched = [out, out / "wheels", *(out / n for n in (*PARTS, f"{PARTS[0]}.sha256")), *pieces(out)]
    said = {out: "is"} if base == out else {base: f"would be made in {base}, which is"}
    for path in touched if base == out else [base]:
        if kind := resists(path):
            fix = f"run chattr -i -a {path}, or pass another folder under build/ (the default: build/gpu-pack)"
            why = f"--out {out} {said.get(path, f'holds {path}, which is')} {kind}, so a pack could not be put in it"
            return _refused(why, fix)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        return _refused(f"cannot make --out {out} ({err.strerror})", "pass a folder under build/ you can write in")
    return 0


def _version(text: str) -> str:
    """An argparse type: a Python version, X.Y (or X.Y.Z), 3.10 or later (as gpu_run.sh takes), as X.Y."""
    if not (found := re.fullmatch(r"(3\.(\d+))(\.\d+)?", text)) or int(found[2]) < 10:
        said = "older than 3.10, the oldest Python gpu_run.sh runs" if found else "not a Python version X.Y (e.g. 3.12)"
        raise argparse.ArgumentTypeError(f"{text!r} is {said}")
    return found[1]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, as the workbench's commands say it (argparse's adds its usage)
        raise SystemExit(f"error: {message}. Fix: see python tools/gpu_pack.py --help.")


def main(argv=None) -> int:
    parser = _Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "gpu-pack")
    parser.add_argument("--python", type=_version, default="3.12", help="the GPU machine's Python (default 3.12)")
    parser.add_argument("--limit-mib", type=float, default=64.0, help="what one call may carry (default 64)")
    parser.add_argument("--check", action="store_true", help="only check that the pack and the tree fit one call")
    parser.add_argument("--unpack", type=Path, metavar="FOLDER", help="check, then unpack the pack into FOLDER")
    parser.add_argument("--dest", help=argparse.SUPPRESS)  # gpu_run.sh's DEST, FOLDER's parent, for its lines
    args = parser.parse_args(argv)
    if not 0 < args.limit_mib < float("inf"):  # nan too
        raise SystemExit(f"error: --limit-mib {args.limit_mib} is not a size. Fix: pass the MiB one call carries (64).")
    out = args.out.resolve()
    if (args.check or args.unpack) and out.exists() and not out.is_dir():
        return _refused(f"--out {out} is {_kind(out)}, not a folder", "pass the folder tools/gpu_pack.py wrote")
    if args.unpack:
        return unpack(out, args.unpack, args.limit_mib, args.dest)
    if args.check:
        return fits(out, args.limit_mib) or whole(out)
    rel = travelling(out)
    if make_out(out):
        return 1
    calls = write(download(args.python, out / "wheels" / args.python), out, args.limit_mib, args.python)
    if fits(out, args.limit_mib):
        return 1
    for k, files in enumerate(calls, 1):  # the last one runs; those before only carry, to a machine kept warm
        command = f"PACK={rel} bash tools/gpu_run.sh" if k == len(calls) else "true"
        print(f'run(command="{command}", carry=[{", ".join(f"{chr(34)}{rel}/{f.name}{chr(34)}" for f in files)}])')
    return 0


if __name__ == "__main__":
    exit_on_signals("run it again to finish.")
    sys.exit(main())
