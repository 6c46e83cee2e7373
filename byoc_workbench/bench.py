"""``byoc-workbench bench MODEL``: a zoo model offloaded, against TVM alone and two anchors, in one process.

On one input (the picture cut to the model's input shape, 512x512 for the SSD),
:func:`bench_model` times:

- each backend: ``tvm`` (TVM alone, llvm, untuned), and each offloading
  backend (``onnxruntime``, ``tensorrt``, ``auto``) on the model partitioned
  with upstream's TensorRT rules and pruned, plus the same build unpruned
  (``<backend>_unpruned``: every subgraph offloaded, the SSD's lone ``multiply`` too);
- the anchors: MXNet's own hybridized model (static memory), and ONNX Runtime
  on the whole model as MXNet's ONNX exporter writes it, where that exporter
  takes the model. It makes ``box_nms`` class-agnostic, so its detections differ
  from TVM's by design.

It checks each backend's outputs against TVM alone's as the model's task reads
them (:func:`byoc_workbench.models.matching.differences`: detections as a set,
masks, keypoints and top-5 classes up to ties). TVM alone takes tens of seconds per
run on a laptop, so it is timed ``tvm_repeat`` times (default once), and the
output says so. A backend that cannot run here (TensorRT without a GPU) is
reported with its one-line reason; the others still run.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from . import runner
from .errors import WorkbenchError, first_line
from .models import matching, outputs, zoo

logger = logging.getLogger(__name__)

CLASS_AGNOSTIC = "MXNet's ONNX exporter makes box_nms class-agnostic: its detections differ from TVM's by design"
# Issue 7's bar for the offloaded build on a CPU.
TARGETS = {"vs_tvm_at_least": 50.0, "vs_ort_whole_model_within": 1.3}


def parse_backends(text: str) -> tuple:
    """``"tvm,onnxruntime"`` -> ``("tvm", "onnxruntime")``, or a one-line error naming the unknown ones.

    Any backend of the registry will do; a ``.py`` file is a codegen of your own, loaded now.
    """
    from .backends import registry
    from .backends.codegen import resolve_backend

    names = tuple(resolve_backend(n.strip()) for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in registry.choices()]
    if unknown or not names:
        near = [m for n in unknown for m in difflib.get_close_matches(n, registry.choices(), n=1)]
        raise WorkbenchError(
            f"Unknown backend(s) for bench: {', '.join(unknown) or 'none given'}",
            (f"did you mean {', '.join(near)}? " if near else "")
            + f"pass --backends as a comma-separated list of: {', '.join(registry.choices())}, or a codegen's .py file",
        )
    return tuple(dict.fromkeys(names))


def _entry(run: runner.Run) -> dict:
    return run.latency.to_json() | {"ran_on": run.backend, "build_s": run.build_s}


def where_time_goes(found, x, runs: int, top: int = 10, mark: str = "") -> dict:
    """One offloaded build's time per VM call (:func:`byoc_workbench.timing.profile`): the slowest
    entries, and the seconds per kind (offloaded subgraph, boundary, host kernel, builtin)."""
    from . import timing

    profile = timing.profile(timing.build(found, mark=mark), [x], runs=runs)
    rows = [{"name": e.name, "kind": e.kind, "target": e.target, "time_s": e.time_s} for e in profile.top(top)]
    return {"end_to_end_s": profile.end_to_end_s, "by_kind": profile.by_kind, "top": rows}


def mxnet_anchor(block, x, repeat: int, progress: bool = True, max_seconds: float | None = None) -> tuple:
    """``(Latency, outputs)`` of the Gluon block itself, hybridized with static memory."""
    import mxnet as mx

    block.hybridize(static_alloc=True, static_shape=True)
    data = mx.nd.array(x)
    out: list = [None]

    def once():
        got = block(data)  # one array (pose, classifiers) or a tuple (detectors, segmentation)
        out[0] = [o.asnumpy() for o in (got if isinstance(got, (list, tuple)) else [got])]  # waits for MXNet

    return runner.measure(once, repeat, 2, "run mxnet", progress, max_seconds), out[0]


def export_onnx(loaded: zoo.LoadedModel, shape, path: str | os.PathLike) -> Path:
    """The whole model as MXNet's own ONNX exporter writes it (``mx.onnx.export_model``)."""
    import mxnet as mx

    graph, params = zoo.symbol_and_params(loaded)
    sym = mx.sym.load_json(json.dumps(graph))
    nd = {k: mx.nd.array(v) for k, v in params.items()}
    quiet = logging.getLogger()
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # the exporter logs every op, and warns that box_nms becomes class-agnostic
    try:
        mx.onnx.export_model(sym, nd, in_shapes=[tuple(shape)], in_types=[np.float32], onnx_file_path=str(path))
    finally:
        quiet.setLevel(level)
    return Path(path)


def ort_whole_model_anchor(path, x, repeat: int, progress: bool = True, max_seconds: float | None = None) -> tuple:
    """``(Latency, outputs)`` of ONNX Runtime on an exported model, with the backend's own session options."""
    from .backends import onnxruntime as ort_backend

    ort = ort_backend._ort()
    so = ort_backend.session_options()
    so.log_severity_level = 3  # the export keeps initializers among the inputs; ORT warns once per weight
    session = ort.InferenceSession(str(path), sess_options=so, providers=ort_backend.providers())
    feed = {session.get_inputs()[0].name: x}
    out: list = [None]

    def once():
        out[0] = session.run(None, feed)

    return runner.measure(once, repeat, 2, "run onnxruntime whole model", progress, max_seconds), out[0]


def bench_model(
    model: str = zoo.DEFAULT_MODEL,
    backends=("tvm", "onnxruntime"),
    repeat: int = 10,
    tvm_repeat: int = 1,
    weights=None,
    image=None,
    unpruned: bool = True,
    anchors: bool = True,
    progress: bool = True,
    where: bool = False,
    loaded: zoo.LoadedModel | None = None,
    max_seconds: float | None = None,
) -> dict:
    """Time ``model`` on each of ``backends`` and the anchors; see the module's docstring.

    Returns the JSON of ``byoc-workbench bench MODEL --json``: ``model``, ``task``,
    ``family``, ``input_shape``, ``backends``, ``anchors``, ``speedup_vs_tvm``,
    ``outputs_match_tvm``, ``weights``, ``machine``, plus ``differences`` (what
    differs from TVM alone's outputs, per build), ``detections_equal`` for detectors
    (rows of TVM alone's detections found), ``notes``, ``skipped`` (backends and
    anchors that could not run, with why), ``targets`` (issue 7's bar, for the first
    offloading backend), with ``where``, ``where_time_goes`` per offloaded build
    (:func:`where_time_goes`), and ``warnings`` (outputs that are not finite, see
    :func:`byoc_workbench.models.outputs.nonfinite_warning`). ``loaded`` reuses a
    loaded model; ``max_seconds`` refuses a timed loop that its first run says
    would take longer.
    """
    from . import transforms, workflow
    from .flow.rules import get_target

    if repeat < 1 or tvm_repeat < 1:
        raise WorkbenchError(
            f"--repeat and --tvm-repeat must be 1 or more, got {repeat}, {tvm_repeat}", "pass 10 and 1"
        )
    t0 = time.perf_counter()
    shape = loaded.input_shape if loaded else zoo.model_spec(model).input_shape
    x, _ = workflow.model_input(image, shape)  # a bad picture fails before the model loads
    loaded = loaded or zoo.load_model(model, weights)
    task = loaded.spec.kind
    imported = zoo.import_model(model, loaded=loaded)
    prepared = transforms.prepare(imported.mod)
    target_rules = get_target("tensorrt").rules
    mark = "" if loaded.is_trained else loaded.weights_label
    result: dict = {
        "model": model,
        "task": task,
        "family": loaded.spec.family,
        "input_shape": list(x.shape),
        "backends": {},
        "anchors": {},
        "speedup_vs_tvm": {},
        "outputs_match_tvm": {},
        "differences": {},
        "weights": "trained" if loaded.is_trained else "untrained",
        "weights_label": loaded.weights_label,
        "machine": runner.machine(),
        "notes": [f"import and prepare: {time.perf_counter() - t0:.1f} s"],
        "skipped": {},
    }
    if task == "detection":
        result["detections_equal"] = {}
    found: dict = {}
    for name in backends:
        builds = [(name, True)] if name == "tvm" else [(name, True)] + ([(f"{name}_unpruned", False)] * unpruned)
        for label, prune in builds:
            try:
                if name == "tvm":
                    run = runner.build_and_run(
                        imported.mod, [x], tvm_repeat, 0, label="tvm alone", progress=progress, max_seconds=max_seconds
                    )
                else:
                    stages = workflow.offload(prepared, name, prune, rules=target_rules)
                    run = runner.build_and_run(
                        stages[-1], [x], repeat=repeat, label=label, progress=progress, max_seconds=max_seconds
                    )
            except runner.OverBudget:
                raise  # the user's bound, not this backend's problem
            except WorkbenchError as err:
                result["skipped"][label] = err.line
                break
            result["backends"][label] = _entry(run)
            found[label] = outputs.prediction(task, run.outputs, loaded, run.backend)
            if where and name != "tvm":
                result.setdefault("where_time_goes", {})[label] = where_time_goes(stages, x, repeat, mark=mark)
    if "tvm" in result["backends"]:
        result["notes"].append(
            f"tvm alone (llvm, untuned) timed {tvm_repeat} time(s), without warm-up: tens of seconds a run; "
            f"the others {repeat} times after warm-up"
        )
    if anchors:
        lat, out = mxnet_anchor(loaded.block, x, repeat, progress, max_seconds)
        result["anchors"]["mxnet"] = lat.to_json() | {"ran_on": "mxnet (hybridized, static_alloc)"}
        found["mxnet"] = outputs.prediction(task, out, loaded, "mxnet")
        _ort_anchor(result, found, loaded, x, repeat, progress, max_seconds)
    _compare(result, found)
    result["warnings"] = [w for p in found.values() for w in p.warnings]
    return result


def _ort_anchor(result: dict, found: dict, loaded, x, repeat: int, progress: bool, max_seconds=None) -> None:
    """ONNX Runtime on MXNet's own ONNX export of the whole model, where the exporter takes it."""
    label = "onnxruntime_whole_model"
    with tempfile.TemporaryDirectory() as tmp:
        try:
            path = export_onnx(loaded, x.shape, Path(tmp) / f"{loaded.name}.onnx")
            lat, out = ort_whole_model_anchor(path, x, repeat, progress, max_seconds)
        except runner.OverBudget:
            raise  # the user's bound
        except Exception as err:  # MXNet's exporter and ONNX Runtime refuse ops in their own ways
            result["skipped"][label] = f"MXNet's ONNX export of {loaded.name} does not run: {first_line(err)}"
            return
    result["anchors"][label] = lat.to_json() | {"ran_on": "onnxruntime, MXNet's ONNX export"}
    found[label] = outputs.prediction(loaded.spec.kind, out, loaded, "onnxruntime")
    if loaded.spec.kind == "detection":
        result["notes"].append(f"{label}: {CLASS_AGNOSTIC}")


def _compare(result: dict, found: dict) -> None:
    """Speedups and output checks against TVM alone, and issue 7's targets."""
    timed = {**result["backends"], **result["anchors"]}
    ref = found.get("tvm")
    for label, entry in timed.items():
        if label == "tvm" or ref is None:
            continue
        result["speedup_vs_tvm"][label] = timed["tvm"]["median_s"] / entry["median_s"]
        differ = matching.differences(ref, found[label])
        result["outputs_match_tvm"][label] = not differ
        result["differences"][label] = differ
        if "detections_equal" in result:
            rows = len(np.asarray(ref["ids"])[0])
            result["detections_equal"][label] = f"{rows - len(matching.unmatched(ref, found[label]))}/{rows}"
    offloaded = next((k for k in result["backends"] if k != "tvm" and not k.endswith("_unpruned")), None)
    if offloaded is None:
        return
    t = result["backends"][offloaded]["median_s"]
    targets = {"backend": offloaded}
    if "tvm" in timed:
        targets[f"at_least_{TARGETS['vs_tvm_at_least']:g}x_faster_than_tvm"] = (
            timed["tvm"]["median_s"] / t >= TARGETS["vs_tvm_at_least"]
        )
    if "mxnet" in timed:
        targets["faster_than_mxnet"] = t < timed["mxnet"]["median_s"]
    if "onnxruntime_whole_model" in timed:
        ratio = t / timed["onnxruntime_whole_model"]["median_s"]
        targets["vs_onnxruntime_whole_model"] = ratio
        targets[f"within_{TARGETS['vs_ort_whole_model_within']:g}x_of_onnxruntime_whole_model"] = (
            ratio <= TARGETS["vs_ort_whole_model_within"]
        )
    result["targets"] = targets


def report_text(result: dict) -> str:
    """The bench as a table, saying which backend ran each row and what the weights were."""
    lines = [
        f"{result['model']} ({', '.join(filter(None, (result.get('family'), result['weights_label'])))}), "
        f"input {tuple(result['input_shape'])}, "
        f"{result['machine']['cpu']}, {result['machine']['cores']} cores",
        f"{'build':26s} {'median':>9s} {'min':>9s} {'max':>9s} {'runs':>4s} {'vs tvm':>7s}  same outputs     ran on",
    ]
    for group in ("backends", "anchors"):
        for label, e in result[group].items():
            speed = result["speedup_vs_tvm"].get(label)
            same = result.get("detections_equal", {}).get(label) or {True: "yes", False: "no"}.get(
                result.get("outputs_match_tvm", {}).get(label), ""
            )
            if label == "onnxruntime_whole_model" and result.get("task") == "detection" and same:
                same += " (class-agnostic NMS)"
            lines.append(
                f"{label:26s} {runner.seconds(e['median_s']):>9s} {runner.seconds(e['min_s']):>9s} "
                f"{runner.seconds(e['max_s']):>9s} {e['runs']:4d} {f'{speed:.1f}x' if speed else '':>7s}  "
                f"{same:15s}  {e['ran_on']}"
            )
    lines += [f"skipped {k}: {why}" for k, why in result["skipped"].items()]
    for label, w in result.get("where_time_goes", {}).items():
        kinds = ", ".join(f"{k} {runner.seconds(v)}" for k, v in w["by_kind"].items())
        lines.append(f"where {label}'s {runner.seconds(w['end_to_end_s'])} go: {kinds}")
        lines += [f"  {runner.seconds(r['time_s']):>9s}  {r['kind']:9s} {r['name']}" for r in w["top"]]
    lines += [f"note: {n}" for n in result["notes"]]
    if "targets" in result:
        lines.append("issue 7 targets: " + ", ".join(f"{k}={_fmt(v)}" for k, v in result["targets"].items()))
    return "\n".join(lines)


def _fmt(value) -> str:
    return f"{value:.2f}" if isinstance(value, float) else str(value)
