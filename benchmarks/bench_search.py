"""The search's bar, measured in one go: a fresh ``search ssd``, its repeat, and one ``bench ssd``. Ratios out.

Run it on an idle machine (the numbers are only worth that)::

    .venv/bin/python benchmarks/bench_search.py [--model ssd_512_resnet50_v1_coco] [--out search_bench.json]

It runs, each in its own process, as a user would:

1. ``byoc-workbench search ssd --json`` with an empty cache (a temporary
   ``BYOC_WORKBENCH_CACHE``): the whole search, TVM alone run once;
2. the same again, on that cache: the repeat, which measures nothing;
3. ``byoc-workbench bench ssd --backends onnxruntime,openvino --json``: the
   pruned and unpruned builds on each backend and the whole-model anchors
   (MXNet, ONNX Runtime and OpenVINO on MXNet's own ONNX export), TVM alone
   left out (the search measured it).

Then it prints, from those two JSONs, the chosen placement against the
fastest whole-model anchor (bar: 1.3x) and against the best of pruned,
unpruned and each backend alone (bar: no slower), the predicted time against
the measured one (bar: within 15%), whether the detections equal TVM alone's,
and the search's and the repeat's wall time (bars: 3 minutes, 20 s), with
the load average before and after; and the floor by construction: the
backbone alone on its fastest backend against the fastest anchor (no
placement can beat that ratio, even with everything else free).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "byoc_workbench.cli"]
BARS = {"vs_fastest_anchor": 1.3, "prediction_error": 0.15, "search_s": 180.0, "repeat_s": 20.0}


def run(args: list, env: dict) -> tuple:
    """``(JSON printed, wall seconds)`` of one CLI command in a fresh process."""
    t0 = time.perf_counter()
    out = subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        sys.exit(f"{' '.join(args)} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout), wall


def verdicts(search: dict, bench: dict, search_wall: float, repeat_wall: float) -> dict:
    """Each bar of the issue, with the numbers it was judged on."""
    chosen = search["chosen"]
    measured = chosen["measured_s"]
    anchors = {k: v for k, v in search["baseline"].items() if k.endswith("_whole_model")}
    anchors |= {f"bench {k}": e["median_s"] for k, e in bench["anchors"].items() if k.endswith("_whole_model")}
    simple = {k: v for k, v in search["baseline"].items() if k in ("pruned", "unpruned") or k.endswith("_alone")}
    simple |= {f"bench {k}": e["median_s"] for k, e in bench["backends"].items()}
    fastest_anchor = min(anchors.items(), key=lambda kv: kv[1]) if anchors else (None, float("nan"))
    best_simple = min(simple.items(), key=lambda kv: kv[1])
    error = abs(chosen["predicted_s"] - measured) / measured
    # The floor by construction: the costliest unit (the backbone) on its fastest backend, everything else free.
    big = max(search["units"], key=lambda u: min(c for c in u["costs"].values() if c is not None))
    floor = min(c for c in big["costs"].values() if c is not None)
    return {
        "floor": {
            "unit": big["name"],
            "s": floor,
            "best_possible_vs_fastest_anchor": fastest_anchor[1] / floor,
        },
        "chosen_s": measured,
        "fastest_anchor": {"name": fastest_anchor[0], "s": fastest_anchor[1], "ratio": fastest_anchor[1] / measured},
        "best_simple": {"name": best_simple[0], "s": best_simple[1], "ratio": best_simple[1] / measured},
        "prediction_error": error,
        "detections_equal_tvm": bool(chosen["equal"]),
        "search_wall_s": search_wall,
        "repeat_wall_s": repeat_wall,
        "met": {
            "1.3x over the fastest whole-model anchor": fastest_anchor[1] / measured >= BARS["vs_fastest_anchor"],
            "no slower than pruned, unpruned, each backend alone": measured <= best_simple[1],
            "predicted within 15%": error <= BARS["prediction_error"],
            "detections equal TVM alone's": bool(chosen["equal"]),
            "search within 3 minutes": search_wall <= BARS["search_s"],
            "repeat within 20 s": repeat_wall <= BARS["repeat_s"],
        },
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="ssd_512_resnet50_v1_coco")
    parser.add_argument("--weights", default="untrained")
    parser.add_argument("--out", help="also write everything (both JSONs and the verdicts) to this file")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="byoc-search-bench-") as cache:
        env = dict(os.environ, BYOC_WORKBENCH_CACHE=cache)
        common = ["ssd", "--model", args.model, "--weights", args.weights, "--json"]
        search, search_wall = run(["search", *common], env)
        repeat, repeat_wall = run(["search", *common, "--cached"], env)
        bench, _ = run(["bench", *common, "--backends", "onnxruntime,openvino"], env)
    report = verdicts(search, bench, search_wall, repeat_wall)
    report["load_average"] = {"before": load_before, "after": os.getloadavg()}
    report["repeat_builds"] = repeat["measurements"]["builds"]
    chosen = search["chosen"]
    lines = [
        f"{args.model} ({args.weights}), {search['machine']['cpu']}, {search['machine']['cores']} cores, "
        f"load average {load_before[0]:.2f} before, {report['load_average']['after'][0]:.2f} after",
        "chosen: " + ", ".join(f"{k} on {v}" for k, v in chosen["assign"].items()),
        f"chosen measured {chosen['measured_s']:.3f} s, predicted {chosen['predicted_s']:.3f} s "
        f"({report['prediction_error']:.1%} off)",
        f"fastest whole-model anchor: {report['fastest_anchor']['name']} {report['fastest_anchor']['s']:.3f} s "
        f"-> chosen is {report['fastest_anchor']['ratio']:.2f}x faster",
        f"best of pruned, unpruned, each backend alone: {report['best_simple']['name']} "
        f"{report['best_simple']['s']:.3f} s -> {report['best_simple']['ratio']:.2f}x",
        f"search {search_wall:.0f} s wall ({search['search_s']:.0f} s searching), repeat {repeat_wall:.1f} s "
        f"({report['repeat_builds']} builds)",
    ]
    fl = report["floor"]
    lines.append(
        f"floor: {fl['unit']} alone on its fastest backend takes {fl['s']:.3f} s, so no placement can be more than "
        f"{fl['best_possible_vs_fastest_anchor']:.2f}x faster than the fastest anchor, even with the rest free"
    )
    lines += [f"  {'met ' if ok else 'MISS'}  {bar}" for bar, ok in report["met"].items()]
    print("\n".join(lines))
    if args.out:
        Path(args.out).write_text(json.dumps({"search": search, "bench": bench, "verdicts": report}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
