"""Ctrl-C, SIGTERM and SIGHUP for a ``byoc-workbench`` command: handled alike,
remembered, and said in one line.

SIGTERM (``timeout``, ``docker stop``, a JupyterHub cull) and SIGHUP (a closed terminal) are handled as Ctrl-C
is, so that temporaries are removed and one line is said. TVM's FFI turns a KeyboardInterrupt raised inside a
callback (a backend's packed function, a timed run) into a RuntimeError, so the exception's type alone cannot
tell: :attr:`Stop.seen` does.
"""

from __future__ import annotations

import contextlib
import os
import signal

from byoc_workbench.core import files
from byoc_workbench_cli import SIGNALS, stopped_word


class Stop:
    """Which signal stopped the command, if one did (0 if none), while :meth:`watch` is on."""

    seen = 0
    pid = 0  # the command's own process: a child forked by a library (OpenVINO's telemetry) just ends

    @classmethod
    def _handle(cls, signum, frame):
        if os.getpid() != cls.pid:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        cls.seen = signum
        # The command is ending: a second signal (the terminal signals its whole process group, and an impatient
        # user presses again) must not raise a second KeyboardInterrupt in the middle of the one-line exit.
        for sig in SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        raise KeyboardInterrupt

    @classmethod
    @contextlib.contextmanager
    def watch(cls):
        """Either signal raises KeyboardInterrupt, once, and is remembered; the handlers before are put back."""
        cls.seen, cls.pid = 0, os.getpid()
        try:
            old = {sig: signal.signal(sig, cls._handle) for sig in SIGNALS}
        except ValueError:  # not the main thread: leave Python's handlers alone
            yield
            return
        try:
            yield
        finally:
            if not cls.seen:  # after a signal the process is ending, and further ones stay ignored
                for sig, handler in old.items():
                    signal.signal(sig, handler)


def stopped_line(signum: int, writes: bool = True) -> str:
    """The line for a command ``signum`` stopped: what it wrote before that (:data:`files.written`), or nothing;
    for one that never ``writes``, only that it stopped."""
    word = stopped_word(signum)
    if not writes:
        return f"{word}."
    if not files.written:
        return f"{word}; nothing was written."
    return f"{word}; wrote {', '.join(str(p) for p in files.written)} before that."
