"""One lowering of a subgraph: its bindings as a short list of typed steps, which every renderer reads.

The ONNX translator (:mod:`.onnx`), the torch backend (:mod:`.pytorch`) and the codegens' planner
(:mod:`.planner`) each turn a partitioned subgraph into a program. :func:`lower_subgraph` walks it once
(:func:`byoc_workbench.core.ir.walk`, its values kept by :class:`byoc_workbench.core.ir.Values`) and gives them
the same steps, in order:

- :class:`Constant`: a tensor constant read (a renderer names it, or makes it an initializer);
- :class:`Inline`: a call of a composite or local function whose bindings follow;
- :class:`OpCall`: an op call (or a composite left whole), with a reference to each argument and the
  index of its result.

A reference is an :class:`Input`, a :class:`Const`, an :class:`Out` (an op call's result), an
:class:`Item` of one of those, a :class:`Static` argument (a shape, a prim value: converters read it
from the call), or a tuple of references. Bindings that only alias a value, build a tuple or take an
item of a tuple, and the parameters and results of the functions it goes into, are resolved here: they
are no step. Each renderer is a table of its own (op name -> converter) over these steps, as
tinygrad's renderers are over its ops.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import tvm
from tvm import relax

from byoc_workbench.core import ir
from byoc_workbench.core.errors import WorkbenchError

# --- references --------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Input:
    """The subgraph's parameter ``index``."""

    index: int


@dataclasses.dataclass(frozen=True)
class Const:
    """The tensor constant of :class:`Constant` step ``index``."""

    index: int


@dataclasses.dataclass(frozen=True)
class Out:
    """The result of :class:`OpCall` ``index`` (the ``index``-th op call of the steps)."""

    index: int


@dataclasses.dataclass(frozen=True)
class Item:
    """Item ``index`` of a tuple that a parameter or an op call holds."""

    of: Input | Out
    index: int


@dataclasses.dataclass(frozen=True)
class Static:
    """An argument known before the run (a ShapeExpr, a prim value), which a converter reads from its call."""

    expr: relax.Expr = dataclasses.field(compare=False)


def named(ref, inputs: list, consts: list, outs: list):
    """What a renderer calls an :class:`Input`, a :class:`Const` or an :class:`Out`: its entry in the list of
    that kind (each indexed as the references are); None for another reference."""
    table = {Input: inputs, Const: consts, Out: outs}.get(type(ref))
    return None if table is None else table[ref.index]


# --- steps -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Constant:
    """A tensor constant read, the ``index``-th: each read is one (a renderer that shares them keys by ``expr``)."""

    index: int
    expr: relax.Expr = dataclasses.field(default=None, compare=False, repr=False)


@dataclasses.dataclass(frozen=True)
class Inline:
    """A call whose callee's bindings follow: a composite (``name``), or a local function (``name`` None)."""

    name: str | None


@dataclasses.dataclass(frozen=True)
class OpCall:
    """A call computed by one converter: ``name`` is its op, or the composite's name when ``callee`` is a
    composite left whole (``descend`` said so). ``args`` are references, one per argument."""

    name: str
    args: tuple
    out: int
    call: relax.Call = dataclasses.field(default=None, compare=False, repr=False)
    var: relax.Var = dataclasses.field(default=None, compare=False, repr=False)
    callee: relax.Function | None = dataclasses.field(default=None, compare=False, repr=False)


@dataclasses.dataclass(frozen=True)
class Lowered:
    """A subgraph as steps: ``result`` is a reference (or a tuple of them) to what it returns."""

    steps: list
    result: object


def op_steps(func: relax.Function) -> list:
    """The :class:`byoc_workbench.core.ir.Step` of every op call in ``func``, composites included, in order: what
    a translator vets before it lowers anything."""
    return [s for s in ir.walk(func) if s.op]


class _Lowering:
    def __init__(self, name: str):
        self.name = name
        self.steps: list = []
        self.calls = self.consts = 0
        self.values = ir.Values(self._leaf)

    def _leaf(self, expr):
        if isinstance(expr, tvm.ir.expr.Constant) and hasattr(expr.value, "numpy"):
            self.steps.append(Constant(self.consts, expr))
            self.consts += 1
            return Const(self.consts - 1)
        return Static(expr)

    def value(self, frame: tuple, expr):
        if isinstance(expr, relax.TupleGetItem):
            whole = self.value(frame, expr.tuple_value)
            return whole[expr.index] if isinstance(whole, tuple) else Item(whole, expr.index)
        return self.values.get(frame, expr)

    def bind(self, step: ir.Step) -> None:
        value, frame = step.value, step.frame
        composite = ir.func_attr(step.callee, ir.COMPOSITE)
        if step.descended:
            self.steps.append(Inline(composite))
            self.values.enter(step, [self.value(frame, a) for a in value.args])
        elif step.op or composite:
            args = tuple(self.value(frame, a) for a in value.args)
            callee = None if step.op else step.callee
            self.steps.append(OpCall(step.op or composite, args, self.calls, value, step.var, callee))
            self.values.bind(frame, step.var, Out(self.calls))
            self.calls += 1
        elif isinstance(value, (relax.Tuple, relax.TupleGetItem, tvm.ir.expr.Constant)) or ir.is_var(value):
            self.values.bind(frame, step.var, self.value(frame, value))
        else:
            raise WorkbenchError(
                f"{self.name} holds a {type(value).__name__} binding, which no backend lowers "
                "(only op calls, composite and local functions, tuples, their items, constants and variables)",
                "keep it on the host: switch off the rule that offloads it",
            )


def lower_subgraph(func: relax.Function, name: str = "subgraph", descend: bool | Callable = True) -> Lowered:
    """``func``'s bindings as steps, every value a reference (see the module's docstring).

    Parameters
    ----------
    func : relax.Function
        A partitioned subgraph, or any Relax function without control flow.
    name : str
        Its name, for the error a binding of another kind raises.
    descend : bool or callable
        As :func:`byoc_workbench.core.ir.walk`'s: which calls of composite and local functions the steps go
        into; a composite not gone into is one :class:`OpCall`, named after it.
    """
    lowering = _Lowering(name)
    for i, p in enumerate(func.params):
        lowering.values.bind((), p, Input(i))
    for step in ir.walk(func, descend=descend):
        lowering.bind(step)
    result = lowering.value((), func.body.body)
    return Lowered(lowering.steps, result)
