"""A dropdown over the zoo's models: picking one imports it and redraws its partition and its run.

The pure twin is :func:`byoc_workbench.workflow.zoo_report`; this module only lays it out. Each pick runs
it in a child process that exits (:func:`byoc_workbench.workflow.zoo_pick`), so a seat's kernel holds one
report between picks, never a model's builds.
"""

from __future__ import annotations

import logging

import ipywidgets as widgets

from byoc_workbench import workflow
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.models import zoo
from byoc_workbench.subjects import ModelRef
from byoc_workbench.widgets.html import esc, status_html, status_line
from byoc_workbench.widgets.prediction_view import prediction_view


def stages_html(report: workflow.ZooReport) -> str:
    """The stage table: ops and subgraphs per stage, up to prune."""
    rows = "".join(
        f"<tr><td>{esc(name)}</td><td style='text-align:right'>{ops}</td><td style='text-align:right'>{n}</td></tr>"
        for name, ops, n in report.stages
    )
    return f"<table class='byoc-subgraphs'><tr><th>stage</th><th>ops</th><th>subgraphs</th></tr>{rows}</table>"


def subgraphs_html(report: workflow.ZooReport, limit: int = 30) -> str:
    """The partition stage's subgraphs, and whether prune kept each offloaded."""
    rows = "".join(
        f"<tr><td><code>{esc(r['name'])}</code></td><td style='text-align:right'>{r['ops']}</td>"
        f"<td style='text-align:right'>{r['conv2d']}</td><td>{'offloaded' if r['kept'] else 'back to the host'}</td>"
        f"<td>{esc(r['top'])}</td></tr>"
        for r in report.subgraphs[:limit]
    )
    more = len(report.subgraphs) - limit
    tail = f"<tr><td colspan='5'><i>… {more} more</i></td></tr>" if more > 0 else ""
    head = "<tr><th>subgraph</th><th>ops</th><th>conv</th><th>after prune</th><th>most frequent ops</th></tr>"
    return f"<table class='byoc-subgraphs'>{head}{rows}{tail}</table>"


class _Notes(logging.Handler):
    """The package's log lines while a model loads (no trained weights, what its outputs mean), kept to
    be shown in the chooser as notes: not on stderr, which Lab shows in pink and logs as errors."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.lines: list = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def html(self) -> str:
        return "".join(
            f"<div style='color:#495057;font-size:13px'>note: {esc(line)}</div>" for line in dict.fromkeys(self.lines)
        )


def _kind_of(name: str) -> str:
    """``SSD, detection``; a family named after its task (classification) once."""
    spec = zoo.MODELS[name]
    return spec.family if spec.family.lower() == spec.task.lower() else f"{spec.family}, {spec.task}"


def zoo_chooser(models=None, value: str | None = None, weights=None, backend: str | None = None):
    """The chooser: a dropdown over ``models`` (default: every model of :data:`zoo.MODELS`).

    Picking a model imports it, partitions it with TensorRT's rules, prunes it, runs it
    offloaded and shows the counts, the subgraphs, why its family partitions so, and its
    outputs as its task reads them. A model that cannot be imported says why in one line.
    The returned box's ``report`` attribute holds the last :class:`~byoc_workbench.workflow.ZooReport`,
    without its build (:meth:`~byoc_workbench.workflow.ZooReport.without_build`).
    """
    names = list(models or zoo.MODELS)
    for name in names:
        zoo.model_spec(name)  # an unknown name is one line, with the names it could be
    if value is not None and value not in names:
        raise WorkbenchError(f"value {value!r} is not among the chooser's models", f"pick one of: {', '.join(names)}")
    labels = [(f"{n}  ({_kind_of(n)})", n) for n in names]
    dropdown = widgets.Dropdown(
        options=labels, value=value or names[0], description="model", layout=widgets.Layout(width="560px")
    )
    status, notes, why = widgets.HTML(), widgets.HTML(), widgets.HTML()
    stages, subgraphs, run = widgets.HTML(), widgets.HTML(layout=widgets.Layout(margin="0 0 0 40px")), widgets.VBox([])
    tables = widgets.HBox([stages, subgraphs], layout=widgets.Layout(align_items="flex-start"))
    log = widgets.Output()  # what an import prints shows here, not in Lab's log console
    box = widgets.VBox([dropdown, status, notes, log, why, tables, run])
    box.report = None

    def say(line: str) -> None:
        status.value = f"<i>{esc(line)}</i>"

    def show(change=None):
        box.report = None  # the last model's outputs go at once: nothing on screen belongs to another model
        why.value = notes.value = stages.value = subgraphs.value = ""
        run.children = ()
        log.clear_output()
        workflow.release_memory()  # the last report's arrays, before the next one's
        package, kept, report = logging.getLogger("byoc_workbench"), _Notes(), None
        package.addHandler(kept)
        with log:  # a real bug's traceback shows here, in the widget
            try:
                ref = ModelRef(kind="zoo", name=dropdown.value, weights=weights)
                report = workflow.zoo_pick(ref, backend, say=say).value  # built in a child process that exits
            except WorkbenchError as err:
                status.value = status_html(status_line(err))
            finally:
                package.removeHandler(kept)
                notes.value = kept.html()
        if report is None:
            return
        box.report = report
        line, mark = esc(report.run.line()), esc(report.mark)  # the run's line carries the weights' mark once
        status.value = f"<b>{esc(report.model)}</b>: " + (
            line.replace(mark, f"<b style='color:#c92a2a'>{mark}</b>", 1) if mark else line
        )
        why.value = f"<p style='max-width:900px'><b>{esc(report.family)}</b>: {esc(report.why)}</p>"
        stages.value, subgraphs.value = stages_html(report), subgraphs_html(report)
        title = f"{report.model} [{report.run.backend}]"
        run.children = [prediction_view(report.picture, report.prediction, report.mark, title)]

    dropdown.observe(show, names="value")
    show()
    return box
