"""Issue 48: the workbench widget on a 1366x768 screen with Lab's file browser open. "fit" shows the whole
diagram, the static diagrams fit the column when asked, the time map's legend keeps its size over no node
after a reload, and a kernel restart leaves one line saying what to run instead of controls wired to nothing."""

import lab_server
import pytest
import widget_page as wp
from lab_server import BUILD

from byoc_workbench.widgets.graph_view import KERNEL_GONE

sync_api = lab_server.playwright_or_skip()

# The box and the notebook panel that scrolls it, on screen.
BOXES = """() => {
    const rect = e => { const r = e.getBoundingClientRect(); return {top: r.top, bottom: r.bottom, width: r.width}; };
    return {box: rect(document.querySelector('.byoc-graph')),
            panel: rect(document.querySelector('.byoc-graph').closest('.jp-WindowedPanel-outer')),
            files: rect(document.querySelector('.jp-FileBrowser'))};
}"""

# ipywidgets' broken-link icons (a ::before of each widget whose kernel is gone) that are drawn.
BROKEN_ICONS = """() => [...document.querySelectorAll('.jupyter-widgets-disconnected')]
    .filter(e => e.getClientRects().length && getComputedStyle(e, '::before').content !== 'none').length"""


@pytest.fixture(scope="module")
def demo(browser, lab, tmp_path_factory):
    pg, _first = wp.open_notebook(browser, lab, "demo", tmp_path_factory)
    yield pg
    lab_server.close(pg)


@pytest.fixture(scope="module")
def timed(browser, lab, tmp_path_factory):
    pg, _first = wp.open_notebook(browser, lab, "timed", tmp_path_factory)
    yield pg
    lab_server.close(pg)


def _toolbar_at_top(page) -> None:
    page.evaluate("() => document.querySelector('.byoc-graph-toolbar').scrollIntoView({block: 'start'})")
    page.wait_for_timeout(300)


def test_fit_shows_the_whole_partition_on_a_1366x768_screen_with_the_file_browser_open(demo):
    """Every node of the demo's partition, the exit branch's subgraph that "Try it" asks about among them, in a box
    that the notebook panel shows whole; the details panel goes under the diagram to leave it the width."""
    _toolbar_at_top(demo)
    at = demo.evaluate(BOXES)
    assert at["files"]["width"] >= 200, f"Lab's file browser is not open: {at['files']}"
    assert at["box"]["bottom"] <= at["panel"]["bottom"] + 1, f"the box runs off the screen: {at}"
    assert at["box"]["width"] >= 900, f"the diagram does not have the output's width: {at['box']}"
    details, box = demo.locator(".byoc-details").bounding_box(), demo.locator(".byoc-graph").bounding_box()
    assert details["y"] >= box["y"] + box["height"], "at 1366 px with the file browser open the details go under"

    wp.fit_shows_every_node(demo)
    exit_branch = demo.locator(".byoc-graph g.node", has_text="byoc_target_2")
    sync_api.expect(exit_branch).to_have_count(1)
    labels = wp.median_of(demo.evaluate(wp.LABELS_IN_BOX))
    print(
        f"'fit' at 1366x768, file browser open: scale {wp.diagram_scale(demo):.3f}, box "
        f"{at['box']['width']:.0f} x {at['box']['bottom'] - at['box']['top']:.0f} px, median label {labels:.1f} px"
    )
    demo.screenshot(path=str(BUILD / "widget-demo-fit-1366.png"))
    assert labels >= 7.5, f"the box is too small: 'fit' draws labels {labels:.1f} px tall"


def test_a_static_diagram_fits_the_column_when_asked(demo):
    """The hint's "click again to fit the width": after full size, the whole diagram in the column."""
    diagram = demo.locator(".byoc-diagram")
    diagram.scroll_into_view_if_needed()
    column = demo.locator(".jp-OutputArea-output", has=diagram).bounding_box()["width"]
    svg = diagram.locator("svg")
    widths = [svg.bounding_box()["width"]]
    for _ in range(2):
        diagram.click()
        widths.append(svg.bounding_box()["width"])
    print(f"static diagram in a {column:.0f} px column: {' -> '.join(f'{w:.0f}' for w in widths)} px")
    assert widths[1] > column, "the first click shows full size"
    assert widths[2] <= column + 1, "the second click fits the column"
    assert not diagram.evaluate("d => d.scrollWidth > d.clientWidth + 1"), "nothing is left to scroll sideways"
    diagram.click()  # full size again, and back
    diagram.click()


def test_the_time_legend_covers_no_node_and_keeps_its_size_after_a_reload(timed, lab, tmp_path_factory):
    timed.locator(".byoc-workbench").scroll_into_view_if_needed()
    timed.locator(".byoc-time").click()
    timed.wait_for_function(
        "() => (document.querySelector('.byoc-graph svg') || {}).innerHTML.includes('time per run')",
        timeout=lab_server.TIMEOUT_MS,
    )
    sync_api.expect(timed.locator(".byoc-legend-corner")).to_be_visible()
    _toolbar_at_top(timed)
    labels = wp.legend_beside_box(timed)
    legend = timed.locator(".byoc-legend-corner").bounding_box()

    lab_server.saved(timed)
    timed.reload()
    timed.locator(".jp-Notebook .jp-Cell").first.wait_for()
    wp.wait_for_diagram(timed, lab, tmp_path_factory)  # the widget comes back from the kernel, still timed
    sync_api.expect(timed.locator(".byoc-legend-corner")).to_be_visible()
    timed.wait_for_timeout(1000)
    _toolbar_at_top(timed)
    again = timed.locator(".byoc-legend-corner").bounding_box()
    print(
        f"legend {legend['width']:.0f} x {legend['height']:.0f} px; after a reload {again['width']:.0f} x "
        f"{again['height']:.0f} px"
    )
    timed.screenshot(path=str(BUILD / "widget-demo-time-reloaded-1366.png"))
    assert again["width"] == pytest.approx(legend["width"], abs=2)
    assert again["height"] == pytest.approx(legend["height"], abs=2)
    assert wp.legend_beside_box(timed) == pytest.approx(labels, abs=0.1)  # layout rounds to 1/65536 px


def test_a_kernel_restart_says_what_to_run_and_running_the_cell_again_works(timed, lab, tmp_path_factory):
    """Last on its page: the kernel restarts (Kernel > Restart Kernel, without its dialog)."""
    timed.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.restart()")
    gone = timed.locator(".byoc-gone-line")
    gone.wait_for()
    timed.wait_for_timeout(1000)
    gone.scroll_into_view_if_needed()
    timed.screenshot(path=str(BUILD / "widget-kernel-gone-1366.png"))
    assert gone.all_inner_texts() == [KERNEL_GONE.line]
    assert timed.evaluate(BROKEN_ICONS) == 0, "ipywidgets' broken-link icons are drawn"
    sync_api.expect(timed.locator(".byoc-rules")).to_be_hidden()  # no control that would tick and do nothing

    timed.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for(state="attached")
    wp.run_cell(timed, 0)
    wp.wait_for_diagram(timed, lab, tmp_path_factory)
    sync_api.expect(gone).to_have_count(0)
    wp.toggle_rule(timed, "byoc-target.reshape")  # the new widget answers
    sync_api.expect(timed.locator(".byoc-status")).to_have_text("")
