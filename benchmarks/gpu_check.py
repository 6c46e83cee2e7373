"""On an NVIDIA GPU: TVM alone on CUDA against each backend that runs there, per model, with where the time went.

For each model it builds TVM alone for the GPU (what TVM has no GPU kernel for runs on the CPU:
:mod:`byoc_workbench.core.devices`) and times every VM call with the GPU waited for
(:func:`byoc_workbench.measure.time.timing.profile`), so the JSON splits each run into GPU kernels, CPU kernels and the
copies between them. Then each offloading backend that imports here (TensorRT, ONNX Runtime, on the CPU where
onnxruntime-gpu is missing), pruned and unpruned, timed and split the same way, its outputs checked against TVM
alone's (detections as a set).

Models (``--models``, comma-separated):

- a zoo name (default ``ssd_512_resnet50_v1_coco``): imported from the shipped zoo
  (:mod:`byoc_workbench.models.shipped`: no MXNet needed, the seeded weights regenerated from the seed, checked by
  their SHA-256);
- ``resnet50``: torchvision's, through TVM's PyTorch frontend, against PyTorch eager on the same GPU;
- ``demo``: Part 1's loop graph.

A missing piece (no torch, no TensorRT, no OpenCV or matplotlib for a zoo model's picture) is one line in ``missing``
with its fix, and the rest still runs. A run that measured nothing (numpy or another package every build imports
missing; no TVM; TVM crashes the child process that loads it first, as a broken CUDA driver makes it do, on the CPU
too; TVM sees no CUDA device, as when the CUDA runtime does not load; every build failed) exits 1 with one line
``error: measured nothing, ...`` (:mod:`gpu_check_probe`): an exit 0 without numbers would read as a pass.
``--out`` (``~`` expanded, as the workbench's own options), ``--models``, ``--runs``, ``--warmup`` and ``--target``
are checked before anything is built. ``--out`` gets the JSON whole or not at all (through a link, into
what it names), with its record, after each build, ``"complete": false`` with what it has ``not_reached`` until the
end. A failed write (a full disk), a run that measured nothing, and a run cut short where a complete run's JSON is,
leave the JSON and its record there as they were. It replaces only a JSON an earlier run wrote, as the
``.byoc-workbench-wrote`` beside it proves (the workbench's own record), never an immutable or append-only one, nor
one in an append-only folder. Ctrl-C or SIGTERM stops it in one line, exit 130 or 143; once its results are in place
and said, a signal changes nothing. Until it knows TVM is there it imports the standard library, numpy and tqdm alone.

On a bare GPU machine (Python 3.12, numpy 2, PyTorch, no MXNet, no network), ``python tools/gpu_pack.py`` packs what
it lacks, and prints the one call that unpacks and runs this (``tools/gpu_run.sh``). ``--target llvm`` runs the same
measurements on the CPU, to try the script anywhere.
"""

from __future__ import annotations

import json
import os
import platform
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its sibling, however it is run (runpy, a spec)
from gpu_check_args import arguments, check_out, target_kind, target_words, whole_json, write_out
from gpu_check_probe import ZOO_NEEDS, brief, gpu_info, lacks, missing_line, probe, tvm_here, versions

ROOT = Path(__file__).resolve().parents[1]

SIGNALS = (signal.SIGINT, signal.SIGTERM)
STOPPED = 0  # the signal that stops the run, once one came (0 until then)
written: list = []  # where this run put its JSON, once it did (the one line of a stopped run names it)
kept: list = []  # that --out keeps an earlier run's JSON until this run writes its own (said if none does)


def _first_line(err: BaseException) -> str:
    from byoc_workbench.core.errors import first_line

    return f"{type(err).__name__}: {first_line(err)}"


# --- the models ------------------------------------------------------------------------


class Model:
    """A model to measure: its module, inputs, how to compare two runs' outputs, and an eager anchor."""

    def __init__(self, name, mod, inputs, task, mark, source, anchor=None):
        self.name, self.mod, self.inputs, self.task, self.mark, self.source = name, mod, inputs, task, mark, source
        self.anchor = anchor  # (label, run(inputs) -> outputs, sync) or None

    def same(self, ref, got) -> dict:
        from byoc_workbench.measure.check import compare

        return compare.check_outputs(ref, got, detection=self.task == "detection")


def load_model(name: str, report: dict) -> Model | None:
    """The model ``name``, or None with a line in ``report["missing"]`` saying why."""
    if name == "demo":
        from byoc_workbench.models import demo

        return Model("demo", demo.demo_module(), demo.demo_inputs(), "demo", "", "Part 1's loop graph")
    if name == "resnet50":
        return _resnet50(report)
    if lacks(report, name, ZOO_NEEDS):
        return None
    from byoc_workbench.models import images, zoo

    loaded = zoo.load_model(name, "untrained")
    x, _ = images.model_input(None, loaded.input_shape)
    mod = zoo.import_model(name, loaded=loaded).mod
    return Model(name, mod, [x], loaded.spec.task, loaded.weights_label, "imported here from the shipped zoo")


def _resnet50(report: dict) -> Model | None:
    if lacks(report, "resnet50", ("torch", "torchvision")):
        return None
    import numpy as np
    import torch
    import torchvision

    from byoc_workbench.frontends import torch_import

    torch.manual_seed(0)
    net = torchvision.models.resnet50(weights=None).eval()
    x = torch.from_numpy(np.random.RandomState(0).uniform(-1, 1, (1, 3, 224, 224)).astype("float32"))
    own = torch_import.import_torch(net, x, name="resnet50", mark="seeded weights (torch.manual_seed(0))")
    anchor = None
    if torch.cuda.is_available():
        gpu_net = net.to("cuda")

        def eager(inputs):
            with torch.no_grad():
                return [gpu_net(torch.from_numpy(inputs[0]).to("cuda")).cpu().numpy()]

        anchor = (f"pytorch eager ({torch.cuda.get_device_name(0)})", eager, torch.cuda.synchronize)
    return Model(
        "resnet50", own.mod, own.inputs, "classification", own.mark, "torchvision, through torch.export", anchor
    )


# --- measuring ---------------------------------------------------------------------------


def measure_build(found_stages, model: Model, target, runs: int, warmup: int) -> tuple:
    """``(record, outputs)`` of one build: its end-to-end time, where the time went, and what ran where."""
    from byoc_workbench.measure.time import timing

    t0 = time.perf_counter()
    built = timing.build(found_stages, target, mark=model.mark)
    build_s = time.perf_counter() - t0
    outputs: list = []
    p = timing.profile(built, model.inputs, runs=runs, warmup=warmup, outputs=outputs)
    placement = built.placement
    record = {
        "median_s": p.end_to_end_s,
        "runs": p.runs,
        "build_s": build_s,
        "by_device_s": p.by_device,
        "by_kind_s": p.by_kind,
        "entries_over_end_to_end": p.paired,
        "subgraphs": p.backends,
    }
    if placement:
        record["on_cpu"] = sorted(op.removeprefix("relax.") for op in placement.cpu_only)
        record["copies"] = len(placement.crossings)
        record["copied_mb_per_run"] = placement.copied_bytes / 1e6
    return record, outputs


def measure_model(model: Model, target, runs: int, warmup: int, backends: list, report: dict, saved) -> None:
    """TVM alone, then each offloaded build (:func:`offloaded_builds`), into ``report["models"]``; one line in
    ``report["errors"]`` per failure; ``saved()`` after each build, so a run cut short keeps what it measured."""
    from byoc_workbench import stages
    from byoc_workbench.core import targets

    out: dict = {"weights": model.mark, "source": model.source, "builds": {}, "speedup_vs_tvm": {}, "equal": {}}
    report["models"][model.name] = out
    errors = report["errors"]
    outputs = {}
    base = f"tvm alone ({target_words(target)})"
    builds = [
        (base, lambda: stages.run_stages(model.mod, (), backend="tvm")),
        *offloaded_builds(model, backends, targets.is_gpu(target)),
    ]
    anchor = [model.anchor[0]] if model.anchor else []  # what a run cut short has still to do, in order
    steps = [label for label, _ in builds] + anchor + ["speedup_vs_tvm and equal"]
    rest = report["not_reached"]  # the models after this one
    for k, (label, found) in enumerate(builds, 1):
        t0 = time.perf_counter()
        try:
            out["builds"][label], outputs[label] = measure_build(found(), model, target, runs, warmup)
        except Exception as err:  # noqa: BLE001 - one line, then the other builds still run
            errors[f"{model.name}: {label}"] = _first_line(err)
        print(f"  {label}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
        report["not_reached"] = [f"{model.name}: {step}" for step in steps[k:]] + rest
        saved()
    if model.anchor is not None:
        label, run, sync = model.anchor
        out["builds"][label], outputs[label] = _time_anchor(run, sync, model.inputs, runs, warmup)
    if base in outputs:
        t = out["builds"][base]["median_s"]
        for label, got in outputs.items():
            if label != base:
                out["speedup_vs_tvm"][label] = t / out["builds"][label]["median_s"]
                out["equal"][label] = model.same(outputs[base], got)
    report["not_reached"] = rest
    saved()


def offloaded_builds(model: Model, backends: list, gpu: bool) -> list:
    """``(label, stages())`` per offloaded build: each backend with upstream's TensorRT rules (the seed's), pruned
    and unpruned; torch with its NMS rules too (the backbone and the NMS on torch, the rest on TVM), and with its
    own target (every op it runs: the whole model); on a GPU, the torch builds again with no CUDA graph."""
    from byoc_workbench import stages
    from byoc_workbench.backends import registry
    from byoc_workbench.core import transforms
    from byoc_workbench.flow import rules

    prepared = transforms.prepare(model.mod) if model.task != "demo" else model.mod
    seed_rules = rules.get_target("tensorrt" if model.task != "demo" else "byoc-target").rules
    torch_rules = registry.DEFAULT.targets.get("torch").rules if "torch" in backends else ()
    nms = tuple(r for r in torch_rules if r.name in ("vision_get_valid_counts", "vision_non_max_suppression"))
    out = []
    for backend in backends:
        with_rules = (*seed_rules, *nms) if backend == "torch" else seed_rules
        what = " (its backbone and NMS)" if backend == "torch" and model.task == "detection" else ""
        for prune in (True, False):
            label = f"{backend}{what}" + ("" if prune else ", unpruned")
            keep = stages.no_mac() if prune else stages.keep_all
            out.append((label, lambda r=with_rules, k=keep, b=backend: stages.run_stages(prepared, r, k, backend=b)))
    if "torch" in backends:

        def on_torch(rule_set, keep, **options):
            return lambda: stages.run_stages(prepared, rule_set, keep, backend="torch", options=options)

        whole = "torch (its own target: every op it runs)"
        out.append((whole, on_torch(torch_rules, stages.keep_all)))
    if "torch" in backends and gpu:  # what the CUDA graphs give: the same builds with every subgraph eager
        what = " (its backbone and NMS)" if model.task == "detection" else ""
        out.append((f"torch{what}, unpruned, all eager", on_torch((*seed_rules, *nms), stages.keep_all, graphs=False)))
        out.append((f"{whole}, all eager", on_torch(torch_rules, stages.keep_all, graphs=False)))
    return out


def _time_anchor(run, sync, inputs, runs: int, warmup: int) -> tuple:
    import statistics

    got = None
    for _ in range(warmup):
        got = run(inputs)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        got = run(inputs)
        sync()
        times.append(time.perf_counter() - t0)
    return {"median_s": statistics.median(times), "runs": runs}, got


def backends_here(report: dict, target) -> list:
    """The offloading backends that can run here, each missing one a line in ``report["missing"]``."""
    from byoc_workbench.backends import registry
    from byoc_workbench.core import targets

    out = []
    for backend in ("tensorrt", "torch", "onnxruntime"):
        why = registry.missing(backend)
        if why:
            report["missing"].append(missing_line(backend, why.cause, why.fix))
        else:
            out.append(backend)
    if "onnxruntime" in out and targets.is_gpu(target):
        ort = probe("onnxruntime")[0]
        if ort is not None and "CUDAExecutionProvider" not in ort.get_available_providers():
            why = "no CUDAExecutionProvider (a CPU-only onnxruntime): its subgraphs run on the CPU"
            report["missing"].append(missing_line("onnxruntime", why))
    return out


def check_target(target: str | dict) -> None:
    """Refuse, in one line, a ``--target`` TVM cannot build for or this machine cannot run (another CPU's triple, an
    arch the CUDA compiler does not take), before anything is built; TVM is there, and a GPU for ``cuda``."""
    from byoc_workbench.core import targets
    from byoc_workbench.core.errors import WorkbenchError
    from byoc_workbench.measure.compiler import cuda, execute

    try:
        if targets.is_gpu(target):
            cuda.check_arch(targets.resolve(target), cuda.find())
        execute.check_runs_here(target)
    except WorkbenchError as err:
        raise SystemExit(missing_line("error", f"--target {target}: {err.cause.rstrip('.')}", err.fix)) from None


def measure_all(args, report: dict, saved) -> None:
    """Each model of ``args.models`` on ``args.target``, into ``report``; TVM is there (:func:`tvm_here`)."""
    import tvm

    from byoc_workbench.measure.compiler import cuda

    if target_kind(args.target) == "cuda":
        report["gpu"]["tvm_device"] = tvm.cuda(0).device_name
        try:
            report["gpu"]["cuda_compiler"] = str(cuda.find())
        except Exception as err:  # noqa: BLE001
            report["missing"].append(missing_line("nvcc", _first_line(err), cuda.FIX))
    backends = backends_here(report, args.target)
    for k, name in enumerate(args.models, 1):
        report["not_reached"] = args.models[k:]
        try:
            model = load_model(name, report)
        except Exception as err:  # noqa: BLE001
            report["errors"][f"{name}: load"] = _first_line(err)
            continue
        if model is not None:
            print(f"measuring {model.name} ({model.source})...", file=sys.stderr, flush=True)
            measure_model(model, args.target, args.runs, args.warmup, backends, report, saved)


def measured(report: dict) -> bool:
    """Whether TVM alone, against which every other build is timed and checked, was measured for any model."""
    return any(label.startswith("tvm alone") for m in report["models"].values() for label in m["builds"])


def nothing_measured(report: dict, stop: str | None) -> str | None:
    """The one line of a run that measured nothing, else None: an exit 0 without numbers would read as a pass.
    ``stop`` is the line of ``report["missing"]`` that stopped it before any model, if one did; :data:`kept` says
    that ``--out`` keeps an earlier run's JSON, this run's unwritten."""
    if stop is not None:
        why, _, fix = stop.rpartition(". Fix: ")
    elif measured(report):
        return None
    else:
        failed = [f"{key}: {why}" for key, why in report["errors"].items()]
        lacking = sorted({line.split(":")[0] for line in report["missing"]})
        why = failed[0] if failed else "no model loaded" + (f" (missing: {', '.join(lacking)})" if lacking else "")
        why = brief(why)
        fix = "see missing and errors in the JSON " + ("of another --out." if kept else "(--out writes it).")
    return f"error: measured nothing, {why}{''.join(f'; {said}' for said in kept)}. Fix: {fix}"


def _stop(signum, frame) -> None:
    """Ctrl-C and SIGTERM alike: a KeyboardInterrupt, which :func:`main` turns into one line; later signals are
    ignored, so that none interrupts that line. Not inside an import: torch's C++ aborts the process on an
    exception raised while it loads, so the interrupt waits (SIGALRM, every 50 ms) until the import is done."""
    global STOPPED
    if not STOPPED:
        STOPPED = signum
        for sig in SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            signal.setitimer(signal.ITIMER_REAL, 0.05)
            return
        frame = frame.f_back
    raise KeyboardInterrupt


def main(argv=None) -> int:
    """The check (:func:`check`); stopped by Ctrl-C or SIGTERM, one line and the shell's status for it (130,
    143), with ``--out`` holding a whole JSON or what it held before."""
    for sig in (*SIGNALS, signal.SIGALRM):
        signal.signal(sig, _stop)
    try:
        status = check(argv)
        # Its results are in place and said: a signal while the interpreter tears TVM and torch down must not turn
        # them into 143 (Python puts the default handlers back as it ends: no line) or a traceback of atexit's.
        for sig in (*SIGNALS, signal.SIGALRM):  # an interrupt that waited for an import is said below
            signal.signal(sig, signal.SIG_IGN)
        if not STOPPED:
            return status
    except KeyboardInterrupt:
        pass
    signal.setitimer(signal.ITIMER_REAL, 0)  # an interrupt that waited for an import: said here
    word = "terminated" if STOPPED == signal.SIGTERM else "interrupted"
    said = f"{written[0]} holds what it measured before that" if written else (kept or ["nothing was written"])[0]
    print(f"{word}; {said}.", file=sys.stderr)
    return 128 + (STOPPED or signal.SIGINT)


def check(argv=None) -> int:
    """Parse ``argv``, measure, write ``--out``: 0 with the JSON printed, 1 with one line."""
    args = arguments(argv, __doc__.splitlines()[0])
    check_out(args.out)
    out = Path(args.out).resolve() if args.out else None  # through a link, into what it names: the link stays
    earlier = out is not None and out.exists()  # an earlier run's JSON (check_out): replaced once this one measures,
    whole = earlier and whole_json(out)  # and, where that run went to its end, only once this one does too
    kept[:] = [f"--out {args.out} keeps the earlier run's JSON, this run's is not written"] if earlier else []
    report: dict = {
        "complete": False,  # until the run goes to its end: a run cut short keeps what it measured, said as such
        "not_reached": list(args.models),  # what it had still to measure, models and builds: empty at its end
        "machine": {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count()},
        "gpu": gpu_info(),
        "target": args.target,
        "versions": {},
        "missing": [],
        "errors": {},
        "models": {},
    }
    t0 = time.perf_counter()

    def saved(end: bool = False) -> str:
        if STOPPED:  # a signal that TVM's FFI turned into an error, and a build's except took for a failure
            raise KeyboardInterrupt
        report["wall_s"] = time.perf_counter() - t0
        if end and measured(report):  # a run that measured nothing is never whole: a later one replaces it
            report.update(complete=True, not_reached=[])
        text = json.dumps(report, indent=2, default=str)
        if out and (not earlier or measured(report)) and (end or not whole):  # never a partial JSON over a whole one
            write_out(out, text, written, earlier)
        return text

    stop = tvm_here(target_kind(args.target), report)
    report["versions"] = versions(stop is None)
    if stop is None:
        sys.path.insert(0, str(ROOT))
        check_target(args.target)
        measure_all(args, report, saved)
    text = saved(end=True)
    failed = nothing_measured(report, stop)
    if failed:
        print(failed, file=sys.stderr)
        return 1
    print(text)
    for line in report["missing"]:
        print(f"missing: {line}", file=sys.stderr)  # one write: a signal's line never lands inside it
    return 0


if __name__ == "__main__":
    sys.exit(main())
