"""``byoc-workbench``: the stages of a model as diagrams and JSON, and the SSD tools."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
from pathlib import Path

from .errors import WorkbenchError


def load_model(model: str):
    """``(module, user_rules)`` for ``demo`` or a Python file defining ``mod``."""
    from .models import demo

    if model == "demo":
        return demo.demo_module(), None
    if model.endswith(".py") or Path(model).exists():
        return demo.load_model_file(model)
    raise WorkbenchError(
        f"Unknown model '{model}'.", "use demo, ssd, a zoo model's name, or the path of a .py file that defines mod."
    )


def zoo_model(what: str, model_option: str) -> str | None:
    """The zoo model a command names: ``ssd`` stands for ``--model`` (SSD-ResNet50 by default),
    a zoo model's name for itself; None for anything else (``demo``, a file)."""
    from .models import weights

    if what == "ssd":
        return model_option
    return what if what in weights.MODELS else None


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
    zoo_name = zoo_model(args.model, args.ssd_model)
    if zoo_name:
        from .workflow import model_workbench

        wb, _ = model_workbench(zoo_name, args.weights, args.target or "tensorrt", prune_rule, enabled=wanted)
        model_name, mark = zoo_name, wb.mark
    else:
        mod, user_rules = load_model(args.model)
        target, extra = _target_and_extra(args.target, user_rules)
        model_name, mark = args.model, ""
        wb = Workbench(mod, target, enabled=wanted, prune_rule=prune_rule, extra_rules=extra)
    if args.format == "svg":
        render.check_dot()
    for i, s in enumerate(wb.stages):
        dot = wb.dot(s.name, collapse=bool(zoo_name))
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
    from . import workflow

    summary = workflow.import_summary(model=_zoo_model(args), weights=args.weights)
    print(json.dumps(summary, indent=2))
    return 0


def _zoo_model(args) -> str:
    name = zoo_model(args.what, args.ssd_model)
    if name is None:
        from .models import weights

        weights.model_spec(args.what)  # the one-line error that lists the zoo's names
    return name


def cmd_run(args) -> int:
    import numpy as np

    from . import workflow

    model = _zoo_model(args)
    if args.save_outputs:
        writable_dir(Path(args.save_outputs).parent, "pass --save-outputs a path in a directory you can write to")
    result = workflow.run(model=model, weights=args.weights, image=args.image, backend=args.backend, progress=True)
    print(f"{model} on {args.backend}: {result.summary()} — {result.weights_label}")
    print(f"ran on: {result.backend}")
    for note in result.notes:
        print(f"  {note}")
    if args.save_outputs:
        np.savez(args.save_outputs, **result)
        print(f"saved {', '.join(result)} to {args.save_outputs}")
    return 0


def cmd_bench(args) -> int:
    from . import bench

    backends = bench.parse_backends(args.backends)  # a typo fails before minutes of work
    result = bench.bench_model(
        _zoo_model(args),
        backends,
        repeat=args.repeat,
        tvm_repeat=args.tvm_repeat,
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

    if args.list:
        for name, spec in zoo.MODELS.items():
            state = "cached" if zoo.cached_weights(name) else "not cached"
            print(f"{name:38s} {spec.kind:15s} {spec.family:13s} {'x'.join(map(str, spec.input_shape[2:])):8s} {state}")
        return 0
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

    if args.what != "demo":
        built, inputs = timing.model_build(
            args.backend or "onnxruntime",
            not args.no_prune,
            model=_zoo_model(args),
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


ZOO_HELP = "ssd (the model of --model), or a zoo model's name (byoc-workbench prefetch --list names them)"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="byoc-workbench", description="TVM BYOC, stage by stage, on Relax.")
    p.add_argument("-v", "--verbose", action="store_true", help="log diagnostics")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("stages", help="draw every BYOC stage of a model and write summary.json")
    s.add_argument("model", help="demo, ssd, a zoo model's name, or a .py file that defines mod (and optionally rules)")
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
        c.add_argument("what", help=ZOO_HELP)
        c.add_argument("--model", dest="ssd_model", default="ssd_512_resnet50_v1_coco", help="with ssd: the model")
        c.add_argument(
            "--weights",
            help="trained, untrained, or a local .params file (default: the cache, else untrained seeded weights)",
        )
        if name == "import":
            c.add_argument("--summary", action="store_true", help="print the JSON summary (the default output)")
        else:
            c.add_argument(
                "--backend",
                choices=("tvm", "mxnet", "onnxruntime", "tensorrt", "auto"),
                default="tvm",
                help="tvm: TVM alone; mxnet: the Gluon block; onnxruntime, tensorrt, auto: the TensorRT subgraph "
                "offloaded through that backend, TVM for the rest (auto: TensorRT where it runs, else ONNX Runtime)",
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
        c.add_argument("what", help="demo, or " + ZOO_HELP)
        c.add_argument(
            "--backend",
            help="auto, tvm, teaching, onnxruntime or tensorrt (default: teaching for demo, onnxruntime for ssd)",
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
    b.add_argument("what", help=ZOO_HELP)
    b.add_argument(
        "--backends",
        default="tvm,onnxruntime",
        help="comma-separated: tvm, onnxruntime, tensorrt, auto, teaching (default: tvm,onnxruntime)",
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
    f.add_argument(
        "--list", action="store_true", help="list the zoo's models, their task and family, and say which are cached"
    )
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
