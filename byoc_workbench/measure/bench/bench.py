"""``byoc-workbench bench MODEL``: a model offloaded, against TVM alone and the whole-model anchors, in one process.

The model is a zoo model (the SSD by default), the Part 1 demo, or your own: an ONNX file or a
PyTorch program, held by a workbench made with
:meth:`~byoc_workbench.session.Workbench.from_onnx` or
:meth:`~byoc_workbench.session.Workbench.from_torch`. On one input (a zoo
model's is the picture cut to its input shape, 512x512 for the SSD; your own
model's are its example inputs), :func:`bench_model` times:

- each backend: ``tvm`` (TVM alone, llvm, untuned), and each offloading
  backend (``onnxruntime``, ``tensorrt``, ``auto``, ...) on the model
  partitioned (a zoo model with upstream's TensorRT rules, your own with its
  workbench's) and pruned, plus the same build unpruned (``<backend>_unpruned``:
  every subgraph offloaded, the SSD's lone ``multiply`` too);
- the anchors (:mod:`byoc_workbench.measure.bench.anchors`): for a zoo model MXNet's
  own block, and ONNX Runtime and OpenVINO on MXNet's ONNX export of it; for an
  ONNX file the same runtimes on the file; for a PyTorch program eager PyTorch.

It checks each build's outputs against a reference. A zoo model's is TVM
alone's outputs, read as the model's task reads them
(:func:`byoc_workbench.measure.check.compare.differences`: detections as a set,
masks, keypoints and top-5 classes up to ties); your own model's is the
framework it came from (ONNX Runtime on the file, or eager PyTorch;
:func:`byoc_workbench.measure.check.compare.check_outputs`). Each build is then timed again in
``repeat`` rounds, each build once a round (:func:`~byoc_workbench.measure.time.clock.round_robin`, as
the search's finals): a machine's speed drifts, and two builds timed one after the other can differ by 2x
on a busy CPU, so every speedup and "faster or tie" comes from the same rounds. A build whose first
timed run says its rounds would take too long (TVM alone takes tens of seconds per run of the SSD on a
laptop) keeps that first timing (TVM alone's ``tvm_repeat`` runs, default one); the notes say which were
timed apart, and why. The anchors are timed on their own, after the builds. A backend that cannot run here
(TensorRT without a GPU) is reported with its one-line reason, as is a build that offloads nothing to its
backend; the others still run.

Every result has the same top-level keys, :data:`LAYOUT`, whatever the model.
:func:`bench_models` benches several, one after another or one task per model
on a Ray cluster (:mod:`byoc_workbench.measure.cluster`).
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from byoc_workbench.backends import registry
from byoc_workbench.backends.codegen import resolve_backend
from byoc_workbench.core import text
from byoc_workbench.core.errors import WorkbenchError, nearest
from byoc_workbench.measure import cluster
from byoc_workbench.measure.bench import byom
from byoc_workbench.measure.bench.anchors import own_anchors, zoo_anchors
from byoc_workbench.measure.check import compare
from byoc_workbench.measure.machine import machine
from byoc_workbench.measure.time import clock, runner, timing
from byoc_workbench.models import meaning, zoo
from byoc_workbench.subjects import ModelRef, Subject, load, of_own

#: The top-level keys of every bench result (``bench --json``), for a zoo model and your own alike.
LAYOUT = (
    "model",
    "task",  # the zoo's task (detection, ...); for your own model "detection" or None
    "family",  # the zoo's family; None for your own model
    "input_shape",
    "reference",  # what every build's outputs are checked against
    "backends",  # label -> latency, ran_on, build_s
    "anchors",  # label -> latency, ran_on (and a note)
    "speedup_vs_tvm",
    "outputs_match",  # label -> whether its outputs are the reference's
    "differences",  # label -> what differs, one line each
    "detections",  # label -> how many of the reference's detections it holds (compare.found; detectors only)
    "weights",
    "weights_label",
    "machine",
    "notes",
    "skipped",  # label -> why it could not run
    "targets",  # the first offloaded build against SPEED_GOALS
    "where_time_goes",  # label -> its slowest VM calls (with where=True)
    "warnings",  # outputs that are not finite
)
# The bar this project set for the SSD's offloaded build on a CPU.
SPEED_GOALS = {"vs_tvm_at_least": 50.0, "vs_ort_whole_model_within": 1.3}
# Seconds a build's rounds may take: TVM alone on the SSD (45 s a run) stays apart. ``max_seconds`` only
# tightens it: the CLI's default (600 s) would let ten rounds of it in.
ROUNDS_BUDGET_S = 30.0


def parse_backends(text: str) -> tuple[str, ...]:
    """``"tvm,onnxruntime"`` -> ``("tvm", "onnxruntime")``, or a one-line error naming the unknown ones.

    Any backend of the registry will do; a ``.py`` file is a codegen of your own, loaded now.
    """
    names = tuple(resolve_backend(n.strip()) for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in registry.choices()]
    if unknown or not names:
        near = [m for n in unknown for m in nearest(n, registry.choices())]
        raise WorkbenchError(
            f"Unknown backend(s) for bench: {', '.join(unknown) or 'none given'}",
            (f"did you mean {', '.join(near)}? " if near else "")
            + f"pass --backends as a comma-separated list of: {', '.join(registry.choices())}, or a codegen's .py file",
        )
    return tuple(dict.fromkeys(names))


def _subject(model, weights=None, image=None) -> Subject:
    """The model :func:`bench_model` times, loaded: a zoo model's name or a model reference (a
    zoo model's with ``weights`` and ``image`` unless it names its own), or a workbench holding your own model."""
    if isinstance(model, (str, dict, ModelRef)):
        ref = _ref(model)
        if not ref.model.benched:
            raise WorkbenchError(f"bench takes no {ref.kind} model", "bench demo, a zoo model, a .onnx file or --torch")
        subject = load(ref.model.with_picture(weights, image))
    else:
        byom.own_model(model)  # a one-line error for a workbench that holds no imported model
        subject = of_own(model)
    if not subject.inputs:  # the tables are laid out by the first input's shape
        raise WorkbenchError(
            f"{subject.name} takes no inputs: it computes a constant, with nothing to time",
            "bench a model with at least one input (byoc-workbench run checks this one)",
        )
    return subject


@dataclasses.dataclass(frozen=True, kw_only=True)
class BenchOptions:
    """How a bench times; :func:`bench_model` takes them as keywords (a misspelt one is a TypeError)."""

    repeat: int = 10  # timed runs of each offloaded build and anchor after one warm-up, then rounds of the builds
    tvm_repeat: int = 1  # TVM alone's first timed runs, without warm-up (tens of seconds each for the SSD)
    weights: str | None = None  # a zoo model's weights, unless its reference names its own
    image: str | None = None  # a zoo model's input picture, unless its reference names its own
    unpruned: bool = True  # also time each offloading backend's build unpruned (``<backend>_unpruned``)
    anchors: bool = True  # also time the whole-model anchors
    where: bool = False  # also profile each offloaded build's time per VM call (``where_time_goes``)
    max_seconds: float | None = None  # refuse a timed loop that its first run says would take longer


def bench_model(
    model=zoo.DEFAULT_MODEL, backends=("tvm", "onnxruntime"), progress: bool = True, **options
) -> dict[str, Any]:
    """Time ``model`` on each of ``backends`` and the anchors; see the module's docstring.

    ``model`` is a zoo model's name (``weights`` and ``image`` go with it), a
    :class:`~byoc_workbench.subjects.ModelRef` (or its dict), or a workbench holding your own model;
    ``options`` are :class:`BenchOptions`' fields.
    Returns the JSON of ``byoc-workbench bench MODEL --json``: the keys of
    :data:`LAYOUT`. ``notes`` say how each build was timed; ``targets`` hold
    the first offloading backend against :data:`SPEED_GOALS`; with ``where``,
    ``where_time_goes`` holds each offloaded build's time per VM call
    (:func:`byoc_workbench.measure.time.timing.where_time_goes`); ``warnings`` name
    outputs that are not finite (:func:`byoc_workbench.models.meaning.nonfinite_warning`).
    ``max_seconds`` refuses a timed loop that its first run says would take longer.
    """
    opts = BenchOptions(**options)
    if opts.repeat < 1 or opts.tvm_repeat < 1:
        raise WorkbenchError(
            f"--repeat and --tvm-repeat must be 1 or more, got {opts.repeat}, {opts.tvm_repeat}", "pass 10 and 1"
        )
    what = _subject(model, opts.weights, opts.image)
    result = _layout(what)
    runs = _builds(what, result, backends, opts, progress)
    _rounds(result, runs, opts)
    found = {label: _judge(what, run.outputs, run.backend) for label, run in runs.items()}
    if opts.anchors:
        _time_anchors(what, result, found, opts, progress)
    own = what.workbench.model
    expected = own.reference(own.inputs) if own else None  # None: TVM alone's
    differ = functools.partial(differ_outputs, detection=what.detection)
    _compare(result, found, expected, differ_predictions if what.loaded else differ)
    if result["outputs_match"]:  # said only where a check ran: without tvm among the backends, none does
        result["notes"].append(f"outputs checked against {result['reference']}")
    elif "tvm" in found:  # TVM alone is the reference, and nothing else ran to check against it
        result["notes"].append("outputs not checked: only tvm alone ran (add another backend to check it against)")
    else:
        result["notes"].append(f"outputs not checked: {result['reference']} did not run (add tvm to the backends)")
    result["warnings"] = [w for p in found.values() for w in getattr(p, "warnings", ())]
    return result


def bench_models(
    models, backends=("tvm", "onnxruntime"), ray_address: str | None = None, progress: bool = True, **options
) -> list:
    """Each of ``models`` (model references or their dicts, or zoo models' names) benched as
    :func:`bench_model` benches one (``options`` are its); their results, in order.

    A model that fails with a user's mistake (a file the importer refuses, a
    timed loop over ``max_seconds``) gives ``{"model", "error"}``, its one line,
    and the others go on. With ``ray_address`` (``"auto"`` or a cluster's
    address) each model is a task on a Ray cluster
    (:mod:`byoc_workbench.measure.cluster`) that holds its node's timing
    resource: a result is what a run on that node gives, its ``machine`` the
    node's, and ``machine["task"]`` says which node ran it and when.
    """
    models = [_ref(m) for m in models]
    if ray_address is None:
        return [_bench_or_error(m, backends, options | {"progress": progress}) for m in models]
    joined = cluster.connect(ray_address)
    if progress:
        print(joined, file=sys.stderr)
    names = [m.label for m in models]
    units = {
        (n if names.count(n) == 1 else f"{n} #{k + 1}"): (m, backends, options)
        for k, (n, m) in enumerate(zip(names, models))
    }
    results = []
    for name, done in zip(names, cluster.map_tasks(_bench_or_error, units, timing=True, progress=progress)):
        if done.error or "error" in done.value:
            results.append({"model": name, "error": done.error or done.value["error"]})
        else:
            results.append(done.value | {"machine": done.value["machine"] | {"task": done.where()}})
    return results


def _bench_or_error(ref: ModelRef, backends, options: dict) -> dict:
    """:func:`bench_model` of one model, or ``{"model", "error"}`` for a user's mistake."""
    try:
        return bench_model(ref, backends, **({"progress": False} | options))
    except WorkbenchError as err:
        return {"model": ref.label, "error": err.line}


def _ref(model) -> ModelRef:
    """A model :func:`bench_models` takes (a :class:`ModelRef`, its dict, or a zoo model's name) as a ModelRef."""
    if isinstance(model, ModelRef):
        return model
    return ModelRef.from_json(model if isinstance(model, dict) else {"kind": "zoo", "model": model})


def _judge(what: Subject, outputs, ran: str):
    """What is compared: a zoo model's prediction (:mod:`byoc_workbench.models.meaning`), or the outputs."""
    loaded = what.loaded
    return meaning.prediction(what.task, outputs, loaded, ran) if loaded else outputs


def _layout(what: Subject) -> dict:
    """An empty result: every key of :data:`LAYOUT`, in its order."""
    loaded, own = what.loaded, what.workbench.model
    weights = ("trained" if loaded.is_trained else "untrained") if loaded else what.mark or "as in the model"
    return {
        "model": what.name,
        "task": what.task,
        "family": what.family,
        "input_shape": list(np.shape(what.inputs[0])),
        "reference": own.reference_name if own else "tvm alone",
        "backends": {},
        "anchors": {},
        "speedup_vs_tvm": {},
        "outputs_match": {},
        "differences": {},
        "detections": {},
        "weights": weights,
        "weights_label": loaded.weights_label if loaded else (what.mark or "weights as in the model") if own else "",
        "machine": machine(),
        "notes": list(what.notes),
        "skipped": {},
        "targets": {},
        "where_time_goes": {},
        "warnings": [],
    }


def _builds(what: Subject, result: dict, backends, opts: BenchOptions, progress: bool) -> dict:
    """Each backend's builds (offloaded ones pruned, then unpruned), timed into ``result``;
    returns ``{label: Run}``. A backend that cannot run is skipped with why, and so is a build that offloads
    nothing to it: timed, it would be TVM alone credited to that backend."""
    runs: dict = {}
    for name in backends:
        builds = [(name, True)] + ([(f"{name}_unpruned", False)] if name != "tvm" and opts.unpruned else [])
        for label, prune in builds:
            try:
                staged = None if name == "tvm" else byom.offloaded(what.workbench, name, prune)
                if staged is not None and not staged[-1].generated:  # it would time TVM alone under its name
                    result["skipped"][label] = f"nothing in this build runs on {name}: it would be tvm alone again"
                    continue
                run = _run(what, staged, label, opts, progress)
            except clock.OverBudget:
                raise  # the user's bound, not this backend's problem
            except WorkbenchError as err:
                result["skipped"][label] = err.line
                break
            result["backends"][label] = timing.run_json(run)
            runs[label] = run
            if opts.where and staged is not None:
                built = timing.build(staged, mark=what.mark)
                result["where_time_goes"][label] = timing.where_time_goes(built, what.inputs, opts.repeat)
    return runs


def _rounds(result: dict, runs: dict, opts: BenchOptions) -> None:
    """The builds timed again into ``result`` in ``opts.repeat`` rounds, each once a round, and each one's
    verdict against TVM alone from them; a build whose first timing says its rounds would take over
    :data:`ROUNDS_BUDGET_S` (or ``max_seconds``, if less) keeps that timing. The notes say which were timed how."""
    budget = ROUNDS_BUDGET_S if opts.max_seconds is None else min(opts.max_seconds, ROUNDS_BUDGET_S)
    # A warm-up and the rounds each, timed apart rather than refused; TVM alone's first run, cold, errs long.
    over = [k for k, r in runs.items() if r.latency.median_s * (opts.repeat + 1) > budget]
    raced = [k for k in runs if k not in over]
    raced = raced if len(raced) > 1 else []  # a build alone has nothing to take turns with
    times = clock.round_robin({k: runs[k].call for k in raced}, opts.repeat)
    latency = {k: clock.Latency.of(t, 1) for k, t in times.items()}
    notes = [f"timed in {opts.repeat} rounds, each build once a round: {', '.join(raced)}"] if raced else []
    for label, lat in latency.items():
        result["backends"][label].update(lat.to_json())
        if "tvm" in latency and label != "tvm":
            notes.append(f"{label} against tvm: {clock.verdict('tvm', latency['tvm'], label, lat).line()}")
    for label in (k for k in runs if k not in latency):
        lat = runs[label].latency
        how = f"{lat.runs} time(s), " + (f"after {lat.warmup} warm-up" if lat.warmup else "without warm-up")
        why = f"{opts.repeat} rounds would take over {text.seconds(budget)}" if label in over else "no other build fits"
        notes.append(f"{label} timed apart, {how}, at {text.seconds(lat.median_s)} a run: {why}")
    result["notes"] += notes


def _run(what: Subject, staged: list | None, label: str, opts: BenchOptions, progress: bool) -> runner.Run:
    """One build timed: TVM alone (``staged`` None) once per ``tvm_repeat``, without warm-up, or the
    codegen stage of ``staged`` ``repeat`` times after one warm-up."""
    kw = {"mark": what.mark, "progress": progress, "max_seconds": opts.max_seconds}
    if staged is None:
        return runner.build_and_run(what.alone, what.inputs, opts.tvm_repeat, 0, label="tvm alone", **kw)
    return runner.build_and_run(staged[-1], what.inputs, opts.repeat, 1, label=label, **kw)


def _time_anchors(what: Subject, result: dict, found: dict, opts: BenchOptions, progress: bool) -> None:
    """The whole-model anchors timed into ``result``, their outputs judged into ``found``: a zoo model's
    MXNet block and ONNX export, your own model's framework; the demo has none to run it whole."""
    loaded, own = what.loaded, what.workbench.model
    if loaded:
        entries, outputs, skipped = zoo_anchors(loaded, what.inputs[0], opts.repeat, progress, opts.max_seconds)
    elif own:
        entries, outputs, skipped = own_anchors(own, opts.repeat, progress, opts.max_seconds)
    else:
        entries, outputs, skipped = {}, {}, {}
    result["anchors"].update(entries)
    result["skipped"].update(skipped)
    for label, entry in entries.items():
        found[label] = _judge(what, outputs[label], label)
        if entry.get("note"):
            result["notes"].append(f"{label}: {entry['note']}")


class Differences(NamedTuple):
    """What differs between two outputs, one line each, and for a detector how many of the reference's
    detections the other holds (:func:`byoc_workbench.measure.check.compare.found`; else None)."""

    lines: list[str]
    detections: dict | None


def differ_predictions(ref, got) -> Differences:
    """:class:`Differences` (``lines``, ``detections``): what differs between two predictions of a zoo model's task
    (:func:`byoc_workbench.measure.check.compare.differences`), and for a detector how many of
    ``ref``'s detections ``got`` holds (:func:`byoc_workbench.measure.check.compare.found`; else None)."""
    lines = compare.differences(ref, got)
    if (getattr(ref, "task", "") or "detection") != "detection":
        return Differences(lines, None)
    rows = len(np.asarray(ref["ids"])[0])
    return Differences(lines, compare.found(rows, len(compare.unmatched(ref, got))))


def differ_outputs(ref, got, detection: bool = False) -> Differences:
    """:class:`Differences` as :func:`differ_predictions`, for raw outputs against the reference's
    (:func:`byoc_workbench.measure.check.compare.check_outputs`): each output over the tolerance, or the detections."""
    check = compare.check_outputs(ref, got, detection=detection)
    found = check.get("detections")
    if check["equal"]:
        return Differences([], found)
    if detection:
        return Differences([f"detections: {compare.found_text(found)} found"], found)
    tol = check["tolerance"]
    over = [r for r in check["outputs"] if not r["max_rel"] <= tol]
    return Differences(
        [f"output {r['output']}: max relative error {r['max_rel']:.2e}, over {tol:g}" for r in over], found
    )


def _compare(result: dict, found: dict, expected=None, differ: Callable = differ_predictions) -> None:
    """Speedups over TVM alone, each build's and anchor's outputs against the reference (TVM
    alone's when ``expected`` is None), and the targets (:func:`targets`)."""
    timed = {**result["backends"], **result["anchors"]}
    ref = found.get("tvm") if expected is None else expected
    for label, entry in timed.items():
        if "tvm" in timed and label != "tvm":
            result["speedup_vs_tvm"][label] = timed["tvm"]["median_s"] / entry["median_s"]
        if ref is None or (expected is None and label == "tvm"):
            continue
        lines, detections = differ(ref, found[label])
        result["outputs_match"][label] = not lines
        result["differences"][label] = lines
        if detections is not None:
            result["detections"][label] = detections
    result["targets"] = targets(result)


def targets(result: dict) -> dict[str, Any]:
    """The first offloaded (pruned) build against :data:`SPEED_GOALS`; empty when none ran."""
    timed = {**result["backends"], **result["anchors"]}
    offloaded = next((k for k in result["backends"] if k != "tvm" and not k.endswith("_unpruned")), None)
    if offloaded is None:
        return {}
    t = result["backends"][offloaded]["median_s"]
    found = {"backend": offloaded}
    if "tvm" in timed:
        found[f"at_least_{SPEED_GOALS['vs_tvm_at_least']:g}x_faster_than_tvm"] = (
            timed["tvm"]["median_s"] / t >= SPEED_GOALS["vs_tvm_at_least"]
        )
    if "mxnet" in timed:
        found["faster_than_mxnet"] = t < timed["mxnet"]["median_s"]
    if "onnxruntime_whole_model" in timed:
        ratio = t / timed["onnxruntime_whole_model"]["median_s"]
        found["vs_onnxruntime_whole_model"] = ratio
        found[f"within_{SPEED_GOALS['vs_ort_whole_model_within']:g}x_of_onnxruntime_whole_model"] = (
            ratio <= SPEED_GOALS["vs_ort_whole_model_within"]
        )
    return found
