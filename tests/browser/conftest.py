"""What the browser files share: one headless Chromium per test module, and (unless a file makes its own)
one JupyterLab server on the seat's notebooks and the tests' own."""

import lab_server
import pytest
import widget_page as wp


@pytest.fixture(scope="module")
def browser():
    with lab_server.chromium(lab_server.playwright_or_skip()) as b:
        yield b


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server serving the seat's notebooks and the tests' own: see wp.serve_lab."""
    yield from wp.serve_lab(tmp_path_factory)
