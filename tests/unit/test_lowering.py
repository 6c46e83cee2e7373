"""One lowering of a subgraph, read by every renderer: the ONNX translator, the torch backend and the planner."""

import pathlib
import re

import pytest
from tvm.script import ir as I
from tvm.script import relax as R

import byoc_workbench
from byoc_workbench import stages
from byoc_workbench.backends import lowering, onnx, pytorch
from byoc_workbench.backends.lowering import Const, Constant, Inline, Input, Item, OpCall, Out
from byoc_workbench.flow import summary


@I.ir_module
class Split:
    """A tuple result, an item of an op's tuple result, a constant, and a tuple built of both."""

    @R.function
    def main(x: R.Tensor((2, 6), "float32")) -> R.Tuple(R.Tensor((2, 3), "float32"), R.Tensor((2, 3), "float32")):
        with R.dataflow():
            s = R.split(x, 2, axis=1)
            a = s[1]
            b = R.add(a, R.const(1.5, "float32"))
            c = b
            gv = (c, a)
            R.output(gv)
        return gv


def test_the_steps_of_a_small_subgraph():
    lowered = lowering.lower_subgraph(Split["main"])
    assert lowered.steps == [
        OpCall("relax.split", (Input(0),), 0),
        Constant(0),
        OpCall("relax.add", (Item(Out(0), 1), Const(0)), 1),
    ]
    assert lowered.result == (Out(1), Item(Out(0), 1))


def test_one_lowering_serves_the_torch_and_onnx_renderers():
    program = pytorch.Program(Split["main"], "split")
    assert program.lines == ["s = split(in0)", "b = add(s[1], const0)"]
    assert program.result.text == "(b, s[1])" and [c.item() for c in program.consts] == [1.5]
    pytest.importorskip("onnx", reason="the ONNX translator needs onnx")
    graph = onnx.translate(Split["main"], "split").graph
    assert [n.op_type for n in graph.node] == ["Split", "Add"]
    split, add = graph.node
    assert list(add.input) == [split.output[1], "const"]
    assert [o.name for o in graph.output] == [add.output[0], split.output[1]]


def test_a_composite_is_gone_into_or_left_whole(demo_mod, byoc):
    func = summary.stage(stages.run_stages(demo_mod, byoc.rules), "prune").mod["byoc_target_1"]
    inlined = lowering.lower_subgraph(func).steps
    assert [s.name for s in inlined if isinstance(s, Inline)] == ["byoc-target.conv2d_bias_relu"]
    assert [s.name for s in inlined if isinstance(s, OpCall)] == [
        "relax.nn.conv2d",
        "relax.expand_dims",
        "relax.add",
        "relax.nn.relu",
    ]
    whole = lowering.lower_subgraph(func, descend=False)
    assert [s.name for s in whole.steps if isinstance(s, OpCall)] == ["byoc-target.conv2d_bias_relu"]
    assert whole.result == Out(0)


def test_only_the_lowering_walks_in_backends():
    backends = pathlib.Path(byoc_workbench.__file__).parent / "backends"
    walkers = sorted(p.name for p in backends.glob("*.py") if re.search(r"\bir\.walk\(", p.read_text()))
    assert walkers == ["lowering.py"]
