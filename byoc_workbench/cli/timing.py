"""``profile`` (every VM call of a partitioned build timed, and the latency map) and ``compare`` (each
offloaded subgraph checked against TVM alone)."""

from __future__ import annotations

import sys
from typing import NamedTuple

from byoc_workbench.backends import registry
from byoc_workbench.backends.codegen import resolve_backend
from byoc_workbench.cli.refs import model_ref
from byoc_workbench.core import files, output_paths, text
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.draw import latency, renderers
from byoc_workbench.measure.bench import builds
from byoc_workbench.measure.check import numerics
from byoc_workbench.measure.time import timing


class Workload(NamedTuple):
    """What ``profile`` and ``compare`` time and check: the build, its inputs, and whether its map is collapsed."""

    built: timing.Built
    inputs: list
    collapse: bool


def _precision_options(args, backend) -> dict[str, str] | None:
    """``--precision`` as the backend's options; a one-line error where ``backend`` would ignore it (a backend
    whose record lists no precisions runs f32)."""
    if not args.precision:
        return None
    if args.precision != "f32" and not registry.take_precision([backend]):
        takes = registry.take_precision(registry.choices())
        raise WorkbenchError(
            f"--precision {args.precision} applies to --backend {' or '.join(takes)} only; "
            f"{backend or 'the default backend'} runs in f32",
            f"add --backend {' or '.join(takes)}, or remove --precision {args.precision}",
        )
    return {"precision": args.precision}


def _workload(args) -> Workload:
    args.backend = resolve_backend(args.backend)
    options = _precision_options(args, args.backend)
    ref = model_ref(args, args.what, ("demo", "zoo", "onnx", "torch"))
    built, inputs = builds.ready(ref, args.backend, not args.no_prune, options)
    return Workload(built, inputs, ref.imported)


def _report_dir(args, stem: str):
    """``--out`` checked for ``stem``.svg and ``stem``.json before any work, or None without ``--out``."""
    if args.out is None:
        return None
    out = output_paths.check_dir(args.out, "--out", [f"{stem}.svg", f"{stem}.json"], output_paths.read_paths(args))
    renderers.require_graphviz()
    return out


def _write_report(out, stem: str, report, data: dict) -> None:
    with files.staged(out) as tmp:
        (tmp / f"{stem}.svg").write_text(report.svg)
        (tmp / f"{stem}.json").write_text(text.to_json(data))
    print(f"wrote {stem}.svg and {stem}.json to {out}", file=sys.stderr)


def cmd_profile(args) -> int:
    out = _report_dir(args, "profile")
    built, inputs, collapse = _workload(args)
    profile = timing.profile(built, inputs, runs=args.runs, max_seconds=args.max_seconds)
    report = latency.report(built, profile, collapse=collapse)
    data = profile.to_json()
    print(text.to_json(data) if args.json else report.text)
    if out:
        _write_report(out, "profile", report, data)
    return 0


def cmd_compare(args) -> int:
    if not args.tolerance >= 0:
        raise WorkbenchError(
            f"--tolerance must be 0 or more, got {args.tolerance}", "pass a relative error such as 1e-3"
        )
    out = _report_dir(args, "compare")
    built, inputs, collapse = _workload(args)
    checked = numerics.compare(built, inputs, tolerance=args.tolerance)
    data = checked.to_json()
    print(text.to_json(data) if args.json else latency.numerics_text(checked))
    if out:
        _write_report(out, "compare", latency.report(built, numerics=checked, collapse=collapse), data)
    return 1 if checked.over else 0
