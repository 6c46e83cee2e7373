"""The build cache: a module compiled once per machine, kept by content, never poisoned."""

import os
import shutil
import stat
import subprocess
import sys

import numpy as np
import pytest
import tvm
from tvm import relax

from byoc_workbench.core import files
from byoc_workbench.measure.compiler import compiled, execute
from byoc_workbench.models import demo


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(files.CACHE_ENV, str(tmp_path))
    monkeypatch.delenv("BYOC_WORKBENCH_NO_CACHE", raising=False)
    monkeypatch.setattr(compiled, "KEEP_S", 0.0)  # the demo compiles in a fraction of a second: keep it anyway
    return tmp_path / "builds"


def _entries(root) -> list:
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def _build(mod):
    return compiled.load_or_build(mod, "llvm", (), lambda: tvm.compile(mod, target="llvm"))


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory):
    """A cache in which another process compiled and kept the demo, with and without StaticPlanBlockMemory,
    as :func:`_build` keeps it: this process has not loaded its libraries. Built once for the module."""
    root = tmp_path_factory.mktemp("elsewhere")
    script = (
        "import tvm; from byoc_workbench.measure.compiler import compiled; from byoc_workbench.models import demo\n"
    )
    script += "compiled.KEEP_S = 0; mod = demo.demo_module()\n"
    script += "for disabled in ([], ['StaticPlanBlockMemory']):\n"
    script += "    with tvm.transform.PassContext(opt_level=3, disabled_pass=disabled):\n"
    script += "        compiled.load_or_build(mod, 'llvm', disabled, lambda: tvm.compile(mod, target='llvm'))"
    subprocess.run([sys.executable, "-c", script], check=True, env=dict(os.environ, **{files.CACHE_ENV: str(root)}))
    return root / "builds"


def _kept_by_another_process(elsewhere, cache, disabled=()) -> None:
    """The entry another process kept (:func:`elsewhere`), copied into ``cache``: new files, never loaded here.

    (A library a process has loaded must not be damaged in place under it: the process's mapping of the
    file would change, and loading the path again returns that mapping. The cache only ever replaces a
    file by renaming a whole new one over it.)"""
    name = compiled.build_key(demo.demo_module(), "llvm", disabled) + ".so"
    cache.mkdir(parents=True, exist_ok=True)
    for entry in (name, name + ".sum"):
        shutil.copyfile(elsewhere / entry, cache / entry)


@pytest.mark.slow  # over 10 s: `make test` and `make test-slow` run it, not test-fast
def test_a_module_built_in_one_process_is_loaded_in_another(cache, elsewhere, demo_mod, reference_output):
    disabled = ["StaticPlanBlockMemory"]  # the demo's loop is a recursive function
    _kept_by_another_process(elsewhere, cache, disabled)
    names = _entries(cache)
    assert len(names) == 2 and {n.split(".", 1)[1] for n in names} == {"so", "so.sum"}
    executable, hit = compiled.load_or_build(demo_mod, "llvm", disabled, lambda: pytest.fail("compiled again"))
    assert hit
    out = execute.run(demo_mod, demo.demo_inputs(), vm=relax.VirtualMachine(executable, tvm.cpu()))
    np.testing.assert_array_equal(out, reference_output)


def test_a_kept_build_is_loaded_once_per_process(cache, demo_mod, reference_output):
    """A build just kept is used as built; the next asks load it from the library, once: TVM 0.27 keeps all
    of a library it loaded (its constants too) until the process ends, so a second load would cost as much again."""
    disabled = ["StaticPlanBlockMemory"]  # the demo's loop is a recursive function
    with tvm.transform.PassContext(opt_level=3, disabled_pass=disabled):
        built = tvm.compile(demo_mod, target="llvm")
    executable, hit = compiled.load_or_build(demo_mod, "llvm", disabled, lambda: built)
    assert not hit and executable is built and [m.kind for m in built.mod.imports] == ["llvm"]
    loaded, hit = compiled.load_or_build(demo_mod, "llvm", disabled, lambda: pytest.fail("built again"))
    assert hit and [m.kind for m in loaded.mod.imports] == ["library"]
    out = execute.run(demo_mod, demo.demo_inputs(), vm=relax.VirtualMachine(loaded, tvm.cpu()))
    np.testing.assert_array_equal(out, reference_output)
    again, hit = compiled.load_or_build(demo_mod, "llvm", disabled, lambda: pytest.fail("built again"))
    assert hit and again is loaded


def test_the_key_follows_the_module_the_target_and_the_passes(demo_mod, byoc):
    from byoc_workbench import stages

    other = stages.run_stages(demo_mod, byoc.rules)[1].mod  # composite: another module
    keys = {
        compiled.build_key(demo_mod, "llvm"),
        compiled.build_key(other, "llvm"),
        compiled.build_key(demo_mod, "llvm -mcpu=skylake"),
        compiled.build_key(demo_mod, "llvm", ["StaticPlanBlockMemory"]),
    }
    assert len(keys) == 4 and compiled.build_key(demo_mod, "llvm") == compiled.build_key(demo.demo_module(), "llvm")


@pytest.mark.parametrize("damage", ["truncated", "empty", "foreign seal", "no seal", "foreign library"])
def test_a_damaged_entry_is_built_again_and_repaired(cache, elsewhere, damage, demo_mod):
    mod = demo_mod
    _kept_by_another_process(elsewhere, cache)
    lib = next(cache.glob("*.so"))
    record = lib.with_name(lib.name + ".sum")
    good = lib.read_bytes()
    if damage == "truncated":
        lib.write_bytes(good[: len(good) // 2])
    elif damage == "empty":
        lib.write_bytes(b"")
    elif damage == "foreign seal":
        record.write_text('{"hello": "world"}')
    elif damage == "no seal":
        record.unlink()
    else:  # a library of the right size that is not this build: its seal tells
        lib.write_bytes(bytes(len(good)))
    built = []
    executable, hit = compiled.load_or_build(
        mod, "llvm", (), lambda: built.append(1) or tvm.compile(mod, target="llvm")
    )
    assert not hit and built == [1]
    assert lib.stat().st_size == len(good) and _entries(cache) == sorted([lib.name, record.name])
    assert _build(mod)[1]  # repaired: the next build is a hit


def test_refresh_compiles_again_and_still_writes(cache, demo_mod):
    _build(demo_mod)
    with compiled.refresh():
        assert not _build(demo_mod)[1]
    assert _build(demo_mod)[1] and len(_entries(cache)) == 2


def test_an_unwritable_cache_builds_without_keeping(tmp_path, monkeypatch, demo_mod):
    blocker = tmp_path / "a file"
    blocker.write_text("")
    monkeypatch.setenv(files.CACHE_ENV, str(blocker))  # the cache's root is a file
    monkeypatch.setattr(compiled, "KEEP_S", 0.0)
    executable, hit = _build(demo_mod)
    assert not hit and executable is not None


def test_files_follow_the_umask(cache, demo_mod, tmp_path):
    old = os.umask(0o022)
    try:
        files.write_atomic(tmp_path / "shared.json", "{}")
        _build(demo_mod)
    finally:
        os.umask(old)
    for path in [tmp_path / "shared.json", *cache.iterdir()]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path


def test_a_quick_build_is_not_kept(tmp_path, monkeypatch, demo_mod):
    """Exporting and linking a library costs more than compiling a small module again."""
    monkeypatch.setenv(files.CACHE_ENV, str(tmp_path))
    assert compiled.KEEP_S > 0.5
    assert not _build(demo_mod)[1] and not _build(demo_mod)[1]
    assert _entries(tmp_path / "builds") == []


# --- a slow baseline's run, kept ---------------------------------------------------------------


def test_a_kept_run_is_shown_again_with_when_it_was_measured(cache, demo_mod, reference_output):
    """TVM alone with keep=True: the second build_and_run of the same module on the same inputs shows the
    first's outputs and latency, says when they were measured, and a damaged entry or --no-cache runs again."""
    from byoc_workbench.measure.time import runner

    inputs = demo.demo_inputs()
    first = runner.build_and_run(demo_mod, inputs, repeat=1, warmup=0, label="TVM alone", progress=False, keep=True)
    assert first.measured == "" and np.allclose(first.outputs, reference_output)
    again = runner.build_and_run(demo_mod, inputs, repeat=1, warmup=0, label="TVM alone", progress=False, keep=True)
    assert again.measured.startswith("measured ") and again.measured in " ".join(again.line().split())
    assert again.latency == first.latency and np.array_equal(again.outputs, first.outputs)
    other = [np.asarray(a) + 1 if k == 1 else a for k, a in enumerate(inputs)]  # other inputs: run, not reused
    assert runner.build_and_run(demo_mod, other, 1, 0, progress=False, keep=True).measured == ""
    unkept = runner.build_and_run(demo_mod, inputs, repeat=1, warmup=0, progress=False)
    assert unkept.measured == ""  # keep is asked for, never assumed
    for entry in (cache.parent / "runs").glob("*.json"):
        entry.write_text("{")  # torn
    assert runner.build_and_run(demo_mod, inputs, 1, 0, progress=False, keep=True).measured == ""
    with compiled.refresh():
        assert runner.build_and_run(demo_mod, inputs, 1, 0, progress=False, keep=True).measured == ""
    assert runner.build_and_run(demo_mod, inputs, 1, 0, progress=False, keep=True).measured.startswith("measured")


# --- a numerics check's references, kept -------------------------------------------------------


def test_a_checks_references_are_kept_and_read_back(cache, monkeypatch):
    """The demo offloaded and checked twice: the second check builds and runs nothing of TVM alone and
    finds the same errors; what it reads is what it compares against (a reference changed on disk shows
    as an error over tolerance); a damaged entry or refresh() computes it again."""
    from byoc_workbench.measure.bench import builds
    from byoc_workbench.measure.check import numerics
    from byoc_workbench.subjects import ModelRef

    monkeypatch.setattr(compiled, "KEEP_S", 0.0)  # the demo's references take microseconds: keep them anyway
    built, inputs = builds.ready(ModelRef(kind="demo"), prune=True)
    built_refs = []
    real_build = execute.build
    monkeypatch.setattr(execute, "build", lambda *a, **k: built_refs.append(a) or real_build(*a, **k))
    first = numerics.compare(built, inputs)
    assert first.rows and not first.over and len(built_refs) == 1
    kept_refs = sorted((cache.parent / "references").glob("*.npz"))
    assert len(kept_refs) == sum(r.calls for r in first.rows)  # one per call, keyed by its inputs
    again = numerics.compare(built, inputs)
    assert len(built_refs) == 1 and [r.to_json() for r in again.rows] == [r.to_json() for r in first.rows]

    arrays = files.read_arrays(kept_refs[0])
    files.write_arrays(kept_refs[0], [a + 1 for a in arrays])
    assert numerics.compare(built, inputs).over, "the check compares against what it read"
    with compiled.refresh():
        assert not numerics.compare(built, inputs).over and len(built_refs) == 2
    kept_refs[0].write_bytes(b"torn")
    assert not numerics.compare(built, inputs).over and len(built_refs) == 3
    assert files.read_arrays(kept_refs[0]) is not None  # repaired
