"""Speed must not change a partition: the linear region search against the transitive one it replaced,
and a workbench's cached toggles against every stage computed from scratch."""

import collections
import functools
import gc

import graphs
import pytest
import tvm_ffi
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tvm import relax

from byoc_workbench import stages
from byoc_workbench.core import ir
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.flow import regions, rules, summary
from byoc_workbench.models.synthetic import residual_model
from byoc_workbench.session import Workbench


def reference_groups(steps, users) -> list:
    """The region search by brute force: whether one group depends on another is found by a walk of
    every binding made so far, from scratch, at every question (cubic, and plainly right). The linear
    search keeps direct dependencies and prunes its walk; this is the meaning it must keep."""
    groups = BruteForceGroups(users)
    for step in steps:
        groups.add(step)
    members: dict = {}
    for step in steps:
        members.setdefault(groups.find(step.var), []).append(step)
    return [(groups.target[root], group) for root, group in members.items() if groups.target[root] is not None]


class BruteForceGroups:
    """The groups of :func:`reference_groups`, one binding added at a time; ``find`` and ``target``
    are what ``regions._plumbing_home`` reads."""

    def __init__(self, users):
        self.users = users
        self.parent, self.target, self.producer, self.done = {}, {}, {}, []

    def find(self, v):
        while self.parent[v] != v:
            v = self.parent[v]
        return v

    def add(self, step) -> None:
        v, tgt = step.var, regions.target_of(step)
        arg_groups = self._arg_groups(step)
        plumbing = regions._plumbing_home(self, step.value, v, self.users, self.producer) if tgt is None else None
        self.parent[v], self.target[v] = v, tgt if plumbing is None else self.target[plumbing]
        if plumbing is not None:
            self.parent[v] = self.find(plumbing)
        elif tgt is not None:
            self._join(v, tgt, arg_groups)
        self.producer[v.__chandle__()] = v
        self.done.append(step)

    def _join(self, v, tgt, arg_groups: list) -> None:
        """``v`` joins each group it reads of its target that no other group it reads depends on."""
        joinable = [
            g for g in arg_groups if self.target[g] == tgt and not any(self.depends(h, g) for h in arg_groups if h != g)
        ]
        for g in joinable:
            self.parent[self.find(g)] = self.find(v)

    def _arg_groups(self, step) -> list:
        """The groups of the values ``step`` reads, each once, in order of reading."""
        arg_groups = []
        for var in ir.reads(step.value):
            k = var.__chandle__()
            if k in self.producer and self.find(self.producer[k]) not in arg_groups:
                arg_groups.append(self.find(self.producer[k]))
        return arg_groups

    def depends(self, group, on) -> bool:
        reads = self._reads()
        seen, todo = {group}, [group]
        while todo:
            for p in reads.get(todo.pop(), ()):
                if p == on:
                    return True
                if p not in seen:
                    seen.add(p)
                    todo.append(p)
        return False

    def _reads(self) -> dict:
        """Each group's root -> the roots its bindings read, from every binding made so far."""
        reads: dict = {}
        for s in self.done:
            reads.setdefault(self.find(s.var), set()).update(
                self.find(self.producer[v.__chandle__()]) for v in ir.reads(s.value) if v.__chandle__() in self.producer
            )
        return reads


def each_block(mod):
    for fname in ir.host_functions(mod):
        users = ir.users(mod[fname])
        blocks: dict = {}
        for step in ir.walk(mod[fname], mod, descend=False, name=fname):
            blocks.setdefault(step.block, []).append(step)
        for steps in blocks.values():
            yield steps, users


def names(groups):
    return [(tgt, [s.var.name for s in group]) for tgt, group in groups]


def random_dag(ops):
    """A block of ``ops`` (op, i, j) bindings, each reading two earlier values (by index, modulo);
    the values nothing reads are returned, as a tuple (no dead code)."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(graphs.SHAPE, graphs.F32))
    make = {"add": relax.op.add, "multiply": relax.op.multiply, "relu": lambda a, _b: relax.op.nn.relu(a)}
    with bb.function("main", [x]):
        with bb.dataflow():
            values, read = [x], {0}
            for op, i, j in ops:
                i, j = i % len(values), j % len(values)
                read |= {i, j} if op != "relu" else {i}
                values.append(bb.emit(make[op](values[i], values[j])))
            out = bb.emit_output(relax.Tuple([v for k, v in enumerate(values) if k not in read]))
        bb.emit_func_output(out)
    return bb.get()


dags = st.lists(
    st.tuples(st.sampled_from(["add", "multiply", "relu"]), st.integers(0, 30), st.integers(0, 30)),
    min_size=1,
    max_size=30,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=dags, mask=st.lists(st.booleans(), min_size=3, max_size=3))
def test_regions_are_those_of_the_transitive_search_on_random_dags(ops, mask):
    chosen = [r for r, on in zip(graphs.two_target_rules(), mask) if on]
    mod = stages.check_module(random_dag(ops))
    annotated = stages.annotate(stages.composite(mod, chosen), chosen)
    for steps, users in each_block(annotated):
        assert names(regions._block_groups(steps, users)) == names(reference_groups(steps, users))
    merged = stages.run_stages(mod, chosen, stages.keep_all)[3]
    assert not graphs.region_cycle(merged.mod, merged.regions)


def both_searches(source):
    """The one block's groups by the linear search and by the reference, on ``source`` annotated with
    the two-target rules, and the checked module."""
    chosen = graphs.two_target_rules()
    mod = stages.check_module(source)
    annotated = stages.annotate(stages.composite(mod, chosen), chosen)
    ((steps, users),) = each_block(annotated)
    return names(regions._block_groups(steps, users)), names(reference_groups(steps, users)), mod


def test_the_reference_is_exercised_by_cycles():
    """The two-target graph where joining would make a cycle: both searches refuse it."""
    new, reference, _mod = both_searches(graphs.cyclic_two_targets())
    assert new == reference
    assert len([g for g in new if g[0] == "tgta"]) == 2  # x3 did not join x1's region


def test_a_dependency_made_after_a_group_is_seen():
    """x3 comes to depend on x1 only when x4 joins x2's region, after x3 was made: x5 joins x3 and not
    x1, and the partition has no cycle (the transitive search this one replaced joined all three)."""
    found, reference, mod = both_searches(graphs.stale_dependency_two_targets())
    assert found == reference
    assert sorted(found) == [("tgta", ["lv"]), ("tgta", ["lv2", "lv4"]), ("tgtb", ["lv1", "lv3"])]
    merged = stages.run_stages(mod, graphs.two_target_rules(), stages.keep_all)
    assert not graphs.region_cycle(merged[3].mod, merged[3].regions)
    assert len(merged[4].subgraphs) == 3


def test_a_region_that_grows_after_a_host_op_read_it():
    """lv1 (host) reads lv, then lv13 joins lv's region and reads lv6, which reads lv4: so lv10, which
    reads lv1, depends on lv4, and lv17 (reading both) may join only lv10. The linear search once pruned
    its walk at lv1, whose own bindings all come before lv4, and joined all three."""
    ops = [("multiply", 1, 17), ("add", 25, 15), ("add", 21, 15), ("relu", 15, 25), ("multiply", 28, 20)]
    ops += [("add", 13, 14), ("add", 11, 5), ("add", 19, 1), ("multiply", 13, 12), ("relu", 29, 1)]
    ops += [("relu", 13, 18), ("add", 7, 11), ("add", 3, 2), ("multiply", 21, 29), ("multiply", 25, 24)]
    ops += [("add", 28, 3), ("add", 28, 23), ("multiply", 11, 23)]
    chosen = graphs.two_target_rules()[1:]  # tgtb's multiply and relu
    mod = stages.check_module(random_dag(ops))
    annotated = stages.annotate(stages.composite(mod, chosen), chosen)
    ((steps, users),) = each_block(annotated)
    found = names(regions._block_groups(steps, users))
    assert found == names(reference_groups(steps, users))
    assert ("tgtb", ["lv4"]) in found and ("tgtb", ["lv10", "lv17"]) in found
    merged = stages.run_stages(mod, chosen, stages.keep_all)[3]
    assert not graphs.region_cycle(merged.mod, merged.regions)


def structure(stage):
    return (
        [(s.name, s.target, list(s.ops)) for s in stage.subgraphs],
        [(r.target, r.vars, tuple(v.name for v in r.outputs)) for r in stage.regions],
        stage.op_count,
        stage.ops_per_target,
    )


def toggle_search(named: bool) -> tuple:
    """Hypothesis toggles rules of a workbench on the residual chain, with block names or without (a flat
    model: bindings ``lv``, ``lv1``, ...), and checks every stage against the stages from scratch. Gives
    the names flipped, and the error that a failing example raised (None when every one held)."""
    mod = stages.check_module(residual_model(48, blocks_per_stage=4, named=named))
    start = Workbench(mod, "tensorrt")
    matched = [r.qualified for r in start.target.rules if start._runs.fuse.can_match(r)]
    target = rules.get_target("tensorrt")
    flipped: list = []

    @settings(max_examples=20, deadline=None)
    @given(flips=st.lists(st.integers(0, 10**6), min_size=10, max_size=10))
    def search(flips):
        wb = start
        for k in flips:
            name = matched[k % len(matched)]
            wb = wb.with_rule(name, name not in wb.enabled)
            chosen = [r for r in target.rules if r.qualified in wb.enabled]
            fresh = stages.run_stages(residual_model(48, blocks_per_stage=4, named=named), chosen)
            for got, want in zip(wb.stages, fresh, strict=True):
                assert got.name == want.name
                assert tvm_ffi.structural_equal(got.mod, want.mod), (got.name, sorted(wb.enabled))
                assert structure(got) == structure(want), got.name
            flipped.append(name)

    try:
        search()
    except Exception as error:  # raised again by the test that checks the stages, counted by the other
        return flipped, error
    return flipped, None


@pytest.fixture(scope="module")
def toggle_searches():
    """Each model's search, run once for the two tests that read it, by whichever of them asks first."""
    return functools.cache(toggle_search)


@pytest.mark.parametrize("named", [True, False], ids=["named", "flat"])
def test_toggled_workbench_equals_the_stages_from_scratch(toggle_searches, named):
    _, error = toggle_searches(named)
    if error is not None:
        raise error


def test_at_least_200_flips_were_checked_on_each_model(toggle_searches):
    for named in (True, False):
        flips, _ = toggle_searches(named)
        assert len(flips) >= 200 and len(set(flips)) > 1, ("named" if named else "flat", len(flips))


def test_a_toggle_redrawn_computes_the_stages_up_to_the_one_shown():
    """The widget redraws the stage on screen: later stages wait until they are shown, and are then
    what every stage computed at once gives."""
    wb = Workbench(residual_model(48, blocks_per_stage=4), "tensorrt").with_rule("tensorrt.nn.relu", False)
    run = wb._planned[1]
    wb.view("partition", collapse=True)
    assert [s.name for s in run.done] == list(stages.STAGES[: stages.STAGES.index("partition") + 1])
    assert wb.stage("codegen").name == "codegen" and len(run.done) == len(stages.STAGES)
    chosen = [r for r in rules.get_target("tensorrt").rules if r.qualified in wb.enabled]
    for got, want in zip(wb.stages, stages.run_stages(wb.mod, chosen), strict=True):
        assert tvm_ffi.structural_equal(got.mod, want.mod), got.name


def test_a_stage_that_raises_raises_again_when_asked_again(monkeypatch):
    wb = Workbench(residual_model(16), "tensorrt")

    def broken(*_a, **_k):
        raise RuntimeError("partition broke")

    monkeypatch.setattr(stages, "partition", broken)
    for _ in range(2):
        with pytest.raises(RuntimeError, match="partition broke"):
            wb.stage("prune")
    assert wb.stage("merge").name == "merge"  # the stages before it are kept


def test_an_interrupted_stage_is_computed_again_when_asked_again(monkeypatch):
    """Ctrl-C (a kernel interrupt) in a long stage is not its answer: asking again computes it."""
    wb = Workbench(residual_model(16), "tensorrt")
    real, calls = stages.partition, []

    def interrupted_once(*a, **k):
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(stages, "partition", interrupted_once)
    with pytest.raises(KeyboardInterrupt):
        wb.stage("partition")
    assert wb.stage("partition").name == "partition" and len(calls) == 2


def test_many_subgraphs_fold_into_the_blocks_and_a_few_stay_nodes():
    """Switching relu off splits the one subgraph into one per block; the collapsed view still opens
    on the model's blocks, and each block says its ops by target (tuple items are no ops)."""
    wb = Workbench(residual_model(400, blocks_per_stage=25), "tensorrt")
    first = wb.view("partition", collapse=True)
    assert [d["kind"] for d in first.nodes.values()].count("subgraph") == 1  # the one subgraph stays a node
    toggled = wb.with_rule("tensorrt.nn.relu", False)
    assert len(toggled.stage("partition").subgraphs) == 101
    view = toggled.view("partition", collapse=True)
    kinds = [d["kind"] for d in view.nodes.values()]
    assert kinds.count("fold") == 4 and kinds.count("subgraph") <= 1, kinds
    block = toggled.view("partition", expand=("main/stage1.",), collapse=True)
    label = block.nodes["main/stage1.block3."]["label"]
    assert label.startswith("block3\n4 ops\ntensorrt 3, host 1\n"), label


@pytest.mark.parametrize("which", ["demo", "residual"])
def test_every_stage_is_well_formed_with_the_types_tvm_infers(which, demo_mod):
    """The stages' rewrites type what they build themselves (Normalize then has nothing to infer, a
    second saved per stage on 6,000 ops): TVM's full check, types included, passes at every stage."""
    mod = demo_mod if which == "demo" else residual_model(48, blocks_per_stage=4)
    target = "byoc-target" if which == "demo" else "tensorrt"
    for s in stages.run_stages(mod, rules.get_target(target).rules, stages.no_mac()):
        relax.analysis.well_formed(s.mod)  # raises on the first type that disagrees
        assert tvm_ffi.structural_equal(relax.transform.Normalize()(s.mod), s.mod), s.name


def test_opening_a_block_folds_the_kept_graph_and_opening_a_call_walks_again(monkeypatch):
    """A view's cost is what is opened: a block or folded run opens on the graph kept for the stage,
    a composite or subgraph call is walked; each draws what a fresh workbench draws."""
    from byoc_workbench import session  # where the workbench finds build_graph

    mod = residual_model(400, blocks_per_stage=25)
    wb = Workbench(mod, "tensorrt")
    built = []
    real = session.build_graph
    monkeypatch.setattr(session, "build_graph", lambda *a, **k: built.append(k["expand"]) or real(*a, **k))
    views = [
        ("source", ()),
        ("source", ("main/stage1.",)),
        ("composite", ("main/stage1.",)),
        ("annotate", ()),  # the module composite left: its graph
        ("partition", ("main/out",)),  # the subgraph call: walked again, opened
    ]
    got = [wb.dot(name, expand=expand, collapse=True).source for name, expand in views]
    assert built == [(), (), (), ("main/out",)], built  # source, composite, partition closed, then opened
    monkeypatch.undo()
    for (name, expand), dot in zip(views, got):
        assert dot == Workbench(mod, "tensorrt").dot(name, expand=expand, collapse=True).source, (name, expand)


def census_by_walk(mod):
    """Each stage's op owners as the walk into every call sees them (how the census counted them
    before it read a composite's ops from the copy kept per function)."""
    import collections

    counts = collections.Counter()
    for name in ir.host_functions(mod) + ir.subgraph_functions(mod):
        walked = [s for s in ir.walk(mod[name], mod, name=name) if s.op]
        first = next((s.composite for s in walked if s.composite), None)
        own = "host" if name in ir.host_functions(mod) else (first.split(".")[0] if first else None)
        for s in walked:
            owner = summary.Owner(name, tuple(p.name for p in s.path if p.kind == "call"))
            counts[(s.op, owner, s.composite.split(".")[0] if s.composite else own)] += 1
    return counts


@pytest.mark.parametrize("which", ["demo", "residual", "branches and a loop", "a local function called twice"])
def test_the_census_counts_what_the_walk_into_every_call_sees(which, demo_mod):
    """Every stage's op owners (what the stage table, the changes and the diagrams' captions read)
    equal a count by the full walk, through composites, branches, a recursive loop and a local function."""
    cf = graphs.control_flow(["conv_relu"], (["split_subtract"], ["add"], 0.0), (2, ["conv_bias_relu"], ["add"]))
    mod, target = {
        "demo": (demo_mod, "byoc-target"),
        "residual": (residual_model(48, blocks_per_stage=4), "tensorrt"),
        "branches and a loop": (graphs.parse(cf), "byoc-target"),
        "a local function called twice": (graphs.Twice, "byoc-target"),
    }[which]
    chosen = rules.get_target(target).rules + (graphs.CF_EXTRA_RULES if which == "branches and a loop" else ())
    for s in stages.run_stages(mod, chosen, stages.keep_all):
        assert s.owners == census_by_walk(s.mod), s.name
        assert [(g.name, g.ops) for g in s.subgraphs] == [
            (n, [w.op for w in ir.walk(s.mod[n], s.mod) if w.op]) for n in ir.subgraph_functions(s.mod)
        ] or s.name in ("merge", "codegen"), s.name
        if s.name == "annotate":  # the calls each rule claimed, counted by the census's own walk
            walked = collections.Counter(
                ir.func_attr(w.callee, ir.COMPOSITE)
                for n in ir.host_functions(s.mod)
                for w in ir.walk(s.mod[n], s.mod, descend=False)
                if w.callee is not None
            )
            assert s.rule_matches == {r.qualified: walked.get(r.qualified, 0) for r in chosen}
            assert sum(s.rule_matches.values()) > 0 or which == "a local function called twice"  # its calls are inside


owners_counts = st.dictionaries(
    st.tuples(st.sampled_from(["relax.add", "relax.nn.relu"]), st.sampled_from(["main", "f_0", "f_1", "f_2", "f_3"])),
    st.integers(1, 4),
    max_size=10,
)


@given(owners_counts, owners_counts)
@settings(max_examples=200, deadline=None)
def test_the_stage_diff_turns_one_census_into_the_other(before, after):
    """Each change moves, removes or adds what the two counts say (the diff pairs owners off in one
    pass, where it had rebuilt both lists after every move: quadratic on 1,500 subgraphs)."""

    def census(counts):
        return collections.Counter({(op, summary.Owner(f), "host"): n for (op, f), n in counts.items()})

    b, a = census(before), census(after)
    have = collections.Counter({(op, o): n for (op, o, _), n in b.items()})
    for c in summary.diff(b, a):
        assert c["count"] > 0
        if c["kind"] in ("moved", "removed"):
            have[(c["op"], c["from"])] -= c["count"]
        if c["kind"] in ("moved", "added"):
            have[(c["op"], c["to"])] += c["count"]
    assert +have == collections.Counter({(op, o): n for (op, o, _), n in a.items()})


def test_the_cycle_collector_is_paused_only_while_a_workbench_computes(demo_mod, byoc):
    """Asked to (``pause_gc``, as the widget asks), a stage or a diagram pauses Python's cycle collector
    (a full collection walks every object alive: a third of a toggle on 12,000 ops); it is running again
    after, after an error too, and a collector the user had switched off stays off."""
    wb = Workbench(demo_mod, byoc, pause_gc=True)
    seen = []
    wb._build_graph = lambda *a, _build=wb._build_graph: (seen.append(gc.isenabled()), _build(*a))[1]
    wb.view("merge")
    assert seen == [False] and gc.isenabled()
    with pytest.raises(WorkbenchError):
        wb.view("no-such-stage")
    assert gc.isenabled()
    gc.disable()
    try:
        wb.view("partition")
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize(
    "which", ["demo", "residual", "already partitioned", "two-targets", "multi-output", "tuples", "ssd"]
)
def test_the_partition_census_from_regions_is_the_walks(which, demo_mod):
    """The partition stage counts each subgraph's ops from its region instead of walking the functions
    partition made (1,500 on 6,000 ops): the same owners, targets and subgraphs as a walk of them."""
    rule_set = rules.get_target("tensorrt").rules
    if which == "demo":
        mod, rule_set = demo_mod, rules.get_target("byoc-target").rules
    elif which == "residual":
        mod = residual_model(48, blocks_per_stage=4)
    elif which == "already partitioned":  # its tensorrt_0 is not the new region 0's: that one is tensorrt_01
        without_relu = [r for r in rule_set if r.name != "nn.relu"]
        first = stages.run_stages(residual_model(48, blocks_per_stage=4), without_relu, stages.keep_all)
        mod = first[stages.STAGES.index("partition")].mod
    elif which == "ssd":
        from byoc_workbench.workflow import model_workbench

        mod = model_workbench(weights="untrained")[0].mod
    else:
        builder = {"two-targets": graphs.cyclic_two_targets, "multi-output": graphs.multi_output_region}
        mod, rule_set = builder.get(which, graphs.split_feeds_one_op)(), graphs.two_target_rules()
    partitioned = stages.run_stages(mod, rule_set, stages.keep_all)[stages.STAGES.index("partition")]
    assert partitioned.subgraphs, "nothing was lifted: the case tests nothing"
    walked, subgraphs, _ = summary._census(partitioned.mod)
    assert partitioned.owners == walked
    assert [(s.name, s.target, s.ops) for s in partitioned.subgraphs] == [(s.name, s.target, s.ops) for s in subgraphs]
