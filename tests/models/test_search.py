"""The placement search, measured for real: the demo and a small conv model, each through every step.

Nothing here asserts a time. What is checked: the shortest path picks the
cheapest placement among every one its measurements cover (enumerated
exhaustively), the chosen placement is the least median of the finals (the
fastest placements built end to end that compute TVM alone's outputs, timed
again round-robin), a repeat measures nothing, and a
placement whose outputs break (OpenVINO in bf16) is rejected and said so.
"""

import importlib.util
import json
import re

import numpy as np
import pytest
from tvm import relax

from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.measure import search
from byoc_workbench.measure.search import learn, paths
from byoc_workbench.measure.time import clock, timing
from byoc_workbench.session import Workbench

pytest.importorskip("onnxruntime", reason="the search's offloading backends need onnx and onnxruntime")
HAS_OPENVINO = importlib.util.find_spec("openvino") is not None
BACKENDS = ("onnxruntime", "openvino", "tvm") if HAS_OPENVINO else ("onnxruntime", "tvm")
op = relax.op


def small_conv_model():
    """conv+bias+relu, a pool, a second conv, a host op between units, a lone multiply, reshapes and a concat."""
    rng = np.random.RandomState(0)
    w1 = relax.const(rng.uniform(-0.3, 0.3, (8, 4, 3, 3)).astype("float32"))
    b1 = relax.const(rng.uniform(-0.1, 0.1, (1, 8, 1, 1)).astype("float32"))
    w2 = relax.const(rng.uniform(-0.3, 0.3, (8, 8, 3, 3)).astype("float32"))
    x = relax.Var("x", relax.TensorType((1, 4, 16, 16), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(op.nn.relu(op.add(op.nn.conv2d(x, w1, padding=1), b1)))
            p = bb.emit(op.nn.max_pool2d(a, pool_size=2, strides=2))
            c = bb.emit(op.nn.relu(op.nn.conv2d(p, w2, padding=1)))
            s = bb.emit(op.sigmoid(op.sum(c, axis=[1], keepdims=True)))  # rules switched off: host ops
            m = bb.emit(op.multiply(s, relax.const(np.float32(-1.0))))
            t = bb.emit(op.permute_dims(op.reshape(c, (1, 8, 64)), [0, 2, 1]))
            out = bb.emit_output(op.concat([op.reshape(t, (1, 512)), op.reshape(m, (1, 64))], axis=1))
        bb.emit_func_output(out)
    mod = bb.get()
    on = [r.qualified for r in Workbench(mod, "tensorrt").rules if r.name not in ("sum", "sigmoid")]
    wb = Workbench(mod, "tensorrt", enabled=on)
    return search.of(wb, [rng.uniform(-1, 1, (1, 4, 16, 16)).astype("float32")], name="small conv model")


def check_search(result, subject, cache):
    """What every search must satisfy, whatever the timings were."""
    # Every placement the measurements cover, enumerated exhaustively: none is cheaper than the shortest path's.
    per_unit = [
        paths.unit_paths(u["name"], u["members"], u["seams"], result.backends, result.cost) for u in result.units
    ]
    every = sorted(paths.every_placement(per_unit))
    assert len(every) >= len(result.backends) ** len(result.units)
    rest = result.measurements["rest_s"]
    ranked = [r for r in result.placements if re.fullmatch(r"rank \d+( = .*)?", r.what)]
    assert ranked[0].what.startswith("rank 1") and ranked[0].assign in [dict(p) for _, p in every]
    assert [r.predicted_s for r in ranked] == sorted(r.predicted_s for r in ranked)
    # The search learnt from its end-to-end builds: by the costs as learnt (result.cost), every placement
    # predicted faster than the fastest one measured was measured too, unless the learning's builds ran out.
    learnt = [r for r in result.placements if "after learning" in r.what]
    best = min(r.measured_s for r in result.placements if r.measured_s and r.equal and not r.rejected)
    ahead = [dict(p) for t, p in every if t + rest < best * (1 - learn.MARGIN)]
    tried = [r.assign for r in result.placements]
    assert len(learnt) == 3 or all(a in tried for a in ahead), (ahead, tried)
    # The finals: the fastest placements measured end to end that gave TVM alone's outputs, timed again
    # round-robin; the least median is chosen, whatever the shortest path predicted.
    built = [r for r in result.placements if r.measured_s is not None]
    assert len(built) >= 4
    chosen = result.chosen
    assert chosen is not None and chosen.equal and chosen.measured_s is not None
    finals = [f for f in result.finals if f.placement]
    assert 1 <= len(finals) <= 3 and all(len(f.times) == len(finals[0].times) >= 5 for f in result.finals)
    assert {f.what for f in finals} == {r.what for r in result.placements if r.final_s is not None}
    assert chosen.final_s == min(f.median_s for f in finals)
    left_out = [r.measured_s for r in built if r.equal and not r.rejected and r.final_s is None]
    assert max(r.measured_s for r in built if r.final_s is not None) <= min(left_out, default=float("inf"))
    assert all(r.differs == [] for r in result.placements if r.assign == chosen.assign)
    data = json.loads(json.dumps(result.to_json()))
    assert {"placements", "chosen", "baseline", "search_s", "machine"} <= set(data)
    assert {"assign", "predicted_s", "measured_s"} <= set(data["placements"][0])
    assert {"tvm", "pruned", "unpruned", "onnxruntime_alone"} <= set(data["baseline"])
    assert data["chosen"]["assign"] == chosen.assign
    assert data["fastest"] == min(data["finals"], key=lambda f: f["median_s"])["what"]
    assert {"median_s", "spread", "rounds"} <= set(data["finals"][0])
    # A repeat measures nothing and finds the same.
    again = search.search(subject, result.backends, runs=3, cache=cache, only_cached=True)
    assert again.measurements["builds"] == 0
    assert again.chosen.assign == chosen.assign
    assert [r.predicted_s for r in again.placements] == [r.predicted_s for r in result.placements]


@pytest.fixture(scope="module")
def demo_search(tmp_path_factory):
    subject = search.load({"kind": "demo"})
    cache = search.Cache(tmp_path_factory.mktemp("search"))
    return subject, cache, search.search(subject, BACKENDS, runs=3, cache=cache)


def test_search_on_the_demo(demo_search):
    subject, cache, result = demo_search
    assert [u["name"] for u in result.units] == ["byoc_target_0", "byoc_target_1", "byoc_target_2"]
    assert [u["seams"] for u in result.units] == [[], [], [1]], "the conv+reshape unit is cut between its two"
    assert any("[0:1]" in label for r in result.placements for label in r.assign)
    check_search(result, subject, cache)
    assert "chosen: " in result.text() and "<table>" in result._repr_html_()


def test_the_summary_line_reads_the_finals_the_table_shows(demo_search):
    """A baseline build that ran in the finals (found by its placement, whatever its row is called) is
    compared with the chosen placement by the two finals' medians, never by an earlier measurement."""
    _, _, result = demo_search
    chosen, speed = result.chosen, result.speedup
    assert set(speed) == {f"vs_{k}" for k in result.baseline}
    finalists = {tuple(sorted(r.assign.items())): r.final_s for r in result.placements if r.final_s is not None}
    whole = {f.what: f.median_s for f in result.finals if not f.placement}
    for label, assign in result.baseline_assign.items():
        theirs = whole.get(label) or finalists.get(tuple(sorted(assign.items())))
        if theirs is not None:  # it ran in the finals: the same rounds as the chosen one
            assert speed[f"vs_{label}"] == pytest.approx(theirs / chosen.final_s), label
        else:  # which placements reach the finals depends on the machine's speed: its own measurement
            assert speed[f"vs_{label}"] == pytest.approx(result.baseline[label] / chosen.measured_s), label
    summary = next(line for line in result.text().splitlines() if line.startswith("chosen against the baselines"))
    for label, ratio in speed.items():
        said = f"{ratio:.2f}x faster" if ratio >= 1 else f"{1 / ratio:.2f}x slower"
        assert f"{label.removeprefix('vs_')} {said}" in summary


def test_the_widget_draws_the_picked_placement_in_its_backends_colours(demo_search):
    from byoc_workbench.widgets.search import search_widget

    _, _, result = demo_search
    w = search_widget(result)
    assert w.picker.options[0][0].startswith("chosen: ") and len(w.picker.options) >= 4
    chosen_svg = w.view.svg
    assert all(b in chosen_svg for b in set(result.chosen.assign.values()) - {"tvm"})
    other = next(k for k, (_, assign) in enumerate(w.options) if assign != result.chosen.assign)
    w.picker.value = other
    assert w.view.svg != chosen_svg and "placement" in w.table.value


def test_cli_search_writes_json_text_and_diagram(tmp_path, monkeypatch, capsys):
    from byoc_workbench import cli

    monkeypatch.setenv("BYOC_WORKBENCH_CACHE", str(tmp_path / "cache"))
    args = [
        "search",
        "demo",
        "--backends",
        "onnxruntime,tvm",
        "--runs",
        "2",
        "--top",
        "1",
        "--out",
        str(tmp_path / "o"),
    ]
    assert cli.main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["chosen"]["assign"] and data["baseline"]["tvm"] > 0
    assert json.loads((tmp_path / "o" / "search.json").read_text()) == data
    assert (tmp_path / "o" / "search.svg").read_text().lstrip().startswith(("<?xml", "<svg"))
    assert cli.main(["search", "demo", "--backends", "onnxruntime,tvm", "--runs", "2", "--top", "1", "--cached"]) == 0
    assert "0 builds measured" in capsys.readouterr().out
    assert cli.main(["search", "demo", "--backends", "tvm"]) == 2
    assert "needs a backend that offloads" in capsys.readouterr().err


def test_search_on_a_small_conv_model(tmp_path, monkeypatch):
    subject = small_conv_model()
    cache = search.Cache(tmp_path)
    compiled, build = [], timing.build
    monkeypatch.setattr(timing, "build", lambda *a, **k: compiled.append(a) or build(*a, **k))
    result = search.search(subject, BACKENDS, runs=3, cache=cache)
    monkeypatch.undo()
    assert len(compiled) == result.measurements["builds"], "the finals time the builds measured, not new ones"
    assert [s["what"] for s in result.measurements["steps"]][-1] == "the finals"
    assert len(result.units) == 2 and all(u["seams"] for u in result.units)
    check_search(result, subject, cache)
    # TVM alone's outputs are the reference: the chosen placement computes them.
    ref = search.measure_placement(result.plan, subject, {u["name"]: "tvm" for u in result.units}, runs=1)[1]
    got = search.measure_placement(result.plan, subject, result.chosen.assign, runs=1, reference=ref)[0]
    assert got.check["equal"] and got.check["max_rel"] <= 1e-3


@pytest.mark.skipif(not HAS_OPENVINO, reason="openvino is not installed")
def test_a_reduced_precision_stands_beside_f32_and_is_chosen_only_when_its_outputs_pass(tmp_path, monkeypatch):
    """Asked for bf16, the search still ranks and builds at f32, then measures its best OpenVINO placements
    again with OpenVINO at bf16: each with its error against TVM alone. bf16 rounds the convolutions beyond
    the tolerance, so those variants are rejected, shown, and never chosen."""
    import openvino as ov

    if "BF16" not in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"):
        pytest.skip("this CPU has no bf16: OpenVINO's bf16 would run in f32")
    # Every OpenVINO placement that passed at f32 is measured again, not the three fastest: which three
    # were fastest is the machine's timing, and some runs they all kept the convolutions on TVM.
    monkeypatch.setattr("byoc_workbench.measure.search.reduced.VARIANTS", 100)
    subject = small_conv_model()
    result = search.search(subject, ("openvino", "tvm"), precision="bf16", runs=2, cache=search.Cache(tmp_path))
    reduced = [r for r in result.placements if r.precision == "bf16"]
    assert reduced and all(r.what.endswith("openvino at bf16") and r.measured_s for r in reduced)
    assert all(r.predicted_s is None for r in reduced), "no cost was measured at bf16: nothing to predict from"
    twins = {tuple(sorted(r.assign.items())) for r in result.placements if r.precision == "f32" and r.equal}
    assert all(tuple(sorted(r.assign.items())) in twins for r in reduced)  # beside an f32 placement that passed
    # OpenVINO keeps cheap ops in f32; the convolutions (tensorrt_0) are where bf16 rounds.
    convs = [r for r in reduced if r.assign.get("tensorrt_0") == "openvino"]
    assert convs and all(not r.equal and "max relative error" in r.rejected for r in convs)
    assert result.chosen is not None and result.chosen.precision == "f32" and result.chosen.equal
    assert all(f.what != r.what for f in result.finals for r in convs)  # a variant that failed is no finalist
    assert "openvino at bf16" in result.text() and result.to_json()["placements"][-1]["precision"] in ("f32", "bf16")


def test_torch_at_f16_stands_beside_f32_with_its_error(tmp_path, monkeypatch):
    """torch takes a precision as OpenVINO does, on any CPU: its best placements measured again at f16, each
    checked against TVM alone (f16 rounds the convolutions), never predicted, and chosen only if they pass."""
    pytest.importorskip("torchvision", reason="the torch backend needs the [pytorch] extra")
    monkeypatch.setattr("byoc_workbench.measure.search.reduced.VARIANTS", 100)
    subject = small_conv_model()
    result = search.search(subject, ("torch", "tvm"), precision="f16", runs=2, cache=search.Cache(tmp_path))
    reduced = [r for r in result.placements if r.precision == "f16"]
    assert reduced and all(r.what.endswith("torch at f16") and r.measured_s for r in reduced)
    assert all(r.predicted_s is None for r in reduced)
    convs = [r for r in reduced if r.assign.get("tensorrt_0") == "torch"]
    assert convs and all(r.equal or "max relative error" in r.rejected for r in convs)  # checked like any build
    assert result.chosen is not None and result.chosen.equal  # a variant is chosen only when its outputs pass
    assert "torch at f16" in result.text()


def test_one_candidate_measured_from_a_serialisable_description():
    description = {
        "model": {"kind": "demo"},
        "backends": ["onnxruntime", "tvm"],
        "assign": {"byoc_target_0": "tvm", "byoc_target_1": "onnxruntime", "byoc_target_2": "onnxruntime"},
        "runs": 2,
    }
    out = json.loads(json.dumps(search.measure_candidate(json.loads(json.dumps(description)))))
    assert out["units"] == ["byoc_target_0", "byoc_target_1", "byoc_target_2"]
    assert out["costs"]["byoc_target_1"]["backend"] == "onnxruntime" and out["costs"]["byoc_target_1"]["compute_s"] > 0
    assert out["costs"]["byoc_target_0"]["backend"] == "tvm" and len(out["costs"]["byoc_target_0"]["members_s"]) == 1
    assert out["end_to_end_s"] > 0 and "cpu" in out["machine"]


def test_a_reduced_precision_needs_openvino():
    with pytest.raises(WorkbenchError, match="precision bf16 is OpenVINO's and torch's; none is among the backends"):
        search.search(search.load({"kind": "demo"}), "onnxruntime,tvm", precision="bf16")


@pytest.mark.parametrize(
    "backends, message",
    [
        ("tvm", "needs a backend that offloads"),
        ("onnxruntim,tvm", "did you mean onnxruntime"),
        ("auto", "not auto"),
        ("tensorrt,tvm", "tensorrt cannot run here"),  # its placements would be TVM's, named after it
    ],
)
def test_bad_backends_are_one_line(backends, message):
    from byoc_workbench.backends import registry

    if backends.startswith("tensorrt") and registry.missing("tensorrt") is None:
        pytest.skip("TensorRT runs here")
    with pytest.raises(WorkbenchError) as err:
        search.check_backends(backends)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_k_best_equals_the_exhaustive_order():
    per_unit = [
        [(1.0, (("a", "x"),)), (3.0, (("a", "y"),))],
        [(0.5, (("b", "x"),)), (0.7, (("b", "y"),)), (2.0, (("b", "z"),))],
    ]
    assert [t for t, _ in paths.k_best(per_unit, 6)] == sorted(t for t, _ in paths.every_placement(per_unit))


def test_a_refusal_is_never_kept_as_a_time(tmp_path, monkeypatch):
    """Without a C compiler the c backend refuses every unit: the host runs them, so no time is c's, and
    nothing is cached for it; with the compiler back, c is measured."""
    pytest.importorskip("tvm")
    subject = search.load({"kind": "demo"})
    cache = search.Cache(tmp_path / "search")
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    monkeypatch.setenv("BYOC_WORKBENCH_CACHE", str(tmp_path / "cache"))
    refused = search.search(subject, ("c", "tvm"), runs=2, cache=cache)
    assert "c_alone" not in refused.baseline and "unpruned" not in refused.baseline
    assert any(n.startswith("c alone is not timed: c refused") for n in refused.notes)
    assert all("c" not in r.assign.values() for r in refused.placements if r.final_s is not None)
    assert all(r.rejected.startswith("c refused") for r in refused.placements if "c" in r.assign.values())
    from byoc_workbench.core import text

    assert "Infinity" not in text.to_json(refused.to_json())  # strict JSON for every reader
    monkeypatch.delenv("CC")
    measured = search.search(subject, ("c", "tvm"), runs=2, cache=cache)
    assert measured.measurements["builds"] > 0 and "c_alone" in measured.baseline


def _retyped(text: str) -> str:
    """A sealed entry whose first number became a string: it still parses, and its seal no longer holds."""
    import re

    return re.sub(r"(\d+\.\d+)", r'"\1"', text, count=1)


def _nudged(text: str) -> str:
    """A sealed entry with a time made ten times smaller: parses, types right, and lies."""
    import re

    return re.sub(r"(\d+\.\d+)", lambda m: repr(float(m.group(1)) / 10), text, count=1)


DAMAGES = {
    "truncated": lambda b: b[: len(b) // 3],
    "empty": lambda b: b"",
    "binary": lambda b: bytes(range(256)),
    "foreign json": lambda b: b'{"measured": {"hello": 1}, "finals": 3, "entries": []}',
    "retyped": lambda b: _retyped(b.decode(errors="replace")).encode(),
    "nudged": lambda b: _nudged(b.decode(errors="replace")).encode(),
}


class _Watching(search.Cache):
    """A cache that notes each entry it hands back, as the bytes it read."""

    def __init__(self, root):
        super().__init__(root)
        self.handed: list = []

    def get(self, kind, key):
        value = super().get(kind, key)
        if value is not None:
            self.handed.append(self._path(kind, key).read_bytes())
        return value


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_cache_is_measured_again_never_trusted(demo_search, tmp_path, damage):
    """Every entry of every kind (measurements, finals, the reference arrays) damaged one way: the search
    measures them again, hands back nothing damaged, and chooses by its own finals, as a search on an empty
    cache does."""
    import shutil

    subject, cache, result = demo_search
    root = tmp_path / "search"
    shutil.copytree(cache.root, root)
    kinds, damaged = set(), set()
    for path in root.rglob("*"):
        if path.is_file() and not path.name.endswith(".sum"):
            path.write_bytes(DAMAGES[damage](path.read_bytes()))
            kinds.add(path.parent.name)
            damaged.add(path.read_bytes())
    assert {"build", "finals", "reference"} <= kinds  # the demo has no whole-model anchor
    watching = _Watching(root)
    again = search.search(subject, result.backends, runs=3, cache=watching)
    assert again.measurements["builds"] >= 1
    assert not damaged & set(watching.handed), "a damaged entry was handed back"  # only what this search wrote
    assert again.chosen is not None and again.chosen.equal and again.chosen.measured_s is not None
    # The choice is this search's own: the fastest placement of its own finals. Two placements a few percent
    # apart can swap between two runs on a busy machine, as they can between two searches on an empty cache;
    # the damaged entries above are what must never decide it.
    placed = [f for f in again.finals if f.placement]
    if placed:
        assert again.chosen.what == min(placed, key=lambda f: f.median_s).what
    assert again.chosen.assign == result.chosen.assign or any(f.what == again.chosen.what for f in placed)


def test_entries_swapped_between_keys_are_measured_again_never_trusted(demo_search, tmp_path):
    """Entries of one kind trading places, seals and all (a copy or a sync gone wrong): each seal names the key
    its entry was written for, so none is handed back under the other's key."""
    import shutil

    subject, cache, result = demo_search
    root = tmp_path / "search"
    shutil.copytree(cache.root, root)
    swapped = set()
    for folder in root.iterdir():
        entries = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.endswith(".sum"))
        for a, b in zip(entries[::2], entries[1::2]):
            for x, y in ((a, b), (a.with_name(a.name + ".sum"), b.with_name(b.name + ".sum"))):
                parked = x.with_name(".parked")
                x.rename(parked)
                y.rename(x)
                parked.rename(y)
            swapped |= {a.read_bytes(), b.read_bytes()}
    assert swapped
    watching = _Watching(root)
    again = search.search(subject, result.backends, runs=3, cache=watching)
    assert not swapped & set(watching.handed), "an entry was handed back under another key"
    assert again.chosen is not None and again.chosen.equal


def test_the_choice_is_the_best_of_every_placement_timed_together(tmp_path):
    """Every whole-unit placement of the demo over onnxruntime and tvm, built and timed round-robin with
    the search's choice: none is faster than the choice beyond the rounds' own spread."""
    import itertools

    from byoc_workbench.measure.search import finals
    from byoc_workbench.measure.time import timing

    subject = search.load({"kind": "demo"})
    result = search.search(subject, ("onnxruntime", "tvm"), runs=3, cache=search.Cache(tmp_path))
    units = [u["name"] for u in result.units]
    every = [dict(zip(units, combo)) for combo in itertools.product(("onnxruntime", "tvm"), repeat=len(units))]
    chosen_whole = {k.split("[", 1)[0] for k in result.chosen.assign} == set(result.chosen.assign)
    if not chosen_whole:  # a seam placement: time it beside the whole-unit ones
        every.append(result.chosen.assign)
    args = timing.tensors(subject.inputs)
    builds = [timing.build(result.plan.stages(a, {"precision": "f32"})) for a in every]
    calls = {k: (lambda vm=b.vm: vm["main"](*args)) for k, b in enumerate(builds)}
    times = clock.round_robin(calls, rounds=9)
    medians = {k: finals.Final(str(k), t) for k, t in times.items()}
    mine = medians[every.index(result.chosen.assign)]
    best = min(medians.values(), key=lambda f: f.median_s)
    if mine.median_s > best.median_s * (1 + max(mine.spread, best.spread)):  # a burst of load, or slower:
        pair = {0: calls[int(mine.what)], 1: calls[int(best.what)]}  # the two again, head to head, longer
        again = clock.round_robin(pair, rounds=21)
        mine, best = finals.Final(mine.what, again[0]), finals.Final(best.what, again[1])
    assert mine.median_s <= best.median_s * (1 + max(mine.spread, best.spread)), (mine, best)


def test_a_model_no_rule_claims_has_nothing_to_place():
    from byoc_workbench.models import demo

    wb = Workbench(demo.demo_module(), "byoc-target", enabled=[])
    with pytest.raises(WorkbenchError, match="claims an op of .*: nothing to place"):
        search.search(search.of(wb, demo.demo_inputs()), backends="onnxruntime,tvm")


def test_another_runs_count_is_another_measurement(demo_search):
    """--runs is in the cache's key: a search asking for more runs measures them, never reuses fewer."""
    subject, cache, result = demo_search
    with pytest.raises(search.NotCached):
        search.search(subject, result.backends, runs=5, cache=cache, only_cached=True)
