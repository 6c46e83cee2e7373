"""``bench``: models timed on several backends and beside their whole-model anchors, each in one process."""

from __future__ import annotations

import sys

from byoc_workbench.cli import earlier
from byoc_workbench.cli.refs import model_refs
from byoc_workbench.core import files, output_paths, text
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.measure.bench import bench, bench_report


def cmd_bench(args) -> int:
    out = (
        output_paths.check_file(args.out, "--out", output_paths.read_paths(args), earlier.BENCH, "bench.json")
        if args.out
        else None
    )
    backends = bench.parse_backends(args.backends)  # a typo fails before minutes of work
    if args.tvm_repeat is not None and "tvm" not in backends:
        raise WorkbenchError(
            f"--tvm-repeat times TVM alone, which --backends {args.backends} leaves out",
            "add tvm to --backends, or remove --tvm-repeat",
        )
    models = model_refs(args, args.what or [None], ("demo", "zoo", "onnx", "torch"))
    options = {
        "repeat": args.repeat,
        "tvm_repeat": args.tvm_repeat or 1,  # count(1, ...): None is the only false value
        "unpruned": not args.no_unpruned,
        "anchors": not args.no_anchors,
        "where": args.where,
        "max_seconds": args.max_seconds,
    }
    if len(models) == 1 and args.ray is None:  # one model here: a mistake is the command's one line
        results = [bench.bench_model(models[0], backends, **options)]
    else:
        results = bench.bench_models(models, backends, ray_address=args.ray, **options)
    failed = [r["error"] for r in results if "error" in r]
    if len(results) == 1 and failed:
        print(failed[0], file=sys.stderr)
        return 2
    data = results[0] if len(results) == 1 else results
    if args.json:
        print(text.to_json(data))
    else:
        print(
            "\n\n".join(f"{r['model']}: {r['error']}" if "error" in r else bench_report.report_text(r) for r in results)
        )
    if out:  # after the results are printed, so a file that cannot be written loses none of them
        files.write_file(out, text.to_json(data) + "\n")
    return 1 if failed else 0
