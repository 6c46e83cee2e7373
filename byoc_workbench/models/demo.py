"""The seed's Part 1 graph, written in Relax (a user's own graph is loaded by :mod:`.user_file`).

The seed builds a Relay ``while_loop`` with a ``Let``-bound recursive function.
Relax spells the same loop as a recursive global function with ``R.If``: the
true branch runs conv2d + bias + relu and recurses with the counter plus one,
the false branch runs conv2d + bias + relu once more and reshapes to NHWC.
With the counter starting at 0 that makes three convolutions, as in the seed.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm.script import ir as I
from tvm.script import relax as R


@I.ir_module
class DemoModule:
    @R.function
    def while_loop(
        iter1: R.Tensor((), "int32"),
        d1: R.Tensor((1, 32, 56, 56), "float32"),
        w1: R.Tensor((32, 32, 3, 3), "float32"),
        b1: R.Tensor((32,), "float32"),
    ) -> R.Tensor((1, 56, 56, 32), "float32"):
        with R.dataflow():
            cond = R.less(iter1, R.const(2, "int32"))
            R.output(cond)
        if cond:
            with R.dataflow():
                inc = R.add(iter1, R.const(1, "int32"))
                conv = R.nn.conv2d(d1, w1, strides=(1, 1), padding=(1, 1))
                b = R.expand_dims(b1, axis=[1, 2])
                biased = R.add(conv, b)
                relu = R.nn.relu(biased)
                R.output(inc, relu)
            loop_out = DemoModule.while_loop(inc, relu, w1, b1)
            result = loop_out
        else:
            with R.dataflow():
                conv_x = R.nn.conv2d(d1, w1, strides=(1, 1), padding=(1, 1))
                b_x = R.expand_dims(b1, axis=[1, 2])
                biased_x = R.add(conv_x, b_x)
                relu_x = R.nn.relu(biased_x)
                break_out = R.reshape(relu_x, (1, 56, 56, 32))
                R.output(break_out)
            result = break_out
        return result

    @R.function
    def main(
        data: R.Tensor((1, 32, 56, 56), "float32"),
        weight: R.Tensor((32, 32, 3, 3), "float32"),
        bias: R.Tensor((32,), "float32"),
    ) -> R.Tensor((1, 56, 56, 32), "float32"):
        out = DemoModule.while_loop(R.const(0, "int32"), data, weight, bias)
        return out


def demo_module() -> tvm.IRModule:
    """The seed's loop graph as a Relax IRModule."""
    return DemoModule


def demo_inputs(seed: int = 0) -> list:
    """Inputs for ``main``: data, weight and bias, scaled so activations stay O(1)."""
    rng = np.random.RandomState(seed)
    return [
        rng.uniform(-1, 1, (1, 32, 56, 56)).astype("float32"),
        # a float32 divisor: numpy 2 would make the weights float64 (numpy 1 kept the array's float32)
        rng.uniform(-1, 1, (32, 32, 3, 3)).astype("float32") / np.float32(np.sqrt(32 * 9)),
        rng.uniform(-0.1, 0.1, (32,)).astype("float32"),
    ]
