"""What every backend shares: the record of a compiled subgraph, what a backend is, and the
one way a compiled subgraph reaches TVM's runtime.

A backend turns one partitioned function into a runner, a Python callable
taking TVM tensors ``(*inputs, *outputs)`` and writing the outputs in place.
:func:`register_packed` registers the runner as a global packed function under
a content-hashed symbol, which the host calls with ``R.call_dps_packed``.
:func:`register_global` is the package's one call of ``tvm.register_global_func``
(for subgraphs through :func:`register_packed`, for upstream ``RunCodegen``
through :func:`.registry.register_ext`, and for the CUDA compiler's callback in
:mod:`byoc_workbench.measure.compiler.cuda`).

The :class:`Compiled` record that :func:`register_packed` returns holds its
symbol: when the last record holding a symbol is released (garbage-collected,
or :meth:`Compiled.release`), the symbol leaves TVM's table of global
functions. A VM built before keeps the function it looked up.

This module imports no backend, so the command line names the built-in
backends (:data:`BUILTIN_NAMES`) without loading one. Which backends exist is
:mod:`.registry`'s business.
"""

from __future__ import annotations

import dataclasses
import hashlib
import weakref
from collections.abc import Callable

import tvm
import tvm_ffi


@dataclasses.dataclass
class Compiled:
    """What a backend made of one subgraph.

    ``source`` is what a reader looks at: generated NumPy or C source, an ONNX
    summary or a TensorRT engine's layers. ``tried`` lists the backends that
    ``auto`` tried first, with why each refused. A record made by
    :func:`register_packed` holds its symbol in TVM's table until it is released.
    """

    name: str  # the subgraph function
    symbol: str  # the packed function the host calls in its place
    source: str
    num_outputs: int
    backend: str
    tried: list = dataclasses.field(default_factory=list)
    detail: str = ""  # how the backend runs it, when that matters: e.g. "CPU, f32" for openvino
    precision: str = ""  # what it infers in, for a backend that takes a precision: openvino's bf16 may run f32
    _hold: object = dataclasses.field(default=None, repr=False, compare=False)

    def release(self) -> None:
        """Let go of the symbol now rather than when the record is garbage-collected.

        The symbol leaves TVM's table once no other record holds it; a module
        that calls it can no longer be built, while a VM built before still runs.
        """
        self._hold = None  # the last record to let go of a symbol takes it out of TVM's table


@dataclasses.dataclass(frozen=True)
class Backend:
    """A backend, as one record: everything the workbench knows of it lives here, in its own module.

    ``compile(name, func, **options) -> Compiled`` raises WorkbenchError when it
    cannot. The first five fields make a backend (a codegen of your own fills
    only those: :meth:`.emit.Codegen.backend`); the others are what a built-in
    runtime brings besides, and stay empty where they do not apply.
    """

    name: str
    compile: Callable
    doc: str  # one line shown beside the name
    guard: Callable | None = None  # rules -> the rules it compiles; run_stages applies it when it is chosen by name
    native: str | None = None  # the Codegen attribute (a target's codegen name) whose subgraphs go here by default
    own_target: Callable | None = None  # () -> the Target it brings: every op it runs, call by call
    packages: tuple[str, ...] = ()  # what it imports: registry.missing looks for them, the machine key versions them
    install: str = ""  # the fix when one of its packages is missing
    missing: Callable | None = None  # () -> WorkbenchError or None: why it cannot run though installed (no GPU)
    pretty: str = ""  # its name in printouts ("ONNX Runtime"); empty: its name
    precisions: tuple[str, ...] = ()  # the inference precisions it runs at when asked (precision=); empty: f32 only
    whole_model: Callable | None = None  # path -> run(inputs): a whole ONNX file, as bench's anchor
    ran_on: str = ""  # where its whole-model anchor runs, as printouts say it: "openvino (CPU, f32)"


# The backends the package brings, by name, in the order registry.BUILTIN holds them.
BUILTIN_NAMES = ("teaching", "c", "onnxruntime", "openvino", "tensorrt", "torch")


class _Held:
    """TVM's global function ``symbol``, registered by ``backend``, for as long as a record holds this.

    Every :class:`Compiled` record of the symbol holds the same one; when the last lets go, the
    symbol leaves TVM's table (at exit it is left alone: TVM may be gone, and the table with it).
    """

    def __init__(self, symbol: str, backend: str):
        self.backend = backend
        weakref.finalize(self, _remove_global, symbol).atexit = False


# symbol -> its _Held while a record holds it. The records own each entry; this only finds it,
# since compiling the same content twice gives the same symbol.
_HELD_BY_SYMBOL: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def _remove_global(symbol: str) -> None:
    tvm_ffi.remove_global_func(symbol)


def register_global(name: str, fn: Callable) -> None:
    """Register ``fn`` as TVM's global function ``name``, replacing an earlier one."""
    tvm.register_global_func(name, fn, override=True)


def register_packed(
    backend: str,
    name: str,
    runner: Callable,
    content: bytes,
    source: str,
    num_outputs: int,
    detail: str = "",
    precision: str = "",
) -> Compiled:
    """Register ``runner`` for subgraph ``name`` and return its :class:`Compiled` record, which holds it.

    The symbol is ``byoc_workbench.<backend>.<name>.<hash of content>``:
    ``content`` is everything the runner computes from (source, constants,
    an ONNX model), so two modules whose subgraphs share a name never call
    each other's code, and compiling the same subgraph twice gives the same symbol.
    """
    digest = hashlib.sha1(content).hexdigest()[:10]
    symbol = f"byoc_workbench.{backend}.{name}.{digest}"
    held = _HELD_BY_SYMBOL.get(symbol)
    if held is None:
        held = _HELD_BY_SYMBOL[symbol] = _Held(symbol, backend)
    register_global(symbol, runner)
    return Compiled(name, symbol, source, num_outputs, backend, detail=detail, precision=precision, _hold=held)


def registered_by(symbol: str) -> str | None:
    """The backend that registered ``symbol`` through :func:`register_packed`, while a record holds it."""
    held = _HELD_BY_SYMBOL.get(symbol)
    return held.backend if held is not None else None
