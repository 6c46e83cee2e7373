"""How much the layout moves from stage to stage: pairs of nodes that swap left and right.

Run: .venv/bin/python benchmarks/bench_layout.py [--no-ssd]
Each diagram is laid out by the workbench's Graphviz (``renderers.lay_out`` as JSON); for every two consecutive
stages, every pair of nodes and clusters drawn in both is checked for whether
the one on the left stays on the left. Prints numbers; asserts nothing.
"""

import argparse
import itertools
import json

from byoc_workbench.draw import renderers
from byoc_workbench.flow import rules
from byoc_workbench.models import demo
from byoc_workbench.session import Workbench


def x_positions(dot_source: str) -> dict:
    """``{node or cluster id: x of its centre}`` as Graphviz lays the diagram out."""
    laid = json.loads(renderers.lay_out(dot_source, "json"))
    x = {}
    for o in laid.get("objects", []):
        if "pos" in o:
            x[o.get("id", o["name"])] = float(o["pos"].split(",")[0])
        elif "bb" in o:
            x0, _, x1, _ = map(float, o["bb"].split(","))
            x[o.get("id", o["name"])] = (x0 + x1) / 2
    return x


def swaps(a: dict, b: dict) -> tuple:
    """``(pairs that swap, pairs compared)`` among what ``a`` and ``b`` both place."""
    pairs = [(u, v) for u, v in itertools.combinations(sorted(set(a) & set(b)), 2)]
    pairs = [(u, v) for u, v in pairs if abs(a[u] - a[v]) >= 1 and abs(b[u] - b[v]) >= 1]
    return sum((a[u] > a[v]) != (b[u] > b[v]) for u, v in pairs), len(pairs)


def report(label: str, wb, collapse: bool) -> None:
    laid = [(s.name, x_positions(wb.dot(s.name, collapse=collapse).source)) for s in wb.stages]
    total = 0
    print(label)
    for (n1, a), (n2, b) in zip(laid, laid[1:]):
        bad, pairs = swaps(a, b)
        total += bad
        print(f"  {n1:>9} -> {n2:9}: {bad:4d} of {pairs} pairs swap left and right")
    print(f"  in all: {total}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--no-ssd", action="store_true", help="only the demo (the SSD needs mxnet)")
    args = p.parse_args()
    report("demo", Workbench(demo.demo_module(), rules.get_target("byoc-target")), False)
    if not args.no_ssd:
        from byoc_workbench.workflow import model_workbench

        report("SSD (collapsed, as the widget draws it)", model_workbench(weights="untrained")[0], True)


if __name__ == "__main__":
    main()
