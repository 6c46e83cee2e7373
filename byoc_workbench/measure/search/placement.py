"""Units, segments and placements: which backend runs each piece of a partitioned model, and its build.

The search partitions the model once, with every rule on and nothing pruned.
Each region of the merge stage is a *unit*, named as the partition stage
names it (``tensorrt_0``). A unit can be cut at *seams* into *segments*: its
claimed bindings in order, ``members[start:stop]``, each lifted into a
subgraph of its own (a prefix and a suffix of a region in binding order never
make a cycle). A placement is plain data, ``{label: backend}``, with a label
per unit or segment (``tensorrt_0``, ``tensorrt_0[0:120]``) and ``tvm`` for
what goes back to the host; :meth:`Plan.stages` builds it.
"""

from __future__ import annotations

import dataclasses
import re
from typing import NamedTuple

import tvm
import tvm_ffi
from tvm import relax

from byoc_workbench.backends.base import Compiled
from byoc_workbench.backends.registry import call_packed
from byoc_workbench.core import ir
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.flow.partition import inline_subgraphs, partition
from byoc_workbench.flow.regions import outputs_of
from byoc_workbench.flow.rules import codegen_name
from byoc_workbench.flow.summary import Subgraph
from byoc_workbench.stages import STAGES, keep_all, restage, run_stages

TVM = "tvm"


@dataclasses.dataclass(frozen=True)
class Segment:
    """``members[start:stop]`` of unit ``unit`` (all of it when ``start == 0`` and ``stop == size``)."""

    unit: str
    start: int
    stop: int
    size: int

    @property
    def whole(self) -> bool:
        return self.start == 0 and self.stop == self.size

    LABEL = re.compile(r"^(?P<unit>[\w.]+?)(\[(?P<start>\d+):(?P<stop>\d+)\])?$")

    @property
    def label(self) -> str:
        """How placements name it: ``tensorrt_0``, or ``tensorrt_0[0:120]`` for a piece."""
        return self.unit if self.whole else f"{self.unit}[{self.start}:{self.stop}]"

    @classmethod
    def from_label(cls, label: str, sizes: dict) -> Segment:
        """The segment ``label`` names (as :attr:`label` writes it; placements travel as JSON), of one of the
        units ``sizes`` (``{unit: members}``) holds; a one-line error for any other label."""
        m = cls.LABEL.match(label) if isinstance(label, str) else None
        if m is None or m.group("unit") not in sizes:
            raise WorkbenchError(
                f"Unknown unit {label!r} in the placement", f"name one of: {', '.join(sizes)} (or unit[a:b])"
            )
        unit, size = m.group("unit"), sizes[m.group("unit")]
        start, stop = (int(m.group("start")), int(m.group("stop"))) if m.group("start") else (0, size)
        if not 0 <= start < stop <= size:
            raise WorkbenchError(f"{label}: a segment must lie within 0..{size}", f"e.g. {unit}[0:{size}]")
        return cls(unit, start, stop, size)

    @property
    def function(self) -> str:
        """The subgraph function it becomes."""
        return self.unit if self.whole else f"{self.unit}__{self.start}_{self.stop}"


class Plan:
    """A model partitioned once for the search: its stages up to merge, its units, and their builds.

    Parameters
    ----------
    mod : tvm.IRModule
        The model, prepared for the rules (a workbench's ``mod``).
    rules : sequence of Rule
        The rules that make the units (every backend of the search can compile what they claim).
    mark : str
        E.g. "untrained weights", carried into every build's diagrams.
    """

    def __init__(self, mod, rules, mark: str = ""):
        self.base = run_stages(mod, rules, keep_all, check=False, backend=TVM)
        self.mark = mark
        merge = self.base[STAGES.index("merge")]
        counters: dict = {}
        self.regions: dict = {}  # unit -> Region, named as partition() names it
        for region in merge.regions:
            cg = codegen_name(region.target)
            self.regions[f"{cg}_{counters.get(cg, 0)}"] = region
            counters[cg] = counters.get(cg, 0) + 1
        self._partitions: dict = {}

    @property
    def units(self) -> list:
        """The units' names, in region order (the graph's order)."""
        return list(self.regions)

    def size(self, unit: str) -> int:
        return len(self.regions[unit].members)

    def whole(self, unit: str) -> Segment:
        return Segment(unit, 0, self.size(unit), self.size(unit))

    def segment(self, label: str) -> Segment:
        """The segment a placement's label names, or a one-line error."""
        return Segment.from_label(label, {unit: self.size(unit) for unit in self.regions})

    def segments(self, assign: dict) -> list:
        """The segments of a placement in graph order, checked to cover every unit once."""
        found = sorted((self.segment(label) for label in assign), key=lambda s: (self.units.index(s.unit), s.start))
        for unit in self.units:
            pieces = [s for s in found if s.unit == unit]
            edges = [0] + [p for s in pieces for p in (s.start, s.stop)] + [self.size(unit)]
            if not pieces or any(a != b for a, b in zip(edges[::2], edges[1::2])):
                raise WorkbenchError(
                    f"The placement does not cover {unit} once ({', '.join(s.label for s in pieces) or 'missing'})",
                    f"name {unit}, or pieces of it that join end to end",
                )
        return found

    def partitioned(self, segments: list):
        """``(module, regions, names)``: the annotated module partitioned into ``segments`` (kept per cut)."""
        key = tuple(s.label for s in segments)
        if key not in self._partitions:
            annotate = self.base[STAGES.index("annotate")]
            regions, names, users = [], {}, {}
            for k, s in enumerate(segments):
                region = self.regions[s.unit]
                members = region.members[s.start : s.stop]
                if region.func not in users:
                    users[region.func] = ir.users(annotate.mod[region.func])
                outputs = outputs_of(members, users[region.func])  # a piece's own: read by the next piece too
                regions.append(
                    dataclasses.replace(
                        region, id=k, members=members, ops=(), composites=(), outputs=outputs, places=()
                    )
                )
                names[k] = s.function
            self._partitions[key] = (partition(annotate.mod, regions, names), regions, names)
        return self._partitions[key]

    def contents(self, assign: dict) -> dict[str, str]:
        """``{label: structural hash}`` of each segment's subgraph: what the search caches by.

        The hash covers the ops, their attributes and the constants' values,
        so the same subgraph hashes the same in another model or rule set.
        """
        segments = self.segments(assign)
        mod = self.partitioned(segments)[0]
        # Without its name: the same subgraph numbered otherwise (another rule set) hashes the same.
        return {
            s.label: f"{tvm_ffi.structural_hash(mod[s.function].without_attr(ir.GLOBAL_SYMBOL)):016x}" for s in segments
        }

    def stages(self, assign: dict, options: dict | None = None) -> list:
        """Every stage of the placement ``assign`` (``{label: backend}``): the codegen stage compiled."""
        segments = self.segments(assign)
        _, regions, names = self.partitioned(segments)
        backend = {s.function: assign[s.label] for s in segments}
        return restage(self.base, regions, names, backend, options)

    def narrow_cuts(self, unit: str) -> list:
        """Positions ``c`` (0 < c < size) where one tensor alone crosses from ``members[:c]`` to the rest.

        A seam there costs one crossing each way; elsewhere several values would cross.
        """
        region = self.regions[unit]
        annotate = self.base[STAGES.index("annotate")].mod
        values = {s.var: s.value for s in ir.walk(annotate[region.func], annotate, descend=False)}
        members = list(region.members)
        reads = [set(ir.free_vars(values[v])) if v in values else set() for v in members]
        cuts = []
        for c in range(1, len(members)):
            before = set(members[:c])
            crossing = {v for r in reads[c:] for v in r if v in before}
            if len(crossing) == 1 and isinstance(next(iter(crossing)).ty, relax.TensorType):
                cuts.append(c)
        return cuts


def inlined(stages: list) -> dict[str, list[tuple[relax.Var, int]]]:
    """``{function: [(var, member index)]}``: the host bindings each subgraph placed on TVM became.

    The prune stage inlines a subgraph in place of its call, one binding per
    op binding of the subgraph in walk order; this lines the two modules up,
    so the host kernels of a unit on TVM can be found in a profile (by
    ``Site.var``) and split by member, for the seams.
    """
    partitioned = stages[STAGES.index("partition")].mod
    pruned = stages[STAGES.index("prune")].mod
    gone = set(ir.subgraph_functions(partitioned)) - set(ir.subgraph_functions(pruned))
    out: dict = {name: [] for name in gone}
    for fname in ir.host_functions(pruned):
        before = list(ir.walk(partitioned[fname], descend=False))
        kept = {s.var for s in before}
        calls = {s.var: _called(s.value) for s in before if _called(s.value) in gone}
        pending: list = []
        for s in ir.walk(pruned[fname], descend=False):
            if s.var in calls:
                name = calls[s.var]
                owners = _member_of_each_binding(partitioned[name], partitioned)
                out[name] += [(v, owners[k] if k < len(owners) else -1) for k, v in enumerate(pending + [s.var])]
                pending = []
            elif s.var in kept:
                pending = []
            else:
                pending.append(s.var)
    return out


def _called(value) -> str | None:
    """The global function a binding calls, or None."""
    if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.GlobalVar):
        return value.op.name_hint
    return None


def _member_of_each_binding(func, mod) -> list:
    """For each op binding of a subgraph in walk order (as :func:`inline_subgraphs` emits them), its member."""
    top = {s.var: k for k, s in enumerate(ir.walk(func, mod, descend=False))}
    owners = []
    for s in ir.walk(func):
        if s.descended:
            continue
        first_call = next((p.var for p in s.path if p.kind == "call"), s.var)
        owners.append(top.get(first_call, -1))
    return owners


class Drawing(NamedTuple):
    """A placement ready to draw: its module, and each packed call's :class:`Subgraph` by symbol."""

    mod: tvm.IRModule
    packed: dict[str, Subgraph]


def drawing(plan: Plan, assign: dict) -> Drawing:
    """:class:`Drawing` (``mod``, ``packed``) to draw a placement without compiling it: each offloaded subgraph a packed
    call named after its backend, the rest on the host, for :func:`byoc_workbench.draw.graph.build_graph`."""
    segments = plan.segments(assign)
    mod = plan.partitioned(segments)[0]
    on_host = [s.function for s in segments if assign[s.label] == TVM]
    mod = inline_subgraphs(mod, on_host)
    generated, packed = {}, {}
    for s in segments:
        backend = assign[s.label]
        if backend == TVM:
            continue
        symbol = f"placement.{backend}.{s.function}"
        generated[s.function] = Compiled(s.function, symbol, "", 0, backend)
        packed[symbol] = Subgraph(f"{s.label} on {backend}", backend, ir.ops_in(mod[s.function], mod))
    return Drawing(call_packed(mod, generated) if generated else mod, packed)
