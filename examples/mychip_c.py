"""A codegen of your own in C: the demo's rules for a target "mychip_c", two emitters written here,
the rest taken from the workbench's c codegen.

    byoc-workbench profile demo --backend examples/mychip_c.py
"""

from tvm.relax.dpl import is_op, wildcard

from byoc_workbench import op_rule, pattern_rule, register_codegen
from byoc_workbench.backends import c

conv = is_op("relax.nn.conv2d")(wildcard(), wildcard())
bias = is_op("relax.add")(conv, is_op("relax.expand_dims")(wildcard()))
rules = [
    pattern_rule("mychip_c", "conv2d_bias_relu", is_op("relax.nn.relu")(bias)),  # patterns first
    op_rule("mychip_c", "reshape", "relax.reshape"),
    op_rule("mychip_c", "add", "relax.add"),
]


def relu(op):  # C: statements that write op.out; op.args are the inputs' pointers
    x = op.args[0]
    return f"for (long i = 0; i < {op.size}; ++i) {op.out}[i] = {x}[i] > 0 ? {x}[i] : 0;"


def add(op):  # op.index(k) is input k's element for output element i, broadcast as NumPy does
    a, b = op.args
    return f"for (long i = 0; i < {op.size}; ++i) {op.out}[i] = {a}[{op.index(0)}] + {b}[{op.index(1)}];"


emit = {"conv2d": c.conv2d, "expand_dims": c.copy, "reshape": c.copy, "relu": relu, "add": add}
mychip_c = register_codegen("mychip_c", emit=emit, language="c", rules=rules)
