"""Symbolic shapes (a batch ``n``) through every stage, the diagrams, the teaching codegen and ONNX Runtime.

Each graph is partitioned once and then run at two batch sizes, and every
result is compared with TVM alone on the same inputs.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import tvm_ffi
from messages import one_line
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

from byoc_workbench import cli, stages, subjects
from byoc_workbench.backends import onnx, registry, tensorrt
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.flow import rules
from byoc_workbench.measure.compiler import execute
from byoc_workbench.measure.time import runner
from byoc_workbench.models import demo
from byoc_workbench.session import Workbench


@I.ir_module
class BatchedDemo:
    """The seed's loop graph (:class:`byoc_workbench.models.demo.DemoModule`) with a symbolic batch ``n``."""

    @R.function
    def while_loop(
        iter1: R.Tensor((), "int32"),
        d1: R.Tensor(("n", 32, 56, 56), "float32"),
        w1: R.Tensor((32, 32, 3, 3), "float32"),
        b1: R.Tensor((32,), "float32"),
    ) -> R.Tensor(("n", 56, 56, 32), "float32"):
        n = T.int64()
        with R.dataflow():
            cond = R.less(iter1, R.const(2, "int32"))
            R.output(cond)
        if cond:
            with R.dataflow():
                inc = R.add(iter1, R.const(1, "int32"))
                conv = R.nn.conv2d(d1, w1, strides=(1, 1), padding=(1, 1))
                b = R.expand_dims(b1, axis=[1, 2])
                relu = R.nn.relu(R.add(conv, b))
                R.output(inc, relu)
            result = BatchedDemo.while_loop(inc, relu, w1, b1)
        else:
            with R.dataflow():
                conv_x = R.nn.conv2d(d1, w1, strides=(1, 1), padding=(1, 1))
                b_x = R.expand_dims(b1, axis=[1, 2])
                relu_x = R.nn.relu(R.add(conv_x, b_x))
                result = R.reshape(relu_x, (n, 56, 56, 32))
                R.output(result)
        return result

    @R.function
    def main(
        data: R.Tensor(("n", 32, 56, 56), "float32"),
        weight: R.Tensor((32, 32, 3, 3), "float32"),
        bias: R.Tensor((32,), "float32"),
    ) -> R.Tensor(("n", 56, 56, 32), "float32"):
        return BatchedDemo.while_loop(R.const(0, "int32"), data, weight, bias)


# The user file: conv2d + bias + relu, then a reshape to [-1], on an input (n, 3, h, w).
CONV_RESHAPE = """
from tvm.script import ir as I, relax as R


@I.ir_module
class Dyn:
    @R.function
    def main(x: R.Tensor(("n", 3, "h", "w"), "float32"), k: R.Tensor((8, 3, 3, 3), "float32"),
             b: R.Tensor((8,), "float32")):
        with R.dataflow():
            c = R.nn.conv2d(x, k, padding=(1, 1))
            r = R.nn.relu(R.add(c, R.expand_dims(b, axis=[1, 2])))
            o = R.reshape(r, [-1])
            R.output(o)
        return o


mod = Dyn
"""


@pytest.fixture(scope="module")
def conv_reshape(tmp_path_factory):
    path = tmp_path_factory.mktemp("sym") / "dyn.py"
    path.write_text(CONV_RESHAPE)
    mod, _ = subjects.load_model_file(path)
    return path, mod


def _demo_inputs(batch: int) -> list:
    data, weight, bias = demo.demo_inputs()
    rng = np.random.RandomState(batch)
    return [rng.uniform(-1, 1, (batch, *data.shape[1:])).astype("float32"), weight, bias]


def _conv_inputs(batch: int) -> list:
    rng = np.random.RandomState(batch)
    return [
        rng.uniform(-1, 1, (batch, 3, 5, 7)).astype("float32"),
        rng.uniform(-1, 1, (8, 3, 3, 3)).astype("float32"),
        rng.uniform(-1, 1, (8,)).astype("float32"),
    ]


@pytest.mark.parametrize("backend", [None, "onnxruntime", "pruned"], ids=["teaching", "onnxruntime", "pruned"])
@pytest.mark.parametrize("graph", ["demo", "conv_reshape"])
def test_partitioned_runs_match_tvm_alone_at_two_batch_sizes(graph, backend, conv_reshape):
    """``pruned``: every subgraph returns to the host, its ops inlined in the caller's sizes."""
    mod, inputs = (BatchedDemo, _demo_inputs) if graph == "demo" else (conv_reshape[1], _conv_inputs)
    prune = _prune_every_subgraph if backend == "pruned" else stages.keep_all
    backend = None if backend == "pruned" else backend
    found = stages.run_stages(mod, rules.get_target("byoc-target").rules, prune, backend=backend)
    codegen = found[-1]
    want = {None: "teaching", "onnxruntime": "onnxruntime"}[backend]
    if prune is _prune_every_subgraph:
        assert not codegen.generated and not codegen.subgraphs, codegen.subgraphs
    else:
        assert codegen.generated and all(c.backend == want for c in codegen.generated.values()), codegen.notes
    outs = []
    for batch in (1, 3):
        args = inputs(batch)
        got = runner.build_and_run(codegen, args, repeat=1, warmup=0, progress=False).outputs
        ref = execute.run(mod, args)
        assert got.shape == ref.shape and got.shape[0] == (batch if graph == "demo" else batch * 8 * 5 * 7)
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
        outs.append(got)
    assert outs[0].shape != outs[1].shape, "one build served both batch sizes"


def test_the_stages_draw_and_generate_with_n(conv_reshape, tmp_path, capsys):
    path, mod = conv_reshape
    assert cli.main(["stages", str(path), "--out", str(tmp_path), "--format", "dot"]) == 0
    source = (tmp_path / "00-source.dot").read_text()
    assert "float32[n, 3, h, w]" in source and "float32[n * h * w * 8]" in source and "T.int64" not in source
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [s["subgraphs"][0]["ops"][-1] for s in summary["stages"] if s["name"] == "codegen"] == ["relax.reshape"]
    code = Workbench(mod, "byoc-target").view("codegen", svg=False).generated["byoc_target_0"]
    assert "n, h, w = x.shape[0], x.shape[2], x.shape[3]" in code and "np.reshape(gv, (n * h * w * 8,))" in code


def test_unknown_rank_goes_through_every_stage_and_stays_with_tvm(tmp_path, capsys):
    path = tmp_path / "unknown.py"
    path.write_text(
        "from tvm.script import ir as I, relax as R\n\n\n@I.ir_module\nclass U:\n    @R.function\n"
        '    def main(x: R.Tensor(dtype="float32", ndim=-1), y: R.Tensor(dtype="float32", ndim=-1)):\n'
        "        with R.dataflow():\n            a = R.add(x, y)\n            R.output(a)\n"
        "        return a\n\n\nmod = U\n"
    )
    assert cli.main(["stages", str(path), "--out", str(tmp_path / "o"), "--no-prune", "--format", "dot"]) == 0
    out = capsys.readouterr().out
    assert "byoc_target_0: not compiled, its output float32[...] has no shape known before it runs" in out
    assert "float32[...]" in (tmp_path / "o" / "04-partition.dot").read_text()


def test_tensorrt_refuses_dynamic_shapes_in_one_line_and_auto_moves_on(conv_reshape):
    _, mod = conv_reshape
    parted = stages.run_stages(mod, rules.get_target("byoc-target").rules, stages.keep_all)[5].mod
    with pytest.raises(WorkbenchError) as err:
        tensorrt.compile_subgraph("byoc_target_0", parted["byoc_target_0"])
    line = one_line(err)
    assert "optimisation profile" in line and "x float32[n, 3, h, w]" in line and "onnxruntime" in line
    _, generated, _ = registry.run_codegen(parted, "auto")
    compiled = generated["byoc_target_0"]
    assert compiled.backend == "onnxruntime" and "optimisation profile" in compiled.tried[0][1]
    model = onnx.translate(parted["byoc_target_0"], "byoc_target_0")
    dims = [d.dim_param or d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert dims == ["n", 3, "h", "w"]
    assert [d.dim_param for d in model.graph.output[0].type.tensor_type.shape.dim] == ["n * h * w * 8"]


def _prune_every_subgraph(name: str, ops: list) -> str:
    return "pruned by the test"


@pytest.mark.parametrize("prune", [stages.keep_all, _prune_every_subgraph], ids=["keep_all", "prune_all"])
@pytest.mark.parametrize("target", ["byoc-target", "tensorrt"])
def test_every_stage_has_the_types_tvm_infers(target, prune, conv_reshape):
    """The stages' own rewrites give new expressions the types of those they replace, so that
    Normalize has nothing to infer: with symbolic sizes (n, h, w) inside and outside If
    branches, those types must be what Normalize would infer. Every stage is well formed: each lifted
    subgraph defines the sizes its parameters name (n) itself, as a Relax function must, and a pruned
    one returns to its caller in the caller's sizes (its own, and its composites', are bound to them)."""
    for mod in (BatchedDemo, conv_reshape[1]):
        found = stages.run_stages(mod, rules.get_target(target).rules, prune)
        for s in found:
            assert tvm_ffi.structural_equal(relax.transform.Normalize()(s.mod), s.mod), s.name
            relax.analysis.well_formed(s.mod)  # raises: "Var n is defined in both function ..."
        partitioned, pruned = (s for s in found if s.name in ("partition", "prune"))
        assert partitioned.subgraphs, "nothing was partitioned"
        assert len(pruned.subgraphs) == (0 if prune is _prune_every_subgraph else len(partitioned.subgraphs))
