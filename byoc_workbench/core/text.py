"""Plain-text printouts that read well in a notebook at 1366x768.

JupyterLab breaks an output line that is too long anywhere, even inside a word
("mul/tiply"), so every printout the package makes keeps its lines within
:data:`WIDTH` characters, broken between words.
"""

from __future__ import annotations

import json
import math
import textwrap

WIDTH = 96  # characters: a JupyterLab output at 1366x768, file browser open, fits about 110


def wrap(text: str, width: int = WIDTH, indent: str = "", first: str = "") -> str:
    """``text`` broken between words into lines of at most ``width`` characters; the first line starts
    with ``first``, the others with ``indent``. Existing line breaks are kept."""
    lines = []
    for k, para in enumerate(text.splitlines() or [""]):
        lead = first if k == 0 else indent
        lines += textwrap.wrap(
            para, width, initial_indent=lead, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
        ) or [lead.rstrip()]
    return "\n".join(lines)


def seconds(s: float) -> str:
    """``27.1 s``, ``0.283 s``, ``4.1 ms`` or ``35 µs``."""
    if s >= 10:
        return f"{s:.1f} s"
    if s >= 0.1:
        return f"{s:.3f} s"
    return f"{s * 1e3:.1f} ms" if s >= 1e-3 else f"{s * 1e6:.0f} µs"


def machine_line(info: dict) -> str:
    """``AMD EPYC 7B13, 2 cores, load average 2.9``: the machine a ratio comes from, from its description
    (:func:`byoc_workbench.measure.machine.machine`)."""
    load = f", load average {info['load_average']:g}" if info.get("load_average") is not None else ""
    gpu = f", {info['gpu']}" if info.get("gpu") else ""
    return f"{info['cpu']}, {info['cores']} cores{gpu}{load}"


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def to_json(data) -> str:
    """``data`` as strict JSON, indented: an infinite or NaN number (a backend that refused) becomes null.

    Python's ``json`` writes ``Infinity`` and ``NaN``, which no other JSON reader accepts.
    """
    return json.dumps(_finite(data), indent=2, allow_nan=False)
