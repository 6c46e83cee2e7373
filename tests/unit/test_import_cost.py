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
