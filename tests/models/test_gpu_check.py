"""benchmarks/gpu_check.py on a machine without a GPU: one line and exit 1 when it can measure nothing, one line
per missing piece otherwise, and the same measurements run on the CPU when asked (``--target llvm``), each build
split and checked against TVM alone."""

import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import tvm

from byoc_workbench.core import files
from byoc_workbench.core.output_paths import WRITTEN

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"
# The script as run, with the packages named in argv[1] unimportable (None in sys.modules, as Python documents).
BLOCKING = "import runpy, sys; sys.modules.update(dict.fromkeys(sys.argv.pop(1).split(',')))" + (
    f"; sys.argv[0] = {str(SCRIPT)!r}; runpy.run_path(sys.argv[0], run_name='__main__')"
)


def _run(out: Path, *args, blocked: str = "", status: int = 0):
    cmd = [sys.executable, "-c", BLOCKING, blocked] if blocked else [sys.executable, str(SCRIPT)]
    done = subprocess.run([*cmd, "--out", str(out), *args], capture_output=True, text=True, timeout=600)
    assert done.returncode == status, done.stderr[-2000:]
    return done


def test_without_a_gpu_it_measures_nothing_and_says_so_in_one_line(tmp_path):
    """A broken CUDA runtime, as TVM sees it: no CUDA device. An exit 0 here read as a pass that measured nothing."""
    if tvm.cuda(0).exist:
        pytest.skip("a GPU is here")
    done = _run(tmp_path / "gpu_check.json", "--models", "demo", status=1)
    [line] = done.stderr.splitlines()
    assert line.startswith("error: measured nothing, tvm: TVM sees no CUDA device")
    assert line.endswith(". Fix: run on an NVIDIA GPU with its driver, or pass --target llvm.")
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert report["models"] == {} and line.endswith(report["missing"][0])


@pytest.mark.parametrize("where", ["no-such-folder/gpu_check.json", ".", "a-fifo", "model.onnx", "link"])
def test_an_out_it_cannot_write_is_refused_before_anything_is_built(tmp_path, where):
    out = tmp_path / where
    if where == "a-fifo":  # as a device: the JSON moved into place would replace it (it did /dev/full)
        os.mkfifo(out)
    elif where in ("model.onnx", "link"):  # what a run reads (the script itself, once), by its name or a link
        (tmp_path / "model.onnx").write_bytes(b"an input, not a GPU check's JSON")
        if where == "link":
            out.symlink_to(tmp_path / "model.onnx")
    kept = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    done = _run(out, "--target", "llvm", "--models", "demo", "--runs", "1", "--warmup", "0", status=1)
    [line] = done.stderr.splitlines()
    assert line.startswith(f"error: --out {out} is ") and ". Fix: pass " in line
    assert done.stdout == "" and {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == kept
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(kept) + (["a-fifo"] if where == "a-fifo" else [])


def _catches(pid: int, sig: int) -> bool:
    """Whether the process ``pid`` has a handler for ``sig``, as Linux's /proc says."""
    [mask] = [line.split()[1] for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line[:7] == "SigCgt:"]
    return bool(int(mask, 16) >> (sig - 1) & 1)


def test_an_empty_out_is_said_to_be_empty(tmp_path):
    done = _run("", "--target", "llvm", "--models", "demo", status=1)
    assert done.stderr == "error: --out is empty. Fix: pass a file path in a folder you can write.\n"


@pytest.mark.parametrize("tmp", ["a link", "a FIFO", "a file"])
def test_the_json_goes_through_a_temporary_of_its_own(tmp_path, tmp):
    """``X.tmp`` was written unchecked: through a link into the user's file, or blocking forever on a FIFO."""
    out, theirs = tmp_path / "r.json", tmp_path / "r.json.tmp"
    (tmp_path / "notes.txt").write_text("the user's notes")
    if tmp == "a link":
        theirs.symlink_to(tmp_path / "notes.txt")
    elif tmp == "a FIFO":
        os.mkfifo(theirs)
    else:
        theirs.write_text("the user's own r.json.tmp")
    _run(out, "--target", "llvm", "--models", "demo", blocked="tqdm", status=1)  # measures nothing, writes the JSON
    assert json.loads(out.read_text())["models"] == {} and (tmp_path / "notes.txt").read_text() == "the user's notes"
    assert theirs.is_symlink() if tmp == "a link" else theirs.is_fifo() if tmp == "a FIFO" else theirs.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == [WRITTEN, "notes.txt", "r.json", "r.json.tmp"]


def test_a_link_stays_a_link_and_a_run_that_measured_nothing_keeps_the_earlier_json(tmp_path):
    earlier = tmp_path / "earlier.json"  # an earlier run's, as its record proves
    files.write_file(earlier, '{"models": {"demo": {}}, "missing": [], "the last run": true}')
    link = tmp_path / "link.json"
    link.symlink_to(earlier)
    done = _run(link, "--target", "llvm", "--models", "demo", blocked="tqdm", status=1)
    [line] = done.stderr.splitlines()
    assert line.startswith("error: measured nothing, tqdm: ")
    assert f"; --out {link} keeps the earlier run's JSON, this run's is not written. Fix: pip install tqdm" in line
    assert link.is_symlink() and json.loads(earlier.read_text())["the last run"]
    # One that measures replaces it, through the link (without torch and ONNX Runtime: TVM alone, quickly), its
    # target given as TVM 0.27's dict (the form the refusals' fixes name).
    _run(
        link,
        "--target",
        '{"kind": "llvm"}',
        "--models",
        "demo",
        "--runs",
        "1",
        "--warmup",
        "0",
        blocked="torch,onnxruntime",
    )
    assert link.is_symlink() and list(json.loads(earlier.read_text())["models"]["demo"]["builds"]) == [
        "tvm alone (llvm)"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == [WRITTEN, "earlier.json", "link.json"]


@pytest.mark.parametrize(("sig", "word"), [(signal.SIGINT, "interrupted"), (signal.SIGTERM, "terminated")])
def test_a_signal_stops_it_in_one_line_with_the_json_whole_or_unwritten(tmp_path, sig, word):
    """Ctrl-C was a traceback and SIGTERM said nothing; a temporary cut short stayed behind. SIGINT comes as the
    script starts (while TVM imports, most likely: it waits for the import, torch's C++ aborts on an exception
    raised in its own), SIGTERM once the first build's JSON is in place."""
    pytest.importorskip("onnxruntime")  # a build after TVM alone's, for the signal to come in
    out = tmp_path / "r.json"
    cmd = [sys.executable, str(SCRIPT), "--target", "llvm", "--models", "demo", "--runs", "50", "--out", str(out)]
    with subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as proc:
        if sig == signal.SIGINT:
            while not _catches(proc.pid, signal.SIGTERM):  # its handlers are in place
                assert proc.poll() is None
        else:
            assert proc.stderr.readline().startswith("measuring demo")
            while not out.exists():
                assert proc.poll() is None
        proc.send_signal(sig)
        said = proc.stderr.read()
    assert proc.returncode == 128 + sig and "Traceback" not in said
    if sig == signal.SIGINT:
        assert said.splitlines()[-1] == f"{word}; nothing was written." and os.listdir(tmp_path) == []
    else:
        assert said.splitlines()[-1] == f"{word}; {out} holds what it measured before that."
        assert "tvm alone (llvm)" in json.loads(out.read_text())["models"]["demo"]["builds"]
        assert sorted(os.listdir(tmp_path)) in ([WRITTEN, "r.json"], ["r.json"])  # its record, unless cut off


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--runs", "0"], "argument --runs: '0' is not a whole number, 1 or more"),
        (["--runs", "-1"], "argument --runs: '-1' is not a whole number, 1 or more"),
        (["--warmup", "-1"], "argument --warmup: '-1' is not a whole number, 0 or more"),
        (["--target", "nope"], "--target nope: Unknown TVM target 'nope'"),
        (["--target", "llvm -foo=1"], "--target llvm -foo=1: TVM refuses the target 'llvm -foo=1'"),
        (["--target", "llvm -mcpu=nonsense"], "--target llvm -mcpu=nonsense: 'nonsense' in the target"),  # was built
        (["--target", '{"kind": "llvm", "mcpu": 1'], """argument --target: '{"kind": "llvm", "mcpu": 1' is not JSON"""),
    ],
)
def test_a_wrong_argument_is_one_line_before_anything_is_built(tmp_path, args, said):
    """They were found after a build, as "measured nothing ... see the JSON"; --runs before the GPU check."""
    done = _run(tmp_path / "r.json", "--models", "demo", *args, status=1)
    [line] = done.stderr.splitlines()
    assert line.startswith(f"error: {said}") and ". Fix: " in line
    assert not (tmp_path / "r.json").exists() and done.stdout == ""


def test_without_a_package_every_build_imports_it_measures_nothing(tmp_path):
    done = _run(tmp_path / "r.json", "--target", "llvm", "--models", "demo", blocked="tqdm", status=1)
    [line] = done.stderr.splitlines()
    assert line.startswith("error: measured nothing, tqdm: the workbench: ")
    assert line.endswith("Fix: pip install tqdm (the workbench's progress bars).")
    assert json.loads((tmp_path / "r.json").read_text())["models"] == {}


def test_on_the_cpu_the_same_measurements_run_and_agree(tmp_path):
    pytest.importorskip("onnxruntime")
    models = "ssd_512_resnet50_v1_coco,demo"  # without OpenCV the zoo model's picture is missing: the demo still runs
    _run(tmp_path / "r.json", "--target", "llvm", "--models", models, "--runs", "2", "--warmup", "1", blocked="cv2")
    report = json.loads((tmp_path / "r.json").read_text())
    [cv2] = [m for m in report["missing"] if m.startswith("cv2:")]
    assert cv2.startswith("cv2: ssd_512_resnet50_v1_coco: ") and "Fix: pip install opencv-python-headless" in cv2
    demo = report["models"]["demo"]
    expected = {"tvm alone (llvm)", "onnxruntime", "onnxruntime, unpruned"}
    if importlib.util.find_spec("torch") and importlib.util.find_spec("torchvision"):
        expected |= {"torch", "torch, unpruned", "torch (its own target: every op it runs)"}
    assert set(demo["builds"]) == expected and list(report["models"]) == ["demo"]
    for label, check in demo["equal"].items():
        assert check["equal"], (label, check)
    for build in demo["builds"].values():
        assert build["median_s"] > 0 and build["build_s"] > 0
        assert build["by_device_s"] == {}  # a CPU build: nothing to split
    assert not report["errors"]
