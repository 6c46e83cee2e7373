"""A pack tools/gpu_pack.py wrote, read: whether each call carries it beside the working tree and its archives are
whole (``gpu_pack.py --check``, which gpu_run.sh runs before it unpacks: the tree grows after packing, and an archive
cut short, that no xz stream ends, is refused too), and unpacked (``gpu_pack.py --unpack FOLDER``).

The unpack checks the same first, then unpacks the archives into ``FOLDER``, new or empty (gpu_run.sh's fresh one),
on the Python the pack is for: nothing but plain files and folders, all in its ``site/``; a failure leaves ``FOLDER``
as it was (or not there, with no parent it made), and one in or under an immutable or append-only folder is refused
first. Ctrl-C, SIGTERM or SIGHUP stops it in one line (``byoc_workbench_cli``), ``FOLDER`` as it was too.
In the standard library alone, as all of gpu_pack. A library, whose commands are gpu_pack.py's: run, it says so.
"""

from __future__ import annotations

import errno
import functools
import lzma
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from gpu_check_args import resists  # noqa: E402

MIB = 1 << 20
PARTS = ("tvm-libs.tar.xz", "site.tar.xz")
FOR_PYTHON = ".packed-for-python"  # site.tar.xz's first file: the Python (X.Y) the wheels are for


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


def fits(out: Path, limit_mib: float) -> int:
    """0 where each call carries, beside the working tree, at most ``limit_mib`` (one line says so, with the
    headroom), else 1 and one line saying why: checked when packing and again before a run, since the tree
    grows. The files are the pieces found, else the whole archives."""
    found = pieces(out)
    have = [p.suffix[1:] for p in found]
    if have != [f"{k}of{len(found)}" for k in range(1, len(found) + 1)]:  # 1 to N of one N, N those found
        fix = "carry every piece of the cut tools/gpu_pack.py printed last, and remove the others"
        return refused(f"{out} holds the pieces {', '.join(have)} of {PARTS[0]}, not those of one cut", fix)
    calls = [[p] for p in found[:-1]] + [[found[-1], out / PARTS[1]]] if found else [[out / name for name in PARTS]]
    tree = tree_bytes()
    for k, files in enumerate(calls, 1):
        for part in files:
            if not part.is_file():
                said = f"is {kind_of(part)}, not an archive" if part.exists() else "is missing"
                return refused(f"{part} {said}", "run tools/gpu_pack.py and carry what it prints")
        sizes = {p.name: p.stat().st_size for p in files} | {"working tree": tree}
        total = sum(sizes.values())
        said = ", ".join(f"{name} {size / MIB:.1f}" for name, size in sizes.items())
        if total > limit_mib * MIB:
            fix = "run tools/gpu_pack.py again (it cuts the pack to fit), or shrink what the tree ships"
            return refused(f"call {k} would carry {total / MIB:.1f} MiB ({said}), over {limit_mib:g} MiB", fix)
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
            return refused(said, "run tools/gpu_pack.py again and carry what it prints")
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
        return refused(f"--unpack {into} is a link to {os.readlink(into)}, not a folder", fix)
    if into.exists() and not into.is_dir():
        return refused(f"--unpack {into} is {kind_of(into)}, not a folder", fix)
    if into.is_dir() and any(into.iterdir()):
        return refused(f"--unpack {into} holds files already, which the unpack would write over", fix)
    top = next(p for p in (into, *into.parents) if os.path.lexists(p.parent))  # the first folder to make, or into
    base = into if into.exists() else top.parent  # where a failed unpack removes what it made
    if stuck := resists(base):
        where = "is" if base == into else f"would be made in {base}, which is"
        why = f"--unpack {into} {where} {stuck}, so what a failed unpack made there could not be removed"
        return refused(why, f"run chattr -i -a {base}, or {fix}")
    if fits(out, limit_mib) or whole(out, True) or _other_python(out, dest):
        return 1
    made, done = not into.exists(), False
    try:
        into.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        if made and top.is_dir():  # its parents, made before it failed
            _remove(top)
        cannot = f"cannot make --unpack {into} ({err.strerror})", "pass a folder you can write in"
        return refused(*(_no_space(err, into, dest) or cannot))
    try:
        why, fix = _extract(out, into, dest)
        why = why or _not_site(out, into)
        done = not why
    finally:
        if not done:  # a failure or a signal: all that is there is what this unpack made, its parents too
            for path in [top] if made else list(into.iterdir()):
                _remove(path)
    return refused(why, fix or "run tools/gpu_pack.py again and carry what it prints") if why else 0


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
        return refused(why, "run tools/gpu_pack.py again and carry what it prints")
    packed, here = (int(found[1]), int(found[2])), sys.version_info[:2]
    if packed == here:
        return 0
    named, here = ".".join(map(str, packed)), ".".join(map(str, here))
    why = f"the pack in {out} holds TVM for Python {named}, and {sys.executable} is Python {here}"
    fix = f"pack for this one: tools/gpu_pack.py --python {here}, and carry what it prints"
    use = f"pass PY=<a Python {named}> (e.g. PY=python{named}), or " if dest else f"run it with a Python {named}, or "
    return refused(why, fix if packed < (3, 10) else use + fix)  # gpu_run.sh runs on 3.10 or later alone


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


def refused(why: str, fix: str) -> int:
    """1, once ``why`` and its ``fix`` are said in the workbench's one line."""
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


def kind_of(path: Path) -> str:
    """What is at ``path``: a folder, a file, a FIFO, a socket or a device."""
    kinds = {"a folder": path.is_dir, "a file": path.is_file, "a FIFO": path.is_fifo, "a socket": path.is_socket}
    return next((kind for kind, test in kinds.items() if test()), "a device")


if __name__ == "__main__":  # a library: run, it names gpu_pack.py's commands (an exit 0 read as "the pack is whole")
    print(
        "error: tools/gpu_unpack.py is no command: tools/gpu_pack.py reads a pack with it. Fix: run "
        "tools/gpu_pack.py --check, or tools/gpu_pack.py --unpack FOLDER, with --out the pack's folder.",
        file=sys.stderr,
    )
    sys.exit(2)
