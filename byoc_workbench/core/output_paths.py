"""Output paths checked before any work starts: a bad path (empty, ``-``, a file where a directory is meant, a
directory where a file is meant, not writable, under a link that leads nowhere, an input of the command, something
the workbench did not write, the name of its record) is refused in one line in a second, not after a model build.

:data:`WRITTEN` records, in a folder, each result the workbench wrote there by its size and SHA-256: what a later
run may replace, and only while it is still that file.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from byoc_workbench.core import streams
from byoc_workbench.core.errors import WorkbenchError


def _given(path, flag: str, example: str) -> Path:
    if path is None or not str(path).strip():
        raise WorkbenchError(f"{flag} is empty", f"pass {flag} a path, e.g. {flag} {example}")
    out = expand(path, flag)
    _not_the_record(out, flag)
    _no_way_back(out, flag)
    return out


def _no_way_back(out: Path, flag: str) -> None:
    """Refuse a ``..`` out of a folder that does not exist (``sub/../x`` without ``sub``): no check can follow it now,
    and making ``sub`` to follow it later would leave ``sub`` behind, and put the result where no check looked (over
    the file the shell opened for stdout, ``> x``)."""
    parts = out.parts
    for k, part in enumerate(parts):
        if part == ".." and k and not Path(*parts[:k]).is_dir():
            folder = Path(*parts[:k])
            raise WorkbenchError(
                f"{flag} {out} goes back out of {folder} with '..', but there is no folder {folder}",
                f"write the path without {parts[k - 1]}/.., or make the folder {folder} first",
            )


def _not_the_record(out: Path, flag: str) -> None:
    """Refuse an output named :data:`WRITTEN`: the record written beside a result would be written over it."""
    if out.name == WRITTEN:
        raise WorkbenchError(
            f"{flag} {out} is named {WRITTEN}, the record the workbench keeps beside its results: it would be"
            " written over the result",
            f"pass {flag} a path with another name",
        )


def expand(path, what: str) -> Path:
    """``path`` with ``~`` or ``~user`` expanded, or a one-line error naming ``what`` when there is no such user."""
    try:
        return Path(path).expanduser()
    except RuntimeError:  # pathlib's "Could not determine home directory."
        raise WorkbenchError(
            f"{what} {path}: there is no home directory for {str(path).split(os.sep)[0]}",
            f"write the path without {str(path).split(os.sep)[0]}, or with ~ for your own home",
        ) from None


def existing_ancestor(path: Path) -> Path:
    """The nearest ancestor of ``path`` that exists (``path`` itself when it does), or a link on the way that leads
    nowhere (a missing target, a loop): no folder can be made under that."""
    for p in (path, *path.absolute().parents):
        if p.exists() or p.is_symlink():
            return p
    return Path("/")


def kind_of(path: Path) -> str:
    """What ``path`` is, in words, when it is not a directory."""
    if path.is_fifo():
        return "a FIFO"
    if path.is_socket():
        return "a socket"
    return "a file" if path.is_file() else "a device"


def not_a_file(path: Path) -> str:
    """How an input ``path`` that is no regular file is said: "does not exist", "is a directory", "is a FIFO, not
    a regular file" (never "does not exist" for a FIFO or a device that does)."""
    if path.is_dir():
        return "is a directory"
    return f"is {kind_of(path)}, not a regular file" if path.exists() else "does not exist"


#: The temporary name under which the workbench writes a result (a file, or a directory's set) before it renames it
#: into place: ``.<name>.<tempfile's eight letters>.part`` (:func:`~byoc_workbench.core.files.write_with`,
#: :func:`~byoc_workbench.core.files.staged`).
TEMPORARY = ".{}.XXXXXXXX.part"


def _fits(path: Path, flag: str, names=()) -> None:
    """Refuse ``path`` where a name the workbench will make for it is longer than its file system takes (its
    ``NAME_MAX``): a folder still to make, or the temporary of ``path`` or of one of ``names`` in it
    (:data:`TEMPORARY`), found now rather than when the result is put in place, after the work."""
    full = path.absolute()
    base = next((p for p in full.parents if os.path.isdir(p)), None)  # None only for the root itself
    try:
        most = os.pathconf(base, "PC_NAME_MAX")
    except (AttributeError, OSError, TypeError, ValueError):  # no base, no pathconf (Windows), or no answer
        return  # the write itself says the rest
    made = [(n, n) for n in full.relative_to(base).parts[:-1]] + [(n, TEMPORARY.format(n)) for n in (path.name, *names)]
    for name, longest in made:
        size, extra = len(os.fsencode(name)), len(os.fsencode(longest)) - len(os.fsencode(name))
        if size + extra > most:
            temporary = (
                f", {extra} more as {TEMPORARY.format('<name>')}, the temporary it is written as first" if extra else ""
            )
            raise WorkbenchError(
                f"{flag}: the name {name} is {size} bytes{temporary}, over the {most} bytes a name may take in {base}",
                f"pass {flag} a path whose names take at most {most - extra} bytes each",
            )


def _probe(directory: Path, what: str, fix: str, wanted: Path | None = None) -> None:
    """A one-line error unless a file can be created in ``directory``, the nearest existing folder of ``wanted``
    (:func:`existing_ancestor`)."""
    if directory.is_symlink() and not directory.exists():
        _leads_nowhere(directory, what, fix)
    if not directory.is_dir():
        raise WorkbenchError(f"{what}: {directory} is {kind_of(directory)}, not a directory", fix)
    try:
        tempfile.TemporaryFile(dir=directory).close()
    except OSError as err:
        shown = f"{directory.absolute()} (the current directory)" if str(directory) == "." else f"{directory}"
        where = shown if wanted in (None, directory) else f"{wanted}: {shown} cannot be written"
        raise WorkbenchError(f"Cannot write to {where} ({err.strerror or err})", fix) from None


def _leads_nowhere(link: Path, what: str, fix: str) -> None:
    """The one-line error for an output at or under ``link``, a link to a missing folder or in a loop of links:
    found now, not when the result's folder is made, after the work."""
    try:
        link.stat()
        looped = False
    except OSError as err:
        looped = err.errno == errno.ELOOP
    said = f"{what}: {link} is a link to {os.readlink(link)}"
    if looped:
        raise WorkbenchError(f"{said}, in a loop of links", f"remove the link {link}, or {fix}")
    raise WorkbenchError(f"{said}, which does not exist", f"make that folder first, remove the link, or {fix}")


def check_dir(path, flag: str = "--out", names=(), inputs=(), replaces: re.Pattern | None = None) -> Path:
    """``path`` checked as an output directory that will hold the files ``names``; ``inputs`` are the paths the
    command reads, which none of ``names`` may be; nor a link to a file, nor a file the workbench did not write.
    ``replaces`` as for :func:`earlier`: those files too must be removable.

    Nothing is created: a missing directory is made when its files are put in
    place (:func:`staged`), so a refused or interrupted command leaves none.

    Raises
    ------
    WorkbenchError
        For an empty path, ``-``, a file at ``path`` or at one of its parents, a link there that leads nowhere, a
        directory that cannot be written, the name :data:`WRITTEN`, or anything but a plain file the workbench
        wrote (a directory, a link, a file of yours, an immutable one) in the way of one of ``names``.
    """
    out = _given(path, flag, "out")
    fix = f"pass {flag} a directory you can write to"
    if str(path).strip() == "-":
        raise WorkbenchError(
            f"{flag} - would be a directory named '-', not the terminal", f"{fix}; results print anyway"
        )
    _fits(out, flag, names)
    if out.exists() and not out.is_dir():
        raise WorkbenchError(f"{flag} {out} is {kind_of(out)}, not a directory", fix)
    base = existing_ancestor(out)
    _probe(base, f"{flag} {out}", fix, out)
    _renames_in(base, f"{flag} {out}", fix)  # the set is written in a temporary folder there, then moved
    for name in names:  # first: a link to an input is said as one, not as a link
        _not_an_input(out / name, flag, inputs)
    for name in (WRITTEN, *names) if names else ():
        _a_plain_file_or_nothing(out, name, flag)
        _replaceable(out / name, flag)
    for name in names:
        _not_theirs(out, name, flag)
    for f in earlier(out, replaces, names) if replaces else ():
        _replaceable(f, flag)
    return out


def _a_plain_file_or_nothing(out: Path, name: str, flag: str) -> None:
    """Refuse ``out / name`` unless it is missing or a plain file: the workbench writes only plain files into an
    output directory, never over a directory, never through a link (even one that leads nowhere yet: the new file
    would be outside it), nor into a FIFO, socket or device (found now, not after the work)."""
    f = out / name
    if f.is_dir() and not f.is_symlink():
        raise WorkbenchError(
            f"{flag} {out} holds a directory named {name}, where a file of that name is to be written",
            f"remove or rename {f}, or pass another {flag}",
        )
    if f.is_symlink():
        raise WorkbenchError(
            f"{flag} {out} holds {name} as a link to {os.readlink(f)}: the workbench writes no file through a link",
            f"pass another {flag}, or remove the link {f} first",
        )
    if f.exists() and not f.is_file() and not f.is_dir():
        raise WorkbenchError(
            f"{flag} {out} holds {name} as {kind_of(f)}, where a plain file is to be written",
            f"pass another {flag}, or remove {f} first",
        )


def _not_theirs(out: Path, name: str, flag: str) -> None:
    """Refuse to write ``out / name`` over a file the workbench did not write there (:func:`wrote`)."""
    f = out / name
    if f.is_file() and f.stat().st_size and not wrote(f):
        raise WorkbenchError(
            f"{flag} {out} holds a {name} that the workbench did not write (or that changed since): writing it"
            " would destroy it",
            f"pass another {flag}, or move {f} away first",
        )


#: How a file resists being replaced, even by root (Linux's ``chattr``, macOS's and the BSDs' ``chflags``): a flag
#: of its, what it makes the file, and the command that takes it away.
if sys.platform == "linux":
    import fcntl

    _GETFLAGS = 0x80086601  # FS_IOC_GETFLAGS
    _RESISTS = ((0x10, "immutable", "chattr -i"), (0x20, "append-only", "chattr -a"))
else:
    _RESISTS = (
        (stat.UF_IMMUTABLE, "immutable", "chflags nouchg"),
        (stat.SF_IMMUTABLE, "immutable", "sudo chflags noschg"),
        (stat.UF_APPEND, "append-only", "chflags nouappnd"),
        (stat.SF_APPEND, "append-only", "sudo chflags nosappnd"),
    )


def _flags(f: Path) -> int:
    """``f``'s flags (0 for none, for neither a plain file nor a folder, and where a file system or a system has
    none: Windows)."""
    try:
        st = os.lstat(f)
    except OSError:
        return 0
    if sys.platform != "linux":
        return getattr(st, "st_flags", 0)
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        return 0
    try:
        fd = os.open(f, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)  # never waits, even on a FIFO swapped in
    except OSError:
        return 0  # nothing to read: the probe of its folder and the write say the rest
    try:
        return int.from_bytes(fcntl.ioctl(fd, _GETFLAGS, bytes(8)), sys.byteorder)
    except OSError:
        return 0  # a file system without such flags
    finally:
        os.close(fd)


def resists(path: Path) -> tuple[str, str] | None:
    """How the file or folder ``path`` resists being replaced, or its files renamed or removed, as ``(kind, the
    command that takes it away)``, e.g. ``("append-only", "chattr -a")``; None where it does not."""
    flags = _flags(path.resolve()) if path.is_dir() else _flags(path)
    return next(((kind, undo) for bit, kind, undo in _RESISTS if flags & bit), None)


def _replaceable(f: Path, flag: str) -> None:
    """Refuse a file in the way that cannot be replaced (an immutable or append-only one): found now, before the
    work, not when its result is put in place."""
    if resisting := resists(f):
        kind, undo = resisting
        raise WorkbenchError(
            f"{flag}: {f} is {kind}, so it cannot be replaced", f"run {undo} {f}, or pass another {flag}"
        )


def _renames_in(folder: Path, what: str, fix: str) -> None:
    """Refuse a folder whose files cannot be renamed or removed (an append-only one): a file can be made there,
    so :func:`_probe` passes, but a result is written under a temporary name and then renamed into place, and
    that would fail after the work, leaving the temporary."""
    if folder.is_dir() and (resisting := resists(folder)):
        kind, undo = resisting
        raise WorkbenchError(
            f"{what}: {folder} is {kind}, so no file in it can be renamed or removed, as putting a result in"
            " place does",
            f"run {undo} {folder}, or {fix}",
        )


#: The file in a folder that records each result the workbench wrote there: what a later run may replace.
WRITTEN = ".byoc-workbench-wrote"


def fingerprint(path: Path) -> str:
    """``path``'s size and SHA-256, ``"<size> <hex>"``: what proves a file is the one that was written."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
        size = os.fstat(f.fileno()).st_size
    return f"{size} {h.hexdigest()}"


def _record(folder: Path) -> dict:
    """What :data:`WRITTEN` records in ``folder``, name to :func:`fingerprint`: nothing when it is missing,
    damaged, or no plain file (a FIFO or a link to a device is never opened: reading it could wait for ever)."""
    record = folder / WRITTEN
    if record.is_symlink() or not record.is_file() or record.stat().st_size > 1 << 20:
        return {}
    try:
        entries = json.loads(record.read_text())
    except (OSError, ValueError):
        return {}
    return {n: f for n, f in entries.items() if isinstance(f, str)} if isinstance(entries, dict) else {}


def wrote(path: Path) -> bool:
    """Whether the workbench wrote ``path``, a plain file, as it is now: its folder's :data:`WRITTEN` records its
    name with its size and SHA-256 (a file put later at that name, or copied there with the record, is not)."""
    try:
        return _record(path.parent).get(path.name) == fingerprint(path)
    except OSError:
        return False


def recorded(folder: Path, paths, gone=()) -> str:
    """The text of ``folder``'s :data:`WRITTEN` once ``paths`` (of ``folder``, or to be moved there under their
    names) are put in place and the files named ``gone`` removed: what it records already, less ``gone``, and each
    of ``paths`` that is a file by :func:`fingerprint`."""
    entries = {n: f for n, f in _record(folder).items() if n not in gone}
    entries |= {p.name: fingerprint(p) for p in paths if p.is_file() and p.name != WRITTEN}
    return json.dumps(dict(sorted(entries.items())), indent=0) + "\n"


def earlier(folder: Path, replaces: re.Pattern, names=()) -> list[Path]:
    """The files of ``folder`` left by an earlier set of the same command that a new set of ``names`` replaces
    whole: those whose names ``replaces`` matches (e.g. another ``--format``'s diagrams) and that the workbench
    wrote there, unchanged since (:func:`wrote`), less ``names``. Never a file of yours, even of such a name."""
    return [
        f
        for f in (folder / n for n in sorted(_record(folder)) if n not in names and replaces.fullmatch(n))
        if f.is_file() and not f.is_symlink() and wrote(f)  # a FIFO or a device is never opened: it could wait
    ]


def _not_an_input(out: Path, flag: str, inputs) -> None:
    """Refuse ``out`` when it is one of ``inputs`` by any name (a link, a hard link): a result never overwrites
    what it was made from."""
    for given in inputs:
        if given is not None and str(given).strip() and out.exists() and Path(given).exists():
            if os.path.samefile(out, given):
                raise WorkbenchError(
                    f"{flag} {out} is {given}, which this command reads: writing it would destroy it",
                    f"pass {flag} another path",
                )


def read_paths(args) -> list[str]:
    """The paths a command's arguments name for it to read: the model (or models), ``--image``, ``--weights``."""
    named = [getattr(args, a, None) for a in ("what", "model", "image", "weights")]
    return [p for n in named for p in (n if isinstance(n, list | tuple) else [n]) if isinstance(p, str)]


def check_file(path, flag: str, inputs=(), ours: Callable[[Path], bool] | None = None, example="outputs.npz") -> Path:
    """``path`` checked as an output file, exactly as given (no suffix added), before any work.

    ``inputs`` are the paths the command reads (the model, ``--image``, ``--weights``): a result never
    overwrites what it was made from. ``ours`` tells an earlier result of ``flag`` (:mod:`byoc_workbench.cli.earlier`):
    an existing file is replaced only when it is empty or one (e.g. one the workbench wrote there and nobody changed
    since, :func:`wrote`); never a model, a picture, your notes, your own JSON or ``.npz``. Through a link, its
    target is what is checked, and its target's folder what must be writable.

    Raises
    ------
    WorkbenchError
        For an empty path, ``-``, a ``..`` out of a missing folder, a symlink loop, an existing directory, socket or
        block device, one of ``inputs`` (by any name: a link, a hard link), a file holding something else, an
        immutable or append-only file, a parent that is a file or cannot be written; or a descriptor, device or FIFO
        that cannot be written (:func:`~.streams.check`).
    """
    out = _given(path, flag, "out.npz")
    fix = f"pass {flag} the path of a file in a directory you can write to"
    if str(path).strip() == "-":
        raise WorkbenchError(f"{flag} - would be a file named '-', not the terminal", f"{fix}; results print anyway")
    _fits(out, flag)
    _not_an_input(out, flag, inputs)
    if streams.check(out, flag, example):  # a descriptor, a device or a FIFO: checked by itself, not by its folder
        return out
    if out.is_symlink() and not out.exists():
        raise WorkbenchError(f"{flag} {out} is a link that leads nowhere (a loop, or a missing target)", fix)
    if out.is_dir() or str(path).endswith(os.sep):
        named = "is a directory" if out.is_dir() else f"ends in '{os.sep}', so it names a directory"
        raise WorkbenchError(f"{flag} {path} {named}, not a file", f"pass {flag} {out / example} or so")
    if out.exists() and not out.is_file():
        raise WorkbenchError(f"{flag} {out} is {kind_of(out)}, which cannot hold a result", fix)
    where = out.resolve() if out.is_symlink() and out.is_file() else out  # a link's result goes into its target
    if where != out:  # what is written, and beside what its temporary is made, is the target
        _not_the_record(where, flag)
        _fits(where, flag)
    if ours is not None and where.is_file() and where.stat().st_size and not ours(where):
        raise WorkbenchError(
            f"{flag} {out} holds something else than a result {flag} wrote: writing it would destroy it",
            f"pass {flag} another path, or move {out.name} away first",
        )
    _replaceable(where, flag)
    _a_plain_file_or_nothing(where.parent, WRITTEN, flag)  # a result is recorded beside it: that too is checked
    _replaceable(where.parent / WRITTEN, flag)
    _probe(existing_ancestor(where.parent), f"{flag} {out}", fix, where.parent)
    _renames_in(where.parent, f"{flag} {out}", fix)  # a folder still to make is made without flags
    return out
