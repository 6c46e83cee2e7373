"""Where a runner's call goes: converting its inputs, computing, writing its outputs.

A runner (the packed function a backend registers) calls ``mark("inputs")``
once its inputs are in the form its backend takes, and ``mark("compute")``
once the backend has computed. :mod:`byoc_workbench.measure.time.timing` records the marks
while it profiles and splits each call into a boundary-in, a compute and a
boundary-out entry. Outside a profile ``mark`` costs one context-variable lookup.
"""

from __future__ import annotations

import contextlib
import contextvars
import time

# The list a profile appends to in this context (thread, task), else None.
_marks: contextvars.ContextVar = contextvars.ContextVar("byoc_workbench_phase_marks", default=None)


def mark(phase: str) -> None:
    """Note that ``phase`` ("inputs" or "compute") of the current call has just ended."""
    marks = _marks.get()
    if marks is not None:
        marks.append((phase, time.perf_counter()))


@contextlib.contextmanager
def recording(marks: list):
    """Append ``(phase, time)`` to ``marks`` inside the ``with`` block; what was recorded before comes back after."""
    token = _marks.set(marks)
    try:
        yield marks
    finally:
        _marks.reset(token)
