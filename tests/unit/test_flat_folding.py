"""A model whose names give no blocks, drawn small: repeated patterns and segments folded, each
openable, and a workbench's toggles on it equal to every stage computed from scratch."""

import random

import pytest
import tvm

from byoc_workbench import stages
from byoc_workbench.draw import folding, structure
from byoc_workbench.draw.graph import Edge, Graph, Node
from byoc_workbench.flow import rules
from byoc_workbench.models.synthetic import flat_model, residual_model
from byoc_workbench.session import Workbench

OPS = 600  # 150 blocks: a toggle of add makes 300 subgraphs, 450 nodes before folding


@pytest.fixture(scope="module")
def flat():
    return Workbench(flat_model(OPS), "tensorrt")


def test_the_flat_model_has_no_names():
    names = {b.var.name for b in flat_model(16)["main"].body.blocks[0].bindings}
    assert all(n.startswith("lv") or n == "gv" for n in names), names


def test_thousands_of_subgraphs_fold_into_one_run(flat):
    wb = flat.with_rule("tensorrt.add", False)
    view = wb.view("partition", collapse=True, svg=False)
    assert len(view.subgraphs) == OPS // 2
    runs = [d for d in view.nodes.values() if d["kind"] == "fold" and d["op"] == "run"]
    assert len(view.nodes) <= 20 and len(runs) == 1, list(view.nodes)
    label = runs[0]["label"]
    assert "× {nn.conv2d on tensorrt, then add on host, then nn.relu on tensorrt}" in label, label
    assert "subgraphs" in label and "ops: tensorrt" in label and "MAC ops: nn.conv2d×" in label, label


def test_an_opened_run_shows_pieces_and_a_piece_its_nodes(flat):
    wb = flat.with_rule("tensorrt.nn.relu", False)
    (run,) = [nid for nid, d in wb.view("partition", collapse=True, svg=False).nodes.items() if d["op"] == "run"]
    opened = wb.view("partition", expand=(run,), collapse=True, svg=False)
    pieces = [nid for nid, d in opened.nodes.items() if d["cluster"] == f"x_{run}" and d["kind"] == "fold"]
    assert len(pieces) >= 2 and len(opened.nodes) <= structure.AIM, len(opened.nodes)
    deeper = wb.view("partition", expand=(run, pieces[0]), collapse=True)
    inside = [d for d in deeper.nodes.values() if d["cluster"] == f"x_{pieces[0]}"]
    assert inside and all(d["kind"] in ("subgraph", "op", "item", "tuple") for d in inside)
    assert len(deeper.nodes) <= 500 and f"cluster_x_{pieces[0]}" in deeper.svg


def test_every_stage_of_the_flat_model_draws_few_nodes(flat):
    wb = flat.with_rule("tensorrt.add", False)
    for name in stages.STAGES:
        view = wb.view(name, collapse=True, svg=False)
        assert len(view.nodes) <= 50, (name, len(view.nodes))


def chain(n: int) -> Graph:
    """``n`` ops in a chain, no two alike and every other one offloaded: nothing repeats and no run
    of one target is long, so only segments fold it."""
    g = Graph()
    g.nodes["main/x"] = Node("main/x", "input", "x", cluster="fn_main")
    prev = "main/x"
    for k in range(n):
        nid = f"main/v{k}"
        target = "tensorrt" if k % 2 else "host"
        g.nodes[nid] = Node(nid, "op", f"op{k}", op=f"relax.op{k}", cluster="fn_main", target=target)
        g.edges.append(Edge(prev, nid))
        prev = nid
    return g


def test_what_does_not_repeat_folds_into_segments_named_by_their_ends():
    g = folding.fold_chains(chain(1000))
    segs = [n for n in g.nodes.values() if n.kind == "fold"]
    assert segs and all(n.op == "segment" and n.expandable for n in segs)
    assert len(g.nodes) <= structure.AIM + 1
    assert segs[0].label.startswith("op0 v0 … "), segs[0].label
    assert sum(len(n.ops) for n in segs) == 1000  # every op in one segment
    opened = folding.fold_chains(chain(1000), keep_open=[segs[1].id])
    inside = [n.id for n in opened.nodes.values() if n.cluster == f"x_{segs[1].id}"]
    assert inside == [f"main/v{k}" for k in range(len(segs[0].ops), len(segs[0].ops) + len(segs[1].ops))]
    assert all(e.src in opened.nodes and e.dst in opened.nodes for e in opened.edges)


def test_a_small_graph_is_drawn_as_it_is():
    assert structure.fold_structure(chain(100)) is None


def test_runs_are_found_by_pattern_and_the_rest_left():
    ids = [f"n{k}" for k in range(14)]
    items = structure.find_runs(ids, [9, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 7, 7, 3])
    assert items[0] == "n0" and items[-3:] == ["n11", "n12", "n13"]
    run = items[1]
    assert (run.period, run.reps, run.flat) == (2, 5, ids[1:11])


@pytest.mark.slow  # over 10 s: `make test` and `make test-slow` run it, not test-fast
def test_random_flips_on_the_flat_model_equal_the_stages_from_scratch():
    mod = flat_model(120)  # small: 200 flips, each checked stage by stage
    wb = Workbench(mod, "tensorrt")
    target = rules.get_target("tensorrt")
    matched = [r.qualified for r in target.rules if wb._runs.fuse.can_match(r)]
    others = [r.qualified for r in target.rules if r.qualified not in matched]
    pick, fresh = random.Random(0), {}
    for k in range(200):
        name = pick.choice(matched) if pick.random() < 0.8 else pick.choice(others)
        wb = wb.with_rule(name, name not in wb.enabled)
        key = frozenset(wb.enabled)
        if key not in fresh:
            fresh[key] = stages.run_stages(mod, [r for r in target.rules if r.qualified in key])
        for got, want in zip(wb.stages, fresh[key], strict=True):
            tvm.ir.assert_structural_equal(got.mod, want.mod)
            assert [(s.name, s.target, list(s.ops)) for s in got.subgraphs] == [
                (s.name, s.target, list(s.ops)) for s in want.subgraphs
            ], (k, got.name)
        if k % 50 == 0:
            assert len(wb.view("partition", collapse=True, svg=False).nodes) <= 500
    assert len(fresh) > 2


def test_a_block_too_big_to_draw_opens_on_its_runs():
    """Named blocks, but a stage of 320 of them: opened, its blocks fold into a run inside it."""
    wb = Workbench(residual_model(1600, blocks_per_stage=320), "tensorrt")
    closed = wb.view("source", collapse=True, svg=False)
    stage = next(nid for nid, d in closed.nodes.items() if d["op"] == "block")
    opened = wb.view("source", expand=(stage,), collapse=True, svg=False)
    runs = [d for d in opened.nodes.values() if d["op"] == "run"]
    assert len(opened.nodes) <= 20 and len(runs) == 1, list(opened.nodes)
    assert runs[0]["cluster"] == f"x_{stage}" and runs[0]["label"].startswith("320 × {4 ops on host}")
