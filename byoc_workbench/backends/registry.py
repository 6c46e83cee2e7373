"""Backends by name: which codegen compiles each offloaded subgraph.

A backend turns one partitioned function into a packed function registered
under a content-hashed symbol (:func:`.base.register_packed`); the host then
calls it with ``R.call_dps_packed``. Six are built in:

- ``teaching``: readable NumPy source (the seed's demo codegen);
- ``c``: plain C loops, compiled by the system's C compiler;
- ``onnxruntime``: the subgraph as ONNX, run by an ONNX Runtime session;
- ``openvino``: the same ONNX, compiled by OpenVINO for the CPU (f32 unless ``precision`` says);
- ``tensorrt``: the same ONNX, built into a TensorRT engine (NVIDIA GPU only);
- ``torch``: torch calls, one per op, eager or under ``torch.compile``, on the GPU or the CPU.

A :class:`Registry` is a value holding backends and targets by name, each
registry its own; ``Registry.builtin()`` makes a new one of the built-ins.
:data:`DEFAULT` is the notebook's and command line's convenience: yours join it
with :func:`.codegen.register_codegen`, and every function here (and a
:class:`~byoc_workbench.session.Workbench`) reads it unless given ``registry=``.
Importing a module registers nothing anywhere.

``auto`` tries ``tensorrt``, then ``onnxruntime``, then ``openvino``, then
``teaching``, and leaves to TVM what none of them takes. ``tvm`` offloads nothing.
"""

from __future__ import annotations

import importlib.util
import inspect
from typing import NamedTuple

import tvm
from tvm import relax

from byoc_workbench.backends import base, c, onnxruntime, openvino, pytorch, teaching, tensorrt
from byoc_workbench.backends.base import Backend, Compiled, register_global
from byoc_workbench.core import ir, ir_edit, ir_types
from byoc_workbench.core.errors import WorkbenchError, did_you_mean, true_or_false, whole_number
from byoc_workbench.flow.partition import inline_subgraphs
from byoc_workbench.flow.rules import TARGETS, Rule, Target, Targets

# Every built-in backend is its module's one record (``BACKEND``); adding one is a module and a line here.
BUILTIN = (teaching.BACKEND, c.BACKEND, onnxruntime.BACKEND, openvino.BACKEND, tensorrt.BACKEND, pytorch.BACKEND)
assert tuple(b.name for b in BUILTIN) == base.BUILTIN_NAMES
AUTO = ("tensorrt", "onnxruntime", "openvino", "teaching")  # tried in this order


class Registry:
    """Backends and targets by name: what a backend choice, ``auto`` and a target's name pick from.

    ``backends`` maps each name to its :class:`~.base.Backend`, in the order
    added; ``targets`` is a :class:`~byoc_workbench.flow.rules.Targets` of its
    own (a copy of the one given), so adding to one registry changes no other.
    """

    def __init__(self, backends=(), targets: Targets | None = None):
        self.backends = {b.name: b for b in backends}
        self.targets = Targets() if targets is None else targets.copy()

    @classmethod
    def builtin(cls) -> Registry:
        """A new registry of the built-in backends and targets, sharing nothing with any other."""
        registry = cls()
        registry.reset()
        return registry

    def add(self, backend: Backend, target: Target | None = None) -> Backend:
        """Put ``backend`` in (and ``target``, when given), replacing those of the same names."""
        if target is not None:
            self.targets.add(target)
        self.backends[backend.name] = backend
        return backend

    def reset(self) -> None:
        """Back to the built-ins, in place: whoever holds this registry, or its targets, sees the change."""
        self.backends = {b.name: b for b in BUILTIN}
        self.targets.reset()
        for b in BUILTIN:
            if b.own_target is not None:  # a runtime's own target claims every op it runs, call by call
                self.targets.add(b.own_target())


# The notebook's and the command line's registry, for the free functions: register_codegen adds to it, and
# every function here reads it unless told. The one registry whose targets are not its own: they are
# flow.rules.TARGETS, the table get_target reads (flow cannot import this module), so a codegen registered
# with its rules is a target get_target finds. A Workbench reads it unless given a registry of its own.
DEFAULT = Registry()
DEFAULT.targets = TARGETS
DEFAULT.reset()


def _chosen(registry: Registry | None) -> Registry:
    return DEFAULT if registry is None else registry


def choices(registry: Registry | None = None) -> tuple[str, ...]:
    """Every backend name a user can choose: ``auto``, ``tvm``, then each backend (yours too)."""
    return ("auto", "tvm", *_chosen(registry).backends)


def missing(backend: str, registry: Registry | None = None) -> WorkbenchError | None:
    """Why ``backend`` cannot run here (a package of its record not installed, then what its record's
    ``missing`` says: no GPU for tensorrt), or None. No package is imported to tell whether it is installed:
    a search refuses such a backend before it measures anything."""
    chosen = _chosen(registry).backends.get(backend)
    if chosen is None:
        return None
    absent = [p for p in chosen.packages if importlib.util.find_spec(p) is None]
    if absent:
        are = "is" if len(absent) == 1 else "are"
        return WorkbenchError(f"{backend} needs {' and '.join(absent)}, which {are} not installed", chosen.install)
    return chosen.missing() if chosen.missing is not None else None


def pretty(backend: str, registry: Registry | None = None) -> str:
    """How printouts name ``backend`` (``ONNX Runtime``): its record's ``pretty``, else its name."""
    chosen = _chosen(registry).backends.get(backend)
    return (chosen.pretty if chosen is not None else "") or backend


def take_precision(backends, registry: Registry | None = None) -> tuple[str, ...]:
    """Those of ``backends`` that run at a precision asked for (their record's ``precisions``), in the
    registry's order; the others run f32 whatever it says."""
    names = set(backends)
    return tuple(b.name for b in _chosen(registry).backends.values() if b.precisions and b.name in names)


def check_backend(backend: str, also: tuple = (), registry: Registry | None = None) -> str:
    """``backend`` when it names a backend (or one of ``also``), else a one-line error with the nearest name."""
    known = (*also, *choices(registry))
    if not isinstance(backend, str):
        raise WorkbenchError(
            f"A backend is named by a string, got {type(backend).__name__} ({backend!r:.40})",
            f"pass one of: {', '.join(known)}",
        )
    if backend in known:
        return backend
    raise WorkbenchError(
        f"Unknown backend '{backend}'{did_you_mean(backend, known)}",
        f"choose one of: {', '.join(known)}, or pass a .py file that calls register_codegen",
    )


def check_options(backend: str, options, registry: Registry | None = None) -> None:
    """A one-line error where ``options`` (None: none) are not what ``backend`` (a backend's name, ``auto`` or
    ``tvm``) runs with: not a dict, a keyword its compile does not take, a value not of the type its compile
    declares (:func:`_check_value`), or a ``precision`` it does not run at (its record's ``precisions``; f32 is
    every backend's, as ``--precision`` is checked)."""
    if options is None:
        return
    if not isinstance(options, dict):
        raise WorkbenchError(
            f"options must be a dict of the backend's keywords, got {type(options).__name__} ({options!r:.40})",
            "pass e.g. options={'precision': 'bf16'}, or leave options out",
        )
    table = _chosen(registry).backends
    names = {"auto": AUTO, "tvm": ()}.get(backend, (backend,))
    declared = {k: v for b in reversed(names) if b in table for k, v in _keywords(table[b].compile).items()}
    takes = sorted(declared)
    unknown = [str(k) for k in options if k not in (*takes, "precision")]
    if unknown:
        raise WorkbenchError(
            f"Backend {backend} takes no option {unknown[0]!r}{did_you_mean(unknown[0], takes)}",
            f"pass only: {', '.join(takes)}" if takes else "leave options out",
        )
    for key, value in options.items():
        if key != "precision":
            _check_value(backend, key, value, declared[key])
    precision = options.get("precision", "f32")
    runs_at = table[backend].precisions if backend in table else ()
    if precision != "f32" and not (isinstance(precision, str) and precision in runs_at):
        if runs_at:
            raise WorkbenchError(
                f"Unknown precision {precision!r:.40} for {backend}", f"choose one of: {', '.join(runs_at)}"
            )
        takers = " or ".join(take_precision(choices(registry), registry))
        raise WorkbenchError(
            f"precision {precision!r:.40} applies to backend {takers} only, not to {backend}",
            f"pass backend {takers}, or leave precision out",
        )


#: The most threads an option ``threads`` takes: more only queue on the cores (2**40 overflowed ONNX Runtime's C int).
MAX_THREADS = 1024


def _check_value(backend: str, key: str, value, declared) -> None:
    """A one-line error where ``value`` is not what ``backend``'s compile declares for ``key``: a bool is True or
    False (a word such as "no" would switch it on), an int a whole number from 1 (``threads`` at most
    :data:`MAX_THREADS`), None only where declared (the default); any other type is the backend's to check."""
    if declared is bool:
        true_or_false(value, f"Option {key} of {backend} is True or False", f"pass options={{{key!r}: True}} or False")
    elif declared is int or (declared == int | None and value is not None):
        most, n = MAX_THREADS if key == "threads" else None, whole_number(value)
        if n is None or n < 1 or (most and n > most):
            raise WorkbenchError(
                f"Option {key} of {backend} is a whole number from 1{f' to {most}' if most else ''}, "
                f"got {type(value).__name__} ({value!r:.40})",
                f"pass e.g. options={{{key!r}: 4}}, or leave it out",
            )


def _keywords(compile_fn) -> dict:
    """The options a backend's ``compile(name, func, ...)`` takes by name, each with its declared type (its
    annotation evaluated; ``inspect.Parameter.empty`` where it declares none)."""
    params = list(inspect.signature(compile_fn, eval_str=True).parameters.values())[2:]
    return {p.name: p.annotation for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def native(codegen: str, registry: Registry | None = None) -> str | None:
    """The backend a subgraph with ``Codegen == codegen`` goes to when none is chosen."""
    return next((b.name for b in _chosen(registry).backends.values() if b.native and b.native == codegen), None)


def guard(backend: str | None, rules, registry: Registry | None = None) -> tuple[Rule, ...]:
    """``rules`` narrowed to what ``backend`` can compile (for ``auto``: what ONNX can express)."""
    if backend is not None:
        check_backend(backend, registry=registry)
    chosen = _chosen(registry).backends.get("onnxruntime" if backend == "auto" else backend or "")
    return tuple(rules) if chosen is None or chosen.guard is None else chosen.guard(rules)


def backends_for(backend: str | None, codegen: str, registry: Registry | None = None) -> tuple[str, ...]:
    """The backends to try, in order, for a subgraph of ``codegen`` when ``backend`` is chosen."""
    if backend is None:
        own = native(codegen, registry)
        return (own,) if own else ()
    check_backend(backend, registry=registry)
    return {"auto": AUTO, "tvm": ()}.get(backend, (backend,))


def compile_subgraph(
    name: str, func: relax.Function, backend: str | None = None, *, registry: Registry | None = None, **options
) -> Compiled | str:
    """Compile one subgraph with the first backend that takes it; the reason TVM keeps it otherwise.

    A chosen backend that refuses raises its one-line WorkbenchError; under
    ``auto`` the next backend is tried.
    """
    codegen = ir.func_attr(func, ir.CODEGEN)
    order = backends_for(backend, codegen, registry)
    table = _chosen(registry).backends
    if not order:
        if backend == "tvm":
            return "backend tvm: TVM runs it on the host"
        return f"no '{codegen}' codegen in this installation"
    tried = []
    for b in order:
        try:
            compiled = table[b].compile(name, func, **options)
        except WorkbenchError as err:
            if len(order) == 1:
                raise
            tried.append((b, err.cause))
            continue
        compiled.tried = tried
        return compiled
    return refusal(tried)


def refusal(tried: list) -> str:
    """Why TVM runs a subgraph that each backend of ``tried`` (``[(backend, why)]``) refused, as the codegen
    stage keeps it (:func:`run_codegen`'s ``skipped``)."""
    return "; ".join(f"{b} refused: {why}" for b, why in tried) + "; TVM runs it on the host"


class CodegenResult(NamedTuple):
    """What :func:`run_codegen` made: the module, ``{name: Compiled}`` and ``{name: reason not compiled}``."""

    mod: tvm.IRModule
    generated: dict[str, Compiled]
    skipped: dict[str, str]


def run_codegen(
    mod: tvm.IRModule, backend: str | None = None, *, registry: Registry | None = None, **options
) -> CodegenResult:
    """Compile every subgraph; returns ``(module, {name: Compiled}, {name: reason not compiled})``.

    Parameters
    ----------
    mod : tvm.IRModule
        A partitioned module.
    backend : None, "auto", "tvm", a backend's name (:func:`choices`), or a dict
        None sends each subgraph to its target's own codegen (``byoc_target``
        to ``teaching``, a registered codegen's target to it) and leaves the
        others as they are. A chosen backend
        compiles every subgraph, and the subgraphs nobody compiles go back to
        the host, so the module builds. A dict ``{subgraph: backend}`` (a
        placement) chooses per subgraph; a subgraph it does not name stays on
        TVM, and so does one its backend refuses (the reason is kept).
    registry : Registry, optional
        Where backends are found by name; default :data:`DEFAULT`.
    **options
        Passed to the backend, e.g. ``fp16=True`` for ``tensorrt``.

    Calls to compiled subgraphs become ``R.call_dps_packed(symbol, args)``.
    """
    generated: dict[str, Compiled] = {}
    skipped: dict[str, str] = {}
    for name in ir.subgraph_functions(mod):
        unknown = unknown_output(mod[name])
        if unknown:
            skipped[name] = unknown
            continue
        if isinstance(backend, dict):
            try:
                result = compile_subgraph(name, mod[name], backend.get(name, "tvm"), registry=registry, **options)
            except WorkbenchError as err:  # a placement measures what runs: a refusal puts it on the host
                result = refusal([(backend[name], err.cause)])
        else:
            result = compile_subgraph(name, mod[name], backend, registry=registry, **options)
        if isinstance(result, Compiled):
            generated[name] = result
        else:
            skipped[name] = result
    if backend is not None and skipped:
        mod = inline_subgraphs(mod, skipped)
    if not generated:
        return CodegenResult(mod, generated, skipped)
    return CodegenResult(call_packed(mod, generated), generated, skipped)


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
                f"its output {ir_types.type_str(ty)} has no shape known before it runs, and a packed call needs one; "
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

    return ir_edit.map_bindings(mod, rewrite, remove=sorted(generated))


def register_ext(backend: str, codegen: str | None = None, *, registry: Registry | None = None, **options) -> str:
    """Register ``backend`` as ``relax.ext.<codegen>`` (default: its own name) for upstream ``RunCodegen``.

    Returns the registered name. RunCodegen calls each function by its
    ``global_symbol``, so each runner is registered under that name too, for
    as long as the process lives: upstream's module holds no record to release it.
    Register before the VirtualMachine is created: it looks functions up then.
    """
    table = _chosen(registry).backends
    if backend not in table:
        raise WorkbenchError(f"Unknown backend '{backend}'.", f"choose one of: {', '.join(table)}.")

    def ext(functions, ext_options, constant_names):
        for func in functions:
            symbol = ir.func_attr(func, ir.GLOBAL_SYMBOL)
            compiled = _chosen(registry).backends[backend].compile(symbol, func, **options)  # as registered now
            register_global(symbol, tvm.get_global_func(compiled.symbol))
        return []

    name = f"relax.ext.{codegen or backend}"
    register_global(name, ext)
    return name


def describe(generated: dict, skipped: dict) -> list:
    """One line per subgraph: which backend ran it, or why TVM kept it."""
    lines = []
    for name, compiled in generated.items():
        before = "".join(f" ({b} refused: {why})" for b, why in compiled.tried)
        lines.append(f"{name}: compiled by {compiled.backend}{before}")
    lines += [f"{n}: not compiled, {why}" for n, why in skipped.items()]
    return lines
