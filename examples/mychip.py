"""A codegen of your own in NumPy: rules for a target "mychip", one emitter per op, one call to register.

byoc-workbench compare demo --no-prune --backend examples/mychip.py
"""

from tvm.relax.dpl import is_op, wildcard

from byoc_workbench import op_rule, pattern_rule, register_codegen

conv = is_op("relax.nn.conv2d")(wildcard(), wildcard())
bias = is_op("relax.add")(conv, is_op("relax.expand_dims")(wildcard()))
rules = [
    pattern_rule("mychip", "conv2d_bias_relu", is_op("relax.nn.relu")(bias)),  # patterns first
    op_rule("mychip", "add", "relax.add"),
]


def conv2d(op):  # NumPy: an expression for the result; kernels is the workbench's NumPy kernels
    a = op.attrs
    return f"kernels.conv2d({op.args[0]}, {op.args[1]}, {a['strides']}, {a['padding']}, {a['dilation']})"


emit = {
    "conv2d": conv2d,
    "expand_dims": lambda op: f"np.expand_dims({op.args[0]}, {op.attrs['axis']})",
    "add": lambda op: f"{op.args[0]} + {op.args[1]}",
    "relu": lambda op: f"np.maximum({op.args[0]}, 0)",
}
mychip = register_codegen("mychip", emit=emit, language="numpy", rules=rules)
