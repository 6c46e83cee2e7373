"""What a CUDA target must hold before TVM 0.27 builds with it (:func:`byoc_workbench.core.devices.resolve` asks).

TVM takes an arch that is no arch, keys and numbers outside what NVIDIA's GPUs have, and
fails on them in the build: minutes later, deep in its code generation, or dying of a division by zero (a warp of 0).
"""

from __future__ import annotations

import re

import tvm

from byoc_workbench.core.errors import WorkbenchError

# Read from the GPU when there is one; written for a CUDA build made without one (CI compiles for sm_90).
_LIMITS = {"max_shared_memory_per_block": 49152, "max_threads_per_block": 1024}
# What a CUDA target's numbers may be (NVIDIA's limits from Turing on).
_RANGES = {
    "max_shared_memory_per_block": (1, 232448),
    "max_threads_per_block": (1, 1024),
    "max_num_threads": (1, 1024),
    "thread_warp_size": (32, 32),
    "registers_per_block": (1, 65536),
}


def complete(target, spec: dict) -> None:
    """Fill in what ``spec`` (``target`` as TVM 0.27's dict) leaves out (this machine's GPU's arch, the limits), then
    refuse in one line what TVM would fail on: an arch that is not ``sm_`` and two digits or more (``sm_90``,
    ``sm_90a``), keys, a limit that is not a whole number in its range (the host is the caller's to check)."""
    if "arch" not in spec:
        dev = tvm.cuda(0)
        if not dev.exist:
            raise WorkbenchError(
                "A CUDA build needs the GPU's arch, and no NVIDIA GPU is visible here",
                "run on a machine with an NVIDIA GPU and its driver, or name the arch: "
                "{'kind': 'cuda', 'arch': 'sm_90'} (compiles without running)",
            )
        spec["arch"] = "sm_" + dev.compute_version.replace(".", "")
    spec.update(_LIMITS | spec)
    arch = spec["arch"]
    if isinstance(arch, str) and not re.fullmatch(r"sm_\d{2,}[a-z]?", arch):  # not text: TVM says so itself
        raise WorkbenchError(f"{arch!r} in the target {target!r} is not a CUDA arch", "name one such as sm_90 or sm_75")
    if "keys" in spec:  # keys choose the schedules: ["cpu"] built a CUDA target's module for the CPU alone
        raise WorkbenchError(f"The target {target!r} sets keys", "leave keys out: the kind (cuda) sets them")
    for key, (low, high) in _RANGES.items():
        value = spec.get(key, low)
        if type(value) is not int or not low <= value <= high:
            said = f"{low}" if low == high else f"a whole number from {low} to {high}"
            raise WorkbenchError(f"{key}={value!r} in the target {target!r}", f"leave {key} out, or give it {said}")
