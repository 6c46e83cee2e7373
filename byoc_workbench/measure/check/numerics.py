"""Whether each offloaded subgraph computes what TVM alone computes.

:func:`compare` runs a build once, keeps every offloaded call's inputs and
outputs (:func:`capture`, through the VM instrument of
:mod:`byoc_workbench.measure.time.timing`), reruns each subgraph with TVM alone on
the inputs it received, and returns the largest error of each output
(:func:`byoc_workbench.measure.check.compare.output_error`) as plain data;
:mod:`byoc_workbench.draw.latency` draws it.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
from typing import Any

import numpy as np
import tvm

from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.flow.partition import flatten_subgraphs
from byoc_workbench.measure.check.compare import output_error
from byoc_workbench.measure.compiler import compiled, execute
from byoc_workbench.measure.time import kept, timing
from byoc_workbench.measure.time.recorder import Recorder


@dataclasses.dataclass
class OutputDrift:
    """How far one output of a subgraph drifted from TVM alone's, at the worst call."""

    index: int
    shape: tuple
    max_abs: float
    max_rel: float  # max |backend - TVM| over max |TVM|: relative to the output's scale


@dataclasses.dataclass
class SubgraphCheck:
    """One offloaded subgraph against TVM alone, over every call of one run (the worst call kept)."""

    name: str
    target: str
    backend: str
    calls: int
    outputs: list  # OutputDrift per output
    tolerance: float
    detail: str = ""  # how the backend ran it, e.g. "CPU, bf16": precision is part of a placement

    @property
    def max_abs(self) -> float:
        return max((o.max_abs for o in self.outputs), default=0.0)

    @property
    def max_rel(self) -> float:
        return max((o.max_rel for o in self.outputs), default=0.0)

    @property
    def over(self) -> bool:
        """Whether the largest relative error is over the tolerance (NaN counts as over)."""
        return not self.max_rel <= self.tolerance

    def to_json(self) -> dict[str, Any]:
        keys = ("name", "target", "backend", "detail", "calls", "max_abs", "max_rel")
        return {k: getattr(self, k) for k in keys} | {
            "over_tolerance": self.over,
            "outputs": [dataclasses.asdict(o) | {"shape": list(o.shape)} for o in self.outputs],
        }


@dataclasses.dataclass
class Numerics:
    rows: list  # SubgraphCheck per offloaded subgraph
    tolerance: float
    mark: str = ""

    @property
    def worst(self) -> SubgraphCheck | None:
        return max(self.rows, key=lambda r: (r.max_rel, r.max_abs), default=None)

    @property
    def over(self) -> list:
        return [r for r in self.rows if r.over]

    def to_json(self) -> dict[str, Any]:
        worst = self.worst
        out = {
            "tolerance": self.tolerance,
            "max_rel": worst.max_rel if worst else 0.0,
            "max_abs": max((r.max_abs for r in self.rows), default=0.0),
            "over_tolerance": [r.name for r in self.over],
            "subgraphs": [r.to_json() for r in self.rows],
        }
        if self.mark:
            out["weights"] = self.mark
        return out


def capture(
    built: timing.Built, inputs, entry: str = "main"
) -> dict[str, list[tuple[list[np.ndarray], list[np.ndarray]]]]:
    """Run once and keep every offloaded call's inputs and outputs: ``{subgraph: [(inputs, outputs), ...]}``."""
    by_symbol = {s: site for s, site in built.sites.items() if site.kind == "subgraph"}
    seen: dict = collections.defaultdict(list)
    pending: dict = {}

    def watch(symbol, before, args):
        site = by_symbol.get(symbol)
        if site is None:
            return
        n_in = len(args) - site.num_outputs
        if before:
            pending[symbol] = [a.numpy() for a in args[:n_in]]
        else:
            seen[site.name].append((pending.pop(symbol), [a.numpy() for a in args[n_in:]]))

    recorder = Recorder(built.functions, watch, entry)
    recorder.run(built.vm, built.vm[entry], timing.tensors(inputs, execute.device(built.tvm_target)))
    return dict(seen)


def compare(
    built: timing.Built, inputs, tolerance: float = 1e-3, entry: str = "main", tvm_target: str = "llvm"
) -> Numerics:
    """Each offloaded subgraph's outputs in one run against TVM alone on the same inputs.

    The subgraphs come from the prune stage's module, their composites
    inlined (``flatten_subgraphs``), and are compiled by TVM for ``tvm_target``.
    Their outputs are kept on disk, so a check run again on the same inputs
    (notebook 02 rehearsed, say) reads them instead of rerunning TVM alone.
    """
    if not tolerance >= 0:
        raise WorkbenchError(f"tolerance must be 0 or more, got {tolerance}.", "pass a relative error such as 1e-3.")
    seen = capture(built, inputs, entry)
    rows = []
    if seen:
        reference = _references(built, seen, tvm_target)
    for name, site in built.subgraphs.items():
        errors: dict = {}
        for ins, outs in seen.get(name, []):
            for k, (got, want) in enumerate(zip(outs, reference(name, ins))):
                max_abs, max_rel = output_error(got, want)
                old = errors.get(k)
                if old is None or (max_rel, max_abs) > (old.max_rel, old.max_abs):
                    errors[k] = OutputDrift(k, tuple(got.shape), max_abs, max_rel)
        outputs = [errors[k] for k in sorted(errors)]
        calls = len(seen.get(name, []))
        rows.append(SubgraphCheck(name, site.target, site.backend, calls, outputs, tolerance, site.detail))
    return Numerics(rows, tolerance, built.mark)


def _references(built: timing.Built, seen: dict, tvm_target: str):
    """``reference(subgraph, inputs)``: its outputs computed by TVM alone, kept on disk
    (:func:`byoc_workbench.measure.time.kept.reference`), so a check run again reruns nothing; the
    subgraphs are built only when some reference is not kept."""
    flat = flatten_subgraphs(built.partitioned)
    ref_mod = tvm.IRModule({gv: f for gv, f in flat.functions.items() if gv.name_hint in seen})
    built = compiled.build_key(ref_mod, tvm_target)

    @functools.cache
    def vm():
        return execute.build(ref_mod, tvm_target)

    def compute(name, ins):
        ref = execute.to_numpy(vm()[name](*timing.tensors(ins)))
        return ref if isinstance(ref, list) else [ref]

    return lambda name, ins: kept.reference(built, name, ins, lambda: compute(name, ins))
