"""Small helpers over Relax IR: the one walk, substitution, listing ops, editing modules.

:func:`walk` is the traversal every analysis, pass, codegen and drawing uses:
it yields each binding with its callee, its composite and its place in the
function/branch/call nesting, and owns the table of local functions.

Stage functions build new functions out of the bindings of old ones. All
bindings they move are in A-normal form (a call, tuple or tuple item whose
leaves are variables, constants or shapes), so a substitution over those few
expression kinds is all they need.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from functools import cached_property

import tvm
import tvm_ffi
from tvm import relax

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


# --- reading and building IR through the FFI itself ------------------------------------
# TVM's Python wrappers check and convert in Python what the stages already have right: iterating an
# FFI array bounds-checks each index (1 µs an element, against 0.4), and relax.Call's constructor
# takes 10 µs against its FFI function's 1. A 6,000-op toggle reads a quarter of a million elements
# and builds tens of thousands of nodes, so the hot paths go through these three.

_array_size, _array_item = tvm_ffi._ffi_api.ArraySize, tvm_ffi._ffi_api.ArrayGetItem


def items(seq) -> list:
    """The elements of an FFI array (a block's bindings, a call's arguments...) as a list."""
    if type(seq) is not tvm_ffi.Array:
        return list(seq)
    n = _array_size(seq)
    if n < 2:  # most are: a composite's one binding, a block of one
        return [_array_item(seq, 0)] if n else []
    return [_array_item(seq, i) for i in range(n)]


def new_call(op, args: list, ty, attrs=None, ty_args=()) -> relax.Call:
    """``relax.Call(op, args, attrs, ty_args)`` of the known type ``ty``, which it keeps."""
    return tvm.ir._ffi_api.Call(ty, op, args, attrs, ty_args, None)


def new_var(name: str, ty, dataflow: bool = True):
    """A new ``relax.DataflowVar`` (or ``relax.Var``) of the type ``ty``."""
    return (relax._ffi_api.DataflowVar if dataflow else tvm.ir._ffi_api.Var)(name, ty, None)


_IS_VAR: dict = {}  # Python class -> whether it is a variable's: isinstance goes through abc (half a microsecond)


def is_var(expr) -> bool:
    t = type(expr)
    known = _IS_VAR.get(t)
    if known is None:
        known = _IS_VAR[t] = issubclass(t, _VARS)
    return known


def substitute(expr, mapping: dict, same_types: bool = False):
    """``expr`` with every variable in ``mapping`` replaced (ANF expressions only).

    ``mapping`` is keyed by handle (see :func:`by_handle`): a dict keyed by variables compares each
    new Python object for one by value, through the FFI, a few microseconds a lookup.
    ``same_types`` says that each variable's replacement has its type (a fresh copy
    of it): the new expression then keeps the old one's type, so that
    ``Normalize`` has nothing to infer (inferring is most of its time: a second
    on 6,000 ops).
    """
    if is_var(expr) or isinstance(expr, tvm.ir.GlobalVar):
        return mapping.get(expr.__chandle__(), expr)
    if isinstance(expr, relax.Call):
        op = substitute(expr.op, mapping) if isinstance(expr.op, tvm.ir.GlobalVar) else expr.op
        args = [substitute(a, mapping, same_types) for a in items(expr.args)]
        if same_types:
            return new_call(op, args, expr.ty, expr.attrs, expr.ty_args)
        new = relax.Call(op, args, expr.attrs, expr.ty_args)
    elif isinstance(expr, relax.Tuple):
        new = relax.Tuple([substitute(f, mapping, same_types) for f in expr.fields])
    elif isinstance(expr, relax.TupleGetItem):
        new = relax.TupleGetItem(substitute(expr.tuple_value, mapping, same_types), expr.index)
    else:
        return expr
    return typed(new, expr.ty) if same_types else new


def by_handle(pairs) -> dict:
    """``{handle: new}`` from ``(variable, new)`` pairs: the mapping :func:`substitute` takes."""
    return {v.__chandle__(): new for v, new in pairs}


def typed(expr, ty):
    """``expr`` (just built) given the type ``ty``, when ``ty`` is known: what ``Normalize`` would infer."""
    # The bare Type is what an expression not yet inferred has; some constructors infer on their own.
    if type(ty) is not tvm.ir.Type and type(expr.ty) is tvm.ir.Type:
        relax.expr._update_type(expr, ty)
    return expr


def free_vars(expr) -> list:
    """Variables that ``expr`` reads, in first-use order (ANF expressions only)."""
    out: list = []
    seen: set = set()

    def visit(e):
        if is_var(e):
            h = e.__chandle__()
            if h not in seen:
                seen.add(h)
                out.append(e)
        elif type(e) is relax.Call:  # exact type tests: see _walk_seq
            for a in items(e.args):
                visit(a)
        elif type(e) is relax.Tuple:
            for f in items(e.fields):
                visit(f)
        elif type(e) is relax.TupleGetItem:
            visit(e.tuple_value)
        # anything else reads no variable: constants, shapes, a local function (it is closed)

    visit(expr)
    return out


def fresh_var(like, name: str | None = None, dataflow: bool = True):
    """A new variable with the type of ``like``."""
    return new_var(name or like.name, like.ty, dataflow)


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

    @cached_property
    def reads(self) -> list:
        """The variables the binding reads (:func:`reads`), found once per step."""
        return reads(self.value)

    @cached_property
    def op(self) -> str | None:
        """The Relax op's name when the binding calls an op, else None."""
        if not isinstance(self.value, relax.Call):
            return None
        op = self.value.op
        return op.name if isinstance(op, tvm.ir.Op) else None

    @property
    def function(self) -> str:
        """The name of the walked function (as given to :func:`walk`)."""
        return self.path[0].name

    @cached_property
    def frame(self) -> tuple:
        """The calls this binding sits inside, as their bound variables: two calls of
        one local function give their bindings two frames."""
        return tuple(p.var for p in self.path if p.kind == "call")

    @property
    def callee_frame(self) -> tuple:
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


def call_places(composite: relax.Function) -> list:
    """The :func:`composite_steps` of a call to ``composite`` as its caller's walk sees them: each op's
    calls begin with the composite's name, and an op in no inner composite is in this one."""
    comp = func_attr(composite, COMPOSITE)
    return [(op, (comp, *calls), inner or comp) for op, calls, inner in composite_steps(composite)]


def composite_ops(func: relax.Function) -> list:
    """The ops a composite (or other local) function computes, in order (:func:`composite_steps`)."""
    return [op for op, _, _ in composite_steps(func)]


def reads(value) -> list:
    """Variables a binding's value reads; for an If, its condition and its branches' results."""
    if type(value) is relax.If:
        return free_vars(value.cond) + free_vars(value.true_branch.body) + free_vars(value.false_branch.body)
    return free_vars(value)


def users(func: relax.Function, steps=None) -> dict:
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


def calls_between_functions(mod: tvm.IRModule, names=None) -> dict:
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


def type_str(ty) -> str:
    """``float32[1, 32, 56, 56]`` (or ``[n, 3, h, w]``, ``[...]``) for a tensor type; a short text otherwise.

    Kept per type object: a stage's variables keep their types from stage to stage, and reading a
    shape through the FFI costs a microsecond a dimension, on every node of every diagram."""
    return _type_texts(ty) if hasattr(ty, "__chandle__") else _type_text(ty)


def _type_text(ty) -> str:
    if isinstance(ty, relax.TensorType):
        if hasattr(ty.shape, "values"):
            shape = ", ".join(_dim(d) for d in items(ty.shape.values))
        else:  # unknown: only the rank, or not even that
            shape = "..." if ty.ndim < 0 else ", ".join("?" * ty.ndim)
        return f"{ty.dtype}[{shape}]"
    if isinstance(ty, relax.TupleType):
        return "(" + ", ".join(type_str(f) for f in items(ty.fields)) + ")"
    return str(ty)


_by_structure: dict = {}  # structural hash -> (a type, its text)


def _shared_text(ty) -> str:
    """The text of ``ty``, shared by the types structurally equal to it: thousands of variables have
    equal types that are not one object, and hashing one (4 µs) is a ninth of writing its text."""
    key = tvm_ffi.structural_hash(ty)
    seen = _by_structure.get(key)
    if seen is not None and tvm_ffi.structural_equal(seen[0], ty):
        return seen[1]
    if len(_by_structure) >= 16384:
        _by_structure.clear()
    text = _type_text(ty)
    _by_structure[key] = (ty, text)
    return text


_type_texts = PerObject(_shared_text, 65536)


def _dim(d) -> str:
    return prim_text(d)


# Binary PrimExpr kinds as Python operators, with their precedence (higher binds tighter).
_PRIM_BINARY = {"Add": ("+", 1), "Sub": ("-", 1), "Mul": ("*", 2), "FloorDiv": ("//", 2), "FloorMod": ("%", 2)}


def prim_text(expr, names: dict | None = None) -> str:
    """A shape dimension as short Python text: ``3``, ``n``, ``n * h * w * 8``, ``max(n, 1)``.

    ``names`` maps a symbolic variable's name to the text to write for it (by
    default its own name). TVM's printer writes ``T.int64(8)``; diagrams and
    generated code want ``8``.
    """

    def text(e, outer: int = 0) -> str:
        kind = type(e).__name__
        if isinstance(e, int) or kind == "IntImm":
            return str(int(getattr(e, "value", e)))
        if kind in ("Var", "SizeVar"):
            return (names or {}).get(e.name, e.name)
        if kind in _PRIM_BINARY:
            op, prec = _PRIM_BINARY[kind]
            # The right operand of - // % needs brackets at equal precedence: n - (h - 1).
            body = f"{text(e.a, prec)} {op} {text(e.b, prec + (kind != 'Add' and kind != 'Mul'))}"
            return f"({body})" if prec < outer else body
        if kind in ("Max", "Min"):
            return f"{kind.lower()}({text(e.a)}, {text(e.b)})"
        return str(e)

    return text(expr)


def is_static(ty) -> bool:
    """Whether a tensor type has a known shape of plain integers (no symbolic dimension); kept per type
    object, as :func:`type_str` is (each dimension is read through the FFI)."""
    return _static_types(ty) if hasattr(ty, "__chandle__") else _is_static(ty)


def _is_static(ty) -> bool:
    shape = getattr(ty, "shape", None)
    return shape is not None and all(type(d).__name__ == "IntImm" for d in items(shape.values))


_static_types = PerObject(_is_static, 65536)


class ModuleEditor:
    """Adds, replaces and removes functions of a copy of a module.

    A new function gets a GlobalVar of its type, which the calls built to it need. Only what was
    added or replaced is normalized, in a module of its own: every other function stays the very
    object it was, so what is kept per function (walks, attributes, composite copies) stays valid.
    (A BlockBuilder would do the same, but hashes every function it is given, and the whole module
    first: half of partition's time on 6,000 ops.)
    """

    def __init__(self, mod: tvm.IRModule):
        self._mod = mod.clone()
        self._names = {gv.name_hint for gv in mod.get_global_vars()}
        self._made: dict = {}  # name -> (GlobalVar, function, whether it is in normal form already)

    def global_var(self, name: str) -> tvm.ir.GlobalVar:
        return self._made[name][0] if name in self._made else self._mod.get_global_var(name)

    def add(self, name: str, func: relax.Function, normal: bool = False) -> tvm.ir.GlobalVar:
        """Add ``func`` under ``name``, or ``name1``, ``name2``... where the name is taken (as a BlockBuilder
        names). ``normal`` says that ``func`` is in normal form already, every expression typed and each
        local function bound to a variable: it is kept as it is (Normalize would make its local functions anew)."""
        unique, k = name, 0
        while unique in self._names:
            k += 1
            unique = f"{name}{k}"
        gv = tvm.ir.GlobalVar(unique)
        relax.expr._update_type(gv, func.ty)
        self._names.add(unique)
        self._made[unique] = (gv, func, normal)
        return gv

    def update(self, name: str, func: relax.Function) -> None:
        self._made[name] = (self.global_var(name), func, False)

    def finish(self, remove=()) -> tvm.IRModule:
        mod = self._mod
        todo = tvm.IRModule({gv: func for gv, func, normal in self._made.values() if not normal})
        normalized = relax.transform.Normalize()(todo)
        for gv, func, normal in self._made.values():
            mod[gv] = func if normal else normalized[gv]
        for name in remove:
            del mod[mod.get_global_var(name)]
        return mod


def map_blocks(body: relax.SeqExpr, fn: Callable, result: Callable | None = None) -> relax.SeqExpr:
    """Rebuild ``body``, through If branches; ``fn(is_dataflow, bindings)`` returns each block's new bindings.

    ``result``, when given, rewrites each sequence's result (the body's, and each branch's).
    """
    new_blocks = []
    for block in items(body.blocks):
        bindings = []
        for binding in items(block.bindings):
            value = binding.value
            if type(value) is relax.If:
                branches = (map_blocks(value.true_branch, fn, result), map_blocks(value.false_branch, fn, result))
                binding = relax.VarBinding(binding.var, relax.If(value.cond, *branches))
            bindings.append(binding)
        is_df = isinstance(block, relax.DataflowBlock)
        bindings = fn(is_df, bindings)
        new_blocks.append(relax.DataflowBlock(bindings) if is_df else relax.BindingBlock(bindings))
    return relax.SeqExpr(new_blocks, result(body.body) if result else body.body)


def rebuild(func: relax.Function, fn: Callable, result: Callable | None = None) -> relax.Function:
    """``func`` with each block's bindings replaced by ``fn`` (see :func:`map_blocks`)."""
    body = map_blocks(func.body, fn, result)
    return relax.Function(func.params, body, func.ret_ty, func.is_pure, func.attrs)


def copy_with_new_vars(func: relax.Function) -> relax.Function:
    """``func`` with new variables for its parameters and bindings, so that it can be bound a second
    time in one module; every expression keeps its type (Normalize has nothing to do). Upstream's
    ``relax.utils.copy_with_new_vars`` takes about a millisecond on a one-op composite, which
    partition pays per placement; this takes a twentieth of that on the flat functions composites
    are, and hands anything else (branches, local functions, match_cast) to upstream."""
    blocks = [(type(block) is relax.DataflowBlock, items(block.bindings)) for block in items(func.body.blocks)]
    for _, bindings in blocks:
        for b in bindings:
            if type(b) is not relax.VarBinding or type(b.value) in (relax.If, relax.Function):
                return relax.utils.copy_with_new_vars(func)
    old = items(func.params)
    params = [fresh_var(p, dataflow=type(p) is relax.DataflowVar) for p in old]
    mapping = by_handle(zip(old, params))
    new_blocks = []
    for is_df, bindings in blocks:
        new = []
        for b in bindings:
            value = substitute(b.value, mapping, same_types=True)
            old_var = b.var
            var = mapping[old_var.__chandle__()] = fresh_var(old_var, dataflow=type(old_var) is relax.DataflowVar)
            new.append(relax.VarBinding(var, value))
        new_blocks.append(relax.DataflowBlock(new) if is_df else relax.BindingBlock(new))
    result = substitute(func.body.body, mapping, same_types=True)
    body = typed(relax.SeqExpr(new_blocks, result), func.body.ty)
    return relax.Function(params, body, func.ret_ty, func.is_pure, func.attrs)


def rename_vars(func: relax.Function, names: dict) -> relax.Function:
    """``func`` with each variable in ``names`` bound under its new name; every use follows."""
    mapping = by_handle((v, fresh_var(v, name, dataflow=isinstance(v, relax.DataflowVar))) for v, name in names.items())

    def rename(is_df, bindings):
        out = []
        for b in bindings:
            v = b.value
            if isinstance(v, relax.If):
                v = relax.If(substitute(v.cond, mapping), v.true_branch, v.false_branch)
            else:
                v = substitute(v, mapping, same_types=True)
            var = mapping.get(b.var.__chandle__(), b.var)
            # a match_cast defines the symbolic sizes of its type (an NMS's count): keep it one
            out.append(relax.MatchCast(var, v, b.ty) if isinstance(b, relax.MatchCast) else relax.VarBinding(var, v))
        return out

    return rebuild(func, rename, result=lambda expr: substitute(expr, mapping, same_types=True))


def map_bindings(mod: tvm.IRModule, fn: Callable, remove=()) -> tvm.IRModule:
    """Rewrite every binding of every host function, through If branches.

    ``fn(binding, is_dataflow)`` returns the bindings to put in its place, or
    None to keep it. Functions named in ``remove`` are dropped afterwards.
    """
    editor = ModuleEditor(mod)
    for name in host_functions(mod):

        def per_block(is_df, bindings):
            out = []
            for b in bindings:
                new = fn(b, is_df)
                out.extend([b] if new is None else new)
            return out

        editor.update(name, rebuild(mod[name], per_block))
    return editor.finish(remove=remove)
