"""``profile`` (every VM call of a partitioned build timed, and the latency map) and ``compare`` (each
offloaded subgraph checked against TVM alone)."""

# The floors a command runs are imported inside it: at the top, they would make every command and
# `byoc-workbench --help` take seconds longer to import (pyproject.toml: per-file-ignores).

from __future__ import annotations

import sys

from byoc_workbench import files, text
from byoc_workbench.cli.args import (
    BACKEND_HELP,
    MAX_RUNS,
    PRECISION_HELP,
    PRECISIONS,
    ZOO_HELP,
    count,
    model_ref,
    precision_options,
)
from byoc_workbench.errors import WorkbenchError


def _measured(args) -> tuple:
    """``(Built, inputs, collapse)`` for ``profile`` and ``compare``."""
    from byoc_workbench import subjects
    from byoc_workbench.backends.codegen import resolve_backend
    from byoc_workbench.measure.bench import builds, byom
    from byoc_workbench.measure.time import timing

    args.backend = resolve_backend(args.backend)
    options = precision_options(args, args.backend)
    ref = model_ref(args, args.what, ("demo", "zoo", "onnx", "torch"))
    if ref.kind == "demo":  # partitioned with the rules of the backend's own target, when it has one
        built, inputs = builds.demo_build(args.backend, not args.no_prune, options)
        return built, inputs, False
    subject = subjects.load(ref)
    found = byom.offloaded(subject.workbench, args.backend or "onnxruntime", not args.no_prune, options)
    return timing.build(found, mark=subject.mark), subject.inputs, True


def _report_dir(args, stem: str):
    """``--out`` checked for ``stem``.svg and ``stem``.json before any work, or None without ``--out``."""
    from byoc_workbench.draw import render

    if args.out is None:
        return None
    out = files.check_dir(args.out, "--out", [f"{stem}.svg", f"{stem}.json"])
    render.check_dot()
    return out


def _write_report(out, stem: str, report, data: dict) -> None:
    with files.staged(out) as tmp:
        (tmp / f"{stem}.svg").write_text(report.svg)
        (tmp / f"{stem}.json").write_text(text.to_json(data))
    print(f"wrote {stem}.svg and {stem}.json to {out}", file=sys.stderr)


def cmd_profile(args) -> int:
    from byoc_workbench.draw import latency
    from byoc_workbench.measure.time import timing

    out = _report_dir(args, "profile")
    built, inputs, collapse = _measured(args)
    profile = timing.profile(built, inputs, runs=args.runs, max_seconds=args.max_seconds)
    report = latency.report(built, profile, collapse=collapse)
    data = profile.to_json()
    print(text.to_json(data) if args.json else report.text)
    if out:
        _write_report(out, "profile", report, data)
    return 0


def cmd_compare(args) -> int:
    from byoc_workbench.draw import latency
    from byoc_workbench.measure.check import numerics

    if not args.tolerance >= 0:
        raise WorkbenchError(
            f"--tolerance must be 0 or more, got {args.tolerance}", "pass a relative error such as 1e-3"
        )
    out = _report_dir(args, "compare")
    built, inputs, collapse = _measured(args)
    checked = numerics.compare(built, inputs, tolerance=args.tolerance)
    data = checked.to_json()
    print(text.to_json(data) if args.json else latency.numerics_text(checked))
    if out:
        _write_report(out, "compare", latency.report(built, numerics=checked, collapse=collapse), data)
    return 1 if checked.over else 0


def _add_measured(command, name: str, helptext: str, func, *uses: str):
    """A command that builds a model as offloaded (``profile``, ``compare``), with their common options."""
    c = command(name, helptext, func, "zoo", "image", "own", *uses)
    c.add_argument("what", nargs="?", help="demo, " + ZOO_HELP + ", or a .onnx file (or give --torch)")
    c.add_argument(
        "--backend",
        help=f"{BACKEND_HELP} (default: teaching for demo, onnxruntime for ssd). A codegen registered "
        "with rules of its own partitions the demo with them",
    )
    c.add_argument("--no-prune", action="store_true", help="keep every subgraph (the unpruned build)")
    c.add_argument("--precision", choices=PRECISIONS, help=PRECISION_HELP)
    c.add_argument("--out", help=f"a directory for {name}.svg (the map) and {name}.json")
    c.add_argument("--json", action="store_true", help="print the data as JSON instead of tables")
    return c


def add_profile(command) -> None:
    p = _add_measured(
        command, "profile", "time every VM call of a partitioned build and draw the latency map", cmd_profile, "budget"
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
        cmd_compare,
    )
    c.add_argument("--tolerance", type=float, default=1e-3, help="largest relative error (default 1e-3)")
