"""Every notebook runs top to bottom in a real kernel, and is committed without outputs."""

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


def _execute(lab, name, timeout):
    return seat.execute(seat.read(lab, name), lab, timeout)


def _text(nb):
    return "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)


def test_part1_notebook_runs(lab):
    nb = seat.read(lab, "01_byoc_workflow.ipynb")
    nb.cells.append(nbformat.v4.new_code_cell('import sys\nprint("torch in the kernel:", "torch" in sys.modules)'))
    seat.execute(nb, lab, 300)
    assert not [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert "torch in the kernel: False" in _text(nb)  # TVM came without it: about 700 MB less per seat


def test_codegen_notebook_runs(lab):
    """Notebook 04 top to bottom, its exercises unanswered: the c codegen's emitters stand in, and say so."""
    nb = _execute(lab, "04_write_your_own_codegen.ipynb", timeout=120)
    assert not [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    text = _text(nb) + "".join(o.get("data", {}).get("text/plain", "") for c in nb.cells for o in c.get("outputs", []))
    assert "relu: not written yet (the c codegen's relu stands in meanwhile)" in text
    assert "int byoc_target_2(const float* d1, const float* w1, const float* b1, float* out0) {" in text
    assert "byoc_target_2: compiled by mychip" in text
    diffs = re.findall(r"^max abs diff vs TVM alone: (\S+)$", text, re.MULTILINE)
    assert len(diffs) == 2 and all(float(d) < 1e-5 for d in diffs), diffs
    assert "byoc_target_2: nn.conv2d, expand_dims, add, nn.relu, reshape" in text  # the reshape joined the subgraph
    html = "".join(o.get("data", {}).get("text/html", "") for c in nb.cells for o in c.get("outputs", []))
    assert all(
        re.search(rf"<td[^>]*>{re.escape(label)}</td>", html)
        for label in ("TVM alone", "NumPy (teaching)", "C (mychip)")
    )


# Notebook 02 runs top to bottom once, in JupyterLab: tests/browser/test_browser.py (test_nb02_*) checks its outputs.


@pytest.mark.slow
def test_bring_your_own_model_notebook_runs(lab):
    pytest.importorskip("torch", reason="notebook 05 needs the [pytorch] extra: pip install -e .[pytorch]")
    pytest.importorskip("torchvision", reason="notebook 05 needs the [pytorch] extra: pip install -e .[pytorch]")
    nb = _execute(lab, "05_bring_your_own_model.ipynb", timeout=600)
    text = _text(nb)
    assert not [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert (
        "Partitioning report: resnet18 (PyTorch) for tensorrt" in text and "Partitioning report: resnet18.onnx" in text
    )
    assert re.search(r"^onnxruntime +\S+ .*x  equal", text, re.MULTILINE), text[-2000:]  # the speedup, checked
    assert "seeded weights" in text
    assert "DeprecationWarning" not in text  # the exporter's, silenced
    assert "(seeded weights" not in text  # the bench title wraps the mark in parentheses once
    assert "resnet18 (PyTorch), seeded weights (torch.manual_seed(0)), input (1, 3, 96, 96)" in text


@pytest.mark.mxnet
@pytest.mark.slow
def test_bring_your_own_model_notebook_runs_without_torch(lab):
    """A plain `make lab` has no torch: the ONNX half runs on MXNet's export, the PyTorch half is one line."""
    pytest.importorskip("mxnet")
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
    assert "ONNX file: resnet18_v1.onnx, written by MXNet's exporter (mx.onnx.export_model)" in text
    assert "Partitioning report: resnet18_v1.onnx for tensorrt" in text and "(PyTorch)" not in text
    assert "resnet18_v1.onnx, untrained weights (seed 0), input (1, 3, 96, 96)" in text  # the weights, said once
    assert re.search(r"^onnxruntime +\S+ .*x  equal", text, re.MULTILINE), text[-2000:]
    assert "outputs checked against onnxruntime on resnet18_v1.onnx" in text


@pytest.mark.mxnet
@pytest.mark.slow
def test_zoo_notebook_runs_and_the_architectures_partition_differently(lab):
    pytest.importorskip("mxnet")
    nb = _execute(lab, "06_gluoncv_zoo.ipynb", timeout=900)
    assert not [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    text = _text(nb)
    counts = dict(re.findall(r"^(\S+) .*?(\d+) subgraphs after partition", text, re.MULTILINE))
    assert int(counts["yolo3_mobilenet1.0_voc"]) > int(counts["simple_pose_resnet18_v1b"]) == 1, text[-2000:]
    assert "untrained weights" in text  # offline: the seeded weights, and the notebook says so
    shown = [o for c in nb.cells for o in c.get("outputs", []) if "text/markdown" in o.get("data", {})]
    assert shown and "models of GluonCV's detection, segmentation and pose zoo" in shown[-1]["data"]["text/markdown"]
