"""On an NVIDIA GPU: TVM CUDA alone against the offloaded build, with every backend that can run there. JSON out.

What it measures, where each piece exists:

- ``tvm_cuda``: the model built by TVM alone for ``cuda`` (the seed's baseline,
  about 50 ms for SSD-ResNet50 on a T4);
- ``tensorrt``: the SSD partitioned with upstream's TensorRT rules, pruned,
  its subgraph built into a TensorRT engine (cached on disk), TVM CUDA for the rest;
- ``onnxruntime``: the same with ONNX Runtime's CUDA provider (onnxruntime-gpu);
- each checked against TVM CUDA's output (detections as a set for the SSD).

The model is the SSD (``ssd_512_resnet50_v1_coco``, seeded weights unless
cached) where mxnet and gluoncv import, else Part 1's demo loop, which needs
neither (the JSON says which, and why).

Nothing here is required: a missing piece (no GPU, no TVM, no TensorRT, no
onnxruntime-gpu, no mxnet) is one line in ``missing`` with its fix, the rest
still runs, and the script exits 0. It imports only the standard library until
it knows TVM is there, so it also runs on a machine with torch/cupy and no TVM,
where it reports the GPU and what is missing.

Usage::

    python benchmarks/gpu_check.py [--model auto|ssd|demo] [--repeat 20] [--fp16] [--out FILE.json]

Through the device tool (a session lent a GPU machine): the machine gets a copy
of the working tree and runs one command from the repository root; ignored
paths such as ``.venv`` travel only when named in ``carry`` (64 MiB in all, too
little for TVM's 100 MB wheel), so use the machine's own Python::

    run(command="python3 benchmarks/gpu_check.py --out $OUT/gpu_check.json", timeout_s=420)

and read ``gpu_check.json`` from ``files_at``. A cold TensorRT engine build
takes tens of seconds; TVM's CUDA build of the SSD about a minute.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FIXES = {
    "tvm": "pip install apache-tvm==0.27.0.post1 (Python 3.10+)",
    "mxnet": "pip install mxnet==1.9.1 gluoncv numpy==1.23.5 on Python 3.11 (the SSD; the demo runs without)",
    "gluoncv": "pip install gluoncv (with mxnet, for the SSD)",
    "onnx": "pip install onnx (the ONNX backends translate subgraphs with it)",
    "onnxruntime": "pip install onnxruntime-gpu for its CUDA provider",
    "tensorrt": "pip install .[tensorrt] (TensorRT 10 or later) on this GPU machine",
    "torch": "only reported: torch names the GPU when nvidia-smi is absent",
    "cupy": "only reported",
}


def _line(what: str, why: str, fix: str | None = None) -> str:
    why = " ".join(str(why).split())[:300]
    return f"{what}: {why}. Fix: {fix or FIXES.get(what, 'see the README')}."


def probe(name: str) -> tuple:
    """``(module or None, version or None, why it is missing or None)``, never raising."""
    try:
        mod = importlib.import_module(name)
    except Exception as err:  # noqa: BLE001 - a broken install is reported, not raised
        return None, None, f"{type(err).__name__}: {err}"
    return mod, getattr(mod, "__version__", "?"), None


def gpu_info() -> dict:
    """The GPU as nvidia-smi sees it, else as torch sees it, else why neither could tell."""
    info: dict = {}
    smi = shutil.which("nvidia-smi")
    if smi:
        query = "--query-gpu=name,driver_version,memory.total,compute_cap"
        try:
            out = subprocess.run([smi, query, "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
            info["nvidia_smi"] = out.stdout.strip().splitlines()
        except (OSError, subprocess.SubprocessError) as err:
            info["nvidia_smi_error"] = str(err)
    torch, version, _ = probe("torch")
    if torch is not None:
        info["torch"] = version
        try:
            if torch.cuda.is_available():
                info["torch_device"] = torch.cuda.get_device_name(0)
                info["torch_cuda"] = torch.version.cuda
        except Exception as err:  # noqa: BLE001
            info["torch_error"] = str(err)
    cupy, version, _ = probe("cupy")
    if cupy is not None:
        info["cupy"] = version
    return info


def pieces(report: dict) -> dict:
    """Which optional pieces import here; each missing one adds a line to ``report["missing"]``."""
    found = {}
    for name in ("tvm", "onnx", "onnxruntime", "tensorrt", "mxnet", "gluoncv"):
        mod, version, why = probe(name)
        found[name] = mod
        report["versions"][name] = version
        if why:
            report["missing"].append(_line(name, why))
    ort = found["onnxruntime"]
    if ort is not None:
        report["onnxruntime_providers"] = ort.get_available_providers()
        if "CUDAExecutionProvider" not in report["onnxruntime_providers"]:
            report["missing"].append(_line("onnxruntime", "no CUDAExecutionProvider (CPU-only onnxruntime)"))
    return found


def _model(found: dict, want: str, weights):
    """``(label, module, prepared module, inputs, same)``: the SSD where mxnet imports, unless the demo
    is asked for; else the demo. ``same(ref, got)`` compares two outputs."""
    import numpy as np

    if want != "demo" and found["mxnet"] is not None and found["gluoncv"] is not None:
        from byoc_workbench import transforms, workflow
        from byoc_workbench.measure import compare as matching
        from byoc_workbench.models import zoo

        loaded = zoo.load_model(weights=weights)
        x, _ = workflow.model_input(None, loaded.input_shape)
        imported = zoo.import_model(input_shape=x.shape, loaded=loaded)
        label = f"{zoo.DEFAULT_MODEL} ({loaded.weights_label})"
        return label, imported.mod, transforms.prepare(imported.mod), [x], matching.same_detections
    if want == "ssd":
        raise RuntimeError("the SSD needs mxnet and gluoncv (see missing)")
    from byoc_workbench.models import demo

    mod = demo.demo_module()

    def close(ref, got):
        return all(np.allclose(a, b, rtol=1e-2, atol=1e-2) for a, b in zip(_flat(ref), _flat(got)))

    why = "asked for" if want == "demo" else "mxnet or gluoncv missing: no SSD"
    return f"Part 1 demo loop ({why})", mod, mod, demo.demo_inputs(), close


def _flat(x) -> list:
    return [y for v in x for y in _flat(v)] if isinstance(x, (list, tuple)) else [x]


def _first_line(err: BaseException) -> str:
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip() and not ln.startswith(("Traceback", "  File"))]
    return f"{type(err).__name__}: {(lines or [''])[0][:300]}"


def measure(found: dict, report: dict, args) -> None:
    """TVM CUDA alone, then each backend that can run here, offloaded; results into ``report``."""
    sys.path.insert(0, str(ROOT))
    from byoc_workbench import stages
    from byoc_workbench.errors import WorkbenchError
    from byoc_workbench.flow import rules
    from byoc_workbench.measure import runner
    from byoc_workbench.measure.timing import run_json

    name, mod, prepared, inputs, same = _model(found, args.model, args.weights)
    report["model"] = name
    target_rules = rules.get_target("tensorrt" if prepared is not mod else "byoc-target").rules
    results = report["results"]
    outputs = {}
    base_label = f"tvm_{args.target}"
    try:
        base = runner.build_and_run(mod, inputs, repeat=args.repeat, warmup=3, target=args.target, label=base_label)
        results[base_label] = run_json(base)
        outputs[base_label] = base.outputs
    except Exception as err:  # noqa: BLE001 - one line, then the backends still run
        report["errors"][base_label] = _first_line(err)
    backends = []
    if found["tensorrt"] is not None:
        backends.append("tensorrt")
    providers = report.get("onnxruntime_providers", ())
    if "CUDAExecutionProvider" in providers or (args.target != "cuda" and providers):
        backends.append("onnxruntime")
    options = {"fp16": True} if args.fp16 else {}
    for backend in backends:
        for prune in (True, False):
            label = backend + ("" if prune else "_unpruned")
            try:
                found_stages = stages.run_stages(
                    prepared,
                    target_rules,
                    stages.no_mac() if prune else stages.keep_all,
                    backend=backend,
                    options=options,
                )
                run = runner.build_and_run(found_stages[-1], inputs, args.repeat, 3, target=args.target, label=label)
            except WorkbenchError as err:
                report["errors"][label] = err.line
                break
            except Exception as err:  # noqa: BLE001
                report["errors"][label] = _first_line(err)
                break
            results[label] = run_json(run)
            results[label]["structure"] = run.structure.lines()
            outputs[label] = run.outputs
    if not backends:
        report["errors"]["offload"] = "no backend can offload on this GPU: neither tensorrt nor onnxruntime-gpu"
    if base_label in outputs:
        t = results[base_label]["median_s"]
        for label in outputs:
            if label != base_label:
                report["speedup_vs_tvm"][label] = t / results[label]["median_s"]
                report["outputs_match_tvm"][label] = bool(same(outputs[base_label], outputs[label]))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("auto", "ssd", "demo"), default="auto")
    parser.add_argument("--weights", help="trained, untrained or a .params file (default: cache, else untrained)")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--fp16", action="store_true", help="offloaded subgraphs in float16 (written in the graph)")
    parser.add_argument("--out", help="also write the JSON to this file")
    parser.add_argument(
        "--target", default="cuda", help="TVM's target (llvm: the same flow on the CPU, to try the script anywhere)"
    )
    args = parser.parse_args(argv)
    report: dict = {
        "machine": {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count()},
        "gpu": gpu_info(),
        "versions": {},
        "missing": [],
        "errors": {},
        "results": {},
        "target": args.target,
        "speedup_vs_tvm": {},
        "outputs_match_tvm": {},
    }
    found = pieces(report)
    tvm = found["tvm"]
    if tvm is None:
        report["errors"]["measure"] = "nothing measured: TVM is not importable here (see missing)"
    elif args.target == "cuda" and not tvm.cuda(0).exist:
        why = "TVM sees no CUDA device (no GPU, no driver, or a CPU-only build)"
        report["missing"].append(
            _line("tvm", why, "run on an NVIDIA GPU machine with its driver, or pass --target llvm")
        )
        report["errors"]["measure"] = "nothing measured: no CUDA device for TVM"
    else:
        t0 = time.perf_counter()
        try:
            measure(found, report, args)
        except Exception as err:  # noqa: BLE001 - the report still comes out
            report["errors"]["measure"] = _first_line(err)
        report["wall_s"] = time.perf_counter() - t0
    text = json.dumps(report, indent=2, default=str)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    for line in report["missing"]:
        print("missing:", line, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
