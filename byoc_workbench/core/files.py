"""Where results and caches go: files written atomically, cache entries sealed.

Output paths are checked before any work starts, in :mod:`.output_paths`.
Every file the workbench writes, results and cache entries alike, goes through
:func:`write_atomic`: under a temporary name, then renamed into place, so a
failure or a Ctrl-C mid-way leaves the old file or none, never half of it.
:data:`written` records the results put in place, for the CLI's last line.
:func:`cache_dir` is the one place ``$BYOC_WORKBENCH_CACHE`` is read.
"""

from __future__ import annotations

import contextlib
import errno
import io
import logging
import os
import re
import shutil
import signal
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from byoc_workbench.core import output_paths, streams
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.core.streams import OutputError, cannot_write
from byoc_workbench_cli import SIGNALS

logger = logging.getLogger(__name__)

#: Paths put in place by this process, in order, and the :class:`~.streams.Part` of one that a signal stopped on its
#: way into a stream (what an interrupted command says it wrote).
written: list = []

CACHE_ENV = "BYOC_WORKBENCH_CACHE"
DEFAULT_CACHE = "~/.cache/byoc-workbench"


def cache_dir(kind: str) -> Path:
    """Where the workbench keeps ``kind`` (``models``, ``c``, ``search``, ...): ``$BYOC_WORKBENCH_CACHE/<kind>``,
    else ``~/.cache/byoc-workbench/<kind>``. Nothing is created: whoever writes there makes the directory
    (:func:`write_atomic` does)."""
    return _cache_root() / kind


def _cache_root() -> Path:
    """``$BYOC_WORKBENCH_CACHE``, or the default where it is unset or blank (a blank is no folder's name)."""
    given = os.environ.get(CACHE_ENV, "")
    return output_paths.expand(given if given.strip() else DEFAULT_CACHE, CACHE_ENV)


_unkept: set = set()  # the caches that said, once in this process, that they keep nothing


def keep(kind: str, write: Callable[[], object], errors: tuple = (OSError,)) -> bool:
    """Put a cache entry of ``kind`` in place with ``write()``; one that cannot be written (a read-only,
    full or missing cache, a file where its folder should be) keeps nothing and says so once per kind in
    this process, in one warning line, and the work it saved stands. Whether it was kept."""
    try:
        write()
        return True
    except errors as err:
        if kind not in _unkept:
            _unkept.add(kind)
            why = " ".join(str(err).split())[:200]
            logger.warning(
                "%s cache: nothing is kept in %s (%s); it is computed again next time", kind, cache_dir(kind), why
            )
        return False


NO_CACHE_ENV = "BYOC_WORKBENCH_NO_CACHE"
_YES, _NO = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


def no_cache() -> bool:
    """Whether ``$BYOC_WORKBENCH_NO_CACHE`` says to read no cache (``1``/``true``/``yes``; ``0``/``false``/``no``
    or unset: read them); anything else is a one-line error. Every cache asks it: builds, kept runs and
    references, the search's measurements."""
    value = os.environ.get(NO_CACHE_ENV, "").strip().lower()
    if value in _YES:
        return True
    if value in _NO:
        return False
    raise WorkbenchError(
        f"{NO_CACHE_ENV}={os.environ[NO_CACHE_ENV]!r} is neither yes nor no",
        f"set {NO_CACHE_ENV}=1 to read no cache, or unset it (or 0)",
    )


def follow_umask(path, mode: int = 0o666) -> None:
    """Give ``path`` the permissions a plain ``open`` would: ``mode`` less the umask.

    ``tempfile.mkstemp`` makes its files 0600 whatever the umask, so a cache shared by a JupyterHub's seats would
    be readable by one user only.
    """
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, mode & ~umask)


def write_atomic(path, data: bytes | memoryview | str | Callable, placed: Callable[[], object] | None = None) -> Path:
    """Write ``data`` to ``path`` so that a reader sees the old file or the new one, never half of one.

    The data goes to a temporary file beside ``path`` (its directory is made if needed), which is then renamed to
    ``path``. ``data`` is bytes (or bytes-like), text, or a function that writes to the open binary file (e.g.
    ``lambda f: np.savez(f, ...)``). On any failure, a Ctrl-C too, the temporary file is removed and the old file
    stays. The file's permissions follow the umask (:func:`follow_umask`); ``placed`` as for :func:`write_with`.
    """

    def save(name: str) -> None:
        with open(name, "wb") as f:
            _write_to(f, data)

    return write_with(path, save, placed=placed)


def _write_to(f, data: bytes | memoryview | str | Callable) -> None:
    """``data`` into the open binary file ``f``: bytes, text, or a function that writes to it."""
    if callable(data):
        data(f)
    else:
        f.write(data.encode() if isinstance(data, str) else data)


def write_sealed(path, data: bytes | str | Callable) -> Path:
    """A cache entry: written with :func:`write_atomic`, then sealed (:func:`seal`); read it only if :func:`intact`."""
    write_atomic(path, data)
    seal(path)
    return Path(path)


def write_arrays(path, arrays: list) -> Path:
    """Arrays kept in a cache entry: a sealed ``.npz`` (:func:`write_sealed`), read by :func:`read_arrays`."""
    named = {f"a{k}": np.asarray(a) for k, a in enumerate(arrays)}
    return write_sealed(path, lambda f: np.savez(f, **named))


def read_arrays(path, cache: str | None = None) -> list | None:
    """The arrays :func:`write_arrays` kept at ``path``, in order; None when it is missing, or damaged since
    (its seal disagrees, even if it still parses): a cache entry computed again, never an error. With ``cache``
    (``"runs cache"``) a damaged entry is said once, as :func:`trusted` says it; without, its caller says it."""
    if not (trusted(path, cache) if cache else intact(path)):
        return None
    try:
        with np.load(path) as data:
            return [data[f"a{k}"] for k in range(len(data.files))]
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile):
        return None


def _digest(path: Path) -> str:
    return f"{path.name} {output_paths.fingerprint(path)}"


def seal(path) -> Path:
    """Record ``path``'s name, size and SHA-256 beside it (``<path>.sum``), for :func:`intact` to check.

    A cache entry is sealed after it is put in place, so a reader that finds the seal finds the whole entry, and
    one truncated or overwritten since is told apart. The name is the entry's key (every cache names an entry by
    its key), so another key's entry, copied, moved or linked into this one's place with its seal, is told apart too.
    """
    path = Path(path)
    return write_atomic(path.with_name(path.name + ".sum"), _digest(path))


def intact(path) -> bool:
    """Whether ``path`` and its seal (:func:`seal`) exist and agree.

    A damaged entry is left for its writer to replace (atomically, then sealed again): removing it here could
    remove what another process just put in place.
    """
    path = Path(path)
    stamp = path.with_name(path.name + ".sum")
    try:
        if not (path.is_file() and stamp.is_file()):  # a FIFO, a device or a folder is never read
            return False
        with open(stamp, "rb") as f:
            sealed = f.read(_SEAL_MAX)
        # The sizes first: an entry of another size (a huge or sparse file put there) is told apart unread.
        if not sealed.startswith(f"{path.name} {path.stat().st_size} ".encode()):
            return False
        return sealed == _digest(path).encode()
    except OSError:
        return False


_SEAL_MAX = 4096  # longer than any seal (a name, a size and a SHA-256): a larger file there is no seal

_said_damaged: set = set()  # the caches whose damaged entry this process has said


def trusted(path, cache: str) -> bool:
    """Whether the entry ``path`` of ``cache`` is :func:`intact`; one that is there but not intact (a link to
    nowhere or to itself, a FIFO or a folder too) is said once per cache and process ("build cache: ... is
    damaged"), and its writer builds it again."""
    if intact(path):
        return True
    if os.path.lexists(path) and cache not in _said_damaged:
        _said_damaged.add(cache)
        logger.warning("%s: %s is damaged (it disagrees with its seal); it is made again", cache, Path(path).name)
    return False


def write_with(path, save: Callable[[str], None], suffix: str = "", placed: Callable[[], object] | None = None) -> Path:
    """:func:`write_atomic` for a library that writes to a file name (``save(name)``), not to an open file.

    ``suffix`` ends the temporary name, for writers that go by it (``.so`` for a shared library): whatever it is,
    the name is one :func:`_temporary` knows, ``.<name>.<eight letters>.part<suffix>``, so a sweep finds it.
    ``placed()`` records the file put in place: a signal that comes waits until both are done (:func:`_held`).
    """
    path = Path(path)
    make_folder(path.parent)
    _renames_in(path.parent)
    _sweep(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=f".part{suffix}")
    os.close(fd)
    try:
        save(tmp)
        follow_umask(tmp)
        with _held() if placed else contextlib.nullcontext():
            os.replace(tmp, path)
            if placed:
                placed()
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def make_folder(path: Path) -> None:
    """``path`` made as a folder, with its parents; a file or a FIFO already there is said as such (mkdir says
    "File exists", which reads as if the folder were there)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        there = output_paths.kind_of(path)
        raise NotADirectoryError(errno.ENOTDIR, f"{there} is there, not a folder", str(path)) from None


def _renames_in(folder: Path) -> None:
    """A :class:`PermissionError` for a folder whose files cannot be renamed (an append-only one, ``chattr +a``):
    a temporary could be made there but never put in place, nor removed again. A cache then keeps nothing
    (:func:`keep`); a result's folder was refused before the work (:mod:`.output_paths`)."""
    if resisting := output_paths.resists(folder):
        kind, undo = resisting
        raise PermissionError(f"the folder is {kind}, so no file can be put in place there; {undo} undoes it")


@contextlib.contextmanager
def _held():
    """Ctrl-C, SIGTERM and SIGHUP wait for the block's end (their handlers run then), so that a result put in
    place and what says so (:data:`written`, the record) are one step, never half of it. Their handlers are
    swapped, not the signals masked: any of a library's threads may take a signal, and the handler runs in the
    main thread anyway."""
    came = []
    try:
        old = {sig: signal.signal(sig, lambda signum, _: came.append(signum)) for sig in SIGNALS}
    except ValueError:  # not the main thread: no handler runs in this one
        yield came
        return
    try:
        yield came
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        for signum in dict.fromkeys(came):
            signal.raise_signal(signum)


#: The names :func:`write_with` gives its temporaries: ``.<name>.<tempfile.mkstemp's eight letters>.part<suffix>``.
_TEMPORARY = r"\..+\.[a-z0-9_]{8}\.part(\.\w+)?"


def _temporary(name: str) -> bool:
    """Whether ``name`` is one :func:`write_with` gives its temporaries, whatever their suffix."""
    return re.fullmatch(_TEMPORARY, name) is not None


#: A temporary this old was left by a process that died unwarned (SIGKILL, a power cut): no build writes for so long.
STALE_S = 6 * 3600


def _sweep(folder: Path) -> None:
    """Remove the stale temporaries in ``folder`` when it is in the cache (never in a user's own folders)."""
    if not folder.resolve().is_relative_to(_cache_root().resolve()):
        return
    now = time.time()
    for tmp in folder.glob(".*"):
        with contextlib.suppress(OSError):  # another process may sweep it first
            if _temporary(tmp.name) and now - tmp.lstat().st_mtime > STALE_S:
                tmp.unlink()


def _destination(path: Path) -> Path:
    """Where a result for ``path`` goes: a link's target (the link stays a link), else ``path``."""
    if not path.is_symlink() or (path.exists() and not path.is_file() and not path.is_dir()):
        return path  # a link to a device or a FIFO (/dev/stdout) is written through as it is
    target = path.resolve()
    if not target.parent.is_dir():
        raise OutputError(f"{path} is a link to {target}, whose directory does not exist", "remove the link")
    return target


def put(path, data: bytes | str | Callable, record: bool = False, placed: Callable[[], object] = lambda: None) -> Path:
    """A result written to ``path`` without clobbering what is there: into stdout or stderr after what was printed
    when it names one or is the file one prints to (:func:`~.streams.open_stream`); through a link, into its target;
    into a character device or a FIFO as it is (``/dev/null`` stays a device); else atomically (:func:`write_atomic`),
    and with ``record`` recorded in its folder's :data:`~byoc_workbench.core.output_paths.WRITTEN` (what proves to a
    later run that it may replace it), then ``placed()``: the file in place, its record and ``placed`` are one step
    for a signal. Any failure is one line (:class:`OutputError`), with nothing left under the name or beside it."""
    path = Path(path)

    def done() -> None:
        if record:
            write_atomic(target.parent / output_paths.WRITTEN, output_paths.recorded(target.parent, [target]))
        placed()

    try:
        fd = streams.open_stream(path)
        target = path if fd is not None else _destination(path)
        if fd is None and (target.is_file() or target.is_dir() or not target.exists()):  # no device, FIFO, stream
            write_atomic(target, data, placed=done)
            return path
        _send(streams.open_device(target) if fd is None else fd, path, data, placed)
    except OSError as err:
        raise cannot_write(path, err) from None
    return path


def _send(fd: int, path: Path, data: bytes | str | Callable, placed: Callable[[], object]) -> None:
    """``data`` written into the open descriptor ``fd`` (closed after), then ``placed()``; a signal that stops it
    mid-way leaves in :data:`written` what went (a :class:`~.streams.Part`), if anything did, then ends the command."""
    whole = io.BytesIO()
    try:
        _write_to(whole, data)
        with whole.getbuffer() as view, _held() as came:
            sent = streams.send(fd, view, came)
            if sent == len(view):
                placed()
            elif sent:
                written.append(streams.Part(path, sent, len(view)))
    finally:
        os.close(fd)


#: What a C compiler or linker says when it could not write its output (killed by SIGXFSZ under ``ulimit -f``, or
#: on a full disk): the errno that is.
_COMPILER_COULD_NOT_WRITE = {
    "File size limit exceeded": errno.EFBIG,
    "File too large": errno.EFBIG,
    "No space left on device": errno.ENOSPC,
    "Disk quota exceeded": errno.EDQUOT,
}


def compiler_could_not_write(said: str, what: str) -> OutputError | None:
    """The one line for a C compiler or linker whose messages ``said`` show it could not write its output in the
    temporary folder (a file-size limit, a full disk): no fault of the code it compiled. ``what`` says what it
    could not compile. None for anything else, a real compile error."""
    code = next((code for words, code in _COMPILER_COULD_NOT_WRITE.items() if words in said), None)
    if code is None:
        return None
    where = tempfile.gettempdir()
    fix = (
        "raise the limit on a file's size (ulimit -f unlimited)"
        if code == errno.EFBIG
        else f"free some space in {where}, or set TMPDIR to a folder on another disk"
    )
    return OutputError(f"{what}: the compiler could not write its output in {where} ({os.strerror(code)})", fix)


def write_file(path, data: bytes | str | Callable) -> Path:
    """A result put at ``path`` and recorded beside it (:func:`put`), and in :data:`written`."""
    return put(path, data, record=True, placed=lambda: written.append(Path(path)))


@contextlib.contextmanager
def staged(out, replaces: re.Pattern | None = None):
    """A temporary directory to write ``out``'s files into; they are moved into ``out`` when the block ends.

    On an error or a Ctrl-C inside the block the temporary directory is removed and ``out`` is left as it was (or
    not created at all). Files of ``out`` that the block does not write are kept, except an earlier set's that
    ``replaces`` matches (another ``--format``, groups no longer drawn) and that the workbench wrote there, unchanged
    since (:func:`~byoc_workbench.core.output_paths.earlier`): those are removed with the move. A file the block
    cannot write (a full disk, ``ulimit -f``) is one line naming it in ``out`` (:class:`OutputError`).
    """
    out = Path(out)
    base = output_paths.existing_ancestor(out)
    try:
        tmp = Path(tempfile.mkdtemp(dir=base, prefix=f".{out.name or 'out'}.", suffix=".part"))
    except OSError as err:  # its temporary, .<name>.XXXXXXXX.part, is made in base: the name may be what is wrong
        raise cannot_write(out, err) from None
    try:
        try:
            yield tmp
        except OSError as err:  # a write's own error may name no file (write_text's): then the set is what is named
            named = Path(err.filename or "")
            raise cannot_write(out / named.relative_to(tmp) if named.is_relative_to(tmp) else out, err) from None
        _moved_into(tmp, out, replaces)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _moved_into(tmp: Path, out: Path, replaces: re.Pattern | None) -> None:
    """``tmp``'s files put in ``out`` (made if need be) as one set, with ``out``'s :data:`WRITTEN` recording them
    (what :func:`~byoc_workbench.core.output_paths.check_dir` reads), and the earlier set's files ``replaces``
    matches removed. Each file in the way or to remove is first kept aside (a hard link), so that when one cannot
    be replaced every one already moved or removed is put back: ``out`` holds the old set whole or the new set
    whole, never a mix of two runs. A Ctrl-C waits for the set's end (:func:`_held`)."""
    where = out
    try:
        out.mkdir(parents=True, exist_ok=True)
        gone = [f.name for f in output_paths.earlier(out, replaces, os.listdir(tmp))] if replaces else []
        (tmp / output_paths.WRITTEN).write_text(output_paths.recorded(out, tmp.iterdir(), gone))
        names = sorted(p.name for p in tmp.iterdir())
        aside, kept, moved = Path(tempfile.mkdtemp(dir=tmp)), set(), []
        for name in (*names, *gone):
            where = out / name
            with contextlib.suppress(FileNotFoundError):
                os.link(where, aside / name, follow_symlinks=False)
                kept.add(name)
        with _held():
            try:
                for name in (*(n for n in gone if n in kept), *names):
                    where = out / name
                    if name in names:
                        os.replace(tmp / name, where)
                    else:
                        os.unlink(where)
                    moved.append(name)
            except BaseException:
                for name in reversed(moved):
                    if name in kept:
                        os.replace(aside / name, out / name)
                    else:
                        os.unlink(out / name)
                raise
            written.extend(out / name for name in names if name != output_paths.WRITTEN)
    except OSError as err:
        raise cannot_write(where, err) from None
