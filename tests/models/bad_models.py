"""Small bad models for tests/models/test_bad_inputs.py: ONNX files built with ``onnx.helper``,
PyTorch modules and codegen files, each written into the rows' directory."""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import TensorProto, helper

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mychip.py"
RELU = 'lambda op: f"np.maximum({op.args[0]}, 0)"'

# Codegen files: examples/mychip.py with its relu emitter swapped for a bad one, or one line of its own.
CODEGENS = {
    "cg_syntax.py": ("relu", 'lambda op: "np.maximum("'),
    "cg_empty.py": ("relu", 'lambda op: ""'),
    "cg_undefined.py": ("relu", 'lambda op: "np.maximum(nope, 0)"'),
}
CODEGEN_NAMES = {"cg_mxnet.py": "mxnet", "cg_dash.py": "byoc-target"}
# C codegens: examples/mychip_c.py with its add emitter swapped for a faulty one.
EXAMPLE_C = EXAMPLE.with_name("mychip_c.py")
ADD_C = "{op.out}[i] = {a}[{op.index(0)}] + {b}[{op.index(1)}];"
C_CODEGENS = {
    "cg_c_oob.py": "{op.out}[i + 100000000000L] = 1;",  # writes far past its buffer
    "cg_c_exit.py": "{{ extern void exit(int); exit(0); }}",
    "cg_c_hang.py": "for (;;) {{ }}",
    "cg_c_wrong.py": "{op.out}[i] = {a}[{op.index(0)}] - {b}[{op.index(1)}];",  # the demo's loop would never end
}

# PyTorch modules, imported as --torch <module>:<factory> from the rows' directory.
TORCH = {
    "bad_torch_syntax.py": "def f(:\n",
    "bad_torch_exit.py": "import sys\n\n\ndef f():\n    sys.exit(3)\n",
    "bad_torch_tiny.py": "import torch\n\n\ndef net():\n    return torch.nn.ReLU()\n",
    "bad_torch_data_dependent.py": (
        "import torch\n\n\nclass Picky(torch.nn.Module):\n    def forward(self, x):\n        y = x[x > 0]\n"
        "        return y * 2 if y.numel() > 4 else y\n\n\ndef net():\n    return Picky()\n"
    ),
    "bad_torch_outputs.py": (
        "import torch\n\n\nclass Nothing(torch.nn.Module):\n    def forward(self, x):\n        return None\n\n\n"
        "class Count(torch.nn.Module):\n    def forward(self, x):\n        return x * 2, 3\n"
    ),
}


def _save(path: Path, nodes, inputs, outputs, opset: int = 13, ir: int = 8) -> None:
    model = helper.make_model(
        helper.make_graph(nodes, "g", inputs, outputs), opset_imports=[helper.make_opsetid("", opset)]
    )
    model.ir_version = ir
    onnx.save(model, str(path))


def _tensor(name: str, dims) -> object:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)


def write_all(root: Path) -> None:
    """Every bad model of the table, under ``root``."""
    x, y = _tensor("x", [1, 4, 16, 16]), _tensor("y", [1, 4, 16, 16])
    relu = [helper.make_node("Relu", ["x"], ["y"])]
    _save(root / "relu.onnx", relu, [x], [y])
    _save(root / "sym.onnx", relu, [_tensor("x", ["n", "c", "h", "w"])], [_tensor("y", ["n", "c", "h", "w"])])
    _save(root / "batch.onnx", relu, [_tensor("x", ["n", 4, 16, 16])], [_tensor("y", ["n", 4, 16, 16])])
    total = relu + [helper.make_node("ReduceSum", ["y"], ["s"], keepdims=0)]
    _save(root / "scalar.onnx", total, [x], [_tensor("s", []), y])
    _save(root / "no_outputs.onnx", relu, [x], [])
    two = helper.make_tensor("c", TensorProto.FLOAT, [2], [1.0, 2.0])
    _save(root / "no_inputs.onnx", [helper.make_node("Constant", [], ["y"], value=two)], [], [_tensor("y", [2])])
    _save(root / "opset1.onnx", relu, [x], [y], opset=1)
    _save(root / "opset99.onnx", relu, [x], [y], opset=99)
    _save(root / "ir99.onnx", relu, [x], [y], ir=99)
    (root / "empty.onnx").write_bytes(b"")
    (root / "README.md").write_text("# not a model\n")
    example = EXAMPLE.read_text()
    assert RELU in example
    for name, (_, emitter) in CODEGENS.items():
        (root / name).write_text(example.replace(RELU, emitter))
    example_c = EXAMPLE_C.read_text()
    assert ADD_C in example_c
    for name, statement in C_CODEGENS.items():
        (root / name).write_text(example_c.replace(ADD_C, statement))
    for name, codegen in CODEGEN_NAMES.items():
        (root / name).write_text(
            "from byoc_workbench import register_codegen\n\n"
            f'chip = register_codegen("{codegen}", emit={{"relu": {RELU}}})\n'
        )
    for name, source in TORCH.items():
        (root / name).write_text(source)
