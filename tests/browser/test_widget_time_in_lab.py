"""The workbench widget's time map in Lab at 1366x768 (issue 40: its legend in view and readable; issue 48: beside
the box, over no node)."""

import lab_server
import pytest
import widget_page as wp
from lab_server import BUILD

sync_api = lab_server.playwright_or_skip()


@pytest.fixture(scope="module")
def page(browser, lab, tmp_path_factory):
    pg, _first = wp.open_notebook(browser, lab, "timed", tmp_path_factory)
    yield pg
    lab_server.close(pg)


def test_time_map_legend_stays_in_view_and_readable(page):
    """Issue 40: the time map's legend sits beside the box at a readable size, at every zoom and pan."""
    page.locator(".byoc-workbench").scroll_into_view_if_needed()
    page.locator(".byoc-time").click()
    page.wait_for_function("() => (document.querySelector('.byoc-graph svg') || {}).innerHTML.includes('time per run')")
    sync_api.expect(page.locator(".byoc-legend-corner")).to_be_visible()
    page.locator(".byoc-graph-widget").scroll_into_view_if_needed()
    first = wp.legend_beside_box(page)
    page.screenshot(path=str(BUILD / "widget-demo-time-1366.png"))
    for _ in range(6):
        page.locator(".byoc-zoom-out").click()
    page.locator(".byoc-zoom-in").click()
    assert wp.legend_beside_box(page) == pytest.approx(first, abs=0.1), "the legend keeps its size whatever the zoom"
    page.locator(".byoc-legend-corner").click()  # folds it to its first line
    assert page.locator(".byoc-legend-corner").bounding_box()["height"] < 40
    page.locator(".byoc-legend-corner").click()
    page.locator(".byoc-time").click()  # the plain diagram again: no legend of times
    sync_api.expect(page.locator(".byoc-legend-corner")).to_be_hidden()
