"""Where a runner's call goes: converting its inputs, computing, writing its outputs.

A runner (the packed function a backend registers) calls ``mark("inputs")``
once its inputs are in the form its backend takes, and ``mark("compute")``
once the backend has computed. :mod:`byoc_workbench.measure.timing` records the marks
while it profiles and splits each call into a boundary-in, a compute and a
boundary-out entry. Outside a profile ``mark`` costs one global lookup.
"""

from __future__ import annotations

import time

_marks: list | None = None  # a list while a profile records, else None


def mark(phase: str) -> None:
    """Note that ``phase`` ("inputs" or "compute") of the current call has just ended."""
    if _marks is not None:
        _marks.append((phase, time.perf_counter()))


def record(marks: list | None) -> None:
    """Start appending ``(phase, time)`` to ``marks``; None stops."""
    global _marks
    _marks = marks
