"""The workbench widget in a real JupyterLab, driven by headless Chromium."""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
RESHAPE = "byoc-target.reshape"
TIMEOUT_MS = 120_000  # a kernel that imports TVM on a 2-core machine is slow to start

if not Path(CHROMIUM).exists():
    pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (make setup does it)", allow_module_level=True)
if shutil.which("dot") is None:
    pytest.skip("Graphviz's dot is missing: install graphviz (make setup does it)", allow_module_level=True)
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="the playwright Python package is missing: pip install playwright"
)

BUILD = Path(__file__).resolve().parents[1] / "build"
VIEWPORTS = {"1366": {"width": 1366, "height": 768}, "1920": {"width": 1920, "height": 1080}}
MIN_LABEL_PX = 10  # issue 8: node labels at least 10 px tall at the first view
DEMO_CELL = """\
from IPython.display import display
from byoc_workbench.draw.display import Diagram
from byoc_workbench.flow.rules import get_target
from byoc_workbench.models import demo
from byoc_workbench.session import Workbench
from byoc_workbench.widgets import workbench_widget
display(workbench_widget())
Diagram(Workbench(demo.demo_module(), get_target("byoc-target")).view("partition").svg)"""
# As notebook 02 makes it: the SSD (untrained weights unless trained ones are cached) at the prune stage.
SSD_CELL = """\
from byoc_workbench import workflow
from byoc_workbench.widgets import workbench_widget
wb, _ = workflow.model_workbench()
workbench_widget(wb.mod, "tensorrt", stage="prune", collapse=True, mark=wb.mark)"""
# Notebook 06's chooser on its cheapest model.
ZOO_CELL = """\
from byoc_workbench.widgets.zoo_chooser import zoo_chooser
zoo_chooser(value="simple_pose_resnet18_v1b")"""


def _notebook(source: str) -> dict:
    return {
        "cells": [
            {"cell_type": "code", "execution_count": None, "id": "wb", "metadata": {}, "outputs": [], "source": source}
        ],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on a free port with a token, serving one notebook; always stopped."""
    root = tmp_path_factory.mktemp("lab")
    (root / "demo.ipynb").write_text(json.dumps(_notebook(DEMO_CELL)))
    (root / "ssd.ipynb").write_text(json.dumps(_notebook(SSD_CELL)))
    (root / "zoo.ipynb").write_text(json.dumps(_notebook(ZOO_CELL)))
    home = tmp_path_factory.mktemp("jupyter-home")
    settings = home / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    # No news or update pop-ups over the notebook.
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    port, token = _free_port(), uuid.uuid4().hex
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(home / "config"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(home / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
        PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]),
    )
    log = open(home / "lab.log", "w")
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--LabApp.news_url=",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # CI containers run as root
    server = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 90
        while True:
            if server.poll() is not None:
                pytest.fail(f"JupyterLab exited with {server.returncode}: {(home / 'lab.log').read_text()[-2000:]}")
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if time.time() > deadline:
                    pytest.fail(f"JupyterLab did not answer within 90 s: {(home / 'lab.log').read_text()[-2000:]}")
                time.sleep(0.5)
        # One workspace per notebook, so that a second page does not reopen the first one's notebook.
        yield {"url": f"{base}/lab/workspaces/{{0}}/tree/{{0}}.ipynb?reset&token={token}", "log": home / "lab.log"}
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def _open(browser, lab, name: str, tmp_path_factory):
    """A page at 1366x768 with notebook ``name`` run and its diagram drawn; its first view measured.

    Returns ``(page, first)``: ``first`` maps each viewport ("1366", "1920") to
    the on-screen heights of the node labels at the first view, before any test
    zooms or pans. Screenshots of both go to build/widget-<name>-<viewport>.png.
    """
    pg = browser.new_page(viewport=VIEWPORTS["1366"])
    pg.set_default_timeout(TIMEOUT_MS)
    pg.goto(lab["url"].format(name))
    pg.locator(".jp-Notebook .jp-Cell").first.wait_for()
    # Run the cell once the kernel is idle; press again if the keypress was lost while Lab was still loading.
    pg.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for(state="attached")
    graph = pg.locator(".byoc-graph svg g.node").first
    for _attempt in range(3):
        pg.locator(".jp-Notebook .jp-Cell .jp-InputArea-editor").first.click()
        pg.keyboard.press("Shift+Enter")
        try:
            pg.locator(".jp-Cell .jp-InputPrompt", has_text="[1]").or_(
                pg.locator(".jp-Cell .jp-InputPrompt", has_text="[*]")
            ).first.wait_for(timeout=15_000)
            break
        except sync_api.TimeoutError:
            continue
    try:
        graph.wait_for()
    except sync_api.TimeoutError:
        shot = tmp_path_factory.mktemp("shots") / "timeout.png"
        pg.screenshot(path=str(shot), full_page=True)
        output = pg.locator(".jp-OutputArea").first.inner_text() if pg.locator(".jp-OutputArea").count() else ""
        pytest.fail(
            f"the widget did not draw; cell output: {output[:1000]!r}; screenshot: {shot}; "
            f"lab log: {lab['log'].read_text()[-1500:]}"
        )
    BUILD.mkdir(exist_ok=True)
    first = {}
    for key in ("1366", "1920", "1366"):  # a resize redoes the first view until the user moves it
        pg.set_viewport_size(VIEWPORTS[key])
        pg.locator(".byoc-graph-widget").scroll_into_view_if_needed()
        pg.wait_for_timeout(500)  # the ResizeObserver and the first view run on the next frames
        first.setdefault(key, _label_heights(pg))
        pg.screenshot(path=str(BUILD / f"widget-{name}-{key}.png"))
    return pg, first


@pytest.fixture(scope="module")
def page_and_first(browser, lab, tmp_path_factory):
    pg, first = _open(browser, lab, "demo", tmp_path_factory)
    yield pg, first
    pg.close()


@pytest.fixture(scope="module")
def page(page_and_first):
    return page_and_first[0]


@pytest.fixture(scope="module")
def ssd_page_and_first(browser, lab, tmp_path_factory):
    pytest.importorskip("mxnet", reason="the SSD widget needs mxnet and gluoncv: pip install -e '.[mxnet]'")
    pg, first = _open(browser, lab, "ssd", tmp_path_factory)
    yield pg, first
    pg.close()


WIDGETS = [
    pytest.param(("page_and_first", RESHAPE), id="demo"),
    pytest.param(("ssd_page_and_first", "tensorrt.nn.conv2d"), id="ssd", marks=[pytest.mark.slow, pytest.mark.mxnet]),
]


@pytest.fixture(params=WIDGETS)
def widget(request):
    """``(page, first view, a rule to toggle)`` for notebook 01's widget and for the SSD's."""
    fixture, rule = request.param
    pg, first = request.getfixturevalue(fixture)
    return pg, first, rule


# --- what the diagram shows, measured in the page -------------------------------------

_LABEL_HEIGHTS = """() => [...document.querySelectorAll('.byoc-graph svg g.node text')]
    .map(t => t.getBoundingClientRect().height).sort((a, b) => a - b)"""
_NODES_IN_BOX = """() => {
    const f = document.querySelector('.byoc-graph').getBoundingClientRect();
    return [...document.querySelectorAll('.byoc-graph svg g.node')].filter(g => {
        const r = g.getBoundingClientRect();
        return g.id !== 'legend' && r.right > f.left && r.left < f.right && r.bottom > f.top && r.top < f.bottom;
    }).length;
}"""
_SCROLL_TOP = """() => {
    for (let e = document.querySelector('.byoc-graph'); e; e = e.parentElement) {
        const y = getComputedStyle(e).overflowY;
        if ((y === 'auto' || y === 'scroll') && e.scrollHeight > e.clientHeight) return e.scrollTop;
    }
    return document.scrollingElement.scrollTop;
}"""
# Where a node is inside the box (so page scrolling does not count); without an id, the node nearest the middle.
_NODE_IN_BOX = """id => {
    const f = document.querySelector('.byoc-graph').getBoundingClientRect();
    const at = g => {
        const r = g.getBoundingClientRect();
        return {id: g.id, x: r.left + r.width / 2 - f.left, y: r.top + r.height / 2 - f.top};
    };
    const all = [...document.querySelectorAll('.byoc-graph svg g.node')].filter(g => g.id !== 'legend').map(at);
    if (id) return all.find(n => n.id === id) || null;
    const d = n => Math.hypot(n.x - f.width / 2, n.y - f.height / 2);
    return all.sort((a, b) => d(a) - d(b))[0];
}"""


def _label_heights(page) -> list:
    return page.evaluate(_LABEL_HEIGHTS)


def _median(values: list) -> float:
    return sorted(values)[len(values) // 2] if values else 0.0


def _scale(page) -> float:
    return float(page.locator(".byoc-graph").get_attribute("data-scale"))


def _hover_diagram(page) -> None:
    """Bring the diagram's box into view and put the mouse over its middle."""
    frame = page.locator(".byoc-graph")
    frame.scroll_into_view_if_needed()
    box = frame.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)


def _ctrl_wheel(page, delta_y: float) -> None:
    page.keyboard.down("Control")
    try:
        page.mouse.wheel(0, delta_y)
    finally:
        page.keyboard.up("Control")


def _toggle(page, rule: str) -> None:
    """Flip rule ``rule``'s checkbox and wait for the new drawing."""
    svg = page.locator(".byoc-graph svg").inner_html()
    page.get_by_label(rule, exact=True).click()
    page.wait_for_function(
        "old => document.querySelector('.byoc-graph svg').innerHTML !== old", arg=svg, timeout=TIMEOUT_MS
    )
    page.wait_for_timeout(200)


# --- the diagram's view (issue 8: readable first, survives a change, map-style wheel) ---


def test_first_view_labels_are_readable(widget):
    _page, first, _rule = widget
    for key, heights in first.items():
        assert heights, f"no node labels at {key}"
        median = _median(heights)
        print(f"median node label height at the first view, {key}: {median:.1f} px over {len(heights)} labels")
        assert median >= MIN_LABEL_PX, f"labels are {median:.1f} px tall at the first view at {key}"


def test_plain_wheel_scrolls_the_page_and_ctrl_wheel_zooms(widget):
    page, _first, _rule = widget
    _hover_diagram(page)
    top, scale = page.evaluate(_SCROLL_TOP), _scale(page)
    page.mouse.wheel(0, -200 if top > 0 else 200)
    page.wait_for_function(f"() => ({_SCROLL_TOP})() !== {top}", timeout=5_000)
    assert _scale(page) == scale, "a plain wheel must not zoom the diagram"
    sync_api.expect(page.locator(".byoc-graph-overlay.byoc-show")).to_be_visible()
    sync_api.expect(page.locator(".byoc-graph-hint")).to_contain_text("scroll")

    _hover_diagram(page)
    top = page.evaluate(_SCROLL_TOP)
    _ctrl_wheel(page, -300)  # Ctrl + wheel up zooms in, as a pinch does
    sync_api.expect(page.locator(".byoc-graph")).not_to_have_attribute("data-scale", f"{scale:.3f}")
    assert _scale(page) > scale
    assert page.evaluate(_SCROLL_TOP) == top, "Ctrl + wheel must zoom, not scroll the page"


def _assert_held(page, held: dict) -> None:
    """The box shows nodes, and node ``held`` is where it was, if the new drawing still has it."""
    assert page.evaluate(_NODES_IN_BOX) > 0, "after a zoom and a toggle the box must still show nodes"
    now = page.evaluate(_NODE_IN_BOX, held["id"])
    if now is not None:
        assert abs(now["x"] - held["x"]) < 3 and abs(now["y"] - held["y"]) < 3, (held, now)


def test_view_survives_zoom_then_toggle(widget):
    page, _first, rule = widget
    page.locator(".byoc-zoom-100").click()
    _hover_diagram(page)
    _ctrl_wheel(page, -400)
    zoomed = _scale(page)
    assert zoomed > 1.2

    central = page.evaluate(_NODE_IN_BOX, None)  # the view holds on to the node nearest the middle
    _toggle(page, rule)
    _assert_held(page, central)
    assert _scale(page) == pytest.approx(zoomed, abs=1e-3), "a toggle keeps the zoom"

    selected = page.evaluate(_NODE_IN_BOX, None)  # ... or to the selected node
    page.locator(f'.byoc-graph g.node[id="{selected["id"]}"]').click()
    sync_api.expect(page.locator(".byoc-graph g.node.byoc-selected")).to_have_count(1)
    selected = page.evaluate(_NODE_IN_BOX, selected["id"])
    _toggle(page, rule)
    _assert_held(page, selected)

    central = page.evaluate(_NODE_IN_BOX, None)
    svg = page.locator(".byoc-graph svg").inner_html()
    page.locator(".byoc-stage button", has_text="annotate").click()  # a stage switch redraws too
    page.wait_for_function("old => document.querySelector('.byoc-graph svg').innerHTML !== old", arg=svg)
    _assert_held(page, central)

    page.locator(".byoc-zoom-fit").click()
    assert _scale(page) < zoomed
    page.locator(".byoc-zoom-100").click()
    assert _scale(page) == 1.0
    page.locator(".byoc-stage button", has_text="prune" if "ssd" in page.url else "partition").click()


def test_static_diagram_fits_the_output_and_zooms_on_click(page):
    diagram = page.locator(".byoc-diagram")
    diagram.scroll_into_view_if_needed()
    svg = diagram.locator("svg")
    output = page.locator(".jp-OutputArea-output", has=diagram).bounding_box()
    fitted = svg.bounding_box()
    assert fitted["width"] <= output["width"] + 1, "a static diagram fits the output's width"
    heights = page.evaluate(
        "() => [...document.querySelectorAll('.byoc-diagram g.node text')].map(t => t.getBoundingClientRect().height)"
    )
    print(
        f"static diagram: {fitted['width']:.0f} px wide in a {output['width']:.0f} px output, "
        f"labels {_median(heights):.1f} px"
    )
    page.screenshot(path=str(BUILD / "diagram-demo-1366.png"))

    diagram.click()
    assert svg.bounding_box()["width"] > fitted["width"] * 1.2, "a click shows it at full size"
    assert diagram.evaluate("d => d.scrollWidth > d.clientWidth"), "at full size the box scrolls sideways"
    diagram.click()
    assert svg.bounding_box()["width"] == pytest.approx(fitted["width"], abs=1)


def _table(page) -> str:
    return page.locator(".byoc-subgraph-table").inner_text()


def test_rule_checkbox_redraws_and_node_click_shows_details(page):
    expect = sync_api.expect
    table = page.locator(".byoc-subgraph-table")
    expect(table).to_contain_text("byoc_target_2")
    expect(table).to_contain_text("reshape")
    expect(page.locator(".byoc-rule", has_text="byoc-target.conv2d_relu")).to_be_visible()
    expect(page.locator(".byoc-workbench")).to_contain_text("matched nothing")
    # With every rule on, no host node is labelled reshape: it sits inside byoc_target_2.
    host_reshape = page.locator(".byoc-graph g.node", has=page.locator("text", has_text="reshape")).filter(
        has_not_text="byoc_target"
    )
    expect(host_reshape).to_have_count(0)
    svg_before = page.locator(".byoc-graph svg").inner_html()

    page.get_by_label(RESHAPE).uncheck()
    expect(table).not_to_contain_text("reshape")
    expect(host_reshape).to_have_count(1)
    assert page.locator(".byoc-graph svg").inner_html() != svg_before
    expect(page.locator(".byoc-status")).to_have_text("")

    page.locator(".byoc-zoom-fit").click()  # the whole diagram, so that the node is in the box
    host_reshape.click()
    details = page.locator(".byoc-details")
    expect(details).to_contain_text("relax.reshape")
    expect(details).to_contain_text("switched off")
    expect(page.locator(".byoc-graph g.node.byoc-selected")).to_have_count(1)

    frame = page.locator(".byoc-graph")
    box = frame.bounding_box()
    cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    start = float(frame.get_attribute("data-scale"))
    page.mouse.move(cx, cy)
    _ctrl_wheel(page, -400)  # Ctrl + wheel up zooms in
    expect(frame).not_to_have_attribute("data-scale", f"{start:.3f}")
    assert float(frame.get_attribute("data-scale")) > start
    moved_from = frame.locator(".byoc-viewport").get_attribute("style")
    page.mouse.move(box["x"] + 8, box["y"] + 8)  # drag from an empty corner
    page.mouse.down()
    page.mouse.move(box["x"] + 120, box["y"] + 90, steps=5)
    page.mouse.up()
    assert frame.locator(".byoc-viewport").get_attribute("style") != moved_from, "dragging must pan the diagram"

    page.locator(".byoc-zoom-in").click()
    scale = float(page.locator(".byoc-graph").get_attribute("data-scale"))
    page.locator(".byoc-zoom-fit").click()
    assert float(page.locator(".byoc-graph").get_attribute("data-scale")) < scale

    page.locator(".byoc-graph g.node", has_text="byoc_target_1").dblclick()
    expect(page.locator(".byoc-graph g.cluster[id^='cluster_x_']")).to_have_count(1)
    expect(page.locator(".byoc-graph g.node", has_text="conv2d_bias_relu")).to_have_count(1)


# --- the controls above the diagram (issue 8: built for large targets) -----------------

_CONTROLS = """() => {
    const w = document.querySelector('.byoc-workbench').getBoundingClientRect();
    const g = document.querySelector('.byoc-graph').getBoundingClientRect();
    return {above: g.top - w.top, total: w.height};
}"""


def test_controls_above_the_diagram_fit_one_viewport(widget):
    page, _first, _rule = widget
    page.evaluate("() => document.querySelector('.byoc-workbench').scrollIntoView({block: 'start'})")
    name = "ssd" if "ssd" in page.url else "demo"
    page.screenshot(path=str(BUILD / f"widget-{name}-1366-top.png"))  # what a user sees first: the controls
    size = page.evaluate(_CONTROLS)
    print(
        f"controls above the diagram: {size['above']:.0f} px of a 768 px viewport; widget {size['total']:.0f} px tall"
    )
    assert size["above"] <= VIEWPORTS["1366"]["height"], size


@pytest.mark.slow
@pytest.mark.mxnet
def test_ssd_rule_filter_and_folded_mismatches(ssd_page_and_first):
    page, _first = ssd_page_and_first
    expect = sync_api.expect
    page.locator(".byoc-workbench").scroll_into_view_if_needed()
    summary = page.locator(".byoc-summary").inner_text()
    print(f"summary line: {len(summary)} characters")
    assert len(summary) < 400 and "more" in summary, summary

    conv2d, conv3d = (page.get_by_label(f"tensorrt.nn.{op}", exact=True) for op in ("conv2d", "conv3d"))
    fold = page.locator(".byoc-fold-unmatched")
    expect(fold).to_contain_text("matched nothing")
    expect(conv2d).to_be_visible()  # it matched: in sight
    expect(conv3d).to_be_hidden()  # it matched nothing: folded away
    fold.click()
    expect(conv3d).to_be_visible()
    fold.click()
    expect(conv3d).to_be_hidden()

    box = page.locator(".byoc-rule-filter input")
    box.fill("conv")
    expect(conv3d).to_be_visible()  # a filter finds folded rules too
    shown = page.locator(".byoc-rule-row:visible .byoc-rule")
    names = [t.strip() for t in shown.all_inner_texts()]
    assert names and all("conv" in n or "matmul" in n for n in names), names
    assert page.get_by_label("tensorrt.add", exact=True).is_hidden()
    box.fill("")
    expect(conv3d).to_be_hidden()
    expect(page.get_by_label("tensorrt.add", exact=True)).to_be_visible()


# --- opening a group (issue 8: a folded run or a Gluon block opens to a readable layout) ---

# The on-screen heights of the node labels inside the diagram's box (what a user can read there).
_LABELS_IN_BOX = """() => {
    const f = document.querySelector('.byoc-graph').getBoundingClientRect();
    return [...document.querySelectorAll('.byoc-graph svg g.node:not(#legend) text')]
        .map(t => t.getBoundingClientRect())
        .filter(r => r.right > f.left && r.left < f.right && r.bottom > f.top && r.top < f.bottom)
        .map(r => r.height).sort((a, b) => a - b);
}"""
# An opened group's cluster measured in boxes (how many box widths and heights it takes at the current zoom),
# and how many of the nodes drawn inside it the box shows.
_CLUSTER_SIZE = """id => {
    const f = document.querySelector('.byoc-graph').getBoundingClientRect();
    const c = document.querySelector(`.byoc-graph g.cluster[id="${CSS.escape(id)}"]`);
    if (!c) return null;
    const r = c.getBoundingClientRect();
    const inside = (x, y, b) => x > b.left && x < b.right && y > b.top && y < b.bottom;
    const members = [...document.querySelectorAll('.byoc-graph svg g.node:not(#legend)')]
        .map(g => g.getBoundingClientRect()).map(n => [n.left + n.width / 2, n.top + n.height / 2])
        .filter(([x, y]) => inside(x, y, r));
    return {w: r.width / f.width, h: r.height / f.height, nodes: members.length,
            shown: members.filter(([x, y]) => inside(x, y, f)).length};
}"""


def _bring_into_box(page, node_id: str) -> None:
    """Drag the diagram so that node ``node_id`` sits in the middle of the box, as a user would before opening it."""
    frame = page.locator(".byoc-graph")
    frame.scroll_into_view_if_needed()
    at = page.evaluate(_NODE_IN_BOX, node_id)
    assert at is not None, f"{node_id} is not drawn"
    box = frame.bounding_box()
    cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(cx, cy)
    page.mouse.down()
    page.mouse.move(cx + box["width"] / 2 - at["x"], cy + box["height"] / 2 - at["y"], steps=8)
    page.mouse.up()
    at = page.evaluate(_NODE_IN_BOX, node_id)
    assert 0 < at["x"] < box["width"] and 0 < at["y"] < box["height"], at


def _open_group(page, node_id: str, shot: str) -> dict:
    """Double-click group ``node_id`` at 100% and check what the box shows once the view settles."""
    page.locator(".byoc-zoom-100").click()
    _bring_into_box(page, node_id)
    cluster = f"cluster_x_{node_id}"
    page.locator(f'.byoc-graph g.node[id="{node_id}"]').dblclick()
    page.locator(f'.byoc-graph g.cluster[id="{cluster}"]').wait_for(timeout=TIMEOUT_MS)
    page.wait_for_timeout(300)  # the redraw places the view on the next frames
    page.locator(".byoc-graph").scroll_into_view_if_needed()
    page.screenshot(path=str(BUILD / shot))
    heights = page.evaluate(_LABELS_IN_BOX)
    size = page.evaluate(_CLUSTER_SIZE, cluster)
    print(
        f"{node_id} opened at scale {_scale(page):.2f}: {len(heights)} labels in the box, median "
        f"{_median(heights):.1f} px; the group: {size['nodes']} nodes over {size['w']:.1f} x {size['h']:.1f} boxes, "
        f"{size['shown']} of them in the box"
    )
    assert page.evaluate(_NODES_IN_BOX) > 0, "after opening a group the box must still show nodes"
    assert heights and _median(heights) >= MIN_LABEL_PX, f"labels are {_median(heights):.1f} px tall once opened"
    assert size["shown"] > 0, f"the box shows none of the opened group's nodes: {size}"
    page.locator(".byoc-zoom-fit").click()  # and the whole diagram, one click away
    fit = page.evaluate(_LABELS_IN_BOX)
    print(f"  after 'fit': scale {_scale(page):.2f}, median label {_median(fit):.1f} px")
    return size


@pytest.mark.slow
@pytest.mark.mxnet
def test_ssd_opened_fold_and_block_are_readable(ssd_page_and_first):
    page, _first = ssd_page_and_first
    stage = page.locator(".byoc-stage button", has_text="prune")
    stage.click()
    page.locator('.byoc-graph g.node[id="fold_main/ssd0_slice_axis0"]').wait_for()
    try:
        # The folded run of 241 slices and concats at the prune stage.
        size = _open_group(page, "fold_main/ssd0_slice_axis0", "widget-ssd-fold-1366.png")
        assert size["w"] <= 8, f"an opened run wraps into rows, not one strip: {size}"
        # The view moves to the opened run (its top), not to the node that stayed in the middle.
        assert size["shown"] >= 5, f"the box shows too few of the opened run's ops at readable labels: {size}"
        page.locator(".byoc-collapse").click()
        sync_api.expect(page.locator(".byoc-graph g.cluster[id^='cluster_x_']")).to_have_count(0)

        # The Gluon backbone (resnetv10), drawn as one node before the partition.
        page.locator(".byoc-stage button", has_text="annotate").click()
        page.locator('.byoc-graph g.node[id="main/ssd0_resnetv10_"]').wait_for()
        size = _open_group(page, "main/ssd0_resnetv10_", "widget-ssd-block-1366.png")
        assert size["w"] <= 8, f"an opened block lays out in rows, not one strip: {size}"
    finally:
        if page.locator(".byoc-collapse").is_enabled():
            page.locator(".byoc-collapse").click()
        stage.click()


@pytest.mark.slow
@pytest.mark.mxnet
def test_zoo_chooser_reads_at_1366(browser, lab):
    """Notebook 06's chooser: the dropdown, the stage and subgraph tables and the model's picture
    fit a 1366-px-wide screen, and the picture is seen whole in a 768-px-tall one."""
    pytest.importorskip("mxnet", reason="the chooser needs mxnet and gluoncv")
    pg = browser.new_page(viewport=VIEWPORTS["1366"])
    pg.set_default_timeout(TIMEOUT_MS)
    pg.goto(lab["url"].format("zoo"))
    pg.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for(state="attached")
    pg.locator(".jp-Notebook .jp-Cell .jp-InputArea-editor").first.click()
    pg.keyboard.press("Shift+Enter")
    picture = pg.locator(".jp-OutputArea .widget-image").first
    picture.wait_for(timeout=300_000)  # a kernel start, then the import, the partition and a build
    picture.scroll_into_view_if_needed()
    pg.wait_for_timeout(300)
    BUILD.mkdir(exist_ok=True)
    pg.screenshot(path=str(BUILD / "widget-zoo-1366.png"))
    area = pg.locator(".jp-OutputArea").first.bounding_box()
    for part in (".widget-dropdown", ".byoc-subgraphs", ".widget-image"):
        box = pg.locator(f".jp-OutputArea {part}").first.bounding_box()
        assert box["width"] > 50 and box["x"] + box["width"] <= area["x"] + area["width"] + 1, (part, box, area)
    shown = picture.bounding_box()
    assert shown["height"] <= VIEWPORTS["1366"]["height"], shown
    assert "simple_pose_resnet18_v1b" in pg.locator(".jp-OutputArea").first.inner_text()
    pg.close()
