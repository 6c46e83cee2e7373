"""Compiled modules kept on disk, keyed by content, so the same module is compiled once per machine.

TVM alone on the SSD takes tens of seconds to compile, and the notebooks,
``bench``, ``profile``, the search and the tests all build it. :func:`load_or_build`
keys a build by the module's structural hash (its functions, attributes and
constants), the TVM target, the passes left out and the machine (:func:`~byoc_workbench.measure.machine.machine_key`),
and keeps the exported library under ``$BYOC_WORKBENCH_CACHE/builds``.

TVM 0.27 frees nothing of a library it loaded, so a process loads each entry once (``_opened``),
and a build just made is used as built, not loaded back from the entry it was kept in.

An entry is the library, ``<key>.so``, written atomically, then sealed with
its size and SHA-256 (:func:`byoc_workbench.core.files.seal`). An entry that does
not match its seal, or does not load, is built again and overwritten, so a
damaged entry never outlives one run. Two processes building the same key
both write whole files; the last rename wins, and both are the same build.
:func:`refresh` reads nothing from the cache (the CLI's ``--no-cache``) but
still writes what it builds.

A module that compiles in under :data:`KEEP_S` seconds is not kept (keeping
it would cost more than compiling it), nor is one whose library cannot be
exported (no C compiler, or a runtime module that cannot be saved).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
from collections.abc import Callable
from pathlib import Path

import tvm
import tvm_ffi
from tvm import relax

from byoc_workbench.core import files
from byoc_workbench.measure.machine import machine_key

logger = logging.getLogger(__name__)

FORMAT = 2  # bumped when what an entry holds changes
# What took less than this to make is made again, not kept: a build (load_or_build) or TVM alone's reference
# outputs (kept.reference). Keeping costs about as much (linking the demo's library takes a third of a second, and a
# library loaded back stays in memory for the process's life); what pays is what takes tens of seconds (TVM alone
# compiling and running the SSD). Two seconds leaves the demo's build unkept even on a busy machine.
KEEP_S = 2.0
_reading = [True]
# TVM 0.27 frees nothing of a library it loaded: each load_module of an entry keeps the entry's size in
# memory for the life of the process (160 MB more for each load of TVM alone's SSD). So a process loads
# each entry once, and hands the same executable to every VM after (an executable is read-only).
_opened: dict = {}


@contextlib.contextmanager
def refresh():
    """Within the block, every build is compiled again (and written), none read from the cache."""
    _reading.append(False)
    try:
        yield
    finally:
        _reading.pop()


def reading() -> bool:
    """Whether builds are read from the cache now (False inside :func:`refresh`)."""
    return _reading[-1] and not files.no_cache()


def build_key(mod: tvm.IRModule, tvm_target: str, disabled=()) -> str | None:
    """The cache key of compiling ``mod`` for ``tvm_target`` without the passes ``disabled``, or None for a
    module TVM cannot hash (built, never kept)."""
    try:
        content = tvm_ffi.structural_hash(mod)
    except Exception as err:  # noqa: BLE001 - whatever TVM raises: not keyed
        logger.info("build cache: not keyed (%s)", err)
        return None
    parts = [f"format {FORMAT}", f"{content:x}", str(tvm_target), ",".join(sorted(disabled)), machine_key()]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def _load(lib: Path) -> relax.VMExecutable | None:
    """The entry's executable, or None when it is missing, damaged or does not load."""
    try:
        st = lib.stat()
    except OSError:  # missing, or a link to nowhere or to itself: the link is said damaged
        files.trusted(lib, "build cache")
        return None
    opened = (str(lib), st.st_ino, st.st_size, st.st_mtime_ns)  # a file written since is another entry
    if opened in _opened:
        return _opened[opened]
    if not files.trusted(lib, "build cache"):
        return None
    try:
        executable = relax.VMExecutable(tvm.runtime.load_module(str(lib)))
    except Exception as err:  # noqa: BLE001 - whatever is wrong with it: build again
        logger.warning("build cache: %s does not load (%s); building it again", lib.name, err)
        return None
    _opened[opened] = executable
    return executable


def _store(executable: relax.VMExecutable, lib: Path) -> None:
    files.write_with(lib, executable.export_library, suffix=".so")  # export_library goes by the suffix
    files.seal(lib)


def load_or_build(mod: tvm.IRModule, tvm_target: str, disabled, build: Callable[[], relax.VMExecutable]):
    """The executable of ``mod`` from the cache, else ``build()`` it and keep it.

    Returns ``(executable, hit)``.
    """
    k = build_key(mod, tvm_target, disabled)
    if k is None:
        return build(), False
    lib = files.cache_dir("builds") / f"{k}.so"
    if reading():
        found = _load(lib)
        if found is not None:
            return found, True
    t0 = time.perf_counter()
    executable = build()
    if time.perf_counter() - t0 < KEEP_S:
        return executable, False
    files.keep("builds", lambda: _store(executable, lib), (OSError, RuntimeError))  # RuntimeError: no compiler
    # Not loaded back from the library just written, though that would spare LLVM generating the machine code
    # again when a VM first loads it (about 6 s of TVM alone's SSD): what TVM loads it keeps for the life of
    # the process, and a search keeps a dozen builds. The executable as built is freed with its last VM.
    return executable, False
