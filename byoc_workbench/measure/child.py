"""A call in a child process that exits, so that everything its work took goes back to the system with it.

A build and a run keep memory the caller cannot give back: TVM's loaded libraries stay loaded, and the C
heap and TVM's allocators keep what they free. Notebook 06's chooser builds one model per pick, so each pick
runs in a child process and only a picklable result comes back. The child is started with "spawn" (a fresh
interpreter): a fork of a process whose TVM has started its thread pool is unsafe.

While it works the child sends its progress lines, its log records and what it prints; a
:class:`~byoc_workbench.core.errors.WorkbenchError` comes back as its one line, any other exception as a
RuntimeError that carries the child's traceback (a bug keeps its traceback), and a child that dies without
an answer (killed for memory, say) as a RuntimeError too.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import multiprocessing
import resource
import sys
import traceback

from byoc_workbench.core.errors import WorkbenchError

# The exit code of a child that was importing the caller's script when the script called in_child again.
_UNGUARDED = 86


@dataclasses.dataclass
class ChildResult:
    """What :func:`in_child`'s call returned, and the child's peak resident memory in MB (its high-water mark)."""

    value: object
    peak_mb: float


def peak_mb() -> float:
    """This process's peak resident memory in MB (Linux's VmHWM; elsewhere getrusage's maximum)."""
    try:
        return _status_mb("VmHWM:")
    except (OSError, StopIteration):
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kB on Linux, bytes on macOS
        return rss / 2**20 if sys.platform == "darwin" else rss / 1024


def resident_mb() -> float:
    """This process's resident memory now, in MB (Linux only: /proc)."""
    return _status_mb("VmRSS:")


def _status_mb(field: str) -> float:
    with open("/proc/self/status") as f:
        return next(int(ln.split()[1]) for ln in f if ln.startswith(field)) / 1024


def in_child(fn, *args, say=None, **kw) -> ChildResult:
    """``fn(*args, say=..., **kw)`` in a child process that exits once it has answered.

    ``fn``, its arguments and its result must pickle (``fn`` a module-level function). ``say``, if given,
    is called here with each line ``fn`` says. Log records at the levels set here, and what the child
    prints, are handled and printed here, so that a widget's output area shows them.
    """
    context = multiprocessing.get_context("spawn")
    mine, theirs = context.Pipe(duplex=False)
    levels = {name: lg.level for name, lg in list(logging.root.manager.loggerDict.items()) if getattr(lg, "level", 0)}
    child = context.Process(target=_serve, args=(theirs, fn, args, kw, levels | {"": logging.root.level}))
    _start(child)
    theirs.close()  # the child holds the only writing end: its exit ends recv() with EOFError
    try:
        while True:
            try:
                kind, got = mine.recv()
            except EOFError:
                raise _died(child) from None
            if kind == "say" and say is not None:
                say(got)
            elif kind == "log":
                logging.getLogger(got.name).handle(got)
            elif kind in ("stdout", "stderr"):
                getattr(sys, kind).write(got)
            elif kind == "value":
                value = got
            elif kind == "peak":
                return ChildResult(value, got)
            elif kind == "error":
                raise WorkbenchError(*got)
            elif kind == "bug":
                raise RuntimeError(f"the child process raised:\n{got}")
    finally:
        mine.close()
        if child.is_alive():  # an interrupt here, or an answer already given: the child goes either way
            child.terminate()
        child.join()


def _start(child) -> None:
    """Start ``child``; in a process that is itself a child still importing its parent's script (a script
    without ``if __name__ == "__main__":``), exit with :data:`_UNGUARDED` instead, for the parent to say why."""
    try:
        child.start()
    except RuntimeError:  # spawn's refusal to start a process while this one imports its parent's script
        if multiprocessing.current_process().name == "MainProcess":  # set before the script is imported
            raise
        sys.exit(_UNGUARDED)


def _died(child) -> Exception:
    """Why ``child`` ended before it answered."""
    child.join()
    if child.exitcode == _UNGUARDED:
        return WorkbenchError(
            "The child process re-ran your script from the top and met this call again (a child imports "
            "the script it was started from)",
            'put the script\'s calls under if __name__ == "__main__": (or run them in a notebook)',
        )
    return RuntimeError(f"the child process died (exit code {child.exitcode}) before it answered")


class _Stream(io.TextIOBase):
    """The child's stdout or stderr: what it writes goes to the parent."""

    encoding = "utf-8"

    def __init__(self, pipe, kind: str):
        self.pipe, self.kind = pipe, kind

    def write(self, text: str) -> int:
        self.pipe.send((self.kind, text))
        return len(text)


class _Forward(logging.Handler):
    """The child's log records, formatted here (their arguments may not pickle) and handled by the parent."""

    def __init__(self, pipe):
        super().__init__()
        self.pipe = pipe

    def emit(self, record: logging.LogRecord) -> None:
        record.msg, record.args, record.exc_info, record.exc_text = record.getMessage(), None, None, None
        self.pipe.send(("log", record))


def _serve(pipe, fn, args, kw, levels) -> None:
    """The child: the parent's log levels, its prints sent back, ``fn`` called, its answer sent."""
    for name, level in levels.items():
        logging.getLogger(name or None).setLevel(level)
    logging.root.addHandler(_Forward(pipe))
    sys.stdout, sys.stderr = _Stream(pipe, "stdout"), _Stream(pipe, "stderr")
    try:
        pipe.send(("value", fn(*args, say=lambda line: pipe.send(("say", line)), **kw)))
    except WorkbenchError as err:
        pipe.send(("error", (err.cause, err.fix)))
    except BaseException:  # noqa: BLE001  a bug, Ctrl-C or SystemExit: its traceback goes to the parent
        pipe.send(("bug", traceback.format_exc()))
    else:
        pipe.send(("peak", peak_mb()))  # after the value was pickled: its bytes count in the peak
    pipe.close()
