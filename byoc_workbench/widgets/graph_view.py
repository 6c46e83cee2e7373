"""The diagram widget: an SVG with pan, zoom and node clicks (graph_view.js), and what a double-click opens."""

from __future__ import annotations

from pathlib import Path

import anywidget
import traitlets

_HERE = Path(__file__).parent


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
    double-clicking one sends ``{"event": "toggle", "id": ...}``.
    """

    _esm = (_HERE / "graph_view.js").read_text(encoding="utf-8")
    # The rule panel's style rides along: anywidget adds a widget's CSS to the page.
    _css = "\n".join((_HERE / f).read_text(encoding="utf-8") for f in ("graph_view.css", "rule_panel.css"))
    svg = traitlets.Unicode("").tag(sync=True)
    selected = traitlets.Unicode("").tag(sync=True)
    height = traitlets.Int(440).tag(sync=True)
