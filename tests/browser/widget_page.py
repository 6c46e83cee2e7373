"""How the browser tests drive and measure the workbench widget's page in Lab: the notebooks they open,
a cell run as a user runs it, a diagram waited for, and what the page shows, measured by JavaScript in it."""

import json
import time

import lab_server
import pytest
import seat
from lab_server import BUILD, TIMEOUT_MS, VIEWPORTS

sync_api = lab_server.playwright_or_skip()


MIN_LABEL_PX = 10  # node labels at least 10 px tall at the first view


DEMO_CELL = """\
from IPython.display import display
from byoc_workbench.draw.display import Diagram
from byoc_workbench.flow.rules import get_target
from byoc_workbench.models import demo
from byoc_workbench.session import Workbench
from byoc_workbench.widgets import workbench_widget
display(workbench_widget())
Diagram(Workbench(demo.demo_module(), get_target("byoc-target")).view("partition").svg)"""


# Notebook 01's widget as its last section makes it: with inputs, so that "time" measures the build.
TIMED_CELL = """\
from byoc_workbench.models import demo
from byoc_workbench.widgets import workbench_widget
workbench_widget(inputs=demo.demo_inputs())"""

# Notebook 06's chooser on its cheapest model.
ZOO_CELL = """\
from byoc_workbench.widgets.zoo_chooser import zoo_chooser
zoo_chooser(value="simple_pose_resnet18_v1b")"""
# The kernel's peak resident memory, in MB (as make bench reads it for bench.json's notebooks_peak_mb).
PEAK_CELL = """\
import re
print("peak", int(re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read()).group(1)) // 1024, "MB")"""


# Issue 19: a model of 6,000 ops (six stages of 250 residual blocks, 1,000 ops a stage), made in one
# cell and shown by the next, so that the second cell's time is the widget's own.
BIG_CELLS = [
    "from byoc_workbench.models.synthetic import residual_model\n"
    "from byoc_workbench.widgets import workbench_widget\n"
    "mod = residual_model(6000)",
    'workbench_widget(mod, "tensorrt", collapse=True)',
]


# The same 6,000 ops with no names: nothing groups them but their structure.
FLAT_CELLS = [
    "from byoc_workbench.models.synthetic import flat_model\n"
    "from byoc_workbench.widgets import workbench_widget\n"
    "mod = flat_model(6000)",
    BIG_CELLS[1],
]


def notebook(*sources: str) -> dict:
    return {
        "cells": [
            {"cell_type": "code", "execution_count": None, "id": f"c{k}", "metadata": {}, "outputs": [], "source": src}
            for k, src in enumerate(sources)
        ],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def serve_lab(tmp_path_factory):
    """A JupyterLab server on a free port with a token, serving make lab's copies of the notebooks from a
    folder outside the repository, as a seat does, and the test's own notebooks beside them; always stopped."""
    root = seat.copies(tmp_path_factory.mktemp("lab"))
    (root / "demo.ipynb").write_text(json.dumps(notebook(DEMO_CELL)))
    (root / "timed.ipynb").write_text(json.dumps(notebook(TIMED_CELL)))
    (root / "zoo.ipynb").write_text(json.dumps(notebook(ZOO_CELL, PEAK_CELL)))
    (root / "big.ipynb").write_text(json.dumps(notebook(*BIG_CELLS)))
    (root / "flat.ipynb").write_text(json.dumps(notebook(*FLAT_CELLS)))
    with lab_server.serve(root, tmp_path_factory.mktemp("jupyter-home")) as lab:
        yield lab


def open_notebook(browser, lab, name: str, tmp_path_factory):
    """A page at 1366x768 with notebook ``name``'s first cell run and its diagram drawn; its first view measured.

    Returns ``(page, first)``: see :func:`_first_views`.
    """
    pg = browser.new_page(viewport=VIEWPORTS["1366"])
    pg.set_default_timeout(TIMEOUT_MS)
    pg.goto(lab["url"].format(name))
    pg.locator(".jp-Notebook .jp-Cell").first.wait_for()
    lab_server.accept_kernel(pg)
    pg.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for(state="attached")
    run_cell(pg, 0)
    wait_for_diagram(pg, lab, tmp_path_factory)
    return pg, first_views(pg, name)


def run_cell(pg, index: int) -> None:
    """Run code cell ``index`` as a user does (click it, Shift+Enter) and wait until it has started; press
    again if the keypress was lost while Lab was still connecting its kernel (the cell then stays ``[ ]``)."""
    cell = pg.locator(".jp-Notebook .jp-CodeCell").nth(index)
    for _attempt in range(3):
        lab_server.accept_kernel(pg)
        cell.locator(".jp-InputArea-editor").click()
        pg.keyboard.press("Shift+Enter")
        try:
            cell.locator(".jp-InputPrompt", has_text="[*]").or_(
                cell.locator(".jp-InputPrompt", has_text=f"[{index + 1}]")
            ).wait_for(timeout=15_000)
            return
        except sync_api.TimeoutError:
            continue
    raise AssertionError(f"cell {index} did not start")


def wait_for_diagram(pg, lab, tmp_path_factory, timeout: int = TIMEOUT_MS) -> None:
    try:
        pg.locator(".byoc-graph svg g.node").first.wait_for(timeout=timeout)
    except sync_api.TimeoutError:
        shot = tmp_path_factory.mktemp("shots") / "timeout.png"
        pg.screenshot(path=str(shot), full_page=True)
        output = pg.locator(".jp-OutputArea").first.inner_text() if pg.locator(".jp-OutputArea").count() else ""
        pytest.fail(
            f"the widget did not draw; cell output: {output[:1000]!r}; screenshot: {shot}; "
            f"lab log: {lab['log'].read_text()[-1500:]}"
        )


def first_views(pg, name: str) -> dict:
    """The on-screen heights of the node labels at the first view, before any test zooms or pans, for each
    viewport ("1366", "1920"). Screenshots of both go to build/widget-<name>-<viewport>.png."""
    BUILD.mkdir(exist_ok=True)
    first = {}
    for key in ("1366", "1920", "1366"):  # a resize redoes the first view until the user moves it
        pg.set_viewport_size(VIEWPORTS[key])
        pg.locator(".byoc-graph-widget").scroll_into_view_if_needed()
        pg.wait_for_timeout(500)  # the ResizeObserver and the first view run on the next frames
        first.setdefault(key, label_heights(pg))
        pg.screenshot(path=str(BUILD / f"widget-{name}-{key}.png"))
    return first


LABEL_HEIGHTS = """() => [...document.querySelectorAll('.byoc-graph svg g.node text')]
    .map(t => t.getBoundingClientRect().height).sort((a, b) => a - b)"""


NODES_IN_BOX = """() => {
    const f = document.querySelector('.byoc-graph').getBoundingClientRect();
    return [...document.querySelectorAll('.byoc-graph svg g.node')].filter(g => {
        const r = g.getBoundingClientRect();
        return g.id !== 'legend' && r.right > f.left && r.left < f.right && r.bottom > f.top && r.top < f.bottom;
    }).length;
}"""


SCROLL_TOP = """() => {
    for (let e = document.querySelector('.byoc-graph'); e; e = e.parentElement) {
        const y = getComputedStyle(e).overflowY;
        if ((y === 'auto' || y === 'scroll') && e.scrollHeight > e.clientHeight) return e.scrollTop;
    }
    return document.scrollingElement.scrollTop;
}"""


# Where a node is inside the box (so page scrolling does not count); without an id, the node nearest the middle.
NODE_IN_BOX = """id => {
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


def label_heights(page) -> list:
    return page.evaluate(LABEL_HEIGHTS)


def median_of(values: list) -> float:
    return sorted(values)[len(values) // 2] if values else 0.0


def diagram_scale(page) -> float:
    return float(page.locator(".byoc-graph").get_attribute("data-scale"))


def hover_diagram(page) -> None:
    """Bring the diagram's box into view and put the mouse over its middle."""
    frame = page.locator(".byoc-graph")
    frame.scroll_into_view_if_needed()
    box = frame.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)


def ctrl_wheel(page, delta_y: float) -> None:
    page.keyboard.down("Control")
    try:
        page.mouse.wheel(0, delta_y)
    finally:
        page.keyboard.up("Control")


def toggle_rule(page, rule: str) -> None:
    """Flip rule ``rule``'s checkbox and wait for the new drawing."""
    svg = page.locator(".byoc-graph svg").inner_html()
    page.get_by_label(rule, exact=True).click()
    page.wait_for_function(
        "old => document.querySelector('.byoc-graph svg').innerHTML !== old", arg=svg, timeout=TIMEOUT_MS
    )
    page.wait_for_timeout(200)


def assert_held(page, held: dict) -> None:
    """The box shows nodes, and node ``held`` is where it was, if the new drawing still has it."""
    assert page.evaluate(NODES_IN_BOX) > 0, "after a zoom and a toggle the box must still show nodes"
    now = page.evaluate(NODE_IN_BOX, held["id"])
    if now is not None:
        assert abs(now["x"] - held["x"]) < 3 and abs(now["y"] - held["y"]) < 3, (held, now)


CONTROLS = """() => {
    const w = document.querySelector('.byoc-workbench').getBoundingClientRect();
    const g = document.querySelector('.byoc-graph').getBoundingClientRect();
    return {above: g.top - w.top, total: w.height};
}"""


# The on-screen heights of the node labels inside the diagram's box (what a user can read there).
LABELS_IN_BOX = """() => {
    const f = document.querySelector('.byoc-graph').getBoundingClientRect();
    return [...document.querySelectorAll('.byoc-graph svg g.node:not(#legend) text')]
        .map(t => t.getBoundingClientRect())
        .filter(r => r.right > f.left && r.left < f.right && r.bottom > f.top && r.top < f.bottom)
        .map(r => r.height).sort((a, b) => a - b);
}"""


# An opened group's cluster measured in boxes (how many box widths and heights it takes at the current zoom),
# and how many of the nodes drawn inside it the box shows.
CLUSTER_SIZE = """id => {
    const f = document.querySelector('.byoc-graph').getBoundingClientRect();
    const c = document.querySelector(`.byoc-graph g.cluster[id="${CSS.escape(id)}"]`);
    if (!c) return null;
    const r = c.getBoundingClientRect();
    const inside = (x, y, b) => x > b.left && x < b.right && y > b.top && y < b.bottom;
    const members = [...document.querySelectorAll('.byoc-graph svg g.node:not(#legend)')]
        .map(g => g.getBoundingClientRect()).map(n => [n.left + n.width / 2, n.top + n.height / 2])
        .filter(([x, y]) => inside(x, y, r));
    const whole = [...document.querySelectorAll('.byoc-graph svg g.node:not(#legend)')]
        .map(g => g.getBoundingClientRect())
        .filter(n => inside(n.left + n.width / 2, n.top + n.height / 2, r))
        .filter(n => n.left >= f.left && n.right <= f.right && n.top >= f.top && n.bottom <= f.bottom);
    return {w: r.width / f.width, h: r.height / f.height, nodes: members.length,
            shown: members.filter(([x, y]) => inside(x, y, f)).length, whole: whole.length};
}"""


# Every node of the diagram and those not wholly inside the box (by their text), measured on screen.
EVERY_NODE_IN_BOX = """() => {
    const f = document.querySelector('.byoc-graph').getBoundingClientRect();
    const nodes = [...document.querySelectorAll('.byoc-graph svg g.node:not(#legend)')];
    const outside = nodes.filter(g => {
        const r = g.getBoundingClientRect();
        return r.left < f.left - 0.5 || r.right > f.right + 0.5 || r.top < f.top - 0.5 || r.bottom > f.bottom + 0.5;
    });
    return {nodes: nodes.length, outside: outside.map(g => g.textContent.trim().replace(/\\s+/g, ' ').slice(0, 60))};
}"""


def fit_shows_every_node(page) -> None:
    """Click "fit": every node of the diagram lies wholly inside the box, however small its labels."""
    page.locator(".byoc-zoom-fit").click()
    found = page.evaluate(EVERY_NODE_IN_BOX)
    assert found["nodes"] and not found["outside"], f"'fit' leaves nodes out of the box: {found}"


def bring_into_box(page, node_id: str) -> None:
    """Drag the diagram so that node ``node_id`` sits in the middle of the box, as a user would before opening it.

    A drag made while a redraw still places the view (a stage switch on a loaded machine) can be undone by
    it, so, as a user would, drag again: at most three times.
    """
    frame = page.locator(".byoc-graph")
    frame.scroll_into_view_if_needed()
    tries = []
    for _ in range(3):
        at = page.evaluate(NODE_IN_BOX, node_id)
        assert at is not None, f"{node_id} is not drawn"
        box = frame.bounding_box()
        cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        page.mouse.move(cx, cy)
        page.mouse.down()
        page.mouse.move(cx + box["width"] / 2 - at["x"], cy + box["height"] / 2 - at["y"], steps=8)
        page.mouse.up()
        page.wait_for_timeout(300)
        at = page.evaluate(NODE_IN_BOX, node_id)
        tries.append(at)
        if 0 < at["x"] < box["width"] and 0 < at["y"] < box["height"]:
            return
    raise AssertionError(f"{node_id} never came into the box {box}: {tries}")


def open_group(page, node_id: str, shot: str) -> dict:
    """Double-click group ``node_id`` at 100% and check what the box shows once the view settles."""
    page.locator(".byoc-zoom-100").click()
    bring_into_box(page, node_id)
    cluster = f"cluster_x_{node_id}"
    t0 = time.time()
    page.locator(f'.byoc-graph g.node[id="{node_id}"]').dblclick()
    page.locator(f'.byoc-graph g.cluster[id="{cluster}"]').wait_for(timeout=TIMEOUT_MS)
    print(f"{node_id} opened in {time.time() - t0:.2f} s (double-click to drawn, in the browser)")
    page.wait_for_timeout(300)  # the redraw places the view on the next frames
    page.locator(".byoc-graph").scroll_into_view_if_needed()
    page.screenshot(path=str(BUILD / shot))
    heights = page.evaluate(LABELS_IN_BOX)
    size = page.evaluate(CLUSTER_SIZE, cluster)
    print(
        f"{node_id} opened at scale {diagram_scale(page):.2f}: {len(heights)} labels in the box, median "
        f"{median_of(heights):.1f} px; the group: {size['nodes']} nodes over {size['w']:.1f} x {size['h']:.1f} boxes, "
        f"{size['shown']} of them in the box"
    )
    assert page.evaluate(NODES_IN_BOX) > 0, "after opening a group the box must still show nodes"
    assert heights and median_of(heights) >= MIN_LABEL_PX, f"labels are {median_of(heights):.1f} px tall once opened"
    assert size["shown"] > 0, f"the box shows none of the opened group's nodes: {size}"
    assert size["whole"] > 0, f"every opened node in the box is cut at its edge, labels and all: {size}"
    fit_shows_every_node(page)  # the whole diagram, opened group and all, one click away
    fit = median_of(page.evaluate(LABELS_IN_BOX))
    print(f"  after 'fit': scale {diagram_scale(page):.2f}, median label {fit:.1f} px")
    page.locator(".byoc-zoom-100").click()  # labels at full size again, as the tests after this one read them
    return size


def chooser_parts(pg) -> dict:
    """The chooser's status line, its caption or slider title, and the rectangles a reader needs."""
    out = pg.locator(".jp-OutputArea").first
    return pg.evaluate(
        """(out) => {
            const rect = (e) => { const r = e.getBoundingClientRect(); return {x: r.x, w: r.width, h: r.height}; };
            const htmls = [...out.querySelectorAll('.widget-html')];
            const clipped = [...out.querySelectorAll('.widget-html, .widget-label')].filter(
                (e) => e.offsetParent && e.scrollWidth > e.clientWidth + 1).map((e) => e.innerText.slice(0, 80));
            return {status: htmls.length ? htmls[0].innerText : '', area: rect(out),
                    text: htmls.map((e) => e.innerText).join('\\n'),
                    tables: [...out.querySelectorAll('table.byoc-subgraphs')].map(rect),
                    images: out.querySelectorAll('.widget-image').length, clipped};
        }""",
        out.element_handle(),
    )


def outputs_text(nb) -> str:
    """Every text output of a saved notebook, with runs of white space made one: lines wrapped for the
    page still read as one sentence."""
    parts = []
    for c in nb.cells:
        for o in c.outputs if c.cell_type == "code" else ():
            parts.append(o.get("text", "") + o.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


# The output areas of the cells after the markdown cell whose h2 reads ``heading``, up to the next h2.
SECTION = """heading => {
    const cells = [...document.querySelectorAll('.jp-Notebook .jp-Cell')];
    const titled = c => [...c.querySelectorAll('.jp-MarkdownOutput h2')].some(h => h.textContent.includes(heading));
    const at = cells.findIndex(titled);
    const out = [];
    for (const c of cells.slice(at + 1)) {
        if (c.querySelector('.jp-MarkdownOutput h2')) break;
        out.push(...c.querySelectorAll('.jp-OutputArea-output'));
    }
    return out;
}"""


# In a section: text boxes (line boxes of its HTML text, the diagrams' own labels aside) that overlap another,
# table cells whose content is cut or out of sight, and times broken across lines.
LAYOUT = f"""heading => {{
    const areas = ({SECTION})(heading);
    const boxes = [], clipped = [], broken = [];
    for (const area of areas) {{
        const box = area.getBoundingClientRect();
        const walker = document.createTreeWalker(area, NodeFilter.SHOW_TEXT);
        for (let n = walker.nextNode(); n; n = walker.nextNode()) {{
            if (!n.textContent.trim() || n.parentElement.closest('svg')) continue;
            const range = document.createRange();
            range.selectNodeContents(n);
            for (const r of range.getClientRects()) if (r.width > 1 && r.height > 1)
                boxes.push({{r, text: n.textContent.trim().slice(0, 40)}});
        }}
        for (const cell of area.querySelectorAll('td, th')) {{
            const r = cell.getBoundingClientRect();
            if (cell.scrollWidth > cell.clientWidth + 1 || r.right > box.right + 1 || r.left < box.left - 1)
                clipped.push(cell.textContent.trim().slice(0, 40));
            if (/^[\\d.e+-]+\\s*(ms|s|µs)$/.test(cell.textContent.trim())) {{
                const range = document.createRange();
                range.selectNodeContents(cell);
                const lines = new Set([...range.getClientRects()].map(x => Math.round(x.top)));
                if (lines.size > 1) broken.push(cell.textContent);
            }}
        }}
    }}
    const overlaps = [];
    for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {{
        const a = boxes[i].r, b = boxes[j].r;
        const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
        const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
        if (w > 1 && h > 2) overlaps.push([boxes[i].text, boxes[j].text]);
    }}
    const labels = areas.flatMap(a => [...a.querySelectorAll('.byoc-diagram svg g.node text')])
        .map(t => t.getBoundingClientRect().height).filter(x => x > 0).sort((a, b) => a - b);
    return {{areas: areas.length, boxes: boxes.length, overlaps: overlaps.slice(0, 10), clipped, broken,
             label_px: labels.length ? labels[labels.length >> 1] : 0}};
}}"""


def model_then_widget(browser, lab, name: str):
    """A page at 1366x768 on notebook ``name`` (a model made in one cell, its widget in the next) with
    the first cell run, ready for the second."""
    pg = browser.new_page(viewport=VIEWPORTS["1366"])
    pg.set_default_timeout(TIMEOUT_MS)
    pg.goto(lab["url"].format(name))
    pg.locator(".jp-Notebook .jp-Cell").first.wait_for()
    pg.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for(state="attached")
    run_cell(pg, 0)
    pg.locator(".jp-Notebook .jp-CodeCell").nth(0).locator(".jp-InputPrompt", has_text="[1]").wait_for()
    pg.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for(state="attached")
    return pg


LEGEND_LABELS = (
    "() => [...document.querySelectorAll('.byoc-legend-corner text')].map(t => t.getBoundingClientRect().height)"
)


def legend_beside_box(page) -> list:
    """The time map's legend: beside the diagram's box (over no node of it) and no taller, its labels readable;
    their heights."""
    box, corner = page.locator(".byoc-graph").bounding_box(), page.locator(".byoc-legend-corner").bounding_box()
    assert corner and corner["x"] >= box["x"] + box["width"], f"the legend covers the box: {corner} over {box}"
    assert corner["y"] >= box["y"] - 1 and corner["y"] + corner["height"] <= box["y"] + box["height"] + 1
    heights = page.evaluate(LEGEND_LABELS)
    assert heights and min(heights) >= MIN_LABEL_PX - 0.5, f"legend labels of {min(heights or [0]):.1f} px"
    return heights
