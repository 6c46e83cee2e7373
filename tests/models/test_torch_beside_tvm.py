"""Torch beside the workbench: a PyTorch model read after the workbench's import still reaches TVM, and torch
imported first is left as it is (each imports torch in a process of its own, seconds each: the slow tier)."""

import pytest
from shared import python_output


def test_torch_imported_later_still_hands_its_tensors_to_tvm():
    pytest.importorskip("torch", reason="needs the PyTorch extra")
    out = python_output(
        "import byoc_workbench.core.ir, tvm, torch\n"
        "t = tvm.runtime.from_dlpack(torch.arange(6, dtype=torch.float32).reshape(2, 3))\n"
        "print(t.numpy().sum(), t.shape)"
    )
    assert out.split()[0] == "15.0" and "2, 3" in out


def test_torch_imported_first_is_left_as_it_is():
    pytest.importorskip("torch", reason="needs the PyTorch extra")
    out = python_output("import torch, byoc_workbench.core.ir, tvm_ffi._convert as c\nprint(c.torch is torch)")
    assert out.strip() == "True"
