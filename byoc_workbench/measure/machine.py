"""Where numbers are measured: :func:`machine` records the machine, and :func:`machine_key` what of it every
cache of builds and times is keyed by (builds, kept runs, references, the search's times, a cluster's nodes)."""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import platform
from pathlib import Path
from typing import Any

import tvm

from byoc_workbench.backends import registry

# The packages every built-in backend imports, as their records list them: a measurement depends on their versions.
VERSIONED = tuple(dict.fromkeys(p for b in registry.BUILTIN for p in b.packages))


def machine() -> dict[str, Any]:
    """Where numbers are measured: platform, Python, CPU, cores, TVM, GPU, the versions of the backends' packages
    (:data:`VERSIONED`) and of MXNet."""
    info = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": cpu_name(),
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "os": f"{platform.system()} {platform.machine()}",
        "tvm": tvm.__version__,
        "gpu": tvm.cuda(0).device_name if tvm.cuda(0).exist else None,
    }
    for name in (*VERSIONED, "mxnet"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):  # read, not imported: mxnet takes a second
            info[name] = importlib.metadata.version(name)
    with contextlib.suppress(OSError):
        info["load_average"] = round(os.getloadavg()[0], 2)  # what else ran while measuring
    return info


# What a kept build or time depends on besides the code: not the load, the Python or the kernel's version.
KEYED = ("cpu", "cores", "os", "gpu", "tvm", *VERSIONED)


def machine_key(info: dict | None = None) -> str:
    """The machine as every cache keys it (builds, runs, references, the search's times): the :data:`KEYED`
    fields of this machine's :func:`machine`, or of ``info``, another's (a cluster node's)."""
    info = info or machine()
    return json.dumps({k: info.get(k) for k in KEYED}, sort_keys=True)


def cpu_name() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()
