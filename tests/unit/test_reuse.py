"""FuseCache: a rule set's composite stage from reused matches equals FuseOpsByPattern's own."""

import itertools

import graphs
import pytest
from shared import same
from tvm import relax
from tvm.relax.dpl import is_op, wildcard

from byoc_workbench import stages
from byoc_workbench.flow import fusion
from byoc_workbench.flow.reuse import FuseCache
from byoc_workbench.flow.rules import pattern_rule
from byoc_workbench.session import Workbench


def one_op(name, op, arity):
    return pattern_rule("chip", name, is_op(op)(*[wildcard()] * arity))


RULES = (
    one_op("conv2d", "relax.nn.conv2d", 2),
    one_op("relu", "relax.nn.relu", 1),
    one_op("add", "relax.add", 2),
    one_op("multiply", "relax.multiply", 2),
    one_op("reshape", "relax.reshape", 2),
    one_op("softmax", "relax.nn.softmax", 1),  # names an op the graph lacks
)


@pytest.fixture(scope="module")
def chain():
    return stages.check_module(graphs.build(graphs.STEPS, ("relu", "multiply")))


def test_every_rule_subset_fuses_as_the_pass_does(chain):
    cache = FuseCache(chain, RULES)
    assert not cache.can_match(RULES[-1]) and all(cache.can_match(r) for r in RULES[:-1])
    cache(chain, RULES)  # every rule: the module the others are cut from
    for k in range(len(RULES)):
        for subset in itertools.combinations(RULES, k):
            fast = cache(chain, list(subset))
            relax.analysis.well_formed(fast)
            assert same(fast, fusion.fuse_rules(chain, list(subset))), [r.name for r in subset]
    assert cache.fast > 30 and cache.slow == 0


def test_rules_that_share_an_op_are_fused_afresh(chain):
    relu_again = one_op("relu_2", "relax.nn.relu", 1)
    rules = (*RULES, relu_again)
    cache = FuseCache(chain, rules)
    cache(chain, rules)
    without_relu = [r for r in rules if r.name != "relu"]
    assert same(cache(chain, without_relu), fusion.fuse_rules(chain, without_relu))
    assert cache.slow == 1, "relu_2 may claim what relu claimed: the pass must run"


def test_workbench_toggles_reuse_runs_and_keep_every_rules_count(demo_mod, byoc):
    wb = Workbench(demo_mod, byoc)
    first = wb.stages
    off = wb.with_rule("byoc-target.add", False)
    assert "byoc-target.add" not in off.stage("annotate").rule_matches
    assert off.stage("annotate").mod is not first[2].mod, "the add is no longer claimed"
    back = off.with_rule("byoc-target.add", True)
    assert [s.mod for s in back.stages] == [s.mod for s in first], "a rule set seen before is not recomputed"
    assert back.stage("annotate").rule_matches == first[2].rule_matches
    assert off.stages[0] is first[0], "no rule changes the source stage"


def test_a_rule_that_cannot_match_is_counted_but_changes_nothing(chain):
    wb = Workbench(chain, rules_target())
    off = wb.with_rule("chip.softmax", False)
    assert [s.mod for s in off.stages] == [s.mod for s in wb.stages]
    assert wb.stage("annotate").rule_matches["chip.softmax"] == 0
    assert "rule chip.softmax matched nothing" in wb.stage("annotate").notes
    assert "chip.softmax" not in off.stage("annotate").rule_matches


def rules_target():
    from byoc_workbench.flow.rules import Target

    return Target("chip", RULES)
