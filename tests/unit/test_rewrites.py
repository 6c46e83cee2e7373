"""Every rewrite the workbench runs, tested as upstream tests its passes (test_transform_realize_vdevice.py's
``verify(before, expected)``): the module before, the stage applied on its own, and the module it must give,
written in TVMScript and compared with ``tvm.ir.assert_structural_equal``; then the stage's record where it
has one (the regions merge proposes, the subgraphs prune returns, the calls each rule claimed).

Two graphs go through the stages. A straight one: conv2d, bias and relu (a pattern), a sigmoid the target does
not claim, and an add that reads both, which merge keeps out of the conv's region (joining would make a cycle
through the sigmoid) and prune returns to the host (no MAC op). A branching one: the conv in one branch of an
``R.If``, an add and a reshape in the other; the annotate stage then takes upstream's pass (its own builds
straight graphs only), and merge, partition and prune work inside each branch. Each stage's Expected is the
next stage's Before, and :func:`test_the_workbenchs_run_gives_each_expected_module` checks that the workbench's own
run of the stages gives them all.

Names are compared where they are part of the result: the global functions (``fused_...``, ``byoc_target_k``)
and their attributes (``Composite``, ``Primitive``, ``Codegen``, ``global_symbol``); a variable's name is not
(assert_structural_equal maps variables by where they are bound). The GPU placement's Before/Expected cases
(a detector's tail, branches, aliases, tuples, helpers, loops) are in test_devices_placement.py, with its
record; the demo's partition stage (a recursive loop) is in test_demo_partition.py.
"""

import itertools

import pytest
import tvm
from tvm.script import ir as I
from tvm.script import relax as R

from byoc_workbench import stages
from byoc_workbench.flow.partition import partition

X = (1, 4, 8, 8)
F = R.Tensor(X, "float32")  # the feature map every op here takes and gives
WEIGHT, BIAS, FLAG = R.Tensor((4, 4, 3, 3), "float32"), R.Tensor((4,), "float32"), R.Tensor((), "bool")


# --- a straight graph -------------------------------------------------------------------------------------------


@I.ir_module
class Straight:
    @R.function
    def main(x: F, w: WEIGHT, b: BIAS):
        with R.dataflow():
            conv = R.nn.conv2d(x, w, padding=(1, 1))
            bias = R.expand_dims(b, axis=[1, 2])
            biased = R.add(conv, bias)
            relu = R.nn.relu(biased)
            sig = R.sigmoid(relu)
            mixed = R.add(relu, sig)
            R.output(mixed)
        return mixed


@I.ir_module
class StraightComposite:
    """The pattern rule's match made a call to a function of its own, named by upstream after its ops."""

    @R.function(private=True)
    def fused_relax_nn_conv2d_relax_expand_dims_relax_add_relax_nn_relu(x: F, w: WEIGHT, b: BIAS) -> F:
        R.func_attr({"Composite": "byoc-target.conv2d_bias_relu", "Primitive": True})
        with R.dataflow():
            conv = R.nn.conv2d(x, w, padding=(1, 1))
            bias = R.expand_dims(b, axis=[1, 2])
            biased = R.add(conv, bias)
            gv = R.nn.relu(biased)
            R.output(gv)
        return gv

    @R.function
    def main(x: F, w: WEIGHT, b: BIAS) -> F:
        cls = StraightComposite
        with R.dataflow():
            relu = cls.fused_relax_nn_conv2d_relax_expand_dims_relax_add_relax_nn_relu(x, w, b)
            sig = R.sigmoid(relu)
            mixed = R.add(relu, sig)
            R.output(mixed)
        return mixed


@I.ir_module
class StraightAnnotated:
    """The per-op rule's add a one-op composite; nothing inside the conv's composite is claimed again."""

    @R.function(private=True)
    def fused_relax_nn_conv2d_relax_expand_dims_relax_add_relax_nn_relu(x: F, w: WEIGHT, b: BIAS) -> F:
        R.func_attr({"Composite": "byoc-target.conv2d_bias_relu", "Primitive": True})
        with R.dataflow():
            conv = R.nn.conv2d(x, w, padding=(1, 1))
            bias = R.expand_dims(b, axis=[1, 2])
            biased = R.add(conv, bias)
            gv = R.nn.relu(biased)
            R.output(gv)
        return gv

    @R.function(private=True)
    def fused_relax_add(relu: F, sig: F) -> F:
        R.func_attr({"Composite": "byoc-target.add", "Primitive": True})
        with R.dataflow():
            gv = R.add(relu, sig)
            R.output(gv)
        return gv

    @R.function
    def main(x: F, w: WEIGHT, b: BIAS) -> F:
        cls = StraightAnnotated
        with R.dataflow():
            relu = cls.fused_relax_nn_conv2d_relax_expand_dims_relax_add_relax_nn_relu(x, w, b)
            sig = R.sigmoid(relu)
            mixed = cls.fused_relax_add(relu, sig)
            R.output(mixed)
        return mixed


@I.ir_module
class StraightPartitioned:
    """Each region a global function holding its composites as local functions; the global composites go."""

    @R.function
    def byoc_target_0(x: F, w: WEIGHT, b: BIAS) -> F:
        R.func_attr({"Codegen": "byoc_target", "global_symbol": "byoc_target_0"})
        with R.dataflow():

            @R.function
            def composite(x: F, w: WEIGHT, b: BIAS) -> F:
                R.func_attr({"Composite": "byoc-target.conv2d_bias_relu", "Primitive": True})
                with R.dataflow():
                    conv = R.nn.conv2d(x, w, padding=(1, 1))
                    bias = R.expand_dims(b, axis=[1, 2])
                    biased = R.add(conv, bias)
                    gv = R.nn.relu(biased)
                    R.output(gv)
                return gv

            relu = composite(x, w, b)
            R.output(relu)
        return relu

    @R.function
    def byoc_target_1(relu: F, sig: F) -> F:
        R.func_attr({"Codegen": "byoc_target", "global_symbol": "byoc_target_1"})
        with R.dataflow():

            @R.function
            def composite(relu: F, sig: F) -> F:
                R.func_attr({"Composite": "byoc-target.add", "Primitive": True})
                with R.dataflow():
                    gv = R.add(relu, sig)
                    R.output(gv)
                return gv

            mixed = composite(relu, sig)
            R.output(mixed)
        return mixed

    @R.function
    def main(x: F, w: WEIGHT, b: BIAS) -> F:
        cls = StraightPartitioned
        with R.dataflow():
            relu = cls.byoc_target_0(x, w, b)
            sig = R.sigmoid(relu)
            mixed = cls.byoc_target_1(relu, sig)
            R.output(mixed)
        return mixed


@I.ir_module
class StraightPruned:
    """The add's subgraph (no MAC op) back on the host as the plain op it was; the conv's kept."""

    @R.function
    def byoc_target_0(x: F, w: WEIGHT, b: BIAS) -> F:
        R.func_attr({"Codegen": "byoc_target", "global_symbol": "byoc_target_0"})
        with R.dataflow():

            @R.function
            def composite(x: F, w: WEIGHT, b: BIAS) -> F:
                R.func_attr({"Composite": "byoc-target.conv2d_bias_relu", "Primitive": True})
                with R.dataflow():
                    conv = R.nn.conv2d(x, w, padding=(1, 1))
                    bias = R.expand_dims(b, axis=[1, 2])
                    biased = R.add(conv, bias)
                    gv = R.nn.relu(biased)
                    R.output(gv)
                return gv

            relu = composite(x, w, b)
            R.output(relu)
        return relu

    @R.function
    def main(x: F, w: WEIGHT, b: BIAS) -> F:
        cls = StraightPruned
        with R.dataflow():
            relu = cls.byoc_target_0(x, w, b)
            sig = R.sigmoid(relu)
            mixed = R.add(relu, sig)
            R.output(mixed)
        return mixed


# --- a graph with a branch ------------------------------------------------------------------------------------


@I.ir_module
class Branching:
    @R.function
    def main(x: F, w: WEIGHT, flag: FLAG):
        if flag:
            with R.dataflow():
                conv = R.nn.conv2d(x, w, padding=(1, 1))
                relu = R.nn.relu(conv)
                R.output(relu)
            res = relu
        else:
            with R.dataflow():
                twice = R.add(x, x)
                back = R.reshape(twice, R.shape([1, 4, 8, 8]))
                R.output(back)
            res = back
        return res


@I.ir_module
class BranchingAnnotated:
    """The composite and the annotate stage both by upstream's pass, each branch's dataflow block rewritten."""

    @R.function(private=True)
    def fused_relax_nn_conv2d_relax_nn_relu(x: F, w: WEIGHT) -> R.Tensor(X, "float32"):
        R.func_attr({"Composite": "byoc-target.conv2d_relu", "Primitive": True})
        with R.dataflow():
            conv = R.nn.conv2d(x, w, padding=(1, 1))
            gv = R.nn.relu(conv)
            R.output(gv)
        return gv

    @R.function(private=True)
    def fused_relax_add(x: F) -> F:
        R.func_attr({"Composite": "byoc-target.add", "Primitive": True})
        with R.dataflow():
            gv = R.add(x, x)
            R.output(gv)
        return gv

    @R.function(private=True)
    def fused_relax_reshape(twice: F) -> F:
        R.func_attr({"Composite": "byoc-target.reshape", "Primitive": True})
        with R.dataflow():
            gv = R.reshape(twice, R.shape([1, 4, 8, 8]))
            R.output(gv)
        return gv

    @R.function
    def main(x: F, w: WEIGHT, flag: FLAG) -> F:
        cls = BranchingAnnotated
        if flag:
            with R.dataflow():
                relu = cls.fused_relax_nn_conv2d_relax_nn_relu(x, w)
                R.output(relu)
            res = relu
        else:
            with R.dataflow():
                twice = cls.fused_relax_add(x)
                back = cls.fused_relax_reshape(twice)
                R.output(back)
            res = back
        return res


@I.ir_module
class BranchingPartitioned:
    """A subgraph per branch, called where its region was."""

    @R.function
    def byoc_target_0(x: F, w: WEIGHT) -> F:
        R.func_attr({"Codegen": "byoc_target", "global_symbol": "byoc_target_0"})
        with R.dataflow():

            @R.function
            def composite(x: F, w: WEIGHT) -> F:
                R.func_attr({"Composite": "byoc-target.conv2d_relu", "Primitive": True})
                with R.dataflow():
                    conv = R.nn.conv2d(x, w, padding=(1, 1))
                    gv = R.nn.relu(conv)
                    R.output(gv)
                return gv

            relu = composite(x, w)
            R.output(relu)
        return relu

    @R.function
    def byoc_target_1(x: F) -> F:
        R.func_attr({"Codegen": "byoc_target", "global_symbol": "byoc_target_1"})
        with R.dataflow():

            @R.function
            def add(x: F) -> F:
                R.func_attr({"Composite": "byoc-target.add", "Primitive": True})
                with R.dataflow():
                    gv = R.add(x, x)
                    R.output(gv)
                return gv

            twice = add(x)

            @R.function
            def reshape(twice: F) -> F:
                R.func_attr({"Composite": "byoc-target.reshape", "Primitive": True})
                with R.dataflow():
                    gv = R.reshape(twice, R.shape([1, 4, 8, 8]))
                    R.output(gv)
                return gv

            back = reshape(twice)
            R.output(back)
        return back

    @R.function
    def main(x: F, w: WEIGHT, flag: FLAG) -> F:
        cls = BranchingPartitioned
        if flag:
            with R.dataflow():
                relu = cls.byoc_target_0(x, w)
                R.output(relu)
            res = relu
        else:
            with R.dataflow():
                back = cls.byoc_target_1(x)
                R.output(back)
            res = back
        return res


@I.ir_module
class BranchingPruned:
    """The else branch's subgraph (no MAC op) inlined: that branch is the source's again."""

    @R.function
    def byoc_target_0(x: F, w: WEIGHT) -> F:
        R.func_attr({"Codegen": "byoc_target", "global_symbol": "byoc_target_0"})
        with R.dataflow():

            @R.function
            def composite(x: F, w: WEIGHT) -> F:
                R.func_attr({"Composite": "byoc-target.conv2d_relu", "Primitive": True})
                with R.dataflow():
                    conv = R.nn.conv2d(x, w, padding=(1, 1))
                    gv = R.nn.relu(conv)
                    R.output(gv)
                return gv

            relu = composite(x, w)
            R.output(relu)
        return relu

    @R.function
    def main(x: F, w: WEIGHT, flag: FLAG) -> F:
        cls = BranchingPruned
        if flag:
            with R.dataflow():
                relu = cls.byoc_target_0(x, w)
                R.output(relu)
            res = relu
        else:
            with R.dataflow():
                twice = R.add(x, x)
                back = R.reshape(twice, R.shape([1, 4, 8, 8]))
                R.output(back)
            res = back
        return res


# --- the stages, one at a time ----------------------------------------------------------------------------------


def test_composite_makes_each_pattern_match_a_composite_function(byoc):
    tvm.ir.assert_structural_equal(stages.composite(Straight, byoc.rules), StraightComposite)


def test_annotate_wraps_each_claimed_op_like_a_one_op_composite(byoc):
    """Built by the workbench's own fusion (every rule one op, a straight graph): upstream's module."""
    tvm.ir.assert_structural_equal(stages.annotate(StraightComposite, byoc.rules), StraightAnnotated)


def test_composite_and_annotate_rewrite_inside_each_branch(byoc):
    """A branch sends annotate to upstream's pass; the add of x with itself takes x once."""
    composed = stages.composite(Branching, byoc.rules)
    tvm.ir.assert_structural_equal(stages.annotate(composed, byoc.rules), BranchingAnnotated)


def test_merge_leaves_the_module_and_proposes_regions_that_make_no_cycle():
    merged = stages.merge(StraightAnnotated)
    assert merged.mod is StraightAnnotated  # propose only: nothing rewritten
    found = [(r.vars, r.composites, tuple(v.name for v in r.outputs)) for r in merged.regions]
    # the add reads the conv's region directly and through the sigmoid: joining it would make a cycle
    assert found == [
        (("relu",), ("byoc-target.conv2d_bias_relu",), ("relu",)),
        (("mixed",), ("byoc-target.add",), ("mixed",)),
    ]
    assert merged.regions[0].ops == ("relax.nn.conv2d", "relax.expand_dims", "relax.add", "relax.nn.relu")
    assert {(r.target, r.func, r.scope) for r in merged.regions} == {("byoc-target", "main", ())}


def test_merge_proposes_a_region_per_branch():
    merged = stages.merge(BranchingAnnotated)
    assert merged.mod is BranchingAnnotated
    assert [(r.scope, r.vars, r.composites) for r in merged.regions] == [
        (("then",), ("relu",), ("byoc-target.conv2d_relu",)),
        (("else",), ("twice", "back"), ("byoc-target.add", "byoc-target.reshape")),
    ]


@pytest.mark.parametrize(
    "before, expected", [(StraightAnnotated, StraightPartitioned), (BranchingAnnotated, BranchingPartitioned)]
)
def test_partition_lifts_each_region_into_a_subgraph(before, expected):
    tvm.ir.assert_structural_equal(partition(before, stages.merge(before).regions), expected)


@pytest.mark.parametrize(
    "before, expected, returned",
    [
        (StraightPartitioned, StraightPruned, {"byoc_target_1": "0 MAC ops (needs 1)"}),
        (BranchingPartitioned, BranchingPruned, {"byoc_target_1": "0 MAC ops (needs 1)"}),
    ],
)
def test_prune_returns_each_subgraph_without_a_mac_op_to_the_host(before, expected, returned):
    pruned = stages.prune(before, stages.no_mac())
    tvm.ir.assert_structural_equal(pruned.mod, expected)
    assert pruned.reasons == returned
    kept = stages.prune(before, stages.keep_all)
    assert kept.mod is before and kept.reasons == {}  # a rule that keeps every subgraph rewrites nothing


@pytest.mark.parametrize(
    "source, expected",
    [
        (
            Straight,
            {
                "composite": StraightComposite,
                "annotate": StraightAnnotated,
                "merge": StraightAnnotated,
                "partition": StraightPartitioned,
                "prune": StraightPruned,
            },
        ),
        (
            Branching,
            {"annotate": BranchingAnnotated, "partition": BranchingPartitioned, "prune": BranchingPruned},
        ),
    ],
)
def test_the_workbenchs_run_gives_each_expected_module(source, expected, byoc):
    """The stages as the workbench runs them (iter_stages: checked, summarized, one after another), up to prune
    (codegen compiles: the backends' tests check what it gives)."""
    run = {s.name: s for s in itertools.islice(stages.iter_stages(source, byoc.rules), stages.STAGES.index("codegen"))}
    for name, module in expected.items():
        tvm.ir.assert_structural_equal(run[name].mod, module)
    assert run["annotate"].rule_matches["byoc-target.add"] == 1
    assert [s.name for s in run["partition"].subgraphs] == ["byoc_target_0", "byoc_target_1"]
    assert [s.name for s in run["prune"].subgraphs] == ["byoc_target_0"]
    assert run["prune"].returned == {"byoc_target_1": "0 MAC ops (needs 1)"}
