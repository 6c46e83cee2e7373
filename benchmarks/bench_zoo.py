"""Bench one model per family of the zoo, in one process per model, and print the speedup table.

Usage: python benchmarks/bench_zoo.py [--models NAME,...] [--repeat N] [--out FILE.json]

Each model goes through ``byoc-workbench bench MODEL`` (:func:`byoc_workbench.bench.bench_model`)
at its own input size, with seeded weights unless trained ones are cached: TVM alone
(llvm, untuned, timed once), the offloaded build through ONNX Runtime pruned and
unpruned, and MXNet hybridized. The table gives each one's median and its speedup over
TVM alone, from the same run; quote the ratios, not the times (this machine's speed
drifts about 2x within an hour). Prints the table and writes every model's JSON to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# One per family, the cheaper where a family has several.
MODELS = (
    "ssd_512_resnet50_v1_coco",
    "ssd_300_vgg16_atrous_voc",
    "ssd_512_mobilenet1.0_voc",
    "yolo3_mobilenet1.0_voc",
    "center_net_resnet18_v1b_voc",
    "faster_rcnn_resnet50_v1b_voc",
    "fcn_resnet50_ade",
    "deeplab_resnet50_ade",
    "simple_pose_resnet18_v1b",
    "resnet50_v1",
    "mobilenetv3_small",
)


def row(r: dict) -> str:
    b, a, s = r["backends"], r["anchors"], r["speedup_vs_tvm"]

    def cell(group, key):
        e = group.get(key)
        return f"{e['median_s']:.3g} s" + (f" ({s[key]:.0f}x)" if key in s else "") if e else "—"

    same = "yes" if all(r["outputs_match_tvm"].get(k, True) for k in ("onnxruntime", "onnxruntime_unpruned")) else "no"
    shape = "x".join(map(str, r["input_shape"][2:]))
    return (
        f"| {r['model']} | {r['family']} | {shape} | {cell(b, 'tvm')} | {cell(b, 'onnxruntime')} | "
        f"{cell(b, 'onnxruntime_unpruned')} | {cell(a, 'mxnet')} | {same} |"
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", help="comma-separated zoo names (default: one per family)")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--out", default="build/bench-zoo.json")
    args = p.parse_args(argv)
    results = []
    for name in args.models.split(",") if args.models else MODELS:
        cmd = [sys.executable, "-m", "byoc_workbench", "bench", name, "--json", "--repeat", str(args.repeat)]
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        if done.returncode:
            print(f"{name}: {done.stderr.strip().splitlines()[-1]}", file=sys.stderr)
            continue
        results.append(json.loads(done.stdout))
        print(f"done {name}", file=sys.stderr)
    if not results:
        return 1
    machine = results[0]["machine"]
    load = os.getloadavg()[0]
    label = results[0]["weights_label"]
    print(f"{machine['cpu']}, {machine['cores']} cores, load average {load:.1f} at the end; {label}")
    print("| model | family | input | TVM alone | ONNX Runtime, pruned | unpruned | MXNet | same outputs |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        print(row(r))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
