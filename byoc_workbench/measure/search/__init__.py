"""Let the measurements choose: a placement search across backends (Collage on Relax).

``search(load({"kind": "demo"}))`` measures candidate placements of a model's
units on each backend (``onnxruntime``, ``openvino``, ``tvm`` for the host),
picks the cheapest by a shortest path over the graph's order, builds it and
checks it against TVM alone. See :mod:`.core` for the steps, :mod:`.placement`
for units and segments, :mod:`.measure` for the measurements and their cache.

:func:`measure_candidate` measures one candidate from a serialisable
description, in this process or another one: it is the entry point for
running a search's measurements on a distributed engine: ``search(...,
ray_address="auto")`` runs them as Ray tasks (:mod:`.tasks`).
"""

from __future__ import annotations

import functools
import json
import os
from typing import Any

from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.measure.machine import machine
from byoc_workbench.measure.search.core import DEFAULT_BACKENDS, SearchOptions, check_backends, plan_for, search
from byoc_workbench.measure.search.measure import Cache, Cost, Measured, Measurements, NotCached, measure_placement
from byoc_workbench.measure.search.placement import Plan, Segment
from byoc_workbench.measure.search.result import Row, SearchResult
from byoc_workbench.subjects import Subject, load, of

__all__ = [
    "DEFAULT_BACKENDS",
    "Cache",
    "Cost",
    "Measured",
    "NotCached",
    "SearchOptions",
    "Plan",
    "Row",
    "SearchResult",
    "Segment",
    "Subject",
    "check_backends",
    "load",
    "measure_candidate",
    "measure_placement",
    "of",
    "plan_for",
    "search",
]


def measure_candidate(description: dict) -> dict[str, Any]:
    """Measure one candidate placement from a serialisable description; returns plain JSON.

    ``description`` is ``{"model": <a model description, see .subject>,
    "backends": [...], "assign": {label: backend}, "options": {"precision":
    "f32"}, "runs": 10}``; with no ``assign``, it measures every unit on TVM
    (TVM alone). The result is :meth:`Measured.to_json` (each segment's cost,
    the rest, end to end), plus ``machine`` and ``units``, so results from many
    machines can be gathered and searched over (:func:`byoc_workbench.measure.search.paths.k_best`).
    It imports the model itself (once per process and model), so it can run in a
    fresh process, e.g. as a Ray task: ``search(..., ray_address="auto")`` runs
    a search's builds so (:mod:`.tasks`). With ``"reference"`` (TVM alone's
    outputs) ``check`` says whether the outputs are the same; with ``"cache"``
    the measurement goes through this machine's search cache (read only when
    true, always written), as a search's builds do, and ``cached`` says whether it was read.
    """
    if not isinstance(description, dict) or "model" not in description:
        raise WorkbenchError("A candidate's description needs a model", 'pass {"model": {"kind": "demo"}, ...}')
    subject = _loaded(json.dumps(description["model"], sort_keys=True), _stamp(description["model"]))
    plan = plan_for(subject, check_backends(description.get("backends", DEFAULT_BACKENDS)))
    assign = description.get("assign") or {u: "tvm" for u in plan.units}
    options, runs, reference = (
        description.get("options") or {},
        int(description.get("runs", 10)),
        description.get("reference"),
    )
    cached = False
    if "cache" in description:
        session = Measurements(plan, subject, Cache(enabled=bool(description["cache"])), options, runs, False, False)
        session.reference = reference
        measured = session.need(assign, description.get("what", "a candidate"))
        cached = session.built == 0
    else:
        measured = measure_placement(plan, subject, assign, options, runs, reference)[0]
    return measured.to_json() | {"machine": machine(), "units": plan.units, "model": subject.name, "cached": cached}


def _stamp(model: dict) -> float | None:
    """When the model's file last changed (None for a model without one): a changed file is loaded again."""
    path = model.get("path") if isinstance(model, dict) else None
    return os.stat(path).st_mtime if path and os.path.exists(path) else None


@functools.lru_cache(maxsize=2)
def _loaded(model: str, stamp: float | None) -> Subject:
    """The subject a description (as JSON) names, loaded once per process (the SSD's import: about 15 s)."""
    return load(json.loads(model))
