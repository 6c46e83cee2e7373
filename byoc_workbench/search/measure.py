"""Measuring one candidate placement, and the cache that makes a repeated search cheap.

:func:`measure` builds a placement (:meth:`.placement.Plan.stages`), times it
with the latency map's instrumented runs (:func:`byoc_workbench.timing.profile`),
and splits the time into each segment's :class:`Cost`: for an offloaded
segment its compute and the crossings into and out of its backend, as the
runner's marks measure them; for a segment on TVM the host kernels its ops
became (found through :func:`.placement.inlined`), per member. What is left
(host ops no rule claims, the VM's builtins and its dispatch between calls)
is the build's *rest*. A build whose first run takes longer than ``slow_s``
(TVM alone on the SSD: tens of seconds untuned) is run that once, instrumented.

:class:`Cache` keeps costs by content: a segment's cost under the structural
hash of its subgraph (ops, attributes, constants), its backend and options,
and the machine; a build's record under the model's content and the
placement. So a repeated search re-measures only what changed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from .. import runner, timing
from ..backends.base import cache_dir
from ..flow.stages import STAGES
from .placement import TVM, inlined

SLOW_S = 2.0  # a first run longer than this is not repeated: the instrumented run is the measurement


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

    @property
    def total_s(self) -> float:
        return float("inf") if self.refused else self.compute_s + self.in_s + self.out_s

    def to_json(self) -> dict:
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
    check: dict | None = None  # the outputs against TVM alone's (:func:`byoc_workbench.models.own.check_outputs`)

    def to_json(self) -> dict:
        out = dataclasses.asdict(self)
        out["costs"] = {k: c.to_json() for k, c in self.costs.items()}
        return out

    @classmethod
    def from_json(cls, d: dict) -> Measured:
        return cls(**(d | {"costs": {k: Cost.from_json(c) for k, c in d["costs"].items()}}))


def measure(plan, subject, assign: dict, options=None, runs: int = 10, reference=None, slow_s: float = SLOW_S):
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
        from ..models.own import TOLERANCE, check_outputs

        check = check_outputs(reference, outputs, TOLERANCE, subject.detection)
    measured = Measured(dict(assign), costs, profile.end_to_end_s, rest, profile.runs, warm, build_s, check)
    return measured, outputs, built, profile


def _costs(plan, assign: dict, stages: list, profile, warm: bool) -> dict:
    """Each segment's :class:`Cost` from a profile of its placement's build."""
    segments = {s.function: s for s in plan.segments(assign)}
    codegen = stages[STAGES.index("codegen")]
    refused = {n: why for n, why in _refusals(codegen).items() if n in segments}
    costs = {}
    for fn, s in segments.items():
        backend = assign[s.label]
        costs[s.label] = Cost(backend, warm=warm, refused=refused.get(fn, ""))
        if backend == TVM:
            costs[s.label].members_s = [0.0] * (s.stop - s.start)
    by_var = {var: (fn, member) for fn, pairs in inlined(stages).items() for var, member in pairs}
    for e in profile.entries:
        site = e.site
        if site is None:
            continue
        if e.kind in ("subgraph", timing.BOUNDARY) and site.name in segments:
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


def _refusals(codegen) -> dict:
    """``{subgraph: why}`` for the subgraphs the codegen stage sent back to the host (its notes say why)."""
    out = {}
    for note in codegen.notes:
        name, _, rest = note.partition(": not compiled, ")
        if rest:
            out[name] = rest
    return out


# --- the cache -----------------------------------------------------------------------


def machine_key() -> dict:
    """What a cached time depends on besides the code: the CPU, its cores and the runtimes' versions."""
    info = runner.machine()
    return {k: info.get(k) for k in ("cpu", "cores", "gpu", "tvm", "onnxruntime", "openvino", "tensorrt")}


def digest(*parts) -> str:
    """A stable hex key for JSON-able parts."""
    return hashlib.sha1(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


class Cache:
    """Measurements by content, as small JSON files under ``$BYOC_WORKBENCH_CACHE/search``.

    ``enabled=False`` reads nothing (every measurement is taken afresh) but
    still writes, so the next search can use them.
    """

    def __init__(self, root: os.PathLike | None = None, enabled: bool = True):
        self.root = Path(root) if root is not None else cache_dir("search")
        self.enabled = enabled
        self.machine = digest(machine_key())
        self.hits = 0
        self.misses = 0

    def _path(self, kind: str, key: str, suffix: str = ".json") -> Path:
        return self.root / kind / f"{key}{suffix}"

    def get(self, kind: str, key: str):
        path = self._path(kind, key)
        if self.enabled and path.is_file():
            try:
                value = json.loads(path.read_text())
            except (OSError, ValueError):  # a torn or foreign file is a miss, not an error
                value = None
            if value is not None:
                self.hits += 1
                return value
        self.misses += 1
        return None

    def put(self, kind: str, key: str, value) -> None:
        _atomic(self._path(kind, key), json.dumps(value).encode())

    def get_arrays(self, key: str) -> list | None:
        path = self._path("reference", key, ".npz")
        if not (self.enabled and path.is_file()):
            return None
        try:
            with np.load(path) as data:
                return [data[f"a{k}"] for k in range(len(data.files))]
        except (OSError, ValueError):
            return None

    def put_arrays(self, key: str, arrays: list) -> None:
        path = self._path("reference", key, ".npz")
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".npz", delete=False) as f:
            np.savez(f, **{f"a{k}": np.asarray(a) for k, a in enumerate(arrays)})
        os.replace(f.name, path)


def _atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a reader sees the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as f:
        f.write(data)
    os.replace(f.name, path)
