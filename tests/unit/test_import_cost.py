"""Importing the workbench leaves torch out of the process (TVM would import it, for about 700 MB); that a
PyTorch model read afterwards still reaches TVM is tests/models/test_torch_beside_tvm.py's."""

import pytest
from shared import python_output


def test_the_workbench_imports_tvm_without_torch():
    pytest.importorskip("torch", reason="without the PyTorch extra there is no torch to leave out")
    out = python_output(
        "import sys, byoc_workbench.session, byoc_workbench.measure.compiler.execute, tvm\n"
        "print('torch' in sys.modules, 'tvm.relax' in sys.modules)"
    )
    assert out.split() == ["False", "True"]
