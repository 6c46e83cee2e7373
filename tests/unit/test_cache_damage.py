"""Every kind of cache entry, damaged every way (each kind x each damage, Hypothesis drawing the entry and
where the damage falls): what comes back is what an empty cache gives, and the damaged entry is never trusted.

The kinds are those a notebook or a command reads: compiled builds, kept runs of TVM alone, kept
references of a numerics check, and the C backend's libraries. The search's own entries (measurements,
references, finals, anchors) have their damage test in test_search.py, where a choice is compared.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from byoc_workbench import files, stages
from byoc_workbench.flow import rules
from byoc_workbench.measure import compiled, execute, kept, runner
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


# kind -> (what computes through that cache, the folder its entries are in)
KINDS = {"builds": (_builds, "builds"), "runs": (_runs, "runs"), "references": (_references, "references"),
         "c": (_c, "c")}  # fmt: skip


# Each damage gives the entry's new bytes from its old ones and a number in [0, 1); the entry is replaced
# whole, as another process or a copy would replace it (damaging a library a process has loaded, in place,
# crashes any program that runs it).
def _foreign(path: Path, data: bytes, at: float) -> bytes:
    """Another entry's kind of content: a valid file of its type, with other values."""
    if path.suffix == ".npz":
        out = io.BytesIO()
        np.savez(out, a0=np.full(3, at, "float32"))
        return out.getvalue()
    if path.suffix == ".json":
        return b'{"single": false, "latency": {"median_s": 1.0}, "warmup": 0, "outputs": 1, "when": "x"}'
    return Path(np.__file__).read_bytes()


def _flip(path: Path, data: bytes, at: float) -> bytes:
    flipped = bytearray(data)
    if flipped:
        flipped[min(int(len(data) * at), len(data) - 1)] ^= 0x5A
    return bytes(flipped)


DAMAGES = {
    "truncated": lambda path, data, at: data[: int(len(data) * at)],
    "flipped": _flip,
    "emptied": lambda path, data, at: b"",
    "garbage": lambda path, data, at: os.urandom(64 + int(at * 4096)),
    "foreign": _foreign,
    "a directory": None,
    "its seal removed": None,
}


def _damage(path: Path, damage: str, at: float) -> None:
    if damage == "its seal removed":
        path.with_name(path.name + ".sum").unlink(missing_ok=True)
    elif damage == "a directory":
        path.unlink()
        (path / "inside").mkdir(parents=True)
    else:
        files.write_atomic(path, DAMAGES[damage](path, path.read_bytes(), at))


@contextlib.contextmanager
def _cache():
    root = Path(tempfile.mkdtemp(prefix="byoc-damage-"))
    saved = os.environ.get(files.CACHE_ENV), compiled.KEEP_S, kept.KEEP_S
    os.environ[files.CACHE_ENV] = str(root)
    compiled.KEEP_S = kept.KEEP_S = 0.0  # keep everything, however fast it was to make
    try:
        yield root
    finally:
        compiled.KEEP_S, kept.KEEP_S = saved[1], saved[2]
        if saved[0] is None:
            os.environ.pop(files.CACHE_ENV, None)
        else:
            os.environ[files.CACHE_ENV] = saved[0]
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("damage", sorted(DAMAGES))
@pytest.mark.parametrize("kind", sorted(KINDS))
@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_damaged_entry_gives_what_an_empty_cache_gives(kind, damage, data):
    compute, folder = KINDS[kind]
    with _cache() as root:
        first = compute()  # an empty cache: computed, then kept
        entries = sorted(p for p in (root / folder).rglob("*") if p.is_file())
        assert entries, f"the {kind} cache kept nothing"
        entry = data.draw(st.sampled_from(entries), label="entry")
        _damage(entry, damage, data.draw(st.floats(0.0, 0.99), label="where"))
        again = compute()
    assert len(again) == len(first)
    for a, b in zip(again, first):
        np.testing.assert_array_equal(a, b)
