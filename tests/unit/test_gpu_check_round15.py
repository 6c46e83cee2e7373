"""benchmarks/gpu_check.py as a careless user met it in round 15: an --out no file can be made in (found only after the
first build), an --out of - or naming a folder that is not there (a file of that name written), a broken CUDA driver
(a warning, or a crash, instead of one line), numpy missing (tracebacks, then a line blaming TVM), and a Ctrl-C that
put a partial JSON, unmarked, over an earlier complete one."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_gpu_round13_tools import ARGS, _module, _tree  # a sibling: pytest puts this folder on sys.path

from byoc_workbench.core import files

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"
PROBE = _module(ROOT / "benchmarks" / "gpu_check_probe.py")
# The script as run, with the packages named in argv[1] unimportable (None in sys.modules, as Python documents).
BLOCKING = "import runpy, sys; sys.modules.update(dict.fromkeys(filter(None, sys.argv.pop(1).split(','))))" + (
    f"; sys.argv[0] = {str(SCRIPT)!r}; runpy.run_path(sys.argv[0], run_name='__main__')"
)
DEMO = ["--models", "demo", "--warmup", "0"]


def _gpu_check(*args: str, blocked: str = "", env=None, popen: bool = False):
    cmd = [sys.executable, "-c", BLOCKING, blocked, *args]
    if popen:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)


def _refusal(out: str) -> str:
    with pytest.raises(SystemExit) as refused:
        ARGS.check_out(out)
    return str(refused.value)


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.isdir("/sys/kernel"), reason="needs root and a sysfs")
def test_an_out_in_a_folder_no_file_can_be_made_in_is_refused_before_anything():
    """As root, os.access said /sys could be written: the run built TVM alone, then said it could not write."""
    assert _refusal("/sys/x") == (
        "error: --out /sys/x is in /sys, in which no file can be made (Permission denied). Fix: pass a file path in a "
        "folder you can write."
    )


def test_the_check_that_a_file_can_be_made_leaves_nothing(tmp_path):
    ARGS.check_out(str(tmp_path / "r.json"))
    assert os.listdir(tmp_path) == []


def test_an_out_of_dash_or_naming_a_folder_is_refused(tmp_path, monkeypatch):
    """`--out -` wrote a file named -, `--out new/` a file named new: neither what was asked."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "there").mkdir()
    (tmp_path / "afile").write_text("mine")
    assert _refusal("-") == (
        "error: --out - names no file: the JSON is printed on stdout anyway, and --out names a file it also goes to. "
        "Fix: leave --out out for the JSON on stdout alone, or pass a file path, as --out gpu_check.json."
    )
    for new in ("new/", "new/."):
        assert _refusal(new) == (
            f"error: --out {new} names a folder, and {tmp_path / 'new'} does not exist. Fix: mkdir -p "
            f"{tmp_path / 'new'}, then pass a file in it, as --out {tmp_path / 'new' / 'gpu_check.json'}."
        )
    assert _refusal("afile/") == (
        f"error: --out afile/ names a folder, and {tmp_path / 'afile'} is no folder. Fix: pass a file path in a "
        "folder you can write."
    )
    assert _refusal("there/") == (
        f"error: --out there/ is a folder. Fix: pass a file in it, as --out {tmp_path / 'there' / 'gpu_check.json'}."
    )
    assert sorted(os.listdir(tmp_path)) == ["afile", "there"] and os.listdir(tmp_path / "there") == []


#: Fake libcuda.so.1: cuInit and one device, then every other call an error (baddev) or success with garbage
#: (onedev, on which torch's cudaGetDeviceCount crashes the process as TVM loads it): a user's broken driver.
DRIVERS = {
    "baddev": "static int answer(){return 999;}",
    "onedev": "static int answer(){return 0;}",
}
DRIVER = """#include <string.h>
#include <dlfcn.h>
%s
int cuInit(unsigned f){return 0;} int cuDriverGetVersion(int*v){*v=13000;return 0;}
int cuDeviceGetCount(int*c){*c=1;return 0;}
static const char* known[]={"cuInit","cuDriverGetVersion","cuDeviceGetCount",
  "cuGetProcAddress","cuGetProcAddress_v2",0};
int cuGetProcAddress_v2(const char*s, void**p, int v, unsigned long long f, int*st){ if(st)*st=0; *p=(void*)answer;
  for(int i=0;known[i];i++) if(!strcmp(s,known[i])) *p=dlsym(RTLD_DEFAULT,s);
  return 0;}
int cuGetProcAddress(const char*s, void**p, int v, unsigned long long f){return cuGetProcAddress_v2(s,p,v,f,0);}
"""


def _driver(tmp_path: Path, kind: str) -> dict:
    """The environment of a run whose CUDA driver is the fake ``kind``."""
    folder = tmp_path / kind
    folder.mkdir()
    (folder / "cuda.c").write_text(DRIVER % DRIVERS[kind])
    cc = ["gcc", "-shared", "-fPIC", "-o", str(folder / "libcuda.so.1"), str(folder / "cuda.c"), "-ldl"]
    try:
        subprocess.run(cc, check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as err:
        pytest.skip(f"no C compiler for a fake driver: {err}")
    return {**os.environ, "LD_LIBRARY_PATH": str(folder)}


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["baddev", "onedev"])
def test_a_broken_cuda_driver_is_one_line(tmp_path, kind):
    """baddev: torch's UserWarning and its source line came before the line; onedev: a segfault (exit 139, a C stack
    of 71 lines) as TVM loaded, which loading TVM for --target llvm does too (test_gpu_tools_round17)."""
    env = _driver(tmp_path, kind)
    done = _gpu_check(*DEMO, "--out", str(tmp_path / "r.json"), env=env)
    [line] = done.stderr.splitlines()
    assert done.returncode == 1 and done.stdout == ""
    if kind == "onedev":
        assert "tvm: TVM does not load: the process that asked died of signal 11" in line
        assert line.endswith(f". Fix: {PROBE.LOAD_FIX}.")
    else:
        assert line.startswith(f"error: measured nothing, tvm: {PROBE.NO_CUDA}")
        assert line.endswith(f". Fix: {PROBE.CUDA_FIX}.")
    assert json.loads((tmp_path / "r.json").read_text())["complete"] is False  # measured nothing: never whole


@pytest.mark.parametrize(
    ("child", "said"),
    [
        ("print('loaded'); print('seen')", None),
        ("print('loaded'); print('')", (PROBE.NO_CUDA, PROBE.CUDA_FIX)),
        (
            "print('loaded'); print('RuntimeError: driver too old')",
            (f"{PROBE.NO_CUDA}: RuntimeError: driver too old", PROBE.CUDA_FIX),
        ),
        ("raise ModuleNotFoundError(\"No module named 'tvm'\")", ("ModuleNotFoundError: No module named 'tvm'", None)),
        (
            "import os; os.abort()",
            ("TVM does not load: the process that asked died of signal 6 (Aborted) while loading TVM", PROBE.LOAD_FIX),
        ),
    ],
)
def test_what_the_child_says_of_the_cuda_device_is_read_whatever_it_does(monkeypatch, child, said):
    """Its answer, a line of TVM's that does not load, and a crash: each is one line of the run's, or none."""
    monkeypatch.setattr(PROBE, "PROBE", child)
    assert PROBE.tvm_unloaded("cuda") == said


@pytest.mark.slow
def test_a_broken_cuda_driver_says_no_warning_on_the_cpu(tmp_path):
    """TVM loads torch, which warned of the driver as it loaded: two lines no run on the CPU needs."""
    env = _driver(tmp_path, "baddev")
    done = _gpu_check(*DEMO, "--runs", "1", "--target", "llvm", "--out", str(tmp_path / "r.json"), env=env)
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr and "torch" in json.loads(done.stdout)["versions"]


@pytest.mark.slow
def test_without_numpy_it_is_one_line_with_numpys_fix(tmp_path):
    """Torch and ONNX Runtime, loaded for their versions, printed 13 lines of tracebacks, then the line blamed TVM."""
    done = _gpu_check(*DEMO, "--target", "llvm", "--out", str(tmp_path / "r.json"), blocked="numpy")
    [line] = done.stderr.splitlines()
    assert done.returncode == 1 and line.startswith("error: measured nothing, numpy: the workbench: ")
    assert line.endswith(". Fix: pip install numpy.")
    assert json.loads((tmp_path / "r.json").read_text())["versions"] == {"numpy": None}


def _stopped_after_two_builds(out: Path):
    """The check on the demo, given SIGINT once its second build is said: what the run put in ``out`` is TVM
    alone's JSON, or both builds'."""
    with _gpu_check(*DEMO, "--runs", "50", "--target", "llvm", "--out", str(out), popen=True) as proc:
        said = [proc.stderr.readline() for _ in range(3)]
        assert said[0].startswith("measuring demo") and all(s.startswith("  ") for s in said[1:]), said
        proc.send_signal(signal.SIGINT)
        said += proc.stderr.readlines()
    assert proc.returncode == 130
    return said[-1]


@pytest.mark.slow
def test_a_ctrl_c_keeps_an_earlier_complete_json_and_marks_its_own_partial(tmp_path):
    """The earlier JSON was replaced by one of TVM alone's build alone, with nothing saying the run was cut short:
    the next run took it for a whole one."""
    pytest.importorskip("onnxruntime")  # builds after TVM alone's, for the signal to come between
    out = tmp_path / "r.json"
    files.write_file(out, '{"models": {"demo": {}}, "missing": [], "the last run": true}')  # an earlier run's
    before = _tree(tmp_path)
    assert _stopped_after_two_builds(out) == (
        f"interrupted; --out {out} keeps the earlier run's JSON, this run's is not written.\n"
    )
    assert _tree(tmp_path) == before
    out.unlink()  # no earlier JSON: what the run measured is put there, marked partial, and its record proves it
    assert _stopped_after_two_builds(out) == f"interrupted; {out} holds what it measured before that.\n"
    partial = json.loads(out.read_text())
    assert partial["complete"] is False and ARGS._earlier_json(out)
    ran = list(partial["models"]["demo"]["builds"])
    assert ran[0] == "tvm alone (llvm)" and "demo: speedup_vs_tvm and equal" in partial["not_reached"]
    assert not {f"demo: {label}" for label in ran} & set(partial["not_reached"])
    done = _gpu_check(*DEMO, "--runs", "1", "--target", "llvm", "--out", str(out))  # a partial one is replaced
    assert done.returncode == 0, done.stderr
    whole = json.loads(out.read_text())
    assert whole["complete"] is True and whole["not_reached"] == [] and whole["models"]["demo"]["equal"]
