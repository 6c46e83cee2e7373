"""Part 2's BYOC flow: an imported GluonCV model, partitioned for TensorRT.

Upstream's TensorRT pattern table has no batch_norm, and it claims single ops,
so the imported graph is first put in the form TensorRT's patterns expect:
batch norm decomposed for inference, constant sub-expressions folded, and the
tuple plumbing that decomposition leaves behind removed (a ``Tuple``/
``TupleGetItem`` pair between two claimed ops would otherwise split a region).
"""

from __future__ import annotations

import tvm
from tvm import relax

from . import stages
from .rules import get_target
from .session import Workbench


def prepare(mod: tvm.IRModule) -> tvm.IRModule:
    """Decompose batch norm, fold constants and drop tuple plumbing."""
    return tvm.transform.Sequential(
        [
            relax.transform.DecomposeOpsForInference(),
            relax.transform.FoldConstant(),
            relax.transform.CanonicalizeBindings(),
            relax.transform.DeadCodeElimination(),
        ]
    )(mod)


def model_workbench(model: str | None = None, weights=None, target: str = "tensorrt", prune_rule=None, imported=None) -> tuple:
    """``(Workbench, ImportedModel)`` for a zoo model and a target's rules.

    The workbench's titles carry the weights' label when they are untrained.
    """
    from . import ssd, zoo

    imported = imported or ssd.import_model(model or zoo.DEFAULT_MODEL, weights)
    mark = imported.weights_label if not imported.model.is_trained else ""
    wb = Workbench(prepare(imported.mod), get_target(target), prune_rule=prune_rule or stages.no_mac(), mark=mark)
    return wb, imported
