"""What a target must hold before TVM 0.27 builds with it (:func:`byoc_workbench.core.devices.resolve` asks).

For CUDA, TVM takes an arch that is no arch, keys and numbers outside what NVIDIA's GPUs have, and
fails on them in the build: minutes later, deep in its code generation, or dying of a division by zero (a warp of 0).
For the CPU, LLVM builds for a generic CPU in place of a ``mcpu`` it does not know (a log line, then a build that
is not the one asked for), and a ``mtriple`` of no architecture it has makes the process die of a segfault.
"""

from __future__ import annotations

import re

import tvm
from tvm.target import codegen

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


def cuda(target, spec: dict, host_kind: str) -> None:
    """Fill in what ``spec`` (``target`` as TVM 0.27's dict) leaves out (this machine's GPU's arch, the limits), then
    refuse in one line what TVM would fail on: an arch that is not ``sm_`` and two digits or more (``sm_90``,
    ``sm_90a``), keys, a limit that is not a whole number in its range, a host (of ``host_kind``) not the CPU."""
    if host_kind != "llvm":
        raise WorkbenchError(
            f"The target {target!r} has the host {spec['host']!r}", "leave the host out (the CPU, llvm)"
        )
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


# What LLVM also reads as an architecture it has, besides the names of its targets (llvm::Triple::parseArch).
_ARCH_ALIASES = r"i[3-6]86|amd64|x86-64|arm64(e|_32)?|(arm|thumb)(eb)?v[0-9][0-9a-z.]*|riscv(32|64)[a-z0-9_]*"


def llvm(target, spec: dict) -> None:
    """Refuse in one line a ``mtriple`` whose architecture LLVM does not have, and a ``mcpu`` that is not one of that
    architecture's CPUs (LLVM's own list: ``llc -mcpu=help``); ``spec`` is ``target`` as TVM 0.27's dict."""
    triple = spec.get("mtriple")
    if not isinstance(triple, (str, type(None))):
        return  # TVM refuses it, in one line of resolve's
    if triple is not None:
        arch = triple.split("-")[0]
        if arch not in codegen.llvm_get_targets() and not re.fullmatch(_ARCH_ALIASES, arch):
            raise WorkbenchError(
                f"{triple!r} in the target {target!r} names no architecture LLVM builds for",
                "leave mtriple out (this CPU), or name one such as x86_64-linux-gnu or aarch64-linux-gnu",
            )
    cpu = spec.get("mcpu")
    if cpu is not None:
        known = codegen.llvm_get_cpu_archlist(
            tvm.target.Target({"kind": "llvm", "mtriple": triple} if triple else "llvm")
        )
        if cpu not in known:
            where = f"-mtriple={triple} " if triple else ""
            example = "" if triple else f" such as {codegen.llvm_get_system_cpu()} (this machine's)"
            raise WorkbenchError(
                f"{cpu!r} in the target {target!r} is not a CPU LLVM knows for "
                f"{triple or 'this machine'} (it would build for a generic CPU instead)",
                f"leave mcpu out (any CPU of this kind), or name one of `llc {where}-mcpu=help`{example}",
            )
