"""A bench's result (:func:`byoc_workbench.measure.bench.bench.bench_model`) as the table the CLI prints."""

from __future__ import annotations

from byoc_workbench.core import text
from byoc_workbench.measure.bench.anchors import CLASS_AGNOSTIC
from byoc_workbench.measure.check.compare import found_text


def report_text(result: dict) -> str:
    """The bench as a table, saying which backend ran each row and what the weights were."""
    head = f"{_title(result)}, input {tuple(result['input_shape'])}"
    machine = text.machine_line(result["machine"])
    width = max([12, *(len(label) for group in ("backends", "anchors") for label in result[group])])
    lines = [
        f"{head}, {machine}" if len(f"{head}, {machine}") <= text.WIDTH else f"{head}\n  {machine}",
        f"{'build':{width}s} {'median':>9s} {'min':>9s} {'max':>9s} {'runs':>4s} {'vs tvm':>7s}  "
        "same outputs     ran on",
    ]
    for group in ("backends", "anchors"):
        for label, e in result[group].items():
            speed = result["speedup_vs_tvm"].get(label)
            detections = result["detections"].get(label)
            same = (
                found_text(detections)
                if detections
                else {True: "equal", False: "DIFFERENT"}.get(result["outputs_match"].get(label), "")
            )
            if e.get("note") == CLASS_AGNOSTIC and same:
                same += " (class-agnostic NMS)"
            row = (
                f"{label:{width}s} {text.seconds(e['median_s']):>9s} {text.seconds(e['min_s']):>9s} "
                f"{text.seconds(e['max_s']):>9s} {e['runs']:4d} {f'{speed:.1f}x' if speed else '':>7s}  "
                f"{same:15s}  "
            )
            # What ran goes under the row when the line would be too long for a notebook (as in runner's table).
            ran = e["ran_on"]
            lines.append(row + ran if len(row + ran) <= text.WIDTH else f"{row.rstrip()}\n    ran on {ran}")
    lines += [f"skipped {k}: {why}" for k, why in result["skipped"].items()]
    differ = {k: v for k, v in result["differences"].items() if v and k not in result["detections"]}
    lines += [f"{label} differs from {result['reference']}: {d}" for label, ds in differ.items() for d in ds]
    for label, w in result["where_time_goes"].items():
        kinds = ", ".join(f"{k} {text.seconds(v)}" for k, v in w["by_kind"].items())
        lines.append(f"where {label}'s {text.seconds(w['end_to_end_s'])} go: {kinds}")
        lines += [f"  {text.seconds(r['time_s']):>9s}  {r['kind']:9s} {r['name']}" for r in w["top"]]
    lines += [text.wrap(n, indent="  ", first="note: ") for n in result["notes"]]
    if result["targets"] and result["family"] == "SSD":  # the bar was set for the SSD; another model is not held to it
        shown = ", ".join(f"{k}={_fmt(v)}" for k, v in result["targets"].items())
        lines.append(text.wrap(f"targets (the project's bar for the SSD offloaded on a CPU): {shown}", indent="  "))
    return "\n".join(lines)


def _title(result: dict) -> str:
    """``model (family)`` and the weights: in parentheses, unless the title or the weights have their own."""
    name = result["model"] + (f" ({result['family']})" if result["family"] else "")
    weights = result["weights_label"]
    if not weights:
        return name
    return f"{name}, {weights}" if "(" in weights or name.endswith(")") else f"{name} ({weights})"


def _fmt(value) -> str:
    return f"{value:.2f}" if isinstance(value, float) else str(value)
