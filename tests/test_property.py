"""Whatever the rules, partitioning and codegen must not change what a module computes."""

import itertools

import graphs
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from byoc_workbench import execute
from byoc_workbench.flow import stages
from byoc_workbench.models import demo


def subsets(rules):
    return [c for n in range(len(rules) + 1) for c in itertools.combinations(rules, n)]


@pytest.mark.parametrize("prune", [stages.keep_all, stages.no_mac(1)], ids=["keep_all", "no_mac"])
def test_every_rule_subset_on_the_demo(demo_mod, byoc, reference_output, prune):
    for chosen in subsets(byoc.rules):
        final = stages.run_stages(demo_mod, chosen, prune)[-1]
        out = execute.run(final.mod, demo.demo_inputs())
        np.testing.assert_allclose(out, reference_output, rtol=1e-5, atol=1e-5, err_msg=str([r.name for r in chosen]))


step = st.sampled_from(graphs.STEPS)
chain = st.lists(step, min_size=1, max_size=5)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kinds=chain,
    other=st.one_of(st.none(), chain),
    mask=st.lists(st.booleans(), min_size=4, max_size=4),
    prune=st.booleans(),
)
def test_random_chains_and_diamonds(byoc, kinds, other, mask, prune):
    mod = graphs.build(kinds, other)
    chosen = [r for r, on in zip(byoc.rules, mask) if on]
    expected = execute.run(mod, graphs.inputs())
    final = stages.run_stages(mod, chosen, stages.no_mac() if prune else stages.keep_all)[-1]
    np.testing.assert_allclose(execute.run(final.mod, graphs.inputs()), expected, rtol=1e-5, atol=1e-5)


def test_two_targets_partition_and_run():
    # tgta/tgtb have no codegen: their subgraphs stay as Relax functions, which TVM builds itself.
    mod = graphs.cyclic_two_targets()
    rules = graphs.two_target_rules()
    st_ = stages.run_stages(mod, rules, stages.keep_all)
    assert len(st_[-1].subgraphs) == 4
    assert all("no 'tgt" in n for n in st_[-1].notes)
