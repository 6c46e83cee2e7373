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
    if name == "relax.reshape":
        return f"np.reshape({args[0]}, {_ints(call.args[1].values)})"
    if name == "relax.expand_dims":
        return f"np.expand_dims({args[0]}, axis={_ints(attrs.axis)})"
    if name == "relax.permute_dims":
        axes = None if attrs.axes is None else _ints(attrs.axes)
        return f"np.transpose({args[0]}, {axes})"
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
        "switch off the rule that claims it, or add an emitter in byoc_workbench/codegen.py.",
    )


SUPPORTED_OPS = (
    frozenset(_BINARY)
    | frozenset(_UNARY)
    | {
        "relax.reshape",
        "relax.expand_dims",
        "relax.permute_dims",
        "relax.nn.conv2d",
    }
)


@dataclasses.dataclass
class Generated:
    """What the codegen made of one subgraph."""

    name: str
    symbol: str
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
    text = {p: names.fresh(p.name) for p in func.params}
    constants: list = []
    lines: list = []

    def arg(expr) -> str:
        if ir.is_var(expr):
            return text[expr]
        if isinstance(expr, tvm.ir.expr.Constant):
            value = np.asarray(expr.value.numpy() if hasattr(expr.value, "numpy") else expr.value)
            if value.ndim == 0:
                return f"np.array({value.item()!r}, dtype={str(value.dtype)!r})"
            constants.append(value)
            return f"CONST[{len(constants) - 1}]"
        if isinstance(expr, relax.ShapeExpr):
            return repr(_ints(expr.values))
        raise WorkbenchError(
            f"The teaching codegen cannot pass a {type(expr).__name__} as an argument.", "keep such ops on the host."
        )

    def body(f, comment=None):
        local: dict = {}
        if comment:
            lines.append(f"    # {comment}")
        for _, block in ir.blocks_of(f.body):
            for b in block.bindings:
                value = b.value
                if isinstance(value, relax.Function):
                    local[b.var] = value
                    continue
                inner = ir.called_function(None, value, local) if isinstance(value, relax.Call) else None
                if inner is not None:
                    for p, a in zip(inner.params, value.args):
                        text[p] = arg(a)
                    text[b.var] = body(inner, ir.func_attr(inner, ir.COMPOSITE) or "local function")
                    continue
                if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op):
                    out = names.fresh(b.var.name)
                    lines.append(f"    {out} = {_emit(value, [arg(a) for a in value.args])}")
                    text[b.var] = out
                elif isinstance(value, relax.TupleGetItem):
                    text[b.var] = f"{arg(value.tuple_value)}[{value.index}]"
                elif ir.is_var(value):
                    text[b.var] = arg(value)
                else:
                    raise WorkbenchError(
                        f"The teaching codegen cannot compile a {type(value).__name__} binding.", "keep it on the host."
                    )
        result = f.body.body
        if isinstance(result, relax.Tuple):
            return "(" + ", ".join(arg(x) for x in result.fields) + ",)"
        return arg(result)

    params = ", ".join(text[p] for p in func.params)
    ret = body(func)
    header = [
        f"# Generated by byoc_workbench's teaching codegen for {name}.",
        "# Inputs and outputs are NumPy arrays; the host passes TVM tensors.",
        f"def {name}({params}):",
    ]
    return "\n".join(header + lines + [f"    return {ret}", ""]), constants


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
        results = fn(*inputs)
        results = results if num_outputs > 1 else (results,)
        for out, res in zip(args[-num_outputs:], results):
            out.copyfrom(np.array(res, dtype=str(out.dtype), order="C"))

    return call


def _relax_ext(functions, options, constant_names):
    """``relax.ext.byoc_target``: compile each function, register it under its global_symbol."""
    for func in functions:
        symbol = ir.func_attr(func, ir.GLOBAL_SYMBOL)
        generated = compile_subgraph(symbol, func)
        # RunCodegen calls the function by its global_symbol.
        tvm.register_global_func(symbol, tvm.get_global_func(generated.symbol), override=True)
    return []


def register() -> None:
    """Register the teaching codegen as ``relax.ext.byoc_target`` (idempotent)."""
    tvm.register_global_func("relax.ext.byoc_target", _relax_ext, override=True)


CODEGENS = {"byoc_target": compile_subgraph}


def run_codegen(mod: tvm.IRModule) -> tuple:
    """Compile every subgraph whose codegen is available; returns ``(module, generated, skipped)``.

    Calls to compiled subgraphs become ``R.call_dps_packed(symbol, args)``.
    Subgraphs of a codegen this installation lacks stay as they are, listed in
    ``skipped`` with the reason, so the caller can say so.
    """
    generated: dict = {}
    skipped: dict = {}
    for name in ir.subgraph_functions(mod):
        func = mod[name]
        cg = ir.func_attr(func, ir.CODEGEN)
        if cg not in CODEGENS:
            skipped[name] = f"no '{cg}' codegen in this installation"
            continue
        generated[name] = CODEGENS[cg](name, func)
    if not generated:
        return mod, generated, skipped

    def call_packed(binding, is_df):
        v = binding.value
        if not (isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.GlobalVar) and v.op.name_hint in generated):
            return None
        ret = mod[v.op].ret_ty
        out_ty = list(ret.fields) if isinstance(ret, relax.TupleType) else ret
        call = relax.call_dps_packed(generated[v.op.name_hint].symbol, list(v.args), out_ty=out_ty)
        return [relax.VarBinding(binding.var, call)]

    return ir.map_bindings(mod, call_packed, remove=sorted(generated)), generated, skipped
