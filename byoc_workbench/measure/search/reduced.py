"""Reduced precision beside f32: the best placements measured again with OpenVINO or torch at bf16 or f16.

The search ranks, builds and checks every placement at f32. Asked for a reduced
precision, it then builds the fastest measured placements that put a segment on
OpenVINO or torch again, those inferring at that precision, and checks each against
TVM alone like any other build: its error, and for a detector how many of TVM
alone's detections it still finds. A variant whose outputs pass joins the
finals, so a reduced precision is chosen only when asked for and only when it
gives TVM alone's outputs; one that does not pass stands in the table with its error.
Each is named by the precision that ran, as its compiled subgraphs' records say: OpenVINO
asked for bf16 on a CPU without it runs f32, and its row says so ("openvino at f32 (bf16
asked: not on this CPU)"), as ``profile`` and ``compare`` do.
"""

from __future__ import annotations

import dataclasses

from byoc_workbench.backends import registry
from byoc_workbench.measure.search import tasks

VARIANTS = 3  # the fastest measured placements with a segment on such a backend, each built again at the precision


def variants(session, rows: list, precision: str, n: int | None = None) -> list:
    """``[(row, Measured)]``: for the ``n`` (default :data:`VARIANTS`) fastest measured ``rows`` that use
    OpenVINO or torch and gave TVM alone's outputs, a new row for the same placement with ``precision``
    asked of those, and its end-to-end measurement (no prediction: every segment's cost was measured at f32).
    Each row is named by the precision that ran (:func:`at`), known once it is built."""
    n = VARIANTS if n is None else n
    on_ov = [r for r in rows if r.measured_s and r.equal and registry.take_precision(r.assign.values())]
    picked: list = []
    for r in sorted(on_ov, key=lambda r: r.measured_s):
        if len(picked) < n and all(r.assign != p.assign for p in picked):
            picked.append(r)
    rows = [dataclasses.replace(r, precision=precision, predicted_s=None, precision_ran={}) for r in picked]
    what = [f"{r.what}, {at(r)}, end to end" for r in rows]  # "rank 1, bf16 asked of openvino": nothing ran yet
    options = {"precision": precision}
    tasks.build_ahead(session, [(row.assign, w) for row, w in zip(rows, what)], options)
    out = []
    for row, w in zip(rows, what):
        m = session.need(row.assign, w, options=options)
        row.precision_ran = m.precision_ran()
        row.what = f"{row.what}, {at(row)}"
        out.append((row, m))
    return out


def at(row) -> str:
    """What ``row``'s backends that take a precision ran at: ``openvino at bf16``, or where the CPU has none
    ``openvino at f32 (bf16 asked: not on this CPU)``, as their compiled records say (:attr:`Row.precision_ran`);
    before it ran, ``bf16 asked of openvino`` ("" for a row with none of them)."""
    takers = registry.take_precision(row.assign.values())
    ran = {b: row.precision_ran[b] for b in takers if b in row.precision_ran}
    if not ran:
        return f"{row.precision} asked of {' and '.join(takers)}" if takers else ""
    asked = f" ({row.precision} asked: not on this CPU)"
    return " and ".join(f"{b} at {p}" + (asked if p != row.precision else "") for b, p in ran.items())


def precision_differs(row, chosen) -> list:
    """What differs from the chosen placement in the precision that ran (``paths.placement_differs`` says where
    segments run): bf16 asked where OpenVINO ran f32 differs from f32 in nothing."""
    differs = any(p != chosen.precision_ran.get(b, "f32") for b, p in row.precision_ran.items())
    return [at(row)] if differs else []


def not_run(rows: list, precision: str) -> list:
    """The search's notes: one per backend that ran another precision than the one asked of it."""
    ran = {(b, p) for r in rows if r.precision == precision for b, p in r.precision_ran.items() if p != precision}
    return [f"{b} ran {p}, not the {precision} asked: not on this CPU; its rows time {p} again" for b, p in sorted(ran)]
