"""Bench one model per family of the zoo, in one process per model, and print the speedup table.

Usage: python benchmarks/bench_zoo.py [--models NAME,...] [--repeat N] [--out FILE.json]
       python benchmarks/bench_zoo.py --write-only   # docs/zoo.md's table from the committed JSON

Each model goes through ``byoc-workbench bench MODEL`` (:func:`byoc_workbench.measure.bench.bench.bench_model`)
at its own input size, with seeded weights unless trained ones are cached: TVM alone
(llvm, untuned, timed once), the offloaded build through ONNX Runtime pruned and
unpruned, and MXNet hybridized. The table gives each one's median and its speedup over
TVM alone, from the same run; quote the ratios, not the times (this machine's speed
drifts about 2x within an hour). Prints the table, writes every model's JSON, the machine
and its load average to --out (``benchmarks/results/zoo.json``, committed) and the table
into ``docs/zoo.md`` between its markers; ``tests/models/test_zoo_support.py`` checks that the two agree.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "zoo.json"
DOC = ROOT / "docs" / "zoo.md"
START, END = "<!-- zoo-bench:start -->", "<!-- zoo-bench:end -->"
# One per family, the cheaper where a family has several.
MODELS = (  # the quickest first
    "mobilenetv3_small",
    "resnet50_v1",
    "simple_pose_resnet18_v1b",
    "ssd_300_vgg16_atrous_voc",
    "ssd_512_mobilenet1.0_voc",
    "yolo3_mobilenet1.0_voc",
    "center_net_resnet18_v1b_voc",
    "ssd_512_resnet50_v1_coco",
    "fcn_resnet50_ade",
    "deeplab_resnet50_ade",
    "faster_rcnn_resnet50_v1b_voc",
)


def row(r: dict) -> str:
    b, a, s = r["backends"], r["anchors"], r["speedup_vs_tvm"]

    def cell(group, key):
        e = group.get(key)
        return f"{e['median_s']:.3g} s" + (f" ({s[key]:.0f}x)" if key in s else "") if e else "—"

    same = "yes" if all(r["outputs_match"].get(k, True) for k in ("onnxruntime", "onnxruntime_unpruned")) else "no"
    shape = "x".join(map(str, r["input_shape"][2:]))
    return (
        f"| {r['model']} | {r['family']} | {shape} | {cell(b, 'tvm')} | {cell(b, 'onnxruntime')} | "
        f"{cell(b, 'onnxruntime_unpruned')} | {cell(a, 'mxnet')} | {same} | {r['machine'].get('load_average', '?')} |"
    )


def table(bench: dict) -> str:
    """The Markdown table of ``bench`` (the JSON this script writes), with the machine it ran on."""
    results = bench["models"]
    machine = results[0]["machine"]
    labels = sorted({r["weights_label"] for r in results})
    lines = [
        f"Measured on {machine['cpu']}, {machine['cores']} cores, one process per model, with other work beside "
        f"it (the load average at each model's start is in its row); {', '.join(labels)}; medians of "
        f"{bench['repeat']} runs (TVM alone: one), speedups over TVM alone from the same run.",
        "",
        "| model | family | input | TVM alone | ONNX Runtime, pruned | unpruned | MXNet | same outputs | load |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    return "\n".join(lines + [row(r) for r in results])


def write_doc(bench: dict) -> None:
    """``docs/zoo.md`` with its table regenerated from ``bench``."""
    text = DOC.read_text()
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(f"{head}{START}\n{table(bench)}\n{END}{tail}")


def _merged(earlier: list, fresh: list) -> list:
    """``earlier``'s records with ``fresh``'s in their place (or appended), in :data:`MODELS`'s order."""
    by = {r["model"]: r for r in earlier} | {r["model"]: r for r in fresh}
    rank = {name: i for i, name in enumerate(MODELS)}
    return sorted(by.values(), key=lambda r: rank.get(r["model"], len(rank)))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", help="comma-separated zoo names (default: one per family)")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--out", default=str(RESULTS))
    p.add_argument("--write-only", action="store_true", help="only regenerate docs/zoo.md's table from --out")
    args = p.parse_args(argv)
    if args.write_only:
        write_doc(json.loads(Path(args.out).read_text()))
        return 0
    results = []
    start = os.getloadavg()[0]
    out = Path(args.out)
    earlier = json.loads(out.read_text())["models"] if args.models and out.is_file() else []
    for name in args.models.split(",") if args.models else MODELS:
        cmd = [sys.executable, "-m", "byoc_workbench", "bench", name, "--json", "--repeat", str(args.repeat)]
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        if done.returncode:
            print(f"{name}: {done.stderr.strip().splitlines()[-1]}", file=sys.stderr)
            continue
        results.append(json.loads(done.stdout))
        print(f"done {name} (load average {os.getloadavg()[0]:.1f})", file=sys.stderr)
        # Written after each model, so that an interrupted walk keeps what it measured; with --models,
        # the other models' records of an earlier run are kept.
        bench = {"repeat": args.repeat, "load_average": start, "load_average_end": os.getloadavg()[0]}
        bench["models"] = _merged(earlier, results)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(bench, indent=1) + "\n")
        if Path(args.out).resolve() == RESULTS:
            write_doc(bench)
    if not results:
        return 1
    print(table(bench))
    return 0


if __name__ == "__main__":
    sys.exit(main())
