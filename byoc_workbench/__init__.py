"""BYOC Workbench: TVM's Bring Your Own Codegen flow, stage by stage, on Relax.

The package is laid out in floors, bottom to top; a module imports only from floors below
its own (``lint-imports`` checks it, see ``[tool.importlinter]`` in pyproject.toml, and
docs/ARCHITECTURE.md says what each room owns):

- ``core/``: ``ir``, ``devices``, ``errors``, ``text``, ``progress``, ``files``, ``output_paths``, ``transforms``,
  ``user_file`` and the rest of the ground floor;
- ``flow/``: rules, regions, partition, prune and what each stage did;
- ``backends/``: the codegens and the API to write your own (``register_codegen``);
- ``stages`` (the passes and a backend's codegen strung together) and ``frontends/`` (MXNet,
  ONNX and PyTorch into Relax);
- ``models/``: the demo graph, the GluonCV zoo, pictures, weights, what outputs mean;
- ``draw/``: the graph model, DOT/SVG, detections and plots, from data;
- ``session``: the workbench's state, the pure twin of the widgets;
- ``subjects``: which model, for every entry point;
- ``measure/``: build, run, time, profile, compare, bench and the placement search;
- ``workflow``: a zoo model in a few calls;
- ``widgets/``; then ``exercises``, ``export``, ``doctor``; then ``cli/``.

Importing the package imports TVM, without torch (see :func:`_import_tvm_without_torch`), and
nothing else heavy: the short names below (``from byoc_workbench import Workbench, demo``) load
their module on first use.
"""

import importlib
import sys


def _import_tvm_without_torch() -> None:
    """Import TVM with torch hidden from it, unless either is imported already.

    TVM's FFI and ``tvm.relax`` import torch whenever it is installed, for their own PyTorch
    interop, which the workbench does not use: with the PyTorch extra that costs every process
    (a kernel, each command) about 700 MB and a few seconds before any work. The workbench imports
    torch only where it reads a PyTorch model, and TVM then takes its tensors through DLPack.
    """
    if "tvm" in sys.modules or "torch" in sys.modules:
        return
    sys.modules["torch"] = None  # `import torch` raises ImportError, as TVM's own fallbacks expect
    try:
        import tvm.relax  # noqa: F401, PLC0415  only with torch hidden from it
    finally:
        del sys.modules["torch"]


_import_tvm_without_torch()

__version__ = "0.1.0"

_LAZY = {
    "Workbench": ("byoc_workbench.session", "Workbench"),
    "WorkbenchError": ("byoc_workbench.core.errors", "WorkbenchError"),
    "workbench_widget": ("byoc_workbench.widgets", "workbench_widget"),
    "get_target": ("byoc_workbench.flow.rules", "get_target"),
    "op_rule": ("byoc_workbench.flow.rules", "op_rule"),
    "pattern_rule": ("byoc_workbench.flow.rules", "pattern_rule"),
    "register_codegen": ("byoc_workbench.backends.codegen", "register_codegen"),
    "codegen": ("byoc_workbench.backends.codegen", None),
    "demo": ("byoc_workbench.models.demo", None),
    "workflow": ("byoc_workbench.workflow", None),
    "zoo": ("byoc_workbench.models.zoo", None),
    "images": ("byoc_workbench.models.images", None),
    "stages": ("byoc_workbench.stages", None),
    "execute": ("byoc_workbench.measure.compiler.execute", None),
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module 'byoc_workbench' has no attribute {name!r}")
    module, attr = _LAZY[name]
    value = importlib.import_module(module)
    return value if attr is None else getattr(value, attr)
