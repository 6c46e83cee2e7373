"""Every notebook is committed without outputs; notebook 05 runs in a kernel without torch."""

import re
from pathlib import Path

import nbformat
import pytest
import seat

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.name)
def test_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, path.name


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """The notebooks copied outside the repository, as a seat runs them."""
    return seat.copies(tmp_path_factory.mktemp("seat"))


def _text(nb):
    return "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)


# Every notebook runs top to bottom in JupyterLab, from a seat's copies: tests/browser/test_notebooks_in_lab.py
# (01, 03 to 06) and tests/browser/test_browser.py (02). What runs here is what a browser cannot give: a kernel
# without torch.


def test_bring_your_own_model_notebook_runs_without_torch(lab):
    """A plain `make lab` has no torch (nor MXNet): the ONNX half runs on GluonCV's resnet18_v1 as the package ships
    it, written to ONNX by the workbench's own translator; the PyTorch half is one line."""
    nb = seat.read(lab, "05_bring_your_own_model.ipynb")
    # None in sys.modules makes `import torch` raise ImportError, as when it is not installed.
    nb.cells.insert(
        0, nbformat.v4.new_code_cell('import sys\nsys.modules["torch"] = sys.modules["torchvision"] = None')
    )
    seat.execute(nb, lab, 600)
    assert not [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    text = _text(nb)
    hint = "PyTorch half skipped (no torch): make lab EXTRAS=pytorch, or pip install -e .[pytorch]"
    assert hint in text.splitlines(), text[:2000]
    assert "ONNX file: resnet18_v1.onnx, written by the workbench's own Relax-to-ONNX translator" in text
    assert "Partitioning report: resnet18_v1.onnx for tensorrt" in text and "(PyTorch)" not in text
    assert "resnet18_v1.onnx, untrained weights (seed 0), input (1, 3, 96, 96)" in text  # the weights, said once
    assert re.search(r"^onnxruntime +\S+ .*x  equal", text, re.MULTILINE), text[-2000:]
    assert "outputs checked against onnxruntime on resnet18_v1.onnx" in text
