import importlib.util
import os
import signal
from pathlib import Path

# `make test` runs the suite in two processes (pytest-xdist) on a machine of two cores or so: each
# process, and every kernel or command it starts, runs TVM's and ONNX Runtime's kernels on one thread,
# so that the two never fight over the cores (their thread pools spin while they wait). The tests
# time nothing; the benchmarks run alone.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _var in ("TVM_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

# The suite's cache of builds and measurements is the checkout's own: it never reads what
# a user's runs left in ~/.cache/byoc-workbench (trained weights, say), nor writes there, and a clean clone
# starts with none. A test that needs an empty cache still sets one of its own.
os.environ["BYOC_WORKBENCH_CACHE"] = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".test-cache"
)

import memory
import pytest

from byoc_workbench.backends import registry
from byoc_workbench.flow import rules
from byoc_workbench.models import demo

# A suite started in the background of a script (`make test &`, `setsid ... &`) inherits Ctrl-C ignored, and so
# does every process a test starts (a shell cannot trap a signal ignored when it started); `nohup` ignores SIGHUP.
# The tests of Ctrl-C and SIGHUP need each with its usual meaning, however the suite was started.
for _sig, _usual in ((signal.SIGINT, signal.default_int_handler), (signal.SIGHUP, signal.SIG_DFL)):
    if signal.getsignal(_sig) == signal.SIG_IGN:
        signal.signal(_sig, _usual)

# The helper modules that hold a test's asserts, rewritten as the tests' own are (each assert says what it saw).
pytest.register_assert_rewrite("bad_rows", "shared", "widget_page")

# The tiers are folders, and each folder's tests carry its markers, so that `-m` selects across them:
# `make test-fast` runs tests/unit with `-m "not slow"`, `make test-slow` the rest with `-m slow`.
TIERS = {"models": ("slow",), "browser": ("slow", "browser")}
# A test marked mxnet checks the workbench against MXNet or GluonCV; the seat's venv has neither.
NO_MXNET = "a cross-check against MXNet: make test-mxnet runs it (Python 3.11, requirements-mxnet.txt)"
_TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    no_mxnet = importlib.util.find_spec("mxnet") is None
    for item in items:
        folder = item.path.relative_to(_TESTS).parts[0] if item.path.is_relative_to(_TESTS) else None
        for name in TIERS.get(folder, ()):
            item.add_marker(name)
        if no_mxnet and item.get_closest_marker("mxnet"):
            item.add_marker(pytest.mark.skip(reason=NO_MXNET))


@pytest.fixture(scope="session")
def demo_mod():
    return demo.demo_module()


@pytest.fixture(scope="session")
def byoc():
    return rules.get_target("byoc-target")


@pytest.fixture(scope="session")
def reference_output(demo_mod):
    from byoc_workbench.measure.compiler import execute

    return execute.run(demo_mod, demo.demo_inputs())


@pytest.fixture(autouse=True, scope="module")
def default_registry():
    """The default registry, back to the built-ins for each test module, and after it.

    ``register_codegen`` adds to the default registry on purpose (a notebook
    registers its codegen for the whole kernel, and the stages, the widget and
    the CLI read it), so without this a codegen named mychip in one module
    changes what another module's mychip rules mean. Module scope, because
    codegens are registered by module-scoped fixtures.
    """
    registry.DEFAULT.reset()
    yield registry.DEFAULT
    registry.DEFAULT.reset()


@pytest.fixture(autouse=True, scope="module")
def memory_given_back():
    """What a test module held, given back to the system after it (see memory.py)."""
    yield
    memory.give_back()


@pytest.fixture
def fresh_registry():
    """A registry of the built-ins that nothing else reads: register into it to touch no other test."""
    return registry.Registry.builtin()
