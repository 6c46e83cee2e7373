"""The workbench widget: rule checkboxes, a stage selector, the diagram and panels.

The pure twin is :class:`byoc_workbench.session.Workbench` and its ``View``;
the helpers in :mod:`.html` turn a ``View`` into HTML strings and are tested
on their own. :class:`WorkbenchWidget` only wires controls to them: each
control builds a new ``Workbench`` (or a new ``View``) and redraws. Node ids
come from the values the nodes stand for, so a selection and the opened calls
survive a rule toggle.
"""

from __future__ import annotations

import dataclasses
import functools
import logging

import ipywidgets as W

from byoc_workbench import stages
from byoc_workbench.backends.registry import native
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.draw import latency
from byoc_workbench.flow import report
from byoc_workbench.flow.rules import Target, as_target
from byoc_workbench.measure.time import timing
from byoc_workbench.measure.time.runner import offload_choice
from byoc_workbench.models import demo
from byoc_workbench.session import View, Workbench
from byoc_workbench.widgets.graph_view import GraphView, expand_key, toggled
from byoc_workbench.widgets.html import (
    NO_SELECTION,
    code_html,
    details_html,
    esc,
    generated_html,
    lines_html,
    stage_summary,
    status_html,
    status_line,
    subgraphs_tab_html,
    svg_body,
)
from byoc_workbench.widgets.rule_panel import RulePanel

log = logging.getLogger(__name__)

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


@dataclasses.dataclass(frozen=True, kw_only=True)
class WidgetOptions:
    """What a :class:`WorkbenchWidget` starts with besides its module and target (:func:`workbench_widget`'s
    parameters); it takes them as keywords (a misspelt one is a TypeError)."""

    enabled: object = None  # qualified rule names switched on; all when None
    prune_rule: object = None  # stages.no_mac() when None
    stage: str = "partition"  # the stage shown first
    extra_rules: tuple = ()
    collapse: bool = False  # hide constants and fold long runs of ops
    mark: str = ""  # in every diagram title, e.g. "untrained weights"
    inputs: object = None  # what the "time" view runs the build on
    backend: str | None = None  # what compiles the codegen stage's subgraphs
    tvm_target: str = "llvm"  # what TVM builds the time view for: llvm, or cuda on a GPU


class WorkbenchWidget(W.VBox):
    """Rules, stage, diagram and panels of one :class:`Workbench`.

    Use :func:`workbench_widget` to make one. Every change goes through
    ``set_rule``, ``set_prune``, ``set_stage``, ``select`` and ``toggle_expand``,
    which the controls call and tests can call too; an error in any of them
    leaves the previous state and shows one red line in ``status``.
    """

    def __init__(self, mod, target: Target, error: Exception | None = None, **options):
        opts = WidgetOptions(**options)
        self.target = target
        self.inputs = opts.inputs
        self.tvm_target = opts.tvm_target
        self._syncing = False  # set while the controls are put back to what is shown
        self._measured: tuple | None = None  # (workbench, profile, svg) of the last measurement
        self.collapse = opts.collapse
        self.workbench: Workbench | None = None
        self.view: View | None = None
        self._script_of: View | None = None  # the view the TVMScript tab shows
        self.expand: frozenset = frozenset()
        self.status = W.HTML("").add_class("byoc-status")
        prune_rule = opts.prune_rule
        self._pruning = prune_rule if prune_rule not in (None, stages.keep_all) else stages.no_mac()
        try:
            if error is not None:
                raise error
            self.workbench = Workbench(
                mod,
                target,
                opts.enabled,
                prune_rule,
                opts.extra_rules,
                mark=opts.mark,
                backend=opts.backend,
                pause_gc=True,
            )
        except Exception as err:  # a bad module or rule must not break the cell
            self._error(err)
        self._make_rules(prune_rule, tuple(opts.extra_rules))
        self._make_stage_row(opts.stage, opts.inputs)
        self._make_diagram()
        self._make_tabs()

        super().__init__(
            [
                self.rules_panel,
                W.HBox(
                    [
                        W.HTML("<b>stage</b>").add_class("byoc-stage-label"),
                        self.stage_picker,
                        self.time_button,
                        self.collapse_button,
                    ]
                ).add_class("byoc-stage-row"),
                self.stage_help,
                self.status,
                # The details beside the diagram on a wide screen, under it on a narrow one (1366 px with
                # Lab's file browser open), where the diagram needs the whole width.
                W.HBox(
                    [W.Box([self.graph], layout=W.Layout(flex="3 1 700px", min_width="0")), self.details],
                    layout=W.Layout(flex_flow="row wrap"),
                ).add_class("byoc-diagram-row"),
                self.summary,
                self.tabs,
            ]
        )
        self.add_class("byoc-workbench")
        if self.workbench is not None:
            self._guard(self._redraw)

    # --- the controls, made once by __init__ -----------------------------------------

    def _make_rules(self, prune_rule, extra_rules: tuple) -> None:
        """The rule panel, with the prune checkbox in it."""
        rules = self.workbench.all_rules if self.workbench else tuple(self.target.rules) + extra_rules
        enabled_now = self.workbench.enabled if self.workbench else set()

        self.prune_box = W.Checkbox(
            value=prune_rule is not stages.keep_all,
            description=PRUNE_LABEL,
            indent=False,
            disabled=self.workbench is None,
        )
        self.prune_box.add_class("byoc-prune")
        self.prune_box.layout = W.Layout(width="auto")
        self.prune_box.observe(self._on_prune, names="value")
        self.rules_panel = RulePanel(
            rules,
            enabled_now,
            on_change=self.set_rules,
            prune=self.prune_box,
            title=f"<b>target {esc(self.target.name)}</b> <span style='color:#868e96'>{esc(self.target.doc)}</span>",
            disabled=self.workbench is None,
        )
        self.rule_boxes = self.rules_panel.boxes  # qualified rule name -> its checkbox
        self.rule_labels = self.rules_panel.labels

    def _make_stage_row(self, stage: str, inputs) -> None:
        """The stage picker and its help, the summary line, and the "time" and "collapse all" buttons."""
        self.stage_picker = W.ToggleButtons(
            options=list(stages.STAGES), value=stage if stage in stages.STAGES else "partition"
        )
        self.stage_picker.style.button_width = "92px"
        self.stage_picker.add_class("byoc-stage")
        self.stage_picker.observe(self._on_stage, names="value")
        self.stage_help = W.HTML("").add_class("byoc-stage-help")
        self.summary = W.HTML("").add_class("byoc-summary")

        # Set apart from the stages at the row's far end: it changes the drawing, not the stage.
        self.collapse_button = W.Button(
            description="collapse all", icon="compress", disabled=True, layout=W.Layout(width="auto")
        )
        self.collapse_button.add_class("byoc-collapse")
        self.collapse_button.on_click(lambda _: self.collapse_all())
        self.time_button = W.ToggleButton(
            description="time",
            icon="clock-o",
            disabled=inputs is None,
            tooltip="measure the codegen stage's build and shade each node by its time"
            if inputs is not None
            else "pass inputs=[...] to workbench_widget to measure the build",
            layout=W.Layout(width="auto"),
        )
        self.time_button.add_class("byoc-time")
        self.time_button.observe(lambda change: self.set_time(change["new"]), names="value")

    def _make_diagram(self) -> None:
        """The diagram and the details panel beside or under it."""
        self.graph = GraphView()
        self.graph.add_class("byoc-graph-widget")
        self.graph.observe(self._on_select, names="selected")
        self.graph.on_msg(self._on_msg)
        self.details = W.HTML(
            NO_SELECTION,
            layout=W.Layout(
                flex="1 1 260px", min_width="240px", overflow="auto", padding="4px 8px", border="1px solid #dee2e6"
            ),
        ).add_class("byoc-details")

    def _make_tabs(self) -> None:
        """The tabs under the diagram: subgraphs, diff, notes, TVMScript, generated code."""
        self.subgraph_table = W.HTML("").add_class("byoc-subgraph-table")
        self.changes = W.HTML("").add_class("byoc-changes")
        self.notes = W.HTML("").add_class("byoc-notes")
        self.script = W.HTML("").add_class("byoc-script")
        self.generated = W.HTML("").add_class("byoc-generated-code")
        self.tabs = W.Tab(children=[self.subgraph_table, self.changes, self.notes, self.script, self.generated])
        self.tabs.titles = ("Subgraphs", "Diff", "Notes", "TVMScript", "Generated code")
        self.tabs.add_class("byoc-tabs")
        self.tabs.observe(lambda _change: self._show_script(), names="selected_index")

    # --- what controls and tests call -----------------------------------------------

    @property
    def stage(self) -> str:
        return self.stage_picker.value

    def set_rule(self, name: str, on: bool) -> bool:
        """Switch rule ``name`` on or off, recompute every stage and redraw; False on error."""
        return self.set_rules([name], on)

    def set_rules(self, names, on: bool) -> bool:
        """Switch every rule in ``names`` on or off, then recompute once (a group's "all on/off")."""
        return self._guard(
            lambda: self._apply(functools.reduce(lambda wb, n: wb.with_rule(n, on), names, self.workbench))
        )

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

    def set_time(self, on: bool) -> bool:
        """Show the measured latency map of the codegen stage (on), or the plain diagram (off)."""
        if self.time_button.value != on:
            self.time_button.value = on  # observing it calls back here
            return not self.status.value
        if on and self.stage != "codegen":
            self.stage_picker.value = "codegen"  # _on_stage redraws, measured
            return not self.status.value
        return self._guard(self._redraw)

    def collapse_all(self) -> bool:
        self.expand = frozenset()
        return self._guard(self._redraw)

    # --- wiring ------------------------------------------------------------------------

    def _guard(self, action) -> bool:
        """Run ``action``; on any error keep the old state, with the controls showing it, and one line."""
        if self.workbench is None or self._syncing:
            return False
        try:
            action()
        except Exception as err:  # the widget must show every error, never raise into the frontend
            self._error(err)
            self._sync_controls()
            return False
        self.status.value = ""
        return True

    def _sync_controls(self) -> None:
        """The stage bar and the time button back on what the diagram shows, without redrawing."""
        if self.view is None:
            return
        self._syncing = True
        try:
            self.stage_picker.value = self.view.stage
            self.time_button.value = self.view.measured
        finally:
            self._syncing = False

    def _error(self, err: BaseException) -> None:
        log.debug("workbench widget error", exc_info=err)
        self.status.value = status_html(status_line(err))

    def _apply(self, wb: Workbench) -> None:
        # Computes every stage and raises before anything changes.
        view = self._view(wb, self.expand)
        self.workbench = wb
        self._show(view)

    def _redraw(self) -> None:
        self._show(self._view(self.workbench, self.expand))

    def _view(self, wb: Workbench, expand: frozenset) -> View:
        """The current stage of ``wb`` with ``expand`` opened: its latency map when the time view is on
        at the codegen stage (measured once per rule set and prune switch, about a second on the demo)."""
        timed = self.time_button.value and self.stage == "codegen"
        # The time view draws its own diagram, so the plain one is not rendered only to be replaced.
        # strict=False: what was opened at another stage stays in expand, for when the user steps back to it
        view = wb.view(self.stage, expand=tuple(sorted(expand)), svg=not timed, collapse=self.collapse, strict=False)
        if not timed:
            return view
        if self._measured is None or self._measured[0] is not wb:
            what = f"{wb.backend} + TVM" if wb.backend else "TVM"
            self.status.value = status_html(f"building with {what} and measuring 5 runs …", busy=True)
            built = timing.build(wb.stages, tvm_target=self.tvm_target)
            self._measured = (wb, timing.profile(built, self.inputs, runs=5), built)
        _, profile, built = self._measured
        drawn = wb.graph("codegen", tuple(sorted(expand)), self.collapse, strict=False)
        svg = latency.time_view(wb.stage("codegen"), drawn, wb.title("codegen"), built, profile, collapse=self.collapse)
        notes = [f"measured: {latency.summary_line(profile)}", *view.notes]
        return dataclasses.replace(view, svg=svg, notes=notes, measured=True)

    def _toggle(self, node_id: str) -> None:
        key = expand_key(self.view.nodes.get(node_id) if self.view else None) or self._opened_key(node_id)
        if key is None:
            return
        view = self._view(self.workbench, toggled(self.expand, key))
        self.expand = toggled(self.expand, key)
        self._show(view)

    def _opened_key(self, element_id: str) -> str | None:
        """The opened call that a cluster (``cluster_x_<node id>``), or a node drawn inside one, stands for."""
        if element_id.startswith("cluster_x_"):
            key = element_id[len("cluster_x_") :]
        else:
            cluster = (self.view.nodes.get(element_id) or {}).get("cluster", "") if self.view else ""
            key = cluster[len("x_") :] if cluster.startswith("x_") else None
        return key if key in self.expand else None

    def _show_script(self) -> None:
        """Print the TVMScript tab when it is open (printing takes a second on 6,000 ops)."""
        shown = self.tabs.selected_index == self.tabs.children.index(self.script)
        if self.view is None or not shown or self._script_of is self.view:
            return
        self._script_of = self.view
        self.script.value = code_html(self.view.script, "byoc-tvmscript")

    def _show(self, view: View) -> None:
        """Show ``view``; the selection stays while its node is still drawn in the same kind of drawing (the
        time map and the plain diagram draw different nodes, so switching between them clears it)."""
        if self.view is not None and self.view.measured != view.measured:
            self.graph.selected = ""
        self.view = view
        self.rules_panel.update(self.workbench.enabled, view.rule_matches)
        self.stage_help.value = f"<i>{esc(STAGE_HELP.get(view.stage, ''))}</i>"
        self.summary.value = f"<b>{esc(stage_summary(view))}</b>"
        self.graph.svg = svg_body(view.svg)
        self.subgraph_table.value = subgraphs_tab_html(view)
        self.changes.value = lines_html(view.changes, "No op changed owner since the stage before.", "byoc-diff")
        self.notes.value = lines_html(view.notes, "No notes.", "byoc-note-list")
        self._script_of = None
        self._show_script()
        self.generated.value = generated_html(view.generated, view.stage)
        opened = len(self.expand)
        self.collapse_button.disabled = not opened
        self.collapse_button.tooltip = (
            f"close the {opened} opened call{'s' if opened != 1 else ''}"
            if opened
            else ("nothing is opened: double-click a composite, subgraph or folded run to open it")
        )
        if self.graph.selected and self.graph.selected not in view.nodes:
            self.graph.selected = ""
        self._show_details()

    def _show_details(self) -> None:
        nid = self.graph.selected
        details = self.view.nodes.get(nid) if self.view else None
        others = None
        if details and "claimed_by" in details and not details["claimed_by"] and details.get("op"):
            others = report.other_takers(details["op"], self.target.name)
        self.details.value = details_html(nid, details, others)

    def _on_prune(self, change) -> None:
        self.set_prune(change["new"])

    def _on_stage(self, change) -> None:
        if change["new"] != "codegen" and self.time_button.value and not self._syncing:
            self._syncing = True  # the time view is the codegen stage's: leaving it switches it off
            try:
                self.time_button.value = False
            finally:
                self._syncing = False
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
    inputs=None,
    backend: str | None = None,
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
    inputs : list of numpy arrays, optional
        Inputs of ``main``; with them the "time" button shows the codegen
        stage's build measured, each node shaded by its time.
    backend : str, optional
        What compiles the codegen stage's subgraphs (``onnxruntime``,
        ``tensorrt``, ``auto``, ``teaching``, ``tvm``). By default the target's
        own codegen (the teaching one for ``byoc-target``); for a target
        without one (``tensorrt``), given ``inputs``, what
        :func:`byoc_workbench.measure.time.runner.offload_choice` picks: TensorRT where it
        can run, else ONNX Runtime, with TVM on the GPU where there is one.

    Returns
    -------
    WorkbenchWidget
        Display it as the last expression of a cell. Errors show as one red
        line in the widget rather than as a traceback.
    """
    if not isinstance(target, Target):
        try:
            target = as_target(target)  # a registered target's name
        except WorkbenchError as err:
            return WorkbenchWidget(None, Target(str(target), ()), stage=stage, error=err)
    tvm_target = "llvm"
    if backend is None and inputs is not None and native(target.codegen) is None:
        choice = offload_choice()  # it looks for TensorRT, a GPU and a CUDA compiler: once
        backend, tvm_target = choice.backend, choice.tvm_target
    return WorkbenchWidget(
        demo.demo_module() if mod is None else mod,
        target,
        enabled=enabled,
        prune_rule=prune_rule,
        stage=stage,
        extra_rules=extra_rules,
        collapse=collapse,
        mark=mark,
        inputs=inputs,
        backend=backend,
        tvm_target=tvm_target,
    )
