"""ONNX files and shapes a careless user hands the importer (round 11's R5, R11, R16 and an --input-shape with an
underscore): an output ONNX Runtime's Python API cannot give, a complex tensor, a sparse weight, a tensor of 4-bit
elements, a shape keyed by position, a size Python's int() reads but no user writes. Each is one line at import
(or at the command line) that names the output, the type, the weight or the size, before anything is built."""

import numpy as np
import onnx
import pytest
from messages import one_line, refused
from onnx import TensorProto, helper, numpy_helper

from byoc_workbench import cli
from byoc_workbench.session import Workbench


def _save(path, nodes, x_type=TensorProto.FLOAT, y_type=TensorProto.FLOAT, dims=(1, 4), **graph):
    x, y = helper.make_tensor_value_info("x", x_type, dims), helper.make_tensor_value_info("y", y_type, dims)
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x], [y], **graph), opset_imports=[helper.make_opsetid("", 21)]
    )
    model.ir_version = 10
    onnx.save(model, str(path))
    return path


def _cast(path, to, x_type=TensorProto.FLOAT):
    """``y = Cast(x, to)``: an output of type ``to``."""
    return _save(path, [helper.make_node("Cast", ["x"], ["y"], to=to)], x_type=x_type, y_type=to)


@pytest.mark.parametrize(
    "to, name",
    [
        (TensorProto.BFLOAT16, "bfloat16"),
        (TensorProto.FLOAT8E5M2, "float8_e5m2"),
        (TensorProto.FLOAT8E4M3FNUZ, "float8_e4m3fnuz"),
        (TensorProto.FLOAT8E5M2FNUZ, "float8_e5m2fnuz"),
        (TensorProto.UINT4, "uint4"),
        (TensorProto.INT4, "int4"),
    ],
)
def test_an_output_numpy_has_only_through_ml_dtypes_is_one_line_naming_it(tmp_path, to, name):
    """R5: the import took them, and the run ended in ONNX Runtime's "No corresponding Numpy type for Tensor Type"
    (bfloat16, float8) or TVM's "Check failed: dtype.bits % 8 == 0" (4-bit), tracebacks."""
    line = refused(lambda: Workbench.from_onnx(_cast(tmp_path / "m.onnx", to)))
    assert f"Output y is a tensor of {name}, and ONNX Runtime's Python API, the reference, gives no NumPy" in line
    assert "cast y to float32 inside the model" in line


@pytest.mark.parametrize("side", ["Input", "Output"])
@pytest.mark.parametrize(
    "complex_type, name", [(TensorProto.COMPLEX64, "complex64"), (TensorProto.COMPLEX128, "complex128")]
)
def test_a_complex_input_or_output_is_refused_for_its_type_not_its_shape(tmp_path, side, complex_type, name):
    """R16: ONNX Runtime refused the file, and the Fix said "check the input shapes"."""
    x_type = complex_type if side == "Input" else TensorProto.FLOAT
    y_type = TensorProto.FLOAT if side == "Input" else complex_type
    path = _save(tmp_path / "m.onnx", [helper.make_node("Cast", ["x"], ["y"], to=y_type)], x_type, y_type)
    line = refused(lambda: Workbench.from_onnx(path))
    assert f"{side} {'x' if side == 'Input' else 'y'} is a tensor of {name}" in line and "complex tensors" in line
    assert f"float32 {side.lower()}s" in line and "real and imaginary parts" in line and "shape" not in line


def test_a_string_output_is_one_line_naming_the_output(tmp_path):
    """It was TVM's "unknown dtype `object`" for the Cast node, with the Fix "check that node's inputs"."""
    line = refused(lambda: Workbench.from_onnx(_cast(tmp_path / "m.onnx", TensorProto.STRING)))
    assert "Output y is a tensor of strings, and TVM has no string tensors" in line and "numeric outputs" in line


def test_a_sparse_initializer_is_one_line_naming_the_weight(tmp_path):
    """R5: TVM's frontend reads no sparse initializer, and the Add that used it ended in ``KeyError: 'w'``."""
    values, indices = numpy_helper.from_array(np.ones(1, "float32"), "w"), numpy_helper.from_array(np.array([2]), "i")
    sparse = helper.make_sparse_tensor(values, indices, [1, 4])
    path = _save(tmp_path / "m.onnx", [helper.make_node("Add", ["x", "w"], ["y"])], sparse_initializer=[sparse])
    line = refused(lambda: Workbench.from_onnx(path))
    assert "keeps its weight w as a sparse initializer, which TVM's ONNX frontend does not read" in line
    assert "weights dense" in line


def test_a_tensor_of_4_bit_elements_inside_the_model_is_one_line_naming_it(tmp_path):
    """A cast to uint4 and back, or an int4 weight, ended in TVM's "Check failed: dtype.bits % 8 == 0" (the VM's
    allocation) or "TensorCopyFromBytes: size mismatch" (the weight), tracebacks."""
    cast = [helper.make_node("Cast", ["x"], ["m"], to=TensorProto.UINT4), helper.make_node("Cast", ["m"], ["y"], to=1)]
    line = refused(lambda: Workbench.from_onnx(_save(tmp_path / "cast.onnx", cast)))
    assert "makes m, a tensor of uint4, and TVM holds no tensor of elements under a byte" in line
    assert "int8/uint8" in line
    weight = helper.make_tensor("w", TensorProto.INT4, [1, 4], [1, 2, 3, -4])
    scale = numpy_helper.from_array(np.array(0.5, "float32"), "s")
    nodes = [helper.make_node("DequantizeLinear", ["w", "s"], ["d"]), helper.make_node("Add", ["x", "d"], ["y"])]
    path = _save(tmp_path / "weight.onnx", nodes, initializer=[weight, scale])
    assert "makes w, a tensor of int4" in refused(lambda: Workbench.from_onnx(path))


@pytest.mark.parametrize("key", [0, None, b"x"])
def test_a_shape_keyed_by_no_name_is_one_line(tmp_path, key):
    """R11: ``input_shapes={0: shape}`` reached a str.join (TypeError) in onnx_shapes."""
    path = _save(tmp_path / "m.onnx", [helper.make_node("Relu", ["x"], ["y"])])
    line = refused(lambda: Workbench.from_onnx(path, input_shapes={key: (1, 4)}))
    assert f"keyed by {key!r} ({type(key).__name__}), not by an input's name" in line and "one of: x" in line


@pytest.mark.parametrize("size", ["8_0", "+8", "\u0668", ""])
def test_an_input_shape_size_in_anything_but_plain_digits_is_refused(tmp_path, capsys, size):
    """``--input-shape 1,3,8_0,8`` ran at H=80: Python's int() reads underscores, signs and other scripts' digits."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(tmp_path / "m.onnx"))
    assert cli.main(["run", str(tmp_path / "m.onnx"), "--input-shape", f"1,3,{size},8"]) == 2
    line = one_line(capsys.readouterr().err.strip())
    assert f"'1,3,{size},8' is not a shape" in line and "plain digits" in line


def _uint4_round_trip(x, y):
    return [helper.make_node("Cast", [x], ["q"], to=TensorProto.UINT4), helper.make_node("Cast", ["q"], [y], to=1)]


def _sparse_w():
    values, indices = numpy_helper.from_array(np.ones(1, "float32"), "w"), numpy_helper.from_array(np.array([1]), "i")
    return helper.make_sparse_tensor(values, indices, [4])


def _if(then_nodes, **then_graph):
    """``y = If(sum(x) > 0, then: then_nodes giving t, else: relu(x))``."""

    def branch(nodes, out, **graph):
        return helper.make_graph(nodes, "b", [], [helper.make_tensor_value_info(out, 1, [1, 4])], **graph)

    zero = helper.make_node("Constant", [], ["zero"], value=numpy_helper.from_array(np.array(0, "float32")))
    cond = [
        zero,
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["c"]),
    ]
    then, other = branch(then_nodes, "t", **then_graph), branch([helper.make_node("Relu", ["x"], ["e"])], "e")
    return cond + [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)]


def _in_function(path):
    """``y = Q(x)``, Q a model-local function that casts to uint4 and back."""
    q = helper.make_function("local", "Q", ["a"], ["b"], _uint4_round_trip("a", "b"), [helper.make_opsetid("", 21)])
    graph = helper.make_graph([helper.make_node("Q", ["x"], ["y"], domain="local")], "g", *_xy())
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("local", 1)]
    model = helper.make_model(graph, opset_imports=opsets, functions=[q])
    model.ir_version = 10
    onnx.save(model, str(path))
    return path


def _xy():
    return [helper.make_tensor_value_info("x", 1, [1, 4])], [helper.make_tensor_value_info("y", 1, [1, 4])]


@pytest.mark.parametrize(
    "make, says",
    [
        (
            lambda p: _save(p, _if(_uint4_round_trip("x", "t"))),
            "makes q in the then-branch of If node 'y', a tensor of uint4",
        ),
        (_in_function, "makes q in local function Q, a tensor of uint4"),
        (
            lambda p: _save(p, _if([helper.make_node("Add", ["x", "w"], ["t"])], sparse_initializer=[_sparse_w()])),
            "keeps its weight w as a sparse initializer in the then-branch of If node 'y', which TVM's ONNX frontend",
        ),
        (
            lambda p: _save(
                p,
                [
                    helper.make_node("Constant", [], ["k"], sparse_value=_sparse_w()),
                    helper.make_node("Add", ["x", "k"], ["y"]),
                ],
            ),
            "keeps its constant k as a Constant's sparse_value, which TVM's ONNX frontend does not read",
        ),
    ],
    ids=["if_uint4", "func_uint4", "if_sparse", "const_sparse"],
)
def test_4_bit_and_sparse_tensors_in_any_graph_are_the_top_level_line_saying_where(tmp_path, capsys, make, says):
    """S9, S10: check_onnx_model read the main graph alone: a uint4 cast in an If's branch or a local function ended
    in TVM's "Check failed: dtype.bits % 8 == 0", a sparse Constant in ``KeyError: 'k'``, and a sparse weight in a
    branch was blamed on its Add node ("Found null pointer node")."""
    path = make(tmp_path / "m.onnx")
    line = refused(lambda: Workbench.from_onnx(path), says)
    assert "int8/uint8" in line if "uint4" in says else "weights dense" in line
    assert cli.main(["run", str(path)]) == 2
    assert one_line(capsys.readouterr().err.strip()) == line


def _typed(path, nodes, y_type):
    """``nodes`` giving y, declared ``y_type`` (a TypeProto)."""
    graph = helper.make_graph(nodes, "g", _xy()[0], [helper.make_value_info("y", y_type)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    onnx.save(model, str(path))
    return path


_BF16 = helper.make_tensor_type_proto(TensorProto.BFLOAT16, [1, 4])
_TO_BF16 = helper.make_node("Cast", ["x"], ["b"], to=TensorProto.BFLOAT16)


@pytest.mark.parametrize(
    "nodes, y_type, says",
    [
        (
            [_TO_BF16, helper.make_node("SequenceConstruct", ["b"], ["y"])],
            helper.make_sequence_type_proto(_BF16),
            ("SequenceConstruct is given b, a tensor(bfloat16)", "export the model in float32"),
        ),
        (
            [_TO_BF16, helper.make_node("Optional", ["b"], ["y"])],
            helper.make_optional_type_proto(_BF16),
            ("Optional is given b, a tensor(bfloat16)", "export the model in float32"),
        ),
        (
            [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.BFLOAT16)],
            helper.make_tensor_type_proto(TensorProto.FLOAT, [1, 4]),
            ("declares y a tensor(float), and the node that makes it gives a tensor(bfloat16)", "cast y to the type"),
        ),
        (
            [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.BFLOAT16)],
            helper.make_tensor_type_proto(0, None),
            ("Output y is a tensor of no element type", "declare y's element type"),
        ),
    ],
    ids=["sequence", "optional", "mismatch", "untyped"],
)
def test_a_model_onnx_runtime_refuses_for_its_types_is_not_told_to_check_its_shapes(tmp_path, nodes, y_type, says):
    """S11: ONNX Runtime refused each for a type, and the Fix said "check the input shapes"."""
    line = refused(lambda: Workbench.from_onnx(_typed(tmp_path / "m.onnx", nodes, y_type)), *says)
    assert "input shape" not in line


def test_an_output_declared_with_no_type_is_checked_as_inference_types_it(tmp_path):
    """A bare ValueInfoProto output computed as bfloat16 passed every check; the run was ONNX Runtime's
    'No corresponding Numpy type' traceback."""
    path = tmp_path / "m.onnx"
    graph = helper.make_graph([_TO_BF16, helper.make_node("Identity", ["b"], ["y"])], "g", _xy()[0], [])
    graph.output.add().name = "y"  # no type at all
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    onnx.save(model, str(path))
    refused(lambda: Workbench.from_onnx(path), "Output y is a tensor of bfloat16", "cast y to float32 inside the model")
