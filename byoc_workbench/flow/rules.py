"""Annotation rules: per-op and per-pattern, kept in one table per target.

A rule set is a plain value (a tuple of rules). Switching a rule off builds a
new rule set, so widgets, the CLI and tests can hold different rule sets side
by side.

Targets are found by name in a :class:`Targets` table, a value too. The
backends' registry (:class:`byoc_workbench.backends.registry.Registry`) holds
one beside its backends, and ``register_codegen(..., rules=...)`` adds the
codegen's target to it. :data:`TARGETS` is the table of the default registry:
it lives here, not in the registry, because this layer reads it
(:func:`get_target`) and sits below the backends, so it cannot import them.
Every function that looks a target up by name takes ``targets=`` for another
table; importing a module adds nothing to any table.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Literal

import tvm
from tvm import relax
from tvm.relax import dpl
from tvm.relax.backend.contrib import tensorrt  # noqa: F401  registers the tensorrt.* patterns
from tvm.relax.backend.pattern_registry import get_patterns_with_prefix
from tvm.relax.dpl import DFPattern, is_op, wildcard

from byoc_workbench.core.errors import WorkbenchError, did_you_mean, user_error

CallCheck = Callable[[relax.Call], bool]


@dataclasses.dataclass(frozen=True)
class Rule:
    """A way for a target to claim part of a graph.

    ``kind == "op"`` claims single calls to ``op`` (the seed's
    ``register_op_attr(op, "target.X")``); ``kind == "pattern"`` claims a
    whole :mod:`tvm.relax.dpl` pattern, which becomes a composite function
    (the seed's ``MergeComposite``). ``check`` may veto a match.
    """

    target: str
    name: str
    kind: Literal["op", "pattern"]
    op: str | None = None
    pattern: DFPattern | None = None
    check: CallCheck | None = None
    doc: str = ""
    # Upstream pattern tables check a PatternCheckContext, not a call.
    annotations: dict = dataclasses.field(default_factory=dict, compare=False)
    ctx_check: Callable | None = dataclasses.field(default=None, compare=False)
    # The Relax ops it can claim, computed when the rule is built.
    ops: tuple = dataclasses.field(default=(), compare=False)

    def __post_init__(self):
        if not self.ops:
            object.__setattr__(self, "ops", (self.op,) if self.kind == "op" else pattern_ops(self.pattern))

    @property
    def qualified(self) -> str:
        """``target.name``, also the ``Composite`` attribute of what it claims."""
        return f"{self.target}.{self.name}"

    def fusion_pattern(self) -> relax.transform.FusionPattern:
        """The :class:`FusionPattern` that ``FuseOpsByPattern`` takes."""
        if self.kind == "op":
            pattern = is_op(self.op)(*[wildcard() for _ in range(_arity(self.op))])
        else:
            pattern = self.pattern
        return relax.transform.FusionPattern(self.qualified, pattern, self.annotations, self._context_check())

    def _context_check(self):
        """``FuseOpsByPattern`` checks a PatternCheckContext; a per-call check sees the matched call."""
        if self.check is None:
            return self.ctx_check  # upstream's or the workbench's own: a bug there keeps its traceback
        call_check = self.check
        return _reported(self, lambda ctx: call_check(ctx.matched_expr))


# The first exception a rule's check raised inside :func:`reported_checks`, with its rule.
_RAISED: contextvars.ContextVar = contextvars.ContextVar("byoc_workbench_rule_errors", default=None)


def _reported(rule: Rule, check: Callable) -> Callable:
    """``check`` for ``FuseOpsByPattern``: an exception in it is kept for :func:`reported_checks`.

    Raised inside the pass, an exception would cross TVM's C++ and come back as
    a bare RuntimeError with a 40-line trace; kept aside, it names the rule.
    """

    def guarded(ctx) -> bool:
        try:
            return bool(check(ctx))
        except Exception as err:  # the user's check can raise anything
            raised = _RAISED.get()
            if raised is None:
                raise
            if not raised:
                raised.append((rule, err))
            return False

    return guarded


@contextlib.contextmanager
def reported_checks():
    """Run a pattern pass inside: a rule's check that raised ends it as one line naming the rule.

    Raises
    ------
    byoc_workbench.core.errors.UserCodeError
        The rule, the exception, and the line of the user's file it came from.
    """
    token = _RAISED.set([])
    try:
        yield
        raised = _RAISED.get()
    finally:
        _RAISED.reset(token)
    if raised:
        rule, err = raised[0]
        raise user_error(f"rule {rule.qualified}'s check", err) from err


def pattern_ops(pattern: DFPattern) -> tuple[str, ...]:
    """The Relax ops a pattern's calls name, in first-seen order, read from its structure."""
    found: dict = {}

    def visit(p):
        if isinstance(p, dpl.CallPattern):
            op = p.op
            if isinstance(op, dpl.ExprPattern) and isinstance(op.expr, tvm.ir.Op):
                found[op.expr.name] = None
            else:
                visit(op)
            for a in p.args or ():
                visit(a)
        elif isinstance(p, (dpl.OrPattern, dpl.AndPattern)):
            visit(p.left)
            visit(p.right)
        elif isinstance(p, dpl.TupleGetItemPattern):
            visit(p.tuple)
        elif isinstance(p, (dpl.TuplePattern, dpl.UnorderedTuplePattern)):
            for f in p.fields:
                visit(f)
        elif isinstance(p, (dpl.AttrPattern, dpl.DataTypePattern, dpl.ShapePattern, dpl.TypePattern)):
            visit(p.pattern)
        elif isinstance(p, dpl.FunctionPattern):
            visit(p.body)

    visit(pattern)
    return tuple(found)


def _arity(op_name: str) -> int:
    op = tvm.ir.Op.get(op_name)
    return max(1, int(op.num_inputs))


def _check_parts(target, name, check) -> None:
    for what, value in (("target", target), ("name", name)):
        if not isinstance(value, str) or not value.strip() or "," in value:
            raise WorkbenchError(
                f"A rule's {what} must be a non-empty text without commas; got {value!r}",
                "name rules like op_rule('mychip', 'add', 'relax.add')",
            )
    if check is not None and not callable(check):
        raise WorkbenchError(
            f"Rule {target}.{name}'s check must be a function (call) -> bool; got {type(check).__name__}",
            "pass check=lambda call: ... or leave it out",
        )


def op_rule(target: str, name: str, op: str, check: CallCheck | None = None, doc: str = "") -> Rule:
    """A per-op rule: every call to ``op`` that passes ``check``."""
    _check_parts(target, name, check)
    try:
        tvm.ir.Op.get(op)
    except Exception:  # TVM raises its own error type for an unknown op
        raise WorkbenchError(
            f"Rule {target}.{name} names op '{op}', which TVM does not know.",
            "use a Relax op name such as 'relax.add' or 'relax.nn.conv2d'.",
        ) from None
    return Rule(target, name, "op", op=op, check=check, doc=doc)


def pattern_rule(target: str, name: str, pattern, check: CallCheck | None = None, doc: str = "") -> Rule:
    """A per-pattern rule: every match of a :mod:`tvm.relax.dpl` pattern."""
    _check_parts(target, name, check)
    if not isinstance(pattern, DFPattern):
        raise WorkbenchError(
            f"Rule {target}.{name} is not a valid pattern: got {type(pattern).__name__}.",
            "build it from tvm.relax.dpl, e.g. is_op('relax.nn.relu')(wildcard()).",
        )
    return Rule(target, name, "pattern", pattern=pattern, check=check, doc=doc)


def every_op_rules(target: str, ops, takes: CallCheck, doc: str) -> tuple[Rule, ...]:
    """A runtime's own target: one per-pattern rule for each op in ``ops`` (named after it), claiming
    every call that ``takes(call)``, as torch.fx's ``OperatorSupport`` asks of a node. Each pattern takes
    the op's required arguments, then any optional ones (strided_slice without strides)."""

    def claims(op: str):
        arity = max(1, int(tvm.ir.Op.get(op).num_inputs))
        return is_op(op)(*[wildcard() for _ in range(arity)], varg_default_wildcard=True)

    return tuple(
        pattern_rule(target, op.removeprefix("relax.").replace(".", "_"), claims(op), takes, doc) for op in sorted(ops)
    )


def narrowed(rules, refuses: Callable) -> tuple[Rule, ...]:
    """``rules`` whose matches a backend runs whole: a match holding a call ``refuses(call)`` is not
    claimed (the rule's own check still applies), so rules never offload what the backend cannot run."""

    def narrow(rule):
        inner = rule.fusion_pattern().check

        def check(ctx) -> bool:
            calls = [ctx.matched_expr, *ctx.annotated_expr.values(), *ctx.matched_bindings.values()]
            if any(isinstance(c, relax.Call) and isinstance(c.op, tvm.ir.Op) and refuses(c) for c in calls):
                return False
            return inner is None or bool(inner(ctx))

        return dataclasses.replace(rule, check=None, ctx_check=check)

    return tuple(narrow(r) for r in rules)


def codegen_name(target: str) -> str:
    """``byoc-target`` -> ``byoc_target``: the name in ``relax.ext.<name>`` and ``Codegen``."""
    return re.sub(r"\W", "_", target)


@dataclasses.dataclass(frozen=True)
class Target:
    """A BYOC target: its name and its rule table.

    ``name`` is what composite names start with (``byoc-target.add``);
    ``codegen`` is derived from it, an identifier (``byoc_target``) for
    ``relax.ext.<codegen>`` and the ``Codegen`` attribute.
    """

    name: str
    rules: tuple
    doc: str = ""

    @property
    def codegen(self) -> str:
        return codegen_name(self.name)


# --- byoc-target: the seed's demo target -------------------------------------


def _conv2d_relu(with_bias: bool) -> DFPattern:
    conv = is_op("relax.nn.conv2d")(wildcard(), wildcard())
    if with_bias:
        # Relax has no bias_add: a bias of shape (C,) is expanded to (C, 1, 1)
        # and added, so the expand_dims belongs inside the composite.
        conv = is_op("relax.add")(conv, is_op("relax.expand_dims")(wildcard()))
    return is_op("relax.nn.relu")(conv)


def byoc_target_rules() -> tuple[Rule, ...]:
    """The seed's four rules. Patterns come first: they are tried before per-op rules."""
    t = "byoc-target"
    return (
        pattern_rule(t, "conv2d_bias_relu", _conv2d_relu(True), doc="conv2d, then bias add, then relu"),
        pattern_rule(t, "conv2d_relu", _conv2d_relu(False), doc="conv2d, then relu"),
        op_rule(t, "reshape", "relax.reshape", doc="any reshape"),
        op_rule(t, "add", "relax.add", doc="any elementwise add"),
    )


def tensorrt_rules() -> tuple[Rule, ...]:
    """Upstream TVM's TensorRT pattern table, one rule per entry, in its order.

    Upstream registers two entries named ``tensorrt.strided_slice``; the second
    becomes ``strided_slice_2`` so that every rule can be toggled by name.
    """
    rules, seen = [], {}
    for entry in get_patterns_with_prefix("tensorrt"):
        name = entry.name.split(".", 1)[1]
        seen[name] = seen.get(name, 0) + 1
        rules.append(
            Rule(
                "tensorrt",
                name if seen[name] == 1 else f"{name}_{seen[name]}",
                "pattern",
                pattern=entry.pattern,
                annotations=dict(entry.annotation_patterns),
                ctx_check=entry.check,
                doc="upstream tvm.relax.backend.contrib.tensorrt",
            )
        )
    return tuple(rules)


def _byoc_target() -> Target:
    return Target("byoc-target", byoc_target_rules(), "the seed's demo target")


def _tensorrt_target() -> Target:
    return Target("tensorrt", tensorrt_rules(), "upstream TVM's TensorRT patterns")


class Targets:
    """Targets by name, in the order added: what :func:`get_target` and ``--target`` choose from.

    Each entry makes its :class:`Target` when asked for (the tensorrt table
    imports upstream's patterns then). :meth:`builtin` is a new table of the
    built-in targets; :meth:`add` puts a target in, replacing one of its name.
    """

    def __init__(self, makers: dict | None = None):
        self._makers = dict(makers or {})

    @classmethod
    def builtin(cls) -> Targets:
        """A new table holding the built-in targets: ``byoc-target`` and ``tensorrt``."""
        return cls({"byoc-target": _byoc_target, "tensorrt": _tensorrt_target})

    def add(self, target: Target) -> Target:
        """Put ``target`` in the table (replacing one of the same name) and return it."""
        self._makers[target.name] = lambda: target
        return target

    def get(self, name: str) -> Target:
        """The target called ``name``, or a one-line error naming the known ones."""
        if not isinstance(name, str) or name not in self._makers:
            raise WorkbenchError(
                f"Unknown target {name!r}{did_you_mean(name, self)}.", f"choose one of: {', '.join(sorted(self))}."
            )
        return self._makers[name]()

    def copy(self) -> Targets:
        """A new table of the same targets: adding to one leaves the other as it is."""
        return Targets(self._makers)

    def reset(self) -> None:
        """Back to the built-in targets, in place: whoever holds this table sees the change."""
        self._makers = Targets.builtin()._makers

    def __contains__(self, name) -> bool:
        return name in self._makers

    def __iter__(self):
        return iter(tuple(self._makers))


# The default registry's targets (see the module's docstring): register_codegen adds to it.
TARGETS = Targets.builtin()


def get_target(name: str, targets: Targets | None = None) -> Target:
    """The target called ``name`` in ``targets`` (default: :data:`TARGETS`)."""
    return (TARGETS if targets is None else targets).get(name)


def as_target(target, targets: Targets | None = None) -> Target:
    """``target`` as a :class:`Target`: one already, or the name of one in ``targets`` (default: :data:`TARGETS`)."""
    if isinstance(target, Target):
        return target
    if isinstance(target, str):
        return get_target(target, targets)
    raise WorkbenchError(
        f"A target must be a Target or the name of one; got {type(target).__name__}",
        f"pass one of: {', '.join(sorted(TARGETS if targets is None else targets))}, or rules.Target(name, rules)",
    )


def check_rules(rules, where: str = "rules") -> tuple[Rule, ...]:
    """``rules`` as a tuple, or a one-line error: not a list of :class:`Rule`, or two rules of one name."""
    if isinstance(rules, (Rule, str, bytes, dict)) or not isinstance(rules, Iterable):
        raise WorkbenchError(
            f"{where} must be a list of rules; got {type(rules).__name__}",
            "make it a list of rules.op_rule(...) and rules.pattern_rule(...) values",
        )
    rules = tuple(rules)
    bad = next((r for r in rules if not isinstance(r, Rule)), None)
    if bad is not None:
        raise WorkbenchError(
            f"{where} must hold byoc_workbench.flow.rules.Rule values; got {type(bad).__name__} ({bad!r:.60})",
            "build each with rules.op_rule(...) or rules.pattern_rule(...)",
        )
    seen: set = set()
    for r in rules:
        if r.qualified in seen:
            raise WorkbenchError(
                f"Two rules are named {r.qualified}: switching one would switch both",
                "give each rule of a target its own name",
            )
        seen.add(r.qualified)
    return rules


def select(rules: Sequence[Rule], names: Iterable[str] | None) -> tuple[Rule, ...]:
    """The rules named ``target.rule`` in ``names``, in table order; all when None."""
    if names is None:
        return tuple(rules)
    if isinstance(names, str):  # "a.x,b.y", as --rules takes them
        names = parse_rule_list(names)
    names = list(names) if isinstance(names, Iterable) else [names]
    odd = [n for n in names if not isinstance(n, str)]  # a list: the odd one may be None itself
    if odd:
        raise WorkbenchError(
            f"Rule names must be texts like 'byoc-target.add'; got {type(odd[0]).__name__} ({odd[0]!r:.40})",
            "pass a list of target.rule names, or None for all rules",
        )
    wanted = [n.strip() for n in names if n.strip()]
    known = {r.qualified: r for r in rules}
    unknown = [n for n in wanted if n not in known]
    for name in unknown:
        _of_another_target(name, {r.target for r in rules})
    if unknown:
        raise WorkbenchError(
            f"Unknown rule {', '.join(unknown)}.",
            f"write rules as target.rule; known rules are: {', '.join(known)}.",
        )
    return tuple(r for r in rules if r.qualified in wanted)


def _of_another_target(name: str, targets: set) -> None:
    """A one-line error for a rule of a built-in target other than ``targets``, whose rules these are."""
    owner = name.partition(".")[0]
    if owner in targets or owner not in TARGETS:
        return
    if any(r.qualified == name for r in TARGETS.get(owner).rules):
        raise WorkbenchError(
            f"Rule {name} is {owner}'s, and the rules here are {', '.join(sorted(targets))}'s",
            f"pass --target {owner} (in Python, the target {owner!r}) to use its rules",
        )


def parse_rule_list(text: str | None) -> list | None:
    """``"a.x,b.y"`` -> ``["a.x", "b.y"]``; ``""`` -> ``[]`` (no rules); None stays None."""
    if text is None:
        return None
    return [n for n in (p.strip() for p in text.split(",")) if n]


def target_and_extra(target_name: str | None, user_rules, model: str = "the model file", targets=None):
    """The target whose rules apply, plus the user's own rules for it.

    ``user_rules`` come checked from :func:`byoc_workbench.core.user_file.load_model_file`.
    A target that is neither in ``targets`` (default: :data:`TARGETS`) nor named by one of the user's rules is
    refused: running with no rule at all would look like a model that matches nothing.
    """
    targets = TARGETS if targets is None else targets
    if user_rules is None:
        return targets.get(target_name or "byoc-target"), ()
    theirs = sorted({r.target for r in user_rules})
    name = target_name or (theirs[0] if theirs else "byoc-target")
    own = tuple(r for r in user_rules if r.target == name)
    if name in targets:
        return targets.get(name), own
    if own:
        return Target(name, own, "rules from the model file"), ()
    registered = ", ".join(sorted(targets))
    raise WorkbenchError(
        f"Unknown target '{name}': the rules in {model} are for {', '.join(theirs) or 'no target'}, "
        f"and the registered targets are {registered}",
        f"pass --target {theirs[0] if theirs else 'byoc-target'}",
    )
