"""PyTorch programs through every stage: five torchvision families with seeded weights (nothing is
downloaded), each offloaded run checked against eager PyTorch, the hierarchy from nn_module_stack, and an
ONNX file written from one of them. Without torch these tests skip, naming the extra."""

import json

import pytest

torch = pytest.importorskip(
    "torch", reason="needs the [pytorch] extra: pip install -e .[pytorch], or make test EXTRAS=pytorch"
)
torchvision = pytest.importorskip("torchvision", reason="needs the [pytorch] extra: pip install -e .[pytorch]")

from byoc_workbench import cli, stages  # noqa: E402
from byoc_workbench.core.errors import WorkbenchError  # noqa: E402
from byoc_workbench.draw import folding  # noqa: E402
from byoc_workbench.frontends import torch_import  # noqa: E402
from byoc_workbench.measure.bench import byom  # noqa: E402
from byoc_workbench.session import Workbench  # noqa: E402

V = torchvision.models


class DetectionNetwork(torch.nn.Module):
    """A torchvision detector without its post-processing: torch.export cannot trace NMS's
    data-dependent output sizes, so the backbone and heads go through the stages."""

    def __init__(self, detector):
        super().__init__()
        self.backbone, self.head = detector.backbone, detector.head

    def forward(self, x):
        out = self.head(list(self.backbone(x).values()))
        return out["bbox_regression"], out["cls_logits"]


def _vit():
    vit = V.VisionTransformer(
        image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64, num_classes=10
    )
    torch.nn.init.normal_(vit.heads.head.weight, std=0.2)  # torchvision starts the head at zero
    return vit


# family: (factory, input side, a module attribute name the diagram must show)
MODELS = {
    "resnet18": (lambda: V.resnet18(weights=None), 64, "layer1"),
    "mobilenet_v3_small": (lambda: V.mobilenet_v3_small(weights=None), 64, "features"),
    "regnet_y_400mf": (lambda: V.regnet_y_400mf(weights=None), 64, "trunk_output"),
    "vit": (_vit, 32, "encoder"),
    "ssdlite320": (
        lambda: DetectionNetwork(V.detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None)),
        128,
        "backbone",
    ),
}


@pytest.fixture(scope="module")
def workbenches():
    cache = {}

    def get(name):
        if name not in cache:
            factory, side, _ = MODELS[name]
            torch.manual_seed(0)
            x = torch.randn(1, 3, side, side, generator=torch.Generator().manual_seed(0))
            cache[name] = Workbench.from_torch(factory(), (x,), name=name, mark="seeded weights")
        return cache[name]

    return get


@pytest.mark.parametrize("backend", ["onnxruntime", "torch"])
@pytest.mark.parametrize("name", list(MODELS))
def test_every_stage_offloaded_equals_eager_pytorch(workbenches, name, backend):
    wb = workbenches(name)
    assert [s.name for s in wb.stages] == list(stages.STAGES)
    assert wb.stage("prune").subgraphs, "TensorRT's rules took nothing"
    result = byom.run(wb, backend)
    assert result["check"]["equal"], result["check"]
    assert max(float(abs(o).max()) for o in result["outputs"]) > 0  # really computed, not zero tensors
    # ONNX Runtime sums in another order than PyTorch; torch's own kernels can give its very bits.
    assert result["check"]["max_rel"] > 0 or name == "vit" or backend == "torch"
    assert result["reference"] == "eager PyTorch"


@pytest.mark.parametrize("name", list(MODELS))
def test_hierarchy_uses_the_modules_own_names(workbenches, name):
    wb = workbenches(name)
    attr = MODELS[name][2]
    g = folding.fold_blocks(wb.graph("annotate"))
    labels = [n.label.split("\n")[0].split(" — ")[0] for n in g.nodes.values() if n.kind == "fold"]
    assert attr in labels, labels
    names = {b.var.name for blk in wb.model.mod["main"].body.blocks for b in blk.bindings}
    assert any(n.startswith(f"{attr}.") for n in names)


def test_report_counts_every_op(workbenches):
    wb = workbenches("resnet18")
    report = wb.report().to_json()
    assert report["op_count"] == report["offloaded"] + report["on_host"]
    assert report["supported"]["relax.nn.conv2d"] == 20
    assert len(report["subgraphs_before_prune"]) >= len(report["subgraphs_after_prune"]) == 1


def test_onnx_written_from_pytorch_keeps_the_same_hierarchy(tmp_path, workbenches):
    torch.manual_seed(0)
    model = V.resnet18(weights=None).eval()
    x = torch.randn(1, 3, 64, 64)
    path = tmp_path / "resnet18.onnx"
    torch.onnx.export(model, (x,), str(path), dynamo=False, opset_version=17)
    wb = Workbench.from_onnx(path)
    names = {b.var.name for blk in wb.model.mod["main"].body.blocks for b in blk.bindings}
    assert "layer1.0.conv1.Conv" in names
    result = byom.run(wb, "onnxruntime")
    assert result["check"]["equal"], result["check"]
    eager = model(torch.from_numpy(wb.model.inputs[0])).detach().numpy()
    assert abs(result["outputs"][0] - eager).max() < 1e-3 * abs(eager).max()


def test_cli_torch_spec(tmp_path, capsys):
    args = ["report", "--torch", "torchvision.models:squeezenet1_1", "--input-shape", "1,3,64,64", "--json"]
    assert cli.main(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["model"] == "torchvision.models:squeezenet1_1"
    made = "weights as torchvision.models:squeezenet1_1(weights=None) made them, after torch.manual_seed(0)"
    assert data["weights"] == made
    assert cli.main(["report", "--torch", "torchvision.models:no_such_net"]) == 2
    assert "torchvision.models has no no_such_net" in capsys.readouterr().err


def test_untraceable_and_wrong_inputs_are_one_line():
    class Branchy(torch.nn.Module):
        def forward(self, x):
            return x * 2 if x.sum() > 0 else x  # Python control flow on a tensor's value

    with pytest.raises(WorkbenchError, match="torch.export cannot trace Branchy"):
        torch_import.import_torch(Branchy(), (torch.ones(2),))
    with pytest.raises(WorkbenchError, match="example_inputs must be a tensor"):
        torch_import.import_torch(torch.nn.ReLU(), [1, 2])


def test_bench_of_a_pytorch_program_in_the_one_layout():
    """A PyTorch program benched as a zoo model or an ONNX file is: the same keys, each build and the
    eager PyTorch anchor checked against eager PyTorch."""
    pytest.importorskip("onnxruntime")
    from byoc_workbench.measure.bench import bench, bench_report

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(144, 2))
    wb = Workbench.from_torch(net, (torch.randn(1, 3, 8, 8),), name="tiny", mark="seeded weights")
    result = bench.bench_model(wb, ("tvm", "onnxruntime"), repeat=1, unpruned=False, progress=False)
    assert list(result) == list(bench.LAYOUT)
    assert list(result["anchors"]) == ["pytorch_eager"] and result["weights_label"] == "seeded weights"
    assert result["outputs_match"] == {"tvm": True, "onnxruntime": True, "pytorch_eager": True}
    assert "tiny (seeded weights)" in bench_report.report_text(result)


def test_a_0d_input_is_compared_as_0d():
    class Scale(torch.nn.Module):
        def forward(self, x, s):
            return x * s, s * 2  # the second output is 0-d too

    wb = Workbench.from_torch(Scale(), (torch.ones(2, 3), torch.tensor(2.0)), name="scale")
    result = byom.run(wb, "onnxruntime")
    assert wb.model.inputs[1].shape == () and result["check"]["equal"], result["check"]
