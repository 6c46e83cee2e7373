"""The workbench's pure HTML helpers: a :class:`~byoc_workbench.session.View` (or part of one)
in, an HTML string out. The widget in :mod:`.workbench` only wires controls to them, and
tests check them without a browser."""

from __future__ import annotations

import collections
import html

from byoc_workbench.core.errors import WorkbenchError, shorten
from byoc_workbench.core.text import wrap
from byoc_workbench.draw.display import code_html, svg_body  # noqa: F401 (the widget takes them from here)
from byoc_workbench.draw.graph import short_op
from byoc_workbench.session import View

NO_SELECTION = (
    "<i>Click a node to see its op, attributes, types and which rule claimed it. "
    "Double-click a subgraph, composite, block or folded run to open it.</i>"
)


def esc(value) -> str:
    return html.escape(str(value))


OPS_LISTED = 8  # op lists longer than this are summarised by counts ("add ×133, …")
KINDS_LISTED = 6  # op kinds named in a one-line summary before "… and N more"
SUBGRAPHS_LISTED = 4  # subgraphs named in the summary line
NOTES_LISTED = 3  # notes repeated in the summary line; the Notes tab has them all
# What a node is, in words, by its kind in the graph model.
NODE_KINDS = {
    "input": "input of the function",
    "const": "constant",
    "op": "op call",
    "composite": "composite call: ops that one pattern rule claimed together",
    "subgraph": "call of an offloaded subgraph",
    "packed": "call of the code the codegen generated",
    "call": "call of another function",
    "if": "if/else",
    "tuple": "tuple of values",
    "item": "one item of a tuple",
    "output": "return value of the function",
    "fold": "run of ops drawn folded (double-click to open)",
}


def capped(items, limit: int, noun: str = "", sep: str = ", ", where: str = "") -> str:
    """``items`` joined by ``sep``, the ones past ``limit`` counted: ``a, b, c … and 480 more kinds``."""
    items = [str(i) for i in items]
    if len(items) <= limit:
        return sep.join(items)
    n = len(items) - limit
    more = " ".join(w for w in ("more", noun + ("s" if noun and n != 1 else ""), where) if w)
    return f"{sep.join(items[:limit])} … and {n} {more}"


def ops_line(ops, limit: int | None = None) -> str:
    """Ops counted by kind, most frequent first: ``add ×133, reshape ×77, … and 9 more kinds``.

    ``ops`` is a list of op names or a ``{op: count}`` dict."""
    counter: collections.Counter = collections.Counter()
    for op, n in ops.items() if isinstance(ops, dict) else ((o, 1) for o in ops):
        counter[short_op(op)] += n
    counts = counter.most_common()
    parts = [f"{op} ×{n}" if n > 1 else op for op, n in counts]
    return capped(parts, len(parts) if limit is None else limit, "kind")


def ops_text(ops, limit: int = KINDS_LISTED) -> str:
    """A few ops by name in order; many ops as their count and the most frequent kinds."""
    ops = list(ops)
    if len(ops) <= OPS_LISTED:
        return ", ".join(short_op(o) for o in ops)
    return f"{len(ops)} ops: {ops_line(ops, limit)}"


def status_line(err: BaseException) -> str:
    """One line for any error: a ``WorkbenchError``'s message, else its type and first line."""
    text = str(err) if isinstance(err, WorkbenchError) else f"{type(err).__name__}: {str(err)}"
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    line = lines[0] if lines else type(err).__name__
    return shorten(line, 300)


def status_html(message: str = "", busy: bool = False) -> str:
    """The status area: empty, one red line, or (``busy``) one grey line saying what is being done."""
    if not message:
        return ""
    if busy:
        return f'<div class="byoc-busy" style="color:#495057">⏳ {esc(message)}</div>'
    return f'<div style="color:#c92a2a;font-weight:600">⚠ {esc(message)}</div>'


def match_text(rule: str, enabled, matches: dict) -> str:
    """What a rule's checkbox says about it: off, matched nothing, or how many matches."""
    if rule not in enabled:
        return "off"
    n = matches.get(rule, 0)
    if n == 0:
        return "matched nothing"
    return f"{n} match{'es' if n != 1 else ''}"


def rule_label_html(rule, enabled, matches: dict, doc: bool = True) -> str:
    """The text beside a rule's checkbox: its doc (unless ``doc`` is False) and its match count.

    A rule that matched nothing or is off is greyed, not red: a mismatch is no error."""
    text = match_text(rule.qualified, enabled, matches)
    weight = "bold" if text not in ("off", "matched nothing") else "normal"
    color = "#495057" if weight == "bold" else "#868e96"
    count = f'<span class="byoc-match-count" style="color:{color};font-weight:{weight}">{esc(text)}</span>'
    return f'<span style="color:#868e96">{esc(rule.kind)}: {esc(rule.doc)}</span> — {count}' if doc else count


def subgraph_table_html(rows: list) -> str:
    """The subgraph table: name, target, op count and ops of each subgraph."""
    if not rows:
        return (
            '<div class="byoc-subgraphs byoc-empty">'
            "<i>No subgraphs at this stage: everything runs on the host.</i></div>"
        )
    head = "<tr><th>subgraph</th><th>target</th><th>ops</th><th>ops by kind (click for the list in order)</th></tr>"
    body = "".join(
        f'<tr data-subgraph="{esc(r["name"])}"><td><code>{esc(r["name"])}</code></td><td>{esc(r["target"])}</td>'
        f'<td style="text-align:right">{int(r["op_count"])}</td><td>{op_list_html(r["ops"])}</td></tr>'
        for r in rows
    )
    return f'<table class="byoc-subgraphs">{head}{body}</table>'


def op_list_html(ops) -> str:
    """A few ops by name in order; more as counts by kind (``add ×125, conv2d ×73``), the whole list
    in order one click away."""
    ops = list(ops)
    names = ", ".join(short_op(o) for o in ops)
    if len(ops) <= OPS_LISTED:
        return esc(names)
    return (
        f'<details class="byoc-op-list"><summary>{esc(ops_line(ops))}</summary>'
        f'<div class="byoc-op-list-all">{esc(names)}</div></details>'
    )


def claimed_html(claimed: dict) -> str:
    """What each target has claimed before any subgraph exists (the composite and annotate stages)."""
    if not claimed:
        return (
            '<div class="byoc-subgraphs byoc-empty">'
            "<i>No subgraphs at this stage, and no rule has claimed an op: everything runs on the host.</i></div>"
        )
    head = "<tr><th>target</th><th>ops claimed</th><th>by op</th></tr>"
    body = "".join(
        f'<tr data-target="{esc(t)}"><td>{esc(t)}</td><td style="text-align:right">{sum(ops.values())}</td>'
        f"<td>{esc(ops_line(ops))}</td></tr>"
        for t, ops in claimed.items()
    )
    return (
        '<div class="byoc-claimed"><p style="margin:2px 0 6px"><i>No subgraphs yet: each target has claimed these ops '
        "so far, call by call. The merge stage groups neighbouring claims into regions; the partition stage lifts "
        f'each region into a subgraph.</i></p><table class="byoc-subgraphs">{head}{body}</table></div>'
    )


def subgraphs_tab_html(view: View) -> str:
    """The Subgraphs tab: the subgraph table, or before the merge stage what each target has claimed so far."""
    if not view.subgraphs and view.stage in ("composite", "annotate"):
        return claimed_html(view.claimed)
    return subgraph_table_html(view.subgraphs)


def lines_html(lines: list, empty: str, css: str) -> str:
    """A list of lines (diff or notes) as a bullet list, or ``empty`` in italics."""
    if not lines:
        return f'<div class="{css}"><i>{esc(empty)}</i></div>'
    return f'<ul class="{css}">' + "".join(f"<li><code>{esc(ln)}</code></li>" for ln in lines) + "</ul>"


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


def details_html(node_id: str, details: dict | None, others: list | None = None) -> str:
    """The details panel of one node: what it is, its op, attributes, types, and who claimed it or why none did;
    for an op no rule claimed, ``others``: the other targets with a rule for it.

    The node's id is never shown: it names the node for the widget, not for a reader, who
    finds the node by its op and by its Relax variables (as the TVMScript tab names them)."""
    if not node_id:
        return NO_SELECTION
    if details is None:
        return "<i>That node is not in this diagram (the legend, or a drawing from before the last change).</i>"
    kind = details.get("kind", "")
    rows = [("what", esc(NODE_KINDS.get(kind, kind)))]
    if kind != "fold":
        rows.append(("op", f"<code>{esc(details.get('op') or details.get('label', ''))}</code>"))
    if details.get("variables"):
        names = [f"<code>{esc(v)}</code>" for v in details["variables"]]
        rows.append(("variable" if len(names) == 1 else "variables", capped(names, OPS_LISTED)))
    rows.append(("target", esc(details.get("target", ""))))
    attrs = details.get("attrs") or {}
    rows.append(("attributes", "<br>".join(f"{esc(k)} = <code>{esc(v)}</code>" for k, v in attrs.items()) or "—"))
    rows.append(("inputs", _types_html(details.get("inputs"))))
    rows.append(("output", _types_html([details["output"]] if details.get("output") else [])))
    if details.get("claimed_by"):
        rows.append(("claimed by", f"rule <code>{esc(details['claimed_by'])}</code>"))
    elif "claimed_by" in details:
        rows.append(("not claimed", esc(details.get("why_not_claimed") or "it runs on the host")))
        if others is not None:
            rows.append(("other targets", esc(", ".join(others) + " could take it" if others else "none could")))
    if details.get("ops_inside"):
        rows.append(("ops inside", esc(ops_text(details["ops_inside"], limit=None))))
    body = "".join(
        '<tr><th style="text-align:left;vertical-align:top;padding-right:8px;white-space:nowrap">'
        f"{k}</th><td>{v}</td></tr>"
        for k, v in rows
    )
    return f"<table>{body}</table>"


def stage_summary(view: View) -> str:
    """A stage in a sentence: subgraphs and their ops, ops moved, and notes, each list capped; broken
    between words into lines that fit a notebook's output (HTML joins them again)."""
    n = len(view.subgraphs)
    kinds = "regions" if view.stage == "merge" else "subgraphs"
    parts = [f"{view.stage}: {n} {kinds if n != 1 else kinds[:-1]}"]
    if view.subgraphs:
        named = [f"{r['name']}: {ops_text(r['ops'])}" for r in view.subgraphs]
        parts[0] += f" ({capped(named, SUBGRAPHS_LISTED, kinds[:-1], sep='; ')})"
    elif view.claimed and view.stage in ("composite", "annotate"):
        parts[0] = f"{view.stage}: no subgraphs yet; " + "; ".join(
            f"{t} has claimed {sum(ops.values())} ops ({ops_line(ops, KINDS_LISTED)})"
            for t, ops in view.claimed.items()
        )
    if view.changes:
        parts.append(f"{len(view.changes)} change{'s' if len(view.changes) != 1 else ''} since the stage before")
    if view.notes:
        parts.append(capped(view.notes, NOTES_LISTED, "note", sep="; ", where="(see the Notes tab)"))
    return wrap("; ".join(parts), indent="  ")
