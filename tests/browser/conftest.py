"""What both browser files share: one headless Chromium per test module."""

import lab_server
import pytest


@pytest.fixture(scope="module")
def browser():
    with lab_server.chromium(lab_server.playwright_or_skip()) as b:
        yield b
