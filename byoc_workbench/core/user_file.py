"""Loading a user's own Python file: a model file (``mod``, and ``rules`` if it likes) or a codegen file.

Whatever the file does wrong is one line naming the file and its line, and the
native warnings of what TVMScript half-built are held back.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import importlib.machinery
import importlib.util
import os
import sys
import tempfile
import traceback
from pathlib import Path

from byoc_workbench.core import output_paths
from byoc_workbench.core.errors import UserCodeError, WorkbenchError, shorten, user_error, user_frame


def import_user_file(path: str | Path, what: str, fix: str):
    """Import a user's Python file as a module (a model file, a codegen file).

    The module is put in ``sys.modules`` first, because TVMScript reads the
    source of the classes it parses through their module. A file that raises
    or calls ``sys.exit`` is one :class:`WorkbenchError` naming ``what``, the
    file and its line; ``fix`` is the fix for a path that is not a file.
    """
    path = Path(path)
    try:
        found = path.is_file()
    except OSError as err:  # too long a name (ENAMETOOLONG), a folder it may not enter: is_file raises, not False
        fix = "pass a shorter path" if err.errno == errno.ENAMETOOLONG else fix
        raise WorkbenchError(f"{what} {shorten(str(path), 80)} cannot be read ({err.strerror})", fix) from None
    if not found:
        raise WorkbenchError(f"{what} {path} {output_paths.not_a_file(path)}", fix)
    name = f"byoc_workbench_user_{abs(hash(str(path.resolve())))}"
    # The loader is named: Python picks one by suffix, and has none for mymodel.PY.
    spec = importlib.util.spec_from_file_location(
        name, path, loader=importlib.machinery.SourceFileLoader(name, str(path))
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    failure = None
    with native_stderr_held() as held:
        try:
            spec.loader.exec_module(module)
        except (Exception, SystemExit) as err:  # the user's code can raise anything, or exit
            del sys.modules[name]
            failure = _load_failure(path, err, what)
            # TVMScript's half-built objects warn from C++ when freed: free them now, and drop those warnings.
            traceback.clear_frames(err.__traceback__)
            gc.collect()
            held.dropped = True
    if failure is not None:
        raise failure from failure.__cause__
    return module


def _load_failure(path: Path, err: BaseException, what: str) -> WorkbenchError:
    """The one line for a user's file that raised or exited while being imported (``err`` as its cause)."""
    where = user_frame(err.__traceback__)
    if isinstance(err, WorkbenchError):  # e.g. op_rule(...) with an unknown op: its own line, and where
        at = f" at line {where[1]}" if where and Path(where[0]).resolve() == path.resolve() else ""
        failure = WorkbenchError(f"{what} {path}{at}: {err.cause}", err.fix)
    elif isinstance(err, SystemExit):
        code = "" if err.code is None else repr(err.code)
        failure = UserCodeError(
            f"{what} {path} called sys.exit({code}){f' at line {where[1]}' if where else ''} while being loaded",
            "remove the exit, or put it under if __name__ == '__main__': the workbench imports the file",
        )
    else:
        failure = user_error(f"{what} {path}", err, "fix the file (--traceback shows the whole trace)")
    failure.__cause__ = err
    return failure


class _Held:
    dropped = False  # set when the import failed: its native warnings are noise beside the one-line error


@contextlib.contextmanager
def native_stderr_held():
    """Hold back what C++ writes to stderr (file descriptor 2) inside the block, and write it out after,
    unless the block set ``dropped``."""
    held = _Held()
    with tempfile.TemporaryFile() as file:
        if sys.stderr is not None:  # None where stderr is closed (2>&-)
            sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(file.fileno(), 2)
        try:
            yield held
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            file.seek(0)
            text = file.read()
            if text and not held.dropped:
                sys.stderr.write(text.decode(errors="replace"))
