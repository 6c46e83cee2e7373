"""The unit tier imports no model framework: what it tests runs in seconds on any machine.

A test that needs MXNet or GluonCV (a zoo model) belongs in tests/models; the
first test after which one was imported is named at the end of the run.
"""

import sys

import pytest

FRAMEWORKS = ("mxnet", "gluoncv")  # the zoo's frameworks; a tiny torch module or openvino's check is fine
_first_seen: dict = {}


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item):
    for name in FRAMEWORKS:
        if name in sys.modules and name not in _first_seen:
            _first_seen[name] = item.nodeid


@pytest.fixture(autouse=True, scope="session")
def _no_model_framework_imported():
    before = {name for name in FRAMEWORKS if name in sys.modules}  # a whole-suite run: the models tier came first
    yield
    found = {name: _first_seen.get(name, "?") for name in FRAMEWORKS if name in sys.modules and name not in before}
    assert not found, "the unit tier imported " + "; ".join(f"{n} (first in {t})" for n, t in found.items())
