"""The offline export: notebook 01 executed into HTML that shows its diagrams with no kernel and no network."""

import json
from pathlib import Path

import nbformat
import pytest

from byoc_workbench import export
from byoc_workbench.draw import renderers

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "01_byoc_workflow.ipynb"
CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Notebook 01 executed and exported; its kernel is shut down when ``export`` returns."""
    if renderers.chosen() is None:
        pytest.skip(f"no Graphviz to draw with: {renderers.install_fix()}")
    out = tmp_path_factory.mktemp("build")
    (html,) = export.export([NOTEBOOK], out, timeout=600)
    return html, nbformat.read(out / NOTEBOOK.name, as_version=4)


def test_export_embeds_widget_state_and_static_diagrams(exported):
    html_path, nb = exported
    state = nb.metadata["widgets"][export.WIDGET_STATE]["state"]
    svgs = [m["state"]["svg"] for m in state.values() if m["state"].get("svg")]
    assert svgs and all("<svg" in s for s in svgs)  # the widget's diagram is in its stored state
    html = html_path.read_text(encoding="utf-8")
    assert f'type="{export.WIDGET_STATE}"' in html
    assert html.count(f'class="{export.STATIC_CLASS}"') == len(svgs)
    stage_svgs = sum("image/svg+xml" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))
    assert html.count("<svg") >= stage_svgs + len(svgs)  # each one inline, none only as a base64 image


def test_static_copy_follows_each_widget():
    nb = nbformat.v4.new_notebook()
    view = {"model_id": "aa", "version_major": 2, "version_minor": 0}
    nb.cells = [nbformat.v4.new_code_cell(outputs=[nbformat.v4.new_output("display_data", {export.WIDGET_VIEW: view})])]
    state = {
        "aa": {"state": {"children": ["IPY_MODEL_bb"]}},
        "bb": {"state": {"svg": '<?xml version="1.0"?>\n<svg><g class="node"></g></svg>'}},
    }
    nb.metadata["widgets"] = {export.WIDGET_STATE: {"state": state, "version_major": 2, "version_minor": 0}}
    outputs = export.for_offline(nb).cells[0].outputs
    assert [list(o.data) for o in outputs] == [[export.WIDGET_VIEW], ["text/html", "text/plain"]]
    assert outputs[1].data["text/html"].endswith('<svg><g class="node"></g></svg></div>')
    assert json.dumps(nb.cells[0].outputs) != json.dumps(outputs)  # the original is left as it was


def test_exported_html_shows_a_stage_diagram_offline(exported):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (make setup does it)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is missing")
    html_path, _ = exported
    blocked = []

    def offline(route):
        if route.request.url.startswith("file:"):
            route.continue_()
        else:  # as on a machine with no network: CDNs (widget manager, MathJax) are unreachable
            blocked.append(route.request.url)
            route.abort()

    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])  # headless
        try:
            page = browser.new_page()
            page.route("**/*", offline)
            page.goto(html_path.as_uri(), wait_until="load")
            diagrams = page.locator("svg:has(g.node)")
            assert diagrams.count() >= 7  # the seven stages of notebook 01, at least
            box = diagrams.first.bounding_box()
            assert box and box["width"] > 100 and box["height"] > 100  # laid out and visible, not just present
            static = page.locator(f".{export.STATIC_CLASS} svg g.node")
            assert static.count() > 0 and static.first.is_visible()
        finally:
            browser.close()
    assert blocked  # the page did try the network, and still showed its diagrams
