"""Jupyter widgets for the workbench; the logic lives in :mod:`byoc_workbench.session`."""

from .workbench import (
    GraphView,
    WorkbenchWidget,
    code_html,
    details_html,
    expand_key,
    generated_html,
    lines_html,
    match_text,
    rule_label_html,
    stage_summary,
    status_line,
    subgraph_table_html,
    svg_body,
    toggled,
    workbench_widget,
)

__all__ = [
    "GraphView",
    "WorkbenchWidget",
    "code_html",
    "details_html",
    "expand_key",
    "generated_html",
    "lines_html",
    "match_text",
    "rule_label_html",
    "stage_summary",
    "status_line",
    "subgraph_table_html",
    "svg_body",
    "toggled",
    "workbench_widget",
]
