"""The unit tier imports no model framework: what it tests runs in seconds on any machine.

A test that needs MXNet or GluonCV (a zoo model) belongs in tests/models. Each unit test is watched
alone (what it found imported against what it left imported), so the check holds in any order and
beside the other tiers in one run; the tests that imported one are named at the end of the run.
"""

import sys

import pytest

FRAMEWORKS = ("mxnet", "gluoncv")  # the zoo's frameworks; a tiny torch module or openvino's check is fine
_imported_by: dict = {}  # framework -> the first unit test that imported it
_before: set = set()


def _loaded() -> set:
    return {name for name in FRAMEWORKS if name in sys.modules}


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    _before.clear()
    _before.update(_loaded())


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item):
    for name in _loaded() - _before:
        _imported_by.setdefault(name, item.nodeid)


@pytest.fixture(autouse=True, scope="session")
def _no_model_framework_imported():
    yield
    assert not _imported_by, "the unit tier imported " + "; ".join(f"{n} (in {t})" for n, t in _imported_by.items())
