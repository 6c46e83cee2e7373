"""Time the MXNet -> Relax import of a zoo model, its BYOC stages, and report peak memory.

Usage: python benchmarks/bench_import.py [--model NAME] [--weights PATH|trained|untrained]

One run, numbers printed, no asserts. The targets for ssd_512_resnet50_v1_coco on a
2-core laptop CPU: the import under 10 s; every TensorRT stage computed and drawn in the
collapsed view under 3 s.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from byoc_workbench import workflow  # noqa: E402
from byoc_workbench.frontends import from_mxnet  # noqa: E402
from byoc_workbench.models import zoo  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=zoo.DEFAULT_MODEL)
    parser.add_argument("--weights", default="untrained")
    args = parser.parse_args()

    t0 = time.perf_counter()
    loaded = zoo.load_model(args.model, args.weights)
    t1 = time.perf_counter()
    graph, params = zoo.symbol_and_params(loaded)
    t2 = time.perf_counter()
    tracemalloc.start()
    mod, used = from_mxnet(graph, params, None, {"data": loaded.spec.input_shape})
    t3 = time.perf_counter()
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    ops = workflow.relax_op_counts(mod)

    from byoc_workbench.core import transforms  # noqa: E402
    from byoc_workbench.draw import render
    from byoc_workbench.flow import rules
    from byoc_workbench.session import Workbench  # noqa: E402

    t4 = time.perf_counter()
    prepared = transforms.prepare(mod)
    t5 = time.perf_counter()
    wb = Workbench(prepared, rules.get_target("tensorrt"), mark=loaded.weights_label)
    _ = wb.stages
    t6 = time.perf_counter()
    svgs = [render.to_svg(wb.dot(s.name, collapse=True)) for s in wb.stages]
    t7 = time.perf_counter()
    subgraphs = {s.name: len(s.subgraphs) for s in wb.stages}

    print(f"model                     {args.model} ({loaded.weights_label})")
    print(f"input shape               {loaded.spec.input_shape}")
    print(f"load + init weights       {t1 - t0:7.2f} s")
    print(f"trace symbol + params     {t2 - t1:7.2f} s")
    print(f"import MXNet -> Relax     {t3 - t2:7.2f} s   (target < 10 s)")
    print(f"relax ops                 {sum(ops.values())}  ({len(ops)} kinds)")
    print(f"prepare for TensorRT      {t5 - t4:7.2f} s")
    print(f"all 7 stages (tensorrt)   {t6 - t5:7.2f} s")
    print(f"draw 7 collapsed SVGs     {t7 - t6:7.2f} s   ({sum(map(len, svgs)) // 1024} KiB)")
    print(f"stages + collapsed draw   {t7 - t5:7.2f} s   (target < 3 s)")
    print(f"tensorrt subgraphs        partition {subgraphs['partition']}, after prune {subgraphs['prune']}")
    print(f"params                    {len(used)} tensors, {sum(a.nbytes for a in used.values()) / 2**20:.0f} MiB")
    print(f"peak traced memory, import {traced_peak / 2**20:7.0f} MiB (tracemalloc)")
    # ru_maxrss is KiB on Linux.
    print(f"peak RSS, whole process   {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10:7.0f} MiB")


if __name__ == "__main__":
    main()
