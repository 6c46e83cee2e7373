"""Small helpers over Relax IR: the one walk, listing ops and functions, types as text.

:func:`walk` is the traversal every analysis, pass, codegen and drawing uses:
it yields each binding with its callee, its composite and its place in the
function/branch/call nesting, and owns the table of local functions. Building
new IR out of old is :mod:`byoc_workbench.core.ir_edit`'s; the few uses of TVM's
private API are :mod:`byoc_workbench.core.tvm_private`'s.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Iterator

import tvm
from tvm import relax

from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.core.tvm_private import items

COMPOSITE = "Composite"
CODEGEN = "Codegen"
GLOBAL_SYMBOL = "global_symbol"

# Ops whose cost is dominated by multiply-accumulates; prune keeps subgraphs that hold one.
MAC_OPS = frozenset(
    {
        "relax.nn.conv1d",
        "relax.nn.conv2d",
        "relax.nn.conv3d",
        "relax.nn.conv1d_transpose",
        "relax.nn.conv2d_transpose",
        "relax.nn.conv3d_transpose",
        "relax.matmul",
        "relax.linear",
        "relax.nn.attention",
    }
)


_VARS = (relax.Var, relax.DataflowVar)

_IS_VAR: dict = {}  # Python class -> whether it is a variable's: isinstance goes through abc (half a microsecond)


def is_var(expr) -> bool:
    t = type(expr)
    known = _IS_VAR.get(t)
    if known is None:
        known = _IS_VAR[t] = issubclass(t, _VARS)
    return known


def free_vars(expr) -> list:
    """Variables that ``expr`` reads, in first-use order (ANF expressions only)."""
    out: list = []
    _free_vars(expr, out, set())
    return out


def _free_vars(e, out: list, seen: set) -> None:
    # A function of the module, not one nested in free_vars: a nested recursive function is a reference
    # cycle (it holds itself), left on every call for the cycle collector (tens of thousands a toggle).
    if is_var(e):
        h = e.__chandle__()
        if h not in seen:
            seen.add(h)
            out.append(e)
    elif type(e) is relax.Call:  # exact type tests: see _walk_seq
        for a in items(e.args):
            _free_vars(a, out, seen)
    elif type(e) is relax.Tuple:
        for f in items(e.fields):
            _free_vars(f, out, seen)
    elif type(e) is relax.TupleGetItem:
        _free_vars(e.tuple_value, out, seen)
    # anything else reads no variable: constants, shapes, a local function (it is closed)


class PerObject:
    """What is computed from an IR object, kept per object: IR never changes once built.

    Keyed by the object's handle, with the object itself, which keeps it alive (no other object can
    take its handle while it is here): a dict keyed by the objects would compare each new Python
    object for one by value, through the FFI, and some (types) are not hashable at all. Past
    ``limit`` new objects the ones not asked for since the ``limit`` before go (two generations:
    clearing everything at once made a 12,000-op toggle compute its functions' attributes again).
    """

    def __init__(self, compute: Callable, limit: int):
        self._compute = compute
        self._limit = limit
        self._kept: dict = {}
        self._older: dict = {}

    def __call__(self, obj):
        handle = obj.__chandle__()
        kept = self._kept.get(handle)
        if kept is None:
            kept = self._older.pop(handle, None) or (obj, self._compute(obj))
            if len(self._kept) >= self._limit:
                self._older, self._kept = self._kept, {}
            self._kept[handle] = kept
        return kept[1]


# A function's attributes as Python strings: asked thousands of times per rule toggle, 4x slower through the FFI.
_attrs_of = PerObject(lambda f: {} if f.attrs is None else {str(k): str(v) for k, v in f.attrs.items()}, 32768)


def func_attr(func, key: str):
    """A function attribute as a Python string, or None."""
    if type(func) is not relax.Function:  # exact: see _walk_seq
        return None
    return _attrs_of(func).get(key)


def callee(mod: tvm.IRModule, call):
    """The relax.Function a call reaches (global or local), or None for ops and externs."""
    op = call.op
    if type(op) is tvm.ir.GlobalVar:
        func = mod[op]
        return func if type(func) is relax.Function else None
    return op if type(op) is relax.Function else None


def callee_name(call) -> str:
    op = call.op
    if isinstance(op, tvm.ir.Op):
        return op.name
    if isinstance(op, tvm.ir.GlobalVar):
        return op.name_hint
    if isinstance(op, relax.ExternFunc):
        return str(op.global_symbol)
    if is_var(op):
        return op.name
    return type(op).__name__


_OP_NAMES: dict = {}  # an Op's handle -> its name: ops are registered once and live as long as the process


def op_name(op: tvm.ir.Op) -> str:
    """An op's name as a plain Python string, one object per op: TVM's own (``op.name``) is a new FFI
    string on every read, which a stage's counts, regions and diagrams would each keep a copy of."""
    handle = op.__chandle__()
    name = _OP_NAMES.get(handle)
    if name is None:
        name = _OP_NAMES[handle] = sys.intern(str(op.name))
    return name


# --- the one walk ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Place:
    """One level of nesting around a binding.

    ``kind`` is ``"function"`` (``name`` is the function's name), ``"then"`` or
    ``"else"`` (a branch of the If bound to ``var``), or ``"call"`` (the body of
    the function called by the binding of ``var``; ``name`` is its Composite
    name, or the name of the local function).
    """

    kind: str
    name: str
    var: relax.Var | None = None


class _once:
    """:class:`functools.cached_property` without its lock (Python 3.11 takes one on each first read, which
    is most of the cost of a step's ``reads``, ``op`` and ``frame``; a walk's steps are never shared
    between threads while it runs)."""

    def __init__(self, fn: Callable):
        self.fn, self.name, self.__doc__ = fn, fn.__name__, fn.__doc__

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, obj, cls=None):
        if obj is None:
            return self
        value = obj.__dict__[self.name] = self.fn(obj)
        return value


@dataclasses.dataclass(eq=False)  # a walk makes tens of thousands: a frozen one costs 3 times as much to make
class Step:
    """One binding, where it sits, and what it calls (a record: nothing changes it once the walk made it).

    ``callee`` is the relax.Function a call reaches (a global, a local function
    bound to a variable, or one written inline), else None. ``composite`` is
    the Composite name of the innermost composite holding the binding. When
    ``descended`` is true, the callee's own bindings follow this step.
    """

    binding: relax.Binding
    # The binding's, read once by the walk: each read through the FFI makes a new Python object, and
    # a dict keyed by variables compares a new object by value (microseconds), the same by identity.
    var: relax.Var = dataclasses.field(compare=False, repr=False)
    value: relax.Expr = dataclasses.field(compare=False, repr=False)
    callee: relax.Function | None
    composite: str | None
    path: tuple  # of Place, outermost first
    dataflow: bool
    descended: bool = False
    block: relax.BindingBlock | None = dataclasses.field(default=None, compare=False, repr=False)

    @_once
    def reads(self) -> list:
        """The variables the binding reads (:func:`reads`), found once per step."""
        return reads(self.value)

    @_once
    def op(self) -> str | None:
        """The Relax op's name when the binding calls an op, else None."""
        if not isinstance(self.value, relax.Call):
            return None
        op = self.value.op
        return op_name(op) if isinstance(op, tvm.ir.Op) else None

    @property
    def function(self) -> str:
        """The name of the walked function (as given to :func:`walk`)."""
        return self.path[0].name

    @_once
    def frame(self) -> tuple[relax.Var, ...]:
        """The calls this binding sits inside, as their bound variables: two calls of
        one local function give their bindings two frames."""
        return tuple(p.var for p in self.path if p.kind == "call")

    @property
    def callee_frame(self) -> tuple[relax.Var, ...]:
        """The frame of the callee's bindings, when ``descended``."""
        return self.frame + (self.binding.var,)


def walk(func, mod: tvm.IRModule | None = None, descend=True, name: str = "") -> Iterator[Step]:
    """Every binding of ``func`` (a Function, or a SeqExpr such as a branch) in order, as :class:`Step` records.

    An If binding comes first, then its true branch, then its false branch.
    A call to a composite function (global or local) or to a local function is
    followed by the callee's bindings (pre-order) when ``descend`` says so: a
    bool, or a function of the call's Step. Calls to other global functions
    are never descended into: those are walked on their own. Bindings of
    local functions are recorded, not yielded. Without ``mod``, global callees
    are unknown (None).

    Parameters
    ----------
    func : relax.Function or relax.SeqExpr
    mod : tvm.IRModule, optional
        Resolves calls to global functions.
    descend : bool or callable
    name : str
        The function's name, recorded as the first :class:`Place` of each path.
    """
    body = func.body if isinstance(func, relax.Function) else func
    yield from _walk_seq(body, mod, descend, (Place("function", name),), None, {}, ())


def _walk_seq(seq, mod, descend, path, composite, local, stack):
    for block in items(seq.blocks):
        dataflow = isinstance(block, relax.DataflowBlock)
        for b in items(block.bindings):
            var, v = b.var, b.value
            # Exact type tests: an isinstance that fails on a Relax class goes through abc (half a
            # microsecond, a third of the walk), and no Relax expression class but Var is subclassed.
            kind = type(v)
            if kind is relax.Function:
                local[var.__chandle__()] = v
                continue
            if kind is relax.If:
                yield Step(b, var, v, None, composite, path, dataflow, block=block)
                yield from _walk_seq(
                    v.true_branch, mod, descend, path + (Place("then", var.name, var),), composite, local, stack
                )
                yield from _walk_seq(
                    v.false_branch, mod, descend, path + (Place("else", var.name, var),), composite, local, stack
                )
                continue
            inner = called_function(mod, v, local) if kind is relax.Call else None
            step = Step(b, var, v, inner, composite, path, dataflow, block=block)
            comp = func_attr(inner, COMPOSITE)
            # Global functions other than composites are walked on their own; recursion stops here.
            can = (
                inner is not None
                and (comp or not isinstance(v.op, tvm.ir.GlobalVar))
                and not any(inner.same_as(f) for f in stack)
            )
            if can and (descend(step) if callable(descend) else descend):
                step.descended = True
                yield step
                place = Place("call", comp or callee_name(v), var)
                yield from _walk_seq(
                    inner.body, mod, descend, path + (place,), comp or composite, local, stack + (inner,)
                )
            else:
                yield step


class Values:
    """What each variable stands for while a walk is consumed: a text, a node, a new variable.

    Keys are ``(frame, var)`` (see :attr:`Step.frame`), so two calls of one
    local function keep their values apart. At a descended call, :meth:`enter`
    gives the callee's parameters the call's converted arguments, and makes the
    call's variable stand for the callee's result, which :meth:`get` resolves
    once the callee's bindings have been seen.
    """

    def __init__(self, leaf: Callable | None = None, pack: Callable = tuple):
        self._leaf = leaf or (lambda expr: expr)
        self._pack = pack
        self._values: dict = {}
        self._results: dict = {}

    def bind(self, frame: tuple, var, value) -> None:
        self._values[_handles(frame, var)] = value

    def enter(self, step: Step, args: list) -> None:
        """At a descended call: the callee's parameters take ``args``, in order."""
        inner = step.callee_frame
        for p, a in zip(step.callee.params, args):
            self._values[_handles(inner, p)] = a
        self._results[_handles(step.frame, step.var)] = (inner, step.callee.body.body)

    def get(self, frame: tuple, expr, default=None):
        """The value of an ANF expression: a variable's, ``pack`` of the fields'
        values for a Tuple, else ``leaf(expr)`` (constants, shapes)."""
        if is_var(expr):
            key = _handles(frame, expr)
            if key in self._results:
                return self.get(*self._results[key], default)
            return self._values.get(key, default)
        if isinstance(expr, relax.Tuple):
            return self._pack([self.get(frame, f, default) for f in expr.fields])
        return self._leaf(expr)


def _handles(frame: tuple, var) -> tuple:
    """A :class:`Values` key by object handles: a dict keyed by variables compares each new Python
    object for one by value, through the FFI (microseconds). The walked function keeps them alive."""
    # Most bindings sit in no call: a generator over an empty frame is most of this function's time.
    return (tuple(v.__chandle__() for v in frame) if frame else ()), var.__chandle__()


def ops_in(func: relax.Function, mod: tvm.IRModule | None = None) -> list:
    """Every Relax op called in ``func``, in order, looking inside composite and local functions."""
    return [s.op for s in walk(func, mod) if s.op]


def op_places(func, mod: tvm.IRModule | None = None, name: str = "") -> list:
    """``(op, calls, composite)`` for each op :func:`walk` finds in ``func``, in order: ``calls``
    names the calls around it (composite names, or local functions'), ``composite`` is the
    innermost composite holding it (None if none)."""
    steps = walk(func, mod, name=name)
    return [(s.op, tuple(p.name for p in s.path if p.kind == "call"), s.composite) for s in steps if s.op]


_composite_steps = PerObject(op_places, 16384)


def composite_steps(func: relax.Function) -> list:
    """:func:`op_places` of a composite (or other local) function, kept per function: a diagram or a
    stage's census reads them on each of thousands of composite calls, and FuseOpsByPattern gives
    identical matches one function."""
    return _composite_steps(func)


def call_places(composite: relax.Function) -> tuple[tuple[str, tuple[str, ...], str], ...]:
    """The :func:`composite_steps` of a call to ``composite`` as its caller's walk sees them: each op's
    calls begin with the composite's name, and an op in no inner composite is in this one. Kept per
    function, as :func:`composite_steps` is: thousands of calls share one composite."""
    return _call_places(composite)


def _places_of_call(composite: relax.Function) -> tuple:
    comp = func_attr(composite, COMPOSITE)
    return tuple((op, (comp, *calls), inner or comp) for op, calls, inner in composite_steps(composite))


_call_places = PerObject(_places_of_call, 16384)


def composite_ops(func: relax.Function) -> list:
    """The ops a composite (or other local) function computes, in order (:func:`composite_steps`)."""
    return [op for op, _, _ in composite_steps(func)]


def reads(value) -> list:
    """Variables a binding's value reads; for an If, its condition and its branches' results."""
    if type(value) is relax.If:
        return free_vars(value.cond) + free_vars(value.true_branch.body) + free_vars(value.false_branch.body)
    return free_vars(value)


def users(func: relax.Function, steps=None) -> dict[int, list[Step | None]]:
    """``{variable's handle: [Step, ...]}``: the bindings that read each variable, through If branches;
    ``None`` stands for the function's result. ``steps``: the caller's ``walk(func, descend=False)``."""
    out: dict = {}
    for step in walk(func, descend=False) if steps is None else steps:
        for v in step.reads:
            out.setdefault(v.__chandle__(), []).append(step)
    for v in free_vars(func.body.body):
        out.setdefault(v.__chandle__(), []).append(None)
    return out


def called_function(mod, call, local: dict):
    """The function a call reaches: a global, a local function bound to a variable (``local``: by the
    variable's handle), or inline."""
    op = call.op
    if is_var(op):
        return local.get(op.__chandle__())
    if isinstance(op, tvm.ir.GlobalVar) and mod is None:
        return None
    return callee(mod, call)


def calls_between_functions(mod: tvm.IRModule, names=None) -> dict[str, set[str]]:
    """``{function: {functions it calls}}`` over the module's Relax functions (or those ``names``)."""
    return {
        gv.name_hint: {
            s.value.op.name_hint
            for s in walk(func, mod, descend=False)
            if isinstance(s.value, relax.Call) and isinstance(s.value.op, tvm.ir.GlobalVar)
        }
        for gv, func in mod.functions.items()
        if isinstance(func, relax.Function) and (names is None or gv.name_hint in names)
    }


def host_functions(mod: tvm.IRModule) -> list:
    """Names of the Relax functions that are not composites or offloaded subgraphs, main first."""
    names = [
        gv.name_hint
        for gv, f in mod.functions.items()
        if isinstance(f, relax.Function) and not func_attr(f, COMPOSITE) and not func_attr(f, CODEGEN)
    ]
    return sorted(names, key=lambda n: (n != "main", n))


def local_calls(mod: tvm.IRModule) -> list:
    """``function/var`` of each call of a local function (not a composite) in a host function: TVM 0.27 builds no
    such module ("VMShapeLower do not work for local functions"), and the placement cannot see into them."""
    return [
        f"{fname}/{step.var.name}"
        for fname in host_functions(mod)
        for step in walk(mod[fname], mod, descend=False)
        if step.callee is not None
        and not func_attr(step.callee, COMPOSITE)
        and not isinstance(step.value.op, tvm.ir.GlobalVar)
    ]


def check_no_local_calls(mod: tvm.IRModule) -> None:
    """One line for a module that calls a local function (:func:`local_calls`)."""
    found = local_calls(mod)
    if found:
        raise WorkbenchError(
            f"The module calls a local function ({found[0]}), which TVM 0.27 cannot build",
            "lift it into a global function first: mod = relax.transform.LambdaLift()(mod)",
        )


def subgraph_functions(mod: tvm.IRModule) -> list:
    """Names of the functions with a ``Codegen`` attribute, in numeric order."""
    names = [gv.name_hint for gv, f in mod.functions.items() if func_attr(f, CODEGEN)]
    return sorted(names, key=_natural)


def subgraph_target(mod, name) -> str:
    """The target of a subgraph: the prefix of its composites, else its codegen name."""
    first = next((s.composite for s in walk(mod[name], mod) if s.composite), None)
    return first.split(".", 1)[0] if first else func_attr(mod[name], CODEGEN)


def _natural(name: str):
    head = name.rstrip("0123456789")
    tail = name[len(head) :]
    return (head, int(tail) if tail else -1)


def module_given(mod, who: str) -> tvm.IRModule:
    """``mod`` when it is a ``tvm.IRModule``, else the one-line error of ``who`` (for a Relax function: wrap it)."""
    if not isinstance(mod, tvm.IRModule):
        fix = "wrap it: tvm.IRModule({'main': f})" if isinstance(mod, relax.Function) else "pass a Relax IRModule"
        raise WorkbenchError(f"{who} takes a tvm.IRModule, got {type(mod).__name__}", fix)
    return mod
