"""What a careless user hands the ONNX and PyTorch importers: each is taken as meant, or refused in one line
that names the cause (a dtype, an op, a size) and a fix that fits the model at hand."""

import json
import os

import numpy as np
import onnx
import pytest
from messages import refused
from onnx import TensorProto, helper, numpy_helper

from byoc_workbench.frontends import onnx_import
from byoc_workbench.measure.compiler import execute
from byoc_workbench.session import Workbench

torch = pytest.importorskip("torch", reason="needs the [pytorch] extra: pip install -e .[pytorch]")


def _onnx(path, node, dtype, dims, init=()):
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", dtype, dims)],
        [helper.make_tensor_value_info("y", dtype, None)],
        list(init),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


class AddsInPlace(torch.nn.Module):
    def forward(self, x):
        x.add_(1)
        return x * 2


class Counts(torch.nn.Module):
    """Updates a buffer in forward, as a running statistic does."""

    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(4))

    def forward(self, x):
        self.calls.add_(1)
        return x + self.calls


def test_a_forward_that_changes_its_input_leaves_the_callers_tensor_and_the_inputs_as_given():
    x = torch.arange(4.0).reshape(1, 4)
    wb = Workbench.from_torch(AddsInPlace(), (x,))
    assert torch.equal(x, torch.arange(4.0).reshape(1, 4))
    np.testing.assert_array_equal(wb.model.inputs[0], np.arange(4.0, dtype="float32").reshape(1, 4))
    expected = (np.arange(4.0) + 1) * 2
    np.testing.assert_array_equal(wb.model.reference(wb.model.inputs)[0][0], expected)
    np.testing.assert_array_equal(wb.model.reference(wb.model.inputs)[0][0], expected)  # the inputs kept again
    np.testing.assert_allclose(execute.run(wb.model.mod, wb.model.inputs)[0][0], expected)


def test_a_forward_that_updates_a_buffer_gives_the_same_reference_every_call_and_as_exported():
    module = Counts()
    wb = Workbench.from_torch(module, (torch.zeros(1, 4),))
    first, second = (wb.model.reference(wb.model.inputs)[0] for _ in range(2))
    np.testing.assert_array_equal(first, np.ones((1, 4)))
    np.testing.assert_array_equal(second, first)
    np.testing.assert_array_equal(execute.run(wb.model.mod, wb.model.inputs)[0], first)
    assert module.calls.sum() == 0


class Bumps(torch.nn.Module):
    """Updates its own parameter in forward."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(4))

    def forward(self, x):
        with torch.no_grad():
            self.w.add_(1)
        return x * self.w


def test_a_forward_that_updates_a_parameter_gives_the_same_outputs_every_call():
    module = Bumps()
    wb = Workbench.from_torch(module, (torch.ones(1, 4),))
    first, second = (wb.model.reference(wb.model.inputs)[0] for _ in range(2))
    np.testing.assert_array_equal(first, np.full((1, 4), 2.0))
    np.testing.assert_array_equal(second, first)
    np.testing.assert_array_equal(execute.run(wb.model.mod, wb.model.inputs)[0], first)
    assert module.w.sum() == 4


def test_a_tensor_forward_reads_but_does_not_own_is_copied_at_import():
    outside = torch.ones(4)  # a closure's tensor, lifted by torch.export as a constant

    class Scales(torch.nn.Module):
        def forward(self, x):
            return x * outside

    wb = Workbench.from_torch(Scales(), (torch.ones(1, 4),))
    outside.mul_(7)
    np.testing.assert_array_equal(wb.model.reference(wb.model.inputs)[0], np.ones((1, 4)))
    np.testing.assert_array_equal(execute.run(wb.model.mod, wb.model.inputs)[0], np.ones((1, 4)))


def test_a_forward_that_exits_is_one_line():
    class Exits(torch.nn.Module):
        def forward(self, x):
            raise SystemExit(3)

    assert "Exits.forward called sys.exit(3)" in refused(lambda: Workbench.from_torch(Exits(), (torch.ones(1, 2),)))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16])
def test_weights_not_in_float32_are_named_with_the_fix(dtype, capfd):
    conv = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).to(dtype)
    line = refused(lambda: Workbench.from_torch(conv, (torch.randn(1, 3, 8, 8, dtype=dtype),)))
    assert f"weights are {str(dtype).removeprefix('torch.')}" in line and "module.float()" in line
    assert "BlockBuilder" not in capfd.readouterr().err


def test_float64_inputs_to_a_float32_module_ask_for_float32():
    line = refused(lambda: Workbench.from_torch(torch.nn.Linear(4, 2), (torch.randn(1, 4, dtype=torch.float64),)))
    assert "1x4 float64" in line and "x.float()" in line


def test_a_module_instance_in_place_of_a_factory_is_the_module(tmp_path, monkeypatch):
    from byoc_workbench.frontends import torch_import

    (tmp_path / "careless_nets.py").write_text(
        "import torch\ntiny = torch.nn.Linear(4, 2)\n\ndef number():\n    return 5\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    model = torch_import.import_spec("careless_nets:tiny", shape=(1, 4))
    assert model.mark == "careless_nets:tiny's own weights" and model.reference(model.inputs)[0].shape == (1, 2)
    line = refused(lambda: torch_import.seeded_factory("careless_nets:number"))
    assert "careless_nets:number() returned int 5" in line


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        (
            "careless_fifo:Net",
            "careless_fifo.py is a FIFO, not a regular file. Fix: put the module's code in a regular",
        ),
        ("careless_file.py:Net", "Fix: name the module, not its file: --torch careless_file:..."),
    ],
)
def test_a_module_python_cannot_read_says_why(tmp_path, monkeypatch, spec, says):
    """A FIFO at the module's file was "No module named", with a fix to check the spelling."""
    from byoc_workbench.frontends import torch_import

    os.mkfifo(tmp_path / "careless_fifo.py")
    (tmp_path / "careless_file.py").write_text("import torch\nNet = torch.nn.Linear\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert says in refused(lambda: torch_import.seeded_factory(spec))


def test_a_factory_that_loads_a_checkpoint_is_marked_as_made_by_the_factory(tmp_path, monkeypatch, capsys):
    """Round 10's B5: every --torch model was "seeded weights (torch.manual_seed(0)), nothing downloaded", a
    checkpoint loaded by the factory too; the mark now says what the workbench knows: the factory made them."""
    from byoc_workbench import cli
    from byoc_workbench.frontends import torch_import

    torch.save(torch.nn.Linear(4, 2).state_dict(), tmp_path / "trained.pt")
    (tmp_path / "careless_ckpt.py").write_text(
        "import pathlib, torch\n\ndef trained():\n    net = torch.nn.Linear(4, 2)\n"
        "    net.load_state_dict(torch.load(pathlib.Path(__file__).with_name('trained.pt')))\n    return net\n\n"
        "def zoo(weights='IMAGENET1K_V1'):\n    assert weights is None\n    return torch.nn.Linear(4, 2)\n"
    )
    mark = "weights as careless_ckpt:trained made them, after torch.manual_seed(0)"
    monkeypatch.syspath_prepend(str(tmp_path))
    assert torch_import.import_spec("careless_ckpt:trained", shape=(1, 4)).mark == mark
    assert torch_import.seeded_factory("careless_ckpt:zoo", seed=3)[1] == (
        "weights as careless_ckpt:zoo(weights=None) made them, after torch.manual_seed(3)"
    )
    bench = ["bench", "--torch", "careless_ckpt:trained", "--input-shape", "1,4", "--backends", "tvm"]
    assert cli.main([*bench, "--no-anchors", "--repeat", "1", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["weights"] == result["weights_label"] == mark


@pytest.mark.parametrize(
    "dtype, node, init, words",
    [
        (
            TensorProto.DOUBLE,
            helper.make_node("Conv", ["x", "w"], ["y"], name="conv0"),
            [numpy_helper.from_array(np.ones((4, 3, 3, 3)), "w")],
            "no Conv kernel for float64",
        ),
    ],
    ids=["float64-conv"],  # a bfloat16 input is refused before: test_onnx_odd_files.py
)
def test_an_element_type_onnx_runtime_lacks_is_named(tmp_path, dtype, node, init, words):
    path = _onnx(tmp_path / "m.onnx", node, dtype, [1, 3, 8, 8], init)
    line = refused(lambda: Workbench.from_onnx(path))
    assert words in line and "export the model in float32" in line


def test_an_unknown_op_is_said_to_be_no_onnx_op(tmp_path):
    path = _onnx(tmp_path / "m.onnx", helper.make_node("FooBar", ["x"], ["y"]), TensorProto.FLOAT, [1, 4])
    line = refused(lambda: Workbench.from_onnx(path))
    assert "uses FooBar, which is no op of ONNX opset 17" in line and "standard ONNX ops" in line


@pytest.mark.parametrize(
    "given, words",
    [
        (None, "x's size N (dim 0) is not known"),
        ((0, 3, 8, 8), "has 0: a size is a whole number from 1"),
        ((-1, 3, 8, 8), "has -1: a size"),
        ((1.0, 3, 8, 8), "has 1.0: a size"),
        ({"x": 5}, "The shape given for input x is 5, not a sequence of sizes"),
    ],
)
def test_a_shape_not_known_or_not_a_size_names_the_models_own_input(tmp_path, given, words):
    path = _onnx(tmp_path / "m.onnx", helper.make_node("Relu", ["x"], ["y"]), TensorProto.FLOAT, ["N", 3, 8, 8])
    line = refused(lambda: onnx_import.import_onnx(path, given))
    assert words in line and "--input-shape x=1,3,8,8 (Python: input_shapes={'x': (1, 3, 8, 8)})" in line


@pytest.mark.parametrize("seed", ["a", -1, 1.5])
def test_a_seed_that_is_no_whole_number_is_one_line(tmp_path, seed):
    path = _onnx(tmp_path / "m.onnx", helper.make_node("Relu", ["x"], ["y"]), TensorProto.FLOAT, [1, 4])
    assert "seed must be a whole number" in refused(lambda: Workbench.from_onnx(path, seed=seed))


def test_a_torchscript_module_asks_for_the_module_before_scripting():
    scripted = torch.jit.trace(torch.nn.Linear(4, 2), (torch.ones(1, 4),))
    assert "before torch.jit.script" in refused(lambda: Workbench.from_torch(scripted, (torch.ones(1, 4),)))


def test_an_input_of_strings_is_one_line_naming_it(tmp_path):
    """Round 9: a STRING input reached TVM's dtype parser ("unknown dtype `object`", a traceback)."""
    path = _onnx(tmp_path / "m.onnx", helper.make_node("Identity", ["x"], ["y"]), TensorProto.STRING, [1, 4])
    line = refused(lambda: Workbench.from_onnx(path))
    assert "Input x is a tensor of strings, and TVM has no string tensors" in line and "numeric inputs" in line


def test_external_data_linked_out_of_the_models_folder_is_one_line(tmp_path):
    """Round 9: a weight's data file that is a link out of the model's folder passed onnx.load and ended in
    ONNX Runtime's traceback ("External data path escapes model directory"); the same data in the folder loads."""
    outside, folder = tmp_path / "elsewhere.bin", tmp_path / "model"
    folder.mkdir()
    weight = numpy_helper.from_array(np.ones(4, np.float32), "w")
    node = helper.make_node("Add", ["x", "w"], ["y"])
    model = onnx.load(_onnx(folder / "m.onnx", node, TensorProto.FLOAT, [4], [weight]))
    onnx.save(model, str(folder / "m.onnx"), save_as_external_data=True, location="w.bin", size_threshold=0)
    assert Workbench.from_onnx(folder / "m.onnx", "byoc-target").model.inputs[0].shape == (4,)
    (folder / "w.bin").rename(outside)
    (folder / "w.bin").symlink_to(outside)
    line = refused(lambda: Workbench.from_onnx(folder / "m.onnx"))
    assert f"keeps tensor w's data in w.bin, which leads out of the model's folder (to {outside.resolve()})" in line
    assert f"put the data file itself (not a link to it) in {folder.resolve()}" in line
