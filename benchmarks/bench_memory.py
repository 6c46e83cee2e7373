"""Notebook 06's chooser: seven picks in one process, as a seat's kernel makes them, and the memory of each.

Usage: python benchmarks/bench_memory.py [--out FILE.json]

The picks are issue 48's: SSD-MobileNet, FCN, ResNet-18, YOLOv3-DarkNet, DeepLab, then SSD-MobileNet and FCN
again, each through :func:`byoc_workbench.workflow.zoo_pick`, the function the chooser calls, and between
them what the chooser does (the last report dropped, :func:`~byoc_workbench.workflow.release_memory`). The cache
is an empty one of its own: nothing built before and seeded weights, a seat's first run (the repeated picks
then load their builds from it, as a seat's do). Per pick it prints and writes (Linux's /proc):

- ``peak_mb``: the pick's peak, the high-water mark of the child process that built and ran the model;
- ``kernel_peak_mb``: this process's own peak meanwhile (it waits, then unpickles the report);
- ``held_mb``: what this process holds after the pick, its report kept as the chooser keeps it;

and for a repeated pick, its held memory over the first's. A seat needs the kernel and a pick's child at once:
``seat_mb`` is the largest ``kernel_peak_mb + peak_mb``. The JSON, with the machine and its load average,
goes to ``benchmarks/results/memory.json``; docs/instructors.md's seat sizes quote it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "memory.json"
PICKS = (
    "ssd_512_mobilenet1.0_voc",
    "fcn_resnet50_ade",
    "resnet18_v1",
    "yolo3_darknet53_coco",
    "deeplab_resnet50_ade",
    "ssd_512_mobilenet1.0_voc",
    "fcn_resnet50_ade",
)


def _reset_peak() -> None:
    """Start this process's high-water mark again from its resident memory now (Linux 4.0 and later)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def measure(picks=PICKS) -> dict:
    """Every pick of ``picks`` in this process, as the chooser makes them; see the module's docstring."""
    from byoc_workbench import workflow
    from byoc_workbench.measure.child import peak_mb, resident_mb
    from byoc_workbench.measure.machine import machine
    from byoc_workbench.subjects import ModelRef

    start, rows, report = resident_mb(), [], None
    for name in picks:
        pick = report = None  # the chooser lets the last report go before a pick
        workflow.release_memory()
        _reset_peak()
        pick = workflow.zoo_pick(ModelRef(kind="zoo", name=name))
        report = pick.value
        workflow.release_memory()
        row = {"model": name, "family": report.family, "peak_mb": round(pick.peak_mb)}
        row |= {"kernel_peak_mb": round(peak_mb()), "held_mb": round(resident_mb())}
        first = next((r for r in rows if r["model"] == name), None)
        if first is not None:
            row["held_vs_first"] = round(row["held_mb"] / first["held_mb"], 3)
        rows.append(row)
        again = f", {row['held_vs_first']:.2f}x of its first" if first else ""
        print(
            f"{name:26s} peak {row['peak_mb']:5d} MB; kernel peak {row['kernel_peak_mb']:5d} MB, "
            f"holds {row['held_mb']:5d} MB{again}",
            flush=True,
        )
    return {
        "machine": machine() | {"load_average": round(os.getloadavg()[0], 2)},
        "kernel_start_mb": round(start),
        "picks": rows,
        "max_peak_mb": max(r["peak_mb"] for r in rows),
        "max_held_mb": max(r["held_mb"] for r in rows),
        "seat_mb": max(r["kernel_peak_mb"] + r["peak_mb"] for r in rows),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(RESULTS), help="where the JSON goes (default: %(default)s)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as cache:
        os.environ["BYOC_WORKBENCH_CACHE"] = cache  # read by the children too: they inherit the environment
        result = measure()
    print(
        f"largest pick {result['max_peak_mb']} MB, kernel holds at most {result['max_held_mb']} MB, "
        f"a seat needs {result['seat_mb']} MB"
    )
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":  # the picks' children are spawned: they import this file without running it
    sys.exit(main())
