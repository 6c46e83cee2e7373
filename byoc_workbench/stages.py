"""The BYOC stages, each a function from IRModule to IRModule, and their summaries.

source -> composite -> annotate -> merge -> partition -> prune -> codegen

``run_stages`` runs them all for one rule set and returns a :class:`Stage`
per step, holding the module, a structured summary and what changed since the
step before. Nothing here changes global state except registering generated
kernels under content-hashed names.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Callable, Optional

import tvm
from tvm import relax

from . import ir
from .codegen import run_codegen
from .errors import WorkbenchError
from .partition import inline_subgraphs, partition as _partition
from .regions import propose_regions

STAGES = ("source", "composite", "annotate", "merge", "partition", "prune", "codegen")
HOST = "host"


def check_module(mod) -> tvm.IRModule:
    """``mod`` normalized and type-checked, or a one-line error."""
    if not isinstance(mod, tvm.IRModule):
        raise WorkbenchError(f"Expected a tvm.IRModule, got {type(mod).__name__}.", "pass a Relax IRModule, e.g. one written with @I.ir_module.")
    if "main" not in [gv.name_hint for gv in mod.get_global_vars()]:
        raise WorkbenchError("The module has no function named main.", "name the entry function main.")
    try:
        mod = relax.transform.Normalize()(mod)
        if relax.analysis.well_formed(mod) is False:
            raise RuntimeError("the module is not well formed")
    except (RuntimeError, ValueError, TypeError) as err:  # TVM's errors derive from these
        first = next((ln for ln in str(err).splitlines() if ln.strip() and not ln.startswith(("Traceback", "  File"))), str(err))
        raise WorkbenchError(f"The module fails type checking: {first.strip()}", "fix the types of the module (shapes, dtypes, arguments) so that relax.transform.Normalize accepts it.") from None
    return mod


def _fuse(mod: tvm.IRModule, rules) -> tvm.IRModule:
    if not rules:
        return mod
    # Patterns must not match inside composites made earlier, so only host functions are entries.
    return relax.transform.FuseOpsByPattern(
        [r.fusion_pattern() for r in rules],
        bind_constants=False,
        annotate_codegen=False,
        entry_functions=ir.host_functions(mod),
    )(mod)


def composite(mod: tvm.IRModule, rules) -> tvm.IRModule:
    """Pattern rules: each match becomes a call to a function with a ``Composite`` attribute."""
    return _fuse(mod, [r for r in rules if r.kind == "pattern"])


def annotate(mod: tvm.IRModule, rules) -> tvm.IRModule:
    """Per-op rules: each claimed call is wrapped like a one-op composite, so every
    claimed node now names its target (the prefix of its ``Composite`` name)."""
    return _fuse(mod, [r for r in rules if r.kind == "op"])


def merge(mod: tvm.IRModule) -> tuple:
    """Find the regions that can become subgraphs. The IR is unchanged."""
    return mod, propose_regions(mod)


def partition(mod: tvm.IRModule, regions) -> tvm.IRModule:
    """Lift each region into a global function with ``Codegen`` and ``global_symbol``."""
    return _partition(mod, regions)


PruneRule = Callable[[str, list], Optional[str]]


def no_mac(min_mac_ops: int = 1) -> PruneRule:
    """The default prune rule: a subgraph with fewer than ``min_mac_ops`` MAC ops goes back.

    Offloading costs a copy and a kernel launch at each boundary; a subgraph
    without multiply-accumulate work rarely earns that back (the seed's
    ``remove_no_mac_subgraphs``).
    """

    def rule(name: str, ops: list) -> Optional[str]:
        macs = sum(op in ir.MAC_OPS for op in ops)
        if macs < min_mac_ops:
            return f"{macs} MAC op{'s' if macs != 1 else ''} (needs {min_mac_ops})"
        return None

    rule.__doc__ = f"no_mac(min_mac_ops={min_mac_ops})"
    return rule


def keep_all(name: str, ops: list) -> Optional[str]:
    """A prune rule that keeps every subgraph."""
    return None


def prune(mod: tvm.IRModule, rule: PruneRule = no_mac()) -> tuple:
    """Return to the host every subgraph that ``rule`` rejects; returns ``(module, {name: reason})``."""
    reasons = {}
    for name in ir.subgraph_functions(mod):
        reason = rule(name, ir.ops_in(mod[name], mod))
        if reason:
            reasons[name] = reason
    return inline_subgraphs(mod, reasons), reasons


def codegen(mod: tvm.IRModule) -> tuple:
    """Compile subgraphs with their target's codegen; see :func:`codegen.run_codegen`."""
    return run_codegen(mod)


# --- summaries ----------------------------------------------------------------


@dataclasses.dataclass
class Subgraph:
    name: str
    target: str
    ops: list


@dataclasses.dataclass
class Stage:
    """One stage's module and what a reader needs to know about it."""

    name: str
    mod: tvm.IRModule
    op_count: int
    ops_per_target: dict
    subgraphs: list
    regions: list = dataclasses.field(default_factory=list)
    changes: list = dataclasses.field(default_factory=list)
    notes: list = dataclasses.field(default_factory=list)
    generated: dict = dataclasses.field(default_factory=dict)
    rule_matches: dict = dataclasses.field(default_factory=dict)  # annotate: calls each rule claimed
    owners: collections.Counter = dataclasses.field(default_factory=collections.Counter, repr=False)

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "op_count": self.op_count,
            "ops_per_target": self.ops_per_target,
            "subgraphs": [dataclasses.asdict(s) for s in self.subgraphs],
            "changes": self.changes,
            "notes": self.notes,
        }


def op_owners(mod: tvm.IRModule) -> collections.Counter:
    """Count of ``(op, owner, target)``: owner is the function holding the op, then
    ``" ▸ composite"`` when a composite holds it; target is "host" or a BYOC target."""
    counts: collections.Counter = collections.Counter()

    def visit(func, owner, target, local=None):
        local = {}
        for _, block in ir.blocks_of(func.body):
            for b in block.bindings:
                v = b.value
                if isinstance(v, relax.Function):
                    local[b.var] = v
                    continue
                if not isinstance(v, relax.Call):
                    continue
                if isinstance(v.op, tvm.ir.Op):
                    counts[(v.op.name, owner, target)] += 1
                    continue
                inner = ir.called_function(mod, v, local)
                comp = ir.func_attr(inner, ir.COMPOSITE) if inner is not None else None
                if comp:
                    visit(inner, f"{owner} ▸ {comp}", comp.split(".", 1)[0])

    for name in ir.host_functions(mod):
        visit(mod[name], name, HOST)
    for name in ir.subgraph_functions(mod):
        visit(mod[name], name, ir.subgraph_target(mod, name))
    return counts


def diff(before: collections.Counter, after: collections.Counter) -> list:
    """What happened to ops between two stages: moved, added or removed, by owner."""
    changes = []
    ops = sorted({k[0] for k in before} | {k[0] for k in after})
    for op in ops:
        b = collections.Counter({k[1]: n for k, n in before.items() if k[0] == op})
        a = collections.Counter({k[1]: n for k, n in after.items() if k[0] == op})
        gone = list((b - a).items())
        new = list((a - b).items())
        while gone and new:
            (src, n1), (dst, n2) = gone[0], new[0]
            n = min(n1, n2)
            changes.append({"kind": "moved", "op": op, "count": n, "from": src, "to": dst})
            gone[0], new[0] = (src, n1 - n), (dst, n2 - n)
            gone = [g for g in gone if g[1]]
            new = [x for x in new if x[1]]
        changes += [{"kind": "removed", "op": op, "count": n, "from": src} for src, n in gone]
        changes += [{"kind": "added", "op": op, "count": n, "to": dst} for dst, n in new]
    return changes


def describe_change(c: dict) -> str:
    """One line for a change, e.g. ``relax.add ×1 moved: while_loop → byoc_target_0``."""
    if c["kind"] == "moved":
        return f"{c['op']} ×{c['count']} moved: {c['from']} → {c['to']}"
    if c["kind"] == "removed":
        return f"{c['op']} ×{c['count']} removed from {c['from']}"
    if c["kind"] == "compiled":
        return f"{c['op']} ×{c['count']} compiled by the codegen: {c['from']}"
    return f"{c['op']} ×{c['count']} added in {c['to']}"


def _summarize(name, mod, previous, subgraphs=None, regions=(), notes=(), generated=None, rule_matches=None) -> Stage:
    owners = op_owners(mod)
    per_target = collections.Counter()
    for (_, _, tgt), n in owners.items():
        per_target[tgt] += n
    if subgraphs is None:
        subgraphs = [Subgraph(n, ir.subgraph_target(mod, n), ir.ops_in(mod[n], mod)) for n in ir.subgraph_functions(mod)]
    return Stage(
        name=name,
        mod=mod,
        op_count=sum(owners.values()),
        ops_per_target=dict(sorted(per_target.items())),
        subgraphs=subgraphs,
        regions=list(regions),
        changes=diff(previous.owners, owners) if previous is not None else [],
        notes=list(notes),
        generated=generated or {},
        rule_matches=rule_matches or {},
        owners=owners,
    )


def rule_matches(mod: tvm.IRModule, rules) -> dict:
    """How many calls each rule claimed in an annotated module."""
    counts = collections.Counter()
    for name in ir.host_functions(mod):
        for _, block in ir.blocks_of(mod[name].body):
            for b in block.bindings:
                if isinstance(b.value, relax.Call):
                    inner = ir.callee(mod, b.value)
                    comp = ir.func_attr(inner, ir.COMPOSITE) if inner is not None else None
                    if comp:
                        counts[comp] += 1
    return {r.qualified: counts.get(r.qualified, 0) for r in rules}


def run_stages(mod: tvm.IRModule, rules, prune_rule: PruneRule = no_mac()) -> list:
    """Run every stage for ``rules``; returns one :class:`Stage` per step."""
    mod = check_module(mod)
    stages = []

    def add(name, m, **kw):
        stages.append(_summarize(name, m, stages[-1] if stages else None, **kw))

    add("source", mod)
    m = composite(mod, rules)
    add("composite", m)
    m = annotate(m, rules)
    matches = rule_matches(m, rules)
    unmatched = [f"rule {q} matched nothing" for q, n in matches.items() if n == 0]
    add("annotate", m, notes=unmatched, rule_matches=matches)
    m, regions = merge(m)
    region_subgraphs = [Subgraph(f"region_{r.id}", r.target, list(r.ops)) for r in regions]
    add("merge", m, subgraphs=region_subgraphs, regions=regions)
    m = partition(m, regions)
    add("partition", m, regions=regions)
    m, reasons = prune(m, prune_rule)
    add("prune", m, notes=[f"{n} returned to host: {why}" for n, why in reasons.items()])
    offloaded = stages[-1].subgraphs  # compiled now, or listed as skipped in the notes
    m, generated, skipped = codegen(m)
    add(
        "codegen",
        m,
        subgraphs=offloaded,
        notes=[f"{n}: not compiled, {why}" for n, why in skipped.items()],
        generated=generated,
    )
    for c in stages[-1].changes:
        if c["kind"] == "removed" and c["from"].split(" ▸ ")[0] in generated:
            c["kind"] = "compiled"
    return stages


def summary_json(model: str, stages: list) -> dict:
    """The CLI's summary.json."""
    return {"model": model, "stages": [s.to_json() for s in stages]}
