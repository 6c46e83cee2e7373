"""Reuse pattern matches across rule toggles.

``FuseOpsByPattern`` takes about 0.4 s on SSD-ResNet50 whatever the rule set,
and a toggle needs a new composite stage. :class:`FuseCache` fuses once with
every rule that can match, then answers a smaller rule set by inlining the
composite calls of the rules left out, which takes milliseconds. That is the
same module ``FuseOpsByPattern`` would give (up to the numbering of the
composite functions' global names) when the rules left out claim ops no kept
rule names, and each of their composites is one call; for any other rule set
the cache runs the pass itself.
"""

from __future__ import annotations

import tvm
from tvm import relax

from byoc_workbench.core import ir, ir_edit, transforms
from byoc_workbench.flow.fusion import fuse_rules


def _single_call(func: relax.Function):
    """The one binding's value of a composite with a single call, or None."""
    body = func.body
    bindings = [b for block in body.blocks for b in block.bindings]
    if len(bindings) != 1 or not bindings[0].var.same_as(body.body):
        return None
    return bindings[0].value


class FuseCache:
    """``fuse(mod, rules)`` for :func:`byoc_workbench.stages.run_stages`, reusing matches on one module.

    Parameters
    ----------
    mod : tvm.IRModule
        The module whose fusions are reused; any other module is fused afresh.
    rules : sequence of Rule
        Every rule a workbench may switch on; those that name no op of ``mod``
        can never match there, and are dropped before fusing.
    """

    def __init__(self, mod: tvm.IRModule, rules):
        self.mod = mod
        self.present = set(transforms.op_counts(mod))
        self.rules = tuple(rules)
        self._full: dict = {}  # rule kind -> (qualified names, fused module), once asked twice
        self._asked: set = set()
        self.fast = self.slow = 0  # how often each path ran (for tests and benchmarks)

    def can_match(self, rule) -> bool:
        """False when ``rule`` names ops and none of them is in the module."""
        return not rule.ops or bool(set(rule.ops) & self.present)

    def __call__(self, mod: tvm.IRModule, rules) -> tvm.IRModule:
        rules = [r for r in rules if self.can_match(r)]
        kinds = {r.kind for r in rules}
        if not rules or mod is not self.mod or len(kinds) != 1:
            return fuse_rules(mod, rules) if rules else mod
        (kind,) = kinds
        every = [r for r in self.rules if r.kind == kind and self.can_match(r)]
        names = tuple(r.qualified for r in rules)
        if kind not in self._full and (names == tuple(r.qualified for r in every) or kind in self._asked):
            self._full[kind] = (tuple(r.qualified for r in every), fuse_rules(mod, every))
        self._asked.add(kind)
        full = self._full.get(kind)
        out = self._without(full, rules, every) if full else None
        if out is None:
            self.slow += 1
            return fuse_rules(mod, rules)
        self.fast += 1
        return out

    def _without(self, full, rules, every):
        """The fused module of ``full`` with the composites of the rules not in ``rules`` inlined, or None."""
        names, fused = full
        kept = {r.qualified for r in rules}
        off = {r.qualified for r in every} - kept
        if not off:
            return fused
        kept_ops = {op for r in rules for op in r.ops}
        if any(set(r.ops) & kept_ops for r in every if r.qualified in off):
            return None  # a kept rule might claim what a dropped one claimed
        drop = {}  # by the GlobalVar's handle: the calls name the module's own GlobalVar objects
        for gv, func in fused.functions.items():
            if ir.func_attr(func, ir.COMPOSITE) in off:
                value = _single_call(func)
                if value is None:
                    return None
                drop[gv.__chandle__()] = (gv.name_hint, func.params, value)

        def inline(binding, is_df):
            v = binding.value
            if type(v) is not relax.Call:  # exact type tests, as ir.walk's
                return None
            op = v.op
            found = drop.get(op.__chandle__()) if type(op) is tvm.ir.GlobalVar else None
            if found is not None:
                _, params, value = found
                # The call's variable has the value's type in this function (a composite's own types may
                # name its own symbolic sizes), so Normalize has nothing to infer.
                inlined = ir_edit.typed(
                    ir_edit.substitute(value, ir_edit.by_handle(zip(params, v.args))), binding.var.ty
                )
                return [relax.VarBinding(binding.var, inlined)]
            return None

        return ir_edit.map_bindings(fused, inline, remove=sorted(name for name, _, _ in drop.values()))
