"""``byoc-workbench``: the stages of a model as diagrams and JSON, and the SSD tools.

Everything a user can get wrong ends in one line, ``error: <cause>. Fix: <fix>.``,
and exit status 2 (1 for a result that could not be written, :class:`~byoc_workbench.core.files.OutputError`):
bad arguments (argparse's own refusals too, see
:class:`~byoc_workbench.cli.args.Parser`), bad files, bad models. Ctrl-C ends in
one line and exit status 130. ``--traceback`` (or ``BYOC_WORKBENCH_DEBUG=1``)
prints the whole trace as well. Output paths are checked before any work
starts, and results are written atomically (:mod:`byoc_workbench.core.files`).

Each command's parser (``add_<command>``, in :mod:`byoc_workbench.cli.parsers`) names the function
that runs it, ``cmd_<command>`` in a module of its own that imports the floors it runs at the top;
:func:`runner` imports that module only when the command runs, so that ``--help`` loads no command's
code (TVM itself loads with the package).
"""

from __future__ import annotations

import argparse
import errno
import importlib
import logging
import os
import signal
import sys
import traceback
from collections.abc import Callable

from byoc_workbench.cli.parsers import parser
from byoc_workbench.core import files, signals
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench_cli import WRITE_NOTHING

__all__ = ["main", "parser", "runner"]


def runner(name: str) -> Callable[[argparse.Namespace], int]:
    """The function a parser names to run its command, ``"module:function"``, its module imported now."""
    module, _, function = name.partition(":")
    return getattr(importlib.import_module(module), function)


class _WarningLine(logging.Formatter):
    """Warnings as ``warning: <message>``, one line each, like the errors; -v shows every logger's name."""

    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname.lower()}: {record.getMessage()}"


_HANDLER: list = []  # the handler this module put on the root logger, replaced on each main()


def _log_to_stderr(verbose: bool) -> None:
    root = logging.getLogger()
    for old in _HANDLER:
        root.removeHandler(old)
    handler = logging.StreamHandler()  # sys.stderr as it is now
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s") if verbose else _WarningLine())
    _HANDLER[:] = [handler]
    root.addHandler(handler)
    root.setLevel(logging.INFO if verbose else logging.WARNING)


def _debug(args=None) -> bool:
    return os.environ.get("BYOC_WORKBENCH_DEBUG", "").strip() not in ("", "0") or bool(
        getattr(args, "traceback", False)
    )


def _stopped(args) -> int:
    """One line, and the shell's status for the signal: 130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP."""
    if _debug(args):
        traceback.print_exc()
    signum = signals.Stop.seen or signal.SIGINT
    cluster = sys.modules.get("byoc_workbench.measure.cluster")  # imported by the commands that use Ray
    left_ray = cluster is not None and cluster.stop()  # further signals are ignored by now (signals.Stop)
    print(signals.stopped_line(signum, getattr(args, "command", None) not in WRITE_NOTHING), file=sys.stderr)
    if left_ray:  # see cluster.stop: the process ends here, its line said and its outputs flushed
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(128 + int(signum))
    return 128 + int(signum)


def _too_long(filename) -> str:
    """The line for a name longer than the system takes: one in the cache names ``$BYOC_WORKBENCH_CACHE``, which
    the user set, not a path passed."""
    named = f"{filename!s:.60}..." if filename else "a path"
    try:
        root = str(files.cache_dir(""))
    except WorkbenchError:
        root = None
    if filename and root and str(filename).startswith(root):
        return (
            f"error: {named} is too long a name for this system, made in ${files.CACHE_ENV}. Fix: set "
            f"{files.CACHE_ENV} to a folder with a shorter path (or unset it: {files.DEFAULT_CACHE})."
        )
    return f"error: {named} is too long a name for this system. Fix: pass a shorter path."


#: Why writing to a stream fails at no fault of the command: a full disk or quota, a file too big, a lost terminal.
_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO)


def main(argv=None) -> int:
    _closed_streams_to_null()
    with signals.Stop.watch():
        return _main(argv)


def _closed_streams_to_null() -> None:
    """Where the shell closed stdout or stderr (``cmd >&-``, ``2>&-``), /dev/null in its place: else the next file
    the command opens (an output, a temporary) takes that descriptor, and what TVM's C++ prints goes into it."""
    for fd, name in ((1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_WRONLY)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            setattr(sys, name, open(fd, "w", closefd=False))  # noqa: SIM115 - the process's own, open to the end


def _main(argv) -> int:
    files.written.clear()
    args = None
    try:
        args = parser().parse_args(argv)
        _log_to_stderr(args.verbose)
        status = runner(args.runner)(args)
        sys.stdout.flush()  # a full disk or a dead terminal is found here, not at exit with a traceback
        # A signal whose KeyboardInterrupt a library swallowed (TVM's FFI may) still ends the command as one.
        return _stopped(args) if signals.Stop.seen else status
    except WorkbenchError as err:  # the user's mistake; anything else is a bug and keeps its traceback
        if signals.Stop.seen:  # a failure Ctrl-C caused, reported as a failure of the step it stopped
            return _stopped(args)
        if _debug(args):
            traceback.print_exception(err)
        else:  # with -v the trace (and the error it was raised from) is logged too
            logging.getLogger(__name__).info("where the error was raised:", exc_info=True)
        print(err.line, file=sys.stderr)
        return err.status
    except KeyboardInterrupt:
        return _stopped(args)
    except BrokenPipeError:  # the reader went away (| head): stop quietly, with a shell's status for SIGPIPE
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except OSError as err:
        if err.errno == errno.ENAMETOOLONG:  # a path given, or a name made from one, longer than the system takes
            print(_too_long(err.filename), file=sys.stderr)
            return 2
        if err.filename is not None or err.errno not in _FULL:  # a file named by the error is a bug's, or a user's
            raise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's flush at exit raises no more
        print(
            f"error: cannot write the results ({err.strerror}). Fix: free some space, or send them to a file "
            "you can write (> out.txt).",
            file=sys.stderr,
        )
        return 1
    except Exception:
        if signals.Stop.seen:  # the KeyboardInterrupt came back wrapped by TVM's FFI
            return _stopped(args)
        raise
