"""The diagram widget: an SVG with pan, zoom and node clicks (graph_view.js), and what a double-click opens."""

from __future__ import annotations

from pathlib import Path

import anywidget
import traitlets

from byoc_workbench.core.errors import WorkbenchError

_HERE = Path(__file__).parent

# What the page says once the widget's kernel is gone: graph_view.js shows it then, as no kernel can.
KERNEL_GONE = WorkbenchError(
    "this widget's kernel is gone (restarted or shut down)", "run the notebook's cells again (Run > Run All Cells)"
)


# --- pure helpers: what a double-click opens ------------------------------------------


def expand_key(details: dict | None) -> str | None:
    """What ``Workbench.view(expand=...)`` takes to open a node: the node's id, for a
    composite call, a subgraph call or a folded run of ops (one call opens, not all)."""
    if not details or details.get("kind") not in ("composite", "subgraph", "fold"):
        return None
    return details.get("id") or None


def toggled(expand: frozenset, key: str) -> frozenset:
    """``expand`` with ``key`` added, or removed when it was there."""
    return expand - {key} if key in expand else expand | {key}


class GraphView(anywidget.AnyWidget):
    """An SVG diagram with pan, zoom and node clicks (see graph_view.js).

    ``svg`` is the drawing; clicking a node sets ``selected`` to its id;
    double-clicking one sends ``{"event": "toggle", "id": ...}``. The box is ``height`` px tall at
    least, and takes the screen's height where there is more. ``gone`` is the line shown in place
    of the controls once the kernel is gone.
    """

    _esm = (_HERE / "graph_view.js").read_text(encoding="utf-8")
    # The rule panel's style rides along: anywidget adds a widget's CSS to the page.
    _css = "\n".join((_HERE / f).read_text(encoding="utf-8") for f in ("graph_view.css", "rule_panel.css"))
    svg = traitlets.Unicode("").tag(sync=True)
    selected = traitlets.Unicode("").tag(sync=True)
    height = traitlets.Int(440).tag(sync=True)
    gone = traitlets.Unicode(KERNEL_GONE.line).tag(sync=True)
