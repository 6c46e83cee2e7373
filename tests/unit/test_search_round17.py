"""Round 17, B3: what the search says of its finals is true of its finals.

The rows and the finals' times are made-up measurement records (data), passed to the search's own functions.
"""

from byoc_workbench.measure.search import core, finals
from byoc_workbench.measure.search.result import Row, SearchResult

PRUNED = {"u0": "tvm", "u1": "onnxruntime"}
ON_ORT = {"u0": "onnxruntime", "u1": "onnxruntime"}


def _rows(first_s: float, second_s: float) -> list:
    """The shortest path's first (``first_s`` its own end-to-end measurement) and a second placement."""
    first = Row(PRUNED, 0.024, first_s, equal=True, what="rank 1 = pruned")
    return [first, Row(ON_ORT, 0.0243, second_s, equal=True, what="rank 2 = each unit on onnxruntime")]


def _finals(rows: list, medians: list) -> list:
    return [finals.Final(r.what, [m * 0.8, m, m * 1.2]) for r, m in zip(rows, medians)]


def _result(rows: list, chosen, baseline: dict, heats: list) -> SearchResult:
    assigns = {"tvm": {"u0": "tvm", "u1": "tvm"}, "pruned": PRUNED, "onnxruntime_alone": ON_ORT}
    return SearchResult(
        model="demo",
        backends=("onnxruntime", "tvm"),
        precision="f32",
        units=[],
        placements=rows,
        chosen=chosen,
        baseline=baseline,
        search_s=1.0,
        machine={"cpu": "a CPU", "cores": 2},
        measurements={"builds": 3, "cache_hits": 0},
        notes=[],
        finals=heats,
        baseline_assign={k: assigns[k] for k in baseline},
    )


def test_a_first_placement_cut_before_the_finals_is_said_cut_not_chosen_over():
    """One noisy measurement (4.9 ms against 23.0 ms) left rank 1 out of the finals by the 3x rule; the note said
    "the finals chose rank 2 over rank 1" though rank 1 never ran in them."""
    rows = _rows(0.023, 0.0049)
    first, second = rows
    assert finals.finalists(rows) == [second]
    notes: list = []
    assert core._by_finals(rows, first, _finals([second], [0.0239]), {}, notes) is second
    assert notes == [
        "rank 1 = pruned, the shortest path's first, was not in the finals: its own end-to-end measurement, 23.0 ms, "
        "was over 3x that of rank 2 = each unit on onnxruntime, 4.9 ms; chosen instead, the finals' fastest "
        "placement, rank 2 = each unit on onnxruntime"
    ]


def test_a_placement_past_the_finalists_is_said_left_out_for_that():
    rows = [Row({"u0": b}, 0.01, 0.010 + k / 1e3, equal=True, what=f"rank {k}") for k, b in enumerate("abcd", 1)]
    assert finals.finalists(rows) == rows[:3]
    assert [finals.left_out(rows, r) for r in rows] == [
        "",
        "",
        "",
        "its own end-to-end measurement, 14.0 ms, was slower than the 3 finalists' (rank 1, rank 2, rank 3)",
    ]


def test_the_finals_choose_over_the_first_placement_only_when_both_ran_in_them():
    rows = _rows(0.010, 0.009)
    first, second = rows
    assert finals.finalists(rows) == [second, first]
    notes: list = []
    assert core._by_finals(rows, first, _finals([second, first], [0.008, 0.011]), {}, notes) is second
    assert notes == [
        "the finals chose rank 2 = each unit on onnxruntime over rank 1 = pruned, the shortest path's first"
    ]


def test_a_ratio_says_whether_it_comes_from_the_finals_or_from_their_own_measurements():
    """The chosen one measured 4.9 ms on its own and 23.9 ms in the finals; "pruned 4.71x faster" was its own
    measurement against pruned's, printed beside the finals' median as if it were the finals'."""
    rows = _rows(0.023, 0.0049)
    first, second = rows
    heats = _finals([second], [0.0239])
    core._by_finals(rows, first, heats, {}, [])
    result = _result(rows, second, {"tvm": 0.433, "pruned": 0.023, "onnxruntime_alone": 0.0049}, heats)
    assert result.speedup == {"vs_tvm": 0.433 / 0.0049, "vs_pruned": 0.023 / 0.0049, "vs_onnxruntime_alone": 1.0}
    [line] = [line for line in result.text().splitlines() if line.startswith("chosen against the baselines")]
    assert line == (
        "chosen against the baselines: tvm 88.37x faster by their own measurements, pruned 4.69x faster by their "
        "own measurements, onnxruntime_alone 1.00x faster in the finals"
    )


def test_without_finals_every_ratio_is_their_own_measurements_and_says_nothing_more():
    rows = _rows(0.023, 0.0049)
    result = _result(rows, rows[1], {"pruned": 0.023}, [])
    assert "chosen against the baselines: pruned 4.69x faster" in result.text().splitlines()
