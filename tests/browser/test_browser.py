"""The workbench widget in a real JupyterLab, driven by headless Chromium."""

import re
import time

import lab_server
import pytest
import widget_page as wp
from lab_server import BUILD, VIEWPORTS

sync_api = lab_server.playwright_or_skip()

RESHAPE = "byoc-target.reshape"
NB02 = "02_ssd_tensorrt"  # make lab's copy, run top to bottom as a user would
NB02_TIMEOUT_MS = 900_000  # notebook 02 top to bottom: TVM alone runs once (tens of seconds), then the builds


@pytest.fixture(scope="module")
def page_and_first(browser, lab, tmp_path_factory):
    pg, first = wp.open_notebook(browser, lab, "demo", tmp_path_factory)
    yield pg, first
    lab_server.close(pg)


@pytest.fixture(scope="module")
def page(page_and_first):
    return page_and_first[0]


@pytest.fixture(scope="module")
def nb02(browser, lab, tmp_path_factory):
    """Notebook 02 run top to bottom once in JupyterLab at 1366x768 and saved: ``(page, the saved notebook)``.

    Every notebook-02 test reads this one run: its outputs as saved, and the page as a user sees it.
    """
    pg, nb, seconds = lab_server.run_all(browser, lab, NB02, NB02_TIMEOUT_MS)
    print(f"notebook 02 ran top to bottom in JupyterLab in {seconds:.0f} s")
    yield pg, nb
    lab_server.close(pg)


@pytest.fixture(scope="module")
def ssd_page_and_first(nb02, lab, tmp_path_factory):
    pg, _nb = nb02
    wp.wait_for_diagram(pg, lab, tmp_path_factory)
    return pg, wp.first_views(pg, "ssd")


WIDGETS = [
    pytest.param(("page_and_first", RESHAPE), id="demo"),
    pytest.param(("ssd_page_and_first", "tensorrt.nn.conv2d"), id="ssd"),
]


@pytest.fixture(params=WIDGETS)
def widget(request):
    """``(page, first view, a rule to toggle)`` for notebook 01's widget and for the SSD's."""
    fixture, rule = request.param
    pg, first = request.getfixturevalue(fixture)
    return pg, first, rule


# --- what the diagram shows, measured in the page -------------------------------------


# --- the diagram's view (issue 8: readable first, survives a change, map-style wheel) ---


def test_first_view_labels_are_readable(widget):
    _page, first, _rule = widget
    for key, heights in first.items():
        assert heights, f"no node labels at {key}"
        median = wp.median_of(heights)
        print(f"median node label height at the first view, {key}: {median:.1f} px over {len(heights)} labels")
        assert median >= wp.MIN_LABEL_PX, f"labels are {median:.1f} px tall at the first view at {key}"


def test_a_toggle_redoes_a_view_the_user_has_not_moved(widget):
    """Issue 18: after a toggle an unmoved view is the new drawing's first view, nodes in sight, not the old
    place at the old scale with the diagram cut off."""
    page, _first, rule = widget
    frame = page.locator(".byoc-graph")
    frame.scroll_into_view_if_needed()
    assert frame.get_attribute("data-mode") == "first"
    wp.toggle_rule(page, rule)
    assert frame.get_attribute("data-mode") == "first" and page.evaluate(wp.NODES_IN_BOX) > 0
    name = "ssd" if NB02 in page.url else "demo"
    page.screenshot(path=str(BUILD / f"widget-{name}-toggled-1366.png"))
    wp.toggle_rule(page, rule)
    assert page.evaluate(wp.NODES_IN_BOX) > 0


def test_plain_wheel_scrolls_the_page_and_ctrl_wheel_zooms(widget):
    page, _first, _rule = widget
    wp.hover_diagram(page)
    top, scale = page.evaluate(wp.SCROLL_TOP), wp.diagram_scale(page)
    page.mouse.wheel(0, -200 if top > 0 else 200)
    page.wait_for_function(f"() => ({wp.SCROLL_TOP})() !== {top}", timeout=5_000)
    assert wp.diagram_scale(page) == scale, "a plain wheel must not zoom the diagram"
    sync_api.expect(page.locator(".byoc-graph-overlay.byoc-show")).to_be_visible()
    sync_api.expect(page.locator(".byoc-graph-hint")).to_contain_text("scroll")

    wp.hover_diagram(page)
    top = page.evaluate(wp.SCROLL_TOP)
    wp.ctrl_wheel(page, -300)  # Ctrl + wheel up zooms in, as a pinch does
    sync_api.expect(page.locator(".byoc-graph")).not_to_have_attribute("data-scale", f"{scale:.3f}")
    assert wp.diagram_scale(page) > scale
    assert page.evaluate(wp.SCROLL_TOP) == top, "Ctrl + wheel must zoom, not scroll the page"


def test_view_survives_zoom_then_toggle(widget):
    page, _first, rule = widget
    page.locator(".byoc-zoom-100").click()
    wp.hover_diagram(page)
    wp.ctrl_wheel(page, -400)
    zoomed = wp.diagram_scale(page)
    assert zoomed > 1.2

    central = page.evaluate(wp.NODE_IN_BOX, None)  # the view holds on to the node nearest the middle
    wp.toggle_rule(page, rule)
    wp.assert_held(page, central)
    assert wp.diagram_scale(page) == pytest.approx(zoomed, abs=1e-3), "a toggle keeps the zoom"

    selected = page.evaluate(wp.NODE_IN_BOX, None)  # ... or to the selected node
    page.locator(f'.byoc-graph g.node[id="{selected["id"]}"]').click()
    sync_api.expect(page.locator(".byoc-graph g.node.byoc-selected")).to_have_count(1)
    selected = page.evaluate(wp.NODE_IN_BOX, selected["id"])
    wp.toggle_rule(page, rule)
    wp.assert_held(page, selected)

    central = page.evaluate(wp.NODE_IN_BOX, None)
    svg = page.locator(".byoc-graph svg").inner_html()
    page.locator(".byoc-stage button", has_text="annotate").click()  # a stage switch redraws too
    page.wait_for_function("old => document.querySelector('.byoc-graph svg').innerHTML !== old", arg=svg)
    wp.assert_held(page, central)

    wp.fit_shows_every_node(page)
    assert wp.diagram_scale(page) < zoomed
    page.locator(".byoc-zoom-100").click()
    assert wp.diagram_scale(page) == 1.0
    assert page.evaluate(wp.NODES_IN_BOX) > 0, "100% after fit shows nodes, never an empty box"
    page.locator(".byoc-stage button", has_text="prune" if NB02 in page.url else "partition").click()


def test_static_diagram_fits_the_output_and_zooms_on_click(page):
    """A static diagram's box fits the output's width; inside it the diagram is as wide as the output
    allows, but never so narrow that a label is under 10 px (the box then scrolls sideways)."""
    diagram = page.locator(".byoc-diagram")
    diagram.scroll_into_view_if_needed()
    svg = diagram.locator("svg")
    output = page.locator(".jp-OutputArea-output", has=diagram).bounding_box()
    fitted = svg.bounding_box()
    assert diagram.bounding_box()["width"] <= output["width"] + 1, "the diagram's box fits the output's width"
    heights = page.evaluate(
        "() => [...document.querySelectorAll('.byoc-diagram svg text')].map(t => t.getBoundingClientRect().height)"
    )
    print(
        f"static diagram: {fitted['width']:.0f} px wide in a {output['width']:.0f} px output, "
        f"labels {min(heights):.1f} to {max(heights):.1f} px"
    )
    assert heights and min(heights) >= wp.MIN_LABEL_PX - 0.5, "every label of a static diagram is readable"
    if fitted["width"] > output["width"] + 1:
        assert diagram.evaluate("d => d.scrollWidth > d.clientWidth"), "what does not fit scrolls sideways"
    page.screenshot(path=str(BUILD / "diagram-demo-1366.png"))

    diagram.click()
    assert svg.bounding_box()["width"] >= fitted["width"], "a click shows it at full size"
    assert diagram.evaluate("d => d.scrollWidth > d.clientWidth"), "at full size the box scrolls sideways"
    diagram.click()  # "click again to fit the width": the column's, the readable least width given up
    assert svg.bounding_box()["width"] <= output["width"] + 1


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

    page.locator(".byoc-zoom-fit").click()
    wp.bring_into_box(page, host_reshape.get_attribute("id"))
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
    wp.ctrl_wheel(page, -400)  # Ctrl + wheel up zooms in
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


def test_controls_above_the_diagram_fit_one_viewport(widget):
    page, _first, _rule = widget
    page.evaluate("() => document.querySelector('.byoc-workbench').scrollIntoView({block: 'start'})")
    name = "ssd" if NB02 in page.url else "demo"
    page.screenshot(path=str(BUILD / f"widget-{name}-1366-top.png"))  # what a user sees first: the controls
    size = page.evaluate(wp.CONTROLS)
    print(
        f"controls above the diagram: {size['above']:.0f} px of a 768 px viewport; widget {size['total']:.0f} px tall"
    )
    assert size["above"] <= VIEWPORTS["1366"]["height"], size


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
    # The kernel hides the rows one message at a time: wait until the last of them has gone.
    expect(shown.filter(has_not_text=re.compile("conv|matmul"))).to_have_count(0)
    names = [t.strip() for t in shown.all_inner_texts()]
    assert names and all("conv" in n or "matmul" in n for n in names), names
    assert page.get_by_label("tensorrt.add", exact=True).is_hidden()
    box.fill("")
    expect(conv3d).to_be_hidden()
    expect(page.get_by_label("tensorrt.add", exact=True)).to_be_visible()


# --- opening a group (issue 8: a folded run or a Gluon block opens to a readable layout) ---


def test_ssd_opened_fold_and_block_are_readable(ssd_page_and_first):
    page, _first = ssd_page_and_first
    stage = page.locator(".byoc-stage button", has_text="prune")
    stage.click()
    page.locator('.byoc-graph g.node[id="fold_main/ssd0_slice_axis0"]').wait_for()
    try:
        # The folded run of 241 slices and concats at the prune stage.
        size = wp.open_group(page, "fold_main/ssd0_slice_axis0", "widget-ssd-fold-1366.png")
        assert size["w"] <= 8, f"an opened run wraps into rows, not one strip: {size}"
        # The view moves to the opened run (its top), not to the node that stayed in the middle.
        assert size["shown"] >= 5, f"the box shows too few of the opened run's ops at readable labels: {size}"
        page.locator(".byoc-collapse").click()
        sync_api.expect(page.locator(".byoc-graph g.cluster[id^='cluster_x_']")).to_have_count(0)

        # The Gluon backbone (resnetv10), drawn as one node before the partition.
        page.locator(".byoc-stage button", has_text="annotate").click()
        page.locator('.byoc-graph g.node[id="main/ssd0_resnetv10_"]').wait_for()
        size = wp.open_group(page, "main/ssd0_resnetv10_", "widget-ssd-block-1366.png")
        assert size["w"] <= 8, f"an opened block lays out in rows, not one strip: {size}"
    finally:
        if page.locator(".byoc-collapse").is_enabled():
            page.locator(".byoc-collapse").click()
        stage.click()


# --- notebook 02, run top to bottom once (issue 18: Part 2 reads as well as Part 1) ---------


def test_nb02_runs_top_to_bottom_and_says_what_ran(nb02):
    import re

    from byoc_workbench.backends import tensorrt

    page, nb = nb02
    assert not re.search(r"\d", lab_server.log_console_count(page)), "messages in Lab's log console"
    text = wp.outputs_text(nb)
    flat = " ".join(text.split())
    assert "untrained weights" in text  # offline: the seeded weights, and the notebook says so
    # Without TensorRT the same flow runs on ONNX Runtime: said at the top and on every timed build.
    ran = "tensorrt" if tensorrt.missing() is None else "onnxruntime (CPU) + tvm (llvm) for the rest"
    if tensorrt.missing() is not None:
        assert "The offloaded subgraphs run on ONNX Runtime (CPU)" in flat
        assert "No TensorRT here: tensorrt is not importable" in flat
    table = text[re.search(r"^build +median", text, re.MULTILINE).start() : text.index("speedup over")]
    rows = [ln for ln in table.splitlines()[1:] if ln and not ln.startswith((" ", "note:"))]
    assert [r.split()[0] for r in rows] == ["TVM", "offloaded,", "offloaded,"], table
    assert "tvm alone (llvm)" in rows[0] and " ".join(table.split()).count(ran) == 2, table
    assert "it depends on the machine" in flat
    assert re.search(r"tensorrt_2: offloaded to \S+.*? the same ops on TVM", flat)
    assert "held by " + ran.split(" + ")[0] in text  # the runtime's structure
    # The stage table's prune line, e.g. "prune       583 ops    1 subgraph": the backbone alone is left.
    prune = re.search(r"^prune\b[^\n]*?\b(\d+) subgraphs?\b", text, re.MULTILINE)
    assert prune is not None and prune.group(1) == "1", text[-2000:]
    # Progress bars leave one line of text each, not a widget a reload cannot find.
    assert re.search(r"TVM alone: built in [\d.]+ m?s; 1 run, median [\d.]+ m?s, \d+ VM calls", flat), flat[:3000]
    assert "MXNet -> Relax: 528 MXNet ops converted" in flat
    widgets = [
        o
        for c in nb.cells
        for o in getattr(c, "outputs", ())
        if "application/vnd.jupyter.widget-view+json" in o.get("data", {})
    ]
    # The search's cells read the cache: the search widget and each unit's costs, or one line saying why not.
    searched = "Not searched here" not in flat
    assert (
        re.search(r"tensorrt_3 \(241 ops\): onnxruntime .* -> tensorrt_3", flat)
        if searched
        else "SEARCH = True" in flat
    )
    assert len(widgets) == 2 + searched, "the workbench, the detections' slider and the search's, no progress bars"
    labels = page.evaluate(lab_server.DIAGRAM_LABELS)  # every diagram's node labels, read at 1366x768
    assert all(min(h) >= 9.5 for h in labels.values() if h), {k: min(h) for k, h in labels.items() if h}


# Lines of printouts (<pre> outputs; log lines on stderr aside) that the page shows broken in two: their text's
# line boxes outnumber its lines. Also how many characters a line of the first one holds.


def test_nb02_printouts_never_wrap_mid_word(nb02):
    from byoc_workbench.core import text

    page, _nb = nb02
    found = page.evaluate(lab_server.WRAPPED_PRINTOUTS)
    print(
        f"a printout line holds {found['chars']} characters at 1366x768 (file browser open); text.WIDTH is {text.WIDTH}"
    )
    assert found["chars"] >= text.WIDTH, found
    assert not found["wrapped"], f"printouts broken across lines at 1366x768: {found['wrapped']}"
    stages = page.locator(".jp-OutputArea-output pre", has_text="returned to host")
    stages.first.scroll_into_view_if_needed()
    page.screenshot(path=str(BUILD / "nb02-stage-printout-1366.png"))
    assert stages.first.inner_text().count("returned to host") == 4, "all four prune notes"


def test_nb02_timing_section_has_no_overlapping_text_nor_clipped_cells(nb02):
    page, _nb = nb02
    heading = page.locator(".jp-MarkdownOutput h2", has_text="Where the time goes")
    heading.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    found = page.evaluate(wp.LAYOUT, "Where the time goes")
    print(
        f"timing section: {found['areas']} outputs, {found['boxes']} text boxes, map labels {found['label_px']:.1f} px"
    )
    assert found["areas"] >= 2 and found["boxes"] > 100, found
    assert not found["overlaps"], f"text boxes overlap: {found['overlaps']}"
    assert not found["clipped"], f"table cells cut off: {found['clipped']}"
    assert not found["broken"], f"times broken across lines: {found['broken']}"
    assert found["label_px"] >= 7, f"the latency maps' labels are {found['label_px']:.1f} px at 1366x768"
    page.screenshot(path=str(BUILD / "nb02-timing-1366.png"))
    tables = page.locator(".byoc-lesson table")
    for k in range(tables.count()):  # each table of the section, as a projector shows it
        tables.nth(k).scroll_into_view_if_needed()
        page.screenshot(path=str(BUILD / f"nb02-timing-table{k}-1366.png"))
    speed = page.evaluate(wp.LAYOUT, "not pruning is faster")
    assert not speed["overlaps"] and not speed["clipped"], speed


def test_nb02_detections_read_in_a_room(nb02):
    import re

    page, _nb = nb02
    caption = page.locator(".widget-label", has_text="detections with score")
    caption.scroll_into_view_if_needed()
    text = caption.inner_text()
    assert re.match(r"showing (\d+ of \d+|all \d+) detections? with score ≥ 0\.50", text), text
    table = page.locator(".byoc-detections-table table")
    shown = int(re.match(r"showing (?:all )?(\d+)", text).group(1))
    assert table.locator("tr").count() == shown + 1, "every box shown is in the table beside the picture"
    page.screenshot(path=str(BUILD / "nb02-detections-1366.png"))


def test_nb02_subgraphs_tab_counts_ops_and_details_wrap(nb02):
    # Locators keep to the workbench: with the search cached, the search widget draws a diagram too.
    page, _nb = nb02
    page.locator(".byoc-stage button", has_text="prune").click()
    tab = page.locator(".byoc-subgraph-table")
    tab.scroll_into_view_if_needed()
    sync_api.expect(tab.locator("details summary")).to_contain_text("nn.conv2d ×73")
    assert tab.bounding_box()["height"] < 200, "the Subgraphs tab is a summary, not two screens of ops"
    page.screenshot(path=str(BUILD / "nb02-subgraphs-tab-1366.png"))
    page.locator(".byoc-workbench .byoc-zoom-fit").click()
    node = page.locator(".byoc-workbench .byoc-graph g.node", has_text="tensorrt_0").first
    wp.bring_into_box(page, node.get_attribute("id"))
    node.click()
    details = page.locator(".byoc-details")
    sync_api.expect(details).to_contain_text("ops inside")
    cut = details.evaluate(
        "d => [d, ...d.querySelectorAll('td, code')].filter(e => e.scrollWidth > e.clientWidth + 1).length"
    )
    assert cut == 0, "long values wrap inside the details panel"
    page.screenshot(path=str(BUILD / "nb02-details-1366.png"))


def test_nb02_time_button_shows_the_ssds_latency_map(nb02):
    page, _nb = nb02
    page.locator(".byoc-workbench").scroll_into_view_if_needed()
    t0 = time.time()
    page.locator(".byoc-time").click()
    page.wait_for_function(
        "() => (document.querySelector('.byoc-graph svg') || {}).innerHTML.includes('time per run')",
        timeout=NB02_TIMEOUT_MS,
    )
    print(f"the SSD's build measured and drawn in {time.time() - t0:.0f} s")
    sync_api.expect(page.locator(".byoc-status")).to_have_text("")
    active = page.locator(".byoc-stage button.mod-active")
    sync_api.expect(active).to_have_text("codegen")  # the stage bar, the caption and the diagram agree
    sync_api.expect(page.locator(".byoc-summary")).to_contain_text("codegen:")
    sync_api.expect(page.locator(".byoc-stage-help")).to_contain_text("codegen compiles each subgraph")
    assert "— measured" in page.locator(".byoc-workbench .byoc-graph svg").inner_html()
    page.locator(".byoc-graph-widget").scroll_into_view_if_needed()
    page.locator(".byoc-workbench .byoc-zoom-100").click()  # labels and times at full size
    page.wait_for_timeout(500)
    assert page.evaluate(wp.NODES_IN_BOX) > 0
    wp.legend_beside_box(page)
    page.screenshot(path=str(BUILD / "nb02-widget-time-1366.png"))
    page.locator(".byoc-stage button", has_text="prune").click()  # leaving codegen switches the time view off
    sync_api.expect(page.locator(".byoc-time")).not_to_have_class("mod-active")


def test_nb02_search_widget_draws_the_chosen_placement(nb02):
    page, nb = nb02
    if "Not searched here" in " ".join(wp.outputs_text(nb).split()):
        pytest.skip("the search is not cached here: notebook 02 said so in one line and measured nothing")
    graph = page.locator(".byoc-graph").nth(1)  # the first is the workbench's
    graph.scroll_into_view_if_needed()
    graph.locator("svg g.node").first.wait_for()
    assert "chosen" in graph.locator("svg").inner_html(), "the diagram shows the chosen placement"
    page.screenshot(path=str(BUILD / "nb02-search-1366.png"))


def test_nb02_reload_shows_no_broken_widget(nb02, lab, tmp_path_factory):
    """Last of the notebook-02 tests: a reload, as an instructor does before the next group."""
    page, _nb = nb02
    lab_server.saved(page)
    page.reload()
    page.locator(".jp-Notebook .jp-Cell").first.wait_for()
    wp.wait_for_diagram(page, lab, tmp_path_factory)  # the live widgets come back from the kernel
    page.wait_for_timeout(3000)
    broken = page.get_by_text("Error displaying widget")
    print(f"after a reload: {broken.count()} 'Error displaying widget'")
    assert broken.count() == 0
    page.screenshot(path=str(BUILD / "nb02-reloaded-1366.png"), full_page=False)


# --- a model of 6,000 ops (issue 19: the cost of a view is what is on screen) -------------
