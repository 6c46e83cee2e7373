"""How the workbench grows with the model: stages, first view, one toggle and memory, from 1,000 to 12,000 ops.

Run: .venv/bin/python benchmarks/bench_scale.py [--sizes 1000,3000,6000,12000] [--no-real] [--no-cli] [--no-flat]
[--json PATH]

Each size is a synthetic residual network (``byoc_workbench.models.synthetic``: conv2d + bias +
relu + add blocks, 1,000 ops a stage) with upstream TVM's TensorRT rules, measured through
``Workbench`` in a fresh process of its own (so that peak memory is that size's):

- all stages: ``Workbench(mod, "tensorrt")`` (the module checked) and every stage computed;
- first view: the partition stage as the widget first draws it (collapsed), SVG included;
- one toggle, redrawn: ``tensorrt.nn.relu`` switched off (every block changes: the one subgraph
  becomes one per block) and the first view drawn again, as the widget does it: the stages up to
  the one shown are recomputed, the later ones when first shown;
- toggle, every stage: the same toggle with every stage recomputed (what ``wb.stages`` costs);
- open one group: the source stage collapsed with its first top-level block opened (a stage of
  1,000 ops on the synthetic models), SVG included;
- every rule toggled: each rule of the target switched off in turn (from every rule on) and the
  partition stage redrawn; median and worst toggle, the most subgraphs a toggle made, the most
  nodes and the largest SVG of any such view and of every stage's view after the worst toggle;
- peak memory: the process's peak resident set (TVM itself included; the line says how much
  the process held before the model was built).

Each size is measured twice: on the model above (its names give blocks) and on the flat one (the
same chain with BlockBuilder's names, ``lv12``: no blocks, so the views fold by structure).
The last columns give each time's fitted exponent (the slope of log time over log ops, least
squares, from this one run): 1.0 is linear; the toggle tables give it per rule. Then the largest
real model the workbench imports
(SSD-ResNet50, when mxnet is installed), and ``byoc-workbench stages FILE.py --out DIR`` on a
3,000-op file. The load average is printed beside every number: on a shared machine, rerun it
idle. Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SIZES = (1000, 3000, 6000, 12000)
TOGGLE = "tensorrt.nn.relu"
COLUMNS = ("stages_s", "first_view_s", "toggle_s", "toggle_every_stage_s", "open_group_s", "toggle_worst_s")


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def _first_group(view) -> str | None:
    """The id of the first closed group (a block, or a folded run) the view draws, if any."""
    return next((nid for nid, d in view.nodes.items() if d["kind"] == "fold"), None)


def toggle_every_rule(wb) -> dict:
    """Each rule of the target switched off in turn (from ``wb``, every rule on), the partition stage
    redrawn as the widget redraws it: ``{rule: {"s", "subgraphs", "nodes", "svg_kb"}}``."""
    out = {}
    key, base = wb._planned  # the stages every rule on: kept; any other rule set is computed afresh
    for rule in sorted(wb.enabled):
        wb._runs._runs.clear()  # an earlier toggle (the one above) would be a cached answer
        wb._runs._runs[key] = base
        t0 = time.perf_counter()
        wb2 = wb.with_rule(rule, False)
        view = wb2.view("partition", collapse=True)
        took = time.perf_counter() - t0
        out[rule] = {
            "s": took,
            "subgraphs": len(view.subgraphs),
            "nodes": len(view.nodes),
            "svg_kb": len(view.svg) / 1024,
        }
    return out


def every_view(wb) -> dict:
    """The largest of the collapsed views of every stage of ``wb``: nodes and SVG size."""
    from byoc_workbench import stages

    views = [wb.view(name, collapse=True) for name in stages.STAGES]
    return {"max_nodes": max(len(v.nodes) for v in views), "max_svg_kb": max(len(v.svg) for v in views) / 1024}


def measure(wb_factory, toggle: str = TOGGLE, base: float | None = None) -> dict:
    """One model's numbers: ``wb_factory()`` makes its workbench; ``base`` is the resident set before
    the model was built (default: now)."""
    load = os.getloadavg()[0]
    base = _rss_mb() if base is None else base
    wb, made = _timed(wb_factory)
    _, staged = _timed(lambda: wb.stages)
    view, first = _timed(lambda: wb.view("partition", collapse=True))
    group = _first_group(wb.view("source", collapse=True, svg=False))
    opened = None
    if group is not None:
        opened = _timed(lambda: wb.view("source", expand=(group,), collapse=True))[1]
    t0 = time.perf_counter()
    wb2 = wb.with_rule(toggle, False)
    view2 = wb2.view("partition", collapse=True)
    toggled = time.perf_counter() - t0
    _ = wb2.stages
    every = time.perf_counter() - t0
    rules = toggle_every_rule(wb)
    times = sorted(r["s"] for r in rules.values())
    worst = max(rules, key=lambda r: rules[r]["s"])
    views = every_view(wb.with_rule(worst, False))
    return {
        "ops": wb.stage("source").op_count,
        "load_average": round(load, 2),
        "stages_s": made + staged,
        "first_view_s": first,
        "first_view_nodes": len(view.nodes),
        "toggle_s": toggled,
        "toggle_every_stage_s": every,
        "toggle_view_nodes": len(view2.nodes),
        "subgraphs_after_toggle": len(wb2.stage("partition").subgraphs),
        "open_group_s": opened,
        "opened_group": group,
        "toggle_median_s": times[len(times) // 2],
        "toggle_worst_s": times[-1],
        "worst_rule": worst,
        "subgraphs_before": len(view.subgraphs),
        "max_subgraphs": max(r["subgraphs"] for r in rules.values()),
        "max_nodes": max(views["max_nodes"], *(r["nodes"] for r in rules.values())),
        "max_svg_kb": max(views["max_svg_kb"], *(r["svg_kb"] for r in rules.values())),
        "rules": rules,
        "peak_mb": _rss_mb(),
        "before_model_mb": base,
    }


def child(arg: str) -> dict:
    """Run in a fresh process: the numbers of the synthetic model ``arg`` (``6000``: named blocks;
    ``flat:6000``: the same chain with no names)."""
    from byoc_workbench.models.synthetic import residual_model
    from byoc_workbench.session import Workbench  # imported before the baseline memory is read

    flat, _, size = arg.rpartition(":")
    mod = residual_model(int(size), named=flat != "flat")
    return measure(lambda: Workbench(mod, "tensorrt", pause_gc=True))  # as the widget makes it


def child_real() -> dict:
    """The SSD-ResNet50 (untrained weights) as notebook 02 has it: its workbench made from the imported module."""
    import mxnet  # noqa: F401  (imported before the baseline memory is read, as TVM is)

    from byoc_workbench import workflow
    from byoc_workbench.session import Workbench

    base = _rss_mb()
    wb, _ = workflow.model_workbench(weights="untrained")
    mod, target, mark = wb.mod, wb.target, wb.mark
    return measure(lambda: Workbench(mod, target, mark=mark, pause_gc=True), base=base)


def in_child(arg: str) -> dict | None:
    done = subprocess.run(
        [sys.executable, __file__, "--child", arg], capture_output=True, text=True, cwd=ROOT, check=False
    )
    if done.returncode != 0:
        print(f"  {arg}: failed\n{done.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def exponent(rows: list, key: str) -> float | None:
    """The least-squares slope of log(time) over log(ops)."""
    pts = [(math.log(r["ops"]), math.log(r[key])) for r in rows if r.get(key)]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sxx


def cli_run(ops: int) -> dict:
    """``byoc-workbench stages FILE.py --out DIR`` on a synthetic file of ``ops`` ops: its wall time."""
    from byoc_workbench.models.synthetic import model_source

    exe = Path(sys.executable).with_name("byoc-workbench")
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / f"residual_{ops}.py"
        model.write_text(model_source(ops))
        load = os.getloadavg()[0]
        cmd = [str(exe), "stages", str(model), "--target", "tensorrt", "--out", str(Path(tmp) / "out")]
        done, wall = _timed(lambda: subprocess.run(cmd, capture_output=True, text=True, check=False))
        files = sorted((Path(tmp) / "out").glob("*")) if done.returncode == 0 else []
        return {
            "ops": ops,
            "load_average": round(load, 2),
            "wall_s": wall,
            "ok": done.returncode == 0,
            "files": len(files),
            "mb": sum(f.stat().st_size for f in files) / 2**20,
            "tail": done.stdout.strip().splitlines()[-3:] if done.returncode == 0 else done.stderr[-800:],
        }


def _s(x) -> str:
    return "     -" if x is None else f"{x:6.2f}"


def table(rows: list, real: dict | None) -> str:
    head = (
        "     ops | all stages | first view | toggle, redrawn | toggle, every stage | open a group "
        "| peak MB (before model) | load"
    )
    lines = [head, "-" * len(head)]
    for r in rows + ([real] if real else []):
        name = f"{r['ops']:>8,}" if r is not real else f"SSD {r['ops']:,}"
        lines.append(
            f"{name:>8} | {_s(r['stages_s'])} s   | {_s(r['first_view_s'])} s   | {_s(r['toggle_s'])} s        "
            f"| {_s(r.get('toggle_every_stage_s'))} s            "
            f"| {_s(r['open_group_s'])} s     | {r['peak_mb']:6.0f} ({r['before_model_mb']:4.0f})          "
            f"| {r['load_average']:.2f}"
        )
    fits = {k: exponent(rows, k) for k in COLUMNS[:5]}
    mem = exponent([{**r, "mem": max(r["peak_mb"] - r["before_model_mb"], 1)} for r in rows], "mem")
    lines.append(
        "exponent | "
        + " | ".join(f"{'-' if fits[k] is None else f'{fits[k]:.2f}':>10}" for k in COLUMNS[:5])
        + f" | memory above the baseline: {'-' if mem is None else f'{mem:.2f}'}"
    )
    lines.append(
        "first view lays out "
        + ", ".join(f"{r['first_view_nodes']} nodes at {r['ops']:,} ops" for r in rows)
        + f"; after the toggle, {', '.join(str(r['toggle_view_nodes']) for r in rows)}"
    )
    return "\n".join(lines)


def rule_exponents(rows: list) -> dict:
    """Each rule's toggle time fitted over the sizes: ``{rule: exponent}`` (rules every size toggled)."""
    names = set.intersection(*(set(r["rules"]) for r in rows)) if rows else set()
    return {n: exponent([{"ops": r["ops"], "t": r["rules"][n]["s"]} for r in rows], "t") for n in sorted(names)}


def toggle_table(rows: list, what: str) -> str:
    """Every rule toggled in turn: median and worst toggle per size, subgraphs, nodes and SVG, and the
    growth exponent of each rule that changes the partition."""
    lines = [
        f"{what}: every rule toggled off in turn, partition redrawn",
        "     ops | median toggle | worst toggle (rule)                | subgraphs | most nodes | largest SVG",
    ]
    for r in rows:
        lines.append(
            f"{r['ops']:>8,} | {r['toggle_median_s']:9.3f} s   | {r['toggle_worst_s']:6.3f} s ({r['worst_rule']:<24}) "
            f"| {r['max_subgraphs']:9,} | {r['max_nodes']:10,} | {r['max_svg_kb']:7.0f} KB"
        )
    fits = rule_exponents(rows)
    moving = {n for r in rows for n, x in r["rules"].items() if x["subgraphs"] != r["subgraphs_before"]}
    shown = {n: e for n, e in fits.items() if e is not None and n in moving}
    lines.append(
        "exponent per rule: "
        + ", ".join(f"{n} {e:.2f}" for n, e in sorted(shown.items(), key=lambda kv: -kv[1])[:8])
        + (f"; worst toggle {exponent(rows, 'toggle_worst_s'):.2f}" if len(rows) > 1 else "")
    )
    return "\n".join(lines)


def measure_sizes(sizes: str, flat: bool) -> dict:
    """``{"rows": [...], "flat_rows": [...]}``: each size of the hierarchical model (and of the flat one)
    measured in a child process of its own."""
    models = {"rows": "", "flat_rows": "flat:"} if flat else {"rows": ""}
    found: dict = {key: [] for key in models}
    for size in map(int, sizes.split(",")):
        for key, prefix in models.items():
            r = in_child(f"{prefix}{size}")
            if r:
                found[key].append(r)
                print(f"  {prefix}{size:,} ops measured (load average {r['load_average']:.2f})", file=sys.stderr)
    return found


def measure_real() -> dict | None:
    """The SSD measured in a child process, or None (said on stderr) without mxnet."""
    try:
        import mxnet  # noqa: F401
    except ImportError:
        print("  SSD skipped: mxnet is not installed", file=sys.stderr)
        return None
    return in_child("real")


def cli_lines(cli: dict) -> list:
    """The stages command's run, as the report prints it: a line, then its output's tail."""
    head = (
        f"stages FILE.py --out DIR on {cli['ops']:,} ops: {cli['wall_s']:.1f} s, {cli['files']} files, "
        f"{cli['mb']:.1f} MB (load average {cli['load_average']:.2f}){'' if cli['ok'] else ' FAILED'}"
    )
    tail = cli["tail"] if isinstance(cli["tail"], list) else [cli["tail"]]
    return [head] + [f"  {line}" for line in tail]


def record(found: dict, real: dict | None, cli: dict | None) -> dict:
    """The numbers as ``--json`` writes them."""
    rows, flat_rows = found["rows"], found.get("flat_rows", [])
    return {
        "how": "benchmarks/bench_scale.py",
        "cpu_count": os.cpu_count(),
        "toggle": TOGGLE,
        "rows": rows,
        "flat_rows": flat_rows,
        "real": real,
        "cli": cli,
        "exponents": {k: exponent(rows, k) for k in COLUMNS},
        "flat_exponents": {k: exponent(flat_rows, k) for k in COLUMNS},
        "rule_exponents": {key: rule_exponents(found[key]) for key in found},
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default=",".join(map(str, SIZES)))
    p.add_argument("--no-real", action="store_true", help="skip the SSD (needs mxnet; about a minute)")
    p.add_argument("--no-cli", action="store_true", help="skip the stages command on a 3,000-op file")
    p.add_argument("--no-flat", action="store_true", help="skip the flat model (no block names)")
    p.add_argument("--json", help="also write the numbers to this file")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child_real() if args.child == "real" else child(args.child)))
        return
    found = measure_sizes(args.sizes, flat=not args.no_flat)
    real = None if args.no_real else measure_real()
    print(table(found["rows"], real))
    for key, what in (("rows", "hierarchical model (block names)"), ("flat_rows", "flat model (no names)")):
        if found.get(key):
            print(toggle_table(found[key], what))
    cli = None if args.no_cli else cli_run(3000)
    if cli:
        print("\n".join(cli_lines(cli)))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(record(found, real, cli), indent=2) + "\n")


if __name__ == "__main__":
    main()
