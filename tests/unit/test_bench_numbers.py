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
    # The guide's build time is a first run's, from an empty cache, beside the cached one: a JSON whose first
    # build was the cached one's (a warm cache) fails.
    other = copy.deepcopy(bench)
    other["ssd"]["backends"]["tvm"]["build_s"] = other["ssd_warm"]["backends"]["tvm"]["build_s"]
    assert any("first was not slower" in p for p in bench_numbers.check(other))
    # The guide quotes notebook 05's time with the [pytorch] extra: a JSON where it ran without torch fails.
    other = copy.deepcopy(bench)
    other["notebooks_how"]["torch"] = None
    assert any("ran without" in p for p in bench_numbers.check(other))


def test_the_seat_numbers_follow_the_peaks():
    bench = copy.deepcopy(bench_numbers.load())
    peaks = bench["notebooks_peak_mb"]
    peaks.update({name: 1000.0 for name in peaks} | {"02_ssd_tensorrt.ipynb": 3000.0})
    known = bench_numbers.values(bench)
    assert known["nb02_mb"] == "3000 MB" and known["seat_gb"] == "5 GB"  # 1.5 x 3000 MB, rounded up
    # Notebook 06's need is a pick and the kernel beside it (benchmarks/results/memory.json), over 2 GB.
    assert known["binder_over"] == "02 and 06" and known["binder_fits"] == "01, 03, 04 and 05"


def test_the_install_size_parts():
    """make setup's part is requirements.txt's packages and what they pull in; the extra's is torch's own."""
    import install_size

    setup = install_size.closure(install_size._requirements(["apache-tvm", "# a comment", "jupyterlab  # Lab"]))
    assert {"apache-tvm", "numpy", "jupyterlab", "jupyter-server"} <= setup and "torch" not in setup
    assert install_size.dist_mb({"numpy"}) > 1 and install_size.dist_mb({"not-installed"}) == 0


def test_a_json_in_another_layout_fails_the_check():
    """The committed JSON is in the layout every bench result has; an older one (a key renamed) is refused."""
    from byoc_workbench.measure.bench.bench import LAYOUT

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


# A measured number as the instructors' guide could type it: a time, a size or a ratio ("345 MB", "2.1 GB",
# "13.4 s", "3 min", "20 minutes", "96x"). Not a clock time of the agenda ("0:10-0:35"), a shape or a screen
# ("512x512", "1366x768"), a version ("Python 3.11", "mxnet 1.9.1"), or a length in words ("90-minute").
MEASURED = re.compile(
    r"(?<![\w.:])\d+(?:\.\d+)?\s?(?:ms|µs|s|sec|seconds?|min|minutes?|h|hours?|[kKMG]i?B|x|×|%)(?![\w-])"
)
# Numbers the guide types that are not measured here, each with the reason it may stay.
NOT_MEASURED = {
    "mybinder.org's limit of 2 GB": "mybinder.org's own memory limit, quoted from its documentation",
}
INSTRUCTORS = ROOT / "docs" / "instructors.md"


def test_the_measured_number_pattern():
    for typed in ("peaks at 345 MB", "2.1 GB", "13.4 s", "in 3 min", "about 20 minutes", "96x faster", "1 GiB"):
        assert MEASURED.search(typed), typed
    for fine in ("0:10-0:35", "1366x768", "512x512", "Python 3.11", "mxnet 1.9.1", "a 90-minute plan", "2 cores"):
        assert not MEASURED.search(fine), fine


def test_the_instructors_guide_types_no_measured_number():
    text = bench_numbers.MARKER.sub("", INSTRUCTORS.read_text())
    for allowed in NOT_MEASURED:
        assert allowed in text, f"{allowed!r} is no longer in the guide: drop it from NOT_MEASURED"
        text = text.replace(allowed, "")
    typed = [m[0] for m in MEASURED.finditer(text)]
    assert not typed, f"docs/instructors.md types {typed}: quote them from the bench JSON (tools/bench_numbers.py)"


def test_every_notebook_has_an_agenda_row_with_its_time_and_memory():
    """Each notebook is a row of the agenda (a clock time first), and the row quotes its machine time and its
    kernel's peak memory from the bench JSON; the JSON has both for every notebook."""
    rows = re.findall(r"^\| \d:\d\d-\d:\d\d \|.*$", INSTRUCTORS.read_text(), re.MULTILINE)
    bench = bench_numbers.load()
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        named = [row for row in rows if f"`{nb.name}`" in row]
        assert named, f"no agenda row of docs/instructors.md names {nb.name}"
        markers = {name for row in named for name, _ in bench_numbers.MARKER.findall(row)}
        memory = "zoo_seat_mb" if nb.name.startswith("06") else f"nb{nb.name[:2]}_mb"  # 06: a pick's child too
        assert {f"nb{nb.name[:2]}_s", memory} <= markers, (nb.name, markers)
        assert nb.name in bench["notebooks"] and nb.name in bench["notebooks_peak_mb"], nb.name
