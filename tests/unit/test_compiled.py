"""The build cache: a module compiled once per machine, kept by content, never poisoned."""

import os
import stat
import subprocess
import sys

import numpy as np
import pytest
import tvm
from tvm import relax

from byoc_workbench import files
from byoc_workbench.measure import compiled, execute
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


def test_a_module_built_in_one_process_is_loaded_in_another(cache, demo_mod, reference_output):
    script = "from byoc_workbench.measure import compiled, execute; from byoc_workbench.models import demo; "
    script += "compiled.KEEP_S = 0; execute.compile(demo.demo_module())"
    subprocess.run([sys.executable, "-c", script], check=True, env=os.environ)
    names = _entries(cache)
    assert len(names) == 2 and {n.split(".", 1)[1] for n in names} == {"so", "so.sum"}
    disabled = ["StaticPlanBlockMemory"]  # the demo's loop is a recursive function
    executable, hit = compiled.load_or_build(demo_mod, "llvm", disabled, lambda: pytest.fail("compiled again"))
    assert hit
    out = execute.run(demo_mod, demo.demo_inputs(), vm=relax.VirtualMachine(executable, tvm.cpu()))
    np.testing.assert_array_equal(out, reference_output)


def test_the_key_follows_the_module_the_target_and_the_passes(demo_mod, byoc):
    from byoc_workbench import stages

    other = stages.run_stages(demo_mod, byoc.rules)[1].mod  # composite: another module
    keys = {
        compiled.key(demo_mod, "llvm"),
        compiled.key(other, "llvm"),
        compiled.key(demo_mod, "llvm -mcpu=skylake"),
        compiled.key(demo_mod, "llvm", ["StaticPlanBlockMemory"]),
    }
    assert len(keys) == 4 and compiled.key(demo_mod, "llvm") == compiled.key(demo.demo_module(), "llvm")


@pytest.mark.parametrize("damage", ["truncated", "empty", "foreign seal", "no seal", "foreign library"])
def test_a_damaged_entry_is_built_again_and_repaired(cache, damage, demo_mod):
    mod = demo_mod
    _build(mod)
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
