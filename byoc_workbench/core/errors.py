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

import difflib
import importlib
import operator
import re
import sys
from pathlib import Path

import numpy as np


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

    status = 2  # the command's exit status: a mistake in the input

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

    @classmethod
    def from_line(cls, line: str) -> WorkbenchError | None:
        """The error whose :attr:`line` is ``line`` (what another process, a notebook's kernel, printed),
        or None when ``line`` is not one."""
        cause, sep, fix = line.strip().removeprefix("error: ").partition(" Fix: ")
        return cls(cause, fix) if line.strip().startswith("error: ") and sep else None

    def _render_traceback_(self) -> list[str]:
        # IPython shows these lines instead of a traceback: a user error needs none.
        return [self.line]


def true_or_false(value, cause: str, fix: str) -> bool:
    """``value`` as a bool (a NumPy one will do), or a one-line error ``<cause>; got <value>``: a word such
    as "off" or "no" is true, and must not switch anything on."""
    if not isinstance(value, (bool, np.bool_)):
        raise WorkbenchError(f"{cause}; got {type(value).__name__} ({value!r:.40})", fix)
    return bool(value)


def whole_number(value) -> int | None:
    """``value`` as an int where it is a whole number, any integral that ``operator.index`` takes (a NumPy integer
    too), else None: never a bool, Python's or NumPy's (True counts nothing), nor a float, even 2.0. The one test
    behind every "is a whole number" check; each caller says its own range."""
    if isinstance(value, (bool, np.bool_)):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def nearest(word, known, n: int = 1) -> list[str]:
    """The (at most ``n``) names of ``known`` nearest ``word``, in any case; never the very word, which is
    not one of them. The one spelling check behind every "did you mean"."""
    lowered = {str(k).lower(): str(k) for k in known if str(k) != str(word).strip()}
    return [lowered[m] for m in difflib.get_close_matches(str(word).strip().lower(), lowered, n=n)]


def did_you_mean(word, known) -> str:
    """`` (did you mean X?)`` with the name of ``known`` nearest ``word`` (:func:`nearest`), or "" when none is
    near: what an "Unknown ..." line adds."""
    near = nearest(word, known)
    return f" (did you mean {near[0]}?)" if near else ""


def shorten(text: str, limit: int = 300) -> str:
    """``text`` in at most ``limit`` characters, cut at a word boundary and marked `` […]``."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 4]
    space = cut.rfind(" ")
    if space > limit // 2:  # a word boundary not far back; else one long token is cut where it must be
        cut = cut[:space]
    return cut.rstrip(" ,;:.") + " […]"


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
    text = re.sub(r"In ir\.Op\(.*?name=\"([^\"]+)\".*?support_level=\d+\)", r"In \1", text)  # a whole op's repr
    text = re.sub(r"T\.int64\((-?\d+)\)", r"\1", text)
    where = _diagnostic_location(err)
    if where is None:
        return shorten(text, limit)
    return shorten(text.rstrip(" ."), limit - len(where) - 6) + f" (at {where})"


def _diagnostic_location(err: BaseException) -> str | None:
    """Where a TVMScript diagnostic points, ``file.py:6:9`` (its ``--> `` line), or None."""
    return next((ln.strip()[4:] for ln in str(err).splitlines() if ln.strip().startswith("--> ")), None)


class UserCodeError(WorkbenchError):
    """An exception raised by the user's own code: a model file, a rule's check, a prune rule."""


def user_frame(tb) -> tuple | None:
    """``(file, line)`` of the innermost traceback frame in the user's code, or None.

    The user's code is whatever lies outside this package and the Python
    installation (the standard library, site-packages, TVM's compiled FFI).
    """
    package = Path(__file__).resolve().parents[1]  # byoc_workbench/, not core/
    installed = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    found = None
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if name in ("<stdin>", "<string>"):
            found = (name, tb.tb_lineno)
        elif not name.startswith("<") and Path(name).is_file():  # C++ frames name sources not on this machine
            path = Path(name).resolve()
            if not any(path.is_relative_to(p) for p in (package, *installed)):
                found = (name, tb.tb_lineno)
        tb = tb.tb_next
    return found


def user_error(what: str, err: BaseException, fix: str = "") -> UserCodeError:
    """A one-line :class:`UserCodeError` for ``err``, raised by the user's ``what`` (``"rule x.y's check"``).

    The line names the exception, its message and the user's file and line;
    raise it ``from err`` so that ``--traceback`` can show the whole trace.
    """
    where = user_frame(err.__traceback__)
    message = first_line(err)
    at = f" at {where[0]}, line {where[1]}" if where and _diagnostic_location(err) is None else ""
    said = f": {message}" if message != type(err).__name__ else ""
    cause = f"{what[:1].upper()}{what[1:]} raised {type(err).__name__}{at}{said}"
    where_to = f" in {where[0]}" if where else ""
    return UserCodeError(
        cause, fix or f"fix {what}{where_to} (--traceback or BYOC_WORKBENCH_DEBUG=1 shows the whole trace)"
    )


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
