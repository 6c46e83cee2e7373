"""The workbench's pure HTML helpers: a :class:`~byoc_workbench.session.View` (or part of one)
in, an HTML string out. The widget in :mod:`.workbench` only wires controls to them, and
tests check them without a browser."""

from __future__ import annotations

import html

from ..errors import WorkbenchError
from ..session import View

NO_SELECTION = (
    "<i>Click a node to see its op, attributes, types and which rule claimed it. "
    "Double-click a composite or subgraph to open it.</i>"
)


def esc(value) -> str:
    return html.escape(str(value))


def _short(op: str) -> str:
    return op.replace("relax.", "", 1)


def status_line(err: BaseException) -> str:
    """One line for any error: a ``WorkbenchError``'s message, else its type and first line."""
    text = str(err) if isinstance(err, WorkbenchError) else f"{type(err).__name__}: {str(err)}"
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    line = lines[0] if lines else type(err).__name__
    return line if len(line) <= 300 else line[:299] + "…"


def status_html(message: str = "") -> str:
    """The status area: empty, or one red line."""
    if not message:
        return ""
    return f'<div style="color:#c92a2a;font-weight:600">⚠ {esc(message)}</div>'


def match_text(rule: str, enabled, matches: dict) -> str:
    """What a rule's checkbox says about it: off, matched nothing, or how many matches."""
    if rule not in enabled:
        return "off"
    n = matches.get(rule, 0)
    if n == 0:
        return "matched nothing"
    return f"{n} match{'es' if n != 1 else ''}"


def rule_label_html(rule, enabled, matches: dict) -> str:
    """The text beside a rule's checkbox: its doc and its match count."""
    text = match_text(rule.qualified, enabled, matches)
    color = "#c92a2a" if text == "matched nothing" else "#495057"
    return (
        f'<span style="color:#868e96">{esc(rule.kind)}: {esc(rule.doc)}</span> — '
        f'<b class="byoc-match-count" style="color:{color}">{esc(text)}</b>'
    )


def subgraph_table_html(rows: list) -> str:
    """The subgraph table: name, target, op count and ops of each subgraph."""
    if not rows:
        return (
            '<div class="byoc-subgraphs byoc-empty">'
            "<i>No subgraphs at this stage: everything runs on the host.</i></div>"
        )
    head = "<tr><th>subgraph</th><th>target</th><th>ops</th><th>op list</th></tr>"
    body = "".join(
        f'<tr data-subgraph="{esc(r["name"])}"><td><code>{esc(r["name"])}</code></td><td>{esc(r["target"])}</td>'
        f'<td style="text-align:right">{int(r["op_count"])}</td>'
        f"<td>{esc(', '.join(_short(o) for o in r['ops']))}</td></tr>"
        for r in rows
    )
    return f'<table class="byoc-subgraphs">{head}{body}</table>'


def lines_html(lines: list, empty: str, css: str) -> str:
    """A list of lines (diff or notes) as a bullet list, or ``empty`` in italics."""
    if not lines:
        return f'<div class="{css}"><i>{esc(empty)}</i></div>'
    return f'<ul class="{css}">' + "".join(f"<li><code>{esc(ln)}</code></li>" for ln in lines) + "</ul>"


def code_html(text: str, css: str = "byoc-code") -> str:
    """Source text in a scrollable ``<pre>``."""
    return f'<pre class="{css}" style="max-height:420px;overflow:auto;font-size:12px;margin:0">{esc(text)}</pre>'


def generated_html(generated: dict, stage: str) -> str:
    """The codegen's source for each subgraph, or why there is none at this stage."""
    if stage != "codegen":
        return (
            '<div class="byoc-generated">'
            "<i>Choose the codegen stage to see the generated source of each subgraph.</i></div>"
        )
    if not generated:
        return '<div class="byoc-generated"><i>No subgraph was compiled by the codegen.</i></div>'
    return (
        '<div class="byoc-generated">'
        + "".join(f"<h4 style='margin:6px 0'>{esc(n)}</h4>{code_html(src)}" for n, src in generated.items())
        + "</div>"
    )


def _types_html(types) -> str:
    return ", ".join(f"<code>{esc(t)}</code>" for t in types) if types else "—"


def details_html(node_id: str, details: dict | None) -> str:
    """The details panel of one node: op, attributes, types, and who claimed it or why none did."""
    if not node_id:
        return NO_SELECTION
    if details is None:
        return (
            f"<i>Node {esc(node_id)} is not in this diagram (the legend, or a drawing from before the last change).</i>"
        )
    rows = [
        ("node", f"<code>{esc(node_id)}</code> ({esc(details.get('kind', ''))})"),
        ("op", f"<code>{esc(details.get('op') or details.get('label', ''))}</code>"),
    ]
    rows.append(("target", esc(details.get("target", ""))))
    attrs = details.get("attrs") or {}
    rows.append(("attributes", "<br>".join(f"{esc(k)} = <code>{esc(v)}</code>" for k, v in attrs.items()) or "—"))
    rows.append(("inputs", _types_html(details.get("inputs"))))
    rows.append(("output", _types_html([details["output"]] if details.get("output") else [])))
    if details.get("claimed_by"):
        rows.append(("claimed by", f"rule <code>{esc(details['claimed_by'])}</code>"))
    elif "claimed_by" in details:
        rows.append(("not claimed", esc(details.get("why_not_claimed") or "it runs on the host")))
    if details.get("ops_inside"):
        rows.append(("ops inside", esc(", ".join(_short(o) for o in details["ops_inside"]))))
    body = "".join(
        '<tr><th style="text-align:left;vertical-align:top;padding-right:8px;white-space:nowrap">'
        f"{k}</th><td>{v}</td></tr>"
        for k, v in rows
    )
    return f"<table>{body}</table>"


def stage_summary(view: View) -> str:
    """One line about a stage: subgraphs, ops moved and notes."""
    n = len(view.subgraphs)
    kinds = "regions" if view.stage == "merge" else "subgraphs"
    parts = [f"{view.stage}: {n} {kinds if n != 1 else kinds[:-1]}"]
    if view.subgraphs:
        parts[0] += (
            " (" + "; ".join(f"{r['name']}: {', '.join(_short(o) for o in r['ops'])}" for r in view.subgraphs) + ")"
        )
    if view.changes:
        parts.append(f"{len(view.changes)} change{'s' if len(view.changes) != 1 else ''} since the stage before")
    parts += view.notes
    return "; ".join(parts)


def svg_body(svg: str) -> str:
    """The ``<svg>`` element alone, without the XML prolog and DOCTYPE Graphviz writes."""
    start = svg.find("<svg")
    return svg[start:] if start >= 0 else svg
