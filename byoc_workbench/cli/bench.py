"""``bench``: models timed on several backends and beside their whole-model anchors, each in one process."""

# The floors a command runs are imported inside it: at the top, they would make every command and
# `byoc-workbench --help` take seconds longer to import (pyproject.toml: per-file-ignores).

from __future__ import annotations

import sys

from byoc_workbench import files, text
from byoc_workbench.cli.args import (
    BACKEND_HELP,
    MAX_REPEAT,
    MAX_TVM_REPEAT,
    ZOO_HELP,
    add_ray,
    count,
    model_ref,
)


def cmd_bench(args) -> int:
    from byoc_workbench.measure.bench import bench, bench_report

    out = files.check_file(args.out, "--out") if args.out else None
    backends = bench.parse_backends(args.backends)  # a typo fails before minutes of work
    models = [model_ref(args, what, ("demo", "zoo", "onnx", "torch")) for what in args.what or [None]]
    options = {
        "repeat": args.repeat,
        "tvm_repeat": args.tvm_repeat,
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
    if out:
        files.write_file(out, text.to_json(data) + "\n")
    if args.json:
        print(text.to_json(data))
    else:
        print(
            "\n\n".join(f"{r['model']}: {r['error']}" if "error" in r else bench_report.report_text(r) for r in results)
        )
    return 1 if failed else 0


def add_bench(command) -> None:
    b = command(
        "bench",
        "time models on several backends and their anchors, each in one process",
        cmd_bench,
        "zoo",
        "image",
        "budget",
        "own",
    )
    b.add_argument(
        "what", nargs="*", metavar="MODEL", help="demo, " + ZOO_HELP + ", or a .onnx file (or give --torch); several"
    )
    b.add_argument(
        "--backends",
        default="tvm,onnxruntime",
        help=f"comma-separated: {BACKEND_HELP} (default: tvm,onnxruntime)",
    )
    b.add_argument(
        "--repeat",
        type=count(1, MAX_REPEAT),
        default=10,
        help=f"timed runs per backend after warm-up, 1 to {MAX_REPEAT} (default 10)",
    )
    b.add_argument(
        "--tvm-repeat",
        type=count(1, MAX_TVM_REPEAT),
        default=1,
        help=f"timed runs of TVM alone, tens of seconds each, 1 to {MAX_TVM_REPEAT} (default 1)",
    )
    b.add_argument("--no-unpruned", action="store_true", help="skip the offloaded build without pruning")
    b.add_argument(
        "--no-anchors", action="store_true", help="skip the whole-model anchors (MXNet, ONNX Runtime, OpenVINO)"
    )
    b.add_argument("--where", action="store_true", help="also profile each offloaded build: where the time goes")
    b.add_argument("--json", action="store_true", help="print the results as JSON (a list for several models)")
    b.add_argument("--out", metavar="FILE", help="also write the results as JSON to FILE, once all are done")
    add_ray(b, "one task per model")
