"""A teaching codegen: each offloaded subgraph becomes readable NumPy source.

It plays the part of a vendor codegen. ``compile`` turns a partitioned
function into Python source, executes it, and registers the result as a
packed function, which is what a C++ BYOC runtime module would provide. The
host module then calls it with ``R.call_dps_packed``; the output buffers come
last in the argument list.

The same codegen is registered as ``relax.ext.byoc_target``, so upstream
``relax.transform.RunCodegen`` can drive it on graphs without control flow.
"""

from __future__ import annotations

import dataclasses
import hashlib
import keyword
import re

import numpy as np
import tvm
from tvm import relax

from .. import ir
from ..errors import WorkbenchError
from . import phases

_BINARY = {
    "relax.add": "np.add",
    "relax.subtract": "np.subtract",
    "relax.multiply": "np.multiply",
    "relax.divide": "np.divide",
    "relax.maximum": "np.maximum",
    "relax.minimum": "np.minimum",
    "relax.matmul": "np.matmul",
}
_UNARY = {
    "relax.nn.relu": "np.maximum({0}, 0)",
    "relax.exp": "np.exp({0})",
    "relax.tanh": "np.tanh({0})",
    "relax.negative": "np.negative({0})",
    "relax.sigmoid": "1 / (1 + np.exp(-{0}))",
}


def _ints(values) -> tuple:
    return tuple(int(v) for v in values)


def _emit(call: relax.Call, args: list) -> str:
    """The NumPy expression for one Relax op call, given its argument texts."""
    name = call.op.name
    if name in _BINARY:
        return f"{_BINARY[name]}({args[0]}, {args[1]})"
    if name in _UNARY:
        return _UNARY[name].format(args[0])
    attrs = call.attrs
    if name == "relax.reshape":  # the shape argument's text: a tuple, symbolic dimensions included
        return f"np.reshape({args[0]}, {args[1]})"
    if name == "relax.expand_dims":
        return f"np.expand_dims({args[0]}, axis={_ints(attrs.axis)})"
    if name == "relax.permute_dims":
        axes = None if attrs.axes is None else _ints(attrs.axes)
        return f"np.transpose({args[0]}, {axes})"
    if name == "relax.split":
        ios = attrs.indices_or_sections
        sections = int(ios.value) if hasattr(ios, "value") else list(_ints(ios))
        return f"tuple(np.split({args[0]}, {sections!r}, axis={int(attrs.axis)}))"
    if name == "relax.nn.conv2d":
        if attrs.data_layout != "NCHW" or attrs.kernel_layout != "OIHW":
            raise WorkbenchError(
                f"The teaching codegen only supports NCHW/OIHW conv2d, got {attrs.data_layout}/{attrs.kernel_layout}.",
                "convert the layout first (relax.transform.ConvertLayout) or switch the conv2d rules off.",
            )
        return (
            f"kernels.conv2d({args[0]}, {args[1]}, strides={_ints(attrs.strides)}, "
            f"padding={_ints(attrs.padding)}, dilation={_ints(attrs.dilation)}, groups={int(attrs.groups)})"
        )
    raise WorkbenchError(
        f"The teaching codegen has no NumPy emitter for {name}.",
        "switch off the rule that claims it, or add an emitter in byoc_workbench/backends/teaching.py.",
    )


SUPPORTED_OPS = (
    frozenset(_BINARY)
    | frozenset(_UNARY)
    | {
        "relax.reshape",
        "relax.expand_dims",
        "relax.permute_dims",
        "relax.split",
        "relax.nn.conv2d",
    }
)


@dataclasses.dataclass
class Generated:
    """What a codegen made of one subgraph: the host calls ``symbol`` in its place."""

    name: str  # the subgraph function
    symbol: str  # the packed function the host calls
    source: str
    num_outputs: int


class _Names:
    def __init__(self):
        self.used: set = set()

    def fresh(self, hint: str) -> str:
        base = re.sub(r"\W", "_", hint) or "v"
        if base[0].isdigit() or keyword.iskeyword(base):
            base = "v_" + base
        name, k = base, 1
        while name in self.used:
            name, k = f"{base}_{k}", k + 1
        self.used.add(name)
        return name


def generate_source(name: str, func: relax.Function) -> tuple:
    """``(source, constants)``: a Python function ``name`` computing ``func`` with NumPy."""
    names = _Names()
    names.used |= {"np", "kernels", "CONST"}
    constants: list = []
    lines: list = []

    def leaf(expr) -> str:
        if isinstance(expr, tvm.ir.expr.Constant):
            value = np.asarray(expr.value.numpy() if hasattr(expr.value, "numpy") else expr.value)
            if value.ndim == 0:
                return f"np.array({value.item()!r}, dtype={str(value.dtype)!r})"
            constants.append(value)
            return f"CONST[{len(constants) - 1}]"
        if isinstance(expr, relax.ShapeExpr):
            return _shape_text(name, expr.values, symbolic)
        raise WorkbenchError(
            f"The teaching codegen cannot pass a {type(expr).__name__} as an argument.", "keep such ops on the host."
        )

    values = ir.Values(leaf)

    def text(frame, expr) -> str:
        value = values.get(frame, expr)
        return value if isinstance(value, str) else "(" + "".join(f"{v}, " for v in value).rstrip() + ")"

    symbolic: dict = {}  # a symbolic dimension's name -> the Python variable holding it
    for p in func.params:
        values.bind((), p, names.fresh(p.name))
        lines += _symbolic_dims(values.get((), p), p.ty, symbolic, names)
    for step in ir.walk(func):
        value = step.value
        if step.descended:
            lines.append(f"    # {ir.func_attr(step.callee, ir.COMPOSITE) or 'local function'}")
            values.enter(step, [text(step.frame, a) for a in value.args])
        elif step.op:
            out = names.fresh(step.var.name)
            lines.append(f"    {out} = {_emit(value, [text(step.frame, a) for a in value.args])}")
            values.bind(step.frame, step.var, out)
        elif isinstance(value, relax.TupleGetItem):
            values.bind(step.frame, step.var, f"{text(step.frame, value.tuple_value)}[{value.index}]")
        elif isinstance(value, relax.Tuple) or ir.is_var(value):
            values.bind(step.frame, step.var, text(step.frame, value))
        else:
            raise WorkbenchError(
                f"The teaching codegen cannot compile a {type(value).__name__} binding.", "keep it on the host."
            )
    header = [
        f"# Generated by byoc_workbench's teaching codegen for {name}.",
        "# Inputs and outputs are NumPy arrays; the host passes TVM tensors.",
        f"def {name}({', '.join(values.get((), p) for p in func.params)}):",
    ]
    return "\n".join(header + lines + [f"    return {text((), func.body.body)}", ""]), constants


def _symbolic_dims(param: str, ty, symbolic: dict, names: _Names) -> list:
    """Lines reading the symbolic dimensions first seen in parameter ``param`` off its array's shape."""
    shape = getattr(ty, "shape", None)
    found = [
        (i, d.name)
        for i, d in enumerate(getattr(shape, "values", ()))
        if type(d).__name__ in ("Var", "SizeVar") and d.name not in symbolic
    ]
    for _, dim in found:
        symbolic[dim] = names.fresh(dim)
    if not found:
        return []
    left = ", ".join(symbolic[dim] for _, dim in found)
    right = ", ".join(f"{param}.shape[{i}]" for i, _ in found)
    return [f"    {left} = {right}  # symbolic dimension{'s' if len(found) > 1 else ''}"]


def _shape_text(name: str, dims, symbolic: dict) -> str:
    """A shape as a Python tuple, symbolic dimensions written with the variables that hold them."""
    texts = [ir.prim_text(d, symbolic) for d in dims]
    free = {v for t in texts for v in re.findall(r"[A-Za-z_]\w*", t)} - set(symbolic.values()) - {"max", "min"}
    if free:
        raise WorkbenchError(
            f"The teaching codegen cannot compute the shape ({', '.join(texts)}) in {name}: "
            f"{', '.join(sorted(free))} is not the dimension of any input",
            "give the subgraph's inputs those dimensions, or keep the op on the host",
        )
    return "(" + ", ".join(texts) + ("," if len(texts) == 1 else "") + ")"


def compile_subgraph(name: str, func: relax.Function) -> Generated:
    """Generate, execute and register one subgraph; returns what was generated."""
    source, constants = generate_source(name, func)
    digest = hashlib.sha1(source.encode() + b"".join(c.tobytes() for c in constants)).hexdigest()[:10]
    # The digest keeps two modules whose subgraphs share a name from calling each other's code.
    symbol = f"byoc_workbench.{name}.{digest}"
    namespace = {
        "np": np,
        "kernels": __import__("byoc_workbench.backends.kernels", fromlist=["kernels"]),
        "CONST": constants,
    }
    exec(compile(source, f"<{symbol}>", "exec"), namespace)
    num_outputs = len(func.ret_ty.fields) if isinstance(func.ret_ty, relax.TupleType) else 1
    tvm.register_global_func(symbol, _packed(namespace[name], num_outputs), override=True)
    return Generated(name, symbol, source, num_outputs)


def _packed(fn, num_outputs: int):
    def call(*args):
        inputs = [a.numpy() for a in args[:-num_outputs]]
        phases.mark("inputs")  # the copies into NumPy are the boundary's cost (see backends.phases)
        results = fn(*inputs)
        results = results if num_outputs > 1 else (results,)
        phases.mark("compute")
        for out, res in zip(args[-num_outputs:], results):
            out.copyfrom(np.array(res, dtype=str(out.dtype), order="C"))

    return call


def register() -> None:
    """Register the teaching codegen as ``relax.ext.byoc_target`` (idempotent)."""
    from .registry import register_ext

    register_ext("teaching", "byoc_target")
