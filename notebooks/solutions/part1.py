"""Solution key to the exercises of notebook 01. Try them yourself before you read on.

Each name below is an answer to pass to the exercise's check, e.g.
``exercises.check_conv2d_relu(part1.conv2d_relu, part1.conv2d_relu_matches)``.
"""

from tvm.relax.dpl import is_op, wildcard
from tvm.script import ir as I
from tvm.script import relax as R

from byoc_workbench import get_target, op_rule
from byoc_workbench.core import ir

# Exercise 1: relu applied directly to a conv2d. conv_relu_graph() has three convolutions,
# but the middle one's relu is applied to a bias add, so the pattern matches twice.
conv2d_relu = is_op("relax.nn.relu")(is_op("relax.nn.conv2d")(wildcard(), wildcard()))
conv2d_relu_matches = 2

# Exercise 2: with multiply claimed, conv2d + relu, multiply and add are connected ops of one
# target with no host op between them, so the two regions become one subgraph.
multiply_rule = op_rule("byoc-target", "multiply", "relax.multiply")
multiply_subgraphs = 1


# Exercise 3: stages.no_mac(2) would do too.
def at_least_two_macs(name, ops):
    macs = sum(op in ir.MAC_OPS for op in ops)
    return None if macs >= 2 else f"{macs} MAC op{'s' if macs != 1 else ''} (needs 2)"


# Exercise 4: four ops. byoc-target's conv2d_relu claims conv2d + relu and its add rule claims
# the add; the sigmoid between them stays on the host, so there are two subgraphs.
@I.ir_module
class OwnGraph:
    @R.function
    def main(x: R.Tensor((1, 4, 8, 8), "float32"), w: R.Tensor((4, 4, 3, 3), "float32")):
        with R.dataflow():
            c = R.nn.conv2d(x, w, padding=(1, 1))
            r = R.nn.relu(c)
            s = R.sigmoid(r)
            y = R.add(s, x)
            R.output(y)
        return y


own_graph = OwnGraph
own_rules = get_target("byoc-target")
own_subgraphs = 2
