"""The latency map: the codegen stage's diagram shaded by measured time, and its tables.

Data first: :func:`shade` places a :class:`~byoc_workbench.measure.time.timing.Profile`'s entries on the stage's
:class:`~.graph.Graph` (through ``Graph.sites``), adds a node before and after each offloaded call for its boundary
entries, and picks each node's colour from a log scale in milliseconds. :func:`to_dot` draws the result with
:func:`.render.to_dot` and restyles the nodes; the tables are text and HTML. :func:`report` bundles all of it.
"""

from __future__ import annotations

import collections
import dataclasses
import html
import math
import re

from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.draw import folding, render
from byoc_workbench.draw.display import diagram_html
from byoc_workbench.draw.graph import HOST, Edge, Graph, Node, build_graph
from byoc_workbench.flow.summary import BOUNDARY, stage

# Light to dark: little time to much. Text turns white on the last DARK colours.
HEAT = ("#fff5eb", "#fee6ce", "#fdd0a2", "#fdae6b", "#fd8d3c", "#f16913", "#d94801", "#8c2d04")
DARK = 2
UNTIMED = "#ffffff"
OVER = "#c92a2a"  # a subgraph over the numerics tolerance
OUTLINES = {HOST: "#868e96", BOUNDARY: "#f59f00"}
MAX_DECADES = 5  # the scale spans at most 1e5 from the slowest node down
# In a GPU build, where each part of a run went (Profile.by_device); each is said in these words.
DEVICES = {
    "gpu": "GPU kernels",
    "cpu": "CPU kernels (no GPU kernel in TVM)",
    "copy": "copies between GPU and CPU",
    "other": "the VM's own work and offloaded subgraphs",
}


def ms(seconds: float) -> str:
    """Milliseconds with three significant digits: ``12.3 ms``, ``0.0451 ms``."""
    value = seconds * 1e3
    if value >= 1000:  # "1030 ms", not "1.03e+03 ms"
        return f"{value:.0f} ms"
    return f"{value:.3g} ms" if value >= 1e-3 or value == 0 else f"{value:.2e} ms"


def stage_graph(built, collapse: bool = False) -> Graph:
    """The codegen stage's graph, packed calls named after their subgraphs; ``collapse`` hides
    constants and folds long runs of ops (for the SSD)."""
    codegen = stage(built.stages, "codegen")
    subgraphs = {sg.name: sg for sg in codegen.subgraphs}
    packed = {c.symbol: subgraphs[n] for n, c in codegen.generated.items() if n in subgraphs}
    g = build_graph(codegen.mod, packed=packed, constants=not collapse)
    return folding.fold_chains(g) if collapse else g


@dataclasses.dataclass
class Scale:
    """A log scale from ``high`` seconds down ``decades`` powers of ten, one colour per bin."""

    high: float
    decades: float

    def index(self, seconds: float) -> int:
        if seconds <= 0 or self.high <= 0:
            return 0
        frac = 1 + math.log10(seconds / self.high) / self.decades
        return min(len(HEAT) - 1, max(0, int(frac * len(HEAT))))

    def color(self, seconds: float) -> str:
        return HEAT[self.index(seconds)]

    def bins(self) -> list:
        """``(low_s, high_s, colour)`` per bin, slowest first."""
        n = len(HEAT)
        edges = [self.high * 10 ** (-self.decades * (n - i) / n) for i in range(n + 1)]
        return [(edges[i], edges[i + 1], HEAT[i]) for i in reversed(range(n))]


@dataclasses.dataclass
class Shaded:
    """A graph with boundary nodes added, and what the map shows on each node."""

    graph: Graph
    times: dict  # node id -> seconds per run
    calls: dict  # node id -> VM calls per run
    scale: Scale
    unplaced: list  # entries with no node: builtins, shared symbols
    checks: dict  # node id -> SubgraphCheck


def _place(g: Graph, profile) -> tuple:
    times: dict = collections.defaultdict(float)
    calls: dict = collections.defaultdict(int)
    boundary: dict = collections.defaultdict(dict)
    unplaced = []
    for e in profile.entries if profile else ():
        site = e.site
        nid = g.sites.get((site.function, site.var)) if site is not None and site.var is not None else None
        if nid is None:
            unplaced.append(e)
        elif e.kind == BOUNDARY:
            boundary[nid][e.phase] = (e.time_s, e.calls)
        else:
            times[nid] += e.time_s
            calls[nid] += e.calls
    return times, calls, boundary, unplaced


def _with_boundaries(g: Graph, boundary: dict, times: dict, calls: dict) -> Graph:
    """``g`` with a node before (``<id>.in``) and after (``<id>.out``) each offloaded call
    that has boundary entries; the call's data edges pass through them."""
    out = Graph(dict(g.nodes), [], dict(g.clusters), dict(g.sites))
    via: dict = {}
    for nid, phases in boundary.items():
        node = g.nodes[nid]
        for phase, (seconds, n) in phases.items():
            bid = f"{nid}.{phase}"
            label = f"{'into' if phase == 'in' else 'out of'} {node.op if node.kind != 'packed' else node.label}"
            label = label.split("\n")[0]
            out.nodes[bid] = Node(
                bid, "boundary", label, target=node.target, op=f"boundary {phase}", cluster=node.cluster
            )
            times[bid], calls[bid] = seconds, n
            via[(nid, phase)] = bid
    for e in g.edges:
        src, dst = e.src, e.dst
        if e.kind == "data" and g.nodes[src].kind != "const":
            if (dst, "in") in via:
                dst = via[(dst, "in")]
            if (src, "out") in via:
                src = via[(src, "out")]
        out.edges.append(_edge(out, e, src, dst))
    for (nid, phase), bid in via.items():
        a, b = (bid, nid) if phase == "in" else (nid, bid)
        out.edges.append(Edge(a, b))
    return out


def _edge(g: Graph, e: Edge, src: str, dst: str) -> Edge:
    crosses = e.kind == "data" and g.nodes[src].target != g.nodes[dst].target and g.nodes[src].kind != "const"
    return dataclasses.replace(e, src=src, dst=dst, crosses=crosses)


def shade(
    built,
    profile=None,
    numerics=None,
    collapse: bool = False,
    graph: Graph | None = None,
) -> Shaded:
    """Place ``profile``'s entries and ``numerics``' checks on the codegen stage's graph.

    ``graph`` defaults to :func:`stage_graph` of ``built``; pass one to shade
    a graph drawn otherwise (the widget's, with opened nodes).
    """
    g = graph if graph is not None else stage_graph(built, collapse)
    times, calls, boundary, unplaced = _place(g, profile)
    g = _with_boundaries(g, boundary, times, calls)
    positive = [t for t in times.values() if t > 0]
    high = max(positive, default=0.0)
    decades = min(MAX_DECADES, max(1.0, math.log10(high / min(positive)))) if positive else 1.0
    checks = {}
    for row in numerics.rows if numerics else ():
        site = built.subgraphs.get(row.name)
        nid = g.sites.get((site.function, site.var)) if site is not None and site.var is not None else None
        if nid is not None:
            checks[nid] = row
    return Shaded(g, dict(times), dict(calls), Scale(high, decades), unplaced, checks)


# --- drawing -----------------------------------------------------------------------


def to_dot(
    shaded: Shaded,
    profile=None,
    numerics=None,
    title: str = "",
    show_shapes: bool = False,
):
    """A Digraph of the shaded graph: each node filled by its time, outlined in its target's
    colour, a subgraph over the tolerance outlined in red; a legend in milliseconds."""
    g = shaded.graph
    dot = render.to_dot(g, title=title, legend=False, show_shapes=show_shapes)
    for nid, n in g.nodes.items():
        attrs = {"color": _outline(n.target), "penwidth": "2" if n.target != HOST else "1"}
        label = n.label
        if nid in shaded.times:
            t = shaded.times[nid]
            k = shaded.scale.index(t)
            attrs.update(fillcolor=HEAT[k], fontcolor="white" if k >= len(HEAT) - DARK else "black")
            calls = shaded.calls.get(nid, 1)
            label += f"\n{ms(t)}" + (f" ({calls} calls)" if calls > 1 else "")
            attrs["tooltip"] = render.escape(f"{n.op or n.label}: {ms(t)} per run over {calls} call(s)")
        elif n.kind not in ("const", "input", "output", "call"):
            attrs["fillcolor"] = UNTIMED
        if n.kind == "boundary":
            attrs.update(shape="cds", style="filled", fontsize="9")
        check = shaded.checks.get(nid)
        if check is not None:
            label += f"\n{'✗' if check.over else '✓'} rel err {check.max_rel:.1e}"
            if check.over:
                attrs.update(color=OVER, penwidth="4")
        dot.node(nid, render.escape(label), **attrs)
    dot.node("legend", _legend(shaded, profile, numerics), shape="plaintext", id="legend")
    return dot


def _outline(target: str) -> str:
    """A node's outline (and its target's swatch in the legend): the target's colour, as #rrggbb."""
    if target in OUTLINES:
        return OUTLINES[target]
    return render.html_color(render.target_color(target))


def _legend(shaded: Shaded, profile, numerics) -> str:
    rows = []
    if profile is not None:
        rows.append(f'<TR><TD COLSPAN="2"><B>time per run</B> (median per call, {profile.runs} runs)</TD></TR>')
        for low, high, color in shaded.scale.bins():
            rows.append(f'<TR><TD BGCOLOR="{color}" WIDTH="14"></TD><TD ALIGN="LEFT">{ms(low)} – {ms(high)}</TD></TR>')
        rows.append('<TR><TD BGCOLOR="white" WIDTH="14"></TD><TD ALIGN="LEFT">no VM call</TD></TR>')
        for target, seconds, share in shares(profile):
            rows.append(
                f'<TR><TD BGCOLOR="{_outline(target)}" WIDTH="14"></TD>'
                f'<TD ALIGN="LEFT">{html.escape(target)}: {ms(seconds)} ({share:.0%})</TD></TR>'
            )
        for place, seconds in profile.by_device.items():  # a GPU build: where each part ran
            rows.append(
                f'<TR><TD COLSPAN="2" ALIGN="LEFT">{html.escape(DEVICES.get(place, place))}: {ms(seconds)}</TD></TR>'
            )
        rows.append(
            f'<TR><TD COLSPAN="2">entries {ms(profile.total_s)} = {profile.ratio:.0%} of '
            f"end-to-end {ms(profile.end_to_end_s)}</TD></TR>"
        )
    if numerics is not None:
        rows.append(
            f'<TR><TD><FONT COLOR="{OVER}">✗</FONT></TD><TD ALIGN="LEFT">rel err over {numerics.tolerance:g} '
            f"(vs TVM alone)</TD></TR>"
        )
    mark = (profile.mark if profile else "") or (numerics.mark if numerics else "")
    if mark:
        rows.append(f'<TR><TD COLSPAN="2"><FONT COLOR="{OVER}"><B>{html.escape(mark)}</B></FONT></TD></TR>')
    return f'<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="3">{"".join(rows)}</TABLE>>'


# --- tables ------------------------------------------------------------------------


def shares(profile) -> list:
    """``(target, seconds, share of the entries' sum)``, largest first."""
    total = profile.total_s or 1.0
    return [(t, s, s / total) for t, s in profile.by_target.items()]


def summary_line(profile) -> str:
    return (
        f"entries sum {ms(profile.total_s)}, end-to-end median {ms(profile.end_to_end_s)} "
        f"({profile.ratio:.1%}), {profile.runs} runs"
        + "".join(f"; {DEVICES.get(p, p)} {ms(t)}" for p, t in profile.by_device.items())
        + "".join(f"; {name} ran on {b}" for name, b in profile.backends.items())
        + (f" [{profile.mark}]" if profile.mark else "")
    )


def _top_rows(profile, n: int) -> list:
    total = profile.total_s or 1.0
    return [
        (ms(e.time_s), f"{e.time_s / total:.1%}", str(e.calls), e.kind, e.target, e.name, _what(e))
        for e in profile.entries[:n]
    ]


def _what(e) -> str:
    """The Relax op of a kernel entry, the backend (and how it ran, e.g. ``eager, bf16``) of a subgraph or boundary
    entry."""
    return (e.site.op or _ran(e.site.backend, e.site.detail)) if e.site is not None else ""


def _ran(backend: str, detail: str) -> str:
    return f"{backend} ({detail})" if detail else backend


TOP_HEAD = ("time", "share", "calls", "kind", "target", "entry", "op or backend")
TOP_KEY = (
    "time: median per run; share: of the sum of all entries; calls: VM calls per run; kind: kernel (a TIR "
    "kernel TVM compiled), subgraph (a backend computing), boundary (tensors handed into or out of a backend), "
    "builtin (the VM's own work); entry: the VM call, named after its Relax variable or subgraph; op or backend: "
    "the Relax op a kernel computes, or what ran a subgraph."
)
CHECK_HEAD = ("subgraph", "target", "backend", "calls", "max abs err", "max rel err", "verdict")
CHECK_KEY = (
    "Each offloaded subgraph rerun with TVM alone on the inputs it received. calls: how often it ran in one run; "
    "max abs err and max rel err: the largest difference from TVM alone over its outputs (relative to the "
    "largest |TVM output|); verdict: ok, OVER the tolerance, or not called."
)
BUILDS_HEAD = ("build", "end-to-end", "entries", "subgraphs", "offloaded compute", "boundary", "calls crossing", "host")
BUILDS_KEY = (
    "end-to-end: median of whole runs; entries: the sum of every VM call timed one by one (timing each call "
    "adds a little, so it differs from end-to-end); subgraphs: how many are offloaded; offloaded compute: the "
    "backend computing; boundary: tensors handed into and out of the backend; calls crossing: calls into a "
    "backend per run; host: TVM's kernels and the VM's own work."
)
_NUMERIC = re.compile(r"^[\d.e+-]+\s*(ms|s|µs|%|x)?$|^\d+$")


def _check_rows(numerics) -> list:
    return [
        (
            r.name,
            r.target,
            _ran(r.backend, r.detail),
            str(r.calls),
            f"{r.max_abs:.2e}",
            f"{r.max_rel:.2e}",
            "not called" if not r.calls else ("OVER" if r.over else "ok"),
        )
        for r in numerics.rows
    ]


def _text_table(head: tuple, rows: list) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    return "\n".join("  ".join(str(x).ljust(w) for x, w in zip(row, widths)).rstrip() for row in [head, *rows])


def _cell(x) -> str:
    """A table cell: numbers and times on one line, right-aligned; names wrap anywhere, whole in a tooltip."""
    text = str(x)
    if _NUMERIC.match(text):
        return f'<td style="white-space:nowrap;text-align:right">{html.escape(text)}</td>'
    return f'<td style="overflow-wrap:anywhere;text-align:left" title="{html.escape(text)}">{html.escape(text)}</td>'


def _html_table(head: tuple, rows: list, caption: str, flagged=(), key: str = "") -> str:
    """A table as wide as its output at most, every cell in sight; ``key`` explains the columns under it."""
    th = "".join(f'<th style="white-space:nowrap;text-align:left">{html.escape(h)}</th>' for h in head)
    flag = f' style="color:{OVER};font-weight:bold"'
    body = "".join(
        f"<tr{flag if k in flagged else ''}>" + "".join(_cell(x) for x in row) + "</tr>" for k, row in enumerate(rows)
    )
    note = f'<p class="byoc-table-key" style="color:#495057;font-size:12px;margin:2px 0 10px">{html.escape(key)}</p>'
    return (
        '<table class="byoc-table" style="max-width:100%;table-layout:auto;margin:0">'
        f"<caption style='text-align:left;caption-side:top'>{html.escape(caption)}</caption><tr>{th}</tr>{body}"
        f"</table>{note if key else ''}"
    )


def _share_line(profile) -> str:
    return ", ".join(f"{t} {ms(s)} ({f:.0%})" for t, s, f in shares(profile))


def top_text(profile, n: int = 10) -> str:
    """The ``n`` slowest entries as a text table, under the by-target shares."""
    return f"{summary_line(profile)}\nby target: {_share_line(profile)}\n" + _text_table(
        TOP_HEAD, _top_rows(profile, n)
    )


def top_html(profile, n: int = 10) -> str:
    caption = f"{summary_line(profile)}. By target: {_share_line(profile)}. The {n} slowest entries:"
    return _html_table(TOP_HEAD, _top_rows(profile, n), caption, key=TOP_KEY)


NOTHING_OFFLOADED = "no subgraph was offloaded, so nothing differs from TVM alone"  # TVM alone, or no rule on


def numerics_text(numerics) -> str:
    """Each offloaded subgraph against TVM alone, as a text table."""
    mark = f" [{numerics.mark}]" if numerics.mark else ""
    head = f"offloaded subgraphs vs TVM alone, tolerance {numerics.tolerance:g} relative{mark}"
    return head + "\n" + (_text_table(CHECK_HEAD, _check_rows(numerics)) if numerics.rows else NOTHING_OFFLOADED)


def numerics_html(numerics) -> str:
    caption = "Offloaded subgraphs vs TVM alone (relative error over max |TVM output|), tolerance "
    caption += f"{numerics.tolerance:g}" + (f" [{numerics.mark}]" if numerics.mark else "")
    if not numerics.rows:
        return f"<p>{html.escape(caption)}: {NOTHING_OFFLOADED}.</p>"
    flagged = {k for k, r in enumerate(numerics.rows) if r.over}
    return _html_table(CHECK_HEAD, _check_rows(numerics), caption, flagged, key=CHECK_KEY)


def builds_rows(profiles: dict) -> list:
    """One row per build (``{label: Profile}``): the prune lesson in numbers."""
    rows = []
    for label, p in profiles.items():
        kinds = p.by_kind
        crossings = sum(e.calls for e in p.entries if e.kind == BOUNDARY and e.phase == "in")
        rows.append(
            {
                "build": label,
                "end_to_end_s": p.end_to_end_s,
                "entries_s": p.total_s,
                "subgraphs": len(p.backends),
                "offloaded_s": kinds.get("subgraph", 0.0),
                "boundary_s": kinds.get(BOUNDARY, 0.0),
                "crossings": crossings,
                "host_s": kinds.get("kernel", 0.0) + kinds.get("builtin", 0.0) + kinds.get("extern", 0.0),
            }
        )
    return rows


def builds_html(profiles: dict) -> str:
    rows = [
        (
            r["build"],
            ms(r["end_to_end_s"]),
            ms(r["entries_s"]),
            r["subgraphs"],
            ms(r["offloaded_s"]),
            ms(r["boundary_s"]),
            r["crossings"],
            ms(r["host_s"]),
        )
        for r in builds_rows(profiles)
    ]
    return _html_table(BUILDS_HEAD, rows, "The same model, built several ways: where the time goes", key=BUILDS_KEY)


@dataclasses.dataclass
class LatencyMap:
    """A latency map with its tables; shows itself in a notebook."""

    dot: object  # graphviz.Digraph
    text: str
    tables_html: str

    @property
    def svg(self) -> str:
        return render.to_svg(self.dot)

    def _repr_html_(self) -> str:
        return diagram_html(self.svg) + self.tables_html


def report(
    built,
    profile=None,
    numerics=None,
    collapse: bool = False,
    title: str = "",
    top: int = 10,
) -> LatencyMap:
    """The map of ``built`` (shaded by ``profile``, subgraphs marked by ``numerics``) and its tables."""
    shaded = shade(built, profile, numerics, collapse)
    ran = ", ".join(dict.fromkeys(_ran(s.backend, s.detail) for s in built.subgraphs.values()))
    where = f" on {ran}" if ran else ""  # a subgraph's backend and precision are part of what was timed or checked
    what = "numeric check vs TVM alone" if profile is None and numerics is not None else "latency map"
    title = title or f"{what}: codegen stage{where}" + (f" — {built.mark}" if built.mark else "")
    dot = to_dot(shaded, profile, numerics, title, show_shapes=not collapse)
    texts = []
    if profile is not None:
        texts.append(top_text(profile, top))
    if numerics is not None:
        texts.append(numerics_text(numerics))
    tables = (top_html(profile, top) if profile else "") + (numerics_html(numerics) if numerics else "")
    return LatencyMap(dot, "\n\n".join(texts), tables)


def stacked(reports: dict) -> str:
    """HTML with the maps of several builds (``{label: LatencyMap}``), one under the other, each as wide as
    the output: side by side, two maps of a large model are too small to read on a projector."""
    return "".join(
        f'<div class="byoc-report"><h4>{html.escape(label)}</h4>{diagram_html(r.svg)}{r.tables_html}</div>'
        for label, r in reports.items()
    )


def time_view(codegen, graph, title: str, built, profile, numerics=None, collapse: bool = False) -> str:
    """The widget's "time" view, as SVG: ``graph``, the diagram of the ``codegen`` stage (opened and
    folded as the widget draws it; ``collapse`` as it was drawn), shaded by ``profile``, under ``title``.

    ``built`` must come from the stages that end in ``codegen`` (``timing.build(workbench.stages)``):
    the map finds each measured binding in the very module drawn.
    """
    if built.stages[-1] is not codegen:
        raise WorkbenchError(
            "The measurement is of another build than the workbench shows (a rule or the prune switch changed).",
            "measure again: timing.profile(timing.build(workbench.stages), inputs).",
        )
    shaded = shade(built, profile, numerics, graph=graph)
    return render.to_svg(to_dot(shaded, profile, numerics, title + " — measured", show_shapes=not collapse))


@dataclasses.dataclass
class Lesson:
    """Several builds of one model, measured: a table of where the time goes, then each build's map with
    its slowest calls (and, for those compared, each subgraph against TVM alone), one under the other."""

    profiles: dict  # label -> Profile
    numerics: dict  # label -> Numerics, for the builds compared
    reports: dict  # label -> LatencyMap

    def _repr_html_(self) -> str:
        return f'<div class="byoc-lesson">{builds_html(self.profiles)}{stacked(self.reports)}</div>'
