"""What each stage did, as data: op owners, per-target counts, subgraphs, and the diff between stages."""

from __future__ import annotations

import collections
import dataclasses
import typing

import tvm

from byoc_workbench.core import ir, text
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.core.transforms import prepared

HOST = "host"
BOUNDARY = "boundary"  # a crossing between the host and a subgraph, as a profile counts it


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
    returned: dict = dataclasses.field(default_factory=dict)  # prune: subgraph -> why it went back to the host
    skipped: dict = dataclasses.field(default_factory=dict)  # codegen: subgraph -> why no backend compiled it
    owners: collections.Counter = dataclasses.field(default_factory=collections.Counter, repr=False)
    calls: collections.Counter = dataclasses.field(default_factory=collections.Counter, repr=False)  # see _census

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "op_count": self.op_count,
            "ops_per_target": self.ops_per_target,
            "subgraphs": [dataclasses.asdict(s) for s in self.subgraphs],
            "changes": [{k: str(v) if isinstance(v, Owner) else v for k, v in c.items()} for c in self.changes],
            "notes": self.notes,
        }


class Owner(typing.NamedTuple):
    """Where an op sits: a function, then the composites around it, outermost first.

    A named tuple, not a dataclass: it keys the counts of every stage, and a tuple hashes and
    compares in C (a toggle that makes thousands of subgraphs counts tens of thousands of them)."""

    function: str
    composites: tuple = ()

    def __str__(self) -> str:
        return " ▸ ".join((self.function, *self.composites))


def op_owners(mod: tvm.IRModule) -> collections.Counter:
    """Count of ``(op, owner, target)``: ``owner`` is an :class:`Owner`; ``target`` is
    "host" or a BYOC target (that of the innermost composite, or of the subgraph)."""
    return _census(mod)[0]


def _census(mod: tvm.IRModule, memo: dict | None = None, lifted: dict | None = None) -> tuple:
    """``(op_owners(mod), [Subgraph per subgraph function], calls)`` in one walk of the module; ``calls``
    counts the host functions' calls to composites by ``Composite`` name (what each rule claimed).

    ``memo`` keeps each function's count across the stages of one run: a function
    the stage before left as it was (the host functions partition does not touch,
    the subgraphs from partition to codegen) is not walked again. ``lifted`` gives the
    ``(op, calls, composite)`` places of subgraph functions known without a walk (partition's,
    from its regions: :attr:`~byoc_workbench.flow.regions.Region.places`).
    """
    lifted = lifted or {}
    counts: collections.Counter = collections.Counter()
    calls: collections.Counter = collections.Counter()
    subgraphs = []
    memo = {} if memo is None else memo
    shapes: dict = {}  # (places, target) -> what a function's count holds but its name, shared by look-alikes

    def visit(name, target):
        func = mod[name]
        key = (name, func)
        if key not in memo:
            found, made = (lifted[name], None) if target is None and name in lifted else _function_ops(func, mod, name)
            found = tuple(found)
            own, ops, rows = shapes.get((found, target)) or _shape(found, target, func, shapes)
            # Counted by plain tuples (hashed in C), then named: one row per (op, calls, target).
            memo[key] = (own, ops, {(op, Owner(name, around), tgt): n for op, around, tgt, n in rows}, made)
        own, ops, here, made = memo[key]
        if target is None:
            subgraphs.append(Subgraph(name, own, list(ops)))
        else:
            calls.update(made)
        # Each function's keys name it, so no two functions' keys meet: a dict's update adds them, in C.
        dict.update(counts, here)

    # Names as plain strings: a GlobalVar's is an FFI string, which each count and subgraph would keep.
    for name in ir.host_functions(mod):
        visit(str(name), HOST)
    for name in ir.subgraph_functions(mod):
        visit(str(name), None)
    return counts, subgraphs, calls


def _shape(found: tuple, target, func, shapes: dict) -> tuple:
    """``(owner target, ops, [(op, calls, target, count)])`` of a function whose places are ``found``
    (``target``: its own, None for a subgraph's), kept in ``shapes`` where the places alone decide it:
    thousands of subgraphs of one shape (one per block) count the same."""
    own = target
    first = None
    if own is None:  # a subgraph's: that of its first composite, else its codegen (ir.subgraph_target)
        first = next((c for _, _, c in found if c), None)
        own = first.split(".", 1)[0] if first else ir.func_attr(func, ir.CODEGEN)
    rows = [
        (op, around, composite.split(".", 1)[0] if composite else own, n)
        for (op, around, composite), n in collections.Counter(found).items()
    ]
    shape = (own, [op for op, _, _ in found], rows)
    if target is not None or first is not None:  # else the function's own Codegen attribute decided
        shapes[(found, target)] = shape
    return shape


_walks: collections.OrderedDict = collections.OrderedDict()  # (handles, name) -> (function, module, its steps)
WALKS_KEPT = 1  # what one stage walks, its diagram walks again; kept longer, they would cost the cycle collector


def function_steps(func, mod: tvm.IRModule, name: str) -> list:
    """``list(ir.walk(func, mod, descend=False, name=name))``, kept for the function last walked: a
    stage's census, then the regions merge proposes or the stage's diagram, walk the same function
    (6,000 steps a walk on a 6,000-op model). The list is shared: read it, never change it."""
    key = (func.__chandle__(), mod.__chandle__(), name)
    kept = _walks.get(key)
    if kept is None:  # the function and module are kept with their steps: no other takes their handles
        kept = _walks[key] = (func, mod, list(ir.walk(func, mod, descend=False, name=name)))
        while len(_walks) > WALKS_KEPT:
            _walks.popitem(last=False)
    else:
        _walks.move_to_end(key)
    return kept[2]


def _function_ops(func, mod, name) -> tuple:
    """``(places, made)``: ``(op, calls, composite)`` for each op of ``func``, as :func:`ir.walk` descending
    into every call sees them (``calls``: the names of the calls around the op), and a count of the calls
    ``func`` makes itself, by the ``Composite`` name of their callee (None: not a composite). A composite's
    own are read from :func:`ir.composite_steps`, which keeps them per function: thousands of calls share a few."""
    made: collections.Counter = collections.Counter()
    found = []
    local = False  # a call to a local function (a loop written as one): the walk itself goes in
    for s in function_steps(func, mod, name):  # one pass: each step's callee is asked once
        callee = s.callee
        if callee is None:
            op = s.op
            if op:
                found.append((op, (), None))
            continue
        comp = ir.func_attr(callee, ir.COMPOSITE)
        made[comp] += 1
        if comp:
            found.extend(ir.call_places(callee))
        elif type(s.value.op) is not tvm.ir.GlobalVar:
            local = True
    return (ir.op_places(func, mod, name) if local else found), made


def diff(before: collections.Counter, after: collections.Counter) -> list:
    """What happened to ops between two stages: moved, added or removed, by owner."""
    changes = []
    by_op_before, by_op_after = _by_op(before), _by_op(after)
    for op in sorted(by_op_before.keys() | by_op_after.keys()):
        b, a = by_op_before.get(op, collections.Counter()), by_op_after.get(op, collections.Counter())
        gone = [list(g) for g in (b - a).items()]
        new = [list(x) for x in (a - b).items()]
        i = j = 0  # pair them off in order, first to first, each pair moving what both still have
        while i < len(gone) and j < len(new):
            (src, n1), (dst, n2) = gone[i], new[j]
            n = min(n1, n2)
            changes.append({"kind": "moved", "op": op, "count": n, "from": src, "to": dst})
            gone[i][1], new[j][1] = n1 - n, n2 - n
            i += gone[i][1] == 0
            j += new[j][1] == 0
        changes += [{"kind": "removed", "op": op, "count": n, "from": src} for src, n in gone[i:]]
        changes += [{"kind": "added", "op": op, "count": n, "to": dst} for dst, n in new[j:]]
    return changes


def _by_op(owners: collections.Counter) -> dict:
    """``{op: Counter of owners}``: one pass, where a pass per op costs ops x owners."""
    out: dict = {}
    for (op, owner, _target), n in owners.items():
        out.setdefault(op, collections.Counter())[owner] += n
    return out


def describe_change(c: dict) -> str:
    """One line for a change, e.g. ``relax.add ×1 moved: while_loop → byoc_target_0``."""
    if c["kind"] == "moved":
        return f"{c['op']} ×{c['count']} moved: {c['from']} → {c['to']}"
    if c["kind"] == "removed":
        return f"{c['op']} ×{c['count']} removed from {c['from']}"
    if c["kind"] == "compiled":
        return f"{c['op']} ×{c['count']} compiled by the codegen: {c['from']}"
    return f"{c['op']} ×{c['count']} added in {c['to']}"


def summarize(
    name, mod, previous, subgraphs=None, regions=(), notes=(), generated=None, memo=None, lifted=None, **records
) -> Stage:
    """The :class:`Stage` of ``mod``, its changes counted against ``previous``; ``memo`` (a dict shared
    by the stages of one run) keeps the walks of the functions a stage leaves as they were, and
    ``lifted`` gives the op places of the subgraphs partition made (see :func:`_census`); ``records`` are
    the stage's own fields (``rule_matches``, ``returned``, ``skipped``)."""
    # Stages that leave the module as it was (merge, or annotate without per-op rules) share its count.
    same = previous is not None and previous.mod is mod
    owners, found, calls = (previous.owners, None, previous.calls) if same else _census(mod, memo, lifted)
    per_target = collections.Counter()
    for (_, _, tgt), n in owners.items():
        per_target[tgt] += n
    if subgraphs is None:
        subgraphs = found if found is not None else _census(mod, memo, lifted)[1]
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
        owners=owners,
        calls=calls,
        **records,
    )


def rule_matches(stage: Stage, rules) -> dict[str, int]:
    """How many calls each rule claimed at an annotate stage: its host functions' calls to the rule's composites."""
    return {r.qualified: stage.calls.get(r.qualified, 0) for r in rules}


def summary_json(model: str, stages: list) -> dict[str, object]:
    """The CLI's summary.json; ``prepare`` says what was done to the module before the source stage."""
    step = prepared(stages[0].mod) if stages else None
    return {"model": model, **({"prepare": step} if step else {}), "stages": [s.to_json() for s in stages]}


NOTES_SHOWN = 8  # notes printed per stage before "… and N more notes"


def stages_text(stages: list, notes: bool = True) -> str:
    """The stages as a notebook prints them: one line per stage (op count, subgraphs), then its notes,
    each broken between words at :data:`byoc_workbench.core.text.WIDTH`; past :data:`NOTES_SHOWN` notes
    a stage says how many more there are."""
    lines = []
    for s in stages:
        n = len(s.subgraphs)
        lines.append(f"{s.name:10s} {s.op_count:4d} ops  {n:3d} subgraph{'s' if n != 1 else ''}")
        if not notes:
            continue
        grouped = _grouped_notes(s)
        lines += [text.wrap(note, indent="      ", first="    - ") for note in grouped[:NOTES_SHOWN]]
        if len(grouped) > NOTES_SHOWN:
            lines.append(f"    … and {len(grouped) - NOTES_SHOWN} more notes (stage.notes has them all)")
    return "\n".join(lines)


def unmatched_notes(matches: dict) -> list:
    """The annotate stage's notes on ``matches`` (its :attr:`Stage.rule_matches`): one per rule that claimed nothing."""
    return [f"rule {q} matched nothing" for q, n in matches.items() if n == 0]


def _grouped_notes(stage: Stage) -> list:
    """The stage's notes with the rules that matched nothing (its match counts say which) said in one
    note: a big target has dozens."""
    unmatched = [q for q, n in stage.rule_matches.items() if n == 0]
    if len(unmatched) < 2:
        return list(stage.notes)
    own = set(unmatched_notes(stage.rule_matches))
    listed = ", ".join(unmatched[:4]) + (f" … and {len(unmatched) - 4} more" if len(unmatched) > 4 else "")
    return [f"{len(unmatched)} rules matched nothing: {listed}", *(n for n in stage.notes if n not in own)]


def stage(stages, name: str):
    """The stage named ``name`` in a list of stages (from :func:`byoc_workbench.stages.run_stages`)."""
    for s in stages:
        if s.name == name:
            return s
    raise WorkbenchError(f"No {name} stage among the stages given.", "pass the full list that run_stages returns.")
