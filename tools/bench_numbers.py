"""Every timing number of the README, the docs and the notebooks' prose, from one committed bench JSON.

    python tools/bench_numbers.py record   # measure: bench ssd --json, doctor, each notebook, the install (minutes)
    python tools/bench_numbers.py write    # fill every <!-- bench:NAME -->VALUE<!-- /bench --> from the JSON
    python tools/bench_numbers.py check    # exit 1 when a quoted number disagrees with the JSON

``make bench`` runs ``record`` and ``write``; ``tests/unit/test_bench_numbers.py`` runs ``check``. The JSON
(``benchmarks/results/bench.json``) keeps the machine and its load average beside the numbers, and
every ratio quoted names the machine it came from. Every figure is a first run's, from an empty cache, as a
seat meets it; where a second run differs (a build kept, a run kept), the warm figure is recorded beside it from
the same cache, right after.
"""

from __future__ import annotations

import contextlib
import datetime
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

from byoc_workbench.core.files import CACHE_ENV
from byoc_workbench.measure.time import clock

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "bench.json"
MEMORY = ROOT / "benchmarks" / "results" / "memory.json"  # benchmarks/bench_memory.py: notebook 06's picks
MARKER = re.compile(r"<!-- bench:(\w+) -->(.*?)<!-- /bench -->")
OFFLOAD = "onnxruntime"  # the offloading backend every seat has
BINDER_MB = 2048  # mybinder.org's memory limit per user
NB02 = "02_ssd_tensorrt.ipynb"
MXNET_EXE = ROOT / ".venv-mxnet" / "bin" / "byoc-workbench"  # make test-mxnet's venv, where MXNet is


def files() -> list:
    """The files whose prose quotes measured numbers."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "notebooks").glob("*.ipynb"))]


def seconds(s: float) -> str:
    """``0.168 s``, ``27.4 s``, ``2.3 min``: as the prose quotes times."""
    if s >= 90:
        return f"{s / 60:.1f} min"
    return f"{s:.1f} s" if s >= 10 else f"{s:.2f} s" if s >= 1 else f"{s:.3f} s"


def megabytes(mb: float) -> str:
    """``345 MB``, ``1.9 GB``: as the prose quotes the install's size on disk (MB and GB of 2**20 and 2**30 bytes)."""
    return f"{mb:.0f} MB" if mb < 1000 else f"{mb / 1024:.1f} GB"


def seat_gb(peaks: dict) -> int:
    """A seat's memory: half as much again as the largest kernel's peak (``{notebook: MB}``), in whole GB."""
    return math.ceil(1.5 * max(peaks.values()) / 1024)


def _notebook_list(names: list) -> str:
    """``01, 04 and 05`` (``none`` for no notebook)."""
    nums = [n[:2] for n in names]
    return "none" if not nums else nums[0] if len(nums) == 1 else f"{', '.join(nums[:-1])} and {nums[-1]}"


def values(bench: dict) -> dict:
    """The named strings the prose quotes, computed from the bench JSON."""
    ssd = bench["ssd"]
    b, a = ssd["backends"], ssd["anchors"]
    m = ssd["machine"]
    pruned, unpruned = b[OFFLOAD]["median_s"], b[f"{OFFLOAD}_unpruned"]["median_s"]
    # Which build is faster, by the rule notebook 02 prints its own verdict with (clock.verdict).
    latency = {k: clock.Latency(*(b[k][f] for f in ("median_s", "min_s", "max_s", "runs"))) for k in b}
    prune = clock.verdict("pruned", latency[OFFLOAD], "unpruned", latency[f"{OFFLOAD}_unpruned"])
    load = f", load average {m['load_average']:g}" if m.get("load_average") is not None else ""
    out = {
        "machine": f"{m['cpu']}, {m['cores']} cores{load}",
        "input": "x".join(str(d) for d in ssd["input_shape"][2:]),
        "tvm_alone_s": seconds(b["tvm"]["median_s"]),
        "tvm_build_s": seconds(b["tvm"]["build_s"]),
        "tvm_build_warm_s": seconds(bench["ssd_warm"]["backends"]["tvm"]["build_s"]),
        "offloaded_s": seconds(pruned),
        "unpruned_s": seconds(unpruned),
        "offloaded_build_s": seconds(b[OFFLOAD]["build_s"]),
        "speedup": f"{ssd['speedup_vs_tvm'][OFFLOAD]:.0f}x",
        "ort_whole_s": seconds(a["onnxruntime_whole_model"]["median_s"]),
        "vs_ort_whole": f"{pruned / a['onnxruntime_whole_model']['median_s']:.2f}x",
        "prune_verdict": f"{b[OFFLOAD]['runs']} runs each: {prune.line()}",
        "doctor_s": seconds(bench["doctor_s"]["first"]),
        "doctor_again_s": seconds(bench["doctor_s"]["again"]),
        **_mxnet(bench.get("ssd_mxnet")),
    }
    for name, s in bench["notebooks"].items():
        out[f"nb{name[:2]}_s"] = seconds(s)
    peaks = dict(bench["notebooks_peak_mb"])
    for name, mb in peaks.items():
        out[f"nb{name[:2]}_mb"] = f"{mb:.0f} MB"  # in MB, all of them, to compare with a limit such as 2 GB
    # Notebook 06 builds each pick in a child process that exits: what it needs of a seat is a pick and the kernel
    # beside it, from benchmarks/bench_memory.py's seven picks in a row.
    zoo = json.loads(MEMORY.read_text())
    largest = max(zoo["picks"], key=lambda pick: pick["peak_mb"])
    out["zoo_seat_mb"] = f"{zoo['seat_mb']:.0f} MB"
    out["zoo_held_mb"] = f"{zoo['max_held_mb']:.0f} MB"
    out["zoo_pick_mb"] = f"{largest['peak_mb']:.0f} MB ({largest['model']})"
    peaks["06_gluoncv_zoo.ipynb"] = zoo["seat_mb"]
    out["seat_gb"] = f"{seat_gb(peaks)} GB"
    out["binder_fits"] = _notebook_list([n for n, mb in sorted(peaks.items()) if mb < BINDER_MB])
    out["binder_over"] = _notebook_list([n for n, mb in sorted(peaks.items()) if mb >= BINDER_MB])
    first, again = bench["notebooks"][NB02], bench["nb02_again_s"]
    out["nb02_rerun"] = f"{seconds(again)}, {again / first:.2f}x of the first run it followed"
    install = bench["install"]
    out["install_mb"] = megabytes(install["setup_mb"])
    out["install_venv_mb"] = megabytes(install["venv_mb"])
    torch_mb = install["pytorch_extra_mb"]
    out["install_torch_mb"] = "not measured (torch was not installed)" if torch_mb is None else megabytes(torch_mb)
    return out


def _mxnet(ssd: dict | None) -> dict:
    """MXNet's own time and its ratio to the offloaded build, both from one bench run in make test-mxnet's venv
    (MXNet is a cross-check, never a seat's)."""
    if ssd is None or "mxnet" not in ssd["anchors"]:
        missing = "not measured (make bench measures it where make test-mxnet's Python 3.11 venv can be made)"
        return {"mxnet_s": missing, "vs_mxnet": "not measured"}
    mxnet, pruned = ssd["anchors"]["mxnet"]["median_s"], ssd["backends"][OFFLOAD]["median_s"]
    return {"mxnet_s": seconds(mxnet), "vs_mxnet": f"{mxnet / pruned:.1f}x"}


def claims(bench: dict) -> list:
    """What the prose says in words that the numbers must bear out; a line for each that they do not."""
    b = bench["ssd"]["backends"]
    wrong = []
    if not b[f"{OFFLOAD}_unpruned"]["min_s"] < b[OFFLOAD]["min_s"]:
        wrong.append("notebook 02 says that on a CPU not pruning is faster, and the bench JSON says otherwise")
    if bench["ssd"]["input_shape"][2:] != [512, 512]:
        wrong.append("notebook 02 says it uses bench's 512x512 input")
    if not bench["ssd"]["backends"]["tvm"]["build_s"] > bench["ssd_warm"]["backends"]["tvm"]["build_s"]:
        wrong.append("the guide quotes TVM alone's first build beside its cached one, and the first was not slower")
    if bench["notebooks_how"]["torch"] is None:
        wrong.append("docs/instructors.md quotes notebook 05's time with the [pytorch] extra, and it ran without")
    return wrong


def layout(bench: dict) -> list:
    """A line when the JSON's ``ssd`` result lacks a key of the layout every bench result has, or has one more."""
    from byoc_workbench.measure.bench.bench import LAYOUT

    got = set(bench["ssd"])
    if got == set(LAYOUT):
        return []
    missing, extra = sorted(set(LAYOUT) - got), sorted(got - set(LAYOUT))
    return [f"the bench JSON's ssd is not in bench's layout (missing {missing}, extra {extra}): record it again"]


def load(path: Path = RESULTS) -> dict:
    return json.loads(path.read_text())


def check(bench: dict | None = None) -> list:
    """One line for every quoted number that is not the JSON's, every unknown name, every claim the
    numbers do not bear out, and a JSON not in bench's layout; empty when all agree."""
    bench = bench or load()
    known = values(bench)
    problems = layout(bench) + claims(bench)
    for path in files():
        for name, value in MARKER.findall(path.read_text()):
            if name not in known:
                problems.append(f"{path.relative_to(ROOT)}: unknown bench number {name!r}")
            elif value != known[name]:
                problems.append(f"{path.relative_to(ROOT)}: {name} is {value!r}, the bench JSON gives {known[name]!r}")
    return problems


def write(bench: dict | None = None) -> list:
    """Fill every marker from the JSON; returns the files changed."""
    known = values(bench or load())
    changed = []
    for path in files():
        text = path.read_text()
        new = MARKER.sub(lambda m: f"<!-- bench:{m[1]} -->{known.get(m[1], m[2])}<!-- /bench -->", text)
        if new != text:
            path.write_text(new)
            changed.append(path)
    return changed


# The last cell, added to each notebook's run: the kernel's peak resident memory and its largest child's, in kB.
PEAK_CELL = """import resource, sys
_unit = 1024 if sys.platform == "darwin" else 1
try:
    _kb = int(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")))
except (OSError, StopIteration):
    _kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // _unit
print("bench-peak-kb", _kb, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // _unit)"""


@contextlib.contextmanager
def _environ(name: str, value: str):
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name)
        else:
            os.environ[name] = old


def _run_notebook(lab: Path, name: str) -> tuple:
    """Run ``lab/name`` top to bottom in a fresh kernel whose working directory is ``lab``: its wall time, the
    kernel's start included, and the peak resident memory in MB of the kernel and its largest child process
    together (an upper bound of what they held at once: a child that builds a pick, a compiler)."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(lab / name, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(PEAK_CELL))
    t0 = time.perf_counter()
    NotebookClient(nb, timeout=1800, kernel_name="python3", resources={"metadata": {"path": str(lab)}}).execute()
    wall = time.perf_counter() - t0
    peak = re.search(r"bench-peak-kb (\d+) (\d+)", "".join(o.get("text", "") for o in nb.cells[-1].outputs))
    return wall, (int(peak[1]) + int(peak[2])) / 1024


def _notebooks() -> tuple:
    """Every notebook, run as a seat runs it: from ``make lab``'s copies in a folder outside the repository,
    each with an empty cache of its own; then notebook 02 again with the cache its first run left (its builds,
    its run of TVM alone and its numerics references kept), as an attendee runs it again. Returns the wall times
    and the peaks, by notebook, and notebook 02's second wall time."""
    from lab_copies import sync

    times, peaks = {}, {}
    with tempfile.TemporaryDirectory(prefix="byoc-seat-") as tmp:
        lab = Path(tmp) / "lab"
        sync(ROOT / "notebooks", lab, fresh=True)
        assert ROOT not in lab.resolve().parents, lab
        for path in sorted(lab.glob("*.ipynb")):
            cache = Path(tmp) / f"cache-{path.name[:2]}"
            cache.mkdir()
            with _environ(CACHE_ENV, str(cache)):
                times[path.name], peaks[path.name] = _run_notebook(lab, path.name)
                if path.name == NB02:
                    again, _ = _run_notebook(lab, NB02)
    return times, peaks, again


def _torch() -> str | None:
    """The installed torch's version, when notebook 05 can run with it (torch and torchvision both)."""
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("torchvision") is None:
        return None
    return metadata.version("torch")


def _bench_ssd(exe: Path, cache: Path, backends: str = f"tvm,{OFFLOAD}") -> dict:
    with _environ(CACHE_ENV, str(cache)):
        out = subprocess.run(
            [str(exe), "bench", "ssd", "--backends", backends, "--json"], check=True, capture_output=True
        )
    return json.loads(out.stdout)


def _doctor(exe: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run([str(exe), "doctor"], check=False, capture_output=True)
    return time.perf_counter() - t0


def record(path: Path = RESULTS) -> dict:
    """Measure everything the prose quotes, in one go, and write the JSON."""
    exe = Path(sys.executable).with_name("byoc-workbench")
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="byoc-bench-") as cache:
        cold = _bench_ssd(exe, Path(cache))  # nothing built, imported or seeded before
        warm = _bench_ssd(exe, Path(cache))  # the same, right after: the builds kept
    doctor = {"first": _doctor(exe), "again": _doctor(exe)}
    mxnet = None
    if MXNET_EXE.is_file():  # MXNet's anchor, and the offloaded build it is compared with, from one run
        with tempfile.TemporaryDirectory(prefix="byoc-bench-") as cache:
            mxnet = _bench_ssd(MXNET_EXE, Path(cache), OFFLOAD)
    notebooks, peaks, nb02_again = _notebooks()
    torch = _torch()
    from install_size import sizes

    result = {
        "recorded": datetime.date.today().isoformat(),
        "how": "tools/bench_numbers.py record: byoc-workbench bench ssd --json from an empty cache (ssd), then "
        "again from the cache it left (ssd_warm); doctor twice (first, again); each notebook executed headless with "
        "nbclient, wall time with the kernel's start; the install's size (tools/install_size.py); MXNet's anchor "
        "from bench ssd --backends onnxruntime in .venv-mxnet (ssd_mxnet)",
        "load_average": {"before": [round(x, 2) for x in load_before], "after": [round(x, 2) for x in os.getloadavg()]},
        "ssd": cold,
        "ssd_warm": warm,
        "ssd_mxnet": mxnet,
        "doctor_s": doctor,
        "notebooks": notebooks,
        "notebooks_peak_mb": peaks,
        "notebooks_how": {
            "where": "make lab's copies (tools/lab_copies.py sync) in a temporary folder outside the repository, "
            "the kernel's working directory, as a JupyterHub seat runs them",
            "cache": "each notebook with an empty temporary BYOC_WORKBENCH_CACHE of its own: a first run's numbers, "
            "nothing built, imported or seeded before (untrained weights)",
            "time": "wall time top to bottom in a fresh kernel, the kernel's start included",
            "peak": "the kernel process's peak resident memory (VmHWM of /proc/self/status, else ru_maxrss), "
            "and its largest child process's, added (an upper bound of what both held at once), read by a last cell "
            "added to the run, in MB of 2**20 bytes",
            "torch": torch,
            "05": f"run with torch {torch}"
            if torch
            else "run without torch: GluonCV's ResNet as the ONNX file MXNet "
            "writes, as a seat without the [pytorch] extra runs it",
        },
        "install": sizes(),
        "nb02_again_s": nb02_again,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    return result


def main(argv: list) -> int:
    command = argv[0] if argv else "check"
    if command == "record":
        record()
        print(f"wrote {RESULTS.relative_to(ROOT)}")
    elif command == "write":
        for path in write():
            print(f"updated {path.relative_to(ROOT)}")
    elif command == "check":
        problems = check()
        print("\n".join(problems) or "every quoted number agrees with the bench JSON")
        return 1 if problems else 0
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
