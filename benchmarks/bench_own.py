"""Your own models, one line each: import time, op count, subgraphs before and after pruning, and the
offloaded build's speedup over TVM alone, all from one run (quote the ratios, not the times).

    python benchmarks/bench_own.py                 # the torchvision families (needs the [pytorch] extra)
    python benchmarks/bench_own.py a.onnx b.onnx   # ONNX files (input shapes from the files)
    python benchmarks/bench_own.py --gluon         # GluonCV models exported by MXNet's ONNX exporter

TVM alone (untuned llvm) runs once, the offloaded build (ONNX Runtime for the TensorRT subgraphs) three
times after warm-up; both are checked against the reference (eager PyTorch, or ONNX Runtime on the file).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from byoc_workbench.measure.bench import bench
from byoc_workbench.session import Workbench  # noqa: E402


def line(name: str, wb) -> str:
    report = wb.report()
    result = bench.bench_model(wb, ("tvm", "onnxruntime"), repeat=3, unpruned=False, anchors=False, progress=False)
    speed = result["speedup_vs_tvm"].get("onnxruntime", float("nan"))
    ok = all(result["outputs_match"].values())
    tvm, off = (result["backends"][k]["median_s"] for k in ("tvm", "onnxruntime"))
    return (
        f"{name:28s} import {wb.model.import_s:5.1f} s  ops {wb.stage('source').op_count:5d}  "
        f"subgraphs {len(report.partitioned):2d} -> {len(report.pruned):2d}  "
        f"tvm {tvm:7.3f} s  offloaded {off:7.4f} s  "
        f"speedup {speed:6.1f}x  equal to {wb.model.reference_name}: {ok}"
    )


def torch_models():
    import torch
    import torchvision

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from test_torch_import import MODELS

    for name, (factory, side, _) in MODELS.items():
        torch.manual_seed(0)
        x = torch.randn(1, 3, side, side, generator=torch.Generator().manual_seed(0))
        yield f"{name} ({side}px)", Workbench.from_torch(factory(), (x,), name=name)
    del torchvision


def gluon_files(tmp: Path):
    from byoc_workbench.measure.bench.anchors import export_onnx
    from byoc_workbench.models import zoo

    for name in ("resnet50_v1", "ssd_512_mobilenet1.0_coco", "ssd_512_resnet50_v1_coco"):
        loaded = zoo.load_model(name, "untrained")
        yield name + ".onnx", export_onnx(loaded, loaded.spec.input_shape, tmp / f"{name}.onnx")


def main(argv) -> int:
    print(f"load average {os.getloadavg()[0]:.2f} at {time.strftime('%H:%M')}")
    with tempfile.TemporaryDirectory() as tmp:
        if argv == ["--gluon"]:
            files = gluon_files(Path(tmp))
        else:
            files = ((Path(a).name, a) for a in argv)
        if argv:
            for name, path in files:
                print(line(name, Workbench.from_onnx(path)), flush=True)
        else:
            for name, wb in torch_models():
                print(line(name, wb), flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} at {time.strftime('%H:%M')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
