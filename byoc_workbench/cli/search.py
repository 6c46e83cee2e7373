"""``search``: the fastest placement of a model's subgraphs across backends, chosen by measuring."""

# The floors a command runs are imported inside it: at the top, they would make every command and
# `byoc-workbench --help` take seconds longer to import (pyproject.toml: per-file-ignores).

from __future__ import annotations

import contextlib
import sys

from byoc_workbench import files, text
from byoc_workbench.cli.args import MAX_RUNS, PRECISIONS, add_ray, count, model_ref


def cmd_search(args) -> int:
    from byoc_workbench import subjects
    from byoc_workbench.draw import render
    from byoc_workbench.measure import search
    from byoc_workbench.measure.build import compiled

    names = ["search.json", "search.txt", "search.svg"]
    out = files.check_dir(args.out, "--out", names) if args.out else None
    if out:
        render.check_dot()
    backends = search.check_backends(args.backends)  # a typo fails before the model loads
    ref = model_ref(args, args.model)
    with compiled.refresh() if args.no_cache else contextlib.nullcontext():  # --no-cache: compile again too
        result = search.search(
            subjects.load(ref),
            backends,
            precision=args.precision or "f32",
            runs=args.runs,
            seams=args.seams,
            top=args.top,
            cache=search.Cache(enabled=not args.no_cache),
            only_cached=args.cached,
            anchors=not args.no_anchors,
            progress=not args.json,
            ray_address=args.ray,
        )
    data = result.to_json()
    print(text.to_json(data) if args.json else result.text())
    if out:
        dot = result.dot()
        with files.staged(out) as tmp:
            (tmp / "search.json").write_text(text.to_json(data))
            (tmp / "search.txt").write_text(result.text() + "\n")
            (tmp / "search.svg").write_text(render.to_svg(dot) if dot is not None else "<svg/>")
        print(f"wrote {', '.join(names)} to {out}", file=sys.stderr)
    return 0 if result.chosen is not None else 1


def add_search(command) -> None:
    s = command(
        "search",
        "let the measurements choose: the fastest placement of a model's subgraphs across backends",
        cmd_search,
        "zoo",
        "image",
        "own",
    )
    s.add_argument("model", nargs="?", help="demo, ssd, a zoo model's name, a .py or .onnx file (or give --torch)")
    s.add_argument(
        "--precision",
        choices=PRECISIONS,
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
    s.add_argument(
        "--no-cache", action="store_true", help="measure and compile everything again (the caches are still written)"
    )
    s.add_argument(
        "--cached", action="store_true", help="measure nothing: use the cache, or fail saying what is missing"
    )
    s.add_argument("--no-anchors", action="store_true", help="skip the whole-model anchors")
    s.add_argument("--json", action="store_true", help="print the result as JSON")
    s.add_argument("--out", help="a directory for search.json, search.txt and search.svg (the chosen placement)")
    add_ray(s, "one task per candidate build")
