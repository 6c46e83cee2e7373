"""Propose regions: which claimed calls can be merged into one subgraph.

This is the seed's ``MergeCompilerRegions`` as a pure analysis: it reads an
annotated module (claimed calls are calls to ``Composite`` functions) and
returns regions without rewriting anything, so they can be drawn first.

The policy follows upstream Relax's ``MergeCompositeFunctions``: walking the
bindings of a block in order, a claimed call joins the region of an argument
of the same target unless another argument already depends on that region
(joining would then make a cycle through the rest of the graph). Dependencies
are propagated transitively. Unlike upstream, it works block by block, so
blocks inside If branches and recursive functions are handled too; a region
never spans two blocks.
"""

from __future__ import annotations

import dataclasses

import tvm
from tvm import relax

from .. import ir


@dataclasses.dataclass
class Region:
    """A group of claimed bindings of one block that can become one subgraph."""

    id: int
    target: str
    func: str
    block: int  # index of the block in ir.blocks_of order
    scope: tuple  # ("then",), ("else",), ... for blocks inside If branches
    bindings: tuple  # indices of the bindings in the block, in order
    vars: tuple  # names of the bound variables, for display
    ops: tuple  # every Relax op inside, composites expanded
    composites: tuple  # composite names of the claimed calls


def target_of(mod: tvm.IRModule, value) -> str | None:
    """The target claiming a binding's value: the prefix of its composite name."""
    if not isinstance(value, relax.Call):
        return None
    func = ir.callee(mod, value)
    name = ir.func_attr(func, ir.COMPOSITE) if func is not None else None
    return name.split(".", 1)[0] if name else None


class _Groups:
    """Union-find over binding indices, with transitive group dependencies."""

    def __init__(self):
        self.parent: dict = {}
        self.deps: dict = {}

    def add(self, i):
        self.parent[i] = i
        self.deps[i] = set()

    def find(self, i):
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def merge(self, src, dst):
        src, dst = self.find(src), self.find(dst)
        if src == dst:
            return
        self.parent[src] = dst
        self.deps[dst] |= self.deps.pop(src)
        self.deps[dst].discard(dst)
        for deps in self.deps.values():
            if src in deps:
                deps.discard(src)
                deps.add(dst)


def _block_groups(mod, block) -> list:
    """For one block: a list of (target, [binding indices]) groups, claimed ones only."""
    groups = _Groups()
    producer: dict = {}
    target: dict = {}
    for i, binding in enumerate(block.bindings):
        tgt = target_of(mod, binding.value)
        arg_groups = []
        for var in ir.free_vars(binding.value):
            if var in producer:
                g = groups.find(producer[var])
                if g not in arg_groups:
                    arg_groups.append(g)
        groups.add(i)
        target[i] = tgt
        home = i
        if tgt is not None:
            parent_deps = set().union(*(groups.deps[g] for g in arg_groups)) if arg_groups else set()
            joinable = [g for g in arg_groups if target[g] == tgt and g not in parent_deps]
            if joinable:
                home = joinable[0]
                groups.merge(i, home)
                for other in joinable[1:]:
                    groups.merge(other, home)
                    home = groups.find(home)
                home = groups.find(home)
        for g in arg_groups:
            g = groups.find(g)
            if g != home:
                groups.deps[home].add(g)
                groups.deps[home] |= groups.deps[g]
        producer[binding.var] = i
    members: dict = {}
    for i in range(len(block.bindings)):
        members.setdefault(groups.find(i), []).append(i)
    out = []
    for _root, idx in sorted(members.items(), key=lambda kv: kv[1][0]):
        tgt = target[idx[0]]
        if tgt is not None:
            out.append((tgt, idx))
    return out


def propose_regions(mod: tvm.IRModule) -> list:
    """Every region of every host function, numbered in module order (main first)."""
    regions: list = []
    for fname in ir.host_functions(mod):
        func = mod[fname]
        for block_index, (scope, block) in enumerate(ir.blocks_of(func.body)):
            for tgt, idx in _block_groups(mod, block):
                bindings = [block.bindings[i] for i in idx]
                ops, composites = [], []
                for b in bindings:
                    inner = ir.callee(mod, b.value)
                    composites.append(ir.func_attr(inner, ir.COMPOSITE))
                    ops.extend(ir.ops_in(inner, mod))
                regions.append(
                    Region(
                        id=len(regions),
                        target=tgt,
                        func=fname,
                        block=block_index,
                        scope=scope,
                        bindings=tuple(idx),
                        vars=tuple(b.var.name for b in bindings),
                        ops=tuple(ops),
                        composites=tuple(composites),
                    )
                )
    return regions
