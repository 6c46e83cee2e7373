"""Jupyter widgets for the workbench; the logic lives in :mod:`byoc_workbench.session`.

:mod:`.html` holds the pure View-to-HTML helpers; :mod:`.rule_panel` the rule checkboxes
(grouped by op family for a large target); :mod:`.workbench` the widgets.
"""

from byoc_workbench.widgets.graph_view import GraphView, expand_key, toggled
from byoc_workbench.widgets.html import (
    code_html,
    details_html,
    generated_html,
    lines_html,
    match_text,
    rule_label_html,
    stage_summary,
    status_line,
    subgraph_table_html,
    subgraphs_tab_html,
    svg_body,
)
from byoc_workbench.widgets.workbench import WorkbenchWidget, workbench_widget

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
    "subgraphs_tab_html",
    "svg_body",
    "toggled",
    "workbench_widget",
]
