"""Small Relax graphs for the partitioner's tests, built with BlockBuilder, and what the build tests skip by."""

import numpy as np
import pytest
import tvm
import tvm.script
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R

from byoc_workbench.core import ir
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.flow.rules import op_rule
from byoc_workbench.measure.compiler import cuda

SHAPE = (1, 4, 8, 8)
F32 = "float32"


def needs_cuda_compiler() -> None:
    """Skip the calling test where no CUDA compiler is found here: a GPU build compiles its kernels with one (no GPU
    needed), and says so in one line where there is none."""
    try:
        cuda.find()
    except WorkbenchError as err:
        pytest.skip(str(err))


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


# (strides, padding, dilation, groups) of the conv2d kernels' tests
CONV_CASES = [
    ((1, 1), (1, 1), (1, 1), 1),
    ((2, 2), (0, 1), (1, 1), 1),
    ((1, 2), (2, 2), (2, 1), 2),
    ((1, 1), (1, 1), (1, 1), 4),
]


def conv2d_case(strides, padding, dilation, groups) -> tuple:
    """``(module, [x, w])``: one conv2d on a (1, 8, 11, 9) input, in a dataflow block."""
    rng = np.random.RandomState(1)
    x = rng.randn(1, 8, 11, 9).astype("float32")
    w = rng.randn(8, 8 // groups, 3, 3).astype("float32")
    bb = relax.BlockBuilder()
    xv, wv = relax.Var("x", _t(x.shape)), relax.Var("w", _t(w.shape))
    with bb.function("main", [xv, wv]):
        with bb.dataflow():
            conv = relax.op.nn.conv2d(xv, wv, strides=strides, padding=padding, dilation=dilation, groups=groups)
            out = bb.emit_output(conv)
        bb.emit_func_output(out)
    return bb.get(), [x, w]


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


def stale_dependency_two_targets():
    """x1 = a(x); x2 = b(x); x3 = a(x, x2); x4 = b(x1, x2); x5 = a(x1, x3).

    x4 joins x2's region after x3 has read it, so x3 comes to depend on x1: x5 may join x3, not x1
    too ({x1, x3, x5} would feed {x2, x4} and read it back). A search that kept each group's
    dependencies as a set computed once, when the group was made, joined all three."""

    def body(bb, x):
        x1 = bb.emit(relax.op.add(x, x))
        x2 = bb.emit(relax.op.multiply(x, x))
        x3 = bb.emit(relax.op.add(x, x2))
        x4 = bb.emit(relax.op.multiply(x1, x2))
        x5 = bb.emit(relax.op.add(x1, x3))
        return relax.Tuple([x4, x5])

    return one_block(body)


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


# --- tuple plumbing: a claimed call reached through projections --------------------------

SPLIT_RULES = (
    op_rule("tgta", "split", "relax.split"),
    op_rule("tgta", "subtract", "relax.subtract"),
    op_rule("tgtb", "multiply", "relax.multiply"),
)


def one_block(body, shape=SHAPE):
    """``main(x)`` of one dataflow block: ``body(bb, x)`` emits the bindings and returns the output."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", _t(shape))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(body(bb, x))
        bb.emit_func_output(out)
    return bb.get()


def _tuple_graph(body):
    return one_block(body, (1, 8))


def _split(bb, x):
    parts = bb.emit(relax.op.split(x, 2, axis=1))
    return parts, bb.emit(relax.TupleGetItem(parts, 0)), bb.emit(relax.TupleGetItem(parts, 1))


def split_feeds_one_op():
    """split -> two parts -> subtract: upstream makes one subgraph {split, subtract}."""
    return _tuple_graph(lambda bb, x: relax.op.nn.relu(bb.emit(relax.op.subtract(*_split(bb, x)[1:]))))


def repacked_tuple():
    """The parts are packed into a new tuple, projected again, then subtracted."""

    def body(bb, x):
        _, a, b = _split(bb, x)
        packed = bb.emit(relax.Tuple([b, a]))
        c, d = bb.emit(relax.TupleGetItem(packed, 0)), bb.emit(relax.TupleGetItem(packed, 1))
        return relax.op.subtract(c, d)

    return _tuple_graph(body)


def projection_closes_a_cycle():
    """part 0 goes through tgtb's multiply before the subtract: merging would close a cycle."""

    def body(bb, x):
        _, a, b = _split(bb, x)
        return relax.op.subtract(b, bb.emit(relax.op.multiply(a, a)))

    return _tuple_graph(body)


def tuple_escapes():
    """The split's tuple is also returned whole: its projections cannot join a region."""

    def body(bb, x):
        parts, a, b = _split(bb, x)
        return relax.Tuple([bb.emit(relax.op.subtract(a, b)), parts])

    return _tuple_graph(body)


# --- control flow: If branches and a recursive loop, written as TVMScript ----------------

# Each step reads {x} and binds {o}; w and b are the function's weight and bias.
CF_STEPS = {
    "conv_bias_relu": [
        "{o}_c = R.nn.conv2d({x}, w, padding=(1, 1))",
        "{o}_b = R.expand_dims(b, axis=[1, 2])",
        "{o}_a = R.add({o}_c, {o}_b)",
        "{o} = R.nn.relu({o}_a)",
    ],
    "conv_relu": ["{o}_c = R.nn.conv2d({x}, w, padding=(1, 1))", "{o} = R.nn.relu({o}_c)"],
    "add": ['{o} = R.add({x}, R.const(0.25, "float32"))'],
    "relu": ["{o} = R.nn.relu({x})"],
    "multiply": ['{o} = R.multiply({x}, R.const(0.5, "float32"))'],
    "reshape_roundtrip": ["{o}_f = R.reshape({x}, (1, 4, 64))", "{o} = R.reshape({o}_f, (1, 4, 8, 8))"],
    "split_subtract": [
        "{o}_s = R.split({x}, 2, axis=1)",
        "{o}_p = {o}_s[0]",
        "{o}_q = {o}_s[1]",
        "{o}_d = R.subtract({o}_p, {o}_q)",
        "{o} = R.concat(({o}_d, {o}_p), axis=1)",
    ],
}
# The byoc-target rules, plus two the teaching codegen can also compile, for tuple plumbing.
CF_EXTRA_RULES = (
    op_rule("byoc-target", "split", "relax.split"),
    op_rule("byoc-target", "subtract", "relax.subtract"),
)
_T = 'R.Tensor((1, 4, 8, 8), "float32")'
_PARAMS = 'w: R.Tensor((4, 4, 3, 3), "float32"), b: R.Tensor((4,), "float32")'


class _Writer:
    def __init__(self):
        self.lines: list = []
        self.count = 0

    def block(self, indent, steps, x, outputs=()) -> str:
        """A dataflow block running ``steps`` on ``x``; returns the variable holding the result."""
        if not steps and not outputs:
            return x
        pad = " " * indent
        body = []
        for kind in steps:
            self.count += 1
            out = f"v{self.count}"
            body += [line.format(x=x, o=out) for line in CF_STEPS[kind]]
            x = out
        self.lines.append(f"{pad}with R.dataflow():")
        self.lines += [f"{pad}    {line}" for line in list(outputs) + body]
        names = [o.split(" = ")[0] for o in outputs] + ([x] if steps else [])
        self.lines.append(f"{pad}    R.output({', '.join(names)})")
        return x

    def branches(self, indent, cond_lines, then, otherwise, x) -> str:
        """``if``/``else`` on a condition; each branch runs its steps, then its tail line if any."""
        pad = " " * indent
        self.block(indent, [], x, outputs=cond_lines)
        self.lines.append(f"{pad}if cond:")
        for i, (steps, tail) in enumerate((then, otherwise)):
            if i:
                self.lines.append(f"{pad}else:")
            outputs = ['inc = R.add(i, R.const(1, "int32"))'] if tail else []
            y = self.block(indent + 4, steps, x, outputs)
            if tail:
                self.lines.append(f"{pad}    rr = Module.loop(inc, {y}, w, b)")
                y = "rr"
            self.lines.append(f"{pad}    res = {y}")
        return "res"


def control_flow(prefix=(), branch=None, loop=None, suffix=()) -> str:
    """TVMScript for ``main(x, w, b)``: ``prefix`` steps; then, with ``branch = (then, else,
    threshold)``, an If on ``sum(x) < threshold``; then, with ``loop = (n, body, tail)``, a call to
    a recursive ``loop`` that runs ``body`` n times, then ``tail`` once; then ``suffix`` steps."""
    w = _Writer()
    lines = ["@I.ir_module", "class Module:"]
    if loop is not None:
        n, body, tail = loop
        w.lines = []
        out = w.branches(8, [f'cond = R.less(i, R.const({n}, "int32"))'], (body, True), (tail, False), "y")
        lines += ["    @R.function", f'    def loop(i: R.Tensor((), "int32"), y: {_T}, {_PARAMS}) -> {_T}:']
        lines += w.lines + [f"        return {out}"]
    w.lines = []
    x = w.block(8, prefix, "x")
    if branch is not None:
        then, otherwise, threshold = branch
        cond = [f"s = R.sum({x})", f'cond = R.less(s, R.const({threshold!r}, "float32"))']
        x = w.branches(8, cond, (then, False), (otherwise, False), x)
    if loop is not None:
        w.lines.append(f'        lp = Module.loop(R.const(0, "int32"), {x}, w, b)')
        x = "lp"
    x = w.block(8, suffix, x)
    lines += ["    @R.function", f"    def main(x: {_T}, {_PARAMS}) -> {_T}:"] + w.lines + [f"        return {x}"]
    return "\n".join(lines) + "\n"


def parse(script: str):
    """A module from TVMScript text (it names I and R, imported above)."""
    return tvm.script.from_source(script)


def region_cycle(mod, regions) -> bool:
    """Whether merging the regions makes a cycle: a region reaching itself through other bindings."""
    node = {v: ("region", r.id) for r in regions for v in r.members}
    edges: dict = {}
    for fname in ir.host_functions(mod):
        for s in ir.walk(mod[fname], mod, descend=False):
            dst = node.get(s.var, s.var)
            for v in ir.reads(s.value):
                src = node.get(v, v)
                if src != dst:
                    edges.setdefault(src, set()).add(dst)
    state: dict = {}

    def cyclic(n) -> bool:
        state[n] = "open"
        for m in edges.get(n, ()):
            if state.get(m) == "open" or (m not in state and cyclic(m)):
                return True
        state[n] = "done"
        return False

    return any(n not in state and cyclic(n) for n in list(edges))


# A local function called twice: two frames of one function (ir.walk, the census).
@I.ir_module
class Twice:
    @R.function
    def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        @R.function
        def double(y: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
            z = R.add(y, y)
            return z

        a = double(x)
        b = double(a)
        c = R.multiply(b, R.const(3.0, "float32"))
        return c


@I.ir_module
class Double:
    """x + x of a 4x4 tensor: the smallest module a test of targets builds and runs."""

    @R.function
    def main(x: R.Tensor((4, 4), "float32")):
        y = R.add(x, x)
        return y
