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
fastest runtime run whole, both from the finals' round-robin medians (bar:
1.1x), and against the best of pruned, unpruned and each backend alone (bar:
no slower); whether the chosen one is the fastest of the finals within their
spread; the worst prediction error over every placement built (bar: 10%);
whether the detections equal TVM alone's; and the search's and the repeat's
wall time (bars: 120 s, 15 s), with the load average before and after. Then
the floor by construction: the backbone alone on its fastest backend against
the fastest runtime run whole (no placement can beat that ratio, even with
everything else free).

Ctrl-C or SIGTERM stops it in one line, exit 130 or 143: the command it runs is stopped too (it and what it
started), and the temporary cache removed. Once its lines are said, a signal changes nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from byoc_workbench_cli import exit_on_signals, ignore_signals

#: How long a stopped command may take to end (its own one line, its temporaries removed) before it is killed.
STOP_WAIT_S = 20.0


if __name__ == "__main__":  # before the package's imports, which load TVM (a second); --out is written last,
    exit_on_signals("nothing was written.")  # with signals ignored; run() stops its command on the way out

from byoc_workbench.cli import earlier  # noqa: E402
from byoc_workbench.core import files, output_paths  # noqa: E402
from byoc_workbench.core.errors import WorkbenchError  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "byoc_workbench.cli"]
BARS = {"vs_fastest_anchor": 1.1, "prediction_error": 0.10, "search_s": 120.0, "repeat_s": 15.0}
#: What an earlier --out of this script holds, as its folder's record proves: the one file --out may replace,
#: beside an empty one (a JSON of yours with the same keys is not one).
EARLIER = earlier.proven(earlier.json_result(lambda r: {"search", "bench", "verdicts"} <= r.keys()))


def run(args: list, env: dict) -> tuple:
    """``(JSON printed, wall seconds)`` of one CLI command in a fresh process, in a session of its own: a signal
    that stops this script is passed on to it and what it started, which are waited for, so none is left."""
    t0 = time.perf_counter()
    cmd = [*CLI, *args]
    with subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT, start_new_session=True
    ) as proc:
        try:
            stdout, stderr = proc.communicate()
        except SystemExit as stop:  # exit_on_signals: the same signal to the command, then SIGKILL if it hangs
            _end(proc, stop.code - 128)
            raise
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"{' '.join(args)} failed ({proc.returncode}):\n{stderr[-3000:]}")
    return json.loads(stdout), wall


def _end(proc: subprocess.Popen, signum: int) -> None:
    """``proc``'s session stopped by ``signum`` (its own one-line exit removes its temporaries), or killed where
    it has not ended within :data:`STOP_WAIT_S`."""
    for sig, wait in ((signum, STOP_WAIT_S), (signal.SIGKILL, None)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.communicate(timeout=wait)
            return


def verdicts(search: dict, bench: dict, search_wall: float, repeat_wall: float) -> dict:
    """Each bar of the issue, with the numbers it was judged on."""
    chosen = search["chosen"]
    finals = {f["what"]: f for f in search["finals"]}
    mine = finals[chosen["what"]]
    measured = mine["median_s"]
    whole = {k: f["median_s"] for k, f in finals.items() if not f["placement"]}
    fastest_anchor = min(whole.items(), key=lambda kv: kv[1]) if whole else (None, float("nan"))
    # Pruned and each backend alone, as this search measured them: in the finals' rounds when they were
    # finalists, else their one measurement (the bench's own, from other minutes, are shown, not judged).
    simple = {
        r["what"]: finals[r["what"]]["median_s"] if r["what"] in finals else r["measured_s"]
        for r in search["placements"]
        if r["what"].startswith(("pruned", "each unit on ")) and r["measured_s"]
    }
    best_simple = min(simple.items(), key=lambda kv: kv[1])
    built = [r for r in search["placements"] if r["measured_s"] and r["predicted_s"]]  # reduced ones predict none
    errors = {r["what"]: abs(r["predicted_s"] - r["measured_s"]) / r["measured_s"] for r in built}
    worst = max(errors.items(), key=lambda kv: kv[1])
    best = min(finals.values(), key=lambda f: f["median_s"])
    within = measured - best["median_s"] <= max(best["spread"], mine["spread"]) / 2 * measured
    within_simple = measured - best_simple[1] <= mine["spread"] / 2 * measured
    # The floors by construction: the costliest unit (the backbone) on its fastest backend, everything else
    # free; and the same plus the rest every build pays (host ops no rule claims, the VM's dispatch).
    big = max(search["units"], key=lambda u: min(c for c in u["costs"].values() if c is not None))
    floor = min(c for c in big["costs"].values() if c is not None)
    rest = search["measurements"]["rest_s"]
    return {
        "floor": {
            "unit": big["name"],
            "s": floor,
            "rest_s": rest,
            "best_possible_vs_fastest_anchor": fastest_anchor[1] / floor,
            "with_the_rest_vs_fastest_anchor": fastest_anchor[1] / (floor + rest),
        },
        "chosen_s": measured,
        "chosen_spread": mine["spread"],
        "fastest_anchor": {"name": fastest_anchor[0], "s": fastest_anchor[1], "ratio": fastest_anchor[1] / measured},
        "fastest_in_finals": {"name": best["what"], "s": best["median_s"], "spread": best["spread"]},
        "best_simple": {"name": best_simple[0], "s": best_simple[1], "ratio": best_simple[1] / measured},
        "bench": {k: e["median_s"] for k, e in bench["backends"].items()},
        "prediction_errors": errors,
        "detections_equal_tvm": bool(chosen["equal"]),
        "search_wall_s": search_wall,
        "repeat_wall_s": repeat_wall,
        "met": {
            "1.1x over the fastest runtime run whole": fastest_anchor[1] / measured >= BARS["vs_fastest_anchor"],
            "the fastest of the finals, within their spread": within,
            "no slower than pruned or each backend alone, within the spread": within_simple,
            f"every prediction within 10% (worst: {worst[0]}, {worst[1]:.1%})": worst[1] <= BARS["prediction_error"],
            "detections equal TVM alone's": bool(chosen["equal"]),
            "search within 120 s": search_wall <= BARS["search_s"],
            "repeat within 15 s": repeat_wall <= BARS["repeat_s"],
        },
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="ssd_512_resnet50_v1_coco")
    parser.add_argument("--weights", default="untrained")
    parser.add_argument("--out", help="also write everything (both JSONs and the verdicts) to this file")
    args = parser.parse_args(argv)
    try:  # --out checked before the minutes of searching, and written as the CLI writes its results
        if args.out is not None and not args.out.strip():  # its JSON's name, not the CLI's outputs.npz
            raise WorkbenchError("--out is empty", "pass --out a path, e.g. --out search_bench.json")
        out = None if args.out is None else output_paths.check_file(args.out, "--out", (), EARLIER, "search_bench.json")
        everything = _bench(args)
        ignore_signals()  # its lines are said: a signal from here to the exit changes nothing
        if out is not None:
            files.write_file(out, json.dumps(everything, indent=2))
    except WorkbenchError as err:
        print(err, file=sys.stderr)
        return err.status
    return 0


def _bench(args) -> dict:
    """The three runs, their verdicts printed; returns both JSONs and the verdicts."""
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
        f"chosen: {chosen['what']}, finals median {report['chosen_s']:.3f} s ±{report['chosen_spread'] / 2:.0%}, "
        f"measured {chosen['measured_s']:.3f} s, predicted {chosen['predicted_s']:.3f} s",
        f"fastest runtime run whole, in the same finals: {report['fastest_anchor']['name']} "
        f"{report['fastest_anchor']['s']:.3f} s -> chosen is {report['fastest_anchor']['ratio']:.2f}x faster",
        f"best of pruned and each backend alone, in this search: {report['best_simple']['name']} "
        f"{report['best_simple']['s']:.3f} s -> {report['best_simple']['ratio']:.2f}x; in bench ssd, minutes apart: "
        + ", ".join(f"{k} {v:.3f} s" for k, v in report["bench"].items()),
        f"search {search_wall:.0f} s wall ({search['search_s']:.0f} s searching), repeat {repeat_wall:.1f} s "
        f"({report['repeat_builds']} builds)",
    ]
    fl = report["floor"]
    lines.append(
        f"floor: {fl['unit']} alone on its fastest backend takes {fl['s']:.3f} s, so no placement can be more than "
        f"{fl['best_possible_vs_fastest_anchor']:.2f}x faster than the fastest anchor, even with the rest free; "
        f"with the {fl['rest_s'] * 1e3:.1f} ms every build pays besides its units, "
        f"{fl['with_the_rest_vs_fastest_anchor']:.2f}x"
    )
    lines += [f"  {'met ' if ok else 'MISS'}  {bar}" for bar, ok in report["met"].items()]
    print("\n".join(lines))
    return {"search": search, "bench": bench, "verdicts": report}


if __name__ == "__main__":
    sys.exit(main())
