"""Median time from one rule toggle to every stage recomputed and the current diagram redrawn.

Run: .venv/bin/python benchmarks/bench_toggle.py [--stage partition] [--repeat 21] [--no-ssd]
Targets: under 50 ms on the demo, under 0.5 s on SSD-ResNet50 (its collapsed diagram, as
the widget draws it). Prints numbers from a single run; asserts nothing.

On the SSD, a toggle to a rule set not seen before ("new") recomputes every stage after
the source; switching a rule back ("back") finds the stages kept from before. Both are
reported, beside the process's CPU time, which other jobs on the machine do not inflate.
"""

import argparse
import statistics
import time

from byoc_workbench.flow import rules
from byoc_workbench.models import demo
from byoc_workbench.session import Workbench


def toggle(wb, name, on, stage, collapse):
    """``(new workbench, wall seconds, CPU seconds)`` for one toggle, its stages and its SVG."""
    t0, c0 = time.perf_counter(), time.process_time()
    wb = wb.with_rule(name, on)
    _ = wb.stages  # every stage recomputed
    wb.view(stage, collapse=collapse)  # the current diagram redrawn as SVG
    return wb, time.perf_counter() - t0, time.process_time() - c0


def line(label, times, target):
    med = statistics.median(times)
    return (
        f"{label}: median {med * 1000:.0f} ms, min {min(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms "
        f"over {len(times)} toggles (target {target * 1000:.0f} ms: {'met' if med < target else 'MISSED'})"
    )


def bench_demo(stage, repeat):
    wb = Workbench(demo.demo_module(), rules.get_target("byoc-target"), pause_gc=True)  # as the widget makes it
    wb.view(stage)  # warm up: TVM's first pass runs load code
    names = [r.qualified for r in wb.target.rules]
    times, on = [], False
    for i in range(repeat):
        wb, wall, _ = toggle(wb, names[i % len(names)], on, stage, False)
        times.append(wall)
        on = not on if i % len(names) == len(names) - 1 else on
    print(line(f"demo, toggle -> all {len(wb.stages)} stages + {stage} SVG", times, 0.05))


def bench_ssd(stage):
    from byoc_workbench.workflow import model_workbench

    t0 = time.perf_counter()
    wb, _ = model_workbench(weights="untrained")
    wb.view(stage, collapse=True)
    print(f"SSD workbench and first view: {time.perf_counter() - t0:.1f} s")
    matched = [q for q, n in wb.stage("annotate").rule_matches.items() if n]
    idle = [q for q, n in wb.stage("annotate").rule_matches.items() if not n][:4]
    new, back, cpu = [], [], []
    for name in matched + idle:
        wb, wall, c = toggle(wb, name, False, stage, True)  # a rule set not seen before
        new.append(wall)
        cpu.append(c)
        wb, wall, _ = toggle(wb, name, True, stage, True)  # back to one seen before
        back.append(wall)
    print(line(f"SSD, toggle to a new rule set -> all stages + collapsed {stage} SVG", new, 0.5))
    print(f"     the same, CPU time: median {statistics.median(cpu) * 1000:.0f} ms")
    print(line("SSD, toggle back to a rule set seen before", back, 0.5))
    fuse = getattr(getattr(wb, "_runs", None), "fuse", None)  # None on code from before the reuse
    if fuse is not None:
        print(f"     composite stage from reused matches {fuse.fast} times, FuseOpsByPattern {fuse.slow} times")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--stage", default="partition")
    p.add_argument("--repeat", type=int, default=21)
    p.add_argument("--no-ssd", action="store_true", help="only the demo (the SSD needs mxnet)")
    args = p.parse_args()
    bench_demo(args.stage, args.repeat)
    if not args.no_ssd:
        bench_ssd(args.stage)


if __name__ == "__main__":
    main()
