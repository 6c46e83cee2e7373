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
