"""Executed notebooks as HTML that can be read without a kernel, e.g. after a workshop or offline.

Each notebook is executed with its widgets' state stored in it, then written
as ``.ipynb`` and ``.html``. A static HTML page draws widgets with a widget
manager fetched from a CDN, which an offline machine cannot reach; so after
every widget, the page also gets a static copy of the diagram the widget was
showing (its ``svg`` state). Diagrams the notebook displays itself are inline
SVG already.

``python -m byoc_workbench.export --out build notebooks/*.ipynb`` is what
``make demo`` runs.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from pathlib import Path

import nbformat

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
STATIC_CLASS = "byoc-static-diagram"
_REF = re.compile(r"IPY_MODEL_([0-9a-f]+)")
_PROLOGUE = re.compile(r"^\s*(<\?xml[^>]*\?>\s*)?(<!DOCTYPE[^>]*>\s*)?(<!--.*?-->\s*)*", re.S)


def execute(path: str | Path, timeout: int = 1800) -> nbformat.NotebookNode:
    """The notebook at ``path``, executed in its own folder with its widgets' state stored in its metadata."""
    from nbclient import NotebookClient

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        store_widget_state=True,
        resources={"metadata": {"path": str(path.parent)}},
    ).execute()
    return nb


def _reachable(state: dict, model_id: str) -> list:
    """``model_id`` and every model it refers to (children, layouts...), depth first."""
    seen, todo = [], [model_id]
    while todo:
        mid = todo.pop()
        if mid in seen or mid not in state:
            continue
        seen.append(mid)
        todo += reversed(_REF.findall(json.dumps(state[mid].get("state", {}))))
    return seen


def for_offline(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of ``nb`` for reading without a kernel or a network.

    SVG outputs become inline ``<svg>`` (HTML exporters otherwise write them as
    base64 images, whose text cannot be searched), and each widget output is
    followed by a static copy of the diagrams it showed.
    """
    nb = copy.deepcopy(nb)
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        outputs = []
        for out in cell.get("outputs", []):
            outputs.append(out)
            data = out.get("data", {})
            if "image/svg+xml" in data and "text/html" not in data:
                data["text/html"] = _PROLOGUE.sub("", data["image/svg+xml"], count=1)
            view = data.get(WIDGET_VIEW)
            if not view:
                continue
            for mid in _reachable(state, view["model_id"]):
                svg = state[mid].get("state", {}).get("svg", "")
                if svg.lstrip().startswith(("<svg", "<?xml", "<!DOCTYPE")):
                    outputs.append(_static_output(_PROLOGUE.sub("", svg, count=1)))
        cell.outputs = outputs
    return nb


def _static_output(svg: str) -> nbformat.NotebookNode:
    html = (
        f'<div class="{STATIC_CLASS}"><p><em>The diagram as the widget above showed it when the notebook ran '
        f"(a static copy, readable without a kernel).</em></p>{svg}</div>"
    )
    return nbformat.v4.new_output("display_data", data={"text/html": html, "text/plain": "[diagram]"})


def to_html(nb: nbformat.NotebookNode) -> str:
    """The notebook as a JupyterLab-styled HTML page, widget state and static diagrams included."""
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter(template_name="lab").from_notebook_node(for_offline(nb))
    return body


def export(paths, out_dir: str | Path, timeout: int = 1800) -> list:
    """Execute each notebook and write ``<out_dir>/<name>.ipynb`` and ``<name>.html``; returns the HTML paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for path in map(Path, paths):
        nb = execute(path, timeout)
        nbformat.write(nb, out_dir / path.name)
        html = out_dir / f"{path.stem}.html"
        html.write_text(to_html(nb), encoding="utf-8")
        written.append(html)
        print(f"wrote {out_dir / path.name} and {html}")
    return written


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m byoc_workbench.export", description=__doc__.splitlines()[0])
    p.add_argument("notebooks", nargs="+", help=".ipynb files to execute and export")
    p.add_argument("--out", default="build", help="output folder (default: build)")
    p.add_argument("--timeout", type=int, default=1800, help="seconds per cell (default: 1800)")
    args = p.parse_args(argv)
    export(args.notebooks, args.out, args.timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
