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
call would carry, and ``--unpack FOLDER`` unpacks the pack there (gpu_run.sh runs it): both read it as
:mod:`gpu_unpack` does. Ctrl-C, SIGTERM or SIGHUP (a closed terminal or ssh session) stops any of them in one line,
exit 130, 143 or 129, what it made removed.
"""

from __future__ import annotations

import argparse
import contextlib
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from gpu_check_args import held, resists  # noqa: E402
from gpu_unpack import FOR_PYTHON, MIB, PARTS, fits, kind_of, pieces, refused, tree_bytes, unpack, whole  # noqa: E402

from byoc_workbench_cli import exit_on_signals  # noqa: E402  (the standard library alone, as is all of this)

SPARE_MIB = 1.0  # room each call leaves for the tree to grow between packing and running
WHEELS = ("apache-tvm==0.27.0.post1", "apache-tvm-ffi==0.1.15.post2")
# Headers for CUTLASS, C++ sources, the wasm runtime, and the sources tvm-ffi builds its backtraces from.
LEFT_OUT = ("tvm/3rdparty/", "tvm/web/", "tvm/src/", "tvm_ffi/3rdparty/libbacktrace/")
# The x86 filter turns relative calls absolute, so that machine code repeats more and xz packs it tighter.
X86 = [{"id": lzma.FILTER_X86}, {"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME}]


def download(python: str, into: Path) -> list:
    """TVM's two wheels for ``python`` (e.g. 3.12) on x86-64 Linux, from the package index (kept in ``into``); a
    failure is one line, the folders made for them removed."""
    if stray := next((p for p in (into.parent, into) if os.path.lexists(p) and not p.is_dir()), None):
        raise SystemExit(refused(f"{stray} is not a folder, yet the wheels go there", "move it, or pass other --out"))
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
        raise SystemExit(refused(f"{why} ({said})", "check the index is reachable, and pass a --python they are for"))
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
            return refused(why, fix)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        return refused(f"cannot make --out {out} ({err.strerror})", "pass a folder under build/ you can write in")
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
        return refused(f"--out {out} is {kind_of(out)}, not a folder", "pass the folder tools/gpu_pack.py wrote")
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
