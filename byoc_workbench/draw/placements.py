"""A search's result for a reader: the best placements as a table, and the model coloured by the chosen backends.

Data first: :func:`rows` turns a :class:`~byoc_workbench.measure.search.result.SearchResult`
into table rows; :func:`placement_dot` draws a placement from the module its
search made for it (each offloaded subgraph filled in its backend's colour, what
stays on TVM as host); the text and HTML tables are made from the same rows.
"""

from __future__ import annotations

import html

from byoc_workbench.core import text
from byoc_workbench.draw import folding, render
from byoc_workbench.draw.display import diagram_html
from byoc_workbench.draw.graph import build_graph

HEAD = ("placement", "predicted", "measured", "finals", "outputs", "what differs from the chosen one")
SHOWN = 8  # rows in the table


def _s(seconds) -> str:
    return text.seconds(seconds) if isinstance(seconds, (int, float)) and seconds == seconds else "—"


def ordered(result) -> list:
    """The placements as the table shows them: the chosen one, then the measured by time, then the rest."""
    return sorted(
        result.placements,
        key=lambda r: (
            r is not result.chosen,
            r.measured_s is None,
            r.measured_s or r.predicted_s or 0,
            r.predicted_s or 0,
        ),
    )


def rows(result, n: int = SHOWN) -> list:
    """``[(placement, predicted, measured, finals, outputs, what differs)]`` for the best ``n`` placements.

    In :func:`ordered`'s order; ``finals`` is the median over the finals' rounds and their spread.
    """
    chosen = result.chosen
    out = []
    for r in ordered(result)[:n]:
        verdict = "equal" if r.equal else (r.rejected or "not measured") if r.measured_s is not None else "—"
        name = ("chosen: " if r is chosen else "") + r.what
        differs = "; ".join(r.differs) if r.differs else ("—" if r is chosen else "the same")
        final = f"{_s(r.final_s)} ±{r.spread / 2:.0%}" if r.final_s is not None else "—"
        out.append((name, _s(r.predicted_s), _s(r.measured_s), final, verdict, differs))
    return out


def _table_text(head, body) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    return "\n".join("  ".join(str(x).ljust(w) for x, w in zip(row, widths)).rstrip() for row in [head, *body])


def summary_lines(result) -> list:
    """What was chosen, against what, in how long (and where most of that went), on which machine."""
    ran = ", ".join(f"{b} ran {p}" for b, p in result.precision_ran.items() if p != result.precision)
    at = f"precision {result.precision}" + (f" asked; {ran}: not on this CPU" if ran else "")
    lines = [f"search of {result.model} over {', '.join(result.backends)} ({at})"]
    if result.mark:
        lines[0] += f" — {result.mark}"
    c = result.chosen
    if c is not None:
        lines.append("chosen: " + ", ".join(f"{k} on {v}" for k, v in c.assign.items()))
        if c.predicted_s is None:
            lines.append(
                f"measured {_s(c.measured_s)} (no prediction with {c.precision} asked: the costs were measured at f32)"
            )
        else:
            error = (c.measured_s - c.predicted_s) / c.measured_s if c.measured_s else float("nan")
            lines.append(f"predicted {_s(c.predicted_s)}, measured {_s(c.measured_s)} ({error:+.0%} off)")
    if result.finals:
        rounds = len(result.finals[0].times)
        heats = ", ".join(f"{f.what} {_s(f.median_s)}" for f in sorted(result.finals, key=lambda f: f.median_s))
        lines.append(text.wrap(f"finals ({rounds} rounds, round-robin; medians): {heats}"))
    base = ", ".join(f"{k} {_s(v)}" for k, v in result.baseline.items())
    lines.append(f"baselines: {base}")
    if result.speedup:
        lines.append("chosen against the baselines: " + against(result.speedup, result.speedup_from))
    m = result.measurements
    lines.append(
        f"searched in {result.search_s:.1f} s: {m['builds']} builds measured, {m['cache_hits']} cache hits; "
        f"{text.machine_line(result.machine)}"
    )
    slowest = sorted(m.get("steps", ()), key=lambda st: -st["s"])[:3]
    if slowest:
        lines.append(text.wrap("most of it: " + "; ".join(f"{st['what']} {st['s']:.1f} s" for st in slowest)))
    lines += [f"note: {n}" for n in result.notes]
    return lines


def against(speedup: dict, sources: dict | None = None) -> str:
    """Each baseline's time over the chosen one's, said the way it leans: 'tvm 3.20x faster, x 2.13x slower',
    each followed by where its two times come from, when ``sources`` (``{key: words}``) says."""
    sources = sources or {}
    return ", ".join(
        (f"{k.removeprefix('vs_')} {v:.2f}x faster" if v >= 1 else f"{k.removeprefix('vs_')} {1 / v:.2f}x slower")
        + (f" {sources[k]}" if k in sources else "")
        for k, v in speedup.items()
    )


def result_text(result, n: int = SHOWN) -> str:
    """The summary and the table of the best placements, as text."""
    return "\n".join(summary_lines(result)) + "\n\n" + _table_text(HEAD, rows(result, n))


def table_html(result, n: int = SHOWN) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in HEAD)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(x))}</td>" for x in row) + "</tr>" for row in rows(result, n)
    )
    caption = "<br>".join(html.escape(line) for line in summary_lines(result))
    return f"<table><caption style='text-align:left'>{caption}</caption><tr>{th}</tr>{body}</table>"


def placement_dot(mod, packed: dict, title: str, collapse: bool = False):
    """A Digraph of one placement, drawn from ``(mod, packed)`` (a placement's module, each offloaded subgraph
    a packed call in ``packed``, coloured by backend; the rest host); ``collapse`` hides constants and folds
    long runs of ops."""
    g = build_graph(mod, packed=packed, constants=not collapse)
    if collapse:
        g = folding.fold_chains(g)
    return render.to_dot(g, title=title, show_shapes=not collapse)


def result_html(result, dot=None) -> str:
    """The diagram ``dot`` (e.g. the chosen placement's), then the table of ``result``."""
    return (diagram_html(render.to_svg(dot)) if dot is not None else "") + table_html(result)


def unit_lines(result, units=None) -> list:
    """One line per unit (wrapped at :data:`byoc_workbench.core.text.WIDTH`): what it cost measured on each
    backend, and where the chosen placement put it.

    e.g. ``tensorrt_2 (1 ops): onnxruntime 0.46 ms, openvino 0.87 ms, tvm 0.10 ms -> tvm``.
    """
    chosen = result.chosen.assign if result.chosen else {}
    out = []
    for u in result.units:
        if units is not None and u["name"] not in units:
            continue
        costs = ", ".join(f"{b} {_s(c)}" for b, c in u["costs"].items() if c is not None)
        placed = " + ".join(f"{k} on {v}" for k, v in chosen.items() if k.split("[", 1)[0] == u["name"])
        out.append(text.wrap(f"{u['name']} ({u['ops']} ops): {costs} -> {placed or 'not placed'}", indent="  "))
    return out
