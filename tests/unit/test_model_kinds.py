"""Each model kind is a class that loads its model and answers what the commands ask of it
(:class:`byoc_workbench.subjects.ModelKind`); no caller compares a reference's kind with a name."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import numpy as np
import pytest
from shared import relu_onnx

import byoc_workbench
from byoc_workbench import subjects
from byoc_workbench.models import zoo
from byoc_workbench.subjects import (
    KINDS,
    DemoModel,
    ModelRef,
    OnnxModel,
    PythonFileModel,
    TorchModel,
    ZooModel,
    load,
)

PACKAGE = Path(byoc_workbench.__file__).parent
MODEL_NAMES = {*KINDS, "ssd"}


def _names_a_kind(node) -> bool:
    """A string constant (or a tuple, list or set of them) naming a model kind."""
    if isinstance(node, ast.Constant):
        return node.value in MODEL_NAMES
    return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and any(_names_a_kind(e) for e in node.elts)


def _kind_comparisons(tree) -> list[int]:
    """Lines where a ``.kind`` is compared with a model kind's name."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            kinds = any(isinstance(s, ast.Attribute) and s.attr == "kind" for s in sides)
            if kinds and any(_names_a_kind(s) for s in sides):
                found.append(node.lineno)
    return found


def test_no_caller_compares_a_model_kind():
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != Path(subjects.__file__)
        for line in _kind_comparisons(ast.parse(path.read_text(), str(path)))
    ]
    assert found == [], "ask the model's class (ModelRef.model) instead of comparing its kind: " + ", ".join(found)


def test_the_scan_finds_a_comparison():
    tree = ast.parse('if ref.kind == "zoo" or model.kind in ("onnx", "torch") or n.kind == "op": pass')
    assert _kind_comparisons(tree) == [1, 1]


def test_each_kind_has_its_class():
    refs = {
        "demo": ModelRef.parse("demo"),
        "zoo": ModelRef.parse("ssd"),
        "onnx": ModelRef.parse("m.onnx"),
        "torch": ModelRef.parse(None, torch="torchvision.models:resnet18"),
        "file": ModelRef(kind="file", path="mine.py"),
    }
    classes = {k: type(r.model) for k, r in refs.items()}
    assert classes == {
        "demo": DemoModel,
        "zoo": ZooModel,
        "onnx": OnnxModel,
        "torch": TorchModel,
        "file": PythonFileModel,
    }
    assert [k for k, r in refs.items() if r.imported] == ["zoo", "onnx", "torch"]
    assert [k for k, r in refs.items() if r.model.checked] == ["onnx", "torch"]
    assert [k for k, r in refs.items() if not r.model.benched] == ["file"]
    assert {k: r.model.default_backend for k, r in refs.items()} == {
        "demo": None,
        "zoo": "onnxruntime",
        "onnx": "onnxruntime",
        "torch": "onnxruntime",
        "file": "onnxruntime",
    }
    assert [k for k, r in refs.items() if r.model.partitioned_by_backend] == ["demo"]
    for ref in refs.values():  # each class reads back the dict it writes
        assert ModelRef.from_json(ref.to_json()) == ref


def test_a_zoo_model_takes_the_picture_it_names_none_of():
    ref = ModelRef.from_json({"kind": "zoo", "image": "dog.jpg"})
    assert ref == ModelRef(kind="zoo", name=zoo.DEFAULT_MODEL, image="dog.jpg")
    assert ref.model.with_picture("untrained", "cat.jpg") == ModelRef(
        kind="zoo", name=zoo.DEFAULT_MODEL, weights="untrained", image="dog.jpg"
    )
    onnx_ref = ModelRef.parse("m.onnx")
    assert onnx_ref.model.with_picture("untrained", "cat.jpg") is onnx_ref


def test_the_demo_loads():
    subject = load({"kind": "demo"})
    assert subject.name == "demo" and subject.workbench.target.name == "byoc-target"
    assert subject.workbench.model is None and subject.loaded is None and subject.onnx_file is None
    assert len(subject.inputs) == len(subject.workbench.mod["main"].params)


def test_an_onnx_file_loads(tmp_path):
    path = relu_onnx(tmp_path / "tiny.onnx")
    subject = load(ModelRef.parse(path))
    assert subject.onnx_file == path and subject.loaded is None and subject.ref.model.checked
    (x,) = subject.inputs
    (y,) = subject.workbench.model.reference(subject.inputs)  # ONNX Runtime on the file
    np.testing.assert_array_equal(y, np.maximum(x, 0))


def test_a_torch_program_loads(tmp_path, monkeypatch):
    (tmp_path / "kinds_nets.py").write_text("import torch\n\ndef tiny():\n    return torch.nn.Linear(4, 2)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    subject = load(ModelRef.parse(None, torch="kinds_nets:tiny", shapes=[1, 4]))
    assert subject.name == "kinds_nets:tiny" and subject.onnx_file is None and subject.loaded is None
    assert [np.shape(x) for x in subject.inputs] == [(1, 4)]
    assert np.shape(subject.workbench.model.reference(subject.inputs)[0]) == (1, 2)  # eager PyTorch


def test_a_python_file_loads(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text(
        textwrap.dedent("""
        from tvm.script import ir as I, relax as R

        @I.ir_module
        class Mine:
            @R.function
            def main(x: R.Tensor((2, 8), "float32")) -> R.Tensor((2, 8), "float32"):
                with R.dataflow():
                    y = R.nn.relu(x)
                    R.output(y)
                return y

        mod = Mine
    """)
    )
    subject = load(ModelRef.parse(str(path), target="byoc-target"))
    assert subject.name == str(path) and subject.workbench.target.name == "byoc-target"
    assert [np.shape(x) for x in subject.inputs] == [(2, 8)]  # seeded from main's shapes


@pytest.mark.parametrize("kind", KINDS)
def test_a_reference_of_each_kind_names_its_class(kind):
    assert ModelRef(kind=kind).model.kind == kind
