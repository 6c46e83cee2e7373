"""The composite stage built directly for one-op rules equals upstream's FuseOpsByPattern (names kept
as the workbench keeps them), and every case it cannot vouch for is left to upstream's pass."""

import graphs
import numpy as np
import pytest
import tvm_ffi
from tvm import relax
from tvm.relax.dpl import is_op, wildcard

from byoc_workbench import stages
from byoc_workbench.core import ir, transforms
from byoc_workbench.flow import fusion, rules
from byoc_workbench.models.synthetic import residual_model

SHAPE = (1, 4, 8, 8)
SYMBOLIC = """
@I.ir_module
class Module:
    @R.function
    def main(y: R.Tensor(("n", 4), "float32")) -> R.Tensor(("n", 4), "float32"):
        with R.dataflow():
            z = R.add(y, y)
            R.output(z)
        return z
"""


def canonical(mod):
    """Every host binding (its name, what it computes, its arguments by name, its type) and every
    composite function by structure: what the stages read, without the functions' own names."""
    bindings = []
    for name in ir.host_functions(mod):
        for s in ir.walk(mod[name], mod, descend=False):
            v = s.value
            ty = tvm_ffi.structural_hash(s.var.ty)
            if isinstance(v, relax.Call):
                args = [a.name if ir.is_var(a) else tvm_ffi.structural_hash(a) for a in v.args]
                comp = ir.func_attr(s.callee, ir.COMPOSITE) if s.callee is not None else None
                what = (comp, tvm_ffi.structural_hash(s.callee)) if comp else ir.callee_name(v)
                bindings.append((s.var.name, what, args, ty))
            elif ir.is_var(v):
                bindings.append((s.var.name, v.name, ty))
            elif isinstance(v, relax.Tuple):
                fields = [f.name if ir.is_var(f) else tvm_ffi.structural_hash(f) for f in v.fields]
                bindings.append((s.var.name, "tuple", fields, ty))
            else:  # a tuple's item
                bindings.append((s.var.name, type(v).__name__, v.tuple_value.name, v.index, ty))
    composites = sorted(
        (ir.func_attr(f, ir.COMPOSITE), tvm_ffi.structural_hash(f))
        for f in mod.functions.values()
        if ir.func_attr(f, ir.COMPOSITE)
    )
    return bindings, composites


def one_op_rules(mod):
    present = set(transforms.op_counts(mod))
    return [r for r in rules.get_target("tensorrt").rules if fusion.single_op(r) and set(r.ops) & present]


def plumbing():
    """clip with inline bounds, a concat of a tuple, a constant, a reshape's shape, a split's item."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(SHAPE, "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(relax.op.clip(x, relax.prim_value(0.0), relax.prim_value(6.0)))
            b = bb.emit(relax.op.add(a, a))
            c = bb.emit(relax.op.concat([a, b, x], axis=1))
            d = bb.emit(relax.op.add(x, relax.const(np.ones(SHAPE, "float32"))))
            e = bb.emit(relax.op.reshape(d, (1, 256)))
            parts = bb.emit(relax.op.split(c, 2, axis=1))
            f = bb.emit(relax.TupleGetItem(parts, 0))
            out = bb.emit_output(relax.Tuple([c, e, f]))
        bb.emit_func_output(out)
    return bb.get()


@pytest.mark.parametrize("which", ["residual", "plumbing", "ssd"])
def test_the_direct_fusion_equals_upstreams(which):
    if which == "ssd":
        from byoc_workbench.workflow import model_workbench

        mod = model_workbench(weights="untrained")[0].mod
    else:
        mod = stages.check_module(residual_model(200, blocks_per_stage=10) if which == "residual" else plumbing())
    chosen = one_op_rules(mod)
    ours = fusion.fuse_single_ops(mod, chosen)
    assert ours is not None, "the direct fusion left this module to upstream"
    theirs = fusion.fuse_upstream(mod, chosen)
    assert canonical(ours) == canonical(theirs)
    assert len(canonical(ours)[1]) > 3  # identical matches share a function, as upstream's do
    relax.analysis.well_formed(ours)  # types included: each call kept the type it had
    assert tvm_ffi.structural_equal(relax.transform.Normalize()(ours), ours)
    assert fusion.fuse_rules(mod, chosen) is not None


def _module(build):
    return stages.check_module(graphs.one_block(build))


def _dead(bb, x):
    bb.emit(relax.op.nn.relu(x))  # read by nothing: upstream's pass drops it
    return bb.emit(relax.op.add(x, x))


def test_what_upstream_might_do_otherwise_is_left_to_it():
    add = rules.op_rule("t", "add", "relax.add")
    relu = rules.op_rule("t", "relu", "relax.nn.relu")
    simple = _module(lambda bb, x: bb.emit(relax.op.add(x, x)))
    assert fusion.fuse_single_ops(simple, [add]) is not None
    checked = rules.op_rule("t", "add", "relax.add", check=lambda call: True)
    two_ops = rules.pattern_rule("t", "add_relu", is_op("relax.nn.relu")(is_op("relax.add")(wildcard(), wildcard())))
    assert fusion.fuse_single_ops(simple, [checked]) is None  # a check reads upstream's match context
    assert fusion.fuse_single_ops(simple, [add, two_ops]) is None  # one rule of several ops: all to upstream
    assert fusion.fuse_single_ops(_module(_dead), [add, relu]) is None
    assert fusion.fuse_single_ops(stages.check_module(graphs.parse(SYMBOLIC)), [add]) is None
    # Upstream's own result on each of these is what the stage gets.
    for mod, chosen in ((_module(_dead), [add, relu]), (simple, [checked])):
        assert canonical(fusion.fuse_rules(mod, chosen)) == canonical(fusion.fuse_upstream(mod, chosen))
