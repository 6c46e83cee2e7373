"""Small Relax graphs for the partitioner's tests, built with BlockBuilder."""

import numpy as np
from tvm import relax

from byoc_workbench.flow.rules import op_rule

SHAPE = (1, 4, 8, 8)
F32 = "float32"


def _t(shape):
    return relax.TensorType(shape, F32)


STEPS = ("conv_bias_relu", "conv_relu", "add", "relu", "multiply", "reshape_roundtrip")


def _step(bb, kind, x, w, b):
    op = relax.op
    if kind == "conv_bias_relu":
        conv = bb.emit(op.nn.conv2d(x, w, padding=1))
        return bb.emit(op.nn.relu(bb.emit(op.add(conv, bb.emit(op.expand_dims(b, [1, 2]))))))
    if kind == "conv_relu":
        return bb.emit(op.nn.relu(bb.emit(op.nn.conv2d(x, w, padding=1))))
    if kind == "add":
        return bb.emit(op.add(x, relax.const(np.full(SHAPE, 0.25, F32))))
    if kind == "relu":
        return bb.emit(op.nn.relu(x))
    if kind == "multiply":
        return bb.emit(op.multiply(x, relax.const(0.5, F32)))
    if kind == "reshape_roundtrip":
        flat = bb.emit(op.reshape(x, (1, 4, 64)))
        return bb.emit(op.reshape(flat, SHAPE))
    raise ValueError(kind)


def build(kinds_a, kinds_b=None):
    """A chain of steps; with ``kinds_b`` a diamond: two chains from x joined by add."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", _t(SHAPE))
    w = relax.Var("w", _t((4, 4, 3, 3)))
    b = relax.Var("b", _t((4,)))
    with bb.function("main", [x, w, b]):
        with bb.dataflow():
            y = x
            for k in kinds_a:
                y = _step(bb, k, y, w, b)
            if kinds_b is not None:
                z = x
                for k in kinds_b:
                    z = _step(bb, k, z, w, b)
                y = bb.emit(relax.op.add(y, z))
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    return bb.get()


def inputs(seed=0):
    rng = np.random.RandomState(seed)
    return [
        rng.uniform(-1, 1, SHAPE).astype(F32),
        (rng.uniform(-1, 1, (4, 4, 3, 3)) / 6).astype(F32),
        rng.uniform(-0.1, 0.1, (4,)).astype(F32),
    ]


def two_target_rules():
    """tgta claims add, tgtb claims multiply and relu."""
    return (
        op_rule("tgta", "add", "relax.add"),
        op_rule("tgtb", "multiply", "relax.multiply"),
        op_rule("tgtb", "relu", "relax.nn.relu"),
    )


def cyclic_two_targets():
    """x1 = a(x); x2 = b(x1); x3 = a(x1, x2): x3 cannot join x1's region (cycle through x2)."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", _t(SHAPE))
    with bb.function("main", [x]):
        with bb.dataflow():
            x1 = bb.emit(relax.op.add(x, x))
            x2 = bb.emit(relax.op.multiply(x1, x1))
            x3 = bb.emit(relax.op.add(x1, x2))
            out = bb.emit_output(relax.op.nn.relu(x3))
        bb.emit_func_output(out)
    return bb.get()


def multi_output_region():
    """A tgta region {add, add} whose two values are both used by host ops."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", _t(SHAPE))
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(relax.op.add(x, x))
            c = bb.emit(relax.op.add(a, x))
            s1 = bb.emit(relax.op.subtract(a, x))
            s2 = bb.emit(relax.op.subtract(c, s1))
            out = bb.emit_output(s2)
        bb.emit_func_output(out)
    return bb.get()
