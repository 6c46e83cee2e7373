"""Prune: return subgraphs that would not pay for their boundaries to the host.

A prune rule is a function ``(name, ops) -> reason or None``; the stage asks it
about every subgraph and inlines the rejected ones back into the host.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import NamedTuple

import tvm

from byoc_workbench.core import ir
from byoc_workbench.core.errors import WorkbenchError, user_error, whole_number
from byoc_workbench.flow.partition import inline_subgraphs

PruneRule = Callable[[str, list], str | None]


def no_mac(min_mac_ops: int = 1) -> PruneRule:
    """The default prune rule: a subgraph with fewer than ``min_mac_ops`` MAC ops goes back.

    Offloading costs a copy and a kernel launch at each boundary; a subgraph
    without multiply-accumulate work rarely earns that back (the seed's
    ``remove_no_mac_subgraphs``).
    """
    least = whole_number(min_mac_ops)
    if least is None or least < 0:
        raise WorkbenchError(
            f"min_mac_ops must be a whole number of MAC ops, 0 or more; got {min_mac_ops!r}",
            "pass 0 to keep every subgraph, 1 (the default) to prune those without a MAC op, or more",
        )

    def rule(name: str, ops: list) -> str | None:
        macs = sum(op in ir.MAC_OPS for op in ops)
        if macs < least:
            return f"{macs} MAC op{'s' if macs != 1 else ''} (needs {least})"
        return None

    rule.__qualname__ = f"no_mac(min_mac_ops={least})"  # its name in messages
    return rule


def keep_all(name: str, ops: list) -> str | None:
    """A prune rule that keeps every subgraph."""
    return None


def rule_name(rule) -> str:
    """How messages name a prune rule: its Python name (``no_mac(min_mac_ops=1)`` for :func:`no_mac`'s)."""
    return getattr(rule, "__qualname__", type(rule).__name__)


def check_prune_rule(rule) -> PruneRule:
    """``rule`` if it can be a prune rule (None: :func:`no_mac`), else a one-line error naming what is expected:
    not a function, or one that cannot take ``(name, ops)`` (such as :func:`no_mac` itself, not called)."""
    if rule is None:
        return no_mac()
    if not callable(rule):
        raise WorkbenchError(
            f"A prune rule must be a function (name, ops) -> reason or None; got {type(rule).__name__} ({rule!r:.40})",
            "pass stages.no_mac(), stages.keep_all, or your own def rule(name, ops): ...",
        )
    if not _takes(rule, "name", []):
        name = rule_name(rule)
        if _takes(rule):
            raise WorkbenchError(
                f"Prune rule {name} cannot take (name, ops) but can be called with none: it makes a prune rule",
                f"call it: prune_rule={name}()",
            )
        raise WorkbenchError(
            f"Prune rule {name} cannot take (name, ops)", "give it the two parameters, as in def rule(name, ops)"
        )
    return rule


def _takes(function, *args) -> bool:
    """Whether ``function`` can be called with ``args``, as far as its signature tells (a builtin may not say)."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # no signature to read
        return True
    try:
        signature.bind(*args)
    except TypeError:
        return False
    return True


def _reason(rule, name: str, ops: list) -> str | None:
    """Why ``rule`` returns subgraph ``name`` to the host (None: it stays offloaded)."""
    try:
        reason = rule(name, ops)
    except Exception as err:  # the user's prune rule can raise anything
        raise user_error(f"prune rule {rule_name(rule)} (on {name})", err) from err
    if reason is None or reason is False or reason == "":
        return None
    if reason is True:
        return f"rejected by {rule_name(rule)}"
    if not isinstance(reason, str):
        raise WorkbenchError(
            f"Prune rule {rule_name(rule)} returned {type(reason).__name__} {reason!r:.40} for {name}",
            "return a reason (a str) to prune the subgraph, or None to keep it",
        )
    return reason


class Pruned(NamedTuple):
    """The module with rejected subgraphs back on the host, and ``{name: reason}`` for each one sent back."""

    mod: tvm.IRModule
    reasons: dict[str, str]


def prune(mod: tvm.IRModule, rule: PruneRule | None = None, ops: dict | None = None) -> Pruned:
    """Return to the host every subgraph that ``rule`` rejects; returns ``(module, {name: reason})``.

    ``ops`` may give each subgraph's ops (``{name: [op, ...]}``, as the partition stage's summary
    lists them), so that they are not listed again."""
    rule = check_prune_rule(rule)
    ops = ops or {}
    reasons: dict[str, str] = {}
    for name in ir.subgraph_functions(mod):
        reason = _reason(rule, name, list(ops[name]) if name in ops else ir.ops_in(mod[name], mod))
        if reason:
            reasons[name] = reason
    return Pruned(inline_subgraphs(mod, reasons), reasons)
