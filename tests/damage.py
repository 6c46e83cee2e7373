"""Damaging a cache entry the ways a disk, a copy or another process can, for the cache damage tests."""

import contextlib
import io
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from byoc_workbench.core import files
from byoc_workbench.measure.compiler import compiled


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


def damage_entry(path: Path, damage: str, at: float) -> None:
    if damage == "its seal removed":
        path.with_name(path.name + ".sum").unlink(missing_ok=True)
    elif damage == "a directory":
        path.unlink()
        (path / "inside").mkdir(parents=True)
    else:
        files.write_atomic(path, DAMAGES[damage](path, path.read_bytes(), at))


@contextlib.contextmanager
def cache():
    root = Path(tempfile.mkdtemp(prefix="byoc-damage-"))
    saved = os.environ.get(files.CACHE_ENV), compiled.KEEP_S
    os.environ[files.CACHE_ENV] = str(root)
    compiled.KEEP_S = 0.0  # keep everything, however fast it was to make
    try:
        yield root
    finally:
        compiled.KEEP_S = saved[1]
        if saved[0] is None:
            os.environ.pop(files.CACHE_ENV, None)
        else:
            os.environ[files.CACHE_ENV] = saved[0]
        shutil.rmtree(root, ignore_errors=True)
