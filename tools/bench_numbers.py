"""Every timing number of the README, the docs and the notebooks' prose, from one committed bench JSON.

    python tools/bench_numbers.py record   # measure: bench ssd --json, each notebook run, doctor (minutes)
    python tools/bench_numbers.py write    # fill every <!-- bench:NAME -->VALUE<!-- /bench --> from the JSON
    python tools/bench_numbers.py check    # exit 1 when a quoted number disagrees with the JSON

``make bench`` runs ``record`` and ``write``; ``tests/unit/test_bench_numbers.py`` runs ``check``. The JSON
(``benchmarks/results/bench.json``) keeps the machine and its load average beside the numbers, and
every ratio quoted names the machine it came from.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "bench.json"
# The notebooks whose run time the prose quotes (05 needs the [pytorch] extra, and quotes none).
NOTEBOOKS = (
    "01_byoc_workflow.ipynb",
    "02_ssd_tensorrt.ipynb",
    "03_exercises_ssd.ipynb",
    "04_write_your_own_codegen.ipynb",
)
MARKER = re.compile(r"<!-- bench:(\w+) -->(.*?)<!-- /bench -->")
OFFLOAD = "onnxruntime"  # the offloading backend every seat has


def files() -> list:
    """The files whose prose quotes measured numbers."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "notebooks").glob("*.ipynb"))]


def seconds(s: float) -> str:
    """``0.168 s``, ``27.4 s``, ``2.3 min``: as the prose quotes times."""
    if s >= 90:
        return f"{s / 60:.1f} min"
    return f"{s:.1f} s" if s >= 10 else f"{s:.2f} s" if s >= 1 else f"{s:.3f} s"


def values(bench: dict) -> dict:
    """The named strings the prose quotes, computed from the bench JSON."""
    ssd = bench["ssd"]
    b, a = ssd["backends"], ssd["anchors"]
    m = ssd["machine"]
    pruned, unpruned = b[OFFLOAD]["median_s"], b[f"{OFFLOAD}_unpruned"]["median_s"]
    # Which build is faster, by the best of the runs: other work on the machine only ever adds time, and a
    # busy 2-core machine moves the two medians by more than they differ.
    best, best_unpruned = b[OFFLOAD]["min_s"], b[f"{OFFLOAD}_unpruned"]["min_s"]
    faster = "not pruning" if best_unpruned < best else "pruning"
    ratio = max(best, best_unpruned) / min(best, best_unpruned)
    load = f", load average {m['load_average']:g}" if m.get("load_average") is not None else ""
    out = {
        "machine": f"{m['cpu']}, {m['cores']} cores{load}",
        "input": "x".join(str(d) for d in ssd["input_shape"][2:]),
        "tvm_alone_s": seconds(b["tvm"]["median_s"]),
        "tvm_build_s": seconds(b["tvm"]["build_s"]),
        "offloaded_s": seconds(pruned),
        "unpruned_s": seconds(unpruned),
        "offloaded_build_s": seconds(b[OFFLOAD]["build_s"]),
        "speedup": f"{ssd['speedup_vs_tvm'][OFFLOAD]:.0f}x",
        "mxnet_s": seconds(a["mxnet"]["median_s"]),
        "ort_whole_s": seconds(a["onnxruntime_whole_model"]["median_s"]),
        "vs_mxnet": f"{a['mxnet']['median_s'] / pruned:.1f}x",
        "vs_ort_whole": f"{pruned / a['onnxruntime_whole_model']['median_s']:.2f}x",
        "prune_verdict": (
            f"best of {b[OFFLOAD]['runs']} runs pruned {seconds(best)}, unpruned {seconds(best_unpruned)}: "
            f"{faster} is {ratio:.2f}x faster"
        ),
        "doctor_s": seconds(bench["doctor_s"]),
    }
    for name, s in bench["notebooks"].items():
        out[f"nb{name[:2]}_s"] = seconds(s)
    return out


def claims(bench: dict) -> list:
    """What the prose says in words that the numbers must bear out; a line for each that they do not."""
    b = bench["ssd"]["backends"]
    wrong = []
    if not b[f"{OFFLOAD}_unpruned"]["min_s"] < b[OFFLOAD]["min_s"]:
        wrong.append("notebook 02 says that on a CPU not pruning is faster, and the bench JSON says otherwise")
    if bench["ssd"]["input_shape"][2:] != [512, 512]:
        wrong.append("notebook 02 says it uses bench's 512x512 input")
    return wrong


def layout(bench: dict) -> list:
    """A line when the JSON's ``ssd`` result lacks a key of the layout every bench result has, or has one more."""
    from byoc_workbench.measure.bench import LAYOUT

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


def _time_notebook(name: str) -> float:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(ROOT / "notebooks" / name, as_version=4)
    t0 = time.perf_counter()
    NotebookClient(nb, timeout=1800, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    return time.perf_counter() - t0


def record(path: Path = RESULTS) -> dict:
    """Measure everything the prose quotes, in one go, and write the JSON."""
    exe = Path(sys.executable).with_name("byoc-workbench")
    load_before = os.getloadavg()
    bench_ssd = subprocess.run(
        [str(exe), "bench", "ssd", "--backends", f"tvm,{OFFLOAD}", "--json"], check=True, capture_output=True, text=True
    )
    t0 = time.perf_counter()
    subprocess.run([str(exe), "doctor"], check=False, capture_output=True)
    doctor_s = time.perf_counter() - t0
    notebooks = {name: _time_notebook(name) for name in NOTEBOOKS}
    result = {
        "recorded": datetime.date.today().isoformat(),
        "how": "tools/bench_numbers.py record: byoc-workbench bench ssd --json; doctor; each notebook executed "
        "headless with nbclient, wall time with the kernel's start",
        "load_average": {"before": [round(x, 2) for x in load_before], "after": [round(x, 2) for x in os.getloadavg()]},
        "ssd": json.loads(bench_ssd.stdout),
        "doctor_s": doctor_s,
        "notebooks": notebooks,
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
