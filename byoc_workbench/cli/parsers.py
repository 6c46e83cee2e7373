"""Every command's parser: its arguments and help, and the name of the function that runs it.

A command is run by ``cmd_<command>`` in a module of its own (:mod:`byoc_workbench.cli.run`, ...), which
imports the floors it runs at the top: here it is named, ``"module:function"``, and
:func:`byoc_workbench.cli.runner` imports it when the command runs. So ``byoc-workbench --help`` and
``byoc-workbench <command> --help`` load argparse and the package's cheap floors only
(``tests/unit/test_cli_help.py`` holds them to that).
"""

from __future__ import annotations

from byoc_workbench.cli.args import (
    BACKEND_HELP,
    FULL_OPS,
    MAX_REPEAT,
    MAX_RUNS,
    MAX_TVM_REPEAT,
    PRECISION_CHOICES,
    PRECISION_HELP,
    ZOO_HELP,
    Commands,
    Parser,
    add_ray,
    count,
    parents,
)


def parser() -> Parser:
    """The ``byoc-workbench`` parser, every command's subparser added in the order ``--help`` lists them."""
    shared = parents()
    p = Parser(prog="byoc-workbench", description="TVM BYOC, stage by stage, on Relax.", parents=[shared["debug"]])
    p.add_argument("-v", "--verbose", action="store_true", help="log diagnostics")
    command = Commands(p.add_subparsers(dest="command", required=True, parser_class=Parser), shared)
    for add in COMMANDS:
        add(command)
    return p


def add_stages(command) -> None:
    s = command(
        "stages",
        "draw every BYOC stage of a model and write summary.json",
        "byoc_workbench.cli.stages:cmd_stages",
        "zoo",
        "own",
    )
    s.add_argument(
        "model",
        nargs="?",
        help="demo, ssd, a zoo model's name, a .py file that defines mod (and optionally rules), or a .onnx file",
    )
    s.add_argument("--out", required=True, help="output directory")
    s.add_argument("--target", help="the target whose rules apply (default: byoc-target; tensorrt for ssd)")
    s.add_argument("--rules", help="comma-separated rules to switch on, as target.rule; '' for none (default: all)")
    s.add_argument("--format", choices=("svg", "dot"), default="svg")
    s.add_argument(
        "--full",
        action="store_true",
        help=f"draw each stage whole, every op at once (default: collapsed past {FULL_OPS} ops, "
        "each top-level group in a file of its own)",
    )
    add_prune(s)


def add_report(command) -> None:
    r = command(
        "report",
        "the partitioning report: what the target takes, what falls back and why (table or JSON)",
        "byoc_workbench.cli.stages:cmd_report",
        "zoo",
        "own",
    )
    r.add_argument("model", nargs="?", help="demo, ssd, a zoo model's name, a .py or .onnx file (or give --torch)")
    r.add_argument("--target", help="the target whose rules apply (default: tensorrt; byoc-target for demo)")
    r.add_argument("--json", action="store_true", help="print the report as JSON")
    r.add_argument("--out", help="a directory for report.json, report.txt and prune.svg (the prune stage)")
    add_prune(r)


def add_prune(parser: Parser) -> None:
    """``--no-prune`` or ``--min-mac-ops``: one says prune nothing, the other how to prune, so never both."""
    prune = parser.add_mutually_exclusive_group()
    prune.add_argument("--no-prune", action="store_true", help="keep every subgraph")
    prune.add_argument(  # None: not given, so that --min-mac-ops 1 --no-prune is refused too
        "--min-mac-ops", type=count(0), help="prune subgraphs with fewer MAC ops than this (default 1)"
    )


def add_import(command) -> None:
    i = command(
        "import",
        "import a GluonCV model into Relax and print its summary as JSON",
        "byoc_workbench.cli.run:cmd_import",
        "zoo",
    )
    i.add_argument("what", help=ZOO_HELP)
    # The summary is what import prints; the flag stays because scripts, docs and tests pass it.
    i.add_argument("--summary", action="store_true", help="print the JSON summary (what import always prints)")


def add_run(command) -> None:
    r = command(
        "run",
        "run a model and check it against its own framework",
        "byoc_workbench.cli.run:cmd_run",
        "zoo",
        "image",
        "own",
    )
    r.add_argument("what", nargs="?", help=ZOO_HELP + ", or a .onnx file (or give --torch)")
    r.add_argument(
        "--backend",
        default="tvm",
        help=f"mxnet (the Gluon block), {BACKEND_HELP}. tvm: TVM alone; the others: the TensorRT subgraphs "
        "they can compile offloaded through them, TVM for the rest (auto: TensorRT where it runs, else ONNX Runtime)",
    )
    r.add_argument("--save-outputs", help="write the outputs (ids, scores and boxes for a detector) to this .npz file")


def _add_measured(command, name: str, helptext: str, runner: str, *uses: str) -> Parser:
    """A command that builds a model as offloaded (``profile``, ``compare``), with their common options."""
    c = command(name, helptext, runner, "zoo", "image", "own", *uses)
    c.add_argument("what", nargs="?", help="demo, " + ZOO_HELP + ", or a .onnx file (or give --torch)")
    c.add_argument(
        "--backend",
        help=f"{BACKEND_HELP} (default: teaching for demo, onnxruntime for ssd). A codegen registered "
        "with rules of its own partitions the demo with them",
    )
    c.add_argument("--no-prune", action="store_true", help="keep every subgraph (the unpruned build)")
    c.add_argument("--precision", choices=PRECISION_CHOICES, help=PRECISION_HELP)
    c.add_argument("--out", help=f"a directory for {name}.svg (the map) and {name}.json")
    c.add_argument("--json", action="store_true", help="print the data as JSON instead of tables")
    return c


def add_profile(command) -> None:
    p = _add_measured(
        command,
        "profile",
        "time every VM call of a partitioned build and draw the latency map",
        "byoc_workbench.cli.timing:cmd_profile",
        "budget",
    )
    p.add_argument(
        "--runs",
        type=count(1, MAX_RUNS),
        default=10,
        help=f"timed runs, 1 to {MAX_RUNS}; each call's median is kept (default 10)",
    )


def add_compare(command) -> None:
    c = _add_measured(
        command,
        "compare",
        "check each offloaded subgraph against TVM alone (exit 1 when one is over the tolerance)",
        "byoc_workbench.cli.timing:cmd_compare",
    )
    c.add_argument("--tolerance", type=float, default=1e-3, help="largest relative error (default 1e-3)")


def add_bench(command) -> None:
    b = command(
        "bench",
        "time models on several backends and their anchors, each in one process",
        "byoc_workbench.cli.bench:cmd_bench",
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
        type=count(1, MAX_TVM_REPEAT),  # None: not given, so that it is refused without tvm in --backends
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


def add_search(command) -> None:
    s = command(
        "search",
        "let the measurements choose: the fastest placement of a model's subgraphs across backends",
        "byoc_workbench.cli.search:cmd_search",
        "zoo",
        "image",
        "own",
    )
    s.add_argument("model", nargs="?", help="demo, ssd, a zoo model's name, a .py or .onnx file (or give --torch)")
    s.add_argument(
        "--precision",
        choices=PRECISION_CHOICES,
        help="also measure the best openvino placements at this precision, beside f32 (default: f32 only)",
    )
    s.add_argument("--target", help="the target whose rules make the units (default: tensorrt; byoc-target for demo)")
    for flag, low, high, default, what in (
        ("--runs", 1, MAX_RUNS, 10, "instrumented runs per build (default 10)"),
        ("--seams", 0, 3, 1, "seams per unit cut in pieces, 0 to 3 (default 1)"),
        ("--top", 1, 10, 3, "placements built end to end, 1 to 10 (default 3)"),
    ):
        s.add_argument(flag, type=count(low, high), default=default, help=what)
    s.add_argument(
        "--backends",
        default="onnxruntime,openvino,tvm",
        help="comma-separated backends to place subgraphs on; tvm is the host (default: onnxruntime,openvino,tvm)",
    )
    cache = s.add_mutually_exclusive_group()  # one says measure everything, the other nothing
    cache.add_argument(
        "--no-cache", action="store_true", help="measure and compile everything again (the caches are still written)"
    )
    cache.add_argument(
        "--cached", action="store_true", help="measure nothing: use the cache, or fail saying what is missing"
    )
    s.add_argument("--no-anchors", action="store_true", help="skip the whole-model anchors")
    s.add_argument("--json", action="store_true", help="print the result as JSON")
    s.add_argument("--out", help="a directory for search.json, search.txt and search.svg (the chosen placement)")
    add_ray(s, "one task per candidate build")


def add_prefetch(command) -> None:
    f = command(
        "prefetch", "download model weights into the cache ahead of a workshop", "byoc_workbench.cli.zoo:cmd_prefetch"
    )
    f.add_argument("--models", help="comma-separated model names (default: all)")
    f.add_argument(
        "--list", action="store_true", help="list the zoo's models, their task and family, and say which are cached"
    )


def add_doctor(command) -> None:
    d = command(
        "doctor",
        "check this machine for the workshop: what is missing, and how to get it",
        "byoc_workbench.cli.doctor:cmd_doctor",
    )
    d.add_argument("--json", action="store_true", help="print the report as JSON")


def add_export(command) -> None:
    e = command(
        "export",
        "run notebooks top to bottom and write each, outputs and all, as .ipynb and as HTML readable offline",
        "byoc_workbench.cli.export:cmd_export",
    )
    e.add_argument("notebooks", nargs="+", help=".ipynb files to execute and export")
    e.add_argument("--out", default="build", help="output folder (default: build)")
    e.add_argument("--timeout", type=count(0), default=1800, help="seconds per cell (default: 1800; 0: no limit)")


# The commands in the order --help lists them.
COMMANDS = (
    add_stages,
    add_import,
    add_run,
    add_profile,
    add_compare,
    add_bench,
    add_report,
    add_search,
    add_prefetch,
    add_doctor,
    add_export,
)
