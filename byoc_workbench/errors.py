"""One error type for everything a user can get wrong.

Every message is one line, ``error: <cause>. Fix: <fix>.``, and it is the same
line everywhere: ``str(err)`` is that line, the CLI prints it, the widget shows it
in its status area, and a notebook shows it in place of a traceback (through
IPython's ``_render_traceback_`` hook). Areas subclass :class:`WorkbenchError`
(the zoo, pictures, the MXNet importer), so every exception class of the package
derives from it and the CLI catches this one type; anything else is a bug and
keeps its traceback.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path


def _sentence(text: str) -> str:
    # One line with one final period: causes often quote other messages, which may
    # span lines or end in a period of their own.
    return " ".join(str(text).split()).rstrip(" .") + "."


class WorkbenchError(Exception):
    """A problem with the user's input: what went wrong (cause) and what to do (fix).

    Parameters
    ----------
    cause : str
        What is wrong, e.g. ``"Unknown target 'x'"``.
    fix : str
        What the user should do, e.g. ``"choose one of: byoc-target, tensorrt"``.
        A final period is optional in both; the line gets exactly one.
    """

    def __init__(self, cause: str, fix: str):
        self.cause = cause
        self.fix = fix
        super().__init__(cause, fix)

    @property
    def line(self) -> str:
        """The message as shown everywhere: ``error: <cause>. Fix: <fix>.``"""
        return f"error: {_sentence(self.cause)} Fix: {_sentence(self.fix)}"

    def __str__(self) -> str:
        return self.line

    def _render_traceback_(self) -> list[str]:
        # IPython shows these lines instead of a traceback: a user error needs none.
        return [self.line]


def shorten(text: str, limit: int = 300) -> str:
    """``text`` in at most ``limit`` characters, cut at a word boundary and marked with an ellipsis."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:  # a word boundary not far back; else one long token is cut where it must be
        cut = cut[:space]
    return cut.rstrip(" ,;:.") + "…"


def first_line(err: BaseException, last: bool = False, limit: int = 300) -> str:
    """One line of another library's error message, for quoting in a cause.

    TVM and MXNet messages carry C++ backtraces; their traceback lines are dropped.
    TVM says what went wrong first, MXNet last (``last=True``). A WorkbenchError
    gives its cause alone, so the quoting message does not repeat ``error: ... Fix:``.
    The line is cut at a word boundary, never mid-word.
    """
    if isinstance(err, WorkbenchError):
        return shorten(_sentence(err.cause).rstrip("."), limit)
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    useful = [ln for ln in lines if not ln.startswith(("Traceback", "File ", "[bt]", "Stack trace"))]
    text = (useful or lines or [type(err).__name__])[-1 if last else 0]
    text = text.replace("MXNetError: ", "")
    if text.lower().startswith("error: "):  # TVMScript's diagnostics start with their own "error:"
        text = text[len("error: ") :]
    return shorten(text, limit)


class UserCodeError(WorkbenchError):
    """An exception raised by the user's own code: a model file, a rule's check, a prune rule."""


def user_frame(tb) -> tuple | None:
    """``(file, line)`` of the innermost traceback frame in the user's code, or None.

    The user's code is whatever lies outside this package and the Python
    installation (the standard library, site-packages, TVM's compiled FFI).
    """
    package = Path(__file__).resolve().parent
    installed = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    found = None
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if not (name.startswith("<") and name not in ("<stdin>", "<string>")) and not name.endswith((".pxi", ".pyx")):
            path = Path(name).resolve()
            if not any(path.is_relative_to(p) for p in (package, *installed)):
                found = (name, tb.tb_lineno)
        tb = tb.tb_next
    return found


def user_error(what: str, err: BaseException, fix: str = "") -> UserCodeError:
    """A one-line :class:`UserCodeError` for ``err``, raised by the user's ``what`` (e.g. ``"rule mychip.add's check"``).

    The line names the exception, its message and the user's file and line;
    raise it ``from err`` so that ``--traceback`` can show the whole trace.
    """
    where = user_frame(err.__traceback__)
    at = f" at {where[0]}, line {where[1]}" if where else ""
    message = "" if isinstance(err, SystemExit) else first_line(err)
    cause = f"{what} raised {type(err).__name__}{at}" + (f": {message}" if message and message != type(err).__name__ else "")
    return UserCodeError(cause, fix or f"fix {what}{f' in {where[0]}' if where else ''} (--traceback or BYOC_WORKBENCH_DEBUG=1 shows the whole trace)")


class MissingDependencyError(WorkbenchError):
    """An optional package (mxnet, gluoncv, onnxruntime, TensorRT) is not importable."""


def import_optional(name: str, fix: str):
    """Import module ``name``, or raise :class:`MissingDependencyError` with ``fix``.

    Heavy optional packages are imported at the point of use, so Part 1 runs without them.
    """
    try:
        return importlib.import_module(name)
    except (ImportError, OSError, AttributeError) as err:
        # OSError: a missing shared library; AttributeError: mxnet 1.9 under numpy >= 1.24 (np.bool).
        raise MissingDependencyError(f"{name} is not importable ({err})", fix) from None
