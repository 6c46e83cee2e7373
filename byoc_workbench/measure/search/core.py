"""The placement search: candidates measured, the cheapest placement by a shortest path, then built and checked.

Collage (PLDI 2022; in TVM until Relay was removed) on Relax, measured rather
than estimated. For a model and a set of backends:

1. **TVM alone**, once: the reference outputs, and each unit's cost on the
   host from the instrumented run (per member, for the seams). On the SSD
   one untuned run takes tens of seconds, so it is run once, never more.
2. **Each backend alone**: every unit offloaded to it, one build per backend.
3. **The pruning choice**: the default prune rule's placement (units without
   a multiply-accumulate op on TVM), which also times those units warm on TVM.
4. **Seams**: each unit with a narrow cut (one tensor crossing) is cut where
   TVM's time map splits it evenly, and the pieces are measured on each backend
   in as many builds as there are backends (a Latin square).
5. **The shortest path** over the graph's order (:mod:`.paths`) ranks every
   placement these measurements cover, by the sum of its segments' measured
   costs (crossings included) plus the rest of a build.
6. The best placements are **built and measured end to end** (until one
   passes, and at least ``top``); one whose outputs differ from TVM alone's
   is rejected. Each prediction is reported beside its measurement, and the
   costs measured in place re-rank the rest (:mod:`.learn`).
7. **The finals** (:mod:`.finals`): the fastest few that pass are timed again,
   in the builds their measurements made, round-robin with the runtimes run
   whole (opened once for the anchors and the finals), in one process, so that
   the machine's drift moves them all alike. The least median is chosen, and
   its speedups over the runtimes come from the same rounds.

Every measurement goes through :func:`.measure.measure_placement` and the content-keyed
:class:`.measure.Cache`, so a repeat re-measures only what changed.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time

from byoc_workbench.backends import openvino, registry
from byoc_workbench.core import ir
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.flow.prune import no_mac, rule_name
from byoc_workbench.measure.check.compare import found_text
from byoc_workbench.measure.machine import machine
from byoc_workbench.measure.search import learn, paths, reduced, tasks
from byoc_workbench.measure.search.finals import anchors_and_finals, left_out
from byoc_workbench.measure.search.measure import Cache, Measured, Measurements
from byoc_workbench.measure.search.placement import TVM, Plan, Segment
from byoc_workbench.measure.search.result import Row, SearchResult

logger = logging.getLogger(__name__)

DEFAULT_BACKENDS = ("onnxruntime", "openvino", "tvm")
MAX_SPLIT_UNITS = 2  # the units cut at seams: the costliest on TVM's time map


def plan_for(subject, backends) -> Plan:
    """The units of ``subject`` for ``backends``: its rules, narrowed to what every offloading backend compiles."""
    rules = subject.workbench.rules
    for b in backends:
        if b != TVM:
            rules = registry.guard(b, rules)
    return Plan(subject.workbench.mod, rules, subject.mark)


def check_backends(backends) -> tuple[str, ...]:
    """``backends`` as a tuple of known names with at least one that offloads, or a one-line error."""
    names = tuple(dict.fromkeys(b.strip() for b in (backends.split(",") if isinstance(backends, str) else backends)))
    for b in names:
        if b in ("auto",):
            raise WorkbenchError("search takes named backends, not auto", "pass e.g. onnxruntime,openvino,tvm")
        registry.check_backend(b)
        why = registry.missing(b)
        if why:  # its placements would be TVM's, named after it
            raise WorkbenchError(f"{b} cannot run here: {why.cause}", f"leave {b} out of --backends, or {why.fix}")
    if not [b for b in names if b != TVM]:
        raise WorkbenchError(
            f"search needs a backend that offloads, got {', '.join(names) or 'none'}",
            "pass e.g. --backends onnxruntime,openvino,tvm",
        )
    return names


@dataclasses.dataclass(frozen=True, kw_only=True)
class SearchOptions:
    """How a search measures; :func:`search` takes them as keywords (a misspelt one is a TypeError)."""

    precision: str = "f32"  # besides f32, the best placements on OpenVINO or torch measured again at it
    runs: int = 10  # instrumented runs per build; each call's median is kept
    seams: int = 1  # seams per unit cut, 0 for none
    top: int = 3  # placements built and measured end to end (the chosen one among them)
    only_cached: bool = False  # measure nothing (NotCached if a measurement is missing)
    anchors: bool = True  # also time the whole-model anchors (runtimes run whole, MXNet for the SSD)
    ray_address: str | None = None  # "auto" or a cluster's address: each build a task alone on its node


def search(subject, backends=DEFAULT_BACKENDS, cache: Cache | None = None, progress=False, **options) -> SearchResult:
    """Search placements of ``subject`` over ``backends``; see the module's docstring for the steps.

    ``subject`` comes from :func:`.subject.load` (a description) or :func:`.subject.of` (a workbench and
    inputs); ``backends`` (a sequence or ``"a,b,c"``) are where units may go, ``tvm`` the host, and at least
    one must offload. Measurements are kept in ``cache`` (default ``$BYOC_WORKBENCH_CACHE/search``);
    ``options`` are :class:`SearchOptions`' fields.
    """
    t0 = time.perf_counter()
    opts = SearchOptions(**options)
    backends = _check(backends, opts)
    offload = [b for b in backends if b != TVM]
    cache = cache or Cache()
    plan = _placeable(plan_for(subject, backends), subject)
    s = Measurements(plan, subject, cache, {"precision": "f32"}, opts.runs, opts.only_cached, progress)
    cluster = opts.ray_address and not opts.only_cached
    s.cluster = tasks.RayTasks.start(s, backends, opts.ray_address) if cluster else None
    s.steps.append({"what": "the plan: units and their contents", "s": round(time.perf_counter() - t0, 3)})
    builds = _measurement_builds(s, backends, offload)
    # 4. seams where the time map splits a unit evenly; the pieces on each backend.
    cut = _seams(s, opts.seams)
    _measure_pieces(s, cut, offload, backends)
    # 5. the shortest path over the graph's order.
    allowed = list(backends) if TVM in backends else [*backends, TVM]  # a unit no backend takes stays on TVM
    rank = functools.partial(_ranked, s, cut, allowed, TVM in backends, max(opts.top, 5) * 2)
    ranked = rank()
    rest = s.rest_s()
    s.frozen = True
    # 6. the best ones built and measured end to end, checked against TVM alone.
    notes: list = []
    rows, chosen = _chosen(s, ranked, rest, opts.top, notes)
    rows += [_verdict(Row(a, p, what=w), m) for a, w, p, m in learn.relearn(s, rows, rank, rest, opts.top)]
    if opts.precision != "f32":
        rows += [_verdict(row, m) for row, m in reduced.variants(s, rows, opts.precision)]
        notes += reduced.not_run(rows, opts.precision)
    compared = _baseline(builds, offload, notes)
    baseline = {k: m.end_to_end_s for k, m in compared.items()}
    anchors = opts.anchors and subject.source is not None
    finals, skipped = anchors_and_finals(s, rows, baseline, anchors, notes)
    chosen = _by_finals(rows, chosen, finals, skipped, notes)
    for r in rows if chosen is not None else ():
        r.differs = paths.placement_differs(r.assign, chosen.assign) + reduced.precision_differs(r, chosen)
    if chosen is None:
        notes.append("no placement measured gave TVM alone's outputs: none is chosen")
    measurements = {"builds": s.built, "cache_hits": cache.hits, "cache_misses": cache.misses}
    measurements |= {"runs_per_build": opts.runs, "rest_s": rest, "steps": s.steps}
    tasks.collect(s, measurements, notes)
    return SearchResult(
        model=subject.name,
        backends=backends,
        precision=opts.precision,
        units=_units_json(s, cut, allowed),
        placements=rows,
        chosen=chosen,
        baseline=baseline,
        search_s=time.perf_counter() - t0,
        machine=machine(),
        measurements=measurements,
        notes=notes,
        mark=subject.mark,
        plan=plan,
        session=s,
        finals=finals,
        baseline_assign={k: m.assign for k, m in compared.items()},
    )


def _placeable(plan: Plan, subject) -> Plan:
    """``plan``, or the one-line error saying why there is nothing to place."""
    if not plan.units:
        raise WorkbenchError(
            f"No rule of target {subject.workbench.target.name} claims an op of {subject.name}: nothing to place",
            "switch some rules on, or choose another target",
        )
    return plan


def _check(backends, opts: SearchOptions) -> tuple:
    """``backends`` as a tuple, once the search's arguments are checked (a one-line error else)."""
    backends = check_backends(backends)
    if openvino.check_precision(opts.precision) != "f32" and not registry.take_precision(backends):
        takes = registry.take_precision(registry.choices())
        whose = " and ".join(f"{registry.pretty(b)}'s" for b in takes)
        raise WorkbenchError(
            f"precision {opts.precision} is {whose}; none is among the backends", f"add {' or '.join(takes)}"
        )
    if opts.runs < 1 or opts.seams < 0 or opts.top < 1:
        got = f"{opts.runs}, {opts.seams}, {opts.top}"
        raise WorkbenchError(f"runs, seams and top must be 1, 0 and 1 or more; got {got}", "pass 10, 1, 3")
    return backends


def _measurement_builds(s: Measurements, backends, offload: list) -> dict:
    """Steps 1 to 3: TVM alone once (the reference and each unit's host cost), each backend alone,
    and the pruning choice; ``{"alone": Measured, "on": {backend: Measured}, "pruned": Measured or None}``."""
    units = s.plan.units
    alone = s.need({u: TVM for u in units}, "TVM alone, once: the reference", reference=True)
    wanted = [({u: b for u in units}, f"each unit on {b}") for b in offload]
    if TVM in backends:
        macs = {u: any(op in ir.MAC_OPS for op in s.plan.regions[u].ops) for u in units}
        assign = {u: offload[0] if macs[u] else TVM for u in units}
        wanted.append((assign, f"pruned ({rule_name(no_mac())}, on {offload[0]})"))
    tasks.build_ahead(s, wanted)
    alone_on = {b: s.need(*w) for b, w in zip(offload, wanted)}
    pruned = s.need(*wanted[-1]) if TVM in backends else None
    return {"alone": alone, "on": alone_on, "pruned": pruned}


def _chosen(s: Measurements, ranked: list, rest: float, top: int, notes: list) -> tuple:
    """``(rows, chosen)``: the ranked placements measured end to end and the measurement builds, and the
    placement chosen (the first ranked one that passes, else the cheapest measured build that passed)."""
    rows, chosen = _end_to_end(s, ranked, rest, top)
    rows += _measurement_rows(s, rows)
    if chosen is None:  # every ranked placement broke the outputs: the cheapest measured build that did not
        passed = [r for r in rows if r.equal and r.measured_s is not None and not r.rejected]
        chosen = min(passed, key=lambda r: r.predicted_s) if passed else None
        if chosen is not None:
            notes.append(f"no ranked placement gave TVM alone's outputs: chosen instead, {chosen.what}")
    return rows, chosen


def _by_finals(rows: list, chosen, finals: list, skipped: dict, notes: list):
    """The finalist placement with the least median over the finals' rounds (``chosen`` when none ran)."""
    for label, why in skipped.items():
        notes.append(f"{label} not in the finals: {why}")
    placed = [f for f in finals if f.placement]
    if not placed:
        return chosen
    best = min(placed, key=lambda f: f.median_s)
    for r in rows:
        final = next((f for f in finals if f.what == r.what), None)
        if final is not None:
            r.final_s, r.spread = final.median_s, final.spread
    winner = next(r for r in rows if r.what == best.what)
    whole = [f for f in finals if not f.placement and f.median_s < best.median_s]
    for f in whole:
        tie = best.median_s - f.median_s < max(f.spread, best.spread) / 2 * best.median_s
        ran = "as fast as the fastest placement, within their spread," if tie else "faster than every placement"
        notes.append(
            f"{f.what} ran {ran} in the finals ({f.median_s * 1e3:.1f} ms against "
            f"{best.median_s * 1e3:.1f} ms, spread {f.spread:.0%} and {best.spread:.0%})"
        )
    if winner is not chosen and chosen.final_s is not None:
        notes.append(f"the finals chose {winner.what} over {chosen.what}, the shortest path's first")
    elif winner is not chosen:
        notes.append(
            f"{chosen.what}, the shortest path's first, was not in the finals: {left_out(rows, chosen)}; "
            f"chosen instead, the finals' fastest placement, {winner.what}"
        )
    return winner


def _baseline(builds: dict, offload: list, notes: list) -> dict:
    """The measurement builds the chosen placement is compared with, by label."""
    alone = builds["alone"]
    baseline = {"tvm": alone}
    if not alone.warm:
        notes.append(f"tvm: one instrumented run ({alone.end_to_end_s:.1f} s), TVM alone is not run twice")
    if builds["pruned"] is not None:
        baseline["pruned"] = builds["pruned"]
    for b, m in builds["on"].items():
        if _refused(m):  # not a time of b: the host ran what b refused
            notes.append(f"{b} alone is not timed: {_refused(m)}")
            continue
        baseline.setdefault("unpruned", m)
        baseline[f"{b}_alone"] = m
    return baseline


def _units_json(s: Measurements, cut: dict, allowed: list) -> list:
    """Each unit: its members, ops, seams and measured cost per backend."""
    return [
        {"name": u, "members": s.plan.size(u), "ops": len(s.plan.regions[u].ops), "seams": list(cut.get(u, ()))}
        | {"costs": {b: s.cost(u, b) for b in allowed}}
        for u in s.plan.units
    ]


def _measure_pieces(s: Measurements, cut: dict, offload: list, backends) -> None:
    """The units cut at seams, their pieces on each offloading backend: one build per backend (a Latin square)."""
    plan, tries = s.plan, []  # each try placed by the costs known before any: a batch
    for k in range(len(offload) if cut else 0):
        assign = {}
        for u in plan.units:
            if u not in cut:
                assign[u] = _best_warm(s, u, backends)
                continue
            nodes = [0, *cut[u], plan.size(u)]
            for j in range(len(nodes) - 1):
                assign[Segment(u, nodes[j], nodes[j + 1], plan.size(u)).label] = offload[(j + k) % len(offload)]
        tries.append((assign, f"cut at seams, try {k + 1} of {len(offload)} ({', '.join(sorted(cut))} in pieces)"))
    tasks.build_ahead(s, tries)
    for assign, what in tries:
        s.need(assign, what)


def _ranked(s: Measurements, cut: dict, allowed: list, host_allowed: bool, k: int) -> list:
    """The ``k`` cheapest placements by the measured costs: ``[(seconds, ((label, backend), ...))]``."""
    per_unit = []
    for u in s.plan.units:
        found = paths.unit_paths(u, s.plan.size(u), cut.get(u, ()), allowed, s.cost, k=k)
        if not host_allowed:  # tvm was not asked for: only where no backend takes a unit
            found = [p for p in found if all(b != TVM for _, b in p[1])] or found
        per_unit.append(found)
    return paths.k_best(per_unit, k)


def _end_to_end(s: Measurements, ranked: list, rest: float, top: int) -> tuple:
    """``(rows, chosen)``: the best placements built end to end until one passes and ``top`` are measured."""
    rows, chosen = [], None
    tasks.build_ahead(
        s, [(dict(p), f"the placement ranked {k}, end to end") for k, (_, p) in enumerate(ranked[:top], 1)]
    )
    for rank, (total, path) in enumerate(ranked, 1):
        row = Row(dict(path), total + rest, what=f"rank {rank}")
        if chosen is None or sum(r.measured_s is not None for r in rows) < top:
            what = f"the placement ranked {rank}, end to end"
            tasks.build_ahead(s, [(row.assign, what)])  # past the first top: one task more
            _verdict(row, s.need(row.assign, what))
            chosen = row if chosen is None and row.equal and not row.rejected else chosen
        elif rank > max(top, 5):
            break
        rows.append(row)
    return rows, chosen


def _measurement_rows(s: Measurements, rows: list) -> list:
    """The measurement builds as placements too (named on a ranked row they coincide with)."""
    more = []
    for what, m, learns in s.records:
        if not learns:  # a ranked placement's own end-to-end build
            continue
        same = next((r for r in rows + more if r.assign == m.assign), None)
        if same is None:
            more.append(_verdict(Row(m.assign, s.predicted(m.assign), what=what), m))
        elif what not in same.what:
            same.what += f" = {what}"
            if same.measured_s is None:
                _verdict(same, m)
    return more


def _verdict(row: Row, m: Measured) -> Row:
    """``row`` with the measured time of ``m``, the precisions that ran, and whether its outputs are TVM alone's."""
    row.measured_s, row.equal = m.end_to_end_s, bool(m.check and m.check["equal"])
    row.precision_ran = m.precision_ran()
    row.rejected = _refused(m) or ("" if row.equal else _why_not_equal(m.check))
    return row


def _refused(m: Measured) -> str:
    """Why a backend would not take its segment ("" if every one did): that segment ran on the host."""
    label, cost = next(((k, c) for k, c in m.costs.items() if c.refused), (None, None))
    return f"{cost.backend} refused {label}: {cost.refused}" if cost else ""


def _why_not_equal(check: dict | None) -> str:
    if check is None:
        return "not checked"
    if "detections" in check:
        return f"detections differ from TVM alone's ({found_text(check['detections'])} found)"
    return f"outputs differ from TVM alone's: max relative error {check['max_rel']:.2e} over {check['tolerance']:g}"


def _best_warm(s: Measurements, unit: str, backends) -> str:
    """The backend with the least cost known from a warm measurement (TVM's cold run aside)."""
    best = None
    for b in backends:
        c = s.whole_cost(unit, b)
        if c is not None and c.warm and not c.refused and (best is None or c.total_s < best[0]):
            best = (c.total_s, b)
    return best[1] if best else next(b for b in backends if b != TVM)


def _seams(s: Measurements, n: int) -> dict:
    """``{unit: [seam, ...]}``: narrow cuts where TVM's time map splits the costliest units evenly."""
    if n == 0:
        return {}
    out = {}
    candidates = []
    for u in s.plan.units:
        host = s.whole_cost(u, TVM)
        if host is None or len(host.members_s) < 2 or not sum(host.members_s) > 0:
            continue
        cuts = s.plan.narrow_cuts(u)
        if not cuts:
            continue
        cum = [0.0]
        for t in host.members_s:
            cum.append(cum[-1] + t)
        chosen = []
        for i in range(1, n + 1):
            target = cum[-1] * i / (n + 1)
            c = min((c for c in cuts if c not in chosen), key=lambda c: abs(cum[c] - target), default=None)
            if c is not None:
                chosen.append(c)
        if chosen:
            candidates.append((cum[-1], u, sorted(chosen)))
    for _, u, chosen in sorted(candidates, reverse=True)[:MAX_SPLIT_UNITS]:
        out[u] = chosen
    return out
