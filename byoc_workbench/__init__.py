"""BYOC Workbench: TVM's Bring Your Own Codegen flow, stage by stage, on Relax.

The package is laid out by concern:

- ``flow/``: rules, regions, partition, prune, the stages and their summaries;
- ``backends/``: the backends (the teaching NumPy codegen, the C codegen, ONNX Runtime,
  TensorRT) and the API to write your own (``register_codegen``);
- ``draw/``: the graph model, DOT/SVG, detections and plots;
- ``widgets/``: the JupyterLab widgets, thin wrappers over :class:`Workbench`;
- ``models/``: the demo graph, the model zoo, pictures and the MXNet frontend;
- ``ir``, ``transforms``, ``errors``, ``execute``, ``session``, ``workflow`` (a zoo model's
  import, stages and run) and ``cli`` at the top.

Importing the package imports nothing heavy: the short names below
(``from byoc_workbench import Workbench, demo``) load their module on first use.
"""

import importlib

__version__ = "0.1.0"

_LAZY = {
    "Workbench": ("byoc_workbench.session", "Workbench"),
    "WorkbenchError": ("byoc_workbench.errors", "WorkbenchError"),
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
    "stages": ("byoc_workbench.flow.stages", None),
    "execute": ("byoc_workbench.execute", None),
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module 'byoc_workbench' has no attribute {name!r}")
    module, attr = _LAZY[name]
    value = importlib.import_module(module)
    return value if attr is None else getattr(value, attr)
