"""``prefetch``: the zoo's weights downloaded into the cache ahead of a workshop, or listed."""

from __future__ import annotations

from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.models import zoo


def cmd_prefetch(args) -> int:
    names = None if args.models is None else [n.strip() for n in args.models.split(",")]
    if names is not None and not all(names):
        raise WorkbenchError(
            f"--models {args.models!r} names an empty model", "name models with commas between, or leave out --models"
        )
    if args.list:
        specs = {name: zoo.model_spec(name) for name in names or zoo.MODELS}  # an unknown name before any line
        zoo.check_cache()  # a file where the cache should be, rather than every model "not cached"
        for name, spec in specs.items():
            state = "cached" if zoo.cached_weights(name) else "not cached"
            print(f"{name:38s} {spec.task:15s} {spec.family:13s} {'x'.join(map(str, spec.input_shape[2:])):8s} {state}")
        return 0
    report = zoo.prefetch(names)
    for name, r in report.items():
        if r["ok"]:
            print(f"ok      {name}: {r['path']}")
        else:
            print(f"MISSING {name}: {r['error']}\n        by hand: {r['how_to_fix']}")
    missing = sum(not r["ok"] for r in report.values())
    print(f"{len(report) - missing} of {len(report)} models cached in {zoo.weights_dir()}")
    return 1 if missing else 0
