"""The plan: a subgraph as a :class:`SubgraphPlan`, every value named and every call an :class:`Op`.

A codegen (:class:`.emit.Codegen`) plans a subgraph before it emits any code:
:func:`plan_subgraph` reads its lowering (:func:`.lowering.lower_subgraph`, which goes into a
composite only when the codegen has no fused emitter for it), names every
parameter, constant and intermediate, turns each call into the
:class:`Op` its emitter gets, and says which buffers the assembled function
allocates (C) and writes. :mod:`.numpy_source` and :mod:`.c_source` assemble
the function from the plan and the emitted pieces.
"""

from __future__ import annotations

import dataclasses
import keyword
import math
import re

import numpy as np
import tvm
from tvm import relax

from byoc_workbench.backends import lowering
from byoc_workbench.backends.c_source import ctype
from byoc_workbench.core import ir, ir_types
from byoc_workbench.core.errors import WorkbenchError

# Names the generated code uses for itself, and the loop variables emitters are free to declare.
_TAKEN = {
    "numpy": {"np", "kernels", "CONST", "math", "tuple"},
    "c": {
        *"auto break case char const continue default do double else enum extern float for goto if inline int "
        "long register restrict return short signed sizeof static struct switch typedef union unsigned void "
        "volatile while free malloc memcpy memset main".split(),
        *"i j k n b g o v oc ic oh ow kh kw ih iw xg xc wv ow0 ow1 acc rc done".split(),
    },
}
_GENERATED = re.compile(r"^(out|const)\d+$")  # the C function's output and constant parameters


@dataclasses.dataclass
class Op:
    """One call, as an emitter sees it.

    ``args`` are the names of the tensor inputs (in C, pointers to their first
    element, row-major). Arguments that are not tensors, such as reshape's new
    shape, are in ``attrs`` with the call's attributes, as Python values.
    """

    op: str  # "relax.nn.relu", or the composite's name for a fused emitter
    out: str  # NumPy: the name the result is bound to; C: the buffer to write
    args: list
    shapes: list  # of the inputs, tuples of int
    dtypes: list
    shape: tuple | None  # of the output; None when the op returns a tuple
    dtype: str
    attrs: dict
    ops: tuple = ()  # for a fused emitter: the composite's calls, in order
    language: str = "numpy"

    @property
    def size(self) -> int:
        """Elements in the output."""
        return math.prod(self.shape or ())

    @property
    def ctype(self) -> str:
        """The C type of the output's elements (``float`` for float32)."""
        return ctype(self.dtype)

    def index(self, k: int, i: str = "i") -> str:
        """C: the flat index into input ``k`` that output element ``i`` reads, with NumPy broadcasting.

        ``"i"`` when the shapes are equal, ``"0"`` for a single element, else
        an expression such as ``"(i / 3136 % 32)"``.
        """
        return broadcast_index(self.shapes[k], self.shape, i)


def broadcast_index(shape, out_shape, i: str = "i") -> str:
    """The flat index into an input of ``shape`` read by flat element ``i`` of ``out_shape``."""
    shape, out_shape = tuple(shape), tuple(out_shape)
    if shape == out_shape:
        return i
    if math.prod(shape) == 1:
        return "0"
    terms = []
    in_stride = out_stride = 1
    for d in range(1, len(out_shape) + 1):
        size = out_shape[-d]
        own = shape[-d] if d <= len(shape) else 1
        if own == size and size != 1:
            pos = i if out_stride == 1 else f"{i} / {out_stride}"
            if out_stride * size < math.prod(out_shape):
                pos = f"{pos} % {size}"
            terms.append(f"({pos})" + (f" * {in_stride}" if in_stride != 1 else ""))
        in_stride *= own
        out_stride *= size
    return " + ".join(reversed(terms)) if terms else "0"


# --- the plan: every value named, every op an Op ---------------------------------------------


@dataclasses.dataclass
class SubgraphPlan:
    """A subgraph ready to emit: parameters, constants, steps and outputs, all by name.

    ``steps`` holds comments (str) and ``(Op, emitter)`` pairs in order.
    ``temps`` are the intermediates the assembled function allocates (C);
    ``outputs`` the buffers it writes, and ``copies`` the outputs that are
    not computed by an op (a parameter or constant returned as it is).
    """

    name: str
    language: str
    params: list  # (name, shape, dtype)
    constants: list  # (name, ndarray)
    steps: list
    result: object  # NumPy: the returned text; C: unused
    outputs: list  # (name, shape, dtype)
    copies: list = dataclasses.field(default_factory=list)  # (output name, source name)
    temps: dict = dataclasses.field(default_factory=dict)  # name -> (shape, dtype)
    types: dict = dataclasses.field(default_factory=dict)  # every tensor name -> (shape, dtype)
    prologue: list = dataclasses.field(default_factory=list)  # NumPy: lines before the first op

    def describe(self) -> str:
        """What each emitter is given, one line per op: the anatomy of the subgraph."""

        def ty(shape, dtype):
            return f"{dtype}[{', '.join(map(str, shape or ()))}]"

        inputs = [f"{n}: {ty(s, d)}" for n, s, d in self.params] + [
            f"{n}: {ty(c.shape, c.dtype)} (constant)" for n, c in self.constants
        ]
        lines = [f"{self.name}({', '.join(inputs)})"]
        for step in self.steps:
            if isinstance(step, str):
                lines.append(f"  # {step}")
                continue
            op = step[0]
            attrs = f"  attrs {op.attrs}" if op.attrs else ""
            call = f"{op.out} = {op.op.removeprefix('relax.')}({', '.join(map(str, op.args))})"
            lines.append(f"  {call} -> {ty(op.shape, op.dtype)}{attrs}")
        outputs = [n for n, _, _ in self.outputs if n] or [str(self.result)]
        return "\n".join(lines + [f"  return {', '.join(outputs)}"])


class Sym(str):
    """A dimension known only at run time (a batch ``n``), as the text of a Python expression over
    the variables that hold the symbolic dimensions: ``n``, ``n * h * w * 8``. It prints without
    quotes, so a shape holding one reads as code: ``(n * h * w * 8,)``."""

    def __repr__(self) -> str:
        return str(self)


def _dim(d, symbolic: dict):
    if type(d).__name__ == "IntImm" or isinstance(d, int):
        return int(getattr(d, "value", d))
    return Sym(ir_types.prim_text(d, symbolic))


def _shape(ty, symbolic: dict | None = None) -> tuple | None:
    if not isinstance(ty, relax.TensorType) or not hasattr(ty.shape, "values"):
        return None
    return tuple(_dim(d, symbolic or {}) for d in ty.shape.values)


def _py(value, symbolic: dict | None = None):
    """A TVM attribute or argument value as a plain Python value (shapes as tuples, see :class:`Sym`)."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, relax.ShapeExpr):
        return tuple(_dim(v, symbolic or {}) for v in value.values)
    if isinstance(value, relax.Tuple):
        return tuple(_py(f, symbolic) for f in value.fields)
    if isinstance(getattr(value, "value", None), (int, float)):  # IntImm, FloatImm, prim values
        return value.value
    if isinstance(value, (list, tuple)) or type(value).__name__ == "Array":
        return tuple(_py(v, symbolic) for v in value)
    return str(value)


def attrs_dict(call: relax.Call) -> dict[str, object]:
    """A call's attributes as Python values (``strides``, ``padding``, ``axis``, ...), in declaration order."""
    a = call.attrs
    if a is None:
        return {}
    info = getattr(type(a), "__tvm_ffi_type_info__", None)  # the attribute fields TVM declares
    keys = [f.name for f in info.fields] if info is not None else a.keys()
    return {k: _py(getattr(a, k)) for k in keys}


@dataclasses.dataclass(frozen=True)
class _Static:
    """What a non-tensor argument stands for (a shape, passed into a composite or written at the call)."""

    value: object


class _Names:
    def __init__(self, taken: set):
        self.used = set(taken)

    def fresh(self, hint: str) -> str:
        base = re.sub(r"\W", "_", hint) or "v"
        if base[0].isdigit() or keyword.iskeyword(base) or base in self.used or _GENERATED.match(base):
            base = "v_" + base
        name, k = base, 1
        while name in self.used:
            name, k = f"{base}_{k}", k + 1
        self.used.add(name)
        return name


class _Planner:
    def __init__(self, codegen, name: str):  # codegen: an emit.Codegen
        self.codegen = codegen
        self.name = name
        self.c = codegen.language == "c"
        self.names = _Names(_TAKEN[codegen.language])
        self.constants: list = []
        self.types: dict = {}
        self.inputs: list = []  # the name of each parameter
        self.consts: list = []  # what each constant read stands for: its name, or NumPy's text of a scalar
        self.outs: list = []  # the name of each op call's result
        self.symbolic: dict = {}  # a symbolic dimension's name -> the variable holding it (NumPy)
        self.prologue: list = []  # NumPy: the lines reading the symbolic dimensions off the inputs

    def _constant(self, step: lowering.Constant) -> None:
        value = np.asarray(step.expr.value.numpy())
        if value.ndim == 0 and not self.c:
            self.consts.append(f"np.array({value.item()!r}, dtype={str(value.dtype)!r})")
            return
        name = f"const{len(self.constants)}" if self.c else f"CONST[{len(self.constants)}]"
        self.constants.append((name, value))
        self.types[name] = (value.shape, str(value.dtype))
        self.consts.append(name)

    def _value(self, ref):
        """What a reference of the lowering stands for: a name, a tuple of values, or a :class:`_Static`."""
        if isinstance(ref, tuple):
            return tuple(self._value(r) for r in ref)
        if isinstance(ref, lowering.Item):
            if self.c:
                raise WorkbenchError(
                    f"The C codegen {self.codegen.name} cannot take an item of an op's tuple result in {self.name}",
                    "keep ops that return tuples (split) on the host",
                )
            return f"{self._value(ref.of)}[{ref.index}]"
        if isinstance(ref, lowering.Static):
            return _Static(_py(ref.expr, self.symbolic))  # a shape, a prim value
        return lowering.named(ref, self.inputs, self.consts, self.outs)

    def _text(self, ref):
        value = self._value(ref)
        if isinstance(value, tuple) and not self.c:
            return "(" + "".join(f"{v}, " for v in value).rstrip() + ")"
        return value

    def _op(self, call: relax.Call, var: relax.Var, name: str, out: str, args) -> Op:
        tensor_args, shapes, dtypes, attrs = [], [], [], attrs_dict(call) if isinstance(call.op, tvm.ir.Op) else {}
        arg_names = [a.name for a in call.op.arguments] if isinstance(call.op, tvm.ir.Op) else []
        for k, (a, text) in enumerate(zip(call.args, args)):
            ty = a.ty
            if isinstance(ty, relax.TensorType) or (
                isinstance(ty, relax.TupleType) and all(isinstance(f, relax.TensorType) for f in ty.fields)
            ):
                tensor_args.append(text)
                if isinstance(ty, relax.TensorType):
                    shapes.append(_shape(ty, self.symbolic))
                    dtypes.append(str(ty.dtype))
                else:
                    shapes.append(tuple(_shape(f, self.symbolic) for f in ty.fields))
                    dtypes.append(tuple(str(f.dtype) for f in ty.fields))
            else:  # a shape or a value, passed into a composite or written at the call
                value = text.value if isinstance(text, _Static) else _py(a, self.symbolic)
                attrs[arg_names[k] if k < len(arg_names) else f"arg{k}"] = self._known(value, call)
        ty = var.ty
        shape = _shape(ty, self.symbolic) if isinstance(ty, relax.TensorType) else None
        dtype = str(ty.dtype) if isinstance(ty, relax.TensorType) else ""
        return Op(name, out, tensor_args, shapes, dtypes, shape, dtype, attrs, language=self.codegen.language)

    def _known(self, value, call):
        """``value``, unless it is a shape that needs a dimension no input of the subgraph has."""
        if not isinstance(value, tuple) or self.c:
            return value
        names = set(self.symbolic.values())
        free = {v for d in value if isinstance(d, Sym) for v in re.findall(r"[A-Za-z_]\w*", d)} - names - {"max", "min"}
        if free:
            raise WorkbenchError(
                f"The {self.codegen.name} codegen cannot compute the shape ({', '.join(map(str, value))}) of "
                f"{call.op.name} in {self.name}: {', '.join(sorted(free))} is not the dimension of any input",
                "give the subgraph's inputs those dimensions, or keep the op on the host",
            )
        return value

    def _read_dims(self, name: str, ty) -> None:
        """NumPy: the symbolic dimensions first seen in parameter ``name``, read off its array's shape."""
        found = [
            (i, d.name)
            for i, d in enumerate(getattr(getattr(ty, "shape", None), "values", ()))
            if type(d).__name__ in ("Var", "SizeVar") and d.name not in self.symbolic
        ]
        for _, dim in found:
            self.symbolic[dim] = self.names.fresh(dim)
        if found:
            left = ", ".join(self.symbolic[dim] for _, dim in found)
            right = ", ".join(f"{name}.shape[{i}]" for i, _ in found)
            self.prologue.append(f"{left} = {right}  # symbolic dimension{'s' if len(found) > 1 else ''}")

    def _check_c(self, op: Op) -> None:
        for value, shape in [(op.out, op.shape), *zip(op.args, op.shapes)]:
            if not isinstance(value, str) or shape is None or not all(isinstance(d, int) for d in shape):
                raise WorkbenchError(
                    f"The C codegen {self.codegen.name} needs tensors of static shape in {op.op} of {self.name}"
                    + (f", got {shape}" if shape is not None else ""),
                    "give the model static shapes, or keep this op on the host (switch its rule off)",
                )

    def _inner_ops(self, composite: relax.Function) -> tuple:
        """The calls inside a composite, for a fused emitter to read (their names are only labels)."""
        inner = []
        for s in lowering.op_steps(composite):
            args = [a.name if ir.is_var(a) else "const" for a in s.value.args]
            inner.append(self._op(s.value, s.var, s.op, s.var.name, args))
        return tuple(inner)

    def run(self, func: relax.Function) -> SubgraphPlan:
        params = self._params(func)
        steps: list = []

        def descend(step):
            return self.codegen.fused(ir.func_attr(step.callee, ir.COMPOSITE)) is None

        lowered = lowering.lower_subgraph(func, self.name, descend)
        for step in lowered.steps:
            if isinstance(step, lowering.Inline):
                steps.append(step.name or "local function")
            elif isinstance(step, lowering.Constant):
                self._constant(step)
            elif isinstance(step, lowering.OpCall):
                steps.append(self._emitted(step))
        return self._plan(func, params, steps, lowered.result)

    def _params(self, func: relax.Function) -> list:
        """``(name, shape, dtype)`` of each parameter, named and bound; NumPy reads its symbolic dimensions."""
        params = []
        for p in func.params:
            name = self.names.fresh(p.name)
            self.inputs.append(name)
            if not self.c:
                self._read_dims(name, p.ty)
            params.append((name, _shape(p.ty, self.symbolic), str(getattr(p.ty, "dtype", ""))))
            self.types[name] = params[-1][1:]
        return params

    def _emitted(self, step: lowering.OpCall) -> tuple:
        """``(Op, emitter)`` of an op, or of a composite the codegen fuses, its result named."""
        fused = step.callee is not None
        emitter = self.codegen.fused(step.name) if fused else self.codegen.emit.get(step.name)
        if emitter is None:
            language = "C" if self.c else "NumPy"
            raise WorkbenchError(
                f"The {self.codegen.name} codegen has no {language} emitter for {step.name} (in {self.name})",
                f"add one to its emit table ('{step.name.removeprefix('relax.')}': a function of one Op), "
                "or switch off the rule that offloads it",
            )
        out = self.names.fresh(step.var.name)
        op = self._op(step.call, step.var, step.name, out, [self._text(a) for a in step.args])
        if fused:
            op.ops = self._inner_ops(step.callee)
        if self.c:
            self._check_c(op)
            self.types[out] = (op.shape, op.dtype)
        self.outs.append(out)
        return op, emitter

    def _plan(self, func: relax.Function, params: list, steps: list, result) -> SubgraphPlan:
        """The plan of the lowered ``func`` (``result``: the lowering's), with its outputs: C's buffers, or
        NumPy's returned text."""
        plan = SubgraphPlan(self.name, self.codegen.language, params, self.constants, steps, None, [], types=self.types)
        plan.prologue = self.prologue
        if self.c:
            self._bind_outputs(plan, list(result) if isinstance(func.body.body, relax.Tuple) else [result])
        else:
            plan.result = self._text(result)
            ret = func.ret_ty
            types = ret.fields if isinstance(ret, relax.TupleType) else [ret]
            plan.outputs = [(None, _shape(t, self.symbolic), str(getattr(t, "dtype", ""))) for t in types]
        return plan

    def _bind_outputs(self, plan: SubgraphPlan, fields: list) -> None:
        """C: the op computing each result writes straight into its output buffer; the
        results that no op computes (a parameter, a constant, a repeat) are copied."""
        ops = [s[0] for s in plan.steps if not isinstance(s, str)]
        computed = {op.out for op in ops}
        rename: dict = {}
        for k, ref in enumerate(fields):
            value = self._value(ref)
            if not isinstance(value, str):
                raise WorkbenchError(
                    f"The C codegen {self.codegen.name} cannot return a nested tuple from {self.name}",
                    "return tensors, or a tuple of tensors",
                )
            out = f"out{k}"
            shape, dtype = self.types[value]
            if shape is None or not all(isinstance(d, int) for d in shape):
                raise WorkbenchError(
                    f"The C codegen {self.codegen.name} needs outputs of static shape in {self.name}, got {shape}",
                    "give the model static shapes, or keep this subgraph on the host",
                )
            plan.outputs.append((out, shape, dtype))
            if value in computed and value not in rename:
                rename[value] = out
            else:
                plan.copies.append((out, rename.get(value, value)))
        for op in ops:
            op.out = rename.get(op.out, op.out)
            op.args = [rename.get(a, a) for a in op.args]
        ops = [s[0] for s in plan.steps if not isinstance(s, str)]
        plan.temps = {op.out: (op.shape, op.dtype) for op in ops if not _GENERATED.match(op.out)}


def plan_subgraph(codegen, name: str, func: relax.Function) -> SubgraphPlan:
    """Plan ``func`` for ``codegen`` (a :class:`.emit.Codegen`): every value named, every op an :class:`Op`,
    nothing emitted yet."""
    return _Planner(codegen, name).run(func)
