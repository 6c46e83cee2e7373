"""A real JupyterLab and a headless Chromium for the browser tests: the server on a free port with a token,
serving a folder outside the repository as a seat does, and the steps a user takes in it."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from byoc_workbench.draw import renderers

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build"
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
VIEWPORTS = {"1366": {"width": 1366, "height": 768}, "1920": {"width": 1920, "height": 1080}}
TIMEOUT_MS = 120_000  # a kernel that imports TVM on a 2-core machine is slow to start

# The notebook is loaded (every cell, not the placeholder a panel starts with) and its kernel is up.
READY = """() => {
    const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
    const session = panel && panel.sessionContext && panel.sessionContext.session;
    return Boolean(panel && panel.context && panel.context.isReady && session && session.kernel);
}"""
# Whether the open notebook has run: "done", "error" (a cell failed), or false while cells are queued or running.
RUN_STATE = """() => {
    const panel = window.jupyterapp.shell.currentWidget;
    if (!panel || !panel.content || !panel.sessionContext.session) return false;
    const cells = panel.content.widgets.map(c => c.model).filter(m => m.type === 'code');
    const outputs = cells.flatMap(m => m.outputs.toJSON());
    if (outputs.some(o => o.output_type === 'error')) return 'error';
    const kernel = panel.sessionContext.session.kernel;
    return cells.every(m => m.executionCount !== null) && kernel && kernel.status === 'idle' ? 'done' : false;
}"""

# How many characters a printout line holds, and the printouts (stdout, not stderr) that the page broke across
# more lines than they have: a line too long for the output, wrapped wherever the width ran out.
# Every diagram's node labels in the notebook, as drawn at 1366x768: a static one's (each output scrolls
# sideways rather than shrink them) and the widget's (those in its box at its first view), in px.
DIAGRAM_LABELS = """() => {
  const heights = sel => [...document.querySelectorAll(sel)].map(t => t.getBoundingClientRect().height);
  const frame = document.querySelector('.byoc-graph');
  const box = frame && frame.getBoundingClientRect();
  const inBox = t => { const r = t.getBoundingClientRect();
    return box && r.left >= box.left && r.right <= box.right && r.top >= box.top && r.bottom <= box.bottom; };
  return {static: heights('.byoc-diagram svg g.node text'),
          widget: [...document.querySelectorAll('.byoc-graph svg g.node text')].filter(inBox)
                    .map(t => t.getBoundingClientRect().height)};
}"""

WRAPPED_PRINTOUTS = """() => {
    const out = [];
    const pres = [...document.querySelectorAll('.jp-OutputArea-output pre')]
        .filter(p => !p.closest('[data-mime-type="application/vnd.jupyter.stderr"]'));
    const probe = document.createElement('span');
    probe.textContent = 'x'.repeat(100);
    pres[0].appendChild(probe);
    const chars = Math.floor(100 * pres[0].clientWidth / probe.getBoundingClientRect().width);
    probe.remove();
    for (const pre of pres) {
        const lines = pre.textContent.replace(/\\n$/, '').split('\\n');
        const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
        const tops = new Set();
        for (let n = walker.nextNode(); n; n = walker.nextNode()) {
            const range = document.createRange();
            range.selectNodeContents(n);
            for (const r of range.getClientRects()) if (r.width > 0) tops.add(Math.round(r.top));
        }
        if (tops.size > lines.length)
            out.push({lines: lines.length, shown: tops.size, text: lines.find(l => l.length > 90) || lines[0]});
    }
    return {chars, wrapped: out};
}"""


def playwright_or_skip():
    """Playwright's sync API, or the calling test module skipped with what is missing and how to get it."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (make setup does it)", allow_module_level=True)
    if renderers.chosen() is None:
        pytest.skip(f"no Graphviz to draw with: {renderers.install_fix()}", allow_module_level=True)
    return pytest.importorskip(
        "playwright.sync_api", reason="the playwright Python package is missing: pip install playwright"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _settings(home: Path) -> None:
    # No news or update pop-ups over the notebook: set-up installs Lab's overrides, as for every seat.
    overrides = Path(sys.prefix) / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    assert overrides.is_file(), f"{overrides} is missing: run make setup"
    assert json.loads(overrides.read_text())["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"
    # Every cell attached to the page, so that rectangles can be measured anywhere in a long notebook.
    tracker = home / "settings" / "@jupyterlab" / "notebook-extension"
    tracker.mkdir(parents=True)
    (tracker / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))


@contextlib.contextmanager
def serve(root: Path, home: Path):
    """JupyterLab serving ``root``, with its settings, runtime and the workbench's cache under ``home``;
    always stopped. Yields ``{"url": ..., "log": ..., "root": ...}``; ``url.format(name)`` opens
    ``name.ipynb`` in a workspace of its own, so that a second page does not reopen the first one's notebook."""
    _settings(home)
    port, token = _free_port(), uuid.uuid4().hex
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(home / "config"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(home / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
        # A fresh seat's cache: no search measured, no weights fetched, whatever this machine has done before.
        BYOC_WORKBENCH_CACHE=str(home / "cache"),
        PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    )
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
        "--LabApp.expose_app_in_browser=True",  # window.jupyterapp: run all cells, save, as the menus do
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # CI containers run as root
    log_path = home / "lab.log"
    with open(log_path, "w") as log:
        server = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=root)
        base = f"http://127.0.0.1:{port}"
        try:
            _wait_until_up(server, f"{base}/api/status?token={token}", log_path)
            url = f"{base}/lab/workspaces/{{0}}/tree/{{0}}.ipynb?reset&token={token}"
            yield {"url": url, "log": log_path, "root": root}
        finally:
            server.terminate()
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


def _wait_until_up(server, status_url: str, log_path: Path) -> None:
    deadline = time.time() + 90
    while True:
        if server.poll() is not None:
            pytest.fail(f"JupyterLab exited with {server.returncode}: {log_path.read_text()[-2000:]}")
        try:
            urllib.request.urlopen(status_url, timeout=2)
            return
        except OSError:
            if time.time() > deadline:
                pytest.fail(f"JupyterLab did not answer within 90 s: {log_path.read_text()[-2000:]}")
            time.sleep(0.5)


@contextlib.contextmanager
def chromium(sync_api):
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def accept_kernel(pg) -> None:
    """Take the preferred kernel when JupyterLab asks (it does, now and then, when its kernel specs arrive
    after the notebook), as a user clicks "Select"; return once the notebook has a kernel or asks."""
    pg.wait_for_function(
        "() => document.querySelector('.jp-Dialog') || (window.jupyterapp.shell.currentWidget"
        " && window.jupyterapp.shell.currentWidget.sessionContext.session"
        " && window.jupyterapp.shell.currentWidget.sessionContext.session.kernel)"
    )
    dialog = pg.locator(".jp-Dialog", has_text="Select Kernel")
    if dialog.count():
        dialog.locator(".jp-mod-accept").click()
        dialog.wait_for(state="detached")


def saved(pg) -> None:
    """Save the open notebook, as Ctrl+S does, and wait until it is written."""
    pg.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    pg.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=60_000)


def run_all(browser, lab: dict, name: str, timeout_ms: int):
    """Open ``name.ipynb`` at 1366x768, Run > Run All Cells, wait for the last cell, save: ``(page, the saved
    notebook, seconds)``. A failed cell fails the test with its error and a screenshot."""
    import nbformat

    pg = browser.new_page(viewport=VIEWPORTS["1366"])
    pg.set_default_timeout(TIMEOUT_MS)
    pg.goto(lab["url"].format(name))
    pg.locator(".jp-Notebook .jp-Cell").first.wait_for()
    accept_kernel(pg)
    pg.wait_for_function(READY)
    t0 = time.time()
    # Not awaited: the command's promise ends with the last cell.
    pg.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); return true; }")
    state = pg.wait_for_function(RUN_STATE, timeout=timeout_ms, polling=1000).json_value()
    seconds = time.time() - t0
    saved(pg)
    nb = nbformat.read(lab["root"] / f"{name}.ipynb", as_version=4)
    if state == "error":
        errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
        BUILD.mkdir(exist_ok=True)
        pg.screenshot(path=str(BUILD / f"{name}-error.png"), full_page=True)
        pytest.fail(f"{name} failed: {errors[0].ename}: {errors[0].evalue}")
    return pg, nb, seconds


def close(pg) -> None:
    """Shut down the open notebook's kernel, as File > Close and Shut Down Notebook does, then close the page.
    A kernel outlives its page otherwise: notebook 02's holds gigabytes while the module's other tests run."""
    try:
        pg.evaluate(
            "async () => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
            " if (w && w.sessionContext && w.sessionContext.session) await w.sessionContext.shutdown(); }"
        )
    except Exception as err:  # noqa: BLE001 - a page already gone: the server shuts the kernel down with itself
        print(f"the kernel was not shut down from the page: {err}")
    pg.close()


def log_console_count(pg) -> str:
    """What Lab's status bar says of its log console: digits when a message was logged (an error, a warning
    from a kernel), empty otherwise."""
    item = pg.locator(".jp-LogConsoleStatusItem")
    return item.inner_text() if item.count() else ""
