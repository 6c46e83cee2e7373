"""Whatever the rules, partitioning and codegen must not change what a module computes."""

import itertools
import os

import graphs
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from byoc_workbench import stages
from byoc_workbench.flow.partition import flatten_subgraphs
from byoc_workbench.measure.compiler import execute
from byoc_workbench.models import demo


def subsets(rules):
    return [c for n in range(len(rules) + 1) for c in itertools.combinations(rules, n)]


@pytest.mark.slow  # over 10 s: `make test` and `make test-slow` run it, not test-fast
@pytest.mark.parametrize("prune", [stages.keep_all, stages.no_mac(1)], ids=["keep_all", "no_mac"])
def test_every_rule_subset_on_the_demo(demo_mod, byoc, reference_output, prune):
    for chosen in subsets(byoc.rules):
        final = stages.run_stages(demo_mod, chosen, prune)[-1]
        out = execute.run(final.mod, demo.demo_inputs())
        np.testing.assert_allclose(out, reference_output, rtol=1e-5, atol=1e-5, err_msg=str([r.name for r in chosen]))


steps = st.lists(st.sampled_from(sorted(graphs.CF_STEPS)), max_size=3)
programs = st.builds(
    graphs.control_flow,
    prefix=steps,
    branch=st.none() | st.tuples(steps, steps, st.sampled_from([-1e6, 0.0, 1e6])),
    loop=st.none() | st.tuples(st.integers(1, 2), steps, steps),
    suffix=steps,
)
_expected: dict = {}  # script -> output of the module as written (one TVM build per graph)


@settings(
    # About 1 s each (two TVM builds per graph): make test runs 120, make test-fast 25 to stay under 2 minutes.
    max_examples=int(os.environ.get("BYOC_PROPERTY_EXAMPLES", "120")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(script=programs, mask=st.lists(st.booleans(), min_size=6, max_size=6), prune=st.booleans())
def test_random_graphs_with_branches_and_loops(byoc, script, mask, prune):
    mod = graphs.parse(script)
    chosen = [r for r, on in zip(byoc.rules + graphs.CF_EXTRA_RULES, mask) if on]
    all_stages = {s.name: s for s in stages.run_stages(mod, chosen, stages.no_mac() if prune else stages.keep_all)}
    merge = all_stages["merge"]
    assert not graphs.region_cycle(merge.mod, merge.regions), script
    if script not in _expected:
        _expected[script] = execute.run(mod, graphs.inputs())
    got = execute.run(all_stages["codegen"].mod, graphs.inputs())
    np.testing.assert_allclose(got, _expected[script], rtol=1e-4, atol=1e-5, err_msg=script)


def test_the_strategy_builds_branches_loops_and_offloads_inside_them(byoc):
    script = graphs.control_flow(
        ["conv_relu"], (["split_subtract"], ["add"], 0.0), (2, ["conv_bias_relu"], ["reshape_roundtrip"])
    )
    mod = graphs.parse(script)
    assert sorted(gv.name_hint for gv in mod.get_global_vars()) == ["loop", "main"]
    final = stages.run_stages(mod, byoc.rules + graphs.CF_EXTRA_RULES, stages.keep_all)
    regions = next(s for s in final if s.name == "merge").regions
    # A region per branch and in the loop; the split's projections join the subtract's region.
    assert {r.scope for r in regions} == {(), ("then",), ("else",)}
    assert ("relax.split", "relax.subtract") in [r.ops for r in regions]
    np.testing.assert_allclose(
        execute.run(final[-1].mod, graphs.inputs()), execute.run(mod, graphs.inputs()), rtol=1e-4, atol=1e-5
    )


def test_two_targets_partition_and_run():
    # tgta/tgtb have no codegen: their subgraphs stay Relax functions, which TVM builds once flattened.
    mod = graphs.cyclic_two_targets()
    all_stages = {s.name: s for s in stages.run_stages(mod, graphs.two_target_rules(), stages.keep_all)}
    assert len(all_stages["codegen"].subgraphs) == 4
    assert all("no 'tgt" in n for n in all_stages["codegen"].notes)
    partitioned = flatten_subgraphs(all_stages["partition"].mod)
    x = np.random.RandomState(0).uniform(-1, 1, graphs.SHAPE).astype("float32")
    np.testing.assert_allclose(execute.run(partitioned, [x]), execute.run(mod, [x]), rtol=1e-5, atol=1e-6)
