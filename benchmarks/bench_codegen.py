"""The demo through three codegens, timed in one process: TVM alone, the teaching NumPy codegen, the c codegen.

Run: .venv/bin/python benchmarks/bench_codegen.py [--runs 30] [--keep-all]
Each build is the demo's codegen stage with byoc-target's rules, pruned unless
--keep-all; each is profiled over the same runs (timing.profile), and the
end-to-end medians and the ratios between them come from this one run. Prints
numbers; asserts nothing. Run it on an idle machine: the ratios move with the load.
"""

import argparse
import os

from byoc_workbench import stages
from byoc_workbench.draw.latency import ms
from byoc_workbench.flow import rules
from byoc_workbench.measure.time import timing
from byoc_workbench.models import demo

BUILDS = (("TVM alone", "tvm"), ("NumPy (teaching)", "teaching"), ("C (c)", "c"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--keep-all", action="store_true", help="keep every subgraph (the loop counter's add too)")
    args = parser.parse_args()
    prune = stages.keep_all if args.keep_all else stages.no_mac()
    mod, inputs, byoc = demo.demo_module(), demo.demo_inputs(), rules.get_target("byoc-target")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {args.runs} runs each")
    medians = {}
    for label, backend in BUILDS:
        built = timing.build(stages.run_stages(mod, byoc.rules, prune, backend=backend))
        profile = timing.profile(built, inputs, runs=args.runs)
        kinds = profile.by_kind
        medians[label] = profile.end_to_end_s
        print(
            f"{label:18s} end-to-end {ms(profile.end_to_end_s):>10s}   offloaded {ms(kinds.get('subgraph', 0)):>10s}"
            f"   boundary {ms(kinds.get('boundary', 0)):>10s}"
        )
    tvm = medians["TVM alone"]
    print("speedup over TVM alone: " + ", ".join(f"{label} {tvm / t:.2f}x" for label, t in medians.items() if t != tvm))
    print(f"C against NumPy: {medians['NumPy (teaching)'] / medians['C (c)']:.2f}x")


if __name__ == "__main__":
    main()
