"""Part 2: SSD-ResNet50 through the BYOC stages with upstream TVM's TensorRT patterns."""

import json

import numpy as np
import pytest
from shared import ranks_with_rows, same

from byoc_workbench import cli
from byoc_workbench.draw import counts, render
from byoc_workbench.flow import fusion
from byoc_workbench.flow.summary import Owner
from byoc_workbench.measure.check import compare
from byoc_workbench.measure.compiler import execute


@pytest.fixture(scope="module")
def ssd_wb():
    from byoc_workbench.workflow import model_workbench

    return model_workbench(weights="untrained")


def stage(wb, name):
    return wb.stage(name)


def test_tensorrt_subgraphs_before_and_after_pruning(ssd_wb):
    wb, _ = ssd_wb
    convs = stage(wb, "source").owners[("relax.nn.conv2d", Owner("main"), "host")]
    assert convs == 73
    part = stage(wb, "partition").subgraphs
    assert len(part) >= 2 and all(s.target == "tensorrt" for s in part)
    holders = [s for s in part if s.ops.count("relax.nn.conv2d") == convs]
    assert len(holders) == 1, "one subgraph must hold every conv2d"
    pruned = stage(wb, "prune").subgraphs
    assert [s.name for s in pruned] == [holders[0].name]
    assert "no 'tensorrt' codegen" in stage(wb, "codegen").notes[0]


def test_untrained_weights_are_marked_everywhere(ssd_wb):
    wb, imported = ssd_wb
    assert not imported.model.is_trained
    assert "untrained weights" in wb.mark
    assert "untrained weights" in wb.dot("partition", collapse=True).source
    p = counts.profile_graph(stage(wb, "source").mod, mark=wb.mark)
    assert "untrained weights" in counts.table_text(p) and "untrained weights" in counts.table_html(p)
    ax = counts.plot(p)
    assert any("UNTRAINED WEIGHTS" in t.get_text() for t in ax.texts)


def test_collapsed_view_stays_readable(ssd_wb):
    wb, _ = ssd_wb
    for s in wb.stages:
        g = wb.graph(s.name, collapse=True)
        assert len(g.nodes) <= 80, (s.name, len(g.nodes))
        assert max(len(n.label) for n in g.nodes.values()) < 600
    source = wb.graph("source", collapse=True)
    tail = [n for n in source.node_by_kind("fold") if n.ops.count("relax.strided_slice") >= 100]
    assert len(tail) == 1, "the anchor/decoding slice chain is one folded node"
    opened = wb.graph("source", collapse=True, expand=[tail[0].id])
    assert len(opened.nodes) > len(source.nodes) + 100


def test_no_label_reaches_graphvizs_limit_even_uncollapsed(ssd_wb):
    wb, _ = ssd_wb
    for name in ("source", "partition"):
        first_subgraph = [n.id for n in wb.graph(name).node_by_kind("subgraph")][:1]  # the partition's, opened
        assert bool(first_subgraph) == (name == "partition")
        dot = render.to_dot(wb.graph(name, expand=first_subgraph))
        assert max(len(line) for line in dot.source.splitlines()) < 16384


def test_prepare_keeps_what_the_model_computes():
    from byoc_workbench.core import transforms
    from byoc_workbench.models import zoo

    imported = zoo.import_model(weights="untrained", input_shape=(1, 3, 256, 256))
    x = np.random.RandomState(0).uniform(-2, 2, (1, 3, 256, 256)).astype("float32")
    before = execute.run(imported.mod, [x])
    after = execute.run(transforms.prepare(imported.mod), [x])
    ref, got = ([np.asarray(a) for a in run] for run in (before, after))
    # As a set: two detections of near-equal score may come out of NMS in either order.
    assert not compare.unmatched(ref, got, score_tol=1e-4, box_tol=5e-3, box_rtol=1e-3)
    assert [a.shape for a in got] == [a.shape for a in ref]


def test_cli_stages_ssd(tmp_path):
    assert cli.main(["stages", "ssd", "--target", "tensorrt", "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["model"] == "ssd_512_resnet50_v1_coco" and "untrained weights" in summary["weights"]
    by = {s["name"]: s for s in summary["stages"]}
    assert len(by["partition"]["subgraphs"]) >= 2 and len(by["prune"]["subgraphs"]) == 1
    assert by["prune"]["subgraphs"][0]["ops"].count("relax.nn.conv2d") == 73
    assert len([p for p in tmp_path.glob("*.svg") if "--" not in p.name]) == 7  # each stage, collapsed
    assert list(tmp_path.glob("00-source--*.svg"))  # and each top-level block of the source stage, opened
    assert "resnetv10 — backbone" in (tmp_path / "00-source.svg").read_text(), "the CLI draws Gluon blocks too"
    assert list(summary)[:2] == ["model", "prepare"]
    assert summary["prepare"]["op_count_before"] == 654
    assert summary["prepare"]["op_count"] == by["source"]["op_count"]
    assert by["source"]["notes"] == summary["prepare"]["notes"]


def test_cli_import_summary(capsys):
    assert cli.main(["import", "ssd", "--summary"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["model"] == "ssd_512_resnet50_v1_coco" and summary["weights"] == "untrained"
    assert summary["ops"]["relax.nn.conv2d"] == 73 and summary["op_count"] == sum(summary["ops"].values())
    assert summary["params"] > 40_000_000


def test_ssd_partitions_the_same_with_its_tuple_plumbing_left_in(ssd_wb):
    """Without CanonicalizeBindings and DCE, batch-norm folding leaves tuples, projections and
    aliases between the convolutions; the merge looks through them."""
    import collections

    from tvm import relax

    from byoc_workbench import stages
    from byoc_workbench.core import transforms

    wb, imported = ssd_wb
    raw = relax.transform.DecomposeOpsForInference()(transforms.fold_batch_norm(imported.mod))
    found = {s.name: s for s in stages.run_stages(raw, wb.rules)}
    assert len(found["partition"].subgraphs) == 5 and len(found["prune"].subgraphs) == 1

    def ops(stage):
        return collections.Counter(tuple(sorted(s.ops)) for s in stage.subgraphs)

    assert ops(found["partition"]) == ops(wb.stage("partition"))


def test_ssd_partition_agrees_with_upstream(ssd_wb):
    """SSD has no control flow, so upstream MergeCompositeFunctions must find the same subgraphs."""
    import collections

    from tvm import relax

    from byoc_workbench.core import ir

    wb, _ = ssd_wb
    upstream = relax.transform.MergeCompositeFunctions()(wb.stage("annotate").mod)
    theirs = collections.Counter(
        tuple(sorted(ir.ops_in(upstream[n], upstream))) for n in ir.subgraph_functions(upstream)
    )
    ours = collections.Counter(tuple(sorted(s.ops)) for s in wb.stage("partition").subgraphs)
    assert len(ours) >= 2 and ours == theirs


def test_batch_norm_folding_is_a_named_step_that_explains_the_count(ssd_wb, tmp_path):
    """654 imported ops become more on screen; the source stage and summary.json say why."""
    from byoc_workbench.core import transforms
    from byoc_workbench.flow import summary

    wb, imported = ssd_wb
    before = transforms.op_counts(imported.mod)
    assert sum(before.values()) == 654 and before["relax.nn.batch_norm"] == 61
    source = wb.stage("source")
    notes = [n for n in source.notes if n.startswith("prepare: ")]
    assert notes[0] == "prepare: fold batch norm (x * scale + shift): 61 nn.batch_norm -> 61 add + 61 multiply"
    assert notes[-1] == f"prepare: 654 Relax ops from the importer -> {source.op_count} at the source stage"
    assert "relax.nn.batch_norm" not in {op for op, *_ in source.owners}, "every batch norm is folded"
    step = summary.summary_json("ssd", wb.stages)["prepare"]
    assert step["op_count_before"] == 654 and step["op_count"] == source.op_count
    assert step["ops_removed"]["relax.nn.batch_norm"] == 61 and step["ops_added"]["relax.add"] == 61
    assert sum(step["ops_added"].values()) - sum(step["ops_removed"].values()) == source.op_count - 654


def test_toggles_on_the_ssd_reuse_matches_and_fuse_as_the_pass_does(ssd_wb):
    """The composite stage cut from every rule's matches equals FuseOpsByPattern's for that rule set."""

    wb, _ = ssd_wb
    fuse = wb._runs.fuse
    assert wb.stage("composite").mod is not None  # the widget's first view: every rule on
    for name in ("tensorrt.nn.conv2d", "tensorrt.nn.relu", "tensorrt.add", "tensorrt.concatenate"):
        off = wb.with_rule(name, False)
        fast = off.stage("composite").mod
        assert same(fast, fusion.fuse_rules(wb.mod, [r for r in off.rules if fuse.can_match(r)])), name
        assert name not in off.stage("annotate").rule_matches and fast is not wb.stage("composite").mod
    assert fuse.fast >= 4 and fuse.slow == 0


def test_ssd_draws_as_the_hierarchy_of_its_gluon_blocks(ssd_wb):
    from byoc_workbench.draw import blocks

    wb, imported = ssd_wb
    assert "ssd0_resnetv10_stage1_conv0_fwd" in {v.name for v in imported.mod["main"].params} | {
        b.var.name for block in imported.mod["main"].body.blocks for b in block.bindings
    }, "the importer keeps MXNet's node names"
    g = wb.graph("source", collapse=True)
    roles = {n.id: n.label.split("\n")[0] for n in g.node_by_kind("fold") if n.op == "block"}
    assert roles["main/ssd0_resnetv10_"] == "resnetv10 — backbone"
    assert roles["main/ssd0_convpredictor*"] == "convpredictor ×12 — class and box heads"
    assert roles["main/ssd0_ssdanchorgenerator*"] == "ssdanchorgenerator ×6 — anchors"
    assert roles["main/ssd0_multiperclassdecoder0_"] == "multiperclassdecoder0 — class decoding"
    assert roles["main/ssd0_normalizedboxcenterdecoder0_"] == "normalizedboxcenterdecoder0 — box decoding"
    assert roles["main/ssd0_box_nms0_"] == "box_nms0 — non-maximum suppression"
    assert len(g.nodes) <= 25
    backbone = wb.graph("source", collapse=True, expand=["main/ssd0_resnetv10_"])
    inside = {n.id for n in backbone.nodes.values() if n.cluster == "x_main/ssd0_resnetv10_"}
    assert {f"main/ssd0_resnetv10_stage{k}_" for k in range(1, 5)} <= inside
    assert "main/ssd0_convpredictor*" in backbone.nodes, "opening one group leaves the others closed"
    stage = wb.graph("source", collapse=True, expand=["main/ssd0_resnetv10_", "main/ssd0_resnetv10_stage2_"])
    laid_out = [n for n in stage.nodes.values() if n.cluster == "x_main/ssd0_resnetv10_stage2_"]
    assert len(laid_out) > 40 and all("stage2_" in blocks.source_name(n.id) for n in laid_out)
    assert {"main/ssd0_resnetv10_stage1_", "main/ssd0_resnetv10_stage3_"} <= set(stage.nodes)


def test_blocks_hold_inside_an_opened_subgraph_and_the_tail_wraps_into_rows(ssd_wb):
    from byoc_workbench.draw import folding

    wb, _ = ssd_wb
    sub = max(wb.graph("partition", collapse=True).node_by_kind("subgraph"), key=lambda n: len(n.ops))
    opened = wb.graph("partition", collapse=True, expand=[sub.id])
    assert f"{sub.id}/ssd0_resnetv10_" in opened.nodes
    assert opened.nodes[f"{sub.id}/ssd0_resnetv10_"].cluster == f"x_{sub.id}"
    source = wb.graph("source", collapse=True)
    (tail,) = [n for n in source.node_by_kind("fold") if n.ops.count("relax.strided_slice") >= 100]
    run = wb.graph("source", collapse=True, expand=[tail.id])
    widths = ranks_with_rows(run, f"x_{tail.id}")
    assert sum(widths.values()) >= 240 and max(widths.values()) <= folding.WRAP


def test_the_folded_nms_is_drawn_on_the_cpu_of_a_gpu_build(ssd_wb):
    """Collapsed, the box filter and NMS are one folded node: it carries the double border its ops would."""
    wb, _ = ssd_wb
    g = wb.graph("prune", collapse=True)
    [nms] = [n for n in g.nodes.values() if "relax.vision.non_max_suppression" in n.ops]
    assert nms.kind == "fold" and "no GPU kernel" in nms.on_cpu
    assert not [n for n in g.nodes.values() if n.kind == "fold" and "relax.nn.conv2d" in n.ops and n.on_cpu]
    assert "double border: on the CPU in a GPU build" in wb.dot("prune", collapse=True).source
