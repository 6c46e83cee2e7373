"""What every backend shares: the table of backends, the record of a compiled subgraph, and
the one way a compiled subgraph reaches TVM's runtime.

A backend turns one partitioned function into a runner, a Python callable
taking TVM tensors ``(*inputs, *outputs)`` and writing the outputs in place.
:func:`register_packed` registers the runner as a global packed function under
a content-hashed symbol, which the host calls with ``R.call_dps_packed``; it is
the only place in the package that calls ``tvm.register_global_func``.

This module imports no backend, and not even TVM until a function is
registered, so the command line can name the built-in backends without
loading TVM. The backends import it, and :mod:`.registry` (which picks
backends by name) imports it and them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Callable
from pathlib import Path

CACHE_ENV = "BYOC_WORKBENCH_CACHE"


@dataclasses.dataclass
class Compiled:
    """What a backend made of one subgraph.

    ``source`` is what a reader looks at: generated NumPy or C source, an ONNX
    summary or a TensorRT engine's layers. ``tried`` lists the backends that
    ``auto`` tried first, with why each refused.
    """

    name: str  # the subgraph function
    symbol: str  # the packed function the host calls in its place
    source: str
    num_outputs: int
    backend: str
    tried: list = dataclasses.field(default_factory=list)
    detail: str = ""  # how the backend runs it, when that matters: e.g. "CPU, f32" for openvino


@dataclasses.dataclass(frozen=True)
class Backend:
    """A backend: ``compile(name, func, **options) -> Compiled``, raising WorkbenchError when it cannot.

    ``guard(rules) -> rules``, when set, narrows a rule set to what the backend
    can compile; :func:`byoc_workbench.flow.stages.run_stages` applies it when
    the backend is chosen by name. ``native`` names the ``Codegen`` attribute
    (a target's codegen name) whose subgraphs go to this backend by default.
    """

    name: str
    compile: Callable
    doc: str
    guard: Callable | None = None
    native: str | None = None


# The backends the package brings, by name; registry.py puts them in BACKENDS in this order.
BUILTIN = ("teaching", "c", "onnxruntime", "openvino", "tensorrt")
# Every backend by name, built-in or registered from a notebook (register_codegen).
BACKENDS: dict = {}
# Every symbol registered through register_packed, and the backend it came from.
REGISTERED: dict = {}


def add_backend(backend: Backend) -> Backend:
    """Put ``backend`` in the table (replacing one of the same name) and return it."""
    BACKENDS[backend.name] = backend
    return backend


def register_global(name: str, fn: Callable) -> None:
    """Register ``fn`` as TVM's global function ``name``, replacing an earlier one."""
    import tvm

    tvm.register_global_func(name, fn, override=True)


def register_packed(
    backend: str, name: str, runner: Callable, content: bytes, source: str, num_outputs: int, detail: str = ""
) -> Compiled:
    """Register ``runner`` for subgraph ``name`` and return its :class:`Compiled` record.

    The symbol is ``byoc_workbench.<backend>.<name>.<hash of content>``:
    ``content`` is everything the runner computes from (source, constants,
    an ONNX model), so two modules whose subgraphs share a name never call
    each other's code, and compiling the same subgraph twice gives the same symbol.
    """
    digest = hashlib.sha1(content).hexdigest()[:10]
    symbol = f"byoc_workbench.{backend}.{name}.{digest}"
    register_global(symbol, runner)
    REGISTERED[symbol] = backend
    return Compiled(name, symbol, source, num_outputs, backend, detail=detail)


def cache_dir(kind: str) -> Path:
    """``$BYOC_WORKBENCH_CACHE/<kind>``, else ``~/.cache/byoc-workbench/<kind>``, created if needed."""
    root = os.environ.get(CACHE_ENV)
    path = Path(root) / kind if root else Path("~/.cache/byoc-workbench").expanduser() / kind
    path.mkdir(parents=True, exist_ok=True)
    return path
