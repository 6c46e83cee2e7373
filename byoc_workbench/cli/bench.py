"""``bench``: a model timed on several backends and beside its whole-model anchors, in one process."""

# The byoc_workbench modules that load TVM are imported inside the command, so that
# `byoc-workbench --help` does not wait for TVM.

from __future__ import annotations

from byoc_workbench import text
from byoc_workbench.cli.args import BACKEND_HELP, MAX_REPEAT, MAX_TVM_REPEAT, ZOO_HELP, count, no_shapes, shapes
from byoc_workbench.errors import WorkbenchError


def cmd_bench(args) -> int:
    from byoc_workbench import subjects
    from byoc_workbench.measure import bench

    backends = bench.parse_backends(args.backends)  # a typo fails before minutes of work
    if subjects.is_own(args.what, args.torch):
        model = subjects.own_workbench(args.what, args.torch, shapes(args))
        if not model.model.inputs:  # bench lays its tables out by the first input's shape
            raise WorkbenchError(
                f"{model.model.name} takes no inputs: it computes a constant, with nothing to time",
                "bench a model with at least one input (byoc-workbench run checks this one)",
            )
    else:
        no_shapes(args)
        model = subjects.zoo_model(args.what, args.ssd_model)
    result = bench.bench_model(
        model,
        backends,
        repeat=args.repeat,
        tvm_repeat=args.tvm_repeat,
        weights=args.weights,
        image=args.image,
        unpruned=not args.no_unpruned,
        anchors=not args.no_anchors,
        where=args.where,
        max_seconds=args.max_seconds,
    )
    print(text.to_json(result) if args.json else bench.report_text(result))
    return 0


def add_bench(command) -> None:
    b = command(
        "bench",
        "time a model on several backends and its anchors, in one process",
        cmd_bench,
        "zoo",
        "image",
        "budget",
        "own",
    )
    b.add_argument("what", nargs="?", help=ZOO_HELP + ", or a .onnx file (or give --torch)")
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
    b.add_argument("--json", action="store_true", help="print the results as JSON")
