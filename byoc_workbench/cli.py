"""``byoc-workbench``: the stages of a model as diagrams and JSON, and the SSD tools."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
from pathlib import Path

from .backends.base import BUILTIN
from .errors import WorkbenchError

# What --backend takes; a .py file that registers a codegen of your own is loaded (backends.codegen).
BACKEND_HELP = f"{', '.join(('auto', 'tvm', *BUILTIN))}, or a .py file that calls register_codegen"


def load_model(model: str):
    """``(module, user_rules)`` for ``demo`` or a Python file defining ``mod``."""
    from .models import demo

    if model == "demo":
        return demo.demo_module(), None
    if model.endswith(".py") or Path(model).exists():
        return demo.load_model_file(model)
    raise WorkbenchError(f"Unknown model '{model}'.", "use demo, ssd, or the path of a .py file that defines mod.")


def _target_and_extra(target_name: str | None, user_rules):
    """The target whose rules apply, plus the user's own rules for it."""
    from .flow.rules import Rule, Target, get_target

    if user_rules is not None:
        bad = [r for r in user_rules if not isinstance(r, Rule)]
        if bad:
            raise WorkbenchError(
                f"rules must hold byoc_workbench.flow.rules.Rule values; got {type(bad[0]).__name__}.",
                "build them with rules.op_rule(...) or rules.pattern_rule(...).",
            )
        names = sorted({r.target for r in user_rules})
        name = target_name or (names[0] if names else "byoc-target")
        own = tuple(r for r in user_rules if r.target == name)
        try:
            return get_target(name), own
        except WorkbenchError:
            return Target(name, own, "rules from the model file"), ()
    return get_target(target_name or "byoc-target"), ()


def writable_dir(path: str | Path, fix: str = "pass --out a directory you can write to") -> Path:
    """``path`` as a directory, created if needed, after checking that a file can be written in it.

    Checked before any work starts, so a bad path fails in a second, not after a model build.
    """
    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=out).close()
    except OSError as err:
        raise WorkbenchError(f"Cannot write to {out} ({err.strerror or err})", fix) from None
    return out


def cmd_stages(args) -> int:
    from .draw import render
    from .flow import stages, summary
    from .flow.rules import parse_rule_list
    from .session import Workbench

    if args.min_mac_ops < 0:
        raise WorkbenchError(
            f"--min-mac-ops must be 0 or more, got {args.min_mac_ops}",
            "pass a count of MAC ops such as 1 (the default), or --no-prune to keep every subgraph",
        )
    out = writable_dir(args.out)
    wanted = parse_rule_list(args.rules)  # Workbench rejects unknown names
    prune_rule = stages.keep_all if args.no_prune else stages.no_mac(args.min_mac_ops)
    if args.model == "ssd":
        from .models.ssd import model_workbench

        wb, _ = model_workbench(args.ssd_model, args.weights, args.target or "tensorrt", prune_rule, enabled=wanted)
        model_name, mark = args.ssd_model, wb.mark
    else:
        mod, user_rules = load_model(args.model)
        target, extra = _target_and_extra(args.target, user_rules)
        model_name, mark = args.model, ""
        wb = Workbench(mod, target, enabled=wanted, prune_rule=prune_rule, extra_rules=extra)
    if args.format == "svg":
        render.check_dot()
    for i, s in enumerate(wb.stages):
        dot = wb.dot(s.name, collapse=args.model == "ssd")
        render.write(dot, out / f"{i:02d}-{s.name}.{args.format}", args.format)
    summary = summary.summary_json(model_name, wb.stages)
    if mark:
        summary["weights"] = mark
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    for s in wb.stages:
        print(
            f"{s.name:10s} ops={s.op_count:4d} subgraphs={len(s.subgraphs)}"
            + "".join(f"\n  note: {n}" for n in s.notes)
        )
    print(f"wrote {len(wb.stages)} diagrams and summary.json to {out}")
    return 0


def cmd_import(args) -> int:
    from .models import ssd

    summary = ssd.import_summary(model=args.ssd_model, weights=args.weights)
    print(json.dumps(summary, indent=2))
    return 0


def cmd_run(args) -> int:
    import numpy as np

    from .backends.codegen import resolve_backend
    from .models import ssd

    if args.save_outputs:
        writable_dir(Path(args.save_outputs).parent, "pass --save-outputs a path in a directory you can write to")
    args.backend = resolve_backend(args.backend)
    result = ssd.run(model=args.ssd_model, weights=args.weights, image=args.image, backend=args.backend, progress=True)
    kept = int((np.asarray(result["ids"]) >= 0).sum())
    print(f"{args.ssd_model} on {args.backend}: {kept} detections — {result.weights_label}")
    print(f"ran on: {result.backend}")
    for note in result.notes:
        print(f"  {note}")
    if args.save_outputs:
        np.savez(args.save_outputs, ids=result["ids"], scores=result["scores"], boxes=result["boxes"])
        print(f"saved ids, scores and boxes to {args.save_outputs}")
    return 0


def cmd_bench(args) -> int:
    from . import bench

    backends = bench.parse_backends(args.backends)  # a typo fails before minutes of work
    result = bench.bench_ssd(
        backends,
        repeat=args.repeat,
        tvm_repeat=args.tvm_repeat,
        model=args.ssd_model,
        weights=args.weights,
        image=args.image,
        unpruned=not args.no_unpruned,
        anchors=not args.no_anchors,
        where=args.where,
    )
    print(json.dumps(result, indent=2) if args.json else bench.report_text(result))
    return 0


def cmd_prefetch(args) -> int:
    from .models import zoo

    report = zoo.prefetch(args.models.split(",") if args.models else None)
    for name, r in report.items():
        if r["ok"]:
            print(f"ok      {name}: {r['path']}")
        else:
            print(f"MISSING {name}: {r['error']}\n        by hand: {r['how_to_fix']}")
    missing = sum(not r["ok"] for r in report.values())
    print(f"{len(report) - missing} of {len(report)} models cached in {zoo.cache_dir()}")
    return 1 if missing else 0


def cmd_doctor(args) -> int:
    from . import doctor

    return doctor.main(as_json=args.json)


def _measured(args) -> tuple:
    """``(Built, inputs, collapse)`` for ``profile`` and ``compare``."""
    from . import timing
    from .backends.codegen import resolve_backend

    args.backend = resolve_backend(args.backend)
    if args.what == "ssd":
        built, inputs = timing.ssd_build(
            args.backend or "onnxruntime",
            not args.no_prune,
            model=args.ssd_model,
            weights=args.weights,
            image=args.image,
        )
        return built, inputs, True
    built, inputs = timing.demo_build(args.backend, not args.no_prune)
    return built, inputs, False


def _write_report(out, stem: str, report, data: dict) -> None:
    (out / f"{stem}.svg").write_text(report.svg)
    (out / f"{stem}.json").write_text(json.dumps(data, indent=2))
    print(f"wrote {stem}.svg and {stem}.json to {out}", file=sys.stderr)


def cmd_profile(args) -> int:
    from . import timing
    from .draw import latency, render

    if args.runs < 1:
        raise WorkbenchError(f"--runs must be 1 or more, got {args.runs}", "pass --runs 10 or so")
    out = writable_dir(args.out) if args.out else None
    if out:
        render.check_dot()
    built, inputs, collapse = _measured(args)
    profile = timing.profile(built, inputs, runs=args.runs)
    report = latency.report(built, profile, collapse=collapse)
    data = profile.to_json()
    print(json.dumps(data, indent=2) if args.json else report.text)
    if out:
        _write_report(out, "profile", report, data)
    return 0


def cmd_compare(args) -> int:
    from . import timing
    from .draw import latency, render

    if not args.tolerance >= 0:
        raise WorkbenchError(
            f"--tolerance must be 0 or more, got {args.tolerance}", "pass a relative error such as 1e-3"
        )
    out = writable_dir(args.out) if args.out else None
    if out:
        render.check_dot()
    built, inputs, collapse = _measured(args)
    numerics = timing.compare(built, inputs, tolerance=args.tolerance)
    data = numerics.to_json()
    print(json.dumps(data, indent=2) if args.json else latency.numerics_text(numerics))
    if out:
        _write_report(out, "compare", latency.report(built, numerics=numerics, collapse=collapse), data)
    return 1 if numerics.over else 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="byoc-workbench", description="TVM BYOC, stage by stage, on Relax.")
    p.add_argument("-v", "--verbose", action="store_true", help="log diagnostics")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("stages", help="draw every BYOC stage of a model and write summary.json")
    s.add_argument("model", help="demo, ssd, or a .py file that defines mod (and optionally rules)")
    s.add_argument("--out", required=True, help="output directory")
    s.add_argument("--target", help="the target whose rules apply (default: byoc-target; tensorrt for ssd)")
    s.add_argument("--rules", help="comma-separated rules to switch on, as target.rule; '' for none (default: all)")
    s.add_argument("--format", choices=("svg", "dot"), default="svg")
    s.add_argument("--no-prune", action="store_true", help="keep every subgraph")
    s.add_argument(
        "--min-mac-ops", type=int, default=1, help="prune subgraphs with fewer MAC ops than this (default 1)"
    )
    s.add_argument(
        "--model", dest="ssd_model", default="ssd_512_resnet50_v1_coco", help="with ssd: the GluonCV model name"
    )
    s.add_argument(
        "--weights",
        help="with ssd: trained, untrained, or a local .params file "
        "(default: the cache, else untrained seeded weights)",
    )
    s.set_defaults(func=cmd_stages)

    for name, helptext, func in (
        ("import", "import a GluonCV model into Relax", cmd_import),
        ("run", "run a GluonCV model", cmd_run),
    ):
        c = sub.add_parser(name, help=helptext)
        c.add_argument("what", choices=("ssd",))
        c.add_argument("--model", dest="ssd_model", default="ssd_512_resnet50_v1_coco")
        c.add_argument(
            "--weights",
            help="trained, untrained, or a local .params file (default: the cache, else untrained seeded weights)",
        )
        if name == "import":
            c.add_argument("--summary", action="store_true", help="print the JSON summary (the default output)")
        else:
            c.add_argument(
                "--backend",
                default="tvm",
                help=f"mxnet (the Gluon block), {BACKEND_HELP}. tvm: TVM alone; the others: the TensorRT "
                "subgraphs they can compile offloaded through them, TVM for the rest (auto: TensorRT where it "
                "runs, else ONNX Runtime)",
            )
            c.add_argument("--image", help="a JPEG or PNG (default: the picture shipped with the package)")
            c.add_argument("--save-outputs", help="write ids, scores and boxes to this .npz")
        c.set_defaults(func=func)

    for name, helptext, func in (
        ("profile", "time every VM call of a partitioned build and draw the latency map", cmd_profile),
        (
            "compare",
            "check each offloaded subgraph against TVM alone (exit 1 when one is over the tolerance)",
            cmd_compare,
        ),
    ):
        c = sub.add_parser(name, help=helptext)
        c.add_argument("what", choices=("demo", "ssd"))
        c.add_argument(
            "--backend",
            help=f"{BACKEND_HELP} (default: teaching for demo, onnxruntime for ssd). A codegen registered "
            "with rules of its own partitions the demo with them",
        )
        c.add_argument("--no-prune", action="store_true", help="keep every subgraph (the unpruned build)")
        c.add_argument("--out", help=f"a directory for {name}.svg (the map) and {name}.json")
        c.add_argument("--json", action="store_true", help="print the data as JSON instead of tables")
        c.add_argument("--model", dest="ssd_model", default="ssd_512_resnet50_v1_coco", help="with ssd: the model")
        c.add_argument("--weights", help="with ssd: trained, untrained, or a local .params file")
        c.add_argument("--image", help="with ssd: a JPEG or PNG (default: the picture shipped with the package)")
        if name == "profile":
            c.add_argument("--runs", type=int, default=10, help="timed runs; each call's median is kept (default 10)")
        else:
            c.add_argument("--tolerance", type=float, default=1e-3, help="largest relative error (default 1e-3)")
        c.set_defaults(func=func)

    b = sub.add_parser("bench", help="time a model on several backends and two anchors, in one process")
    b.add_argument("what", choices=("ssd",))
    b.add_argument(
        "--backends",
        default="tvm,onnxruntime",
        help=f"comma-separated: {BACKEND_HELP} (default: tvm,onnxruntime)",
    )
    b.add_argument("--repeat", type=int, default=10, help="timed runs per backend after warm-up (default 10)")
    b.add_argument(
        "--tvm-repeat", type=int, default=1, help="timed runs of TVM alone, tens of seconds each (default 1)"
    )
    b.add_argument("--no-unpruned", action="store_true", help="skip the offloaded build without pruning")
    b.add_argument("--no-anchors", action="store_true", help="skip MXNet and ONNX Runtime on the whole model")
    b.add_argument("--where", action="store_true", help="also profile each offloaded build: where the time goes")
    b.add_argument("--json", action="store_true", help="print the results as JSON")
    b.add_argument("--model", dest="ssd_model", default="ssd_512_resnet50_v1_coco")
    b.add_argument("--weights", help="trained, untrained, or a local .params file")
    b.add_argument("--image", help="a JPEG or PNG (default: the picture shipped with the package)")
    b.set_defaults(func=cmd_bench)

    f = sub.add_parser("prefetch", help="download model weights into the cache ahead of a workshop")
    f.add_argument("--models", help="comma-separated model names (default: all)")
    f.set_defaults(func=cmd_prefetch)

    d = sub.add_parser("doctor", help="check this machine for the workshop: what is missing, and how to get it")
    d.add_argument("--json", action="store_true", help="print the report as JSON")
    d.set_defaults(func=cmd_doctor)
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        return args.func(args)
    except WorkbenchError as err:  # the user's mistake; anything else is a bug and keeps its traceback
        # With -v the traceback (and the error it was raised from) is logged too.
        logging.getLogger(__name__).info("where the error was raised:", exc_info=True)
        print(err.line, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
