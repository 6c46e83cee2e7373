"""The demo's partition stage, written out: the seed's three subgraphs, each holding its
composites as local functions, called from inside the loop's If branches."""

import tvm
from tvm.script import ir as I
from tvm.script import relax as R

from byoc_workbench import stages

X = (1, 32, 56, 56)
W = (32, 32, 3, 3)
NHWC = (1, 56, 56, 32)


@I.ir_module
class Expected:
    @R.function
    def byoc_target_0(iter1: R.Tensor((), "int32")) -> R.Tensor((), "int32"):
        R.func_attr({"Codegen": "byoc_target"})
        with R.dataflow():

            @R.function
            def add(a: R.Tensor((), "int32"), one: R.Tensor((), "int32")) -> R.Tensor((), "int32"):
                R.func_attr({"Composite": "byoc-target.add", "Primitive": True})
                with R.dataflow():
                    gv = R.add(a, one)
                    R.output(gv)
                return gv

            inc = add(iter1, R.const(1, "int32"))
            R.output(inc)
        return inc

    @R.function
    def byoc_target_1(d1: R.Tensor(X, "float32"), w1: R.Tensor(W, "float32"), b1: R.Tensor((32,), "float32")):
        R.func_attr({"Codegen": "byoc_target"})
        with R.dataflow():

            @R.function
            def conv2d_bias_relu(
                d: R.Tensor(X, "float32"), w: R.Tensor(W, "float32"), b: R.Tensor((32,), "float32")
            ) -> R.Tensor(X, "float32"):
                R.func_attr({"Composite": "byoc-target.conv2d_bias_relu", "Primitive": True})
                with R.dataflow():
                    conv = R.nn.conv2d(d, w, padding=(1, 1))
                    bias = R.expand_dims(b, axis=[1, 2])
                    biased = R.add(conv, bias)
                    gv = R.nn.relu(biased)
                    R.output(gv)
                return gv

            relu = conv2d_bias_relu(d1, w1, b1)
            R.output(relu)
        return relu

    @R.function
    def byoc_target_2(d1: R.Tensor(X, "float32"), w1: R.Tensor(W, "float32"), b1: R.Tensor((32,), "float32")):
        R.func_attr({"Codegen": "byoc_target"})
        with R.dataflow():

            @R.function
            def conv2d_bias_relu(
                d: R.Tensor(X, "float32"), w: R.Tensor(W, "float32"), b: R.Tensor((32,), "float32")
            ) -> R.Tensor(X, "float32"):
                R.func_attr({"Composite": "byoc-target.conv2d_bias_relu", "Primitive": True})
                with R.dataflow():
                    conv = R.nn.conv2d(d, w, padding=(1, 1))
                    bias = R.expand_dims(b, axis=[1, 2])
                    biased = R.add(conv, bias)
                    gv = R.nn.relu(biased)
                    R.output(gv)
                return gv

            relu_x = conv2d_bias_relu(d1, w1, b1)

            @R.function
            def reshape(x: R.Tensor(X, "float32")) -> R.Tensor(NHWC, "float32"):
                R.func_attr({"Composite": "byoc-target.reshape", "Primitive": True})
                with R.dataflow():
                    gv = R.reshape(x, NHWC)
                    R.output(gv)
                return gv

            break_out = reshape(relu_x)
            R.output(break_out)
        return break_out

    @R.function
    def while_loop(
        iter1: R.Tensor((), "int32"),
        d1: R.Tensor(X, "float32"),
        w1: R.Tensor(W, "float32"),
        b1: R.Tensor((32,), "float32"),
    ) -> R.Tensor(NHWC, "float32"):
        cls = Expected
        with R.dataflow():
            cond = R.less(iter1, R.const(2, "int32"))
            R.output(cond)
        if cond:
            with R.dataflow():
                inc = cls.byoc_target_0(iter1)
                relu = cls.byoc_target_1(d1, w1, b1)
                R.output(inc, relu)
            loop_out = cls.while_loop(inc, relu, w1, b1)
            result = loop_out
        else:
            with R.dataflow():
                break_out = cls.byoc_target_2(d1, w1, b1)
                R.output(break_out)
            result = break_out
        return result

    @R.function
    def main(
        data: R.Tensor(X, "float32"), weight: R.Tensor(W, "float32"), bias: R.Tensor((32,), "float32")
    ) -> R.Tensor(NHWC, "float32"):
        cls = Expected
        out = cls.while_loop(R.const(0, "int32"), data, weight, bias)
        return out


def test_demo_partition_is_the_expected_module(demo_mod, byoc):
    part = next(s for s in stages.run_stages(demo_mod, byoc.rules) if s.name == "partition")
    tvm.ir.assert_structural_equal(part.mod, Expected)
