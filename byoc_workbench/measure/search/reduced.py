"""Reduced precision beside f32: the best placements measured again with OpenVINO or torch at bf16 or f16.

The search ranks, builds and checks every placement at f32. Asked for a reduced
precision, it then builds the fastest measured placements that put a segment on
OpenVINO or torch again, those inferring at that precision, and checks each against
TVM alone like any other build: its error, and for a detector how many of TVM
alone's detections it still finds. A variant whose outputs pass joins the
finals, so a reduced precision is chosen only when asked for and only when it
gives TVM alone's outputs; one that does not pass stands in the table with its error.
"""

from __future__ import annotations

import dataclasses

from byoc_workbench.backends import registry
from byoc_workbench.measure.search import tasks

VARIANTS = 3  # the fastest measured placements with a segment on such a backend, each built again at the precision


def variants(session, rows: list, precision: str, n: int | None = None) -> list:
    """``[(row, Measured)]``: for the ``n`` (default :data:`VARIANTS`) fastest measured ``rows`` that use
    OpenVINO or torch and gave TVM alone's outputs, a new row for the same placement with those at
    ``precision``, and its end-to-end measurement (no prediction: every segment's cost was measured at f32)."""
    n = VARIANTS if n is None else n
    on_ov = [r for r in rows if r.measured_s and r.equal and registry.take_precision(r.assign.values())]
    picked: list = []
    for r in sorted(on_ov, key=lambda r: r.measured_s):
        if len(picked) < n and all(r.assign != p.assign for p in picked):
            picked.append(r)
    rows = [
        dataclasses.replace(r, what=f"{r.what}, {_reduced(r)} at {precision}", precision=precision, predicted_s=None)
        for r in picked
    ]
    options = {"precision": precision}
    tasks.build_ahead(session, [(row.assign, f"{row.what}, end to end") for row in rows], options)
    return [(row, session.need(row.assign, f"{row.what}, end to end", options=options)) for row in rows]


def precision_differs(row, chosen) -> list:
    """What differs from the chosen placement in precision (``paths.placement_differs`` says where segments run)."""
    return [f"{_reduced(row)} at {row.precision}"] if row.precision != chosen.precision else []


def _reduced(row) -> str:
    """The backends of ``row`` that run at its precision, e.g. ``openvino`` or ``openvino and torch``."""
    return " and ".join(registry.take_precision(row.assign.values()))
