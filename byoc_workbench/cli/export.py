"""``export``: notebooks run top to bottom, each written with its outputs as ``.ipynb`` and as an HTML page
readable without a kernel or a network (:mod:`byoc_workbench.export`)."""

from byoc_workbench import export


def cmd_export(args) -> int:
    export.export(args.notebooks, args.out, args.timeout, out_name="--out")
    return 0
