"""The clock: timing whole runs.

:func:`measure` calls a function a number of times and returns its
:class:`Latency` (median, min, max); with a time budget, the first call's
time refuses a loop that would take longer (:func:`check_budget`,
:class:`OverBudget`). :func:`round_robin` times several in turn (the search's
finals). Where they were measured is :mod:`byoc_workbench.measure.machine`'s.
Every measurement of a whole run goes through these: ``runner`` times
builds, ``bench`` and ``search`` whole models; ``timing`` times each VM call.
"""

from __future__ import annotations

import contextlib
import dataclasses
import statistics
import time
from collections.abc import Callable

import byoc_workbench.core.progress
from byoc_workbench.core import text
from byoc_workbench.core.errors import WorkbenchError


@dataclasses.dataclass(frozen=True)
class Latency:
    """Seconds per run: median, min and max over ``runs`` timed runs, after ``warmup`` untimed ones."""

    median_s: float
    min_s: float
    max_s: float
    runs: int
    warmup: int = 0

    @classmethod
    def of(cls, times, warmup: int = 0) -> Latency:
        return cls(statistics.median(times), min(times), max(times), len(times), warmup)

    def to_json(self) -> dict[str, float]:
        return {"median_s": self.median_s, "min_s": self.min_s, "max_s": self.max_s, "runs": self.runs}

    @property
    def spread(self) -> float:
        """(max - min) / median: how far apart the runs were."""
        return (self.max_s - self.min_s) / self.median_s if self.median_s else 0.0

    def __str__(self) -> str:
        runs = f"{self.runs} run{'s' if self.runs != 1 else ''}"
        if self.runs == 1:
            return f"{text.seconds(self.median_s)} (1 run, after {self.warmup} warm-up)"
        return (
            f"median {text.seconds(self.median_s)} (min {text.seconds(self.min_s)}, max {text.seconds(self.max_s)}; "
            f"{runs} after {self.warmup} warm-up)"
        )


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Which of two timed builds is faster, or a tie: their medians closer than half the wider spread of their
    runs (the search's finals decide by the same rule). ``faster`` is a label, or None for a tie."""

    labels: tuple
    latencies: tuple  # of Latency
    faster: str | None

    @property
    def ratio(self) -> float:
        a, b = (lat.median_s for lat in self.latencies)
        return max(a, b) / min(a, b)

    def line(self) -> str:
        (la, lb), (a, b) = self.labels, self.latencies
        numbers = (
            f"medians {text.seconds(a.median_s)} and {text.seconds(b.median_s)}, "
            f"{'closer than' if self.faster is None else 'beyond'} half the wider spread of their runs "
            f"({a.spread:.0%} and {b.spread:.0%})"
        )
        if self.faster is None:
            return f"'{la}' and '{lb}' tie here: {numbers}"
        return f"'{self.faster}' is {self.ratio:.2f}x faster here: {numbers}"


def verdict(label_a: str, a: Latency, label_b: str, b: Latency) -> Verdict:
    """:class:`Verdict` of two builds' latencies."""
    slow, fast = (a, b) if a.median_s > b.median_s else (b, a)
    beyond = slow.median_s - fast.median_s >= max(a.spread, b.spread) / 2 * fast.median_s
    faster = (label_a if fast is a else label_b) if beyond else None
    return Verdict((label_a, label_b), (a, b), faster)


class OverBudget(WorkbenchError):
    """A timed loop would take longer than the time allowed (``--max-seconds``)."""


def check_budget(first_s: float, left: int, max_seconds: float | None, desc: str = "runs") -> None:
    """Refuse, in one line, a loop whose ``left`` runs of ``first_s`` each would take over ``max_seconds``."""
    if max_seconds is None or first_s * left <= max_seconds:
        return
    needed = first_s * left
    raise OverBudget(
        f"{desc}: {left} more runs at about {text.seconds(first_s)} each would take about {text.seconds(needed)}, "
        f"over the limit of {max_seconds:g} s",
        f"ask for fewer runs, or allow {int(needed * 1.2) + 1} s (--max-seconds, or max_seconds= from Python)",
    )


def measure(
    fn,
    repeat: int = 10,
    warmup: int = 1,
    desc: str = "runs",
    progress: bool = True,
    max_seconds: float | None = None,
    bar: byoc_workbench.core.progress.Bar | None = None,
) -> Latency:
    """Call ``fn()`` ``warmup`` times untimed, then ``repeat`` times timed.

    With ``max_seconds``, the first call's time estimates the rest, and a loop
    that would take longer is refused (see :func:`check_budget`). The runs show
    on ``bar`` (a :func:`byoc_workbench.core.progress.bar`) when given, else on a bar of their own.
    """
    if repeat < 1 or warmup < 0:
        raise WorkbenchError(
            f"repeat must be 1 or more and warmup 0 or more, got {repeat} and {warmup}", "pass repeat=10"
        )
    times = []
    with (
        contextlib.nullcontext(bar) if bar is not None else byoc_workbench.core.progress.bar(enabled=progress) as shown
    ):
        shown.phase(desc, warmup + repeat, "run")
        for i in range(warmup + repeat):
            t0 = time.perf_counter()
            fn()
            elapsed = time.perf_counter() - t0
            if i == 0:
                check_budget(elapsed, warmup + repeat - 1, max_seconds, desc)
            if i >= warmup:
                times.append(elapsed)
            shown.update()
        latency = Latency.of(times, warmup)
        if bar is None:
            shown.done = f"{desc}: {latency}"
    return latency


def round_robin(calls: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    """``{label: [seconds per round]}``: one warm-up each, then each called once per round, in turn, so that
    whatever else the machine does falls on every call alike (the search's finals)."""
    for call in calls.values():
        call()
    times: dict[str, list[float]] = {label: [] for label in calls}
    for _ in range(rounds):
        for label, call in calls.items():
            t0 = time.perf_counter()
            call()
            times[label].append(time.perf_counter() - t0)
    return times
