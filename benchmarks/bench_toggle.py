"""Median time from one rule toggle to every stage recomputed and the current diagram redrawn.

Run: .venv/bin/python benchmarks/bench_toggle.py [--stage partition] [--repeat 21]
Target: under 0.5 s on the demo. Prints numbers from a single run; asserts nothing.
"""

import argparse
import statistics
import time

from byoc_workbench.flow import rules
from byoc_workbench.models import demo
from byoc_workbench.session import Workbench


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--stage", default="partition")
    p.add_argument("--repeat", type=int, default=21)
    args = p.parse_args()
    wb = Workbench(demo.demo_module(), rules.get_target("byoc-target"))
    wb.view(args.stage)  # warm up: TVM's first pass runs load code
    names = [r.qualified for r in wb.target.rules]
    times, on = [], False
    for i in range(args.repeat):
        name = names[i % len(names)]
        t0 = time.perf_counter()
        wb = wb.with_rule(name, on)
        _ = wb.stages  # every stage recomputed
        wb.view(args.stage)  # the current diagram redrawn as SVG
        times.append(time.perf_counter() - t0)
        on = not on if i % len(names) == len(names) - 1 else on
    med = statistics.median(times)
    print(
        f"toggle -> all {len(wb.stages)} stages + {args.stage} SVG: median {med * 1000:.1f} ms, "
        f"min {min(times) * 1000:.1f} ms, max {max(times) * 1000:.1f} ms over {len(times)} toggles"
    )
    print(f"target 500 ms: {'met' if med < 0.5 else 'MISSED'} ({0.5 / med:.1f}x headroom)")


if __name__ == "__main__":
    main()
