"""Prune: return subgraphs that would not pay for their boundaries to the host.

A prune rule is a function ``(name, ops) -> reason or None``; the stage asks it
about every subgraph and inlines the rejected ones back into the host.
"""

from __future__ import annotations

from collections.abc import Callable

import tvm

from .. import ir
from ..errors import WorkbenchError
from .partition import inline_subgraphs

PruneRule = Callable[[str, list], str | None]


def no_mac(min_mac_ops: int = 1) -> PruneRule:
    """The default prune rule: a subgraph with fewer than ``min_mac_ops`` MAC ops goes back.

    Offloading costs a copy and a kernel launch at each boundary; a subgraph
    without multiply-accumulate work rarely earns that back (the seed's
    ``remove_no_mac_subgraphs``).
    """
    if isinstance(min_mac_ops, bool) or not isinstance(min_mac_ops, int) or min_mac_ops < 0:
        raise WorkbenchError(
            f"min_mac_ops must be a whole number of MAC ops, 0 or more; got {min_mac_ops!r}",
            "pass 0 to keep every subgraph, 1 (the default) to prune those without a MAC op, or more",
        )

    def rule(name: str, ops: list) -> str | None:
        macs = sum(op in ir.MAC_OPS for op in ops)
        if macs < min_mac_ops:
            return f"{macs} MAC op{'s' if macs != 1 else ''} (needs {min_mac_ops})"
        return None

    rule.__doc__ = f"no_mac(min_mac_ops={min_mac_ops})"
    return rule


def keep_all(name: str, ops: list) -> str | None:
    """A prune rule that keeps every subgraph."""
    return None


def prune(mod: tvm.IRModule, rule: PruneRule | None = None) -> tuple:
    """Return to the host every subgraph that ``rule`` rejects; returns ``(module, {name: reason})``."""
    rule = rule or no_mac()
    reasons = {}
    for name in ir.subgraph_functions(mod):
        reason = rule(name, ir.ops_in(mod[name], mod))
        if reason:
            reasons[name] = reason
    return inline_subgraphs(mod, reasons), reasons
