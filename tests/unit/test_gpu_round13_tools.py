"""The GPU tools as a careless user met them in round 13: an append-only folder to unpack into or to write the
JSON in, a $DEST/site that could not be replaced, a signal as the check ends or to gpu_run.sh alone mid-unpack,
a misspelt model or target found only after the unpack, and folders left behind by a run that failed."""

import contextlib
import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_gpu_run_checks import _pack, stopping_python  # a sibling: pytest puts this folder on sys.path

from byoc_workbench.core import targets
from byoc_workbench.models import weights

ROOT = Path(__file__).resolve().parents[2]
MARK = ".unpacked-by-gpu_run"


def _module(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ARGS = _module(ROOT / "benchmarks" / "gpu_check_args.py")


@contextlib.contextmanager
def _flagged(path: Path, flag: str = "a"):
    """``path`` made append-only (``a``) or immutable (``i``) with chattr, the flag taken away again after."""
    done = subprocess.run(["chattr", f"+{flag}", str(path)], capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"chattr +{flag} needs root and a file system with flags: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["chattr", f"-{flag}", str(path)], check=True)


def _in_pieces(pack: Path) -> Path:
    """``pack`` with its libraries' archive cut in two, as several calls carry it (joined by the unpack)."""
    whole = (pack / "tvm-libs.tar.xz").read_bytes()
    (pack / "tvm-libs.tar.xz.1of2").write_bytes(whole[:100])
    (pack / "tvm-libs.tar.xz.2of2").write_bytes(whole[100:])
    (pack / "tvm-libs.tar.xz").unlink()
    return pack


@pytest.fixture
def gpu_pack(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "tools"))
    import gpu_pack

    return gpu_pack


def test_unpack_refuses_an_append_only_folder_and_one_to_make_in_it(tmp_path, gpu_pack, capsys):
    """Into an append-only folder, the joined pieces could not be removed: a traceback, and a partial site/ left.
    A folder to make in one would be left there on a failure."""
    pack = _in_pieces(_pack(tmp_path / "pack"))
    apd = tmp_path / "apd"
    apd.mkdir()
    with _flagged(apd):
        for into, said in [
            (apd, f"--unpack {apd} is append-only"),
            (apd / "new" / "deep", f"--unpack {apd}/new/deep would be made in {apd}, which is append-only"),
        ]:
            assert gpu_pack.main(["--out", str(pack), "--unpack", str(into)]) == 1
            out, err = capsys.readouterr()
            assert out == "" and err.splitlines() == [
                f"error: {said}, so what a failed unpack made there could not be removed. "
                f"Fix: run chattr -i -a {apd}, or pass a new or empty folder."
            ]
            assert os.listdir(apd) == []


def test_a_failed_unpack_removes_the_folders_it_made_for_its_folder(tmp_path, gpu_pack, capsys):
    """Only the folder itself was removed: new/ was left behind."""
    pack = _pack(tmp_path / "pack")
    (pack / "site.tar.xz").write_bytes(b"damaged")
    (tmp_path / "here").mkdir()
    assert gpu_pack.main(["--out", str(pack), "--unpack", str(tmp_path / "here" / "new" / "deep")]) == 1
    assert capsys.readouterr().err.startswith(f"error: cannot unpack {pack}/site.tar.xz (")
    assert os.listdir(tmp_path / "here") == []


def test_gpu_check_refuses_an_out_in_an_append_only_folder_before_anything(tmp_path):
    """The JSON, written beside its name, could not be renamed into place: found after the first build, its
    temporary left."""
    apd = tmp_path / "apd"
    apd.mkdir()
    with _flagged(apd), pytest.raises(SystemExit) as refused:
        ARGS.check_out(str(apd / "x.json"))
    assert str(refused.value) == (
        f"error: --out {apd}/x.json is in {apd}, which is append-only, so no file in it can be renamed, as putting "
        f"the JSON in place does. Fix: run chattr -i -a {apd}, or pass another --out."
    )
    assert os.listdir(apd) == []


def test_a_misspelt_model_is_one_line_naming_those_the_check_measures():
    """It exited 0, the name said only in the JSON's errors, after the other models were measured."""
    known = ARGS.known_models()
    assert known[:2] == ["demo", "resnet50"] and set(known[2:]) == set(weights.MODELS)
    for models, why in [
        (
            "demo,ssd_512_resnet50_v1_cocoo",
            "'ssd_512_resnet50_v1_cocoo' is not a model the check measures (did you mean ssd_512_resnet50_v1_coco?)",
        ),
        ("demo,", "'' is not a model the check measures"),
    ]:
        with pytest.raises(SystemExit) as refused:
            ARGS.arguments(["--models", models])
        assert str(refused.value) == (
            f"error: --models {models}: {why}. Fix: name some of {', '.join(known)}, comma-separated."
        )
    assert ARGS.arguments(["--models", " demo , resnet50,demo"]).models == ["demo", "resnet50"]


BAD_TARGETS = ["cdua", "", "llvm -mcpu znver3", "llvm mcpu=znver3", "cuda -arch=sm_90 -arch=sm_80", "llvm --mcpu=x"]
BAD_TARGETS += ["cdua -mcpu", "cuda -arch='sm_90", "'cdua -arch=sm_90'"]


@pytest.mark.parametrize("target", [*BAD_TARGETS, '{"kind": "cdua"}'])
def test_a_target_wrong_without_tvm_is_refused_by_the_dry_parse_as_the_check_refuses_it(target):
    """gpu_run.sh's dry parse took them: each was found only after the unpack, once TVM was there (the same line)."""
    with pytest.raises(SystemExit) as refused:
        ARGS.arguments(["--target", target])
    line = str(refused.value)
    assert line.startswith("error: --target ") and "\n" not in line
    with pytest.raises(SystemExit) as later:  # the check's own, with TVM
        _module(ROOT / "benchmarks" / "gpu_check.py").check_target(ARGS.target(target))
    assert str(later.value) == line


@pytest.mark.parametrize(
    "target",
    ["llvm", "cuda -arch=sm_90", "llvm  -mcpu=znver3 -mattr=+avx2", '{"kind": "llvm"}', "'llvm -mcpu=znver3'"],
)
def test_a_target_the_workbench_reads_passes_the_dry_parse(target):
    parsed = ARGS.arguments(["--target", target]).target
    targets.resolve(parsed)  # no GPU needed: an arch is named


def test_the_json_labels_a_target_with_its_options():
    """A dict's mcpu (and every other option) was left out of the label: "tvm alone (llvm)"."""
    assert ARGS.target_words({"kind": "llvm", "mcpu": "znver3", "mattr": ["+avx2", "+fma"]}) == (
        "llvm -mcpu=znver3 -mattr=+avx2,+fma"
    )
    assert ARGS.target_words("cuda   -arch=sm_90") == "cuda -arch=sm_90"


# --- a fresh process per case: make test runs them, make test-fast does not ---------------------------------------


@pytest.mark.slow
def test_gpu_check_ignores_a_signal_once_its_results_are_in_place(tmp_path):
    """A SIGTERM as the interpreter ended (TVM and torch torn down) was a KeyboardInterrupt traceback of atexit's, or
    143 with no line once Python had put the default handlers back."""
    out = tmp_path / "g.json"
    code = (
        "import atexit, os, runpy, signal, sys\n"
        "sys.modules.update(tvm=None, torch=None, onnxruntime=None)  # no TVM: it measures nothing, at once\n"
        "atexit.register(os.kill, os.getpid(), signal.SIGTERM)  # registered first, run last\n"
        f"sys.argv = [{str(ROOT / 'benchmarks' / 'gpu_check.py')!r}, '--out', {str(out)!r}]\n"
        "runpy.run_path(sys.argv[0], run_name='__main__')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    [line] = done.stderr.splitlines()
    assert done.returncode == 1 and line.startswith("error: measured nothing, tvm: ModuleNotFoundError"), done.stderr
    assert out.is_file()


def _env(tmp_path: Path, **env) -> dict:
    env = {"PACK": str(tmp_path / "pack"), "DEST": str(tmp_path / "dest"), "PY": stopping_python(tmp_path), **env}
    return {**{k: v for k, v in os.environ.items() if k != "OUT"}, **env}


def _gpu_run(tmp_path: Path, *args: str, **env: str):
    cmd = ["bash", str(ROOT / "tools" / "gpu_run.sh"), *args]
    return subprocess.run(cmd, env=_env(tmp_path, **env), capture_output=True, text=True, timeout=300)


def _tree(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): p.is_dir() or p.read_bytes() for p in folder.rglob("*")}


@pytest.mark.slow
@pytest.mark.parametrize("stuck", ["site", "site/tvm/lib.so"])
def test_gpu_run_refuses_a_site_it_could_not_replace_before_the_unpack(tmp_path, stuck):
    """An append-only $DEST/site (or a file in it) stopped the run after the unpack, with mv's or rm's own line."""
    _pack(tmp_path / "pack")
    dest = tmp_path / "dest"
    (dest / "site" / "tvm").mkdir(parents=True)
    (dest / "site" / MARK).write_text("unpacked by tools/gpu_run.sh")
    (dest / "site" / "tvm" / "lib.so").write_text("the last unpack")
    before = _tree(dest)
    with _flagged(dest / stuck, "a" if stuck == "site" else "i"):
        done = _gpu_run(tmp_path)
    kind = "append-only" if stuck == "site" else "immutable"
    assert done.returncode == 1 and done.stdout == ""  # before the unpack: it says what each call carries
    assert done.stderr.splitlines() == [
        f"error: {dest / stuck} is {kind}, so the last unpack in {dest}/site cannot be replaced. "
        f"Fix: run chattr -R -i -a {dest}/site, or pass another DEST."
    ]
    assert _tree(dest) == before


@pytest.mark.slow
def test_gpu_run_makes_nothing_before_its_checks_pass_and_removes_what_it_made(tmp_path):
    """DEST and OUT (and their parents) were made before the pack was checked, and left behind; a misspelt model or
    a target TVM would refuse was found only after the unpack."""
    where = {"DEST": str(tmp_path / "a" / "dest"), "OUT": str(tmp_path / "b" / "out")}
    done = _gpu_run(tmp_path, **where)  # no pack there
    assert done.returncode == 1 and done.stderr.startswith(f"error: {tmp_path}/pack/tvm-libs.tar.xz is missing.")
    assert sorted(os.listdir(tmp_path)) == ["stopping-python"]
    _pack(tmp_path / "pack")
    (tmp_path / "pack" / "site.tar.xz").write_bytes(b"damaged")  # the unpack made DEST, and failed
    done = _gpu_run(tmp_path, **where)
    assert done.returncode == 1 and done.stderr.startswith(f"error: cannot unpack {tmp_path}/pack/site.tar.xz (")
    assert sorted(os.listdir(tmp_path)) == ["pack", "stopping-python"]
    for args in (["--models", "demo,resnet"], ["--target", "llvm -mcpu znver3"]):
        done = _gpu_run(tmp_path, *args, **where)
        [line] = done.stderr.splitlines()
        assert done.returncode == 1 and done.stdout == "" and line.startswith(f"error: {args[0]} ")  # no unpack
    apd = tmp_path / "apd"
    apd.mkdir()
    with _flagged(apd):
        done = _gpu_run(tmp_path, DEST=str(apd / "dest"))
        left = os.listdir(apd)
    assert (
        done.returncode == 1
        and left == []
        and done.stderr.splitlines()
        == [
            f"error: {apd} is append-only, so what is written in it cannot be replaced or removed. "
            f"Fix: run chattr -i -a {apd}, or pass other DEST and OUT folders."
        ]
    )


def _hanging_python(tmp_path: Path) -> str:
    """This Python, whose unpack makes its folder, then waits for ever (its handlers set, as gpu_pack.py's are):
    only a signal ends it. Its pid goes to ``unpacking.pid``."""
    hang = tmp_path / "hang.py"
    hang.write_text(
        "import os, sys, time\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from byoc_workbench_cli import exit_on_signals\n"
        "exit_on_signals('run it again to finish.')\n"
        "os.makedirs(os.path.join(sys.argv[sys.argv.index('--unpack') + 1], 'site'))\n"
        f"open({str(tmp_path / 'unpacking.pid')!r}, 'w').write(str(os.getpid()))\n"
        "time.sleep(600)\n"
    )
    path = tmp_path / "hanging-python"
    path.write_text(f'#!/bin/bash\ncase " $* " in *" --unpack "*) exec "{sys.executable}" "{hang}" "$@";; esac\n')
    path.write_text(path.read_text() + f'exec "{sys.executable}" "$@"\n')
    path.chmod(0o755)
    return str(path)


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "word"), [(signal.SIGINT, "interrupted"), (signal.SIGTERM, "terminated")])
def test_a_signal_to_gpu_run_alone_stops_its_unpack_at_once(tmp_path, signum, word):
    """bash runs a trap only once its foreground command is done: the script waited for the whole unpack."""
    _pack(tmp_path / "pack")
    dest = tmp_path / "new" / "dest"
    run = subprocess.Popen(
        ["bash", str(ROOT / "tools" / "gpu_run.sh")],
        env=_env(tmp_path, DEST=str(dest), PY=_hanging_python(tmp_path)),
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pid = tmp_path / "unpacking.pid"
    try:
        while not pid.exists() or not pid.read_text():
            assert run.poll() is None, run.communicate()
            time.sleep(0.02)
        run.send_signal(signum)  # the script alone, not its group
        _, stderr = run.communicate(timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGKILL)  # what is left of it, had it waited
    assert run.returncode == 128 + signum and stderr.splitlines() == [f"{word}; nothing was measured."], stderr
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid.read_text()), 0)  # the unpack was stopped, not left running
    assert not (tmp_path / "new").exists()  # the unpack's folder, and DEST and its parent it was made in
