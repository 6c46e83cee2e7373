"""ir.walk: the one traversal every analysis, pass, codegen and drawing uses."""

import graphs
from tvm import relax

from byoc_workbench import stages
from byoc_workbench.core import ir


def annotated(demo_mod, byoc):
    return stages.annotate(stages.composite(demo_mod, byoc.rules), byoc.rules)


def test_walk_goes_through_branches_and_composites_in_order(demo_mod, byoc):
    mod = annotated(demo_mod, byoc)
    steps = list(ir.walk(mod["while_loop"], mod, name="while_loop"))
    assert [s.op for s in steps if s.op] == [
        "relax.less",
        "relax.add",
        "relax.nn.conv2d",
        "relax.expand_dims",
        "relax.add",
        "relax.nn.relu",
        "relax.nn.conv2d",
        "relax.expand_dims",
        "relax.add",
        "relax.nn.relu",
        "relax.reshape",
    ]
    if_step = next(s for s in steps if isinstance(s.value, relax.If))
    inside = [s for s in steps if s.path[1:2] and s.path[1].var is not None and s.path[1].var.same_as(if_step.var)]
    assert {s.path[1].kind for s in inside} == {"then", "else"}
    assert all(s.function == "while_loop" and s.path[0].kind == "function" for s in steps)
    # A composite call comes first, then its body, whose steps name the composite and sit in a call frame.
    call = next(s for s in steps if s.descended and s.callee is not None)
    body = steps[steps.index(call) + 1]
    assert ir.func_attr(call.callee, ir.COMPOSITE) == "byoc-target.add"
    assert body.op == "relax.add" and body.composite == "byoc-target.add" and call.composite is None
    assert body.path[-1] == ir.Place("call", "byoc-target.add", call.var) and body.frame == call.callee_frame
    # The recursive call to the global while_loop is reported but never entered.
    rec = next(s for s in steps if isinstance(s.value, relax.Call) and ir.callee_name(s.value) == "while_loop")
    assert rec.callee.same_as(mod["while_loop"]) and not rec.descended


def test_local_composites_are_recorded_not_yielded(demo_mod, byoc):
    m = annotated(demo_mod, byoc)
    m, regions = stages.merge(m)
    part = stages.partition(m, regions)
    steps = list(ir.walk(part["byoc_target_2"], part))
    assert not [s for s in steps if isinstance(s.value, relax.Function)]
    calls = [s for s in steps if s.descended]
    assert [s.composite for s in steps if s.op] == ["byoc-target.conv2d_bias_relu"] * 4 + ["byoc-target.reshape"]
    assert [ir.func_attr(s.callee, ir.COMPOSITE) for s in calls] == [
        "byoc-target.conv2d_bias_relu",
        "byoc-target.reshape",
    ]
    assert ir.ops_in(part["byoc_target_2"], part) == [s.op for s in steps if s.op]


def test_descend_can_be_switched_off_or_chosen_per_call(demo_mod, byoc):
    mod = annotated(demo_mod, byoc)
    func = mod["while_loop"]
    flat = list(ir.walk(func, mod, descend=False))
    assert [s.op for s in flat if s.op] == ["relax.less"]  # every other op sits in a composite
    assert not any(s.descended for s in flat) and all(s.composite is None for s in flat)
    only_add = list(ir.walk(func, mod, descend=lambda s: ir.func_attr(s.callee, ir.COMPOSITE) == "byoc-target.add"))
    assert [s.op for s in only_add if s.op and s.composite] == ["relax.add"]


def test_values_keep_two_calls_of_one_local_function_apart():
    func = graphs.Twice["main"]
    values = ir.Values(leaf=lambda e: "3")
    for p in func.params:
        values.bind((), p, p.name)
    symbol = {"relax.add": "+", "relax.multiply": "*"}
    for s in ir.walk(func, graphs.Twice):
        args = [values.get(s.frame, a) for a in s.value.args]
        if s.descended:
            values.enter(s, args)
        elif s.op:
            values.bind(s.frame, s.var, f"({args[0]} {symbol[s.op]} {args[1]})")
    assert values.get((), func.body.body) == "(((x + x) + (x + x)) * 3)"


def test_calls_between_functions_and_subgraph_target(demo_mod, byoc):
    assert ir.calls_between_functions(demo_mod) == {"main": {"while_loop"}, "while_loop": {"while_loop"}}
    final = stages.run_stages(demo_mod, byoc.rules, stages.keep_all)
    part = next(s for s in final if s.name == "partition").mod
    assert [ir.subgraph_target(part, n) for n in ir.subgraph_functions(part)] == ["byoc-target"] * 3


def test_a_per_object_cache_keeps_what_was_asked_for_lately():
    """Past its limit a PerObject forgets the objects not asked for lately, not all of them at once:
    one asked for on every pass is computed once."""
    computed = []
    cache = ir.PerObject(lambda ty: computed.append(ty) or ty.ndim, limit=4)
    hot = relax.TensorType((1, 2), "float32")
    cold = [relax.TensorType((k,), "float32") for k in range(12)]
    for ty in cold:
        assert cache(hot) == 2 and cache(ty) == 1
    assert sum(c.same_as(hot) for c in computed) == 1
    assert len(computed) == 13
    assert cache(cold[-1]) == 1 and len(computed) == 13  # the latest are kept
    cache(cold[0])
    assert len(computed) == 14  # the oldest went
