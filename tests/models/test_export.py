"""The offline export (``make demo``): every notebook executed into HTML that shows all it showed with no
kernel and no network, widgets included."""

import json
from pathlib import Path

import nbformat
import pytest
import seat

from byoc_workbench import cli, export
from byoc_workbench.draw import renderers

NOTEBOOKS = sorted(p.name for p in seat.NOTEBOOKS.glob("*.ipynb"))
CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """``{notebook: (html path, executed notebook)}``: each notebook run from a seat's copy and exported, as
    ``make demo`` does (several minutes: notebook 02 builds SSD-ResNet50); each kernel ends with its export."""
    if renderers.chosen() is None:
        pytest.skip(f"no Graphviz to draw with: {renderers.install_fix()}")
    lab, out = seat.copies(tmp_path_factory.mktemp("seat")), tmp_path_factory.mktemp("build")
    htmls = export.export([lab / name for name in NOTEBOOKS], out, timeout=1800)
    return {name: (html, nbformat.read(out / name, as_version=4)) for name, html in zip(NOTEBOOKS, htmls)}


@pytest.fixture(scope="module")
def exported(pages):
    return pages["01_byoc_workflow.ipynb"]


def test_export_embeds_widget_state_and_static_diagrams(exported):
    html_path, nb = exported
    state = nb.metadata["widgets"][export.WIDGET_STATE]["state"]
    svgs = [m["state"]["svg"] for m in state.values() if m["state"].get("svg")]
    assert svgs and all("<svg" in s for s in svgs)  # the widget's diagram is in its stored state
    html = html_path.read_text(encoding="utf-8")
    views = sum(export.WIDGET_VIEW in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))
    assert views and html.count(f'class="{export.STATIC_CLASS}"') == views  # each widget by its static copy
    assert f'<script type="{export.WIDGET_VIEW}"' not in html  # no widget left to draw: offline it stays blank
    stage_svgs = sum("image/svg+xml" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))
    assert html.count("<svg") >= stage_svgs + len(svgs)  # each one inline, none only as a base64 image


def test_static_copy_replaces_each_widget():
    nb = nbformat.v4.new_notebook()
    view = {"model_id": "aa", "version_major": 2, "version_minor": 0}
    nb.cells = [nbformat.v4.new_code_cell(outputs=[nbformat.v4.new_output("display_data", {export.WIDGET_VIEW: view})])]
    state = {
        "aa": {"state": {"children": ["IPY_MODEL_bb"]}},
        "bb": {"state": {"svg": '<?xml version="1.0"?>\n<svg><g class="node"></g></svg>'}},
    }
    nb.metadata["widgets"] = {export.WIDGET_STATE: {"state": state, "version_major": 2, "version_minor": 0}}
    outputs = export.for_offline(nb).cells[0].outputs
    assert [list(o.data) for o in outputs] == [["text/html", "text/plain"]]
    assert outputs[0].data["text/html"].endswith('<svg><g class="node"></g></svg></div>')
    assert json.dumps(nb.cells[0].outputs) != json.dumps(outputs)  # the original is left as it was


def test_a_static_copy_holds_pictures_tables_labels_and_outputs():
    """The detections (a picture, a table, a caption) and the zoo chooser's last pick (an Output widget's
    outputs) are in the page as the widgets showed them; sliders and boxes show nothing of their own."""
    nb = nbformat.v4.new_notebook()
    view = {"model_id": "b0", "version_major": 2, "version_minor": 0}
    nb.cells = [nbformat.v4.new_code_cell(outputs=[nbformat.v4.new_output("display_data", {export.WIDGET_VIEW: view})])]
    kids = ["IPY_MODEL_a1", "IPY_MODEL_a2", "IPY_MODEL_a3", "IPY_MODEL_a4", "IPY_MODEL_a5"]
    state = {
        "b0": {"state": {"_model_name": "VBoxModel", "children": kids}},
        "a1": {"state": {"_model_name": "FloatSliderModel", "value": 0.5}},
        "a2": {"state": {"_model_name": "LabelModel", "value": "showing 1 detection <with score>"}},
        "a3": {
            "state": {"_model_name": "ImageModel", "format": "png"},
            "buffers": [{"path": ["value"], "encoding": "base64", "data": "iVBORw0K"}],
        },
        "a4": {"state": {"_model_name": "HTMLModel", "value": "<table><tr><td>cat</td></tr></table>"}},
        "a5": {
            "state": {
                "_model_name": "OutputModel",
                "outputs": [
                    {"output_type": "stream", "name": "stdout", "text": "picked resnet18_v1\n"},
                    {"output_type": "display_data", "metadata": {}, "data": {"image/svg+xml": "<svg>pick</svg>"}},
                ],
            }
        },
    }
    nb.metadata["widgets"] = {export.WIDGET_STATE: {"state": state, "version_major": 2, "version_minor": 0}}
    (out,) = export.for_offline(nb).cells[0].outputs
    shown = out.data["text/html"]
    parts = [
        "<p>showing 1 detection &lt;with score&gt;</p>",
        '<img src="data:image/png;base64,iVBORw0K"',
        "<table><tr><td>cat</td></tr></table>",
        "<pre>picked resnet18_v1\n</pre>",
        "<svg>pick</svg>",
    ]
    at = [shown.index(part) for part in parts]
    assert at == sorted(at)  # in the order the widget showed them


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_each_exported_page_shows_every_output_offline(pages, name):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (make setup does it)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is missing")
    html_path, nb = pages[name]
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors, errors[:1]
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
            if name.startswith("01"):
                diagrams = page.locator("svg:has(g.node)")
                assert diagrams.count() >= 7  # the seven stages of notebook 01, at least
                box = diagrams.first.bounding_box()
                assert box and box["width"] > 100 and box["height"] > 100  # laid out and visible, not just present
                static = page.locator(f".{export.STATIC_CLASS} svg g.node")
                assert static.count() > 0 and static.first.is_visible()
            empty = page.evaluate(  # each one with its cell's first words and its own HTML, to say which
                """() => [...document.querySelectorAll('.jp-OutputArea-output')]
                    .filter(o => !o.innerText.trim() && !o.querySelector('svg, img'))
                    .map(o => [(o.closest('.jp-Cell') || o).innerText.slice(0, 200), o.outerHTML.slice(0, 500)])"""
            )
            assert empty == []  # every output area shows something with no network, widgets included
        finally:
            browser.close()
    assert blocked  # the page did try the network, and still showed its diagrams


def test_a_failing_cell_is_one_line_and_the_other_notebooks_still_export(tmp_path, capsys):
    """A cell's ZeroDivisionError was a 42-line CellExecutionError, a WorkbenchError 38 lines of nbclient's
    traceback; with several notebooks, the ones after a failure were never run and nothing said what was written."""
    sources = {
        "ok": "x = 1",
        "div": "1/0",
        "own": "from byoc_workbench import WorkbenchError\nraise WorkbenchError('bad thing', 'do the other')",
    }
    for name, source in sources.items():
        cells = [nbformat.v4.new_markdown_cell("# title"), nbformat.v4.new_code_cell(source)]
        nbformat.write(nbformat.v4.new_notebook(cells=cells), tmp_path / f"{name}.ipynb")
    out = tmp_path / "out"
    assert cli.main(["export", "--out", str(out), *(str(tmp_path / f"{n}.ipynb") for n in ("div", "ok", "own"))]) == 1
    printed, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.startswith("error: ")]  # the kernel may warn on stderr too
    assert lines == [
        f"error: {tmp_path / 'div.ipynb'}, cell 2 of 2 raised ZeroDivisionError: division by zero. "
        f"Fix: open {tmp_path / 'div.ipynb'} in Jupyter and run cell 2 to see its traceback.",
        f"error: {tmp_path / 'own.ipynb'}, cell 2 of 2: bad thing. Fix: do the other.",
        f"error: 2 of 3 notebooks failed (see the lines above); wrote {out / 'ok.html'}. "
        "Fix: fix the cells those lines name, then export again.",
    ]
    assert printed == f"wrote {out / 'ok.ipynb'} and {out / 'ok.html'}\n"
    assert sorted(p.name for p in out.iterdir()) == [".byoc-workbench-wrote", "ok.html", "ok.ipynb"]
    assert cli.main(["export", "--out", str(out), str(tmp_path / "div.ipynb")]) == 1
    assert [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error: ")] == lines[:1]
    # round 9: the export's own files were refused as "not written by the workbench", so make demo ran once only
    assert cli.main(["export", "--out", str(out), str(tmp_path / "ok.ipynb")]) == 0
