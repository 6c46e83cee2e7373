"""``byoc-workbench bench MODEL``: a zoo model offloaded, against TVM alone and two anchors, in one process.

On one input (the picture cut to the model's input shape, 512x512 for the SSD),
:func:`bench_model` times:

- each backend: ``tvm`` (TVM alone, llvm, untuned), and each offloading
  backend (``onnxruntime``, ``tensorrt``, ``auto``) on the model partitioned
  with upstream's TensorRT rules and pruned, plus the same build unpruned
  (``<backend>_unpruned``: every subgraph offloaded, the SSD's lone ``multiply`` too);
- the anchors: MXNet's own hybridized model (static memory), and ONNX Runtime
  and OpenVINO (at f32) on the whole model as MXNet's ONNX exporter writes it,
  where that exporter takes the model. It makes ``box_nms`` class-agnostic, so their detections differ
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

from . import runner, timing
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


WHOLE_MODEL = ("onnxruntime", "openvino")  # the backends that run a whole ONNX file as an anchor


def whole_model_anchors(
    path, inputs, repeat: int, progress: bool = True, max_seconds: float | None = None, backends=WHOLE_MODEL
) -> tuple:
    """``({label: entry}, {label: outputs}, {label: why skipped})`` of each of ``backends`` on a whole ONNX file.

    Labels are ``<backend>_whole_model``. ONNX Runtime runs with the backend's own
    session options; OpenVINO at f32 (it would silently run bf16 on CPUs that have
    it). Both get the file with its inputs fixed at the shapes of ``inputs`` and its
    shape arithmetic folded (:func:`byoc_workbench.models.onnx_import.static_shapes`):
    OpenVINO's CPU plugin cannot compile the dynamic anchor slices of MXNet's SSD
    export, and ONNX Runtime folds the same arithmetic itself anyway. A backend
    that is not installed, or that rejects the file, is skipped with its one-line reason.
    """
    from .backends import onnxruntime, openvino

    makers = {"onnxruntime": onnxruntime.whole_model, "openvino": openvino.whole_model}
    ran_on = {"onnxruntime": "onnxruntime (CPU)", "openvino": "openvino (CPU, f32)"}
    entries, outputs, skipped = {}, {}, {}
    with tempfile.TemporaryDirectory(prefix="byoc-anchor-") as tmp:
        folded = _static(path, inputs, Path(tmp) / Path(path).name)
        for backend in backends:
            label = f"{backend}_whole_model"
            try:
                run = makers[backend](folded)
            except WorkbenchError as err:
                skipped[label] = err.line
                continue
            out: list = [None]

            def once(run=run, out=out):
                out[0] = run(inputs)

            lat = runner.measure(once, repeat, 2, f"run {backend} whole model", progress, max_seconds)
            entries[label] = lat.to_json() | {"ran_on": f"{ran_on[backend]} on {Path(path).name}"}
            outputs[label] = out[0]
    return entries, outputs, skipped


def _static(path, inputs, to: Path) -> Path:
    """The ONNX file at ``path`` with its real inputs fixed at the shapes of ``inputs``, folded, its weights
    constants (not graph inputs), saved at ``to``."""
    import onnx

    from .models import onnx_import

    model = onnx.load(str(path))
    names = list(onnx_import.graph_inputs(model))
    try:
        folded = onnx_import.static_shapes(model, {n: list(np.shape(x)) for n, x in zip(names, inputs)})
    except WorkbenchError as err:  # the backends then get the file as it is, and say what they make of it
        logger.warning("%s kept as it is: %s", path, err.cause)
        return Path(path)
    # MXNet's exporter lists every weight among the graph's inputs, and an input may change at run time, so
    # ONNX Runtime would keep each batch norm apart from its convolution: the weights are constants here.
    weights = {t.name for t in folded.graph.initializer}
    real = [v for v in folded.graph.input if v.name not in weights]
    del folded.graph.input[:]
    folded.graph.input.extend(real)
    onnx.save(folded, str(to))
    return to


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
    (:func:`byoc_workbench.timing.where_time_goes`), and ``warnings`` (outputs that are not finite, see
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
            result["backends"][label] = timing.run_json(run)
            found[label] = outputs.prediction(task, run.outputs, loaded, run.backend)
            if where and name != "tvm":
                built = timing.build(stages, mark=mark)
                result.setdefault("where_time_goes", {})[label] = timing.where_time_goes(built, [x], repeat)
    if "tvm" in result["backends"]:
        result["notes"].append(
            f"tvm alone (llvm, untuned) timed {tvm_repeat} time(s), without warm-up: tens of seconds a run; "
            f"the others {repeat} times after warm-up"
        )
    if anchors:
        lat, out = mxnet_anchor(loaded.block, x, repeat, progress, max_seconds)
        result["anchors"]["mxnet"] = lat.to_json() | {"ran_on": "mxnet (hybridized, static_alloc)"}
        found["mxnet"] = outputs.prediction(task, out, loaded, "mxnet")
        _onnx_anchors(result, found, loaded, x, repeat, progress, max_seconds)
    _compare(result, found)
    result["warnings"] = [w for p in found.values() for w in p.warnings]
    return result


def export_anchors(loaded, x, repeat: int, progress: bool = True, max_seconds: float | None = None) -> tuple:
    """``({label: entry}, {label: outputs}, {label: why skipped})``: :func:`whole_model_anchors` on MXNet's
    own ONNX export of ``loaded`` (:func:`export_onnx`), each anchor skipped with why where the exporter
    or a runtime refuses the model."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            path = export_onnx(loaded, x.shape, Path(tmp) / f"{loaded.name}.onnx")
            return whole_model_anchors(path, [x], repeat, progress, max_seconds)
        except runner.OverBudget:
            raise  # the user's bound
        except Exception as err:  # MXNet's exporter and the runtimes refuse ops in their own ways
            why = f"MXNet's ONNX export of {loaded.name} does not run: {first_line(err)}"
            return {}, {}, {f"{backend}_whole_model": why for backend in WHOLE_MODEL}


def _onnx_anchors(result: dict, found: dict, loaded, x, repeat: int, progress: bool, max_seconds=None) -> None:
    """ONNX Runtime and OpenVINO on MXNet's own ONNX export of the whole model, where the exporter takes it."""
    entries, more, skipped = export_anchors(loaded, x, repeat, progress, max_seconds)
    result["skipped"].update(skipped)
    for label, entry in entries.items():
        backend = label.removesuffix("_whole_model")
        result["anchors"][label] = entry | {"ran_on": f"{entry['ran_on'].split(' on ')[0]}, MXNet's ONNX export"}
        found[label] = outputs.prediction(loaded.spec.kind, more[label], loaded, backend)
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
        f"input {tuple(result['input_shape'])}, " + runner.machine_line(result["machine"]),
        f"{'build':26s} {'median':>9s} {'min':>9s} {'max':>9s} {'runs':>4s} {'vs tvm':>7s}  same outputs     ran on",
    ]
    for group in ("backends", "anchors"):
        for label, e in result[group].items():
            speed = result["speedup_vs_tvm"].get(label)
            same = result.get("detections_equal", {}).get(label) or {True: "yes", False: "no"}.get(
                result.get("outputs_match_tvm", {}).get(label), ""
            )
            if label.endswith("_whole_model") and result.get("task") == "detection" and same:
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
