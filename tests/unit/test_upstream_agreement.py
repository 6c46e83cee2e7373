"""Without control flow, the workbench's merge+partition must agree with upstream
MergeCompositeFunctions: the same subgraphs holding the same ops, tuple projections included."""

import collections

import graphs
import numpy as np
import pytest
from tvm import relax

from byoc_workbench import stages
from byoc_workbench.core import ir
from byoc_workbench.flow.partition import flatten_subgraphs
from byoc_workbench.flow.rules import op_rule
from byoc_workbench.measure.compiler import execute


def ours(mod, rules):
    m = stages.annotate(stages.composite(mod, rules), rules)
    m, regions = stages.merge(m)
    return _subgraphs(stages.partition(m, regions))


def upstream(mod, rules):
    m = stages.annotate(stages.composite(mod, rules), rules)
    return _subgraphs(relax.transform.MergeCompositeFunctions()(m))


def _subgraphs(mod):
    found = collections.Counter()
    for name in ir.subgraph_functions(mod):
        # Upstream's Codegen attribute is the raw prefix ("byoc-target"); ours is an identifier
        # ("byoc_target"), so compare the target the composites name.
        found[(ir.subgraph_target(mod, name), tuple(sorted(ir.ops_in(mod[name], mod))))] += 1
    return found


CASES = {
    "chain": (
        lambda: graphs.build(["conv_bias_relu", "add", "reshape_roundtrip", "multiply", "conv_relu", "add"]),
        "byoc",
    ),
    "diamond": (lambda: graphs.build(["conv_bias_relu", "add"], ["reshape_roundtrip", "conv_relu"]), "byoc"),
    "two_targets_cyclic": (graphs.cyclic_two_targets, "two"),
    "multi_output_region": (graphs.multi_output_region, "two"),
    "split_feeds_one_op": (graphs.split_feeds_one_op, "split"),
    "repacked_tuple": (graphs.repacked_tuple, "split"),
    "projection_closes_a_cycle": (graphs.projection_closes_a_cycle, "split"),
    "tuple_escapes": (graphs.tuple_escapes, "split"),
}
RULES = {"two": graphs.two_target_rules, "split": lambda: graphs.SPLIT_RULES}


@pytest.mark.parametrize("case", sorted(CASES))
def test_partition_matches_upstream(case, byoc):
    make, which = CASES[case]
    rules = byoc.rules if which == "byoc" else RULES[which]()
    mod = make()
    expected = upstream(mod, rules)
    assert expected, "the case must offload something, or it says nothing"
    assert ours(mod, rules) == expected


def test_cyclic_case_really_splits_a_target():
    found = ours(graphs.cyclic_two_targets(), graphs.two_target_rules())
    # x1 and x3 are both tgta, but merging them would cycle through tgtb's x2.
    assert found == collections.Counter(
        {("tgta", ("relax.add",)): 2, ("tgtb", ("relax.multiply",)): 1, ("tgtb", ("relax.nn.relu",)): 1}
    )


def test_multi_output_region_returns_a_tuple():
    rules = graphs.two_target_rules()
    m = stages.annotate(stages.composite(graphs.multi_output_region(), rules), rules)
    m, regions = stages.merge(m)
    m = stages.partition(m, regions)
    (name,) = ir.subgraph_functions(m)
    assert isinstance(m[name].ret_ty, relax.TupleType) and len(m[name].ret_ty.fields) == 2


SPLIT = ("relax.split",)
SUBTRACT = ("relax.subtract",)


@pytest.mark.parametrize(
    "make,expected",
    [
        (graphs.split_feeds_one_op, {("tgta", ("relax.split", "relax.subtract")): 1}),
        (graphs.repacked_tuple, {("tgta", ("relax.split", "relax.subtract")): 1}),
        (
            graphs.projection_closes_a_cycle,
            {("tgta", SPLIT): 1, ("tgta", SUBTRACT): 1, ("tgtb", ("relax.multiply",)): 1},
        ),
        (graphs.tuple_escapes, {("tgta", SPLIT): 1, ("tgta", SUBTRACT): 1}),
    ],
    ids=["split_feeds_one_op", "repacked_tuple", "projection_closes_a_cycle", "tuple_escapes"],
)
def test_projections_merge_unless_a_cycle_or_an_escape(make, expected):
    mod = make()
    assert ours(mod, graphs.SPLIT_RULES) == collections.Counter(expected)
    part = next(s for s in stages.run_stages(mod, graphs.SPLIT_RULES, stages.keep_all) if s.name == "partition")
    x = np.random.RandomState(0).uniform(-1, 1, (1, 8)).astype("float32")
    got, want = execute.run(flatten_subgraphs(part.mod), [x]), execute.run(mod, [x])
    for g, w in zip(got if isinstance(got, list) else [got], want if isinstance(want, list) else [want]):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_the_projections_are_lifted_into_the_subgraph():
    part = next(
        s
        for s in stages.run_stages(graphs.repacked_tuple(), graphs.SPLIT_RULES, stages.keep_all)
        if s.name == "partition"
    )
    (name,) = ir.subgraph_functions(part.mod)
    kinds = [type(s.value).__name__ for s in ir.walk(part.mod[name], part.mod, descend=False)]
    assert kinds == ["Call", "TupleGetItem", "TupleGetItem", "Tuple", "TupleGetItem", "TupleGetItem", "Call"]
    host = [type(s.value).__name__ for s in ir.walk(part.mod["main"], part.mod)]
    assert host == ["Call"]  # main only calls the subgraph


ALIASED = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        with R.dataflow():
            a = R.add(x, x)
            b = a
            c = R.multiply(b, x)
            R.output(c)
        return c
"""


def test_an_alias_between_claimed_calls_does_not_split_a_region():
    """Beyond upstream: an alias binding (which CanonicalizeBindings would remove) is looked through."""
    rules = (op_rule("tgta", "add", "relax.add"), op_rule("tgta", "multiply", "relax.multiply"))
    assert ours(graphs.parse(ALIASED), rules) == collections.Counter({("tgta", ("relax.add", "relax.multiply")): 1})
