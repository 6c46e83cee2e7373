"""``byoc-workbench``: the stages of a model as diagrams and JSON, and the SSD tools.

Everything a user can get wrong ends in one line, ``error: <cause>. Fix: <fix>.``,
and exit status 2: bad arguments (argparse's own errors too), bad files, bad
models. Ctrl-C ends in one line and exit status 130. ``--traceback`` (or
``BYOC_WORKBENCH_DEBUG=1``) prints the whole trace as well. Output paths are
checked before any work starts, and results are written atomically
(:mod:`byoc_workbench.outputs`).
"""

from __future__ import annotations

import argparse
import difflib
import io
import itertools
import json
import logging
import os
import re
import sys
import traceback
from pathlib import Path

from . import outputs
from .backends.base import BUILTIN
from .errors import WorkbenchError

# Documented bounds (README, "The command line"): beyond them a run takes hours.
MAX_REPEAT = 1000
MAX_TVM_REPEAT = 20
MAX_RUNS = 1000
MAX_SECONDS = 600.0
DEFAULT_SSD = "ssd_512_resnet50_v1_coco"
# What --backend takes; a .py file that registers a codegen of your own is loaded (backends.codegen).
BACKEND_HELP = f"{', '.join(('auto', 'tvm', *BUILTIN))}, or a .py file that calls register_codegen"
NAME_A_MODEL = "name one: demo, ssd, a zoo model's name, a .py or .onnx file, or --torch module:factory"
PRECISIONS = ("f32", "bf16", "f16")  # the openvino backend's (backends/openvino.py); it imports openvino
PRECISION_HELP = "with --backend openvino: its inference precision (default f32; bf16 and f16 are faster, less exact)"


def load_model(model: str):
    """``(module, user_rules)`` for ``demo`` or a Python file defining ``mod``."""
    if model == "demo":
        from .models import demo

        return demo.demo_module(), None
    if model.endswith(".py") or Path(model).exists():
        from .models.user_file import load_model_file

        return load_model_file(model)
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


def is_own(what: str | None, args) -> bool:
    """An ONNX file or ``--torch``: the user's own model (see :mod:`byoc_workbench.byom`)."""
    return bool(getattr(args, "torch", None)) or (what or "").endswith(".onnx")


def _shapes(args):
    """``--input-shape`` as ``{name: shape}``, one shape, or None."""
    given = getattr(args, "input_shape", None) or []
    named = dict(g for g in given if g[0] is not None)
    plain = [g[1] for g in given if g[0] is None]
    if plain and (named or len(plain) > 1):
        raise WorkbenchError(
            "--input-shape was given without a name for a model with several inputs",
            "name each: --input-shape data=1,3,224,224",
        )
    return plain[0] if plain else (named or None)


def own_workbench(what, args, target=None, enabled=None, prune_rule=None):
    """The workbench of an ONNX file or of ``--torch module:factory`` (default target: tensorrt)."""
    from .session import Workbench

    target = target or "tensorrt"
    shapes = _shapes(args)
    if getattr(args, "torch", None):
        from .models.torch_import import import_spec

        if what:
            raise WorkbenchError(f"Both {what} and --torch were given", "give one model: a file, or --torch")
        model = import_spec(args.torch, shape=shapes if isinstance(shapes, list) else [1, 3, 224, 224])
        return Workbench.from_model(model, target, enabled, prune_rule)
    return Workbench.from_onnx(what, target, input_shapes=shapes, enabled=enabled, prune_rule=prune_rule)


def _any_workbench(args, enabled, prune_rule) -> tuple:
    """``(Workbench, name, collapse)`` for ``args.model``: demo, ssd, a zoo model, a .py or .onnx file, --torch."""
    from .flow.rules import target_and_extra
    from .session import Workbench

    zoo_name = zoo_model(args.model, args.ssd_model)
    if zoo_name:
        from .workflow import model_workbench

        wb, _ = model_workbench(zoo_name, args.weights, args.target or "tensorrt", prune_rule, enabled=enabled)
        return wb, zoo_name, True
    if is_own(args.model, args):
        wb = own_workbench(args.model, args, args.target, enabled, prune_rule)
        return wb, wb.model.name, True
    if args.model is None:
        raise WorkbenchError("A model is required: model, or --torch MODULE:FACTORY", NAME_A_MODEL)
    mod, user_rules = load_model(args.model)
    target, extra = target_and_extra(args.target, user_rules, args.model)
    return Workbench(mod, target, enabled=enabled, prune_rule=prune_rule, extra_rules=extra), args.model, False


FULL_OPS = 300  # a model of at most this many ops is drawn whole by default; past it, collapsed


def _file_part(node_id: str) -> str:
    """A node id as part of a file name: ``main/stage0.`` -> ``main-stage0``."""
    return re.sub(r"[^A-Za-z0-9_]+", "-", node_id).strip("-")


GROUP_FILES = 24  # at most this many top-level groups get a file of their own


def top_groups(g) -> list:
    """The closed groups (folded blocks and runs) of a collapsed graph's top level, in drawing order:
    those drawn in a function's box, or in a box merge will draw, not inside an opened call."""
    top = {c.id for c in g.clusters.values() if c.kind in ("function", "layout", "region")}
    return [n.id for n in g.nodes.values() if n.kind == "fold" and n.cluster in top]


def cmd_stages(args) -> int:
    from .draw import render
    from .flow import stages, summary
    from .flow.rules import parse_rule_list

    names = [f"{i:02d}-{s}.{args.format}" for i, s in enumerate(stages.STAGES)] + ["summary.json"]
    out = outputs.check_dir(args.out, "--out", names)
    wanted = parse_rule_list(args.rules)  # Workbench rejects unknown names
    prune_rule = stages.keep_all if args.no_prune else stages.no_mac(args.min_mac_ops)
    if args.format == "svg":
        render.check_dot()
    wb, model_name, collapse = _any_workbench(args, wanted, prune_rule)
    mark = wb.mark
    data = summary.summary_json(model_name, wb.stages)
    if mark:
        data["weights"] = mark
    ops = wb.stages[0].op_count
    collapse = not args.full and (collapse or ops > FULL_OPS)
    if args.full:
        print(f"drawing the full pictures: every stage with all its {ops:,} ops laid out at once")
    elif collapse:
        print(f"a full picture would lay out all {ops:,} ops of each stage at once: --full draws them")
    # Beside the collapsed views, each top-level group of the source stage (the model's own blocks) opened.
    groups = top_groups(wb.graph("source", collapse=True)) if collapse else []
    if len(groups) > GROUP_FILES:
        print(
            f"the source stage has {len(groups)} top-level groups: none gets a file of its own (at most {GROUP_FILES})"
        )
        groups = []
    extra = [(f"00-source--{_file_part(gid)}.{args.format}", gid) for gid in groups]
    outputs.check_dir(args.out, "--out", [n for n, _ in extra])
    with outputs.staged(out) as tmp:  # every diagram and summary.json, or none of them
        stage_views = ((wb.dot(s.name, collapse=collapse), tmp / name) for name, s in zip(names, wb.stages))
        group_views = ((wb.dot("source", expand=(gid,), collapse=True), tmp / name) for name, gid in extra)
        render.write_all(itertools.chain(stage_views, group_views), args.format)
        (tmp / "summary.json").write_text(json.dumps(data, indent=2))
    for s in wb.stages:
        print(
            f"{s.name:10s} ops={s.op_count:4d} subgraphs={len(s.subgraphs)}"
            + "".join(f"\n  note: {n}" for n in s.notes)
        )
    opened = f", {len(extra)} opened groups" if extra else ""
    print(f"wrote {len(wb.stages)} {'collapsed ' if collapse else ''}diagrams{opened} and summary.json to {out}")
    return 0


def cmd_import(args) -> int:
    from . import workflow

    summary = workflow.import_summary(model=_zoo_model(args), weights=args.weights)
    print(json.dumps(summary, indent=2))
    return 0


def _zoo_model(args) -> str:
    """The zoo model ``args.what`` names, or the one-line error listing the zoo's names."""
    name = zoo_model(args.what, args.ssd_model)
    if args.what is None:
        raise WorkbenchError("A model is required: model, or --torch MODULE:FACTORY", NAME_A_MODEL)
    if name is None:
        from .models import weights

        weights.model_spec(args.what)  # the one-line error that lists the zoo's names
    return name


def cmd_run(args) -> int:
    import numpy as np

    from . import workflow
    from .backends.codegen import resolve_backend

    save = outputs.check_file(args.save_outputs, "--save-outputs") if args.save_outputs is not None else None
    args.backend = resolve_backend(args.backend)
    if is_own(args.what, args):
        return _run_own(args, save)
    model = _zoo_model(args)
    result = workflow.run(model=model, weights=args.weights, image=args.image, backend=args.backend, progress=True)
    print(f"{model} on {args.backend}: {result.summary()} — {result.weights_label}")
    print(f"ran on: {result.backend}")
    for note in result.notes:
        print(f"  {note}")
    if save is not None:
        buffer = io.BytesIO()
        np.savez(buffer, **result)
        outputs.write_file(save, buffer.getvalue())
        print(f"saved {', '.join(result)} to {save}")
    return 0


def _run_own(args, save) -> int:
    import numpy as np

    from . import byom

    if args.backend == "mxnet":
        raise WorkbenchError("--backend mxnet runs GluonCV models only", "use tvm, onnxruntime, tensorrt or auto")
    wb = own_workbench(args.what, args)
    result = byom.run(wb, args.backend, progress=True)
    print(byom.run_text(result))
    if save:
        buffer = io.BytesIO()
        np.savez(buffer, **{f"output{k}": o for k, o in enumerate(result["outputs"])})
        outputs.write_file(save, buffer.getvalue())
        print(f"saved {len(result['outputs'])} outputs to {save}")
    return 0 if result["check"]["equal"] else 1


def cmd_report(args) -> int:
    from .draw import render
    from .flow import stages
    from .flow.report import partition_report

    out = outputs.check_dir(args.out, "--out", ["report.json", "report.txt", "prune.svg"]) if args.out else None
    if out:
        render.check_dot()
    prune_rule = stages.keep_all if args.no_prune else stages.no_mac(args.min_mac_ops)
    wb, name, collapse = _any_workbench(args, None, prune_rule)
    report = partition_report(wb, name)
    print(json.dumps(report.to_json(), indent=2) if args.json else report.text())
    if out:
        with outputs.staged(out) as tmp:
            (tmp / "report.json").write_text(json.dumps(report.to_json(), indent=2))
            (tmp / "report.txt").write_text(report.text() + "\n")
            render.write(wb.dot("prune", collapse=collapse), tmp / "prune.svg", "svg")
        print(f"wrote report.json, report.txt and prune.svg to {out}", file=sys.stderr)
    return 0


def cmd_bench(args) -> int:
    from . import bench

    backends = bench.parse_backends(args.backends)  # a typo fails before minutes of work
    if is_own(args.what, args):
        from . import byom

        result = byom.bench(
            own_workbench(args.what, args),
            backends,
            repeat=args.repeat,
            tvm_repeat=args.tvm_repeat,
            unpruned=not args.no_unpruned,
            anchors=not args.no_anchors,
            max_seconds=args.max_seconds,
        )
        print(json.dumps(result, indent=2) if args.json else bench.report_text(result))
        return 0
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
        max_seconds=args.max_seconds,
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
    from .backends.codegen import resolve_backend

    args.backend = resolve_backend(args.backend)
    options = {"precision": args.precision} if args.precision else None
    if is_own(args.what, args):
        from . import byom

        wb = own_workbench(args.what, args)
        found = byom.offloaded(wb, args.backend or "onnxruntime", not args.no_prune, options)
        return timing.build(found, mark=wb.mark), wb.model.inputs, True
    if args.what != "demo":
        built, inputs = timing.model_build(
            args.backend or "onnxruntime",
            not args.no_prune,
            model=_zoo_model(args),
            weights=args.weights,
            image=args.image,
            options=options,
        )
        return built, inputs, True
    built, inputs = timing.demo_build(args.backend, not args.no_prune, options)
    return built, inputs, False


def _report_dir(args, stem: str):
    """``--out`` checked for ``stem``.svg and ``stem``.json before any work, or None without ``--out``."""
    from .draw import render

    if args.out is None:
        return None
    out = outputs.check_dir(args.out, "--out", [f"{stem}.svg", f"{stem}.json"])
    render.check_dot()
    return out


def _write_report(out, stem: str, report, data: dict) -> None:
    with outputs.staged(out) as tmp:
        (tmp / f"{stem}.svg").write_text(report.svg)
        (tmp / f"{stem}.json").write_text(json.dumps(data, indent=2))
    print(f"wrote {stem}.svg and {stem}.json to {out}", file=sys.stderr)


def cmd_profile(args) -> int:
    from . import timing
    from .draw import latency

    out = _report_dir(args, "profile")
    built, inputs, collapse = _measured(args)
    profile = timing.profile(built, inputs, runs=args.runs, max_seconds=args.max_seconds)
    report = latency.report(built, profile, collapse=collapse)
    data = profile.to_json()
    print(json.dumps(data, indent=2) if args.json else report.text)
    if out:
        _write_report(out, "profile", report, data)
    return 0


def cmd_compare(args) -> int:
    from . import timing
    from .draw import latency

    if not args.tolerance >= 0:
        raise WorkbenchError(
            f"--tolerance must be 0 or more, got {args.tolerance}", "pass a relative error such as 1e-3"
        )
    out = _report_dir(args, "compare")
    built, inputs, collapse = _measured(args)
    numerics = timing.compare(built, inputs, tolerance=args.tolerance)
    data = numerics.to_json()
    print(json.dumps(data, indent=2) if args.json else latency.numerics_text(numerics))
    if out:
        _write_report(out, "compare", latency.report(built, numerics=numerics, collapse=collapse), data)
    return 1 if numerics.over else 0


ZOO_HELP = "ssd (the model of --model), a zoo model's name (byoc-workbench prefetch --list names them)"


def _description(args) -> dict:
    """The model ``search`` was given, as a serialisable description (:mod:`byoc_workbench.search.subject`)."""
    what = args.model
    if getattr(args, "torch", None):
        if what:
            raise WorkbenchError(f"Both {what} and --torch were given", "give one model: a file, or --torch")
        shape = _shapes(args)
        return {"kind": "torch", "spec": args.torch, "shape": shape if isinstance(shape, list) else None}
    if what is None:
        raise WorkbenchError("A model is required: model, or --torch MODULE:FACTORY", NAME_A_MODEL)
    if what == "demo":
        return {"kind": "demo"}
    zoo_name = zoo_model(what, args.ssd_model)
    if zoo_name:
        return {"kind": "ssd", "model": zoo_name, "weights": args.weights, "image": args.image}
    if what.endswith(".onnx"):
        return {"kind": "onnx", "path": what, "input_shapes": _shapes(args)}
    if what.endswith(".py") or Path(what).exists():
        return {"kind": "file", "path": what}
    raise WorkbenchError(f"Unknown model '{what}'", NAME_A_MODEL)


def cmd_search(args) -> int:
    from . import search
    from .draw import placements, render

    names = ["search.json", "search.txt", "search.svg"]
    out = outputs.check_dir(args.out, "--out", names) if args.out else None
    if out:
        render.check_dot()
    backends = search.check_backends(args.backends)  # a typo fails before the model loads
    description = _description(args)
    if args.target:
        description["target"] = args.target
    subject = search.load(description)
    result = search.search(
        subject,
        backends,
        precision=args.precision or "f32",
        runs=args.runs,
        seams=args.seams,
        top=args.top,
        cache=search.Cache(enabled=not args.no_cache),
        only_cached=args.cached,
        anchors=not args.no_anchors,
        progress=not args.json,
    )
    data = result.to_json()
    print(json.dumps(data, indent=2) if args.json else result.text())
    if out:
        dot = placements.chosen_dot(result)
        with outputs.staged(out) as tmp:
            (tmp / "search.json").write_text(json.dumps(data, indent=2))
            (tmp / "search.txt").write_text(result.text() + "\n")
            (tmp / "search.svg").write_text(render.to_svg(dot) if dot is not None else "<svg/>")
        print(f"wrote {', '.join(names)} to {out}", file=sys.stderr)
    return 0 if result.chosen is not None else 1


# --- arguments ----------------------------------------------------------------------


class UsageError(WorkbenchError):
    """A command line argparse refused: the option, what was wrong, and what to type."""


class Parser(argparse.ArgumentParser):
    """argparse, with its errors as one ``error: <cause>. Fix: <what to type>.`` line."""

    def error(self, message: str):
        raise UsageError(message, _usage_fix(self.prog, message))


def _usage_fix(prog: str, message: str) -> str:
    """What to type, for one of argparse's error messages."""
    help_ = f"`{prog} --help` lists them"
    if m := re.match(r"the following arguments are required: (.*)", message):
        return f"add {m.group(1)} ({help_})"
    if m := re.match(r"unrecognized arguments: (.*)", message):
        return f"remove {m.group(1)} ({help_})"
    if m := re.match(r"argument (\S+): invalid choice: '([^']*)' \(choose from (.*)\)", message):
        given, choices = m.group(2), re.findall(r"'([^']*)'", m.group(3))
        close = difflib.get_close_matches(given, choices, n=1)
        near = f" (did you mean {close[0]}?)" if close else ""
        return f"use one of: {', '.join(choices)}{near}"
    if m := re.match(r"argument (\S+): invalid int value", message):
        return f"pass {m.group(1)} a whole number, e.g. {m.group(1)} 10"
    if m := re.match(r"argument (\S+): invalid float value", message):
        return f"pass {m.group(1)} a number, e.g. {m.group(1)} 1e-3"
    if m := re.match(r"argument (\S+): \S+ is not (.*)", message):  # from the types below
        return f"pass {m.group(1)} {m.group(2)}"
    if m := re.match(r"argument (\S+): expected one argument", message):
        return f"put a value after {m.group(1)}"
    if m := re.match(r"ambiguous option: (\S+)", message):
        return f"spell {m.group(1)} out in full ({help_})"
    return f"see `{prog} --help`"


def _count(lo: int, hi: int | None = None):
    """An argparse type: a whole number from ``lo`` to ``hi`` (the documented bounds)."""
    bounds = f"a whole number from {lo} to {hi}" if hi is not None else f"a whole number, {lo} or more"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < lo or (hi is not None and value > hi):
            raise argparse.ArgumentTypeError(f"{text!r} is not {bounds}")
        return value

    return parse


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0, such as 1800")
    return value


def _parents() -> dict:
    """Options shared by several commands, each defined once."""
    debug = Parser(add_help=False)
    debug.add_argument(
        "--traceback",
        action="store_true",
        default=argparse.SUPPRESS,  # so a command's default does not hide the top-level flag
        help="on an error, print the whole Python trace too (or set BYOC_WORKBENCH_DEBUG=1)",
    )
    zoo = Parser(add_help=False)
    zoo.add_argument(
        "--model", dest="ssd_model", default=DEFAULT_SSD, help=f"with ssd: the GluonCV model ({DEFAULT_SSD})"
    )
    zoo.add_argument(
        "--weights",
        help="with ssd: trained, untrained, or a .params file (default: the cache, else untrained seeded weights)",
    )
    image = Parser(add_help=False)
    image.add_argument("--image", help="with ssd: a JPEG or PNG (default: the picture shipped with the package)")
    budget = Parser(add_help=False)
    budget.add_argument(
        "--max-seconds",
        type=_seconds,
        default=MAX_SECONDS,
        help=f"refuse a timed loop estimated, after its first run, to take longer (default {MAX_SECONDS:g})",
    )
    own = Parser(add_help=False)
    own.add_argument(
        "--torch",
        metavar="MODULE:FACTORY",
        help="a PyTorch model instead of a file, e.g. torchvision.models:resnet18 (seeded weights, no download; "
        "needs the [pytorch] extra)",
    )
    own.add_argument(
        "--input-shape",
        type=_input_shape,
        action="append",
        metavar="[NAME=]N,C,H,W",
        help="with a .onnx file or --torch: an input's shape (default: the file's; 1,3,224,224 for --torch); "
        "repeat for several inputs",
    )
    return {"debug": debug, "zoo": zoo, "image": image, "budget": budget, "own": own}


def _input_shape(text: str) -> tuple:
    """``data=1,3,224,224`` -> ``("data", [1, 3, 224, 224])``; ``1,3,224,224`` -> ``(None, [...])``."""
    name, _, dims = text.rpartition("=")
    try:
        shape = [int(d) for d in dims.split(",")]
    except ValueError:
        shape = []
    if not shape or any(d < 1 for d in shape):
        raise argparse.ArgumentTypeError(f"{text!r} is not a shape such as data=1,3,224,224")
    return (name or None, shape)


def parser() -> argparse.ArgumentParser:
    common = _parents()
    p = Parser(prog="byoc-workbench", description="TVM BYOC, stage by stage, on Relax.", parents=[common["debug"]])
    p.add_argument("-v", "--verbose", action="store_true", help="log diagnostics")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)

    def command(name, helptext, func, *uses):
        c = sub.add_parser(name, help=helptext, parents=[common["debug"], *(common[u] for u in uses)])
        c.set_defaults(func=func)
        return c

    s = command("stages", "draw every BYOC stage of a model and write summary.json", cmd_stages, "zoo", "own")
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
    s.add_argument("--no-prune", action="store_true", help="keep every subgraph")
    s.add_argument(
        "--min-mac-ops",
        type=_count(0),
        default=1,
        help="prune subgraphs with fewer MAC ops than this (default 1)",
    )

    i = command("import", "import a GluonCV model into Relax", cmd_import, "zoo")
    i.add_argument("what", help=ZOO_HELP)
    i.add_argument("--summary", action="store_true", help="print the JSON summary (the default output)")

    r = command("run", "run a model and check it against its own framework", cmd_run, "zoo", "image", "own")
    r.add_argument("what", nargs="?", help=ZOO_HELP + ", or a .onnx file (or give --torch)")
    r.add_argument(
        "--backend",
        default="tvm",
        help=f"mxnet (the Gluon block), {BACKEND_HELP}. tvm: TVM alone; the others: the TensorRT subgraphs "
        "they can compile offloaded through them, TVM for the rest (auto: TensorRT where it runs, else ONNX Runtime)",
    )
    r.add_argument("--save-outputs", help="write the outputs (ids, scores and boxes for a detector) to this .npz file")

    for name, helptext, func in (
        ("profile", "time every VM call of a partitioned build and draw the latency map", cmd_profile),
        (
            "compare",
            "check each offloaded subgraph against TVM alone (exit 1 when one is over the tolerance)",
            cmd_compare,
        ),
    ):
        c = command(name, helptext, func, "zoo", "image", "own", *(("budget",) if name == "profile" else ()))
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
        if name == "profile":
            c.add_argument(
                "--runs",
                type=_count(1, MAX_RUNS),
                default=10,
                help=f"timed runs, 1 to {MAX_RUNS}; each call's median is kept (default 10)",
            )
        else:
            c.add_argument("--tolerance", type=float, default=1e-3, help="largest relative error (default 1e-3)")

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
        type=_count(1, MAX_REPEAT),
        default=10,
        help=f"timed runs per backend after warm-up, 1 to {MAX_REPEAT} (default 10)",
    )
    b.add_argument(
        "--tvm-repeat",
        type=_count(1, MAX_TVM_REPEAT),
        default=1,
        help=f"timed runs of TVM alone, tens of seconds each, 1 to {MAX_TVM_REPEAT} (default 1)",
    )
    b.add_argument("--no-unpruned", action="store_true", help="skip the offloaded build without pruning")
    b.add_argument(
        "--no-anchors", action="store_true", help="skip the whole-model anchors (MXNet, ONNX Runtime, OpenVINO)"
    )
    b.add_argument("--where", action="store_true", help="also profile each offloaded build: where the time goes")
    b.add_argument("--json", action="store_true", help="print the results as JSON")

    rp = command(
        "report",
        "the partitioning report: what the target takes, what falls back and why (table or JSON)",
        cmd_report,
        "zoo",
        "own",
    )
    rp.add_argument("model", nargs="?", help="demo, ssd, a zoo model's name, a .py or .onnx file (or give --torch)")
    rp.add_argument("--target", help="the target whose rules apply (default: tensorrt; byoc-target for demo)")
    rp.add_argument("--json", action="store_true", help="print the report as JSON")
    rp.add_argument("--out", help="a directory for report.json, report.txt and prune.svg (the prune stage)")
    rp.add_argument("--no-prune", action="store_true", help="keep every subgraph")
    rp.add_argument("--min-mac-ops", type=_count(0), default=1, help="prune subgraphs with fewer MAC ops (default 1)")

    se = command(
        "search",
        "let the measurements choose: the fastest placement of a model's subgraphs across backends",
        cmd_search,
        "zoo",
        "image",
        "own",
    )
    se.add_argument("model", nargs="?", help="demo, ssd, a zoo model's name, a .py or .onnx file (or give --torch)")
    se.add_argument(
        "--backends",
        default="onnxruntime,openvino,tvm",
        help="comma-separated backends to place subgraphs on; tvm is the host (default: onnxruntime,openvino,tvm)",
    )
    se.add_argument("--precision", choices=PRECISIONS, help="openvino's inference precision (default f32)")
    se.add_argument("--target", help="the target whose rules make the units (default: tensorrt; byoc-target for demo)")
    se.add_argument("--runs", type=_count(1, MAX_RUNS), default=10, help="instrumented runs per build (default 10)")
    se.add_argument("--seams", type=_count(0, 3), default=1, help="seams per unit cut in pieces, 0 to 3 (default 1)")
    se.add_argument("--top", type=_count(1, 10), default=3, help="placements built end to end, 1 to 10 (default 3)")
    se.add_argument("--no-cache", action="store_true", help="measure everything again (the cache is still written)")
    se.add_argument(
        "--cached", action="store_true", help="measure nothing: use the cache, or fail saying what is missing"
    )
    se.add_argument("--no-anchors", action="store_true", help="skip the whole-model anchors")
    se.add_argument("--json", action="store_true", help="print the result as JSON")
    se.add_argument("--out", help="a directory for search.json, search.txt and search.svg (the chosen placement)")

    f = command("prefetch", "download model weights into the cache ahead of a workshop", cmd_prefetch)
    f.add_argument("--models", help="comma-separated model names (default: all)")
    f.add_argument(
        "--list", action="store_true", help="list the zoo's models, their task and family, and say which are cached"
    )

    d = command("doctor", "check this machine for the workshop: what is missing, and how to get it", cmd_doctor)
    d.add_argument("--json", action="store_true", help="print the report as JSON")
    return p


class _WarningLine(logging.Formatter):
    """Warnings as ``warning: <message>``, one line each, like the errors; -v shows every logger's name."""

    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname.lower()}: {record.getMessage()}"


_HANDLER: list = []  # the handler this module put on the root logger, replaced on each main()


def _log_to_stderr(verbose: bool) -> None:
    root = logging.getLogger()
    for old in _HANDLER:
        root.removeHandler(old)
    handler = logging.StreamHandler()  # sys.stderr as it is now
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s") if verbose else _WarningLine())
    _HANDLER[:] = [handler]
    root.addHandler(handler)
    root.setLevel(logging.INFO if verbose else logging.WARNING)


def _debug(args=None) -> bool:
    return os.environ.get("BYOC_WORKBENCH_DEBUG", "").strip() not in ("", "0") or bool(
        getattr(args, "traceback", False)
    )


def _interrupted() -> str:
    if not outputs.written:
        return "interrupted; nothing was written."
    return f"interrupted; wrote {', '.join(str(p) for p in outputs.written)} before that."


def main(argv=None) -> int:
    outputs.written.clear()
    args = None
    try:
        args = parser().parse_args(argv)
        _log_to_stderr(args.verbose)
        return args.func(args)
    except WorkbenchError as err:  # the user's mistake; anything else is a bug and keeps its traceback
        if _debug(args):
            traceback.print_exception(err)
        else:  # with -v the trace (and the error it was raised from) is logged too
            logging.getLogger(__name__).info("where the error was raised:", exc_info=True)
        print(err.line, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if _debug(args):
            traceback.print_exc()
        print(_interrupted(), file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (| head): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
