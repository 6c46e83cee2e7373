"""The shortest path over the graph's order: the cheapest placements, from measured costs.

Within a unit, its seams and its two ends are the nodes of a small graph in
binding order, and an edge from node ``a`` to node ``b`` is the segment
``members[a:b]`` on one backend, weighted by what it was measured to cost
(compute and both crossings offloaded; its host kernels on TVM). A path from
0 to the unit's size is one way to place the unit; dynamic programming over
the nodes in order keeps the ``k`` cheapest paths into each. Units follow
one another in the graph's order and their costs add (the rest of a build is
common to every placement), so the ``k`` cheapest placements are the ``k``
cheapest sums of one path per unit (:func:`k_best`).
"""

from __future__ import annotations

import heapq
import itertools
import math

from byoc_workbench.measure.search.placement import TVM, Segment


def unit_paths(unit: str, size: int, seams, backends, cost_of, k: int | None = None) -> list:
    """The ``k`` cheapest ``(seconds, ((label, backend), ...))`` placements of one unit (all when ``k`` is None).

    ``cost_of(label, backend)`` is the measured cost of a segment, or None
    (or infinity) where it was not measured or the backend refused it.
    """
    nodes = [0, *sorted(set(seams)), size]
    best: list = [[(0.0, ())]]
    for j in range(1, len(nodes)):
        found = []
        for i in range(j):
            label = Segment(unit, nodes[i], nodes[j], size).label
            for backend in backends:
                cost = cost_of(label, backend)
                if cost is None or not math.isfinite(cost):
                    continue
                # Two pieces side by side on the host are the same build as one: that path is there already.
                found += [
                    (t + cost, path + ((label, backend),))
                    for t, path in best[i]
                    if not (backend == TVM and path and path[-1][1] == TVM)
                ]
        best.append(sorted(found)[:k] if k is not None else sorted(found))
    return best[-1]


def k_best(per_unit: list, k: int) -> list:
    """The ``k`` cheapest ``(seconds, path)`` combinations taking one path from each sorted list of ``per_unit``."""
    if not per_unit or any(not paths for paths in per_unit):
        return []
    start = (0,) * len(per_unit)
    heap = [(_total(per_unit, start), start)]
    seen = {start}
    out = []
    while heap and len(out) < k:
        total, idx = heapq.heappop(heap)
        out.append((total, tuple(step for u, i in enumerate(idx) for step in per_unit[u][i][1])))
        for u in range(len(idx)):
            nxt = idx[:u] + (idx[u] + 1,) + idx[u + 1 :]
            if nxt[u] < len(per_unit[u]) and nxt not in seen:
                seen.add(nxt)
                heapq.heappush(heap, (_total(per_unit, nxt), nxt))
    return out


def _total(per_unit: list, idx: tuple) -> float:
    return sum(per_unit[u][i][0] for u, i in enumerate(idx))


def every_placement(per_unit: list):
    """Every combination of one path per unit, as ``(seconds, path)``: the exhaustive check of :func:`k_best`."""
    for combo in itertools.product(*per_unit):
        yield sum(t for t, _ in combo), tuple(step for _, path in combo for step in path)


def placement_differs(assign: dict, other: dict) -> list:
    """What ``assign`` does otherwise than ``other``, e.g. ``["tensorrt_2: onnxruntime, not tvm"]``.

    A unit cut differently is named with its pieces on each side.
    """
    units = sorted({_unit(label) for label in (*assign, *other)})
    out = []
    for unit in units:
        mine = {k: v for k, v in assign.items() if _unit(k) == unit}
        theirs = {k: v for k, v in other.items() if _unit(k) == unit}
        if mine == theirs:
            continue
        if set(mine) == set(theirs) and len(mine) == 1:
            (label, backend), (theirs_backend,) = next(iter(mine.items())), theirs.values()
            out.append(f"{label}: {backend}, not {theirs_backend}")
        else:
            out.append(f"{_show(mine)}, not {_show(theirs)}")
    return out


def _unit(label: str) -> str:
    return label.split("[", 1)[0]


def _show(part: dict) -> str:
    return " + ".join(f"{k} on {v}" for k, v in part.items())
