import pytest

from byoc_workbench.flow import rules
from byoc_workbench.models import demo


@pytest.fixture(scope="session")
def demo_mod():
    return demo.demo_module()


@pytest.fixture(scope="session")
def byoc():
    return rules.get_target("byoc-target")


@pytest.fixture(scope="session")
def reference_output(demo_mod):
    from byoc_workbench import execute

    return execute.run(demo_mod, demo.demo_inputs())


@pytest.fixture(autouse=True, scope="module")
def _registries_restored():
    """A test module that registers a codegen or a target (register_codegen) leaves the tables as it found them.

    Registering is process-wide on purpose (a notebook registers its codegen for the
    whole kernel), so without this a codegen named mychip in one module changes what
    another module's mychip rules mean. Module scope, because codegens are
    registered by module-scoped fixtures.
    """
    from byoc_workbench.backends import base, registry  # noqa: F401  registry fills the built-in backends

    backends, targets = dict(base.BACKENDS), dict(rules.TARGETS)
    yield
    base.BACKENDS.clear()
    base.BACKENDS.update(backends)
    rules.TARGETS.clear()
    rules.TARGETS.update(targets)
