"""ONNX files through every stage: a hand-written one with PyTorch-style scopes, and three GluonCV models
exported here by MXNet's own ONNX exporter (the SSD among them), each offloaded run checked against ONNX
Runtime on the original file."""

import importlib.util
import json

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from byoc_workbench import cli, stages
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.draw import blocks, folding
from byoc_workbench.frontends import onnx_import
from byoc_workbench.measure.bench import byom
from byoc_workbench.session import Workbench


def _scoped_model(path, op_tail=None, batch="N"):
    """A small ResNet-like ONNX graph named as PyTorch's exporter names nodes, with the exporter's
    shape arithmetic for flatten (Shape, Gather, Unsqueeze, Concat, Reshape) on a symbolic batch."""
    rng = np.random.RandomState(0)

    def w(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype("float32"), name)

    inits = [
        w("w1", 8, 3, 3, 3),
        w("b1", 8),
        w("w2", 8, 8, 3, 3),
        w("w3", 8, 8, 3, 3),
        w("fc_w", 10, 8),
        w("fc_b", 10),
        numpy_helper.from_array(np.array(0, "int64"), "zero"),
        numpy_helper.from_array(np.array([0], "int64"), "axes0"),
        numpy_helper.from_array(np.array([-1], "int64"), "minus1"),
    ]
    b = "/backbone/layer1"
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name=f"{b}/backbone.layer1.0/conv1/Conv", pads=[1] * 4),
        helper.make_node("Relu", ["c1"], ["r1"], name=f"{b}/backbone.layer1.0/relu/Relu"),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], name=f"{b}/backbone.layer1.0/conv2/Conv", pads=[1] * 4),
        helper.make_node("Add", ["c2", "c1"], ["a1"], name=f"{b}/backbone.layer1.0/Add"),
        helper.make_node("Conv", ["a1", "w3"], ["c3"], name=f"{b}/backbone.layer1.1/conv1/Conv", pads=[1] * 4),
        helper.make_node("Relu", ["c3"], ["r3"], name=f"{b}/backbone.layer1.1/relu/Relu"),
        helper.make_node("GlobalAveragePool", ["r3"], ["p"], name="/head/pool/GlobalAveragePool"),
        helper.make_node("Shape", ["p"], ["s"], name="/head/Shape"),
        helper.make_node("Gather", ["s", "zero"], ["n"], name="/head/Gather", axis=0),
        helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"], name="/head/Unsqueeze"),
        helper.make_node("Concat", ["n1", "minus1"], ["shape"], name="/head/Concat", axis=0),
        helper.make_node("Reshape", ["p", "shape"], ["flat"], name="/head/Reshape"),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["y"], name="/head/fc/Gemm", transB=1),
    ]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 10])]
    if op_tail:
        nodes.append(helper.make_node(op_tail, ["r3"], ["d"], name=f"/head/{op_tail}"))  # on data: not folded
        outputs.append(helper.make_tensor_value_info("d", TensorProto.FLOAT, [batch, 8]))
    g = helper.make_graph(
        nodes, "scoped", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 16, 16])], outputs, inits
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    import onnx

    onnx.save(model, str(path))
    return path


@pytest.fixture(scope="module")
def scoped(tmp_path_factory):
    return _scoped_model(tmp_path_factory.mktemp("onnx") / "scoped.onnx")


def test_scoped_names_become_module_paths():
    class Node:
        def __init__(self, name, output="o"):
            self.name, self.output, self.op_type = name, [output], "Conv"

    assert onnx_import.scoped_name(Node("/layer1/layer1.0/conv1/Conv")) == "layer1.0.conv1.Conv"
    assert onnx_import.scoped_name(Node("/backbone/body/layer1/Add")) == "backbone.body.layer1.Add"
    assert onnx_import.scoped_name(Node("ssd0_resnetv10_conv0_fwd")) == "ssd0_resnetv10_conv0_fwd"
    assert onnx_import.scoped_name(Node("", "resnetv10_pool0_fwd")) == "resnetv10_pool0_fwd"
    assert blocks.block_path("layer1.0.conv1.Conv", scoped=True) == ("layer1.", "layer1.0.", "layer1.0.conv1.")


def test_symbolic_batch_is_resolved_and_folded(scoped):
    model = onnx_import.import_onnx(scoped, {"x": (2, 3, 16, 16)})
    assert "static shapes" in model.notes[1] and "left 9 nodes of 13" in model.notes[1]  # the flatten arithmetic
    assert model.inputs[0].shape == (2, 3, 16, 16)
    names = {b.var.name for blk in model.mod["main"].body.blocks for b in blk.bindings}
    assert "backbone.layer1.0.conv2.Conv" in names and "head.fc.Gemm" in names
    with pytest.raises(WorkbenchError, match=r"give every input's shape"):
        onnx_import.import_onnx(scoped)  # the batch stays symbolic: no example inputs can be made


def test_bad_files_and_shapes_are_one_line(tmp_path, scoped):
    (tmp_path / "junk.onnx").write_bytes(b"not a protobuf")
    with pytest.raises(WorkbenchError, match="not a readable ONNX model"):
        onnx_import.import_onnx(tmp_path / "junk.onnx")
    with pytest.raises(WorkbenchError, match="does not exist"):
        onnx_import.import_onnx(tmp_path / "missing.onnx")
    with pytest.raises(WorkbenchError, match="no input named y"):
        onnx_import.import_onnx(scoped, {"y": (1, 3, 16, 16)})
    with pytest.raises(WorkbenchError, match="has 4 dims"):
        onnx_import.import_onnx(scoped, (1, 3, 16))


def test_an_op_tvm_lacks_names_the_op_and_node(tmp_path):
    path = _scoped_model(tmp_path / "det.onnx", op_tail="Det", batch=1)
    with pytest.raises(WorkbenchError) as err:
        Workbench.from_onnx(path)
    assert "no converter for 1 op(s): Det (node '/head/Det')" in err.value.line
    assert err.value.line.count("\n") == 0


def test_scoped_model_every_stage_offload_and_hierarchy(scoped):
    wb = Workbench.from_onnx(scoped, input_shapes=(1, 3, 16, 16))
    assert [s.name for s in wb.stages] == list(stages.STAGES)
    g = folding.fold_blocks(wb.graph("source"))
    labels = {n.label for n in g.nodes.values() if n.kind == "fold"}
    assert any(lbl.startswith("backbone") for lbl in labels), labels  # the file's own scopes
    result = byom.run(wb, "onnxruntime")
    assert result["check"]["equal"], result["check"]
    assert result["ran_on"].startswith("onnxruntime")
    if importlib.util.find_spec("torchvision"):  # the torch backend: the [pytorch] extra
        by_torch = byom.run(wb, "torch")
        assert by_torch["check"]["equal"], by_torch["check"]
        import torch

        eager = "eager, CUDA graph on GPU" if torch.cuda.is_available() else "eager"  # a graph needs a GPU
        assert by_torch["ran_on"].startswith(f"torch ({eager}, f32)")
    report = wb.report()
    assert report.supported["relax.nn.conv2d"] == 3 and not report.unsupported


def test_cli_report_run_and_stages(scoped, tmp_path, capsys):
    assert cli.main(["report", str(scoped), "--input-shape", "x=1,3,16,16", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["model"] == "scoped.onnx" and len(data["subgraphs_after_prune"]) == 1
    assert cli.main(["run", str(scoped), "--input-shape", "1,3,16,16", "--backend", "onnxruntime"]) == 0
    assert "equal" in capsys.readouterr().out
    out = tmp_path / "stages"
    assert cli.main(["stages", str(scoped), "--input-shape", "1,3,16,16", "--out", str(out), "--format", "dot"]) == 0
    assert json.loads((out / "summary.json").read_text())["model"] == "scoped.onnx"
    assert cli.main(["run", str(scoped), "--backend", "onnxruntime"]) == 2
    assert "give every input's shape" in capsys.readouterr().err


def test_bench_of_an_onnx_file_in_the_one_layout(scoped, capsys):
    """``bench model.onnx --json``: the keys every bench result has, each build checked against
    ONNX Runtime on the file, and the whole-model anchors beside them."""
    from byoc_workbench.measure.bench import bench, bench_report

    args = ["bench", str(scoped), "--input-shape", "1,3,16,16", "--backends", "tvm,onnxruntime", "--repeat", "1"]
    assert cli.main([*args, "--json"]) == 0
    own = json.loads(capsys.readouterr().out)
    assert list(own) == list(bench.LAYOUT)
    assert own["model"] == "scoped.onnx" and own["task"] is None and own["reference"].startswith("onnxruntime")
    assert list(own["backends"]) == ["tvm", "onnxruntime", "onnxruntime_unpruned"]
    assert "onnxruntime_whole_model" in own["anchors"]
    assert set(own["outputs_match"]) == {*own["backends"], *own["anchors"]} and all(own["outputs_match"].values())
    assert own["differences"]["tvm"] == [] and own["detections"] == {} and own["where_time_goes"] == {}
    assert own["speedup_vs_tvm"]["onnxruntime"] > 0 and own["targets"]["backend"] == "onnxruntime"
    text = bench_report.report_text(own)
    assert text.startswith("scoped.onnx (weights as in the model)") and "outputs checked against onnxruntime" in text
    assert "the project's bar for the SSD" not in text  # a model of your own is not held to the SSD's bar


def test_search_of_an_onnx_file_times_its_anchors_in_the_finals(scoped, tmp_path, monkeypatch):
    """A search of an ONNX file: the runtimes run whole are timed as anchors and again in the finals'
    rounds, opened once for both; each finalist is the build its measurement made."""
    from byoc_workbench.measure import search
    from byoc_workbench.measure.bench import anchors
    from byoc_workbench.measure.time import timing

    opened, built, build, runs = [], [], timing.build, anchors.whole_model_runs
    monkeypatch.setattr(anchors, "whole_model_runs", lambda *a, **k: opened.append(a) or runs(*a, **k))
    monkeypatch.setattr(timing, "build", lambda *a, **k: built.append(a) or build(*a, **k))
    subject = search.load({"kind": "onnx", "path": str(scoped), "input_shapes": {"x": [1, 3, 16, 16]}})
    result = search.search(subject, ("onnxruntime", "tvm"), runs=3, top=2, cache=search.Cache(tmp_path))
    assert len(opened) == 1 and len(built) == result.measurements["builds"]
    assert "onnxruntime_whole_model" in result.baseline
    assert "onnxruntime_whole_model" in {f.what for f in result.finals if not f.placement}
    assert result.chosen is not None and result.chosen.equal
    again = search.search(subject, ("onnxruntime", "tvm"), runs=3, top=2, cache=search.Cache(tmp_path))
    assert len(opened) == 1 and again.measurements["builds"] == 0, "a repeat opens and builds nothing"


def test_bench_of_a_zoo_model_and_of_an_onnx_file_have_the_same_keys(scoped):
    """One layout: a zoo model's result (checked against TVM alone) and an ONNX file's (against ONNX
    Runtime) have the same top-level keys, in the same order."""
    pytest.importorskip("onnxruntime")
    from byoc_workbench.measure.bench import bench

    kw = {"backends": ("onnxruntime",), "repeat": 1, "unpruned": False, "anchors": False, "progress": False}
    own = bench.bench_model(Workbench.from_onnx(scoped, input_shapes=(1, 3, 16, 16)), **kw)
    zoo = bench.bench_model("simple_pose_resnet18_v1b", weights="untrained", where=True, **kw)
    assert list(zoo) == list(own) == list(bench.LAYOUT)
    assert zoo["task"] == "pose" and zoo["reference"] == "tvm alone" and zoo["weights"] == "untrained"
    assert list(zoo["backends"]) == list(own["backends"]) == ["onnxruntime"]
    assert list(zoo["where_time_goes"]) == ["onnxruntime"] and zoo["where_time_goes"]["onnxruntime"]["top"]
    assert zoo["outputs_match"] == {} and own["outputs_match"] == {"onnxruntime": True}  # no TVM alone to match


# --- GluonCV models through MXNet's own ONNX export, as the package ships it (no MXNet) ------------------

GLUON = ["resnet50_v1", "ssd_512_mobilenet1.0_coco", "ssd_512_resnet50_v1_coco"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    from byoc_workbench.measure.bench.anchors import export_onnx
    from byoc_workbench.models import zoo

    out = tmp_path_factory.mktemp("gluon-onnx")
    cache = {}

    def get(name):
        if name not in cache:
            loaded = zoo.load_model(name, "untrained")
            cache[name] = (loaded, export_onnx(loaded, loaded.spec.input_shape, out / f"{name}.onnx"))
        return cache[name]

    return get


@pytest.mark.parametrize("name", GLUON)
def test_gluon_exports_go_through_every_stage_and_equal_onnxruntime(exported, name):
    loaded, path = exported(name)
    wb = Workbench.from_onnx(path)
    assert [s.name for s in wb.stages] == list(stages.STAGES)
    g = folding.fold_blocks(wb.graph("annotate"))
    labels = {n.label.split("\n")[0].split(" — ")[0].split(" ")[0] for n in g.nodes.values() if n.kind == "fold"}
    names = " ".join(b.var.name for blk in wb.model.mod["main"].body.blocks for b in blk.bindings)
    assert labels and all(lbl in names for lbl in labels), labels  # Gluon's own block names, e.g. stage1
    assert wb.model.detection == ("ssd" in name)
    backends = ["onnxruntime", "torch"] if importlib.util.find_spec("torchvision") else ["onnxruntime"]
    for backend in backends:
        result = byom.run(wb, backend)
        if not result["check"]["equal"]:  # seeded weights give near-tied scores: only the cut at 100 rows may differ
            from byoc_workbench.measure.check import compare as matching

            ref = wb.model.reference(wb.model.inputs)
            missing = matching.unmatched(ref, result["outputs"])
            scores = ref[1][0, :, 0]
            assert len(missing) <= 2 and all(abs(scores[i] - scores[-1]) < 5e-3 for i in missing), (backend, result)


def test_ssd_report_from_onnx_matches_the_gluon_import(exported):
    """The same ops on the TensorRT side and the same subgraphs after pruning; the README explains
    the extra subgraphs before pruning (MXNet's exporter spells box decoding and NMS differently)."""
    from byoc_workbench import workflow
    from byoc_workbench.models import zoo

    loaded, path = exported("ssd_512_resnet50_v1_coco")
    onnx_report = Workbench.from_onnx(path).report()
    gluon_report = workflow.model_workbench(imported=zoo.import_model(loaded.name, loaded=loaded))[0].report()
    assert len(onnx_report.pruned) == len(gluon_report.pruned) == 1
    core = ("relax.nn.conv2d", "relax.nn.relu", "relax.permute_dims", "relax.reshape", "relax.concat")
    for op in core:
        assert onnx_report.supported[op] == gluon_report.supported[op], op
    assert set(onnx_report.supported) - {"relax.divide"} <= set(gluon_report.supported)
    assert onnx_report.pruned[0]["mac_ops"] == gluon_report.pruned[0]["mac_ops"] == 73


def test_notebook_05s_example_is_kept_in_the_cache_not_a_new_temporary_folder(tmp_path, monkeypatch):
    """byom.example wrote each call's file into a folder of its own under /tmp, never removed: now one file per
    size and seed in the cache, written again (atomically) by each call."""
    monkeypatch.setenv("BYOC_WORKBENCH_CACHE", str(tmp_path))
    first, again = byom.example(size=32), byom.example(size=32)
    assert first.onnx_path == again.onnx_path and first.onnx_path.is_relative_to(tmp_path / "examples")
    assert [p.name for p in first.onnx_path.parent.iterdir()] == [first.onnx_path.name]  # no temporary beside it
