"""Propose regions: which claimed calls can be merged into one subgraph.

This is the seed's ``MergeCompilerRegions`` as a pure analysis: it reads an
annotated module (claimed calls are calls to ``Composite`` functions) and
returns regions without rewriting anything, so they can be drawn first.

The policy follows upstream Relax's ``MergeCompositeFunctions``: walking the
bindings of a block in order, a claimed call joins the region of an argument
of the same target unless another argument already depends on that region
(joining would then make a cycle through the rest of the graph). Dependencies
are propagated transitively. Tuple plumbing is transparent, as upstream has
made it since apache/tvm#19998: a projection of a tuple a region made, a
tuple packed from one region's values, or an alias of a region's value, joins
that region, so the calls that read it can join too. A tuple does not when it
is also used whole outside its projections, since it would then escape the
region.

Unlike upstream, it works block by block, so blocks inside If branches and
recursive functions are handled too; a region never spans two blocks.
Regions name their bindings by the variables they bind.
"""

from __future__ import annotations

import dataclasses

import tvm
from tvm import relax

from byoc_workbench.core import ir
from byoc_workbench.flow.summary import function_steps


@dataclasses.dataclass
class Region:
    """A group of claimed bindings of one block that can become one subgraph."""

    id: int
    target: str
    func: str
    scope: tuple  # ("then",), ("else",), ... for blocks inside If branches
    members: tuple  # the variables its bindings bind, in binding order (claimed calls and tuple plumbing)
    ops: tuple  # every Relax op inside, composites expanded
    composites: tuple  # composite names of the claimed calls
    outputs: tuple = ()  # the members read outside the region (or returned), in binding order
    # (op, calls, composite) for each op, as the stage census finds them in the function partition lifts
    places: tuple = ()

    @property
    def vars(self) -> tuple[str, ...]:
        """The names of the member variables, for display."""
        return tuple(v.name for v in self.members)


def target_of(step: ir.Step) -> str | None:
    """The target claiming a binding (a step of a walk given the module): the prefix of its composite's name."""
    name = ir.func_attr(step.callee, ir.COMPOSITE) if step.callee is not None else None
    return name.split(".", 1)[0] if name else None


class _Groups:
    """Union-find over the bindings of one block (by index), with the direct dependencies between groups.

    Whether one group depends on another is answered on demand by a walk up the
    direct dependencies. The walk skips every group that reaches no binding at or
    after the first of the group asked about: ``reach`` keeps, for each group, the
    latest binding it reads through any chain of groups. A binding only reads
    bindings before it, but a group can grow later than a binding that read it (a
    host op reads a region's early value, then a later call joins that region), so
    a group's own last binding is not enough: a growth is pushed to the groups that
    read it. Keeping transitive sets instead costs quadratic time and memory on a
    long chain of regions. Bindings are known by their index: comparing two Relax
    variables goes through the FFI.
    """

    def __init__(self):
        self.parent: list = []
        self.preds: dict = {}  # root -> indices (of bindings of other groups) its bindings read
        self.readers: dict = {}  # root -> indices (of bindings of other groups) that read it
        self.target: dict = {}
        self.first: dict = {}  # root -> index of its first binding
        self.reach: dict = {}  # root -> the latest binding it is or reads, through any chain of groups

    def add(self, target) -> int:
        k = len(self.parent)
        self.parent.append(k)
        self.preds[k], self.readers[k] = set(), set()
        self.target[k] = target
        self.first[k] = self.reach[k] = k
        return k

    def find(self, k: int) -> int:
        parent = self.parent
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    def merge(self, src: int, dst: int) -> None:
        src, dst = self.find(src), self.find(dst)
        if src == dst:
            return
        for sets in (self.preds, self.readers):
            small, big = sorted((sets.pop(src), sets[dst]), key=len)
            big |= small
            sets[dst] = big
        self.parent[src] = dst
        self.first[dst] = min(self.first[dst], self.first.pop(src))
        self.reach[dst] = max(self.reach[dst], self.reach.pop(src))

    def read(self, group: int, on) -> None:
        """Record that root ``group``, which holds the newest binding, reads the groups ``on``; its
        readers, and theirs, now reach that binding too."""
        self.preds[group].update(on)
        for g in on:
            self.readers[self.find(g)].add(group)
        newest = self.reach[group] = len(self.parent) - 1
        todo = [group]
        while todo:
            for r in self.readers[todo.pop()]:
                r = self.find(r)
                if self.reach[r] < newest:
                    self.reach[r] = newest
                    todo.append(r)

    def depends(self, group: int, on: int) -> bool:
        """Whether root ``group`` reads, directly or through other groups, a binding of root ``on``."""
        start = self.first[on]
        seen = {group}
        todo = [group]
        while todo:
            g = todo.pop()
            for p in self.preds[g]:
                p = self.find(p)
                if p == on:
                    return True
                if p not in seen and self.reach[p] >= start:
                    seen.add(p)
                    todo.append(p)
        return False


def _only_projected(var, users) -> bool:
    """Whether every use of a tuple is a projection (else the tuple would escape a region)."""
    uses = users.get(var.__chandle__(), ())
    return bool(uses) and all(u is not None and isinstance(u.value, relax.TupleGetItem) for u in uses)


def _plumbing_home(groups, value, var, users, producer):
    """The claimed group a Tuple, TupleGetItem or alias binding joins, or None (``users`` as
    :func:`ir.users` gives them; ``producer`` maps a variable's handle to its binding's group)."""
    kind = type(value)  # exact type tests, as ir.walk's: most bindings are calls, and a failed isinstance is slow
    if kind is relax.Call:
        return None
    if kind is relax.TupleGetItem:
        src = value.tuple_value
        fields = [src] if ir.is_var(src) and _only_projected(src, users) else []
    elif kind is relax.Tuple and _only_projected(var, users):
        fields = [f for f in value.fields if not isinstance(f, tvm.ir.expr.Constant)]
    elif ir.is_var(value) and (isinstance(value.ty, relax.TensorType) or _only_projected(var, users)):
        fields = [value]
    else:
        return None
    homes = set()
    for f in fields:
        k = producer.get(f.__chandle__()) if ir.is_var(f) else None
        homes.add(None if k is None else groups.find(k))
    if len(homes) != 1:
        return None
    (home,) = homes
    return home if home is not None and groups.target[home] is not None else None


def _block_groups(steps, users) -> list:
    """For one block's steps (of a walk given the module): ``(target, [steps])`` for each group of claimed calls."""
    groups = _Groups()
    producer: dict = {}  # variable's handle -> the index of the binding that binds it
    for index, step in enumerate(steps):
        tgt = target_of(step)
        arg_groups = []
        for var in step.reads:
            k = producer.get(var.__chandle__())
            if k is not None:
                g = groups.find(k)
                if g not in arg_groups:
                    arg_groups.append(g)
        plumbing = _plumbing_home(groups, step.value, step.var, users, producer) if tgt is None else None
        home = groups.add(tgt if plumbing is None else groups.target[plumbing])
        if plumbing is not None:
            groups.merge(home, plumbing)
            home = groups.find(plumbing)
        elif tgt is not None:
            # Joining a group another argument depends on would make a cycle through that argument.
            joinable = [
                g
                for g in arg_groups
                if groups.target[g] == tgt and not any(groups.depends(h, g) for h in arg_groups if h != g)
            ]
            for g in joinable:
                groups.merge(g, home)
                home = groups.find(home)
        groups.read(home, [g for g in arg_groups if groups.find(g) != home])
        producer[step.var.__chandle__()] = index
    members: dict = {}
    for index, step in enumerate(steps):
        members.setdefault(groups.find(index), []).append(step)
    out = []
    for root, group in members.items():  # dicts keep insertion order: groups by first member
        if groups.target[root] is not None:
            out.append((groups.target[root], group))
    return out


def outputs_of(members, users: dict) -> tuple[relax.Var, ...]:
    """The ``members`` read outside them (or returned), in binding order; ``users`` is :func:`ir.users`'s."""
    inside = {v.__chandle__() for v in members}

    def read_outside(v) -> bool:
        return any(u is None or u.var.__chandle__() not in inside for u in users.get(v.__chandle__(), ()))

    return tuple(v for v in members if read_outside(v))


def propose_regions(mod: tvm.IRModule) -> list:
    """Every region of every host function, numbered in module order (main first)."""
    regions: list = []
    for fname in ir.host_functions(mod):
        func = mod[fname]
        steps = function_steps(func, mod, fname)  # the census of the stage walked it
        users = ir.users(func, steps)
        blocks: dict = {}
        for step in steps:
            blocks.setdefault(step.block.__chandle__(), []).append(step)
        for steps in blocks.values():
            for tgt, group in _block_groups(steps, users):
                places, composites = [], []
                for s in group:
                    if s.callee is not None:
                        comp = ir.func_attr(s.callee, ir.COMPOSITE)
                        composites.append(comp)
                        places += ir.call_places(s.callee)
                members = tuple(s.var for s in group)
                regions.append(
                    Region(
                        id=len(regions),
                        target=tgt,
                        func=fname,
                        scope=tuple(p.kind for p in group[0].path if p.kind in ("then", "else")),
                        members=members,
                        ops=tuple(op for op, _, _ in places),
                        composites=tuple(composites),
                        outputs=outputs_of(members, users),
                        places=tuple(places),
                    )
                )
    return regions
