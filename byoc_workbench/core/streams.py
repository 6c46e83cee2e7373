"""Results written into what is no plain file: a descriptor already open (``/dev/stdout``, ``/dev/fd/N``, the file
open on stdout), a character device (``/dev/null``, ``/dev/tty``) or a FIFO.

Each is checked by itself before any work (:func:`check`), never by probing its folder (``/dev`` or ``/dev/fd``,
where a user makes no file); written as it is, after what is there (:func:`open_stream`, :func:`open_device`,
:func:`send`); and a write that fails, into one of them or into a file, is one line (:func:`cannot_write`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import re
import select
import stat
import sys
import time
from pathlib import Path

from byoc_workbench.core.errors import WorkbenchError

if sys.platform != "win32":  # where /dev/fd names a descriptor
    import fcntl


class OutputError(WorkbenchError):
    """A result that could not be put in place (a full disk, a read-only place, a link to nothing): exit status 1."""

    status = 1


#: The names of a descriptor already open: /dev/stdin, /dev/stdout, /dev/stderr, /dev/fd/N and /proc/self/fd/N.
_NAMED_FD = re.compile(r"/dev/std(in|out|err)|/(?:dev|proc/self)/fd/(\d+)")


def named_fd(path) -> int | None:
    """The descriptor ``path`` names (``/dev/stdout`` is 1, ``/dev/fd/3`` is 3), or None."""
    named = _NAMED_FD.fullmatch(os.path.abspath(path))
    if named is None:
        return None
    return {"in": 0, "out": 1, "err": 2}[named[1]] if named[1] else int(named[2])


def check(out: Path, flag: str, example: str) -> bool:
    """Whether ``out`` is a descriptor, a character device or a FIFO, each checked by itself (False for any other
    path, which is checked as a file): a descriptor must be open for writing, and not stdin; a device is opened and
    closed again (``/dev/tty`` with no terminal is found now, not after the work); a FIFO must be writable (opening
    it would end what its reader reads)."""
    if (fd := named_fd(out)) is not None:
        _check_descriptor(fd, out, flag, example)
    elif out.is_char_device():
        _check_device(out, flag)
    elif out.is_fifo():
        if not os.access(out, os.W_OK, effective_ids=os.access in os.supports_effective_ids):
            raise WorkbenchError(f"Cannot write {out} (Permission denied)", f"pass {flag} the path of a file")
    else:
        return False
    return True


def _check_descriptor(fd: int, out: Path, flag: str, example: str) -> None:
    if fd == 0:
        raise WorkbenchError(
            f"{flag} {out} is stdin, which the command reads: it takes no result",
            f"pass {flag} the path of a file to write, e.g. {flag} {example}",
        )
    fix = f"open it for writing in the shell ({fd}> file), or pass {flag} the path of a file"
    try:
        mode = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE
    except (OSError, OverflowError):
        raise WorkbenchError(f"{flag} {out}: descriptor {fd} is not open", fix) from None
    if mode == os.O_RDONLY:
        raise WorkbenchError(f"{flag} {out}: descriptor {fd} is open for reading only", fix)


def _check_device(out: Path, flag: str) -> None:
    fix = f"pass {flag} the path of a file instead"
    try:
        os.close(os.open(out, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY))
    except OSError as err:
        cause = _absent(out) if err.errno in (errno.ENXIO, errno.ENODEV) else f"cannot be written ({err.strerror})"
        raise WorkbenchError(f"{flag} {out}: {cause}", fix) from None


def _absent(device) -> str:
    """Why a character device takes nothing (ENXIO): most often a terminal that is none."""
    if Path(device).resolve() == Path("/dev/tty"):
        return "no terminal controls this command, so /dev/tty is no device"
    return "the device is not there (No such device or address)"


def open_stream(path: Path) -> int | None:
    """A copy of the descriptor ``path`` names (``/dev/stdout``, ``/dev/fd/N``), or of stdout's or stderr's when
    ``path`` is the file open there (``> log.txt``, then ``log.txt``); None for any other path. A result goes into
    that stream after what was printed to it, never renamed over the file (what is printed after would be lost)."""
    if (fd := named_fd(path)) is None and (fd := next((fd for fd in (1, 2) if _open_on(fd, path)), None)) is None:
        return None
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, OSError, ValueError):  # closed, or none at all (pythonw)
            stream.flush()
    return os.dup(fd)


def _open_on(fd: int, path: Path) -> bool:
    """Whether ``path`` is the file open on descriptor ``fd``."""
    try:
        return os.path.samestat(os.fstat(fd), path.stat())
    except OSError:
        return False


#: How long a result waits for a FIFO's reader to open it.
FIFO_WAIT_S = 5.0


def open_device(path: Path) -> int:
    """A descriptor of the device or FIFO ``path`` opened for writing, waiting at most :data:`FIFO_WAIT_S` for a
    FIFO's reader: a FIFO nobody reads is an OutputError, not a run that never ends. A device that is not there
    (``/dev/tty`` with no terminal) is an OSError at once."""
    deadline = time.monotonic() + FIFO_WAIT_S
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY)
            break
        except OSError as err:
            if err.errno != errno.ENXIO or not path.is_fifo():
                raise
            if time.monotonic() > deadline:
                why = f"{path} is a FIFO that no program read within {FIFO_WAIT_S:g} s"
                raise OutputError(why, "start its reader first, or pass a file") from None
            time.sleep(0.05)
    os.set_blocking(fd, True)
    return fd


def send(fd: int, data: memoryview, came: list) -> int:
    """``data`` written into the descriptor ``fd``, a piece at a time once ``fd`` takes one (at most ``PIPE_BUF``
    bytes into anything but a file, so that no write waits); how many bytes went: all, unless a signal came first
    (``came``, filled by the caller's handlers). A reader that stops reading holds the command only until a signal,
    and the bytes counted are the bytes that went."""
    piece = 1 << 20 if stat.S_ISREG(os.fstat(fd).st_mode) else select.PIPE_BUF
    ready, sent = select.poll(), 0
    ready.register(fd, select.POLLOUT)
    while sent < len(data) and not came:
        if ready.poll(100):  # in ms: a signal that came while it waits is seen within that
            sent += os.write(fd, data[sent : sent + piece])
    return sent


@dataclasses.dataclass(frozen=True)
class Part:
    """What went of a result that a signal stopped on its way into a stream: ``sent`` of its ``size`` bytes, in
    :data:`~.files.written` as ``<sent> of <size> bytes of <path>``."""

    path: Path
    sent: int
    size: int

    def __str__(self) -> str:
        return f"{self.sent} of {self.size} bytes of {self.path}"


def cannot_write(where, err: OSError) -> OutputError:
    """The one line for a result that could not be written at ``where``; the Fix speaks of space only when space
    ran out on a disk (a device such as /dev/full has none to free)."""
    fix = "pass a path you can write to"
    if Path(where).is_char_device() or Path(where).is_block_device():
        fix = "pass the path of a file instead"
        if err.errno in (errno.ENXIO, errno.ENODEV):
            return OutputError(f"Cannot write {where}: {_absent(where)}", fix)
    elif err.errno in (errno.ENOSPC, errno.EDQUOT):
        fix = "free some space on that disk, or pass a path on another one"
    elif err.errno == errno.EFBIG:
        fix = "raise the limit on a file's size (ulimit -f unlimited), or pass a path on a disk that takes larger files"
    return OutputError(f"Cannot write {where} ({err.strerror or err})", fix)
