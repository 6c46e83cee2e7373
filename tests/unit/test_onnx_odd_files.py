"""ONNX files a careless user hands the importer (round 10's B6, B7, B8, B14): an input no tensor of numbers
NumPy and ONNX Runtime both know, a shape too small for the model's layers, external data at the wrong offset or
length. Each is one line that names the input, the shape or the data, before anything is built."""

import gc

import numpy as np
import onnx
import pytest
from messages import refused
from onnx import TensorProto, helper, numpy_helper

from byoc_workbench import cli
from byoc_workbench.session import Workbench


def _save(path, node, inputs, outputs, init=(), opset=17):
    model = helper.make_model(
        helper.make_graph([node], "g", inputs, outputs, list(init)), opset_imports=[helper.make_opsetid("", opset)]
    )
    model.ir_version = 9
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize(
    "dtype, opset, name",
    [(TensorProto.FLOAT8E4M3FN, 19, "float8_e4m3fn"), (TensorProto.BFLOAT16, 17, "bfloat16")],
)
def test_an_input_numpy_has_only_through_ml_dtypes_is_one_line_naming_it(tmp_path, dtype, opset, name):
    """ONNX Runtime has an Identity kernel for both; its Python API took neither array ("Numpy_type 260 can't be
    converted to MLDataType", a traceback from the reference's run)."""
    x, y = (helper.make_tensor_value_info(n, dtype, [1, 4]) for n in "xy")
    path = _save(tmp_path / "m.onnx", helper.make_node("Identity", ["x"], ["y"]), [x], [y], opset=opset)
    line = refused(lambda: Workbench.from_onnx(path))
    assert f"Input x is a tensor of {name}, and ONNX Runtime's Python API, the reference, takes no NumPy" in line
    assert "export the model with float32 inputs" in line


@pytest.mark.parametrize(
    "value, what",
    [
        (helper.make_tensor_sequence_value_info("x", TensorProto.FLOAT, [1, 4]), "a sequence"),
        (
            helper.make_value_info("x", helper.make_optional_type_proto(helper.make_tensor_type_proto(1, [4]))),
            "an optional",
        ),
        (
            helper.make_value_info(
                "x", helper.make_map_type_proto(TensorProto.INT64, helper.make_tensor_type_proto(1, []))
            ),
            "a map",
        ),
        (helper.make_tensor_value_info("x", TensorProto.UNDEFINED, [1, 4]), "a tensor of no element type"),
    ],
    ids=["sequence", "optional", "map", "no-element-type"],
)
def test_an_input_that_is_no_tensor_of_numbers_is_one_line_not_a_key_error(tmp_path, value, what):
    """Round 10: a sequence input ended in ``KeyError: 0`` (its tensor type's element type) in onnx_shapes."""
    y = helper.make_tensor_value_info("y", TensorProto.INT64, [])
    path = _save(tmp_path / "m.onnx", helper.make_node("SequenceLength", ["x"], ["y"]), [value], [y])
    line = refused(lambda: Workbench.from_onnx(path))
    assert f"Input x is {what}, and the workbench" in line and "each input a tensor of numbers" in line


def _conv(path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    return _save(path, helper.make_node("Conv", ["x", "w"], ["y"], name="conv0"), [x], [y], [w])


@pytest.mark.parametrize("size, gives", [(2, "float32[1, 4, 0, 0]"), (1, "float32[1, 4, -1, -1]")])
def test_a_shape_too_small_for_the_models_layers_is_one_line_naming_it(tmp_path, size, gives):
    """Round 10: a 3x3 Conv given 2x2 (or 1x1) was imported, and the run ended in TVM's "negative output shape"
    (or ONNX Runtime's InvalidArgument) traceback; 3x3 runs."""
    path = _conv(tmp_path / "conv.onnx")
    line = refused(lambda: Workbench.from_onnx(path, input_shapes=(1, 3, size, size)))
    assert f"The input shape x [1, 3, {size}, {size}] is too small for the model: its nn.conv2d" in line
    assert gives in line and "give a larger input shape" in line
    model = Workbench.from_onnx(path, input_shapes=(1, 3, 3, 3)).model
    assert model.reference(model.inputs)[0].shape == (1, 4, 1, 1)


def _external(folder, **info):
    """A model whose weight w (4 float32, 16 bytes) is kept in w.bin, its external data fields set to ``info``."""
    (folder / "w.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    w = numpy_helper.from_array(np.zeros((1, 4), np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for key, value in {"location": "w.bin", **info}.items():
        w.external_data.add(key=key, value=str(value))
    x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in "xy")
    return _save(folder / "m.onnx", helper.make_node("Add", ["x", "w"], ["y"]), [x], [y], [w])


@pytest.mark.parametrize(
    "info, bytes_read",
    [({"offset": 1000}, 0), ({"length": 4}, 4), ({"location": "m.onnx"}, None)],
    ids=["offset-past-the-end", "length-short", "the-model-itself"],
)
def test_external_data_at_a_wrong_offset_or_length_names_the_data_not_the_shapes(tmp_path, info, bytes_read):
    """Round 10: each was ONNX Runtime's "Deserialize tensor w failed" with the Fix "check the input shapes"."""
    path = _external(tmp_path, **info)
    line = refused(lambda: Workbench.from_onnx(path))
    location = info.get("location", "w.bin")
    assert f"keeps tensor w (shape [1, 4]) in {location}, but its offset and length there give" in line
    assert bytes_read is None or f"give {bytes_read} bytes" in line
    assert "input shapes" not in line and "save_as_external_data=True" in line


def test_external_data_of_the_right_size_loads(tmp_path):
    model = Workbench.from_onnx(_external(tmp_path, offset=0, length=16)).model
    assert np.array_equal(model.reference(model.inputs)[0], model.inputs[0] + np.arange(4, dtype=np.float32))


def _graph(path, nodes, inputs=("x",), shape=(1, 4)):
    """A float32 model of ``nodes`` from ``inputs`` to y, saved unchecked (onnx.checker refuses most of these)."""
    values = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(shape)) for n in [*inputs, "y"]]
    graph = helper.make_graph(nodes, "g", values[:-1], values[-1:])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 9
    onnx.save(model, str(path))
    return path


_THEN = helper.make_graph(
    [helper.make_node("Identity", ["x"], ["t"])], "then", [], [helper.make_tensor_value_info("t", 1, [1, 4])]
)
_MALFORMED = {
    "if-without-else": (
        [
            helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
            helper.make_node("Cast", ["s"], ["c"], to=TensorProto.BOOL),
            helper.make_node("If", ["c"], ["y"], then_branch=_THEN),
        ],
        "its If node: Required attribute 'else_branch' is missing",
    ),
    "type-mismatch": (
        [helper.make_node("Cast", ["x"], ["i"], to=TensorProto.INT64), helper.make_node("Add", ["x", "i"], ["y"])],
        "bound to different types (tensor(float) and tensor(int64)",
    ),
    "unknown-attribute": (
        [helper.make_node("Shape", ["x"], ["s"], bogus=3), helper.make_node("Reshape", ["x", "s"], ["y"])],
        "its Shape node: Unrecognized attribute: bogus",
    ),
    "cycle": (
        [helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Relu", ["a"], ["b"])]
        + [helper.make_node("Identity", ["a"], ["y"])],
        "the graph is not acyclic",
    ),
    "duplicate-output": (
        [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Sigmoid", ["x"], ["a"])]
        + [helper.make_node("Identity", ["a"], ["y"])],
        "Duplicate definition of name (a)",
    ),
}


@pytest.mark.parametrize("case", list(_MALFORMED))
def test_a_malformed_graph_is_named_malformed_not_a_matter_of_input_shapes(tmp_path, case):
    """Round 13 (B-N4): ONNX Runtime refused each for a reason of the graph's, and the Fix said "check the input
    shapes"."""
    nodes, reason = _MALFORMED[case]
    line = refused(lambda: Workbench.from_onnx(_graph(tmp_path / f"{case}.onnx", nodes)))
    assert f"cannot load {case}.onnx: the model is malformed: " in line and reason in line
    assert "input shapes" not in line and "run onnx.checker.check_model(model, full_check=True)" in line
    assert "(here it says: " in line  # the checker's own words: it finds each of these


def test_a_malformed_graph_the_checker_passes_is_not_sent_to_the_checker(tmp_path):
    """Round 14 (F10): the Fix said to run onnx.checker, "it names what is wrong"; it passes this file."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="n"), helper.make_node("Sigmoid", ["a"], ["y"], name="n")]
    line = refused(lambda: Workbench.from_onnx(_graph(tmp_path / "m.onnx", nodes)))
    assert "the model is malformed: two nodes with same node name (n)" in line
    assert "run onnx.checker" not in line and "onnx.checker passes this file" in line


def _functions(path, op, functions):
    """A model of one node ``op`` of domain local, from x to y, and the local ``functions`` (name: their node)."""
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]
    defined = [helper.make_function("local", f, ["a"], ["b"], [node], opsets) for f, node in functions.items()]
    x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in "xy")
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"], domain="local")], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=opsets, functions=defined)
    model.ir_version = 9
    onnx.save(model, str(path))
    return path


def test_an_op_of_a_declared_domain_nobody_knows_names_the_op_and_domain_not_the_checker(tmp_path):
    """Round 14 (F10): com.acme's Relu (com.acme declared in opset_import) was "malformed ... run onnx.checker",
    and the checker passes the file."""
    path = _graph(tmp_path / "m.onnx", [helper.make_node("Relu", ["x"], ["y"], domain="local")])
    line = refused(lambda: Workbench.from_onnx(path))
    assert "m.onnx's op Relu of domain 'local' is one neither ONNX Runtime nor the workbench knows" in line
    assert "nor a function the file defines" in line and "standard ONNX ops in place of Relu" in line
    assert "checker" not in line and "malformed" not in line


def test_a_call_to_a_function_the_file_does_not_define_names_the_function(tmp_path):
    path = _functions(tmp_path / "m.onnx", "F", {"G": helper.make_node("Relu", ["a"], ["b"])})
    line = refused(lambda: Workbench.from_onnx(path))
    assert "m.onnx calls function F of domain 'local', which the file does not define (it defines G)" in line
    assert "with the function F defined in it, or inlined" in line and "checker" not in line


def test_a_recursive_function_is_one_line_without_onnx_runtimes_source_location(tmp_path):
    """Round 14 (F10): the line quoted ORT's "/onnxruntime_src/...model.cc:340 onnxruntime::Model::Model(...)"; the
    checker, which the Fix named, crashes on this file (a segmentation fault)."""
    path = _functions(tmp_path / "m.onnx", "F", {"F": helper.make_node("F", ["a"], ["b"], domain="local")})
    line = refused(lambda: Workbench.from_onnx(path), "local functions call themselves (local:F -> local:F)")
    assert "onnxruntime_src" not in line and "onnxruntime::" not in line and "ONNXRuntimeError" not in line


def test_a_model_with_no_opset_for_the_default_domain_says_so(tmp_path):
    """Round 14 (F11): an empty opset_import was said to "use ONNX opset 1"."""
    path = _graph(tmp_path / "m.onnx", [helper.make_node("Relu", ["x"], ["y"])])
    model = onnx.load(str(path))
    del model.opset_import[:]
    onnx.save(model, str(path))
    line = refused(lambda: Workbench.from_onnx(path), "declares no opset for the default ONNX domain")
    assert "opset 1" not in line and "set opset_import" in line


def test_a_node_tvm_cannot_convert_is_the_only_line_on_stderr(tmp_path, capfd):
    """Round 14 (F11): after the line, TVM warned "BlockBuilder destroyed with remaining blocks!" on stderr."""
    w = numpy_helper.from_array(np.ones((4, 5, 3, 3), np.float32), "w")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    path = _save(tmp_path / "conv.onnx", helper.make_node("Conv", ["x", "w"], ["y"]), [x], [y], [w])
    assert cli.main(["run", str(path)]) == 2
    gc.collect()  # the builder goes here at the latest
    err = capfd.readouterr().err
    assert err.startswith("error: TVM's ONNX frontend cannot convert node 'y' (Conv)") and err.count("\n") == 1


def test_shapes_that_do_not_fit_the_model_still_say_check_the_input_shapes(tmp_path):
    w = numpy_helper.from_array(np.ones((3,), np.float32), "w")
    x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", "C"]) for n in "xy")
    path = _save(tmp_path / "add.onnx", helper.make_node("Add", ["x", "w"], ["y"]), [x], [y], [w])
    line = refused(lambda: Workbench.from_onnx(path, input_shapes=(1, 4)), "[ShapeInferenceError]")
    assert "with inputs {'x': [1, 4]}" in line and "Fix: check the input shapes" in line
