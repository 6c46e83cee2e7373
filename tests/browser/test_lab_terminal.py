"""The agenda's first step, in Lab's own terminal: `make lab` started from a shell whose PATH lacks the venv,
a terminal opened in Lab (as File > New > Terminal opens one), `byoc-workbench doctor` typed into it in
Chromium at 1366x768. It runs there because make lab puts the venv first on Lab's PATH."""

import os
import signal
import subprocess
import sys
import time

import lab_server
from lab_server import BUILD, ROOT

sync_api = lab_server.playwright_or_skip()


def _without_the_venv(path: str) -> str:
    venv_bin = os.path.realpath(os.path.dirname(sys.executable))
    return os.pathsep.join(p for p in path.split(os.pathsep) if p and os.path.realpath(p) != venv_bin)


def test_doctor_runs_in_labs_terminal(browser, tmp_path):
    port, token = lab_server._free_port(), os.urandom(12).hex()
    env = dict(
        os.environ,
        PATH=_without_the_venv(os.environ["PATH"]),
        JUPYTER_TOKEN=token,
        JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"),
    )
    log_path = tmp_path / "make-lab.log"
    written = tmp_path / "doctor.txt"
    with open(log_path, "w") as log:
        server = subprocess.Popen(
            ["make", "--no-print-directory", "lab", f"PORT={port}"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # make, then the Lab it execs: stopped as one group
        )
    base = f"http://127.0.0.1:{port}"
    try:
        lab_server._wait_until_up(server, f"{base}/api/status?token={token}", log_path)
        page = browser.new_page(viewport=lab_server.VIEWPORTS["1366"])
        page.goto(f"{base}/lab?token={token}", timeout=lab_server.TIMEOUT_MS)
        page.wait_for_selector(".jp-LabShell .lm-MenuBar-itemLabel", timeout=lab_server.TIMEOUT_MS)
        for menu, item in (
            (".lm-MenuBar-itemLabel", "File"),
            (".lm-Menu-itemLabel", "New"),
            (".lm-Menu-itemLabel", "Terminal"),
        ):
            page.click(f"{menu}:text-is('{item}')")
        page.wait_for_selector(".jp-Terminal .xterm-screen", timeout=lab_server.TIMEOUT_MS)
        page.click(".jp-Terminal .xterm-screen")
        page.keyboard.type(f"byoc-workbench doctor > {written} 2>&1; echo exit $? >> {written}\n")
        deadline = time.time() + 120
        while not (written.exists() and "exit " in written.read_text()) and time.time() < deadline:
            time.sleep(0.5)
        page.keyboard.type("clear; byoc-workbench doctor | tail -9\n")  # what the screenshot shows
        page.wait_for_timeout(4000)
        (BUILD / "browser").mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(BUILD / "browser" / "lab-terminal-doctor-1366.png"))
        page.close()
        said = written.read_text() if written.exists() else "(nothing written)"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
    assert "command not found" not in said, said
    assert "Notebook 01, Part 1 (the demo graph): ready" in said, said
    assert "ok      path" in said, said  # doctor itself sees the venv first on PATH
    assert said.rstrip().endswith("exit 0"), said
