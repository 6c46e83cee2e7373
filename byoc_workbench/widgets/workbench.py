"""The workbench widget: rule checkboxes, a stage selector, the diagram and panels.

The pure twin is :class:`byoc_workbench.session.Workbench` and its ``View``;
the helpers at the top of this file turn a ``View`` into HTML strings and are
tested on their own. :class:`WorkbenchWidget` only wires controls to them:
each control builds a new ``Workbench`` (or a new ``View``) and redraws.
"""

from __future__ import annotations

import html
import logging
from pathlib import Path

import anywidget
import ipywidgets as W
import traitlets

from ..errors import WorkbenchError
from ..flow import stages
from ..flow.rules import Target, get_target
from ..models import demo
from ..session import View, Workbench

log = logging.getLogger(__name__)

_HERE = Path(__file__).parent
PRUNE_LABEL = "prune subgraphs with no MAC op"
STAGE_HELP = {
    "source": "The module as written: every op runs on the host.",
    "composite": "Pattern rules fold matches into composite functions (the seed's MergeComposite).",
    "annotate": "Per-op rules claim single calls; every claimed node now names its target (compiler_begin/end).",
    "merge": "Neighbouring claims of one target are grouped into regions that cannot form a cycle "
    "(MergeCompilerRegions).",
    "partition": "Each region is lifted into a global function with Codegen and global_symbol (PartitionGraph).",
    "prune": "Subgraphs that fail the prune rule go back to the host (prune_tensorrt_subgraphs).",
    "codegen": "The target's codegen compiles each subgraph; the host calls the generated code.",
}
NO_SELECTION = (
    "<i>Click a node to see its op, attributes, types and which rule claimed it. "
    "Double-click a composite or subgraph to open it.</i>"
)


# --- pure helpers: View -> HTML ----------------------------------------------------


def _esc(value) -> str:
    return html.escape(str(value))


def _short(op: str) -> str:
    return op.replace("relax.", "", 1)


def status_line(err: BaseException) -> str:
    """One line for any error: a ``WorkbenchError``'s message, else its type and first line."""
    text = str(err) if isinstance(err, WorkbenchError) else f"{type(err).__name__}: {str(err)}"
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    line = lines[0] if lines else type(err).__name__
    return line if len(line) <= 300 else line[:299] + "…"


def status_html(message: str = "") -> str:
    """The status area: empty, or one red line."""
    if not message:
        return ""
    return f'<div style="color:#c92a2a;font-weight:600">⚠ {_esc(message)}</div>'


def match_text(rule: str, enabled, matches: dict) -> str:
    """What a rule's checkbox says about it: off, matched nothing, or how many matches."""
    if rule not in enabled:
        return "off"
    n = matches.get(rule, 0)
    if n == 0:
        return "matched nothing"
    return f"{n} match{'es' if n != 1 else ''}"


def rule_label_html(rule, enabled, matches: dict) -> str:
    """The text beside a rule's checkbox: its doc and its match count."""
    text = match_text(rule.qualified, enabled, matches)
    color = "#c92a2a" if text == "matched nothing" else "#495057"
    return (
        f'<span style="color:#868e96">{_esc(rule.kind)}: {_esc(rule.doc)}</span> — '
        f'<b class="byoc-match-count" style="color:{color}">{_esc(text)}</b>'
    )


def subgraph_table_html(rows: list) -> str:
    """The subgraph table: name, target, op count and ops of each subgraph."""
    if not rows:
        return (
            '<div class="byoc-subgraphs byoc-empty">'
            "<i>No subgraphs at this stage: everything runs on the host.</i></div>"
        )
    head = "<tr><th>subgraph</th><th>target</th><th>ops</th><th>op list</th></tr>"
    body = "".join(
        f'<tr data-subgraph="{_esc(r["name"])}"><td><code>{_esc(r["name"])}</code></td><td>{_esc(r["target"])}</td>'
        f'<td style="text-align:right">{int(r["op_count"])}</td>'
        f"<td>{_esc(', '.join(_short(o) for o in r['ops']))}</td></tr>"
        for r in rows
    )
    return f'<table class="byoc-subgraphs">{head}{body}</table>'


def lines_html(lines: list, empty: str, css: str) -> str:
    """A list of lines (diff or notes) as a bullet list, or ``empty`` in italics."""
    if not lines:
        return f'<div class="{css}"><i>{_esc(empty)}</i></div>'
    return f'<ul class="{css}">' + "".join(f"<li><code>{_esc(ln)}</code></li>" for ln in lines) + "</ul>"


def code_html(text: str, css: str = "byoc-code") -> str:
    """Source text in a scrollable ``<pre>``."""
    return f'<pre class="{css}" style="max-height:420px;overflow:auto;font-size:12px;margin:0">{_esc(text)}</pre>'


def generated_html(generated: dict, stage: str) -> str:
    """The codegen's source for each subgraph, or why there is none at this stage."""
    if stage != "codegen":
        return (
            '<div class="byoc-generated">'
            "<i>Choose the codegen stage to see the generated source of each subgraph.</i></div>"
        )
    if not generated:
        return '<div class="byoc-generated"><i>No subgraph was compiled by the codegen.</i></div>'
    return (
        '<div class="byoc-generated">'
        + "".join(f"<h4 style='margin:6px 0'>{_esc(n)}</h4>{code_html(src)}" for n, src in generated.items())
        + "</div>"
    )


def _types_html(types) -> str:
    return ", ".join(f"<code>{_esc(t)}</code>" for t in types) if types else "—"


def details_html(node_id: str, details: dict | None) -> str:
    """The details panel of one node: op, attributes, types, and who claimed it or why none did."""
    if not node_id:
        return NO_SELECTION
    if details is None:
        return (
            f"<i>Node {_esc(node_id)} is not in this diagram "
            "(the legend, or a drawing from before the last change).</i>"
        )
    rows = [
        ("node", f"<code>{_esc(node_id)}</code> ({_esc(details.get('kind', ''))})"),
        ("op", f"<code>{_esc(details.get('op') or details.get('label', ''))}</code>"),
    ]
    rows.append(("target", _esc(details.get("target", ""))))
    attrs = details.get("attrs") or {}
    rows.append(("attributes", "<br>".join(f"{_esc(k)} = <code>{_esc(v)}</code>" for k, v in attrs.items()) or "—"))
    rows.append(("inputs", _types_html(details.get("inputs"))))
    rows.append(("output", _types_html([details["output"]] if details.get("output") else [])))
    if details.get("claimed_by"):
        rows.append(("claimed by", f"rule <code>{_esc(details['claimed_by'])}</code>"))
    elif "claimed_by" in details:
        rows.append(("not claimed", _esc(details.get("why_not_claimed") or "it runs on the host")))
    if details.get("ops_inside"):
        rows.append(("ops inside", _esc(", ".join(_short(o) for o in details["ops_inside"]))))
    body = "".join(
        '<tr><th style="text-align:left;vertical-align:top;padding-right:8px;white-space:nowrap">'
        f"{k}</th><td>{v}</td></tr>"
        for k, v in rows
    )
    return f"<table>{body}</table>"


def stage_summary(view: View) -> str:
    """One line about a stage: subgraphs, ops moved and notes."""
    n = len(view.subgraphs)
    kinds = "regions" if view.stage == "merge" else "subgraphs"
    parts = [f"{view.stage}: {n} {kinds if n != 1 else kinds[:-1]}"]
    if view.subgraphs:
        parts[0] += (
            " (" + "; ".join(f"{r['name']}: {', '.join(_short(o) for o in r['ops'])}" for r in view.subgraphs) + ")"
        )
    if view.changes:
        parts.append(f"{len(view.changes)} change{'s' if len(view.changes) != 1 else ''} since the stage before")
    parts += view.notes
    return "; ".join(parts)


def svg_body(svg: str) -> str:
    """The ``<svg>`` element alone, without the XML prolog and DOCTYPE Graphviz writes."""
    start = svg.find("<svg")
    return svg[start:] if start >= 0 else svg


def expand_key(details: dict | None) -> str | None:
    """What ``Workbench.view(expand=...)`` takes to open a node: a composite or subgraph name."""
    if not details or details.get("kind") not in ("composite", "subgraph", "fold"):
        return None
    if details["kind"] == "fold":  # a folded run of ops opens by its own id
        return details.get("id") or None
    return details.get("op") or None


def toggled(expand: frozenset, key: str) -> frozenset:
    """``expand`` with ``key`` added, or removed when it was there."""
    return expand - {key} if key in expand else expand | {key}


# --- the widgets ---------------------------------------------------------------------


class GraphView(anywidget.AnyWidget):
    """An SVG diagram with pan, zoom and node clicks (see graph_view.js).

    ``svg`` is the drawing; clicking a node sets ``selected`` to its id;
    double-clicking one sends ``{"event": "toggle", "id": ...}``.
    """

    _esm = (_HERE / "graph_view.js").read_text(encoding="utf-8")
    _css = (_HERE / "graph_view.css").read_text(encoding="utf-8")
    svg = traitlets.Unicode("").tag(sync=True)
    selected = traitlets.Unicode("").tag(sync=True)
    height = traitlets.Int(440).tag(sync=True)


class WorkbenchWidget(W.VBox):
    """Rules, stage, diagram and panels of one :class:`Workbench`.

    Use :func:`workbench_widget` to make one. Every change goes through
    ``set_rule``, ``set_prune``, ``set_stage``, ``select`` and ``toggle_expand``,
    which the controls call and tests can call too; an error in any of them
    leaves the previous state and shows one red line in ``status``.
    """

    def __init__(
        self,
        mod,
        target: Target,
        enabled=None,
        prune_rule=None,
        stage: str = "partition",
        extra_rules=(),
        error: Exception | None = None,
        collapse: bool = False,
        mark: str = "",
    ):
        self.target = target
        self.collapse = collapse
        self.workbench: Workbench | None = None
        self.view: View | None = None
        self.expand: frozenset = frozenset()
        self._syncing = False
        self.status = W.HTML("").add_class("byoc-status")
        self._pruning = prune_rule if prune_rule not in (None, stages.keep_all) else stages.no_mac()
        try:
            if error is not None:
                raise error
            self.workbench = Workbench(mod, target, enabled, prune_rule, extra_rules, mark=mark)
        except Exception as err:  # a bad module or rule must not break the cell
            self._error(err)
        rules = self.workbench.all_rules if self.workbench else tuple(target.rules) + tuple(extra_rules)
        enabled_now = self.workbench.enabled if self.workbench else set()

        self.rule_boxes: dict = {}
        self.rule_labels: dict = {}
        groups = []
        for tname in dict.fromkeys(r.target for r in rules):
            rows = [W.HTML(f"<b>target {_esc(tname)}</b>")]
            for r in (r for r in rules if r.target == tname):
                box = W.Checkbox(
                    value=r.qualified in enabled_now,
                    description=r.qualified,
                    indent=False,
                    disabled=self.workbench is None,
                )
                box.add_class("byoc-rule")
                box.layout = W.Layout(width="auto")
                box.observe(self._on_rule, names="value")
                label = W.HTML(rule_label_html(r, enabled_now, {}))
                self.rule_boxes[r.qualified] = box
                self.rule_labels[r.qualified] = label
                rows.append(W.HBox([box, label], layout=W.Layout(align_items="center")))
            groups.append(W.VBox(rows, layout=W.Layout(margin="0 32px 0 0")))
        self.prune_box = W.Checkbox(
            value=prune_rule is not stages.keep_all,
            description=PRUNE_LABEL,
            indent=False,
            disabled=self.workbench is None,
        )
        self.prune_box.add_class("byoc-prune")
        self.prune_box.layout = W.Layout(width="auto")
        self.prune_box.observe(self._on_prune, names="value")

        self.stage_picker = W.ToggleButtons(
            options=list(stages.STAGES), value=stage if stage in stages.STAGES else "partition"
        )
        self.stage_picker.style.button_width = "92px"
        self.stage_picker.add_class("byoc-stage")
        self.stage_picker.observe(self._on_stage, names="value")
        self.stage_help = W.HTML("").add_class("byoc-stage-help")
        self.summary = W.HTML("").add_class("byoc-summary")

        self.graph = GraphView()
        self.graph.add_class("byoc-graph-widget")
        self.graph.observe(self._on_select, names="selected")
        self.graph.on_msg(self._on_msg)
        self.details = W.HTML(
            NO_SELECTION,
            layout=W.Layout(
                width="32%", min_width="240px", overflow="auto", padding="4px 8px", border="1px solid #dee2e6"
            ),
        ).add_class("byoc-details")
        self.collapse_button = W.Button(
            description="collapse all",
            tooltip="close every opened composite and subgraph",
            layout=W.Layout(width="auto"),
        )
        self.collapse_button.on_click(lambda _: self.collapse_all())

        self.subgraph_table = W.HTML("").add_class("byoc-subgraph-table")
        self.changes = W.HTML("").add_class("byoc-changes")
        self.notes = W.HTML("").add_class("byoc-notes")
        self.script = W.HTML("").add_class("byoc-script")
        self.generated = W.HTML("").add_class("byoc-generated-code")
        self.tabs = W.Tab(children=[self.subgraph_table, self.changes, self.notes, self.script, self.generated])
        self.tabs.titles = ("Subgraphs", "Diff", "Notes", "TVMScript", "Generated code")
        self.tabs.add_class("byoc-tabs")

        controls = W.HBox(
            groups + [W.VBox([W.HTML("<b>prune</b>"), self.prune_box])], layout=W.Layout(flex_flow="row wrap")
        )
        super().__init__(
            [
                controls,
                W.HBox([self.stage_picker, self.collapse_button], layout=W.Layout(align_items="center")),
                self.stage_help,
                self.status,
                W.HBox([W.Box([self.graph], layout=W.Layout(width="68%")), self.details]),
                self.summary,
                self.tabs,
            ]
        )
        self.add_class("byoc-workbench")
        if self.workbench is not None:
            self._guard(self._redraw)

    # --- what controls and tests call -----------------------------------------------

    @property
    def stage(self) -> str:
        return self.stage_picker.value

    def set_rule(self, name: str, on: bool) -> bool:
        """Switch rule ``name`` on or off, recompute every stage and redraw; False on error."""
        return self._guard(lambda: self._apply(self.workbench.with_rule(name, on)))

    def set_prune(self, on: bool) -> bool:
        """Prune subgraphs with no MAC op (on) or keep every subgraph (off)."""
        return self._guard(lambda: self._apply(self.workbench.with_prune(self._pruning if on else stages.keep_all)))

    def set_stage(self, name: str) -> bool:
        """Show stage ``name``."""
        if name not in stages.STAGES:
            self._error(WorkbenchError(f"Unknown stage '{name}'.", f"choose one of: {', '.join(stages.STAGES)}."))
            return False
        self.stage_picker.value = name  # _on_stage redraws
        return not self.status.value

    def select(self, node_id: str) -> None:
        """Show node ``node_id``'s details (what a click in the diagram does)."""
        if self.graph.selected != node_id:
            self.graph.selected = node_id  # _on_select fills the panel
        else:
            self._guard(self._show_details)

    def toggle_expand(self, node_id: str) -> bool:
        """Open or close the composite or subgraph drawn as ``node_id`` (a double-click)."""
        return self._guard(lambda: self._toggle(node_id))

    def collapse_all(self) -> bool:
        self.expand = frozenset()
        return self._guard(self._redraw)

    # --- wiring ------------------------------------------------------------------------

    def _guard(self, action) -> bool:
        """Run ``action``; on any error keep the old state and show one line."""
        if self.workbench is None:
            return False
        try:
            action()
        except Exception as err:  # the widget must show every error, never raise into the frontend
            self._error(err)
            return False
        self.status.value = ""
        return True

    def _error(self, err: BaseException) -> None:
        log.debug("workbench widget error", exc_info=err)
        self.status.value = status_html(status_line(err))

    def _apply(self, wb: Workbench) -> None:
        view = wb.view(
            self.stage, expand=tuple(sorted(self.expand)), collapse=self.collapse
        )  # computes every stage; raises before anything changes
        self.workbench = wb
        self._show(view, keep_selection=False)

    def _redraw(self) -> None:
        self._show(
            self.workbench.view(self.stage, expand=tuple(sorted(self.expand)), collapse=self.collapse),
            keep_selection=False,
        )

    def _toggle(self, node_id: str) -> None:
        key = expand_key(self.view.nodes.get(node_id) if self.view else None)
        if key is None:
            key = self._opened_key(node_id)
        if key is None:
            return
        view = self.workbench.view(self.stage, expand=tuple(sorted(toggled(self.expand, key))), collapse=self.collapse)
        self.expand = toggled(self.expand, key)
        self._show(view, keep_selection=False)

    def _opened_key(self, element_id: str) -> str | None:
        """The composite or subgraph an opened cluster (``cluster_x_<id>``) or a node inside it stands for."""
        graph = self.workbench.graph(self.stage, tuple(sorted(self.expand)), collapse=self.collapse)
        cid = element_id[len("cluster_") :] if element_id.startswith("cluster_") else None
        if cid is None and element_id in graph.nodes:
            cid = graph.nodes[element_id].cluster
        cluster = graph.clusters.get(cid) if cid else None
        if cluster is None or cluster.kind not in ("composite", "subgraph"):
            return None
        name = cluster.label.split(" ", 1)[0]
        return name if name in self.expand else None

    def _show(self, view: View, keep_selection: bool) -> None:
        self.view = view
        wb = self.workbench
        for q, label in self.rule_labels.items():
            label.value = rule_label_html(
                next(r for r in wb.all_rules if r.qualified == q), wb.enabled, view.rule_matches
            )
        self._syncing = True
        try:
            for q, box in self.rule_boxes.items():
                box.value = q in wb.enabled
        finally:
            self._syncing = False
        self.stage_help.value = f"<i>{_esc(STAGE_HELP.get(view.stage, ''))}</i>"
        self.summary.value = f"<b>{_esc(stage_summary(view))}</b>"
        self.graph.svg = svg_body(view.svg)
        self.subgraph_table.value = subgraph_table_html(view.subgraphs)
        self.changes.value = lines_html(view.changes, "No op changed owner since the stage before.", "byoc-diff")
        self.notes.value = lines_html(view.notes, "No notes.", "byoc-note-list")
        self.script.value = code_html(view.script, "byoc-tvmscript")
        self.generated.value = generated_html(view.generated, view.stage)
        if not keep_selection and self.graph.selected:
            self.graph.selected = ""
        self._show_details()

    def _show_details(self) -> None:
        nid = self.graph.selected
        self.details.value = details_html(nid, self.view.nodes.get(nid) if self.view else None)

    def _on_rule(self, change) -> None:
        if self._syncing:
            return
        name = change["owner"].description
        if not self.set_rule(name, change["new"]):
            self._syncing = True
            try:
                change["owner"].value = change["old"]
            finally:
                self._syncing = False

    def _on_prune(self, change) -> None:
        if not self._syncing:
            self.set_prune(change["new"])

    def _on_stage(self, change) -> None:
        self._guard(self._redraw)

    def _on_select(self, change) -> None:
        self._guard(self._show_details)

    def _on_msg(self, widget, content, buffers) -> None:
        if isinstance(content, dict) and content.get("event") == "toggle":
            self.toggle_expand(str(content.get("id", "")))


def workbench_widget(
    mod=None,
    target="byoc-target",
    enabled=None,
    prune_rule=None,
    stage: str = "partition",
    extra_rules=(),
    collapse: bool = False,
    mark: str = "",
) -> WorkbenchWidget:
    """The interactive workbench for ``mod`` (default: the seed's demo graph).

    Parameters
    ----------
    mod : tvm.IRModule, optional
        The Relax module to partition; ``None`` uses :func:`demo.demo_module`.
    target : str or Target
        The BYOC target whose rules the checkboxes switch.
    enabled : iterable of str, optional
        Qualified rule names to start with (``byoc-target.add``); all when None.
    prune_rule : callable, optional
        ``stages.no_mac()`` by default; ``stages.keep_all`` keeps every subgraph.
    stage : str
        The stage shown first.
    collapse : bool
        Hide constants and fold long runs of ops (for models of hundreds of ops).
    mark : str
        Shown in every diagram title, e.g. "untrained weights".

    Returns
    -------
    WorkbenchWidget
        Display it as the last expression of a cell. Errors show as one red
        line in the widget rather than as a traceback.
    """
    if isinstance(target, str):
        try:
            target = get_target(target)
        except WorkbenchError as err:
            return WorkbenchWidget(None, Target(str(target), ()), stage=stage, error=err)
    return WorkbenchWidget(
        demo.demo_module() if mod is None else mod,
        target,
        enabled,
        prune_rule,
        stage,
        extra_rules,
        collapse=collapse,
        mark=mark,
    )
