"""bench's speedups come from interleaved rounds: each build once a round, a build too slow for them timed apart."""

import pytest

from byoc_workbench.measure.bench import bench
from byoc_workbench.measure.time import runner

pytest.importorskip("onnxruntime", reason="the onnxruntime backend needs onnxruntime")

DEMO = {"kind": "demo"}
KW = {"backends": ("tvm", "onnxruntime"), "repeat": 3, "anchors": False, "progress": False}


@pytest.fixture
def order(monkeypatch):
    """The label of each build's every further run (``Run.call``), in the order they ran: a spy on the real runs."""
    order, build_and_run = [], runner.build_and_run

    def spied(*args, **kw):
        run = build_and_run(*args, **kw)
        call = run.call
        run.call = lambda: order.append(run.label) or call()
        return run

    monkeypatch.setattr(runner, "build_and_run", spied)
    return order


def test_every_build_is_timed_in_the_same_rounds(order):
    result = bench.bench_model(DEMO, **KW)
    labels = ["tvm alone", "onnxruntime", "onnxruntime_unpruned"]
    assert order == labels * 4  # a warm-up each, then three rounds, each build once a round
    assert [e["runs"] for e in result["backends"].values()] == [3, 3, 3]  # TVM alone too, not its one cold run
    notes = result["notes"]
    assert "timed in 3 rounds, each build once a round: tvm, onnxruntime, onnxruntime_unpruned" in notes
    against = [n for n in notes if n.startswith(("onnxruntime against tvm: ", "onnxruntime_unpruned against tvm: "))]
    assert len(against) == 2 and all("half the wider spread of their runs" in n for n in against)
    assert not [n for n in notes if "timed apart" in n]
    tvm, ort = (result["backends"][k] for k in ("tvm", "onnxruntime"))
    assert result["speedup_vs_tvm"]["onnxruntime"] == pytest.approx(tvm["median_s"] / ort["median_s"])
    assert all(result["outputs_match"].values())


def test_a_build_whose_rounds_would_take_too_long_keeps_its_own_timing(order, monkeypatch):
    """With no time for rounds (TVM alone on the SSD: 45 s a run), each build keeps its first timing, and says why."""
    monkeypatch.setattr(bench, "ROUNDS_BUDGET_S", 0.0)
    result = bench.bench_model(DEMO, **KW)
    assert order == []
    assert [e["runs"] for e in result["backends"].values()] == [1, 3, 3]
    apart = [n for n in result["notes"] if " timed apart, " in n]
    assert [n.split(" ")[0] for n in apart] == ["tvm", "onnxruntime", "onnxruntime_unpruned"]
    assert apart[0].startswith("tvm timed apart, 1 time(s), without warm-up, at ")
    assert apart[0].endswith(": 3 rounds would take over 0 µs")
    assert not [n for n in result["notes"] if "rounds, each build once a round" in n]
