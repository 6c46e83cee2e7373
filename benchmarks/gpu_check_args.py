"""What benchmarks/gpu_check.py is given, checked before anything is built: its arguments (each wrong one is one
line), its ``--out``, written whole, recorded beside it, and never put over what a user had (a model, a JSON of
their own, a device, an immutable file, the record itself).

Run as ``python benchmarks/gpu_check_args.py ARGS``, it parses gpu_check.py's ARGS as tools/gpu_run.sh takes them and
runs nothing: gpu_run.sh does, before its unpack. Each refusal names gpu_run.sh's help, and an ``--out`` among them is
refused (gpu_run.sh sets it: the JSON goes where its ``OUT`` says).

The workbench's own ``core.files`` and ``core.output_paths`` do the same for its commands; they import numpy and
TVM, which a bare GPU machine may lack, so the check keeps this copy in the standard library alone, in the
workbench's record format (``output_paths.WRITTEN``), so that either proves to the other what it wrote.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import errno
import fcntl
import hashlib
import json
import os
import shlex
import signal
import stat
import sys
import tempfile
from pathlib import Path


def check_out(out: str | None) -> None:
    """Refuse, in one line, an ``--out`` that cannot be written, before anything is built: the JSON is first
    written after the first build, minutes in."""
    if out is None:
        return
    path = Path(out).resolve()  # through a link, to what it names: the JSON replaces that, never the link
    fix = "pass a file path in a folder you can write"
    if not out:
        why = "is empty"
    elif back := _no_way_back(out):
        why, fix = back
    elif long := _too_long(path):  # its temporary's name, found now rather than when the first JSON is written
        why, fix = long
    elif nowhere := _no_place(out, path):
        why, fix = nowhere
    elif path.is_dir():
        why, fix = "is a folder", f"pass a file in it, as --out {path / 'gpu_check.json'}"
    elif path.exists() and not path.is_file():  # the JSON is moved into place: it would replace a device or FIFO
        why = "is not a regular file (a device, a FIFO or a socket)"
    elif odd := _not_plain(path.parent / WRITTEN):  # the record is replaced beside the JSON, never a link of yours
        why = f"is in {path.parent}, which holds {WRITTEN} as {odd}, where the record of what it wrote goes"
        fix = f"remove or rename {path.parent / WRITTEN}, or pass another --out"
    elif path.is_file() and not _earlier_json(path):  # this script, a model, your own JSON with its keys
        why = f"is not an earlier GPU check's JSON ({WRITTEN} beside it does not record it): it would be replaced"
        fix = f"pass another --out, or move {out} away first"
    elif stuck := [f for f in (path, path.parent / WRITTEN) if resists(f)]:  # found now, not after the builds
        why = f"cannot be replaced: {stuck[0]} is {resists(stuck[0])}"
        fix = f"run chattr -i -a {stuck[0]}, or pass another --out"
    elif unfit := _no_folder(path):
        why, fix = unfit
    else:
        return
    raise SystemExit(" ".join(f"error: --out {out} {why}. Fix: {fix}.".split()))


def _no_folder(path: Path) -> tuple | None:
    """``(why, fix)`` where the JSON cannot be put in ``path``'s folder (written beside it, then renamed); else None."""
    folder, fix = path.parent, "pass a file path in a folder you can write"
    if not folder.is_dir():
        return f"is in {folder}, which {'is not a folder' if folder.exists() else 'does not exist'}", fix
    if kind := resists(folder):  # a file can be made there, never renamed: found now, not after the builds
        why = f"is in {folder}, which is {kind}, so no file in it can be renamed, as putting the JSON in place does"
        return why, f"run chattr -i -a {folder}, or pass another --out"
    try:  # a file made there and removed, as the JSON's temporary: os.access says yes to root, even in /sys
        with held(), _beside(path, b""):
            pass
    except OSError as err:
        return f"is in {folder}, in which no file can be made ({err.strerror})", fix
    return None


def _no_way_back(out: str) -> tuple | None:
    """``(why, fix)`` where ``out`` goes back with ``..`` out of a folder that is not there (``x/../y.json`` without
    ``x``): resolving it drops ``x`` unchecked, and the JSON went to ``y.json``, where no check looked; else None.
    The workbench's ``output_paths._no_way_back``, which imports TVM."""
    parts = Path(out).parts
    for k, part in enumerate(parts):
        if part == ".." and k and not Path(*parts[:k]).is_dir():
            folder = Path(*parts[:k])
            why = f"goes back out of {folder} with '..', but there is no folder {folder}"
            return why, f"write the path without {parts[k - 1]}/.., or make the folder {folder} first"
    return None


#: The name :func:`write_recorded` writes ``path`` as first: ``mkstemp``'s ``.<name>.<eight letters>.part``.
TEMPORARY = ".{}.XXXXXXXX.part"


def _too_long(path: Path) -> tuple | None:
    """``(why, fix)`` where a name still to be made for ``path`` is longer than its file system takes (``NAME_MAX``):
    a missing folder's, or the :data:`TEMPORARY` the JSON is written as first; else None."""
    if os.path.isdir(path):  # / among them, which has no parent: check_out says it is a folder
        return None
    base = next(p for p in path.parents if os.path.isdir(p))  # the root, at least
    try:
        most = os.pathconf(base, "PC_NAME_MAX")
    except OSError:  # no answer: the write itself says the rest
        return None
    extra = len(TEMPORARY) - 2
    *folders, name = (len(os.fsencode(part)) for part in path.relative_to(base).parts)
    over = f"over the {most} bytes a name may take in {base}"
    if any(size > most for size in folders):
        why = f"has a folder name {over}"
    elif name + extra > most:
        why = f"has a name of {name} bytes, {name + extra} as {TEMPORARY.format('<name>')}, its temporary: {over}"
    else:
        return None
    return why, f"pass an --out whose names take at most {most - extra} bytes each"


def _no_place(out: str, path: Path) -> tuple | None:
    """``(why, fix)`` where ``out`` (``path``, resolved) is no place for the JSON: ``-`` (there is no stdout to
    name: a file named - was written), a folder's name where no folder is (``new/``: :meth:`Path.resolve` drops the
    ``/``, and a file ``new`` was written), :data:`WRITTEN` (or a link to one), which :func:`record` writes over the
    JSON, or a link that leads nowhere; else None."""
    if out == "-":
        why = "names no file: the JSON is printed on stdout anyway, and --out names a file it also goes to"
        return why, "leave --out out for the JSON on stdout alone, or pass a file path, as --out gpu_check.json"
    if os.path.basename(out) in ("", ".", "..") and not path.is_dir():
        if path.exists():
            return f"names a folder, and {path} is no folder", "pass a file path in a folder you can write"
        fix = f"mkdir -p {path}, then pass a file in it, as --out {path / 'gpu_check.json'}"
        return f"names a folder, and {path} does not exist", fix
    if WRITTEN in (Path(out).name, path.name):
        why = f"is {WRITTEN} (or a link to one), the record kept beside each result: it would be written over the JSON"
        return why, "pass --out a path with another name"
    if Path(out).is_symlink() and not path.exists():
        return "is a link that leads nowhere (a loop, or a missing target)", "remove the link, or pass another --out"
    return None


def _not_plain(path: Path) -> str:
    """What ``path`` is where it is no plain file nor missing (``"a link to X"``, ``"a folder"``, ``"a FIFO"``...),
    else ``""``."""
    if path.is_symlink():
        return f"a link to {os.readlink(path)}"
    if path.is_dir():
        return "a folder"
    if not path.exists() or path.is_file():
        return ""
    return "a FIFO" if path.is_fifo() else "a socket" if path.is_socket() else "a device"


@contextlib.contextmanager
def _beside(path: Path, data: bytes):
    """The path of a temporary of its own beside ``path`` (never a name the user may have), ``data`` written to it
    whole, with the permissions a plain ``open`` gives; removed at the block's end unless it was renamed: as the
    workbench's ``files.write_atomic``, which imports numpy and TVM, missing here until gpu_check knows they are
    there."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's file is its owner's alone
        yield tmp
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def write_recorded(path: Path, text: str, placed=lambda: None) -> None:
    """``text`` put at ``path`` and recorded in the file :data:`WRITTEN` beside it, in the workbench's form
    (``output_paths.WRITTEN``), which proves to a later run that it may replace it. Both are written whole to
    temporaries first, then renamed into place with Ctrl-C and SIGTERM held until ``placed()`` is done too: a
    failure (a full disk) or a signal leaves the earlier JSON and its record as they were, never one without the
    other."""
    data = text.encode()
    entries = _record(path.parent) | {path.name: _fingerprint(data)}
    said = (json.dumps(dict(sorted(entries.items())), indent=0) + "\n").encode()
    with _beside(path, data) as json_tmp, _beside(path.parent / WRITTEN, said) as record_tmp, held():
        os.replace(json_tmp, path)
        os.replace(record_tmp, path.parent / WRITTEN)
        placed()


def write_out(out: Path, text: str, written: list, earlier: bool) -> None:
    """``text`` put at ``out`` with its record (:func:`write_recorded`), ``out`` added to ``written`` in the same step
    for a signal; a failure (a full disk) is one line saying what ``out`` still holds: what this run put there
    before, the earlier run's JSON (``earlier``), or nothing."""
    try:
        write_recorded(out, text, placed=lambda: written.append(out))
    except OSError as err:  # a full disk or quota, a folder made read-only meanwhile: the path said whole
        space = err.errno in (errno.ENOSPC, errno.EDQUOT)
        fix = f"free some space in {out.parent}, or pass another --out" if space else "pass another --out"
        holds = "what this run measured before" if written else "the earlier run's JSON" if earlier else ""
        why = f"cannot write --out {out} ({err.strerror})" + (f"; it holds {holds}" if holds else "")
        raise SystemExit(f"error: {why}. Fix: {fix}.") from None


def whole_json(path: Path) -> bool:
    """Whether ``path`` holds a JSON of a run that went to its end, which no partial one replaces: not one that says
    ``"complete": false`` (a run cut short); one written before that key counts as whole."""
    try:
        return json.loads(path.read_text()).get("complete") is not False
    except (OSError, ValueError, AttributeError):  # missing, no JSON, or no dict
        return False


@contextlib.contextmanager
def held():
    """Ctrl-C, SIGTERM and SIGHUP wait for the block's end (their handlers run then), so that files put in place
    together are one step for a signal: the workbench's ``files._held``. Handlers are swapped, not the signals masked:
    any thread of a library may take a signal, and the handler runs in the main thread anyway."""
    came = []
    waiting = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    old = {sig: signal.signal(sig, lambda signum, _: came.append(signum)) for sig in waiting}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        for signum in dict.fromkeys(came):
            signal.raise_signal(signum)


def _earlier_json(path: Path) -> bool:
    """Whether ``path`` holds a JSON this script wrote (its ``models`` and ``missing``), as it wrote it: its
    folder's :data:`WRITTEN` records it; keys alone prove nothing."""
    try:
        found = json.loads(path.read_text())
        proven = _record(path.parent).get(path.name) == _fingerprint(path.read_bytes())
    except (OSError, ValueError):
        return False
    return proven and isinstance(found, dict) and {"models", "missing"} <= set(found)


#: What the workbench's ``output_paths`` keeps in a folder (it cannot be imported before TVM is known to be here):
#: each result written there, by name, as ``"<size> <sha256 hex>"``.
WRITTEN = ".byoc-workbench-wrote"


def _fingerprint(data: bytes) -> str:
    return f"{len(data)} {hashlib.sha256(data).hexdigest()}"


def _record(folder: Path) -> dict:
    """``folder``'s :data:`WRITTEN`, name to fingerprint: nothing when missing, damaged, a link or no plain file."""
    record = folder / WRITTEN
    try:
        if record.is_symlink() or not record.is_file() or record.stat().st_size > 1 << 20:
            return {}
        entries = json.loads(record.read_text())
    except (OSError, ValueError):
        return {}
    return entries if isinstance(entries, dict) else {}


#: Linux's FS_IOC_GETFLAGS, and the flags by which even root cannot replace a file (chattr +i, chattr +a).
GETFLAGS, FLAGS = 0x80086601, {0x10: "immutable", 0x20: "append-only"}


def resists(path: Path) -> str:
    """``"immutable"`` or ``"append-only"`` for a plain file that cannot be replaced, or a folder whose files
    cannot be, else ``""`` (also where a file system or a system has no such flags)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)  # never waits, nor follows a link
    except OSError:
        return ""
    try:
        flags = int.from_bytes(fcntl.ioctl(fd, GETFLAGS, bytes(8)), sys.byteorder)
    except OSError:
        return ""
    finally:
        os.close(fd)
    return next((kind for bit, kind in FLAGS.items() if flags & bit), "")


def stuck_under(folder) -> str:
    """``"<path> is immutable"`` (or append-only) for the first of ``folder`` and the files and folders in it (links
    not followed) that :func:`resists`: what would stop it being moved aside and removed; else ``""``."""
    for top, _, files in os.walk(folder):
        for path in (top, *(os.path.join(top, name) for name in files)):
            if stat.S_ISREG(os.lstat(path).st_mode) or path == top:  # never opens a FIFO or a device
                if kind := resists(path):
                    return f"{path} is {kind}"
    return ""


class Parser(argparse.ArgumentParser):
    """argparse, with a refusal in one line like every other of this script."""

    def error(self, message: str):
        raise SystemExit(f"error: {message}. Fix: see `{self.prog} --help`.")


def count(lo: int):
    """An argparse type: a whole number, ``lo`` or more (the workbench's own, ``cli.args.count``, imports TVM)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = lo - 1
        if value < lo:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number, {lo} or more")
        return value

    return parse


def target(text: str) -> str | dict:
    """An argparse type: ``--target`` as text (``cuda``, ``llvm``, ``cuda -arch=sm_90``) or as TVM 0.27's dict, in
    JSON (``{"kind": "cuda", "arch": "sm_90"}``); the workbench checks either before anything is built."""
    if not text.lstrip().startswith("{"):
        return text
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"{text!r} is not JSON ({err.msg})") from None
    if not isinstance(spec, dict) or not isinstance(spec.get("kind"), str):
        raise argparse.ArgumentTypeError(f"{text!r} names no kind")
    return spec


def target_kind(target: str | dict) -> str:
    """``cuda``, ``llvm``: the kind of a ``--target`` ("" for text that cannot be read)."""
    if isinstance(target, dict):
        return target["kind"]
    try:
        return "".join(_split(target)[:1])
    except ValueError:
        return ""


def _split(text: str) -> list:
    """A text ``--target`` in words, as ``core.targets`` reads it: split as a shell splits it (quotes group a host
    with its options: ``-host='llvm -mcpu=znver3'``), text quoted whole read as what its quotes hold; ValueError for
    a quote left open."""
    words = shlex.split(text)
    return _split(words[0]) if len(words) == 1 and len(words[0].split()) > 1 else words


def target_words(target: str | dict) -> str:
    """``llvm -mcpu=znver3``: a ``--target`` as its text, options included, a dict's too (its label in the JSON)."""
    if isinstance(target, str):
        return " ".join(target.split())
    said = {k: ",".join(map(str, v)) if isinstance(v, list) else v for k, v in target.items() if k != "kind"}
    return " ".join([target["kind"], *(f"-{k}={v}" for k, v in said.items())])


#: What the workbench builds for, and its fix for a target it cannot read (``core.targets``, which imports TVM).
TARGET_KINDS = ("llvm", "cuda")
TARGET_FIX = (
    "name 'llvm' (the CPU) or 'cuda' (an NVIDIA GPU), as text ('cuda -arch=sm_90') or a dict "
    "({'kind': 'cuda', 'arch': 'sm_90'})"
)


def check_target(target: str | dict) -> None:
    """Refuse in one line, as gpu_check says it once TVM is there, what is wrong with a ``--target`` without TVM to
    tell, before gpu_run.sh's unpack: text that cannot be read (a quote left open, an option not ``-key=value`` or
    given twice, as ``core.targets`` reads it) or a kind the workbench does not build for. The rest (an arch, a CPU,
    an option TVM does not have) needs TVM: gpu_check checks it once TVM loads, before anything is built."""
    why, fix, words = "", TARGET_FIX, []
    try:
        words = _split(target) if isinstance(target, str) else []
    except ValueError as err:  # "No closing quotation"
        why, fix = (
            f"Cannot read the target {target!r}: {str(err).lower()}",
            "close each quote, or leave quotes and \\ out",
        )
    if not why and target_kind(target) not in TARGET_KINDS:
        why = f"Unknown TVM target {target!r}"
    if not why:
        why, fix = _unread_option(target, words[1:])
    if why:
        raise SystemExit(f"error: --target {target}: {why}. Fix: {fix}.")


def _unread_option(target: str, options: list) -> tuple:
    """``(why, fix)`` for an option of a text ``--target`` that cannot be read, else ``("", "")``."""
    seen = set()
    for option in options:
        key, eq, value = option.removeprefix("-").partition("=")
        if not (option.startswith("-") and key and eq and value) or key.startswith("-"):
            return f"Cannot read the option {option!r} of the target {target!r}", TARGET_FIX
        if key in seen:
            return f"The target {target!r} gives -{key} twice", f"give -{key} once"
        seen.add(key)
    return "", ""


#: The models the check measures where ``--models`` does not say.
DEFAULT_MODELS = "ssd_512_resnet50_v1_coco,resnet50,demo"
#: The zoo's models, shipped with the seeded weights the check regenerates (``data/zoo/<name>.seed0.npz.xz``).
ZOO = Path(__file__).resolve().parents[1] / "byoc_workbench" / "data" / "zoo"


def known_models() -> list:
    """The names ``--models`` takes: ``demo``, ``resnet50`` (torchvision's) and each zoo model the workbench lists,
    found by its seeded weights in the shipped zoo (the zoo's own list imports TVM, which the dry parse has not)."""
    return ["demo", "resnet50", *sorted(p.name.partition(".seed0.")[0] for p in ZOO.glob("*.seed0.npz.xz"))]


def models(text: str) -> list:
    """``--models``, comma-separated, as a list of names (each once): one that is no model the check measures is
    refused in one line before anything is measured, not said only in the JSON."""
    known = known_models()
    names = list(dict.fromkeys(name.strip() for name in text.split(",")))
    for name in names:
        if name not in known:
            near = difflib.get_close_matches(name, known, n=1)
            why = f"{name!r} is not a model the check measures" + (f" (did you mean {near[0]}?)" if near else "")
            raise SystemExit(f"error: --models {text}: {why}. Fix: name some of {', '.join(known)}, comma-separated.")
    return names


class _SetByGpuRun(argparse.Action):
    """``--out`` (or an abbreviation of it, with a value or not) given to tools/gpu_run.sh, which sets it itself."""

    def __call__(self, parser, namespace, values, option_string=None):
        raise SystemExit(
            "error: --out is not for tools/gpu_run.sh, which writes the JSON to $OUT/gpu_check.json."
            " Fix: pass OUT=<a folder> to gpu_run.sh instead of --out."
        )


def arguments(argv=None, description: str = "", gpu_run: bool = False) -> argparse.Namespace:
    """gpu_check.py's arguments (``argv``, else the command line's), each wrong one refused in one line; ``models``
    a list of names. ``gpu_run``: they were given to tools/gpu_run.sh, whose help each refusal names, and which
    sets ``--out`` itself (refused, and left out of its help)."""
    parser = Parser(prog="bash tools/gpu_run.sh" if gpu_run else "gpu_check.py", description=description)
    parser.add_argument("--models", default=DEFAULT_MODELS, help=f"comma-separated (default {DEFAULT_MODELS})")
    parser.add_argument("--runs", type=count(1), default=20)
    parser.add_argument("--warmup", type=count(0), default=3)
    parser.add_argument(
        "--target", type=target, default="cuda", help="cuda (this GPU), or llvm: the same on the CPU; text or a dict"
    )
    if gpu_run:
        parser.add_argument("--out", nargs="?", action=_SetByGpuRun, help=argparse.SUPPRESS)
    else:
        parser.add_argument("--out", type=os.path.expanduser, help="also write the JSON to this file (~ expanded)")
    args = parser.parse_args(argv)
    args.models = models(args.models)
    check_target(args.target)
    return args


if __name__ == "__main__":
    arguments(gpu_run=True)
