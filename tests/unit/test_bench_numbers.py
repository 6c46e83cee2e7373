"""Every timing number in the README, the docs and the notebooks' prose comes from one committed bench JSON."""

import copy
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import bench_numbers  # noqa: E402

# A measured time or ratio as prose writes it: "0.168 s", "27 s", "2.3 min", "198x" (not "512x512", and not a
# session's length in words, "about 20 minutes").
TIMING = re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|s|µs|min)\b|\b\d+(?:\.\d+)?x\b(?!\d)")
# The seed's own 2020 figures on a T4, quoted as the seed's: not this project's measurements.
SEED = ("50 ms with TVM CUDA", "25 ms with TensorRT")


def _prose(path: Path) -> str:
    """The text a reader reads: the README, or a notebook's markdown cells (its outputs are the reader's own)."""
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text())["cells"]
        return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return path.read_text()


def test_every_quoted_number_is_the_bench_jsons():
    assert bench_numbers.RESULTS.is_file(), "make bench writes benchmarks/results/bench.json; commit it"
    assert bench_numbers.check() == []
    quoted = [m for p in bench_numbers.files() for m in bench_numbers.MARKER.findall(p.read_text())]
    assert len(quoted) >= 15 and {"machine", "speedup", "prune_verdict", "nb02_s"} <= {n for n, _ in quoted}


def test_no_timing_number_is_typed_outside_the_markers():
    paths = [ROOT / "README.md", *sorted((ROOT / "notebooks").glob("*.ipynb"))]
    for path in paths:
        text = bench_numbers.MARKER.sub("", _prose(path))
        for quote in SEED:
            text = text.replace(quote, "")
        typed = TIMING.findall(text)
        assert not typed, f"{path.name} types {typed}: quote them from the bench JSON (tools/bench_numbers.py)"


def test_a_number_that_disagrees_fails_the_check():
    bench = bench_numbers.load()
    other = copy.deepcopy(bench)
    other["ssd"]["backends"]["tvm"]["median_s"] *= 2
    problems = bench_numbers.check(other)
    assert any("tvm_alone_s" in p for p in problems), problems
    # The prose says that on a CPU not pruning is faster: a JSON where it is not fails too.
    other = copy.deepcopy(bench)
    b = other["ssd"]["backends"]
    b["onnxruntime_unpruned"]["min_s"] = 2 * b["onnxruntime"]["min_s"]
    assert any("not pruning is faster" in p for p in bench_numbers.check(other))


def test_a_json_in_another_layout_fails_the_check():
    """The committed JSON is in the layout every bench result has; an older one (a key renamed) is refused."""
    from byoc_workbench.measure.bench import LAYOUT

    bench = bench_numbers.load()
    assert list(bench["ssd"]) == list(LAYOUT)
    other = copy.deepcopy(bench)
    other["ssd"]["outputs_match_tvm"] = other["ssd"].pop("outputs_match")
    assert any("not in bench's layout" in p and "outputs_match_tvm" in p for p in bench_numbers.check(other))


def test_ratios_name_the_machine_they_came_from():
    known = bench_numbers.values(bench_numbers.load())
    assert "cores" in known["machine"] and "load average" in known["machine"]
    for path in bench_numbers.files():
        names = [n for n, _ in bench_numbers.MARKER.findall(path.read_text())]
        if any(n in ("speedup", "vs_mxnet", "vs_ort_whole", "prune_verdict") for n in names):
            assert "machine" in names, f"{path.name} quotes a ratio without the machine it came from"
