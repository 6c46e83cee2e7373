"""Slow baselines' runs kept on disk, so that a notebook run again does not wait for them again.

TVM alone runs the SSD in tens of seconds on a laptop's CPU, once per run of
notebook 02. :func:`kept_run` and :func:`store` keep such a run (its latency and its
outputs) under ``$BYOC_WORKBENCH_CACHE/runs``, keyed by what it depends on: the
compiled module's build key (:func:`byoc_workbench.measure.compiler.compiled.build_key`: the
module, the TVM target, TVM and the machine), the inputs' bytes, and how many runs
were timed. Whoever shows a kept run says when it was measured.

The numerics check reruns each offloaded subgraph with TVM alone, as long again
for the SSD's backbone. :func:`reference` keeps those outputs under
``$BYOC_WORKBENCH_CACHE/references``, keyed the same way (without a count of
runs): they are what TVM computes, not a measurement, so they carry no date.

The JSON is written last, so a run torn by Ctrl-C or a damaged file is a
miss and is measured again. Nothing is read inside
:func:`byoc_workbench.measure.compiler.compiled.refresh` or with ``BYOC_WORKBENCH_NO_CACHE=1``.
"""

from __future__ import annotations

import hashlib
import json
import time

import numpy as np

from byoc_workbench.core import files
from byoc_workbench.measure.compiler import compiled
from byoc_workbench.measure.time import clock

# How each cache's damaged entry is said (files.trusted), as "runs cache: ... is damaged; it is made again".
RUNS, REFERENCES = "runs cache", "references cache"


def run_key(mod, tvm_target: str, inputs: list, repeat: int, warmup: int) -> str | None:
    """The key of running ``mod`` built for ``tvm_target`` on ``inputs``, or None for a module TVM cannot hash."""
    built = compiled.build_key(mod, tvm_target)
    return None if built is None else _digest(f"{built}\n{repeat} {warmup}", inputs)


def _digest(head: str, inputs) -> str:
    h = hashlib.sha256(head.encode())
    for a in inputs:
        a = np.asarray(a, order="C")
        h.update(f"{a.dtype} {a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:32]


def kept_run(k: str) -> tuple | None:
    """``(latency, outputs, when)`` of the run kept under ``k``, or None (not kept, damaged, or not reading)."""
    root = files.cache_dir("runs")
    if not compiled.reading() or not files.trusted(root / f"{k}.json", RUNS):  # missing, or changed since sealed
        return None
    try:
        record = json.loads((root / f"{k}.json").read_text())
        outputs = files.read_arrays(root / f"{k}.npz", RUNS)
        if outputs is None or len(outputs) != record["outputs"]:
            return None
        latency = clock.Latency(**record["latency"], warmup=record["warmup"])
        return latency, outputs[0] if record["single"] else outputs, record["when"]
    except (OSError, ValueError, KeyError, TypeError):  # damaged: run again
        return None


def store(k: str, latency: clock.Latency, outputs) -> None:
    """Keep a run whose outputs are an array or a list of arrays (nested outputs are not kept); a cache
    that cannot be written keeps nothing, says so once, and the run stands."""
    single = isinstance(outputs, np.ndarray)
    if not single and not all(isinstance(a, np.ndarray) for a in outputs):
        return
    root = files.cache_dir("runs")
    arrays = [outputs] if single else list(outputs)
    record = {
        "single": single,
        "latency": latency.to_json(),
        "warmup": latency.warmup,
        "outputs": len(arrays),
        "when": time.strftime("%Y-%m-%d %H:%M"),
    }

    def write():
        files.write_arrays(root / f"{k}.npz", arrays)
        files.write_sealed(root / f"{k}.json", json.dumps(record))

    files.keep("runs", write)


def reference(built: str | None, function: str, inputs: list, compute) -> list:
    """TVM alone's outputs of ``function`` on ``inputs`` (a list of arrays), read from the cache when kept,
    else ``compute()``-d and kept if that took :data:`~byoc_workbench.measure.compiler.compiled.KEEP_S` or more.
    ``built`` is the :func:`~byoc_workbench.measure.compiler.compiled.build_key` of the module ``function`` belongs
    to; None keeps nothing, nor do outputs that are not all arrays."""
    if built is None:
        return compute()
    path = files.cache_dir("references") / f"{_digest(built + '/' + function, inputs)}.npz"
    found = files.read_arrays(path, REFERENCES) if compiled.reading() else None
    if found is not None:
        return found
    t0 = time.perf_counter()
    outputs = compute()
    quick = time.perf_counter() - t0 < compiled.KEEP_S  # a loop's many small calls: reading would cost as much
    if not quick and all(isinstance(a, np.ndarray) for a in outputs):
        files.keep("references", lambda: files.write_arrays(path, outputs))
    return outputs
