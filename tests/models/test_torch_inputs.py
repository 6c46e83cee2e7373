"""What a PyTorch program is given, and what it is not let to share: the user's module is copied, not aliased;
bool tensors, token ids and masks work; a bf16 build says bf16 in every output of ``profile``. Without torch
these tests skip, naming the extra."""

import json

import numpy as np
import pytest
import tvm
from tvm.script import ir as I
from tvm.script import relax as R

torch = pytest.importorskip(
    "torch", reason="needs the [pytorch] extra: pip install -e .[pytorch], or make test EXTRAS=pytorch"
)

from byoc_workbench import cli  # noqa: E402
from byoc_workbench.frontends import torch_import  # noqa: E402
from byoc_workbench.measure.bench import byom  # noqa: E402
from byoc_workbench.session import Workbench  # noqa: E402

NETS = """
import torch


class TokenNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 8)
        self.fc = torch.nn.Linear(8, 2)

    def forward(self, ids, mask):
        return self.fc(self.emb(ids) * mask.unsqueeze(-1).float()).sum(1)


def tokennet():
    return TokenNet()


def embedding():
    return torch.nn.Embedding(10, 4)


def conv():
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU())
"""


@pytest.fixture
def nets(tmp_path, monkeypatch):
    """The module ``torch_nets`` (NETS) importable for ``--torch torch_nets:...``."""
    (tmp_path / "torch_nets.py").write_text(NETS)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


class Apply(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def test_the_users_module_and_inputs_are_not_aliased():
    """TVM's importer takes the exported weights by DLPack: without a copy, changing the user's module after
    from_torch moved the workbench's outputs and its reference alike, and the check still said equal."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 3)).train()
    x = torch.randn(1, 3, 4)
    wb = Workbench.from_torch(net, (x,), name="tiny")
    before = byom.run(wb, "tvm")
    with torch.no_grad():
        net[1].bias += 100
        x += 1
    after = byom.run(wb, "tvm")
    np.testing.assert_array_equal(after["outputs"][0], before["outputs"][0])
    np.testing.assert_array_equal(wb.model.reference(wb.model.inputs)[0], before["outputs"][0])
    assert after["check"]["equal"] and float(abs(after["outputs"][0]).max()) < 50  # not the +100 of the user's
    assert net.training, "the user's module is left in the mode it was"


# torch ops on bool tensors whose TVM kernels did not build (LLVM InternalError)
BOOL_OPS = {
    "equal": lambda x: x == x.flip(1),
    "greater": lambda x: x > x.flip(1),
    "max": lambda x: x.max(),
    "maximum": lambda x: torch.maximum(x, x.flip(1)),
    "add": lambda x: x + x.flip(1),
    "multiply": lambda x: x * x.flip(1),
    "compared-floats": lambda x: (x.float() > 0) == (x.float() < 1),
}


@pytest.mark.parametrize("backend", ["tvm", "onnxruntime"])
@pytest.mark.parametrize("op", list(BOOL_OPS))
def test_bool_tensors_build_and_equal_eager_pytorch(op, backend):
    wb = Workbench.from_torch(Apply(BOOL_OPS[op]), (torch.tensor([[True, False, True, False]]),), name=op)
    result = byom.run(wb, backend)
    eager = BOOL_OPS[op](torch.tensor([[True, False, True, False]])).numpy()
    assert result["outputs"][0].dtype == np.bool_
    np.testing.assert_array_equal(result["outputs"][0], eager)
    assert result["check"]["equal"], result["check"]


def test_bool_ops_are_computed_on_uint8():
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((3,), "bool"), y: R.Tensor((3,), "bool")):
            with R.dataflow():
                m = R.maximum(x, y)
                e = R.equal(m, y)
                n = R.logical_not(e)
                R.output(n)
            return n

    @I.ir_module
    class Expected:
        @R.function
        def main(x: R.Tensor((3,), "bool"), y: R.Tensor((3,), "bool")):
            with R.dataflow():
                m_in0 = R.astype(x, "uint8")
                m_in1 = R.astype(y, "uint8")
                m_u8 = R.maximum(m_in0, m_in1)
                m = R.astype(m_u8, "bool")
                e_in0 = R.astype(m, "uint8")
                e_in1 = R.astype(y, "uint8")
                e = R.equal(e_in0, e_in1)
                n = R.logical_not(e)
                R.output(n)
            return n

    mod, count = torch_import.bool_ops_on_uint8(Before)
    tvm.ir.assert_structural_equal(mod, Expected)
    assert count == 2


def test_cli_token_ids_and_masks(nets, capsys):
    args = ["run", "--torch", "torch_nets:tokennet", "--input-shape", "ids=1,6", "--input-shape", "mask=1,6"]
    assert cli.main([*args, "--input-dtype", "ids=int64", "--input-dtype", "mask=bool"]) == 0
    assert "outputs against eager PyTorch: equal" in capsys.readouterr().out
    model = torch_import.import_spec("torch_nets:embedding", shape={"shape": [2, 5], "dtype": "int64"})
    assert model.inputs[0].dtype == np.int64 and model.inputs[0].shape == (2, 5) and model.inputs[0].max() < 10


def test_cli_wrong_shape_says_it_does_not_fit(nets, capsys):
    assert cli.main(["report", "--torch", "torch_nets:conv", "--input-shape", "1,4,16,16"]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "cannot run on inputs 1x4x16x16 float32" in line and "to have 3 channels" in line, line
    assert "--input-shape" in line and "traceable" not in line, line
    assert cli.main(["report", "--torch", "torch_nets:embedding", "--input-shape", "1,6"]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "cannot run on inputs 1x6 float32" in line and "--input-dtype" in line, line


def test_profile_says_the_precision_it_ran(nets, tmp_path, capsys):
    """``profile --precision bf16`` says bf16 in its table, its JSON and its map's title."""
    out = tmp_path / "out"
    args = ["profile", "--torch", "torch_nets:conv", "--input-shape", "1,3,16,16", "--backend", "torch"]
    assert cli.main([*args, "--precision", "bf16", "--runs", "1", "--out", str(out)]) == 0
    table = capsys.readouterr().out
    ran = "eager, CUDA graph on GPU, bf16" if torch.cuda.is_available() else "eager, bf16"
    assert f"ran on torch ({ran})" in table.splitlines()[0], table
    assert any(row.endswith(f"torch ({ran})") for row in table.splitlines()[3:]), table
    assert set(json.loads((out / "profile.json").read_text())["subgraphs"].values()) == {f"torch ({ran})"}
    assert f"latency map: codegen stage on torch ({ran})" in (out / "profile.svg").read_text()
