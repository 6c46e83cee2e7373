"""What benchmarks/gpu_check.py finds before it measures, in the standard library alone: each package that is
missing (a line in the JSON's ``missing``, with its fix), the GPU as nvidia-smi sees it, and whether TVM loads and,
for a ``cuda`` run, sees a CUDA device: asked in a child process (:func:`tvm_unloaded`), as a broken CUDA driver
crashes the process that loads TVM (torch asks the driver for a device as TVM loads it, for ``--target llvm`` too),
and a crash is then one line naming the signal and what the child was doing, not the run's own exit 139.
"""

from __future__ import annotations

import importlib
import importlib.util
import shutil
import signal
import subprocess
import sys
import warnings

FIXES = {
    "tvm": "pip install apache-tvm==0.27.0.post1, or unpack tools/gpu_pack.py's archives (tools/gpu_run.sh)",
    "torch": "pip install torch torchvision (resnet50 and its PyTorch eager anchor)",
    "torchvision": "pip install torchvision (resnet50)",
    "onnx": "pip install onnx (the ONNX backends translate subgraphs with it)",
    "onnxruntime": "pip install onnxruntime-gpu for its CUDA provider",
    "tensorrt": "pip install .[tensorrt] (TensorRT 10 or later) on this GPU machine",
    "numpy": "pip install numpy",
    "tqdm": "pip install tqdm (the workbench's progress bars)",
    "matplotlib": "pip install matplotlib (it ships the zoo's default picture)",
    "cv2": "pip install opencv-python-headless (a zoo model's input picture)",
}
# What the workbench imports on every path here (its clock shows progress with tqdm): without one, no build runs.
# Checked first: without numpy, torch and ONNX Runtime print tracebacks as they load.
WORKBENCH_NEEDS = ("numpy", "tqdm")
# What a zoo model's input picture needs: matplotlib ships the default picture, OpenCV reads and resizes it.
ZOO_NEEDS = ("matplotlib", "cv2")


def missing_line(what: str, why: str, fix: str | None = None) -> str:
    """A line of the JSON's ``missing``: ``<what>: <why>. Fix: <fix, else what's own>.``"""
    return f"{what}: {brief(why)}. Fix: {fix or FIXES.get(what, 'see the README')}."


def brief(text) -> str:
    """``text`` on one line, cut between words after 300 characters: an exception's text can run to pages."""
    text = " ".join(str(text).split())
    cut = text[:301].rpartition(" ")[0] or text.partition(" ")[0]  # a first word that long is kept whole
    return text if len(text) <= 300 or cut == text else f"{cut} [...]"


def lacks(report: dict, what: str, names) -> bool:
    """Whether any of the packages ``names`` that ``what`` imports is missing, each one a line in
    ``report["missing"]``."""
    gone = [(name, probe(name)[2]) for name in names if probe(name)[0] is None]
    report["missing"] += [missing_line(name, f"{what}: {why}") for name, why in gone]
    return bool(gone)


def probe(name: str) -> tuple:
    """``(module or None, version or None, why it is missing or None)``, never raising."""
    try:
        with warnings.catch_warnings():  # torch's, of a CUDA driver it cannot use, as TVM loads it: no run needs them
            warnings.simplefilter("ignore")
            mod = importlib.import_module(name)
    except Exception as err:  # noqa: BLE001 - a broken install is reported, not raised
        return None, None, f"{type(err).__name__}: {err}"
    return mod, getattr(mod, "__version__", "?"), None


def gpu_info() -> dict:
    """The GPU as nvidia-smi sees it (nothing where there is no nvidia-smi)."""
    smi = shutil.which("nvidia-smi")
    query = [smi, "--query-gpu=name,driver_version,memory.total,compute_cap", "--format=csv,noheader"]
    try:
        out = subprocess.run(query, capture_output=True, text=True, timeout=30) if smi else None
    except (OSError, subprocess.SubprocessError) as err:
        return {"nvidia_smi_error": str(err)}
    return {"nvidia_smi": out.stdout.strip().splitlines()} if out else {}


def versions(loading: bool) -> dict:
    """The versions of TVM, numpy, torch and ONNX Runtime (None for one that does not import); with ``loading``
    false (a run stopped before TVM loaded: without numpy torch prints tracebacks as it loads, and TVM may crash on a
    broken CUDA driver) of those loaded already alone."""
    return {name: probe(name)[1] for name in ("tvm", "numpy", "torch", "onnxruntime") if loading or name in sys.modules}


def tvm_here(kind: str, report: dict) -> str | None:
    """None where the workbench's own packages and TVM import and, for a target of ``kind`` ``cuda``, TVM sees a GPU
    (:func:`tvm_unloaded`, before TVM loads here); else the line of ``report["missing"]`` that says why nothing can be
    measured."""
    if lacks(report, "the workbench", WORKBENCH_NEEDS):
        return report["missing"][-1]
    there = importlib.util.find_spec("tvm") is not None  # if not, probe() says so at once, in this process
    unseen = tvm_unloaded(kind) if there else None
    if unseen is None and (why := probe("tvm")[2]):
        unseen = why, None
    if unseen:
        report["missing"].append(missing_line("tvm", *unseen))
        return report["missing"][-1]
    return None


NO_CUDA = "TVM sees no CUDA device (no GPU, or its CUDA runtime does not load)"
CUDA_FIX = "run on an NVIDIA GPU with its driver, or pass --target llvm"
LOAD_FIX = (
    "repair what crashes it (python -X faulthandler -c 'import tvm' shows where; a broken CUDA driver crashes "
    "torch as TVM loads it, on the CPU too)"
)
#: The child of :func:`tvm_unloaded`: ``loaded`` once TVM has, then, for a ``cuda`` run (its argument), ``seen`` or
#: why TVM sees no CUDA device. Torch's warnings of a driver it cannot use, as TVM loads it, are no more lines: what
#: they say, this says.
PROBE = """if True:
    import sys, warnings
    sys.path[:1] = [p for p in sys.path[:1] if p]  # the current folder -c puts first (none under -P)
    warnings.simplefilter("ignore")
    import tvm
    print("loaded", flush=True)
    if sys.argv[1] == "cuda":
        try:
            print("seen" if tvm.cuda(0).exist else "")
        except Exception as err:
            print(f"{type(err).__name__}: {err}")
"""


def tvm_unloaded(kind: str) -> tuple | None:
    """``(why, fix)`` where TVM does not load (``fix`` None where it raised: TVM's own line) or, for ``kind``
    ``cuda``, sees no CUDA device, else None, before the run loads TVM itself: a child process asks, as a broken
    driver can crash the process that asks (a segfault in torch's cudaGetDeviceCount, as TVM loads it), or end it
    with status 0: only its word (``loaded``, then its answer) says TVM loads."""
    try:
        done = subprocess.run([sys.executable, "-c", PROBE, kind], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired as err:
        stdout = err.stdout.decode(errors="replace") if isinstance(err.stdout, bytes) else err.stdout or ""
        return _unloaded(stdout, "did not answer in 120 s")
    if done.returncode < 0:
        return _unloaded(done.stdout, f"died of signal {-done.returncode} ({signal.strsignal(-done.returncode)})")
    if done.returncode:  # TVM did not load: its error's last line
        return (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1], None
    lines = done.stdout.splitlines()
    if lines[:1] != ["loaded"] or (kind == "cuda" and len(lines) < 2):  # a driver ended it, status 0, mid-way
        return _unloaded(done.stdout, "ended (status 0)")
    said = done.stdout.removeprefix("loaded\n").strip()
    return None if kind != "cuda" or said == "seen" else (f"{NO_CUDA}: {said}" if said else NO_CUDA, CUDA_FIX)


def _unloaded(stdout: str, end: str) -> tuple:
    """``(why, fix)`` of a child that ``end`` (died, hung or ended) before its answer, by what it had said (``stdout``):
    still loading TVM, or asking it for a CUDA device."""
    if stdout.startswith("loaded\n"):
        return f"{NO_CUDA}: the process that asked {end} while asking TVM for a CUDA device", CUDA_FIX
    return f"TVM does not load: the process that asked {end} while loading TVM", LOAD_FIX
