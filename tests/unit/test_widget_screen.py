"""Issue 48 without a browser: what the page is given for a small screen and for a kernel that is gone
(tests/browser/test_widget_screen_in_lab.py checks what it shows)."""

import html

from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.draw.display import diagram_html
from byoc_workbench.widgets import GraphView, workbench_widget
from byoc_workbench.widgets.graph_view import KERNEL_GONE

SVG = (
    '<svg width="1569pt" height="668pt" viewBox="0.00 0.00 1569.00 668.14" xmlns="http://www.w3.org/2000/svg">'
    '<g id="graph0" class="graph"><text font-size="10.00">add</text></g></svg>'
)


def test_a_widget_whose_kernel_is_gone_is_given_one_error_line_to_show():
    assert isinstance(KERNEL_GONE, WorkbenchError)
    line = (
        "error: this widget's kernel is gone (restarted or shut down). "
        "Fix: run the notebook's cells again (Run > Run All Cells)."
    )
    assert GraphView().gone == KERNEL_GONE.line == line
    assert "gone" in GraphView().keys  # synced to the page, which shows it once no kernel can


def test_the_details_panel_wraps_under_the_diagram_rather_than_squeeze_it():
    w = workbench_widget()
    row = next(c for c in w.children if "byoc-diagram-row" in c._dom_classes)
    assert row.layout.flex_flow == "row wrap"
    assert row.children[1] is w.details and w.details.layout.width is None  # no fixed share of the width


def test_click_again_fits_the_width_giving_up_the_readable_least_width():
    toggle = html.unescape(diagram_html(SVG).split('onclick="')[1].split('"')[0])
    assert "min-width:1569px" in diagram_html(SVG)  # at first no label under 10 px: it scrolls
    assert "if(z)s.minWidth='0'" in toggle  # from full size, back to the column's width, whatever it takes
