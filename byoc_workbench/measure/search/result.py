"""What a placement search found: its table's rows and the result the CLI, the widget and the notebook show."""

from __future__ import annotations

import dataclasses
from typing import Any

from byoc_workbench.draw import placements
from byoc_workbench.measure.search.placement import Plan, drawing
from byoc_workbench.measure.search.reduced import precision_differs


@dataclasses.dataclass
class Row:
    """One placement in the table: its assignment, predicted and measured time, and its outputs' verdict."""

    assign: dict
    predicted_s: float | None  # None at a reduced precision: the costs were measured at f32
    measured_s: float | None = None
    equal: bool | None = None
    rejected: str = ""
    what: str = ""  # "rank 1", "each on onnxruntime", "pruned", ...
    differs: list = dataclasses.field(default_factory=list)  # against the chosen placement
    final_s: float | None = None  # the median over the finals' rounds, for a finalist
    spread: float | None = None  # (max - min) / median over those rounds
    precision: str = "f32"  # asked of OpenVINO and torch: bf16 or f16 for a placement measured again (.reduced)
    precision_ran: dict = dataclasses.field(default_factory=dict)  # {backend: what it inferred in} (Measured's)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class SearchResult:
    """What :func:`search` found; ``to_json()`` is the CLI's ``--json``."""

    model: str
    backends: tuple
    precision: str
    units: list  # {"name", "members", "ops", "seams", "costs": {backend: seconds}}
    placements: list  # Row, ranked placements first, then the measurement builds
    chosen: Row | None
    baseline: dict  # label -> seconds
    search_s: float
    machine: dict
    measurements: dict
    notes: list
    mark: str = ""
    plan: Plan | None = dataclasses.field(default=None, repr=False)
    session: object = dataclasses.field(default=None, repr=False)  # the measurements, for cost()
    finals: list = dataclasses.field(default_factory=list)  # Final: the fastest, timed again round-robin
    baseline_assign: dict = dataclasses.field(default_factory=dict)  # label -> the placement a baseline timed
    # The chosen placement's time against each baseline, {"vs_<label>": ratio}: data for the formatters below.
    speedup: dict[str, float] = dataclasses.field(init=False)
    # Where each ratio's two times come from, once the chosen placement ran in the finals: {"vs_<label>": "in the
    # finals" (the same rounds) or "by their own measurements"}; {} without finals (all are their own).
    speedup_from: dict[str, str] = dataclasses.field(init=False)
    # {backend: precision}: what the backends ran at where the search's precision was asked of them ({} at f32, or
    # when no placement was measured again): {"openvino": "f32"} for bf16 asked on a CPU without it.
    precision_ran: dict[str, str] = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.speedup, self.speedup_from = self._speedup()
        at = [r.precision_ran for r in self.placements if r.precision == self.precision != "f32"]
        self.precision_ran = {b: p for ran in at for b, p in ran.items()}

    def cost(self, label: str, backend: str) -> float | None:
        """The measured seconds of a unit or segment on a backend (None: not measured)."""
        return self.session.cost(label, backend) if self.session is not None else None

    def to_json(self) -> dict[str, Any]:
        out = {
            "model": self.model,
            "backends": list(self.backends),
            "precision": self.precision,
            "precision_ran": self.precision_ran,
            "placements": [r.to_json() for r in self.placements],
            "chosen": self.chosen.to_json() if self.chosen else None,
            "baseline": self.baseline,
            "speedup": self.speedup,
            "units": self.units,
            "search_s": self.search_s,
            "measurements": self.measurements,
            "machine": self.machine,
            "notes": self.notes,
            "finals": [f.to_json() for f in self.finals],
            "fastest": self.fastest(),
        }
        if self.mark:
            out["weights"] = self.mark
        return out

    def _speedup(self) -> tuple[dict[str, float], dict[str, str]]:
        """The chosen placement's time against each baseline, ``{"vs_<label>": ratio}``, and where each ratio's
        times come from (:attr:`speedup_from`).

        Against a runtime run whole or a measurement build that ran in the finals (found by its placement,
        not its name), from the finals' medians (the same rounds); else from each one's own measurement.
        """
        if self.chosen is None or not self.chosen.measured_s:
            return {}, {}
        final = {f.what: f.median_s for f in self.finals if not f.placement}
        placed = {frozen(r.assign): r.final_s for r in self.placements if r.final_s is not None}
        mine = self.chosen.final_s
        out, where = {}, {}
        for k, v in self.baseline.items():
            theirs = final.get(k) or placed.get(frozen(self.baseline_assign.get(k, {})))
            if mine and theirs:
                out[f"vs_{k}"], where[f"vs_{k}"] = theirs / mine, "in the finals"
            elif v:
                out[f"vs_{k}"] = v / self.chosen.measured_s
                if mine:
                    where[f"vs_{k}"] = "by their own measurements"
        return out, where

    def fastest(self) -> str | None:
        """What ran fastest in the finals: the chosen placement's name, or a runtime run whole."""
        return min(self.finals, key=lambda f: f.median_s).what if self.finals else None

    def dot(self, assign: dict | None = None, title: str = ""):
        """A Digraph of a placement (default: the chosen one, else None), uncompiled; collapsed past 100 ops."""
        if assign is None and (self.chosen is None or self.plan is None):
            return None
        # The chosen one may run at a reduced precision: its title says which backends do ("torch at f16").
        at = "" if assign else "".join(f", {p}" for p in precision_differs(self.chosen, Row({}, None)))
        title = title or f"{self.model}: {'a' if assign else 'the chosen'} placement{at}, coloured by backend"
        mod, packed = drawing(self.plan, assign or self.chosen.assign)
        big = sum(u["ops"] for u in self.units) > 100
        return placements.placement_dot(mod, packed, title + (f" — {self.mark}" if self.mark else ""), big)

    def _repr_html_(self) -> str:
        return placements.result_html(self, self.dot())

    def text(self) -> str:
        return placements.result_text(self)


def frozen(assign: dict) -> tuple[tuple[str, str], ...]:
    """A placement (``{label: backend}``) as a sorted tuple of its pairs, to key a dict by."""
    return tuple(sorted(assign.items()))
