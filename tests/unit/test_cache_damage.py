"""Every kind of cache entry, damaged every way (each kind x each damage, Hypothesis drawing the entry and
where the damage falls): what comes back is what an empty cache gives, and the damaged entry is never trusted.

The kinds are those a notebook or a command reads: compiled builds, kept runs of TVM alone, kept
references of a numerics check, the C backend's libraries and TensorRT's engines (the cache's part of
backends/tensorrt.py, which runs without TensorRT: its plans here are made by a plain function); a zoo model's
seeded weights, which the package ships, in test_shipped_damage.py. The search's own entries (measurements,
references, finals, anchors) have their damage test in test_search.py, where a choice is compared; a damaged
one under ``only_cached`` here.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading

import numpy as np
import pytest
from damage import DAMAGES, cache, damage_entry
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tvm.script import ir as I
from tvm.script import relax as R

from byoc_workbench import stages
from byoc_workbench.backends import tensorrt
from byoc_workbench.core import files
from byoc_workbench.flow import rules
from byoc_workbench.measure.compiler import execute
from byoc_workbench.measure.time import kept, runner
from byoc_workbench.models import demo


def _outputs(x) -> list:
    return [np.asarray(a) for a in (x if isinstance(x, list | tuple) else [x])]


def _builds() -> list:
    return _outputs(execute.run(demo.demo_module(), demo.demo_inputs()))


def _runs() -> list:
    run = runner.build_and_run(demo.demo_module(), demo.demo_inputs(), 1, 0, keep=True, progress=False)
    return _outputs(run.outputs)


def _references() -> list:
    inputs = demo.demo_inputs()
    return kept.reference("a build", "main", inputs, lambda: [a * 2 for a in inputs])


def _c() -> list:
    found = stages.run_stages(demo.demo_module(), rules.get_target("byoc-target").rules, backend="c")
    return _outputs(execute.run(found[-1].mod, demo.demo_inputs()))


def _plan(name: str) -> bytes:
    """What a build of engine ``name`` gives: bytes of its own, for the cache to hand back or not."""
    return f"PLAN-FOR-{name}|".encode() * 64


def _engine(name: str) -> tensorrt.Engine:
    return tensorrt.cached(tensorrt.engine_dir() / f"{name}.engine", lambda: _plan(name))


def _engines() -> list:
    return [np.frombuffer(_engine("tensorrt_0").plan, np.uint8)]


# kind -> (what computes through that cache, the folder its entries are in)
KINDS = {
    "builds": (_builds, "builds"),
    "runs": (_runs, "runs"),
    "references": (_references, "references"),
    "c": (_c, "c"),
    "engines": (_engines, "engines"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
@pytest.mark.parametrize("kind", sorted(KINDS))
@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_damaged_entry_gives_what_an_empty_cache_gives(kind, damage, data):
    compute, folder = KINDS[kind]
    with cache() as root:
        first = compute()  # an empty cache: computed, then kept
        entries = sorted(p for p in (root / folder).rglob("*") if p.is_file())
        assert entries, f"the {kind} cache kept nothing"
        entry = data.draw(st.sampled_from(entries), label="entry")
        damage_entry(entry, damage, data.draw(st.floats(0.0, 0.99), label="where"))
        again = compute()
    assert len(again) == len(first)
    for a, b in zip(again, first):
        np.testing.assert_array_equal(a, b)


@I.ir_module
class _Twice:
    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        return R.add(x, x)


def _two_builds() -> list:
    return _builds() + _outputs(execute.run(_Twice, [np.arange(4.0, dtype="float32")]))


def _two_runs() -> list:
    return [
        a
        for seed in (0, 1)
        for a in _outputs(
            runner.build_and_run(demo.demo_module(), demo.demo_inputs(seed), 1, 0, keep=True, progress=False).outputs
        )
    ]


def _two_references() -> list:
    return [
        a
        for seed in (0, 1)
        for a in kept.reference("a build", "main", demo.demo_inputs(seed), lambda s=seed: [np.full(3, s)])
    ]


# kind -> (what computes through that cache, keeping two entries of a kind at least, the folder they are in)
TWO = {
    "builds": (_two_builds, "builds"),
    "runs": (_two_runs, "runs"),
    "references": (_two_references, "references"),
    "c": (_c, "c"),  # the demo's partition has several subgraphs, a library each
    "engines": (lambda: [np.frombuffer(_engine(n).plan, np.uint8) for n in ("model_a", "model_b")], "engines"),
}


def _put(src, dst, how: str) -> None:
    dst.unlink()
    if how == "copied":
        shutil.copy(src, dst)
    elif how == "moved":
        src.rename(dst)
    else:
        os.link(src, dst)


@pytest.mark.parametrize("how", ["copied", "moved", "hard-linked"])
@pytest.mark.parametrize("kind", sorted(TWO))
def test_another_keys_entry_in_an_entrys_place_is_never_trusted(kind, how):
    """Swapped entries (an entry of one key, with its seal, in another key's place): their seal names the key
    they were made for, so each is computed again, never handed back as the other's."""
    compute, folder = TWO[kind]
    with cache() as root:
        first = compute()
        sealed = sorted(p for p in (root / folder).rglob("*") if p.with_name(p.name + ".sum").is_file())
        suffix = next(p.suffix for p in sealed if sum(q.suffix == p.suffix for q in sealed) >= 2)
        a, b = [p for p in sealed if p.suffix == suffix][:2]
        for src, dst in ((b, a), (b.with_name(b.name + ".sum"), a.with_name(a.name + ".sum"))):
            _put(src, dst, how)
        again = compute()
    assert len(again) == len(first)
    for x, y in zip(again, first):
        np.testing.assert_array_equal(x, y)


def test_a_sealed_c_library_this_machine_cannot_load_is_compiled_again():
    """A cache copied from another machine: the library's seal agrees, but it is not a library here (another
    architecture's ELF, or no ELF at all). It is compiled again, never a traceback from ctypes."""
    from byoc_workbench.core import files

    with cache() as root:
        first = _c()
        lib = sorted((root / "c").glob("*.so"))[0]
        files.write_atomic(lib, b"\x7fELF\x01" + b"\x00" * 64)  # a 32-bit ELF header, nothing loadable
        files.seal(lib)
        again = _c()
    for a, b in zip(again, first):
        np.testing.assert_array_equal(a, b)


def test_an_engine_that_is_a_fifo_or_damaged_is_built_again_and_said_once(tmp_path, caplog, monkeypatch):
    """TensorRT's engines were read unsealed: a truncated one was served as cached, and a FIFO at an engine's
    name was waited on for ever. Each is built again, kept sealed in its place, and said once."""
    monkeypatch.setenv(files.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(files, "_said_damaged", set())
    first = [_engine(n) for n in ("a", "b")]
    assert [e.was_cached for e in first] == [False, False] and all(_engine(n).was_cached for n in ("a", "b"))
    fifo, cut = (e.path for e in first)
    fifo.unlink()
    os.mkfifo(fifo)
    cut.write_bytes(cut.read_bytes()[:7])
    again = {}
    with caplog.at_level(logging.WARNING):
        reader = threading.Thread(target=lambda: again.update(a=_engine("a"), b=_engine("b")), daemon=True)
        reader.start()
        reader.join(60)
        if reader.is_alive():  # let the reader go: open the FIFO's other end, write nothing, close it
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            pytest.fail("the engine cache waited on a FIFO")
    assert [(again[n].plan, again[n].was_cached) for n in ("a", "b")] == [(_plan("a"), False), (_plan("b"), False)]
    assert fifo.is_file() and files.intact(fifo) and files.intact(cut)
    said = [r.getMessage() for r in caplog.records if "damaged" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("engine cache: "), said


def test_a_damaged_search_entry_under_only_cached_promises_no_measurement(tmp_path, caplog):
    """``search --cached`` with a damaged entry said "it is measured again", then failed as "not cached"."""
    from byoc_workbench.measure import search

    subject = search.load({"kind": "demo"})
    options = dict(runs=2, top=1, seams=0, anchors=False)
    search.search(subject, ("onnxruntime", "tvm"), cache=search.Cache(tmp_path), **options)
    for entry in (tmp_path / "build").glob("*.json"):
        damage_entry(entry, "truncated", 0.5)
    with caplog.at_level(logging.WARNING), pytest.raises(search.NotCached):
        search.search(subject, ("onnxruntime", "tvm"), cache=search.Cache(tmp_path), only_cached=True, **options)
    [said] = [r.getMessage() for r in caplog.records if "is damaged" in r.getMessage()]
    assert said.endswith("is damaged; it is not used (only cached measurements asked for)"), said


def test_no_cache_builds_each_engine_again(tmp_path, monkeypatch):
    """``BYOC_WORKBENCH_NO_CACHE=1`` reaches every cache: TensorRT's engines were still served from theirs."""
    monkeypatch.setenv(files.CACHE_ENV, str(tmp_path))
    assert not _engine("a").was_cached and _engine("a").was_cached
    monkeypatch.setenv(files.NO_CACHE_ENV, "1")
    assert not _engine("a").was_cached and _engine("a").plan == _plan("a")
