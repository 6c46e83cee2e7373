"""Solution key to the exercises of notebook 04 (your own codegen, in C). Try them yourself first.

``exercises_codegen.check_emitters(codegen.relu, codegen.add)`` and
``exercises_codegen.check_reshape_emitter(codegen.reshape)``.
"""


# Exercise 6: one loop over the output's elements. op.index(k) is input k's element for output
# element i under NumPy broadcasting: "i" for an input of the output's shape, "(i / 3136)" for the
# demo's (32, 1, 1) bias, "0" for a scalar such as the loop counter's constant.
def relu(op):
    x = op.args[0]
    return f"for (long i = 0; i < {op.size}; ++i) {op.out}[i] = {x}[i] > 0 ? {x}[i] : 0;"


def add(op):
    a, b = op.args
    return f"for (long i = 0; i < {op.size}; ++i) {op.out}[i] = {a}[{op.index(0)}] + {b}[{op.index(1)}];"


# Exercise 7: a row-major reshape moves no element, so the output is a copy of the input.
def reshape(op):
    return f"memcpy({op.out}, {op.args[0]}, sizeof({op.ctype}) * {op.size});"
