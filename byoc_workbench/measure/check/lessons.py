"""Builds timed and checked side by side: notebook 02's pruned-against-unpruned lesson.

It sits above :mod:`byoc_workbench.measure.time.timing` (the time per VM call) and
:mod:`byoc_workbench.measure.check.numerics` (each offloaded subgraph against TVM
alone), which build on each other in that order, and hands both to
:mod:`byoc_workbench.draw.latency` to draw.
"""

from __future__ import annotations

from byoc_workbench.draw import latency
from byoc_workbench.measure.check import numerics
from byoc_workbench.measure.time import timing


def timed_and_checked(
    builds: dict, runs: int = 10, compare=(), tolerance: float = 1e-3, collapse: bool = False
) -> latency.Lesson:
    """Profile each build (``{label: (Built, inputs)}``, e.g. pruned and unpruned) and compare those
    named in ``compare`` against TVM alone; the maps are drawn with the same legend rules.

    For notebook 02::

        found = {"pruned": model_build(workbench=wb), "unpruned": model_build(prune=False, workbench=wb)}
        lesson = lessons.timed_and_checked(found, compare=["pruned"], collapse=True)
        lesson           # the table, then each map with its tables (the pruned one checked against TVM alone)

    (``model_build`` is :func:`byoc_workbench.measure.bench.builds.model_build`.)
    """
    profiles, checks, reports = {}, {}, {}
    for label, (built, inputs) in builds.items():
        profiles[label] = timing.profile(built, inputs, runs=runs)
        if label in compare:
            checks[label] = numerics.compare(built, inputs, tolerance=tolerance)
        title = f"{label}: measured" + (f" — {built.mark}" if built.mark else "")
        reports[label] = latency.report(built, profiles[label], checks.get(label), collapse, title)
    return latency.Lesson(profiles, checks, reports)
