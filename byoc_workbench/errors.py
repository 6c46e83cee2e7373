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


def first_line(err: BaseException, last: bool = False, limit: int = 300) -> str:
    """One line of another library's error message, for quoting in a cause.

    TVM and MXNet messages carry C++ backtraces; their traceback lines are dropped.
    TVM says what went wrong first, MXNet last (``last=True``).
    """
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    useful = [ln for ln in lines if not ln.startswith(("Traceback", "File ", "[bt]", "Stack trace"))]
    text = (useful or lines or [type(err).__name__])[-1 if last else 0]
    return text.replace("MXNetError: ", "")[:limit]


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
