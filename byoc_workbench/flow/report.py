"""The partitioning report: what a target takes from a model, what falls back, and why.

What Torch-TensorRT's dry run prints, for any workbench: per op, how many
calls the target claims and how many stay on the host; the subgraphs after
partitioning and after pruning; and for every op left on the host the reason,
by count of calls:

- ``no rule``: no rule of the target names the op;
- ``switched off``: the rules that name it are off;
- ``refused by <rule>'s check``: the rule's pattern matches those calls once
  its check is lifted (a dtype, a shape, an attribute it does not take);
- ``<rule>'s pattern does not match``: the rest of the pattern is missing
  around those calls, or an earlier rule claimed its other ops;
- ``pruned``: claimed, but its subgraph went back to the host (the prune
  rule's reason).

Beside each op the host keeps, the other targets whose rules name it: the
backends that could take it instead (``--target`` or a placement search).

:func:`partition_report` returns plain data (:class:`Report`); ``text()`` is
the table, ``to_json()`` the same as JSON.
"""

from __future__ import annotations

import collections
import dataclasses

from byoc_workbench.core import devices, ir
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.flow.fusion import fuse_rules
from byoc_workbench.flow.rules import TARGETS, Targets
from byoc_workbench.flow.summary import HOST, op_owners, stage

PRUNED = "pruned"


@dataclasses.dataclass
class Report:
    """See the module's notes. ``ops`` rows: ``{"op", "total", "offloaded", "host", "why": {reason: calls},
    "others": [the other targets that name the op, when the host keeps some of its calls]}``."""

    model: str
    target: str
    rules_on: int
    rules: int
    ops: list
    partitioned: list  # subgraphs after partition: {"name", "ops", "mac_ops"}
    pruned: list  # subgraphs after prune, the same rows
    pruned_why: dict  # subgraph -> why it went back
    mark: str = ""
    notes: list = dataclasses.field(default_factory=list)
    gpu_build: devices.Placement | None = None  # what a GPU build of the pruned module runs on the CPU

    @property
    def supported(self) -> dict[str, int]:
        """``{op: calls the target takes}`` after pruning, most first."""
        return {r["op"]: r["offloaded"] for r in self.ops if r["offloaded"]}

    @property
    def unsupported(self) -> dict[str, int]:
        """``{op: calls left on the host}``, most first."""
        return {r["op"]: r["host"] for r in self.ops if r["host"]}

    def to_json(self) -> dict[str, object]:
        return {
            "model": self.model,
            "target": self.target,
            "rules_on": self.rules_on,
            "rules": self.rules,
            "op_count": sum(r["total"] for r in self.ops),
            "offloaded": sum(r["offloaded"] for r in self.ops),
            "on_host": sum(r["host"] for r in self.ops),
            "supported": self.supported,
            "unsupported": self.unsupported,
            "ops": self.ops,
            "subgraphs_before_prune": self.partitioned,
            "subgraphs_after_prune": self.pruned,
            "pruned": self.pruned_why,
            **({"weights": self.mark} if self.mark else {}),
            "notes": self.notes,
            **({"gpu_build": _placement_json(self.gpu_build)} if self.gpu_build else {}),
        }

    def text(self, width: int = 60) -> str:
        """The report as a table, like Torch-TensorRT's dry run."""
        total = sum(r["total"] for r in self.ops)
        off = sum(r["offloaded"] for r in self.ops)
        lines = [
            f"Partitioning report: {self.model} for {self.target} ({self.rules_on} of {self.rules} rules on)"
            + (f" — {self.mark}" if self.mark else ""),
            f"{total} op calls of {len(self.ops)} kinds: {self.target} takes {off} "
            f"({len(self.supported)} kinds), the host keeps {total - off} ({len(self.unsupported)} kinds)",
            "",
            f"{'op':32s} {'calls':>5s} {self.target[:8]:>8s} {'host':>5s}  why on the host",
        ]
        for r in self.ops:
            why = "; ".join(f"{n}× {reason}" for reason, n in r["why"].items())
            if r["host"]:
                why += f" | {', '.join(r['others'])} could take it" if r["others"] else " | no other target could"
            lines.append(
                f"{_short(r['op']):32s} {r['total']:5d} {r['offloaded']:8d} {r['host']:5d}  {why[: width * 3]}"
            )
        lines += ["", f"Subgraphs: {len(self.partitioned)} after partition, {len(self.pruned)} after prune"]
        kept = {s["name"] for s in self.pruned}
        for s in self.partitioned:
            fate = "kept" if s["name"] in kept else f"pruned: {self.pruned_why.get(s['name'], '')}"
            lines.append(f"  {s['name']:16s} {s['ops']:5d} ops, {s['mac_ops']:3d} MAC  {fate}")
        lines += [f"note: {n}" for n in self.notes]
        if self.gpu_build:
            lines += ["", *self.gpu_build.lines()]
        return "\n".join(lines)


def _placement_json(p: devices.Placement) -> dict:
    return {
        "on_cpu": {f: list(names) for f, names in p.on_cpu.items()},
        "no_gpu_kernel": p.cpu_only,
        "copies": [dataclasses.asdict(c) | {"bytes": c.bytes} for c in p.crossings],
    }


def _short(op: str) -> str:
    return op.removeprefix("relax.")


def _subgraph_rows(stage) -> list:
    return [
        {"name": s.name, "ops": len(s.ops), "mac_ops": sum(op in ir.MAC_OPS for op in s.ops)} for s in stage.subgraphs
    ]


def _claimed(mod) -> collections.Counter:
    """``{op: calls inside a target's composite or subgraph}``."""
    out: collections.Counter = collections.Counter()
    for (op, _owner, target), n in op_owners(mod).items():
        if target != HOST:
            out[op] += n
    return out


def _per_op(owners) -> tuple:
    total, host = collections.Counter(), collections.Counter()
    for (op, _owner, target), n in owners.items():
        total[op] += n
        if target == HOST:
            host[op] += n
    return total, host


def _check_refusals(mod, rules, host_ops: set) -> dict:
    """``{(rule, op): calls}`` that a rule of ``rules`` with a check would claim in ``mod`` without it,
    beyond what it claims with it.

    Each such rule is fused alone, once with its check and once without: a rule
    that claims more without its check is refused by it that many times.
    """
    out = {}
    for rule in rules:
        if not set(rule.ops) & host_ops or (rule.check is None and rule.ctx_check is None):
            continue
        unchecked = dataclasses.replace(rule, check=None, ctx_check=None)
        with_check = _claimed(fuse_rules(mod, [rule]))
        without = _claimed(fuse_rules(mod, [unchecked]))
        for op in set(rule.ops) & host_ops:
            if without[op] > with_check[op]:
                out[(rule.qualified, op)] = without[op] - with_check[op]
    return out


def _naming(targets) -> dict:
    """``{op: [target names]}``: which of ``targets`` have a rule that names each op."""
    out: dict = collections.defaultdict(list)
    for target in targets:
        for op in sorted({op for rule in target.rules for op in rule.ops}):
            out[op].append(target.name)
    return out


def _table(targets) -> Targets:
    """``targets``, :data:`~byoc_workbench.flow.rules.TARGETS` when None, or a one-line error."""
    if targets is None:
        return TARGETS
    if not isinstance(targets, Targets):
        raise WorkbenchError(
            f"targets must be a rules.Targets table; got {type(targets).__name__} ({targets!r:.40})",
            "leave it out for the registered targets, or pass a registry's table: targets=registry.targets",
        )
    return targets


def other_takers(op: str, target: str, targets: Targets | None = None) -> list:
    """The targets besides ``target`` (default: every one of :data:`~byoc_workbench.flow.rules.TARGETS`)
    with a rule that names ``op``: who else could take an op the host keeps."""
    targets = _table(targets)
    return _naming(targets.get(name) for name in targets if name != target).get(op, [])


def partition_report(
    stages: list, rules, all_rules, target: str, model: str = "module", mark: str = "", targets: Targets | None = None
) -> Report:
    """The partitioning report (see the module's notes) of ``stages`` (a run's, from source to prune at
    least, as :func:`byoc_workbench.stages.run_stages` gives them) for ``target``'s rules ``all_rules``, of
    which ``rules`` were on; ``targets`` (default: :data:`~byoc_workbench.flow.rules.TARGETS`) are those it
    names beside each host op."""
    targets = _table(targets)
    source, annotate, partition, prune = (stage(stages, n) for n in ("source", "annotate", "partition", "prune"))
    total, host_after = _per_op(prune.owners)
    _, host_before = _per_op(annotate.owners)  # before pruning: what no rule claimed
    refused = _check_refusals(source.mod, rules, set(host_before))
    enabled = {r.qualified for r in rules}
    naming: dict = collections.defaultdict(list)  # op -> rules of the target that name it
    for rule in all_rules:
        for op in rule.ops:
            naming[op].append(rule)
    others = _naming(targets.get(name) for name in targets if name != target)
    rows = []
    for op, n in total.most_common():
        why: dict = {}
        unclaimed = min(host_before[op], host_after[op])
        if host_after[op] > unclaimed:
            why[PRUNED] = host_after[op] - unclaimed
        left = unclaimed
        on = [r for r in naming.get(op, ()) if r.qualified in enabled]
        if left and not naming.get(op):
            why["no rule"] = left
            left = 0
        elif left and not on:
            names = ", ".join(r.qualified for r in naming[op])
            why[f"switched off ({names})"] = left
            left = 0
        for rule in on:
            k = min(left, refused.get((rule.qualified, op), 0))
            if k:
                why[f"refused by {rule.qualified}'s check"] = k
                left -= k
        if left:
            names = ", ".join(r.qualified for r in on[:3]) + (", ..." if len(on) > 3 else "")
            why[f"pattern does not match ({names})"] = left
        row = {"op": op, "total": n, "offloaded": n - host_after[op], "host": host_after[op], "why": why}
        rows.append(row | {"others": others.get(op, []) if host_after[op] else []})
    return Report(
        model=model,
        target=target,
        rules_on=len(rules),
        rules=len(all_rules),
        ops=rows,
        partitioned=_subgraph_rows(partition),
        pruned=_subgraph_rows(prune),
        pruned_why=dict(prune.returned),
        mark=mark,
        notes=list(source.notes),
        gpu_build=devices.propose(prune.mod) or None,
    )
