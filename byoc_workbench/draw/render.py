"""Draw a :class:`graph.Graph` with Graphviz.

``to_dot`` returns a ``graphviz.Digraph`` and writes nothing; ``to_svg`` lays it out
with the Graphviz :mod:`.renderers` picks; ``write`` saves a file. Colours live in tables.
"""

from __future__ import annotations

import colorsys
import concurrent.futures
import hashlib
import html
import os
from pathlib import Path

import graphviz

from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.draw import renderers
from byoc_workbench.draw.graph import HOST, Graph

TARGET_COLORS = {
    HOST: "#e9ecef",
    "byoc-target": "#9ad0a4",
    "tensorrt": "#b7e07a",
    "onnxruntime": "#a9c8f0",
}
CLUSTER_STYLE = {
    "function": {"style": "rounded", "color": "#6c757d", "fontname": "Helvetica-Bold"},
    "then": {"style": "dashed,rounded", "color": "#4c6ef5"},
    "else": {"style": "dashed,rounded", "color": "#e8590c"},
    "region": {"style": "rounded,bold", "color": "#2b8a3e", "penwidth": "2"},
    "subgraph": {"style": "rounded,filled", "color": "#2b8a3e", "fillcolor": "#f4fbf5"},
    "composite": {"style": "rounded,dotted", "color": "#2b8a3e"},
    "block": {"style": "rounded,filled", "color": "#868e96", "fillcolor": "#f8f9fa"},  # an opened model block
    "fold": {"style": "rounded,dashed", "color": "#868e96"},  # an opened run of ops
    "layout": {"style": "invis"},  # groups nodes as a later stage will, unseen
}
NODE_SHAPES = {
    "input": {"shape": "ellipse"},
    "output": {"shape": "ellipse", "style": "filled,bold"},
    "const": {"shape": "plaintext", "fontsize": "9"},
    "op": {"shape": "box", "style": "filled,rounded"},
    "composite": {"shape": "box3d", "style": "filled"},
    "subgraph": {"shape": "component", "style": "filled,bold"},
    "packed": {"shape": "component", "style": "filled,bold"},
    "call": {"shape": "cds", "style": "filled"},
    "if": {"shape": "diamond", "style": "filled"},
    "tuple": {"shape": "box", "style": "filled,dashed"},
    "item": {"shape": "box", "style": "filled,dashed"},
    "fold": {"shape": "folder", "style": "filled"},
}
MAX_LABEL = 400  # Graphviz rejects labels over 16,384 characters; ours stay far below


def target_color(target: str) -> str:
    """The fill colour of a target; a stable hash colour for targets not in the table."""
    if target in TARGET_COLORS:
        return TARGET_COLORS[target]
    h = int(hashlib.sha1(target.encode()).hexdigest()[:6], 16)
    hue = (h % 360) / 360
    return f"{hue:.3f} 0.35 0.95"


def escape(text: str) -> str:
    """A label safe for DOT, cut to :data:`MAX_LABEL` characters.

    The graphviz package quotes double quotes itself; a backslash would start
    a DOT escape sequence, so it is doubled here.
    """
    text = text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 1] + "…"
    return text.replace("\\", "\\\\")


def _cluster_tree(graph: Graph) -> dict:
    children: dict = {}
    for c in graph.clusters.values():
        children.setdefault(c.parent, []).append(c.id)
    return children


def to_dot(graph: Graph, title: str = "", legend: bool = True, show_shapes: bool = True) -> graphviz.Digraph:
    """A Digraph of ``graph``: nodes coloured by target, a cluster per function,
    If branch and merged region, and dashed edges where data crosses targets."""
    cpu = any(n.on_cpu for n in graph.nodes.values())
    dot = graphviz.Digraph(
        "G",
        graph_attr={
            "rankdir": "TB",
            "fontname": "Helvetica",
            "fontsize": "11",
            # The title, and the legend in one row under it, at the top left: in view where a diagram
            # wider than the notebook scrolls sideways, and no column of its own beside the graph.
            "label": _heading(title, graph.targets if legend else None, cpu),
            "labelloc": "t",
            "labeljust": "l",
            "newrank": "true",
            "compound": "true",
            # A second crossing pass across clusters would undo the order inputs are pinned in.
            "remincross": "false",
        },
    )
    dot.attr("node", fontname="Helvetica", fontsize="10")
    dot.attr("edge", fontname="Helvetica", fontsize="8", color="#495057")
    members: dict = {}
    for n in graph.nodes.values():
        members.setdefault(n.cluster or None, []).append(n)
    children = _cluster_tree(graph)

    index = {nid: i for i, nid in enumerate(graph.nodes)}
    first = _first_places(graph, index)

    def emit(g, cluster_id):
        nodes = [(index[n.id], n) for n in members.get(cluster_id, [])]
        subs = [(first.get(c, len(index)), c) for c in children.get(cluster_id, [])]
        for _, item in sorted(nodes + subs, key=lambda pair: pair[0]):
            if isinstance(item, str):
                emit_cluster(g, item)
            else:
                _emit_node(g, item, show_shapes)
        _pin_inputs(g, [n.id for n in members.get(cluster_id, []) if n.kind == "input"])

    def emit_cluster(g, cid):
        c = graph.clusters[cid]
        with g.subgraph(name=f"cluster_{cid}") as sub:
            sub.attr(label=escape(c.label), id=f"cluster_{cid}", **_cluster_style(c))
            emit(sub, cid)

    emit(dot, None)
    _edges(dot, graph, show_shapes)
    return dot


def _first_places(graph: Graph, index: dict) -> dict:
    """Where each cluster's first node is in binding order: a cluster is written where its first
    node would be, so a node keeps its place in the DOT text whether or not a stage boxes it."""
    first: dict = {}
    for n in graph.nodes.values():
        cid = n.cluster or None
        while cid is not None and cid not in first:
            first[cid] = index[n.id]
            cid = graph.clusters[cid].parent if cid in graph.clusters else None
    return first


def _emit_node(g, n, show_shapes: bool) -> None:
    """One node: its shape by kind, its fill by target, a tooltip with its op and type."""
    attrs = dict(NODE_SHAPES.get(n.kind, {}))
    attrs["fillcolor"] = target_color(n.target)
    attrs["id"] = n.id
    if n.target != HOST:  # the widget's first view centres on the first offloaded node
        attrs["class"] = "byoc-offload"
    tip = n.op or n.label
    if n.ty:
        tip += f" : {n.ty}"
    if n.on_cpu:  # a double border: on the CPU in a GPU build
        attrs["peripheries"] = "2"
        tip += f" — on the CPU in a GPU build ({n.on_cpu})"
    attrs["tooltip"] = escape(tip)
    if n.kind == "if":  # its then branch comes in left of its else branch, at every stage
        attrs["ordering"] = "in"
    label = n.label if not n.ty or n.kind in ("const", "output") or not show_shapes else f"{n.label}\n{n.ty}"
    g.node(n.id, escape(label), **attrs)


def _cluster_style(c) -> dict:
    """A cluster's style by kind; a region, subgraph or composite green for ``byoc-target``, dark otherwise."""
    style = dict(CLUSTER_STYLE.get(c.kind, {}))
    if c.kind in ("region", "subgraph", "composite"):
        style["color"] = "#2b8a3e" if c.target == "byoc-target" else "#343a40"
    return style


def _edges(dot, graph: Graph, show_shapes: bool) -> None:
    """Every edge of ``graph``: data (dashed red where it crosses targets), calls (dotted), rows (unseen)."""
    for e in graph.edges:
        if e.kind == "call":
            dot.edge(e.src, e.dst, label="calls", style="dotted", color="#868e96", lhead=f"cluster_{e.to_cluster}")
            continue
        attrs = {"style": "dashed", "color": "#c92a2a", "penwidth": "1.5"} if e.crosses else {}
        if e.to_cluster:  # drawn to the border of an opened run (one edge for all its readers)
            attrs["lhead"] = f"cluster_{e.to_cluster}"
        if e.from_cluster:
            attrs["ltail"] = f"cluster_{e.from_cluster}"
        dot.edge(e.src, e.dst, label=escape(e.label) if show_shapes else "", **attrs)
    for upper, lower in graph.below:  # wide ranks wrapped into rows
        dot.edge(upper, lower, style="invis")
    for caller_end, callee_start in _stacked(graph):
        dot.edge(caller_end, callee_start, style="invis")


def _stacked(graph: Graph) -> list:
    """``(a caller's return, its callee's first node)`` for each call of another function: the callee drawn
    wholly below the caller, so that the two share the page's width instead of standing side by side."""

    def function_of(cid):
        while cid in graph.clusters and graph.clusters[cid].parent:
            cid = graph.clusters[cid].parent
        return cid

    returns = {n.cluster: n.id for n in graph.nodes.values() if n.kind == "output" and n.cluster}
    out = []
    for e in graph.edges:
        if e.kind != "call" or e.src not in graph.nodes:
            continue
        caller = function_of(graph.nodes[e.src].cluster)
        if caller != e.to_cluster and caller in returns:
            out.append((returns[caller], e.dst))
    return out


def _pin_inputs(g, inputs: list) -> None:
    """A function's inputs side by side in parameter order, so no stage reshuffles them."""
    if len(inputs) < 2:
        return
    with g.subgraph() as row:
        row.attr(rank="same")
        for nid in inputs:
            row.node(nid)
    for a, b in zip(inputs, inputs[1:]):
        g.edge(a, b, style="invis")


def _heading(title: str, targets, cpu: bool) -> str:
    """The graph's label: ``title`` (its lines left-aligned) and, for ``targets``, the legend in one row."""
    lines = "".join(f'{html.escape(line)}<BR ALIGN="LEFT"/>' for line in escape(title).split("\n") if line)
    if targets is None:
        return escape(title)
    cells = "".join(
        f'<TD BGCOLOR="{html_color(target_color(t))}" BORDER="1" WIDTH="14"></TD><TD ALIGN="LEFT">{html.escape(t)}</TD>'
        for t in targets
    )
    cells += '<TD><FONT COLOR="#c92a2a">- -</FONT></TD><TD ALIGN="LEFT">crosses a target boundary</TD>'
    if cpu:
        double = '<TABLE BORDER="1" CELLBORDER="1" CELLSPACING="2" CELLPADDING="0"><TR><TD WIDTH="8"></TD></TR></TABLE>'
        cells += f'<TD>{double}</TD><TD ALIGN="LEFT">double border: on the CPU in a GPU build</TD>'
    head = (
        f'<TR><TD ALIGN="LEFT" BALIGN="LEFT" COLSPAN="{2 * len(targets) + 2 + 2 * cpu + 1}">{lines}</TD></TR>'
        if lines
        else ""
    )
    legend = f'<TR><TD ALIGN="LEFT"><B>targets</B></TD>{cells}</TR>'
    return f'<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="3" CELLPADDING="1">{head}{legend}</TABLE>>'


def html_color(color: str) -> str:
    """``color`` (a table's ``#rrggbb`` or :func:`target_color`'s ``"h s v"``) as ``#rrggbb``, for HTML."""
    if color.startswith("#"):
        return color
    h, s, v = (float(x) for x in color.split())
    r, g, b = colorsys.hsv_to_rgb(h, s, v)
    return f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"


def to_svg(dot: graphviz.Digraph) -> str:
    """``dot`` laid out as SVG by :func:`.renderers.chosen`'s Graphviz."""
    return renderers.lay_out(dot.source)


def write_all(diagrams, fmt: str = "svg") -> None:
    """Write each ``(dot, path)`` of ``diagrams`` as :func:`write` does. ``diagrams`` may be drawn as it
    is read: for SVG, Graphviz lays out each one in the background, as many at once as there are cores,
    while the next one is drawn."""
    if fmt != "svg":
        for dot, path in diagrams:
            write(dot, path, fmt)
        return
    renderer = renderers.require_graphviz()
    workers = os.cpu_count() or 1
    running: list = []
    # The pool's threads only lay out; this one writes each file, so a failure leaves no writer behind.
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        try:
            for dot, path in diagrams:
                while len(running) >= workers:
                    _finish(*running.pop(0))
                running.append((pool.submit(renderers.lay_out, dot.source, "svg", renderer), Path(path)))
            while running:
                _finish(*running.pop(0))
        finally:
            for future, _ in running:
                future.cancel()


def _finish(future, path: Path) -> None:
    try:
        path.write_text(future.result())
    except RuntimeError as err:
        raise RuntimeError(f"Graphviz failed on {path}: {err}") from err


def write(dot: graphviz.Digraph, path: Path, fmt: str = "svg") -> Path:
    """Write ``dot`` as ``svg`` or as DOT source (``dot``)."""
    path = Path(path)
    if fmt == "dot":
        path.write_text(dot.source)
    elif fmt == "svg":
        path.write_text(to_svg(dot))
    else:
        raise WorkbenchError(f"Unknown diagram format '{fmt}'.", "use svg or dot.")
    return path
