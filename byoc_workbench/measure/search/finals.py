"""The finals: the fastest placements timed again, round-robin, beside the runtimes run whole.

Each placement built end to end was timed once, on its own, at its own moment;
a machine whose speed drifts by tens of percent within an hour can rank two
such times either way. So the fastest few are timed again with the whole-model
runtimes (ONNX Runtime and OpenVINO on the model's ONNX form) in rounds: one
run of each per round, several rounds, in one process, so drift moves them all
alike. The chosen placement is the finalist with the least median; its
speedups over the runtimes run whole come from the same rounds.

Nothing is built twice for them: a finalist measured in this process is the
build its measurement made (:meth:`.measure.Measurements.build`), and the runtimes
run whole are opened once, for the anchors' timing and the finals alike
(:func:`anchors_and_finals`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import statistics
import time
from typing import Any, NamedTuple

from byoc_workbench.core.text import seconds
from byoc_workbench.measure.bench.anchors import Runs, subject_anchors, subject_runs
from byoc_workbench.measure.search.measure import FINALISTS, NotCached, json_key
from byoc_workbench.measure.time import clock, timing

FINAL_ROUNDS = 7  # rounds of the finals: each finalist and anchor runs once per round
SLOWER = 3.0  # a placement measured this many times slower than the fastest is not a finalist


@dataclasses.dataclass
class Final:
    """One finalist's times over the rounds: a placement (``what`` names its row) or a runtime run whole."""

    what: str
    times: list
    placement: bool = True

    @property
    def median_s(self) -> float:
        return statistics.median(self.times)

    @property
    def spread(self) -> float:
        """(max - min) / median over the rounds: how far apart the rounds were."""
        return (max(self.times) - min(self.times)) / self.median_s if self.median_s else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "what": self.what,
            "placement": self.placement,
            "median_s": self.median_s,
            "min_s": min(self.times),
            "max_s": max(self.times),
            "spread": self.spread,
            "rounds": len(self.times),
        }


class Finals(NamedTuple):
    """The finals: each finalist and runtime run whole, timed, and why each runtime that could not run skipped."""

    finals: list[Final]
    skipped: dict[str, str]


def finalists(rows: list, n: int = FINALISTS) -> list:
    """The ``n`` fastest rows measured end to end whose outputs are TVM alone's, one per placement."""
    return [r for r, why in _heats(rows, n) if not why]


def left_out(rows: list, row, n: int = FINALISTS) -> str:
    """Why ``row``, measured end to end with TVM alone's outputs, is not among :func:`finalists` ("" if it is)."""
    return next((why for r, why in _heats(rows, n) if r is row), "")


def _heats(rows: list, n: int) -> list:
    """``[(row, why it is not a finalist, or "")]`` for each row that passed, by its own end-to-end measurement."""
    passed = sorted((r for r in rows if r.equal and r.measured_s and not r.rejected), key=lambda r: r.measured_s)
    out: list = []
    for r in passed:
        out.append((r, _why_not(r, [o for o, why in out if not why], passed[0], n)))
    return out


def _why_not(r, picked: list, fastest, n: int) -> str:
    """Why ``r`` does not join the finalists ``picked`` so far ("" if it does)."""
    ran = f"its own end-to-end measurement, {seconds(r.measured_s)}, was"
    if r.measured_s > SLOWER * fastest.measured_s:
        return f"{ran} over {SLOWER:g}x that of {fastest.what}, {seconds(fastest.measured_s)}"
    if len(picked) == n:
        return f"{ran} slower than the {n} finalists' ({', '.join(o.what for o in picked)})"
    # bf16 asked where OpenVINO ran f32 is the f32 placement again: one of the two runs
    again = next((o for o in picked if (r.assign, r.precision_ran) == (o.assign, o.precision_ran)), None)
    return f"it is {again.what} again, at the same precisions" if again else ""


def run_finals(session, rows: list, whole=None, rounds: int = FINAL_ROUNDS, n: int = FINALISTS) -> Finals:
    """:class:`Finals` (``finals``, ``skipped``): the finalists of ``rows`` and the whole-model runtimes,
    timed round-robin.

    ``whole()``, when given, returns the runtimes run whole as ``anchors.subject_runs``
    yields them (opened once for the anchors and the finals). ``skipped`` is ``{label: why}`` for a runtime
    that could not run the model whole.
    """
    picked = finalists(rows, n)
    if not picked:
        return Finals([], {})
    placed = []
    for r in picked:  # by content, as the search's cache keys a build
        contents = session.plan.contents(r.assign)
        placed.append([r.precision, *sorted((contents[label], backend) for label, backend in r.assign.items())])
    key = json_key(session.cache.machine, session.model_key, placed, session.options, rounds, whole is not None)
    found = _cached(session.cache.get("finals", key), picked)
    if found is not None:  # the same finalists on the same machine: read, not run again
        return found
    if session.only_cached:
        # measurements two searches wrote at once may pick finalists neither timed, beside both sets' finals
        names = "; ".join(r.what for r in picked)
        why = f"the finals of the finalists the cached measurements now choose ({names}) are not cached"
        raise NotCached(why, "run the search once with measuring on")
    session._say(f"the finals: {len(picked)} placements and the runtimes run whole, {rounds} rounds")
    args = timing.tensors(session.subject.inputs)
    runs, built = {}, []
    for r in picked:
        b = session.build(r.assign, {"precision": r.precision})  # OpenVINO's and torch's, as the row was measured
        built.append(b)  # kept alive: its compiled subgraphs are released with it
        runs[r.what] = (b.vm["main"], True)
    skipped: dict = {}
    if whole is not None:
        found, skipped = whole()
        runs.update({label: (run, False) for label, run in found.items()})
    times = clock.round_robin({label: _call(fn, args, placement) for label, (fn, placement) in runs.items()}, rounds)
    finals = [Final(label, times[label], placement) for label, (_, placement) in runs.items()]
    session.cache.put("finals", key, {"finals": [f.to_json() | {"times": f.times} for f in finals], "skipped": skipped})
    return Finals(finals, skipped)


def _cached(found, picked: list) -> Finals | None:
    """:class:`Finals` from a cache record, or None when there is none or it is not one.

    The rows' names may differ from the cached ones (ranks move): placements are matched in order.
    """
    try:
        whats = [r.what for r in picked] + [f["what"] for f in found["finals"][len(picked) :]]
        finals = [Final(w, list(f["times"]), f["placement"]) for w, f in zip(whats, found["finals"])]
        return Finals(finals, found["skipped"])
    except (KeyError, TypeError, ValueError):
        return None


def _call(fn, args, placement: bool):
    return (lambda: fn(*args)) if placement else fn


def anchors_and_finals(s, rows: list, baseline: dict, anchors: bool, notes: list) -> Finals:
    """The :class:`Finals`, once the whole-model anchors are timed into ``baseline`` (with
    ``anchors``). The runtimes run whole are opened once for both, and only when one of them is not cached."""
    with contextlib.ExitStack() as stack:
        opened: list = []

        def whole() -> Runs:
            if not opened:
                opened.append(stack.enter_context(subject_runs(s.subject)))
            return opened[0]

        if anchors:
            t0 = time.perf_counter()
            baseline.update(_anchors(s, whole, notes))
            s.steps.append({"what": "the whole-model anchors", "s": round(time.perf_counter() - t0, 3)})
        t0 = time.perf_counter()
        found = run_finals(s, rows, whole if anchors else None)
        s.steps.append({"what": "the finals", "s": round(time.perf_counter() - t0, 3)})
    s.alive.clear()  # the finalists' builds, and their compiled subgraphs, released
    return found


def _anchors(s, whole, notes: list) -> dict:
    key = json_key(s.cache.machine, s.model_key, "anchors", s.runs)
    found = s.cache.get("anchors", key)
    if found is None:
        if s.only_cached:
            raise NotCached("the whole-model anchors are not cached", "run the search once with measuring on")
        s._say("timing the whole-model anchors")
        entries, _, skipped = subject_anchors(s.subject, s.runs, whole())
        found = {"entries": entries, "skipped": skipped}
        s.cache.put("anchors", key, found)
    for label, why in found["skipped"].items():
        notes.append(f"{label} skipped: {why}")
    for label, entry in found["entries"].items():
        if entry.get("note"):
            notes.append(f"{label}: {entry['note']}")
    return {label: e["median_s"] for label, e in found["entries"].items()}
