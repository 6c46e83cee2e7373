"""The ONNX translator against TVM: every rule of upstream's TensorRT table, offloaded and run.

For each rule a tiny Relax function that the rule's pattern matches goes
through the workbench's stages with that one rule, each subgraph is
translated to ONNX and run by ONNX Runtime, and by OpenVINO at f32, and the
result is compared with TVM alone.
"""

import importlib.util

import numpy as np
import pytest
from tvm import relax

from byoc_workbench import stages
from byoc_workbench.core import ir
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.flow import rules
from byoc_workbench.measure.compiler import execute

pytest.importorskip("onnxruntime", reason="the ONNX backends need onnx and onnxruntime")
from byoc_workbench.backends import onnx as bo  # noqa: E402
from byoc_workbench.backends import registry  # noqa: E402

op = relax.op
POSITIVE = (0.5, 2.0)  # for log, sqrt and power


def _unary(fn, shape=(2, 3, 4, 5), low_high=(-2.0, 2.0)):
    return (fn, [shape], low_high)


def _binary(fn):
    # The second operand broadcasts, as elementwise ops in real graphs do.
    return (fn, [(2, 3, 4, 5), (3, 1, 5)], POSITIVE)


# rule name -> (build the call from the parameters, parameter shapes, input range)
CASES = {
    "nn.relu": _unary(op.nn.relu),
    "sigmoid": _unary(op.sigmoid),
    "nn.silu": _unary(op.nn.silu),
    "tanh": _unary(op.tanh),
    "exp": _unary(op.exp),
    "log": _unary(op.log, low_high=POSITIVE),
    "sqrt": _unary(op.sqrt, low_high=POSITIVE),
    "abs": _unary(op.abs),
    "negative": _unary(op.negative),
    "sin": _unary(op.sin),
    "cos": _unary(op.cos),
    "atan": _unary(op.atan),
    "ceil": _unary(op.ceil),
    "floor": _unary(op.floor),
    "erf": _unary(op.erf),
    "nn.softmax": _unary(lambda x: op.nn.softmax(x, axis=1)),
    "nn.batch_flatten": _unary(op.nn.batch_flatten),
    "expand_dims": _unary(lambda x: op.expand_dims(x, axis=[1, -1])),
    "squeeze": _unary(lambda x: op.squeeze(x, axis=[1]), shape=(2, 1, 4, 1)),
    "transpose": _unary(lambda x: op.permute_dims(x, axes=[0, 2, 3, 1])),
    "layout_transform": _unary(lambda x: op.layout_transform(x, lambda n, c, h, w: (n, h, w, c))),
    "nn.max_pool2d": _unary(
        lambda x: op.nn.max_pool2d(x, pool_size=3, strides=2, padding=(1, 0, 1, 1)), shape=(1, 3, 8, 7)
    ),
    "nn.avg_pool2d": _unary(lambda x: op.nn.avg_pool2d(x, pool_size=2, strides=2, padding=1), shape=(1, 3, 8, 8)),
    "nn.max_pool3d": _unary(lambda x: op.nn.max_pool3d(x, pool_size=2, strides=2), shape=(1, 2, 4, 6, 6)),
    "nn.avg_pool3d": _unary(
        lambda x: op.nn.avg_pool3d(x, pool_size=3, strides=1, padding=1, count_include_pad=True),
        shape=(1, 2, 4, 5, 5),
    ),
    "nn.adaptive_avg_pool2d": _unary(lambda x: op.nn.adaptive_avg_pool2d(x, (2, 4)), shape=(1, 3, 8, 8)),
    "sum": _unary(lambda x: op.sum(x, axis=[1, 3])),
    "prod": _unary(lambda x: op.prod(x, axis=[2], keepdims=True)),
    "max": _unary(lambda x: op.max(x)),
    "min": _unary(lambda x: op.min(x, axis=[-1])),
    "mean": _unary(lambda x: op.mean(x, axis=[2, 3], keepdims=True)),
    "concatenate": ((lambda x, y: op.concat([x, y], axis=1)), [(2, 3, 4), (2, 5, 4)], (-1.0, 1.0)),
    "split": _unary(lambda x: op.split(x, [1, 3], axis=2), shape=(2, 3, 5, 4)),
    "add": _binary(op.add),
    "subtract": _binary(op.subtract),
    "multiply": _binary(op.multiply),
    "divide": _binary(op.divide),
    "power": _binary(op.power),
    "maximum": _binary(op.maximum),
    "minimum": _binary(op.minimum),
    "image.resize2d": _unary(lambda x: op.image.resize2d(x, (7, 10)), shape=(1, 3, 4, 5)),
    "nn.conv1d": ((lambda x, w: op.nn.conv1d(x, w, strides=2, padding=1)), [(1, 4, 10), (6, 4, 3)], (-1.0, 1.0)),
    "nn.conv2d": (
        (lambda x, w: op.nn.conv2d(x, w, padding=(1, 0, 2, 1), dilation=2, groups=2)),
        [(1, 4, 9, 8), (6, 2, 3, 3)],
        (-1.0, 1.0),
    ),
    "nn.conv3d": ((lambda x, w: op.nn.conv3d(x, w, padding=1)), [(1, 2, 5, 5, 5), (4, 2, 3, 3, 3)], (-1.0, 1.0)),
    "nn.conv2d_transpose": (
        (lambda x, w: op.nn.conv2d_transpose(x, w, strides=2, padding=1, output_padding=1)),
        [(1, 4, 5, 5), (4, 3, 3, 3)],
        (-1.0, 1.0),
    ),
    "nn.conv3d_transpose": (
        (lambda x, w: op.nn.conv3d_transpose(x, w, strides=2)),
        [(1, 2, 3, 3, 3), (2, 3, 2, 2, 2)],
        (-1.0, 1.0),
    ),
    "nn.batch_matmul": (op.matmul, [(2, 3, 4), (2, 4, 5)], (-1.0, 1.0)),
    "reshape": _unary(lambda x: op.reshape(x, (6, -1))),
    "nn.layer_norm": ((lambda x, g, b: op.nn.layer_norm(x, g, b, axes=[-2, -1])), [(2, 3, 4), (3, 4), (3, 4)], (-2, 2)),
    "clip": _unary(lambda x: op.clip(x, -0.5, 0.75)),
    "strided_slice": _unary(lambda x: op.strided_slice(x, axes=[1, 3], begin=[1, -4], end=[3, 100])),
    "strided_slice_2": _unary(
        lambda x: op.strided_slice(x, axes=[2, 3], begin=[3, 0], end=[0, 5], strides=[-1, 2]), shape=(2, 3, 5, 6)
    ),
}
# Extra variants of ops whose attributes change the ONNX they become.
VARIANTS = {
    "image.resize2d nearest": (
        "image.resize2d",
        _unary(
            lambda x: op.image.resize2d(
                x,
                (8, 3),
                method="nearest_neighbor",
                coordinate_transformation_mode="asymmetric",
                rounding_method="floor",
            ),
            shape=(1, 2, 4, 5),
        ),
    ),
    "image.resize2d cubic align_corners": (
        "image.resize2d",
        _unary(
            lambda x: op.image.resize2d(x, (6, 9), method="cubic", coordinate_transformation_mode="align_corners"),
            shape=(1, 2, 4, 5),
        ),
    ),
    "split sections": ("split", _unary(lambda x: op.split(x, 3, axis=1), shape=(2, 6, 2))),
    "reduce everything": ("sum", _unary(lambda x: op.sum(x, keepdims=True))),
    "squeeze all": ("squeeze", _unary(op.squeeze, shape=(1, 3, 1, 2))),
    "global pool": ("nn.adaptive_avg_pool2d", _unary(lambda x: op.nn.adaptive_avg_pool2d(x, 1), shape=(1, 3, 5, 7))),
}


def module(make, shapes):
    bb = relax.BlockBuilder()
    params = [relax.Var(f"x{i}", relax.TensorType(s, "float32")) for i, s in enumerate(shapes)]
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(make(*params))
        bb.emit_func_output(out)
    return bb.get()


def inputs(shapes, low_high, seed=0):
    rng = np.random.RandomState(seed)
    return [rng.uniform(*low_high, s).astype("float32") for s in shapes]


def flat(x):
    return [np.asarray(a) for a in x] if isinstance(x, list) else [np.asarray(x)]


TRT_RULES = {r.name: r for r in rules.tensorrt_rules()}


HAS_OPENVINO = importlib.util.find_spec("openvino") is not None
NEEDS_OPENVINO = pytest.mark.skipif(not HAS_OPENVINO, reason="openvino is not installed (pip install openvino)")
# backend -> (options, tolerance): OpenVINO at f32 sums in another order than TVM (1e-4, as the issue allows).
BACKENDS = {"onnxruntime": ({}, 1e-5), "openvino": ({"precision": "f32"}, 1e-4)}


def offload_and_compare(rule_name, case, backend="onnxruntime"):
    make, shapes, low_high = case
    mod = module(make, shapes)
    st = stages.run_stages(mod, [TRT_RULES[rule_name]], stages.keep_all)
    partitioned = st[-2].mod
    subgraphs = [s.name for s in st[-2].subgraphs]
    assert subgraphs, f"rule {rule_name} matched nothing"
    for name in subgraphs:  # each subgraph is a valid ONNX model that ONNX Runtime loads
        bo._onnx().checker.check_model(bo.translate(partitioned[name], name))
    options, tol = BACKENDS[backend]
    offloaded, generated, skipped = registry.run_codegen(partitioned, backend, **options)
    assert sorted(generated) == subgraphs and not skipped
    assert all(g.backend == backend for g in generated.values())
    x = inputs(shapes, low_high)
    expected, got = flat(execute.run(mod, x)), flat(execute.run(offloaded, x))
    assert len(expected) == len(got)
    for e, g in zip(expected, got):
        assert e.shape == g.shape and e.dtype == g.dtype
        np.testing.assert_allclose(g, e, rtol=tol, atol=tol)


def test_the_cases_cover_the_whole_tensorrt_table():
    assert set(CASES) == set(TRT_RULES)
    assert len(TRT_RULES) == 52


def test_every_op_of_both_tables_has_a_converter():
    ops = set()
    for r in rules.tensorrt_rules() + rules.byoc_target_rules():
        ops |= set(r.ops)
    assert ops and ops <= bo.SUPPORTED_OPS, sorted(ops - bo.SUPPORTED_OPS)


@pytest.mark.parametrize("rule_name", sorted(CASES))
def test_tensorrt_rule_offloaded_to_onnxruntime_equals_tvm(rule_name):
    offload_and_compare(rule_name, CASES[rule_name])


@NEEDS_OPENVINO
@pytest.mark.parametrize("rule_name", sorted(CASES))
def test_tensorrt_rule_offloaded_to_openvino_at_f32_equals_tvm(rule_name):
    offload_and_compare(rule_name, CASES[rule_name], "openvino")


@pytest.mark.parametrize("backend", ["onnxruntime", pytest.param("openvino", marks=NEEDS_OPENVINO)])
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_attribute_variants_equal_tvm(variant, backend):
    rule_name, case = VARIANTS[variant]
    offload_and_compare(rule_name, case, backend)


def test_unconvertible_ops_are_all_named_in_one_line():
    x = relax.Var("x", relax.TensorType((1, 4, 8, 8), "float32"))
    w = relax.Var("w", relax.TensorType((8, 3, 3, 4), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("f", [x, w]):
        with bb.dataflow():
            a = bb.emit(op.cumsum(x, axis=1))
            b = bb.emit(op.nn.conv2d(a, w, data_layout="NCHW", kernel_layout="OHWI"))
            c = bb.emit_output(op.layout_transform(b, lambda n, c, h, w: (n, c // 2, h, w, c % 2)))
        bb.emit_func_output(c)
    with pytest.raises(WorkbenchError) as err:
        bo.translate(bb.get()["f"], "f")
    message = str(err.value)
    assert "\n" not in message
    for part in ("relax.cumsum (no converter)", "kernel_layout=OHWI", "relax.layout_transform", "Fix:"):
        assert part in message


def test_a_guarded_rule_leaves_what_it_cannot_convert_on_the_host():
    conv = TRT_RULES["nn.conv2d"]
    mod = module(
        lambda x, w: op.nn.conv2d(x, w, data_layout="NHWC", kernel_layout="OHWI"), [(1, 6, 6, 4), (8, 3, 3, 4)]
    )
    assert stages.run_stages(mod, [conv], stages.keep_all)[-2].subgraphs, "upstream's check takes NHWC"
    guarded = bo.guard_rules([conv])
    assert not stages.run_stages(mod, guarded, stages.keep_all)[-2].subgraphs


def test_constants_become_initializers_and_fp16_lives_in_the_graph():
    ort = pytest.importorskip("onnxruntime")
    w = np.random.RandomState(1).uniform(-1, 1, (6, 4, 3, 3)).astype("float32")
    mod = module(lambda x: op.nn.relu(op.nn.conv2d(x, relax.const(w), padding=1)), [(1, 4, 8, 8)])
    st = stages.run_stages(mod, [TRT_RULES["nn.conv2d"], TRT_RULES["nn.relu"]], stages.keep_all)
    func = st[-2].mod["tensorrt_0"]
    x = inputs([(1, 4, 8, 8)], (-1, 1))
    expected = flat(execute.run(mod, x))[0]
    for fp16, tol in ((False, 1e-5), (True, 2e-2)):
        model = bo.translate(func, "tensorrt_0", fp16=fp16)
        (weight,) = model.graph.initializer
        assert weight.data_type == (10 if fp16 else 1) and list(weight.dims) == [6, 4, 3, 3]
        assert model.graph.input[0].type.tensor_type.elem_type == 1, "inputs stay float32"
        assert ("Cast" in {n.op_type for n in model.graph.node}) == fp16
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        got = sess.run(None, {sess.get_inputs()[0].name: x[0]})[0]
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)


# --- the ONNX runtimes' own targets: every op the translator converts, claimed call by call ----------

# Ops no TensorRT rule claims, but the ONNX runtimes take (the SSD's box arithmetic and masks among them).
OWN_CASES = {
    "relax.equal": (lambda x, y: op.where(op.equal(op.floor(x), op.floor(y)), x, y), [(2, 3, 4), (3, 4)], (-2, 2)),
    "relax.not_equal": (
        lambda x, y: op.where(op.not_equal(op.floor(x), op.floor(y)), x, y),
        [(2, 3, 4), (3, 4)],
        (-2, 2),
    ),
    "relax.greater": (lambda x, y: op.where(op.greater(x, y), x, y), [(2, 3, 4), (3, 4)], (-1, 1)),
    "relax.greater_equal": (lambda x, y: op.where(op.greater_equal(x, y), y, x), [(2, 3, 4), (3, 4)], (-1, 1)),
    "relax.less": (lambda x, y: op.where(op.less(x, y), x, y), [(2, 3, 4), (3, 4)], (-1, 1)),
    "relax.less_equal": (lambda x, y: op.where(op.less_equal(x, y), y, x), [(2, 3, 4), (3, 4)], (-1, 1)),
    "relax.where": (lambda c, x, y: op.where(op.greater(c, x), x, y), [(3, 4), (2, 3, 4), (4,)], (-1, 1)),
    "relax.astype": _unary(lambda x: op.astype(op.astype(op.multiply(x, x), "int32"), "float32"), low_high=(-4, 4)),
    "relax.zeros_like": _unary(lambda x: op.add(op.zeros_like(x), x)),
    "relax.ones_like": _unary(lambda x: op.multiply(op.ones_like(x), x)),
    "relax.arange": _unary(lambda x: op.add(x, op.arange(0.0, 2.5, 0.5, "float32")), shape=(2, 5)),
}


def own_cases() -> dict:
    """relax op -> case, for every op the translator converts: the TensorRT cases by their op, then the rest."""
    by_op = {}
    for name, case in sorted(CASES.items()):
        by_op.setdefault(TRT_RULES[name].ops[-1], case)
    by_op.update(OWN_CASES)
    by_op.setdefault("relax.permute_dims", CASES["transpose"])
    by_op.setdefault("relax.matmul", CASES["nn.batch_matmul"])
    by_op.setdefault("relax.concat", CASES["concatenate"])
    return by_op


def test_the_own_cases_cover_every_op_the_translator_converts():
    assert set(own_cases()) >= bo.SUPPORTED_OPS, sorted(bo.SUPPORTED_OPS - set(own_cases()))


@pytest.mark.parametrize("backend", ["onnxruntime", pytest.param("openvino", marks=NEEDS_OPENVINO)])
def test_an_own_target_converts_and_runs_every_op_it_claims(backend):
    """One module holding a case of every op: the backend's own target claims every call, its subgraphs
    become ONNX that the backend runs, and each case's output equals TVM alone's."""
    target = rules.get_target(backend)
    assert {op for r in target.rules for op in r.ops} == bo.SUPPORTED_OPS
    cases = own_cases()
    shapes = [s for make, ss, _ in cases.values() for s in ss]
    params = [relax.Var(f"x{i}", relax.TensorType(s, "float32")) for i, s in enumerate(shapes)]
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            outs, k = [], 0
            for make, ss, _ in cases.values():
                outs.append(bb.emit(make(*params[k : k + len(ss)])))
                k += len(ss)
            out = bb.emit_output(relax.Tuple(outs))
        bb.emit_func_output(out)
    mod = bb.get()
    st = stages.run_stages(mod, target.rules, stages.keep_all, backend=backend)
    part, codegen = st[-3].mod, st[-1]
    host_ops = [s.op for f in ir.host_functions(part) for s in ir.walk(part[f], part, descend=False) if s.op]
    assert not host_ops, host_ops  # the target claimed every call
    assert codegen.subgraphs and not [n for n in codegen.notes if "not compiled" in n], codegen.notes
    x = [a for (_, ss, lh), seed in zip(cases.values(), range(len(cases))) for a in inputs(ss, lh, seed)]
    expected, got = execute.run(mod, x), execute.run(codegen.mod, x)
    tol = BACKENDS[backend][1]
    assert len(expected) == len(got) == len(cases)
    for name, e, g in zip(cases, expected, got):
        for want, have in zip(flat(e), flat(g), strict=True):  # split gives a tuple
            assert want.shape == have.shape and want.dtype == have.dtype, name
            np.testing.assert_allclose(have, want, rtol=tol, atol=tol, err_msg=name)


def _counter(demo_mod, byoc):
    """The demo unpruned's subgraph of 0-d tensors: its loop counter's add."""
    found = stages.run_stages(demo_mod, byoc.rules, stages.keep_all, backend="onnxruntime")
    mod = found[-2].mod  # prune: the subgraphs as functions
    [func] = [mod[n] for n in ir.subgraph_functions(mod) if mod[n].params[0].ty.ndim == 0]
    return func


def test_a_0d_result_copied_through_the_host_stays_0d(demo_mod, byoc):
    """A GPU build with a CPU-only ONNX Runtime copies through the host, as OpenVINO always does: a 0-d
    result copies back into its 0-d tensor (np.ascontiguousarray made it 1-d, which TVM refused)."""
    import tvm

    from byoc_workbench.backends import onnxruntime as ort_backend

    model = bo.translate(_counter(demo_mod, byoc), "counter")
    runner = ort_backend.Runner(ort_backend.make_session(model.SerializeToString(), "counter"))
    i, out = tvm.runtime.tensor(np.array(3, "int32")), tvm.runtime.tensor(np.array(0, "int32"))
    runner._through_host([i], [out])
    assert out.shape == () and int(out.numpy()) == 4
