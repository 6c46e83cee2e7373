"""The GPU tools as a careless user met them in round 17 (area B): tools/gpu_unpack.py run with --check or --unpack
(exit 0, nothing checked, even on a pack cut short), a CUDA driver that ends the process with status 0 as TVM loads
it (gpu_check --target llvm exit 0, no line, no JSON), and gpu_check --out x/../y.json without x (y.json written
where the path never leads)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_gpu_check_round15 import DEMO, PROBE, _gpu_check, _refusal
from test_gpu_round13_tools import ARGS
from test_gpu_run_checks import _pack

ROOT = Path(__file__).resolve().parents[2]
UNPACK = [sys.executable, str(ROOT / "tools" / "gpu_unpack.py")]


@pytest.mark.parametrize("args", [["--check"], ["--unpack", "into"], []])
def test_gpu_unpack_run_as_a_command_names_gpu_packs_and_does_nothing(tmp_path, args):
    """It has no command line, yet exited 0 and checked nothing: read as "the pack is whole"."""
    pack = _pack(tmp_path / "pack")
    site = pack / "site.tar.xz"
    site.write_bytes(site.read_bytes()[:-40])  # cut short
    done = subprocess.run([*UNPACK, "--out", str(pack), *args], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "error: tools/gpu_unpack.py is no command: tools/gpu_pack.py reads a pack with it. Fix: run tools/gpu_pack.py"
        " --check, or tools/gpu_pack.py --unpack FOLDER, with --out the pack's folder."
    ]
    assert sorted(os.listdir(tmp_path)) == ["pack"]


def test_the_docs_name_gpu_packs_commands_not_gpu_unpacks():
    said = " ".join((ROOT / "docs" / "gpu.md").read_text().split())
    assert "`tools/gpu_unpack.py` reads a pack: `--check` and `--unpack`" not in said
    assert "`tools/gpu_unpack.py`, the library `gpu_pack.py --check` and `--unpack` read a pack with" in said


ENDED = "TVM does not load: the process that asked ended (status 0) while loading TVM"


@pytest.mark.parametrize(
    ("kind", "child", "said"),
    [
        ("llvm", "import os; os._exit(0)", (ENDED, PROBE.LOAD_FIX)),
        ("cuda", "import os; os._exit(0)", (ENDED, PROBE.LOAD_FIX)),
        ("llvm", "print('load'); print('ed')", (ENDED, PROBE.LOAD_FIX)),
        (
            "cuda",
            "print('loaded', flush=True); import os; os._exit(0)",
            (
                f"{PROBE.NO_CUDA}: the process that asked ended (status 0) while asking TVM for a CUDA device",
                PROBE.CUDA_FIX,
            ),
        ),
        ("llvm", "print('loaded')", None),
        ("cuda", "print('loaded'); print('seen')", None),
        ("cuda", "print('loaded'); print('')", (PROBE.NO_CUDA, PROBE.CUDA_FIX)),
    ],
)
def test_a_child_that_ends_with_status_0_before_its_word_is_no_answer(monkeypatch, kind, child, said):
    """A child that ended with status 0 without saying `loaded` was taken as "TVM loads" (llvm: the run then loaded
    TVM itself and ended the same way, exit 0, nothing said) and as "no CUDA device" (cuda)."""
    monkeypatch.setattr(PROBE, "PROBE", child)
    assert PROBE.tvm_unloaded(kind) == said


#: Fake libcuda.so.1, a user's broken driver: it ends the process that loads it (torch, as TVM loads it), status 0.
EXITING = (
    "#include <unistd.h>\n__attribute__((constructor)) static void c(void){ _exit(0); }\n"
    "int cuInit(unsigned f){return 0;}\n"
)


@pytest.mark.slow
@pytest.mark.parametrize("target", ["llvm", "cuda"])
def test_a_driver_that_ends_the_process_as_tvm_loads_measures_nothing_in_one_line(tmp_path, target):
    folder = tmp_path / "exit0"
    folder.mkdir()
    (folder / "cuda.c").write_text(EXITING)
    try:
        cc = ["gcc", "-shared", "-fPIC", "-o", str(folder / "libcuda.so.1"), str(folder / "cuda.c")]
        subprocess.run(cc, check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as err:
        pytest.skip(f"no C compiler for a fake driver: {err}")
    env = {**os.environ, "LD_LIBRARY_PATH": str(folder)}
    done = _gpu_check(*DEMO, "--runs", "1", "--target", target, "--out", str(tmp_path / "r.json"), env=env)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [f"error: measured nothing, tvm: {ENDED}. Fix: {PROBE.LOAD_FIX}."]


def test_an_out_back_out_of_a_missing_folder_is_refused(tmp_path, monkeypatch):
    """`--out ~/x/../y.json` without ~/x wrote ~/y.json: resolving skips x, which no check looked at."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "there").mkdir()
    (tmp_path / "afile").write_text("mine")
    for out, folder in [(f"{tmp_path}/x/../y.json", tmp_path / "x"), ("there/new/../y.json", Path("there/new"))]:
        assert _refusal(out) == (
            f"error: --out {out} goes back out of {folder} with '..', but there is no folder {folder}. "
            f"Fix: write the path without {folder.name}/.., or make the folder {folder} first."
        )
    assert _refusal("afile/../y.json") == (
        "error: --out afile/../y.json goes back out of afile with '..', but there is no folder afile. "
        "Fix: write the path without afile/.., or make the folder afile first."
    )
    ARGS.check_out("there/../y.json")  # back out of a folder that is there: where it leads, checked
    assert sorted(os.listdir(tmp_path)) == ["afile", "there"] and os.listdir(tmp_path / "there") == []
