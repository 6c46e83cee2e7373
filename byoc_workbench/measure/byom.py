"""Bring your own model: run and bench an ONNX file or a PyTorch program as the SSD is run and benched.

A workbench made by :meth:`~byoc_workbench.session.Workbench.from_onnx` or
:meth:`~byoc_workbench.session.Workbench.from_torch` holds the model's
example inputs and its reference (ONNX Runtime on the original file, or eager
PyTorch). :func:`run` builds it (TVM alone, or its target's subgraphs
offloaded through a backend) and checks the outputs against that reference;
:func:`byoc_workbench.measure.bench.bench_model` times every build and the
whole-model anchors in one process, as it does for a zoo model.
"""

from __future__ import annotations

import logging

from byoc_workbench import text
from byoc_workbench.errors import WorkbenchError
from byoc_workbench.measure import runner
from byoc_workbench.measure.compare import check_outputs

logger = logging.getLogger(__name__)


def own_model(wb):
    """The :class:`~byoc_workbench.frontends.own.OwnModel` a workbench holds, or a one-line error."""
    if wb.model is None:
        raise WorkbenchError(
            "This workbench holds no imported model (no example inputs, no reference)",
            "make it with Workbench.from_onnx(path) or Workbench.from_torch(module, example_inputs)",
        )
    return wb.model


def offloaded(wb, backend: str = "onnxruntime", prune: bool = True, options: dict | None = None) -> list:
    """The workbench's stages with its rules, pruned by its prune rule (or not), compiled by ``backend``."""
    from byoc_workbench import stages

    prune_rule = wb.prune_rule if prune else stages.keep_all
    return stages.run_stages(wb.mod, wb.rules, prune_rule, check=False, backend=backend, options=options)


def build_run(wb, backend: str, prune: bool = True, repeat: int = 1, warmup: int = 0, **kw) -> runner.Run:
    """One build of the model run on its example inputs: ``backend`` ``"tvm"`` is TVM alone."""
    model = own_model(wb)
    what = model.mod if backend == "tvm" else offloaded(wb, backend, prune)[-1]
    label = "tvm alone" if backend == "tvm" else f"{backend}{'' if prune else '_unpruned'}"
    return runner.build_and_run(what, model.inputs, repeat, warmup, label=label, mark=wb.mark, **kw)


def run(wb, backend: str = "onnxruntime", prune: bool = True, progress: bool = False) -> dict:
    """Run the model once through ``backend`` and check it against the reference.

    Returns
    -------
    dict
        ``model``, ``ran_on``, ``build_s``, ``run_s``, ``reference`` (what it
        was checked against), ``check`` (see :meth:`~byoc_workbench.frontends.own.OwnModel.check`),
        ``notes`` (the codegen stage's) and ``outputs``.
    """
    model = own_model(wb)
    result = build_run(wb, backend, prune, progress=progress)
    return {
        "model": model.name,
        "ran_on": result.backend,
        "build_s": result.build_s,
        "run_s": result.latency.median_s,
        "reference": model.reference_name,
        "check": check_outputs(model.reference(model.inputs), result.outputs, detection=model.detection),
        "weights": wb.mark or "as in the model",
        "outputs": result.outputs,
    }


def run_text(result: dict) -> str:
    c = result["check"]
    verdict = "equal" if c["equal"] else "DIFFERENT"
    found = f", detections {c['detections_found']}" if "detections_found" in c else ""
    return "\n".join(
        [
            f"{result['model']} on {result['ran_on']} ({result['weights']}): build {text.seconds(result['build_s'])},"
            f" run {text.seconds(result['run_s'])}",
            f"outputs against {result['reference']}: {verdict} (max relative error {c['max_rel']:.2e}, "
            f"tolerance {c['tolerance']:g}{found})",
        ]
    )
