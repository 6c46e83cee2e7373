"""Round 17's C3, C4, C5 and C6: an ONNX input declared with a dim of 0 (a fixed empty size), with no shape at all
(no rank), or with a dynamic -1 dim, and a ``--torch`` spec with an empty part in its dotted path. Each is one line
whose Fix, followed, imports the model."""

import re

import numpy as np
import onnx
import pytest
from messages import one_line, refused
from onnx import TensorProto, helper

from byoc_workbench import cli
from byoc_workbench.frontends import torch_import
from byoc_workbench.session import Workbench


def _relu(path, dims):
    """A Relu from x to y, both declared ``dims`` (None: no shape field at all)."""
    x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, dims) for n in "xy")
    model = helper.make_model(
        helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _given(line: str) -> dict:
    """The shapes of the ``--input-shape`` a Fix gives, as ``input_shapes=``."""
    name, sizes = re.search(r"--input-shape (\w+)=([\d,]+)", line).groups()
    return {name: tuple(int(s) for s in sizes.split(","))}


def _relus(path, shapes: dict) -> None:
    """The model imports at ``shapes``, and ONNX Runtime's outputs on its inputs are their Relu."""
    model = Workbench.from_onnx(path, input_shapes=shapes).model
    [x] = model.inputs
    assert x.shape == tuple(next(iter(shapes.values())))
    np.testing.assert_array_equal(model.reference(model.inputs)[0], np.maximum(x, 0))


def test_an_input_declared_with_a_dim_of_0_is_told_so_and_its_fix_works(tmp_path, capsys):
    """C3: it was "x's size 0 (dim 0) is not known", and its Fix (``--input-shape x=1,4``) ended in ONNX
    Runtime's InvalidArgument traceback: the file fixes that dim at 0."""
    path = _relu(tmp_path / "zero.onnx", [0, 4])
    assert cli.main(["run", str(path), "--input-shape", "x=1,4"]) == 2
    line = one_line(capsys.readouterr().err.strip())
    assert "Input x declares dim 0 as 0 in the file, a fixed size of 0" in line and "not known" not in line
    assert "model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = 'N'" in line
    refused(lambda: Workbench.from_onnx(path), "declares dim 0 as 0")
    model = onnx.load(str(path))
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"  # the Fix, followed
    onnx.save(model, str(path))
    _relus(path, _given(line))


def test_an_input_with_no_shape_needs_one_of_any_rank_and_a_0_d_input_stays_0_d(tmp_path):
    """C4: an input with no shape field was taken as 0-d: a shape given was refused ("has 0 dims ... give 0
    sizes"), and without one the model ran on a scalar."""
    path = _relu(tmp_path / "norank.onnx", None)
    line = refused(lambda: Workbench.from_onnx(path), "Input x has no shape in the file, not even a count of dims")
    _relus(path, _given(line))
    _relus(path, {"x": (2, 4)})
    _relus(path, {"x": (3,)})
    scalar = _relu(tmp_path / "scalar.onnx", [])
    assert Workbench.from_onnx(scalar).model.inputs[0].shape == ()
    refused(lambda: Workbench.from_onnx(scalar, input_shapes=(2, 4)), "Input x has 0 dims ([])")


def test_an_input_declared_with_a_dynamic_dim_is_told_so_not_blamed_on_the_layers(tmp_path):
    """C6: ``[-1, 4]`` with no shape given was "too small for the model: its nn.relu y would give ...[-1, 4]"."""
    path = _relu(tmp_path / "negdim.onnx", [-1, 4])
    line = refused(lambda: Workbench.from_onnx(path), "x's size at dim 0 (-1 in the file: dynamic) is not known")
    assert "too small" not in line and "--input-shape x=1,4 " in line
    _relus(path, _given(line))


_MODS = """
import torch

def tiny():
    return torch.nn.Linear(4, 2)

class ns:
    tiny = staticmethod(tiny)
"""


@pytest.mark.parametrize(
    "spec, meant",
    [
        ("r17b_mods:ns..tiny", "r17b_mods:ns.tiny"),
        ("r17b_mods:ns.", "r17b_mods:ns.tiny"),  # ns is a namespace, no factory: its factory is named
        ("r17b_mods:.tiny", "r17b_mods:tiny"),
    ],
)
def test_a_torch_spec_with_an_empty_part_is_refused_with_a_fix_naming_a_factory(
    tmp_path, monkeypatch, capsys, spec, meant
):
    """C5: ``tmods:ns..tiny`` (or ``tmods:ns.``) was told "pass e.g. --torch tmods:ns", and ns is a class that
    makes no module."""
    pytest.importorskip("torch", reason="needs the [pytorch] extra: pip install -e .[pytorch]")
    (tmp_path / "r17b_mods.py").write_text(_MODS)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert cli.main(["run", "--torch", spec]) == 2
    assert one_line(capsys.readouterr().err.strip()).endswith(f"Fix: pass e.g. --torch {meant}.")
    assert torch_import.import_spec(meant, shape=(1, 4)).reference
