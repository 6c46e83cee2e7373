"""Importing the workbench leaves torch out of the process (TVM would import it, for about 700 MB), and
a PyTorch model read afterwards still reaches TVM."""

import subprocess
import sys

import pytest


def _python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_the_workbench_imports_tvm_without_torch():
    pytest.importorskip("torch", reason="without the PyTorch extra there is no torch to leave out")
    out = _python(
        "import sys, byoc_workbench.session, byoc_workbench.measure.build.execute, tvm\n"
        "print('torch' in sys.modules, 'tvm.relax' in sys.modules)"
    )
    assert out.split() == ["False", "True"]


def test_torch_imported_later_still_hands_its_tensors_to_tvm():
    pytest.importorskip("torch", reason="needs the PyTorch extra")
    out = _python(
        "import byoc_workbench.ir, tvm, torch\n"
        "t = tvm.runtime.from_dlpack(torch.arange(6, dtype=torch.float32).reshape(2, 3))\n"
        "print(t.numpy().sum(), t.shape)"
    )
    assert out.split()[0] == "15.0" and "2, 3" in out


def test_torch_imported_first_is_left_as_it_is():
    pytest.importorskip("torch", reason="needs the PyTorch extra")
    out = _python("import torch, byoc_workbench.ir, tvm_ffi._convert as c\nprint(c.torch is torch)")
    assert out.strip() == "True"
