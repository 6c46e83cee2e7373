"""Backends by name: which codegen compiles each offloaded subgraph.

A backend turns one partitioned function into a packed function registered
under a content-hashed symbol; the host then calls it with
``R.call_dps_packed``. Three exist:

- ``teaching``: readable NumPy source (the seed's demo codegen);
- ``onnxruntime``: the subgraph as ONNX, run by an ONNX Runtime session;
- ``tensorrt``: the same ONNX, built into a TensorRT engine (NVIDIA GPU only).

``auto`` tries ``tensorrt``, then ``onnxruntime``, then ``teaching``, and
leaves to TVM what none of them takes. ``tvm`` offloads nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import tvm
from tvm import relax

from .. import ir
from ..errors import WorkbenchError


@dataclasses.dataclass
class Compiled:
    """What a backend made of one subgraph.

    ``source`` is what a reader looks at: generated NumPy source, an ONNX
    summary or a TensorRT engine's layers. ``tried`` lists the backends that
    ``auto`` tried first, with why each refused.
    """

    name: str
    symbol: str
    source: str
    num_outputs: int
    backend: str
    tried: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class Backend:
    """A backend: ``compile(name, func, **options) -> Compiled``, raising WorkbenchError when it cannot."""

    name: str
    compile: Callable
    doc: str


def _teaching(name: str, func: relax.Function, **options) -> Compiled:
    from . import teaching

    g = teaching.compile_subgraph(name, func)
    return Compiled(g.name, g.symbol, g.source, g.num_outputs, "teaching")


def _onnxruntime(name: str, func: relax.Function, **options) -> Compiled:
    from . import onnxruntime  # onnx and onnxruntime are imported only when used

    return onnxruntime.compile_subgraph(name, func, **options)


def _tensorrt(name: str, func: relax.Function, **options) -> Compiled:
    from . import tensorrt

    return tensorrt.compile_subgraph(name, func, **options)


BACKENDS = {
    b.name: b
    for b in (
        Backend("teaching", _teaching, "readable NumPy source, run in Python (the seed's demo codegen)"),
        Backend("onnxruntime", _onnxruntime, "ONNX Runtime: CPU everywhere, CUDA with onnxruntime-gpu"),
        Backend("tensorrt", _tensorrt, "TensorRT engines from the same ONNX (NVIDIA GPU)"),
    )
}
AUTO = ("tensorrt", "onnxruntime", "teaching")  # tried in this order
CHOICES = ("auto", "tvm", *BACKENDS)
# With no backend chosen, a subgraph goes to its target's own codegen, if it has one.
NATIVE = {"byoc_target": "teaching"}


def backends_for(backend: str | None, codegen: str) -> tuple:
    """The backends to try, in order, for a subgraph of ``codegen`` when ``backend`` is chosen."""
    if backend is None:
        return (NATIVE[codegen],) if codegen in NATIVE else ()
    if backend not in CHOICES:
        raise WorkbenchError(f"Unknown backend '{backend}'.", f"choose one of: {', '.join(CHOICES)}.")
    return {"auto": AUTO, "tvm": ()}.get(backend, (backend,))


def compile_subgraph(name: str, func: relax.Function, backend: str | None = None, **options) -> Compiled | str:
    """Compile one subgraph with the first backend that takes it; the reason TVM keeps it otherwise.

    A chosen backend that refuses raises its one-line WorkbenchError; under
    ``auto`` the next backend is tried.
    """
    codegen = ir.func_attr(func, ir.CODEGEN)
    order = backends_for(backend, codegen)
    if not order:
        if backend == "tvm":
            return "backend tvm: TVM runs it on the host"
        return f"no '{codegen}' codegen in this installation"
    tried = []
    for b in order:
        try:
            compiled = BACKENDS[b].compile(name, func, **options)
        except WorkbenchError as err:
            if len(order) == 1:
                raise
            tried.append((b, err.cause))
            continue
        compiled.tried = tried
        return compiled
    return "; ".join(f"{b} refused: {why}" for b, why in tried) + "; TVM runs it on the host"


def run_codegen(mod: tvm.IRModule, backend: str | None = None, **options) -> tuple:
    """Compile every subgraph; returns ``(module, {name: Compiled}, {name: reason not compiled})``.

    Parameters
    ----------
    mod : tvm.IRModule
        A partitioned module.
    backend : None, "auto", "tvm", "teaching", "onnxruntime" or "tensorrt"
        None sends each subgraph to its target's own codegen (``byoc_target``
        to ``teaching``) and leaves the others as they are. A chosen backend
        compiles every subgraph, and the subgraphs nobody compiles go back to
        the host, so the module builds.
    **options
        Passed to the backend, e.g. ``fp16=True`` for ``tensorrt``.

    Calls to compiled subgraphs become ``R.call_dps_packed(symbol, args)``.
    """
    generated: dict = {}
    skipped: dict = {}
    for name in ir.subgraph_functions(mod):
        unknown = unknown_output(mod[name])
        if unknown:
            skipped[name] = unknown
            continue
        result = compile_subgraph(name, mod[name], backend, **options)
        if isinstance(result, Compiled):
            generated[name] = result
        else:
            skipped[name] = result
    if backend is not None and skipped:
        from ..flow.partition import inline_subgraphs

        mod = inline_subgraphs(mod, skipped)
    if not generated:
        return mod, generated, skipped
    return call_packed(mod, generated), generated, skipped


# --- shapes known only at run time --------------------------------------------------


def unknown_output(func: relax.Function) -> str | None:
    """Why a subgraph's outputs cannot be allocated before it runs (unknown rank or shape), or None.

    A packed call writes into output buffers the host allocates first, so it
    needs each output's shape, symbolic dimensions allowed (``n``), not an
    unknown rank.
    """
    ret = func.ret_ty
    for ty in ret.fields if isinstance(ret, relax.TupleType) else [ret]:
        if not isinstance(ty, relax.TensorType) or not hasattr(ty.shape, "values"):
            return (
                f"its output {ir.type_str(ty)} has no shape known before it runs, and a packed call needs one; "
                "TVM runs it on the host"
            )
    return None


def _out_ty(call: relax.Call):
    """The output types of a call, in the caller's symbolic dimensions (``n``, not the callee's own)."""
    ret = call.ty
    return list(ret.fields) if isinstance(ret, relax.TupleType) else ret


def call_packed(mod: tvm.IRModule, generated: dict) -> tvm.IRModule:
    """``mod`` with each call to a subgraph in ``generated`` made a call to its packed function."""

    def rewrite(binding, is_df):
        v = binding.value
        if not (isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.GlobalVar) and v.op.name_hint in generated):
            return None
        out_ty = _out_ty(v)
        call = relax.call_dps_packed(generated[v.op.name_hint].symbol, list(v.args), out_ty=out_ty)
        return [relax.VarBinding(binding.var, call)]

    return ir.map_bindings(mod, rewrite, remove=sorted(generated))


def register_ext(backend: str, codegen: str | None = None, **options) -> str:
    """Register ``backend`` as ``relax.ext.<codegen>`` (default: its own name) for upstream ``RunCodegen``.

    Returns the registered name. RunCodegen calls each function by its
    ``global_symbol``, so each runner is registered under that name too.
    Register before the VirtualMachine is created: it looks functions up then.
    """
    if backend not in BACKENDS:
        raise WorkbenchError(f"Unknown backend '{backend}'.", f"choose one of: {', '.join(BACKENDS)}.")

    def ext(functions, ext_options, constant_names):
        for func in functions:
            symbol = ir.func_attr(func, ir.GLOBAL_SYMBOL)
            compiled = BACKENDS[backend].compile(symbol, func, **options)
            tvm.register_global_func(symbol, tvm.get_global_func(compiled.symbol), override=True)
        return []

    name = f"relax.ext.{codegen or backend}"
    tvm.register_global_func(name, ext, override=True)
    return name


def describe(generated: dict, skipped: dict) -> list:
    """One line per subgraph: which backend ran it, or why TVM kept it."""
    lines = []
    for name, c in generated.items():
        before = "".join(f" ({b} refused: {why})" for b, why in c.tried)
        lines.append(f"{name}: compiled by {c.backend}{before}")
    lines += [f"{n}: not compiled, {why}" for n, why in skipped.items()]
    return lines
