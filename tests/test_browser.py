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

NOTEBOOK = {
    "cells": [
        {
            "cell_type": "code",
            "execution_count": None,
            "id": "wb",
            "metadata": {},
            "outputs": [],
            "source": "from byoc_workbench.widgets import workbench_widget\nworkbench_widget()",
        }
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
    (root / "workbench.ipynb").write_text(json.dumps(NOTEBOOK))
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
        yield {"url": f"{base}/lab/tree/workbench.ipynb?token={token}", "log": home / "lab.log"}
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


@pytest.fixture(scope="module")
def page(lab, tmp_path_factory):
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            pg = browser.new_page(viewport={"width": 1600, "height": 1300})
            pg.set_default_timeout(TIMEOUT_MS)
            pg.goto(lab["url"])
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
            yield pg
        finally:
            browser.close()


def _table(page) -> str:
    return page.locator(".byoc-subgraph-table").inner_text()


def test_rule_checkbox_redraws_and_node_click_shows_details(page, tmp_path_factory):
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
    page.mouse.wheel(0, -400)  # wheel up zooms in
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
    page.locator(".byoc-zoom-reset").click()
    assert float(page.locator(".byoc-graph").get_attribute("data-scale")) < scale

    page.locator(".byoc-graph g.node", has_text="byoc_target_1").dblclick()
    expect(page.locator(".byoc-graph g.cluster[id^='cluster_x_']")).to_have_count(1)
    expect(page.locator(".byoc-graph g.node", has_text="conv2d_bias_relu")).to_have_count(1)

    shot = tmp_path_factory.mktemp("shots") / "workbench.png"
    page.screenshot(path=str(shot), full_page=True)
    print(f"screenshot: {shot}")
    assert shot.stat().st_size > 10_000
