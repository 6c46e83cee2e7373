"""Bring your own model: run and bench an ONNX file or a PyTorch program as the SSD is run and benched.

A workbench made by :meth:`~byoc_workbench.session.Workbench.from_onnx` or
:meth:`~byoc_workbench.session.Workbench.from_torch` holds the model's
example inputs and its reference (ONNX Runtime on the original file, or eager
PyTorch). :func:`run` builds it (TVM alone, or its target's subgraphs
offloaded through a backend) and checks the outputs against that reference;
:func:`bench` times every build and the whole-model anchors in one process:
ONNX Runtime and OpenVINO on the original file, or eager PyTorch.
"""

from __future__ import annotations

import logging

from . import runner
from .errors import WorkbenchError

logger = logging.getLogger(__name__)


def _model(wb):
    if wb.model is None:
        raise WorkbenchError(
            "This workbench holds no imported model (no example inputs, no reference)",
            "make it with Workbench.from_onnx(path) or Workbench.from_torch(module, example_inputs)",
        )
    return wb.model


def offloaded(wb, backend: str = "onnxruntime", prune: bool = True, options: dict | None = None) -> list:
    """The workbench's stages with its rules, pruned by its prune rule (or not), compiled by ``backend``."""
    from .flow import stages

    prune_rule = wb.prune_rule if prune else stages.keep_all
    return stages.run_stages(wb.mod, wb.rules, prune_rule, check=False, backend=backend, options=options)


def build_run(wb, backend: str, prune: bool = True, repeat: int = 1, warmup: int = 0, **kw) -> runner.Run:
    """One build of the model run on its example inputs: ``backend`` ``"tvm"`` is TVM alone."""
    model = _model(wb)
    what = model.mod if backend == "tvm" else offloaded(wb, backend, prune)[-1]
    label = "tvm alone" if backend == "tvm" else f"{backend}{'' if prune else '_unpruned'}"
    return runner.build_and_run(what, model.inputs, repeat, warmup, label=label, mark=wb.mark, **kw)


def run(wb, backend: str = "onnxruntime", prune: bool = True, progress: bool = False) -> dict:
    """Run the model once through ``backend`` and check it against the reference.

    Returns
    -------
    dict
        ``model``, ``ran_on``, ``build_s``, ``run_s``, ``reference`` (what it
        was checked against), ``check`` (see :meth:`~byoc_workbench.models.own.OwnModel.check`),
        ``notes`` (the codegen stage's) and ``outputs``.
    """
    model = _model(wb)
    result = build_run(wb, backend, prune, progress=progress)
    return {
        "model": model.name,
        "ran_on": result.backend,
        "build_s": result.build_s,
        "run_s": result.latency.median_s,
        "reference": model.reference_name,
        "check": model.check(result.outputs),
        "weights": wb.mark or "as in the model",
        "outputs": result.outputs,
    }


def run_text(result: dict) -> str:
    c = result["check"]
    verdict = "equal" if c["equal"] else "DIFFERENT"
    found = f", detections {c['detections_found']}" if "detections_found" in c else ""
    return "\n".join(
        [
            f"{result['model']} on {result['ran_on']} ({result['weights']}): build {runner.seconds(result['build_s'])},"
            f" run {runner.seconds(result['run_s'])}",
            f"outputs against {result['reference']}: {verdict} (max relative error {c['max_rel']:.2e}, "
            f"tolerance {c['tolerance']:g}{found})",
        ]
    )


def _anchors(model, repeat: int, progress: bool, max_seconds) -> tuple:
    """``({label: entry}, {label: outputs}, {label: why skipped})`` of the whole-model anchors."""
    if model.kind == "onnx":
        from .bench import whole_model_anchors

        return whole_model_anchors(model.path, model.inputs, repeat, progress, max_seconds)
    out: list = [None]

    def once():
        out[0] = model.reference(model.inputs)

    lat = runner.measure(once, repeat, 2, "run eager pytorch", progress, max_seconds)
    return {"pytorch_eager": lat.to_json() | {"ran_on": "eager PyTorch (CPU)"}}, {"pytorch_eager": out[0]}, {}


def bench(
    wb,
    backends=("tvm", "onnxruntime"),
    repeat: int = 10,
    tvm_repeat: int = 1,
    unpruned: bool = True,
    anchors: bool = True,
    progress: bool = True,
    max_seconds: float | None = None,
) -> dict:
    """Time the model on each of ``backends`` and the anchors, in one process, each checked against the reference.

    Returns the JSON of ``byoc-workbench bench model.onnx --json``, in the
    layout of :func:`byoc_workbench.bench.bench_ssd` (so
    :func:`byoc_workbench.bench.report_text` prints it): ``backends``,
    ``anchors``, ``speedup_vs_tvm``, ``outputs_match_reference`` and
    ``detections_equal`` (here: ``equal``, or the largest relative error).
    """
    from .models.own import check_outputs
    from .runner import machine
    from .timing import run_json

    model = _model(wb)
    result: dict = {
        "model": model.name,
        "input_shape": list(model.inputs[0].shape),
        "backends": {},
        "anchors": {},
        "speedup_vs_tvm": {},
        "outputs_match_reference": {},
        "detections_equal": {},
        "weights_label": wb.mark or "weights as in the model",
        "reference": model.reference_name,
        "machine": machine(),
        "notes": [f"import: {model.import_s:.1f} s ({model.source_ops} source ops)"],
        "skipped": {},
    }
    outputs: dict = {}
    for name in backends:
        builds = [(name, True)] + ([(name, False)] if name != "tvm" and unpruned else [])
        for backend, prune in builds:
            label = "tvm" if name == "tvm" else f"{name}{'' if prune else '_unpruned'}"
            try:
                reps, warm = (tvm_repeat, 0) if name == "tvm" else (repeat, 1)
                run_ = build_run(wb, backend, prune, reps, warm, progress=progress, max_seconds=max_seconds)
            except runner.OverBudget:
                raise
            except WorkbenchError as err:
                result["skipped"][label] = err.line
                break
            result["backends"][label] = run_json(run_)
            outputs[label] = run_.outputs
    if anchors:
        entries, more, skipped = _anchors(model, repeat, progress, max_seconds)
        result["anchors"].update(entries)
        outputs.update(more)
        result["skipped"].update(skipped)
    ref = model.reference(model.inputs)
    timed = {**result["backends"], **result["anchors"]}
    for label, entry in timed.items():
        check = check_outputs(ref, outputs[label], detection=model.detection)
        result["outputs_match_reference"][label] = check["equal"]
        result["detections_equal"][label] = check.get("detections_found") or (
            "equal" if check["equal"] else f"rel {check['max_rel']:.1e}"
        )
        if "tvm" in timed and label != "tvm":
            result["speedup_vs_tvm"][label] = timed["tvm"]["median_s"] / entry["median_s"]
    if "tvm" in timed:
        result["notes"].append(
            f"tvm alone (llvm, untuned) timed {tvm_repeat} time(s) without warm-up; the others {repeat} times"
        )
    result["notes"].append(f"outputs checked against {model.reference_name}")
    return result
