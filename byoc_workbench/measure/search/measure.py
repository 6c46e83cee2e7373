"""Measuring one candidate placement, and the cache that makes a repeated search cheap.

:func:`measure_placement` builds a placement (:meth:`.placement.Plan.stages`), times it
with the latency map's instrumented runs (:func:`byoc_workbench.measure.time.timing.profile`),
and splits the time into each segment's :class:`Cost`: for an offloaded
segment its compute and the crossings into and out of its backend, as the
runner's marks measure them; for a segment on TVM the host kernels its ops
became (found through :func:`.placement.inlined`), per member. What is left
(host ops no rule claims, the VM's builtins and its dispatch between calls)
is the build's *rest*. A build whose first run takes longer than ``slow_s``
(TVM alone on the SSD: tens of seconds untuned) is run that once, instrumented.

:class:`Cache` keeps costs by content: a segment's cost under the structural
hash of its subgraph (ops, attributes, constants), its backend and options,
and the machine (:func:`~byoc_workbench.measure.machine.machine_key`); a build's
record under the model's content and the placement. So a repeated search re-measures only what changed.

:class:`Measurements` holds one search's measurements: each placement it needs,
from the cache or built and timed now, and the cost of each segment on each
backend that the shortest path ranks placements by. It keeps the :data:`FINALISTS`
fastest builds that passed, so that the finals time them without building them again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.core.files import cache_dir, intact, no_cache, read_arrays, write_arrays, write_sealed
from byoc_workbench.flow import summary
from byoc_workbench.measure.check.compare import TOLERANCE, check_outputs
from byoc_workbench.measure.machine import machine_key
from byoc_workbench.measure.search.placement import TVM, Plan, inlined
from byoc_workbench.measure.time import timing
from byoc_workbench.stages import STAGES

logger = logging.getLogger(__name__)

SLOW_S = 2.0  # a first run longer than this is not repeated: the instrumented run is the measurement
FINALISTS = 3  # the fastest that gave TVM alone's outputs: in the finals, and their builds kept alive for them
# A build record's shape, part of its key: from 2 each cost says the precision it ran at, which an older
# record lacks (a reduced precision's row would not know what ran), so it is measured again rather than read.
RECORD = 2


@dataclasses.dataclass
class Cost:
    """What one segment cost per run on one backend, in seconds."""

    backend: str
    compute_s: float = 0.0
    in_s: float = 0.0
    out_s: float = 0.0
    members_s: list = dataclasses.field(default_factory=list)  # on tvm: the host time of each member
    warm: bool = True  # False: from a single cold run (a slow build run once)
    refused: str = ""  # why the backend would not take it (it then ran on the host)
    precision: str = ""  # what its backend inferred in, for one that takes a precision (Compiled.precision)

    @property
    def total_s(self) -> float:
        return float("inf") if self.refused else self.compute_s + self.in_s + self.out_s

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> Cost:
        return cls(**d)


@dataclasses.dataclass
class Measured:
    """One placement built and timed: each segment's cost, the rest, end to end, and the outputs' check."""

    assign: dict  # label -> backend
    costs: dict  # label -> Cost
    end_to_end_s: float
    rest_s: float
    runs: int
    warm: bool
    build_s: float
    check: dict | None = None  # the outputs against TVM alone's (``compare.check_outputs``)

    def precision_ran(self) -> dict[str, str]:
        """``{backend: precision}``: what each backend that takes a precision inferred in, as its compiled
        records say (OpenVINO asked for bf16 runs f32 on a CPU without it)."""
        return {c.backend: c.precision for c in self.costs.values() if c.precision and not c.refused}

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["costs"] = {k: c.to_json() for k, c in self.costs.items()}
        return out

    @classmethod
    def from_json(cls, d: dict) -> Measured:
        return cls(**(d | {"costs": {k: Cost.from_json(c) for k, c in d["costs"].items()}}))


class PlacementKey(NamedTuple):
    """A placement's key in the search's cache, and the content hash of each of its labels."""

    key: str
    contents: dict[str, str]


def measure_placement(
    plan, subject, assign: dict, options=None, runs: int = 10, reference=None, slow_s: float = SLOW_S
):
    """Build and time the placement ``assign``; returns ``(Measured, outputs, Built, Profile)``.

    ``reference`` (TVM alone's outputs) makes ``Measured.check`` say whether
    the outputs equal it within the project's tolerance.
    """
    t0 = time.perf_counter()
    stages = plan.stages(assign, options)
    built = timing.build(stages, mark=plan.mark)
    build_s = time.perf_counter() - t0
    outputs: list = []
    profile = timing.profile(built, subject.inputs, runs=1, warmup=0, plain=False, outputs=outputs)
    warm = profile.end_to_end_s < slow_s
    if warm:  # the quick run was the warm-up
        profile = timing.profile(built, subject.inputs, runs=runs, warmup=1, outputs=outputs)
    costs = _costs(plan, assign, stages, profile, warm)
    rest = profile.end_to_end_s - sum(c.total_s for c in costs.values() if not c.refused)
    check = None
    if reference is not None:
        check = check_outputs(reference, outputs, TOLERANCE, subject.detection)
    measured = Measured(dict(assign), costs, profile.end_to_end_s, rest, profile.runs, warm, build_s, check)
    return measured, outputs, built, profile


def _costs(plan, assign: dict, stages: list, profile, warm: bool) -> dict:
    """Each segment's :class:`Cost` from a profile of its placement's build."""
    segments = {s.function: s for s in plan.segments(assign)}
    codegen = stages[STAGES.index("codegen")]
    refused = {n: why for n, why in codegen.skipped.items() if n in segments}
    costs = {}
    for fn, s in segments.items():
        backend = assign[s.label]
        ran = codegen.generated[fn].precision if fn in codegen.generated else ""
        costs[s.label] = Cost(backend, warm=warm, refused=refused.get(fn, ""), precision=ran)
        if backend == TVM:
            costs[s.label].members_s = [0.0] * (s.stop - s.start)
    by_var = {var: (fn, member) for fn, pairs in inlined(stages).items() for var, member in pairs}
    for e in profile.entries:
        site = e.site
        if site is None:
            continue
        if e.kind in ("subgraph", summary.BOUNDARY) and site.name in segments:
            cost = costs[segments[site.name].label]
            field = {"in": "in_s", "out": "out_s"}.get(e.phase, "compute_s")
            setattr(cost, field, getattr(cost, field) + e.time_s)
        elif e.kind == "kernel" and site.var is not None and site.var in by_var:
            fn, member = by_var[site.var]
            cost = costs[segments[fn].label]
            cost.compute_s += e.time_s
            if 0 <= member < len(cost.members_s):
                cost.members_s[member] += e.time_s
    return costs


def _from_record(record: dict, assign: dict, contents: dict) -> Measured | None:
    """A cached build's measurement for ``assign``, or None for a record that is not one (foreign, torn).

    Its labels may be numbered otherwise: costs go by content (in label order).
    """
    try:
        old = sorted((c, label) for label, c in record["contents"].items())
        new = sorted((c, label) for label, c in contents.items())
        costs = {label: record["measured"]["costs"][was] for (_, label), (_, was) in zip(new, old)}
        return Measured.from_json(record["measured"] | {"assign": dict(assign), "costs": costs})
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        logger.warning("search cache: a record is not a measurement (%s); measuring again", err)
        return None


# --- the cache -----------------------------------------------------------------------


def json_key(*parts) -> str:
    """A stable hex key for JSON-able parts."""
    return hashlib.sha1(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


class Cache:
    """Measurements by content, as small JSON files under ``$BYOC_WORKBENCH_CACHE/search``.

    ``enabled=False`` reads nothing (every measurement is taken afresh) but
    still writes, so the next search can use them. ``measures`` says whether what it lacks is measured
    (a search with ``only_cached`` measures nothing), and so what its line on a damaged entry says.
    """

    def __init__(self, root: os.PathLike | None = None, enabled: bool = True):
        self.root = Path(root) if root is not None else cache_dir("search")
        self.enabled = enabled and not no_cache()  # BYOC_WORKBENCH_NO_CACHE=1 reaches this cache too
        self._unwritable = self._warned_damage = False
        self.measures = True
        self.machine = json_key(machine_key())
        self.hits = 0
        self.misses = 0

    def _path(self, kind: str, key: str, suffix: str = ".json") -> Path:
        return self.root / kind / f"{key}{suffix}"

    def get(self, kind: str, key: str):
        """The value kept under ``key``, or None: missing, or damaged (torn, retyped, foreign, or not matching the
        seal it was written with), which is said once per search and never trusted."""
        path = self._path(kind, key)
        if self.enabled and os.path.lexists(path):  # a FIFO, a folder or a link to nowhere there is damage too
            value = _read(path)
            if value is not None:
                self.hits += 1
                return value
            self._damaged(path)
        self.misses += 1
        return None

    def has(self, kind: str, key: str) -> bool:
        """Whether :meth:`get` would look at a file (without reading it or counting a hit)."""
        return self.enabled and self._path(kind, key).is_file()

    def put(self, kind: str, key: str, value) -> None:
        self._keep(lambda: write_sealed(self._path(kind, key), json.dumps(value, sort_keys=True)))

    def _damaged(self, path: Path) -> None:
        if not self._warned_damage:
            then = "it is measured again" if self.measures else "it is not used (only cached measurements asked for)"
            logger.warning("search cache: %s is damaged; %s", path, then)
        self._warned_damage = True

    def _keep(self, write) -> None:
        """``write()`` a measurement; where the cache cannot be written, say so once and carry on without it."""
        try:
            write()
        except OSError as err:
            if not self._unwritable:
                logger.warning("search cache: nothing is kept in %s (%s); the search measures on", self.root, err)
            self._unwritable = True

    def get_arrays(self, key: str) -> list | None:
        """TVM alone's outputs kept under ``key``; None when missing or damaged (its seal: :func:`files.intact`)."""
        path = self._path("reference", key, ".npz")
        if not self.enabled or not os.path.lexists(path):  # a FIFO there is damaged, not "not cached"
            return None
        if not intact(path):
            self._damaged(path)
            return None
        return read_arrays(path)

    def put_arrays(self, key: str, arrays: list) -> None:
        path = self._path("reference", key, ".npz")
        self._keep(lambda: write_arrays(path, arrays))


def _read(path: Path):
    """The value of an entry :meth:`Measurements.put` sealed, or None for any entry that is not whole, as written
    and under its own key (:func:`byoc_workbench.core.files.intact`)."""
    if not intact(path):
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


# --- one search's measurements -------------------------------------------------------


class NotCached(WorkbenchError):
    """``only_cached`` was asked and a measurement the search needs is not in the cache."""


class Measurements:
    """One search's measurements: what is cached, what was measured, and each segment's cost."""

    def __init__(self, plan: Plan, subject, cache: Cache, options: dict, runs: int, only_cached: bool, progress):
        self.plan, self.subject, self.cache = plan, subject, cache
        self.options, self.runs, self.only_cached, self.progress = options, runs, only_cached, progress
        cache.measures = not only_cached
        self.model_key = subject.model_key()
        self.reference = None
        self.records: list = []  # (what, Measured), every build this search used
        self.frozen = False  # once placements are ranked, builds check predictions and teach nothing
        self.costs: dict = {}  # (content, backend) -> Cost
        self.contents: dict = {}  # label -> content hash, for the labels seen
        self.built = 0
        self.steps: list = []  # {"what", "s", "cached"}: where the search's time went
        self.fetched: dict = {}  # key -> (record, cached): builds measured as tasks on a Ray cluster
        self.cluster = None  # the search's tasks on a Ray cluster (tasks.RayTasks), when it runs on one
        self.alive: dict = {}  # key -> (end-to-end seconds, Built): the FINALISTS fastest that passed

    def placement_key(self, assign: dict, options: dict | None = None) -> PlacementKey:
        """:class:`PlacementKey` (``key``, ``contents``): the cache's key of placement ``assign`` (built with
        ``options``, default the search's), and each of its labels' content."""
        contents = self.plan.contents(assign)
        # By content: the same subgraphs on the same backends in the same model are the same build,
        # whatever the rules numbered them; a rule that changes no subgraph re-measures nothing.
        placed = sorted((contents[label], backend) for label, backend in assign.items())
        # The runs too: a median of 100 runs is another measurement than one of 3 (--runs).
        key = json_key(RECORD, self.cache.machine, self.model_key, placed, self._options(options), self.runs)
        return PlacementKey(key, contents)

    def _options(self, options: dict | None) -> dict:
        """The search's options, with ``options`` in place of some."""
        return {**self.options, **(options or {})}

    def need(self, assign: dict, what: str, reference: bool = False, options: dict | None = None) -> Measured:
        """The measurement of placement ``assign``: from the cache, else built and timed now.

        ``reference=True``: this build is TVM alone, whose outputs every other
        build is checked against; they are cached with it. ``options`` replace
        some of the search's for this build (a precision), and are part of its key.
        """
        t0 = time.perf_counter()
        options = self._options(options)
        key, contents = self.placement_key(assign, options)
        self.contents.update(contents)
        fetched = self.fetched.pop(key, None)
        if fetched and self.cache.enabled:  # needed again, it is read as the cache's would be
            self.fetched[key] = (fetched[0], True)
        record = fetched[0] if fetched else self.cache.get("build", key)
        if reference:
            self.reference = self.cache.get_arrays(key)
            record = record if self.reference is not None else None
        measured = _from_record(record, assign, contents) if record is not None else None
        if measured is None:
            record = None
            if self.only_cached:
                raise NotCached(
                    f"the search needs a measurement that is not cached ({what})",
                    "run it once with measuring on (byoc-workbench search, or search(..., only_cached=False))",
                )
            self._say(f"measuring {what}")
            measured, outputs, built, _ = measure_placement(
                self.plan, self.subject, assign, options, self.runs, self.reference
            )
            if reference:
                self.reference = outputs
                measured.check = {"equal": True, "max_rel": 0.0, "max_abs": 0.0, "tolerance": 0.0}
                self.cache.put_arrays(key, outputs)
            if measured.check and measured.check["equal"]:
                self._keep_alive(key, measured.end_to_end_s, built)
            self.built += 1
            if not any(c.refused for c in measured.costs.values()):  # a refusal is asked again, never kept
                self.cache.put("build", key, {"measured": measured.to_json(), "contents": contents})
        if fetched and not fetched[1] and record is not None:  # measured by this search's task, on the cluster
            self.built += 1
            record = None
        if not self.frozen:
            for label, cost in measured.costs.items():
                self._add_cost(contents[label], cost)
        self.records.append((what, measured, not self.frozen))
        self.steps.append({"what": what, "s": round(time.perf_counter() - t0, 3), "cached": record is not None})
        return measured

    def _keep_alive(self, key: str, seconds: float, built) -> None:
        self.alive[key] = (seconds, built)
        for slowest in sorted(self.alive, key=lambda k: self.alive[k][0])[FINALISTS:]:
            del self.alive[slowest]  # its compiled subgraphs are released with it

    def build(self, assign: dict, options: dict | None = None):
        """Placement ``assign``'s :class:`~byoc_workbench.measure.time.timing.Built`: the one its measurement
        built, when kept alive, else built now."""
        options = self._options(options)
        kept = self.alive.get(self.placement_key(assign, options)[0])
        return kept[1] if kept else timing.build(self.plan.stages(assign, options), mark=self.plan.mark)

    def learn(self, measured: Measured) -> None:
        """Let an end-to-end build's costs, measured in place, join its segments' costs (:mod:`.learn`)."""
        for label, cost in measured.costs.items():
            if not cost.refused and label in self.contents:
                self._add_cost(self.contents[label], cost)

    def _add_cost(self, content: str, cost: Cost) -> None:
        """Keep one cost per segment and backend: warm measurements over a cold one, the mean of warm ones."""
        key = (content, cost.backend)
        old = self.costs.get(key)
        if old is None or (cost.warm and not old.warm) or cost.refused:
            self.costs[key] = cost
        elif cost.warm == old.warm and not old.refused:
            mean = Cost(cost.backend, warm=cost.warm, precision=cost.precision)
            for f in ("compute_s", "in_s", "out_s"):
                setattr(mean, f, (getattr(old, f) + getattr(cost, f)) / 2)
            if old.members_s and cost.members_s:
                mean.members_s = [(a + b) / 2 for a, b in zip(old.members_s, cost.members_s)]
            self.costs[key] = mean

    def cost(self, label: str, backend: str) -> float | None:
        """The measured seconds of a segment on a backend; on TVM, a piece's share of its unit's host time."""
        seg = self.plan.segment(label)
        if label in self.contents:
            found = self.costs.get((self.contents[label], backend))
            if found is not None:
                return found.total_s
        if backend == TVM and not seg.whole:
            whole = self.costs.get((self.contents.get(seg.unit), TVM))
            if whole is not None and len(whole.members_s) == seg.size:
                return sum(whole.members_s[seg.start : seg.stop])
        return None

    def whole_cost(self, unit: str, backend: str) -> Cost | None:
        return self.costs.get((self.contents.get(unit), backend))

    def rest_s(self) -> float:
        """What a build costs besides its segments: the median over the warm builds (all when none is warm)."""
        learnt = [m for _, m, learns in self.records if learns]
        rests = [m.rest_s for m in learnt if m.warm] or [m.rest_s for m in learnt]
        return statistics.median(rests) if rests else 0.0

    def predicted(self, assign: dict) -> float:
        total = self.rest_s()
        for label, backend in assign.items():
            cost = self.cost(label, backend)
            total += cost if cost is not None else float("nan")
        return total

    def _say(self, text: str) -> None:
        logger.info("search %s: %s", self.subject.name, text)
        if self.progress:
            print(f"search: {text}", file=sys.stderr, flush=True)
