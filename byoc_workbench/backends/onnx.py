"""Translate an offloaded Relax subgraph into an ONNX model.

Upstream deleted the Relay ONNX exporter and Relax has none, so this is a
small one: a converter table keyed by Relax op name (:mod:`.onnx_ops`) over the
subgraph's lowering (:mod:`.lowering`, which the torch backend reads too), built with
``onnx.helper`` only. It covers every op of upstream's TensorRT pattern table
and of the teaching target. ONNX Runtime runs the result on any CPU, and
TensorRT's ONNX parser turns it into an engine.

A subgraph is a global function with ``Codegen``; its body calls local
composite functions. Parameters become graph inputs in order, constants
become initializers, and the function's result (a tensor or a tuple of
tensors) becomes the graph outputs in order.
"""

from __future__ import annotations

import re

import numpy as np
from tvm import relax

from byoc_workbench.backends import lowering
from byoc_workbench.backends.onnx_ops import CHECKS, CONVERTERS, SUPPORTED_OPS, onnx_dims, unsupported
from byoc_workbench.core.errors import WorkbenchError, import_optional
from byoc_workbench.flow.rules import Rule, Target, every_op_rules, narrowed

__all__ = ["CHECKS", "CONVERTERS", "SUPPORTED_OPS", "OnnxGraph", "guard_rules", "own_target", "onnx_text", "translate"]
__all__ += ["unsupported"]

OPSET = 18  # the first opset whose Reduce* ops all take axes as an input
FIX = "switch off the rule that offloads it, or add a converter in byoc_workbench/backends/onnx_ops.py"


def _onnx():
    return import_optional("onnx", "pip install onnx onnxruntime")


# --- the graph being built --------------------------------------------------------


class OnnxGraph:
    """An ONNX graph under construction: nodes, initializers and unique names."""

    def __init__(self, fp16: bool = False):
        self.onnx = _onnx()
        self.fp16 = fp16
        self.nodes: list = []
        self.initializers: list = []
        self._used: set = set()
        self._consts: dict = {}

    def name(self, hint: str) -> str:
        base = re.sub(r"[^\w.]", "_", hint) or "t"
        name, k = base, 1
        while name in self._used:
            name, k = f"{base}_{k}", k + 1
        self._used.add(name)
        return name

    def dtype(self, expr_or_dtype) -> str:
        """The ONNX-side dtype of an expression; float32 becomes float16 in an fp16 graph."""
        dt = str(expr_or_dtype.ty.dtype if hasattr(expr_or_dtype, "ty") else expr_or_dtype)
        return "float16" if self.fp16 and dt == "float32" else dt

    def node(self, op_type: str, inputs: list, hint: str = "", outputs: int = 1, **attrs):
        """Add a node; returns its output name, or a list of names when ``outputs > 1``."""
        names = [self.name(hint or op_type.lower()) for _ in range(outputs)]
        self.nodes.append(
            self.onnx.helper.make_node(op_type, list(inputs), names, name=self.name(f"{op_type}_node"), **attrs)
        )
        return names[0] if outputs == 1 else names

    def const(self, value, hint: str = "const", key=None) -> str:
        """An initializer holding ``value``; ``key`` reuses one made for the same Relax constant."""
        if key is not None and key in self._consts:
            return self._consts[key]
        value = np.asarray(value)
        if self.fp16 and value.dtype == np.float32:
            value = value.astype(np.float16)
        name = self.name(hint)
        self.initializers.append(self.onnx.numpy_helper.from_array(np.require(value, requirements="C"), name))
        if key is not None:
            self._consts[key] = name
        return name

    def int64s(self, values, hint: str) -> str:
        return self.const(np.asarray(values, dtype=np.int64), hint)

    def scalar(self, value, like) -> str:
        return self.const(np.asarray(value, dtype=self.dtype(like)), "scalar")


def _refuses(call) -> bool:
    # Only ops with a converter are vetted, for their attributes; a match on an op with no converter at all is
    # left to fail at build time with a one-line error, so a user's rule that names one is not silently ignored.
    return call.op.name in CONVERTERS and unsupported(call) is not None


def own_target(backend: str) -> Target:
    """An ONNX backend's own target: one per-op rule for every op the translator converts, each asking of
    every call what the translator would (its attributes, layouts and shapes; :func:`unsupported`), so the
    target claims exactly what the backend takes: the host's slices, concats and box arithmetic too."""
    rules = every_op_rules(backend, SUPPORTED_OPS, lambda call: unsupported(call) is None, "converted to ONNX")
    return Target(backend, rules, f"every op {backend} takes through the ONNX translator")


def guard_rules(rules) -> tuple[Rule, ...]:
    """``rules`` narrowed to what the ONNX translator converts, for the ONNX-based backends."""
    return narrowed(rules, _refuses)


# --- rendering the lowered subgraph -------------------------------------------------


class _Translator:
    """The ONNX renderer of a subgraph's :func:`.lowering.lower_subgraph` steps, each op call converted by
    :data:`.onnx_ops.CONVERTERS`."""

    def __init__(self, func: relax.Function, fp16: bool):
        self.g = OnnxGraph(fp16)
        self.func = func
        self.inputs: list = []  # the ONNX name of each parameter
        self.consts: list = []  # the initializer of each constant read
        self.outs: list = []  # the ONNX name (or names) of each op call's result

    def value(self, ref):
        """The ONNX value of a reference: a name, a tuple of values, or None if static."""
        if isinstance(ref, tuple):
            return tuple(self.value(r) for r in ref)
        if isinstance(ref, lowering.Item):
            return self.value(ref.of)[ref.index]
        return lowering.named(ref, self.inputs, self.consts, self.outs)  # None for a Static: converters read it

    def render(self, step) -> None:
        if isinstance(step, lowering.Constant):
            self.consts.append(self.g.const(step.expr.value.numpy(), "const", key=step.expr))
        elif isinstance(step, lowering.OpCall):
            out = CONVERTERS[step.name](self.g, step.call, [self.value(a) for a in step.args])
            self.outs.append(tuple(out) if isinstance(out, list) else out)

    def run(self, name: str):
        onnx = self.g.onnx
        helper = onnx.helper
        inputs = []
        for i, p in enumerate(self.func.params):
            if not isinstance(p.ty, relax.TensorType):
                raise WorkbenchError(f"{name}: parameter {p.name} is not a tensor ({p.ty}).", FIX + ".")
            x = self.g.name(f"in{i}_{p.name}")
            inputs.append(helper.make_tensor_value_info(x, _onnx_type(p.ty.dtype), onnx_dims(p.ty)))
            cast = self.g.dtype(p) != str(p.ty.dtype)
            self.inputs.append(self.g.node("Cast", [x], to=_onnx_type("float16")) if cast else x)
        lowered = lowering.lower_subgraph(self.func, name)
        for step in lowered.steps:
            self.render(step)
        results = _flatten(self.value(lowered.result))
        types = _flatten_types(self.func.ret_ty)
        outputs, seen = [], {i.name for i in inputs} | {t.name for t in self.g.initializers}
        for k, (res, ty) in enumerate(zip(results, types)):
            if self.g.dtype(ty.dtype) != str(ty.dtype):
                res = self.g.node("Cast", [res], f"out{k}", to=_onnx_type(ty.dtype))
            elif res in seen:  # a graph output must be a tensor of its own
                res = self.g.node("Identity", [res], f"out{k}")
            seen.add(res)
            outputs.append(helper.make_tensor_value_info(res, _onnx_type(ty.dtype), onnx_dims(ty)))
        graph = helper.make_graph(self.g.nodes, name, inputs, outputs, self.g.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="byoc_workbench")
        model.ir_version = min(model.ir_version, 9)  # readable by older ONNX Runtime and TensorRT parsers
        onnx.checker.check_model(model)
        return model


def _onnx_type(dtype) -> int:
    return _onnx().helper.np_dtype_to_tensor_dtype(np.dtype(str(dtype)))


def _flatten(value) -> list:
    return [x for v in value for x in _flatten(v)] if isinstance(value, tuple) else [value]


def _flatten_types(ty) -> list:
    if isinstance(ty, relax.TupleType):
        return [x for f in ty.fields for x in _flatten_types(f)]
    if not isinstance(ty, relax.TensorType):
        raise WorkbenchError(f"A subgraph returns a {ty}, not tensors.", FIX + ".")
    return [ty]


def translate(func: relax.Function, name: str = "subgraph", fp16: bool = False):
    """An ``onnx.ModelProto`` computing ``func``.

    Parameters
    ----------
    func : relax.Function
        A partitioned subgraph (or any Relax function without control flow). Symbolic
        dimensions (``n``) become ONNX's named dynamic dimensions.
    name : str
        The graph's name, used in error messages.
    fp16 : bool
        Compute in float16: float32 weights are stored as float16, float32 inputs are
        cast on the way in and outputs cast back, so the precision lives in the graph
        (TensorRT 11 has no FP16 builder flag).

    Raises
    ------
    WorkbenchError
        Listing every op call it cannot convert, in one line.
    """
    reasons = list(dict.fromkeys(r for r in map(unsupported, [s.value for s in lowering.op_steps(func)]) if r))
    if reasons:
        raise WorkbenchError(f"{name}: the ONNX translator cannot convert {'; '.join(reasons)}.", FIX + ".")
    return _Translator(func, fp16).run(name)


def onnx_text(model) -> str:
    """A readable text of an ONNX model: its inputs, outputs and nodes (weights left out)."""
    helper = _onnx().helper
    g = model.graph
    counts: dict = {}
    for n in g.node:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
    weights = sum(int(np.prod(t.dims)) for t in g.initializer)
    lines = [
        f"# ONNX model {g.name}: opset {model.opset_import[0].version}, {len(g.node)} nodes, "
        f"{len(g.initializer)} initializers ({weights} values)",
        "# nodes by type: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])),
        helper.printable_graph(g),
    ]
    return "\n".join(lines)
