"""``search``: the fastest placement of a model's subgraphs across backends, chosen by measuring."""

from __future__ import annotations

import contextlib
import sys

from byoc_workbench import subjects
from byoc_workbench.cli.refs import model_ref
from byoc_workbench.core import files, output_paths, text
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.draw import render, renderers
from byoc_workbench.measure import search
from byoc_workbench.measure.compiler import compiled


def cmd_search(args) -> int:
    names = ["search.json", "search.txt", "search.svg"]
    out = output_paths.check_dir(args.out, "--out", names, output_paths.read_paths(args)) if args.out else None
    if out:
        renderers.require_graphviz()
    backends = search.check_backends(args.backends)  # a typo fails before the model loads
    ref = model_ref(args, args.model)
    if args.cached and files.no_cache():
        raise WorkbenchError(
            f"--cached measures nothing and reads the cache, which {files.NO_CACHE_ENV} turns off",
            f"unset {files.NO_CACHE_ENV}, or leave out --cached",
        )
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
