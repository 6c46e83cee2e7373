"""The seed's ``profile_graph``: op counts, by op and by target, and subgraphs per target."""

from __future__ import annotations

import collections
import dataclasses
import html

import matplotlib.pyplot as plt
import tvm

from byoc_workbench.core import ir
from byoc_workbench.flow.summary import op_owners


@dataclasses.dataclass
class OpCounts:
    """How many ops a module holds: in all, per op, per target, and its subgraphs per target."""

    total: int
    by_op: collections.Counter  # op -> count over the whole module
    by_target: dict  # target -> op count ("host" for ops TVM compiles itself)
    subgraphs: dict  # target -> number of subgraph functions
    mark: str = ""  # e.g. "untrained weights", shown on every table and plot

    def rows(self) -> list:
        """``(op, count)`` rows, most frequent first."""
        return sorted(self.by_op.items(), key=lambda kv: (-kv[1], kv[0]))


def profile_graph(mod: tvm.IRModule, mark: str = "", function: str | None = None) -> OpCounts:
    """Count the ops of ``mod``: every Relax op call, inside composites and subgraphs too.

    ``function`` counts one function only, e.g. a subgraph (the seed's ``profile_graph(mod["tensorrt_0"])``).
    """
    owners = op_owners(mod)
    by_op: collections.Counter = collections.Counter()
    by_target: collections.Counter = collections.Counter()
    for (op, owner, target), n in owners.items():
        if function is None or owner.function == function:
            by_op[op] += n
            by_target[target] += n
    names = [n for n in ir.subgraph_functions(mod) if function in (None, n)]
    subgraphs = collections.Counter(ir.subgraph_target(mod, name) for name in names)
    return OpCounts(sum(by_op.values()), by_op, dict(by_target), dict(subgraphs), mark)


def table_text(p: OpCounts) -> str:
    """A plain-text table, as the seed printed it."""
    lines = [f"Total number of operators: {p.total}" + (f"   [{p.mark}]" if p.mark else ""), "Detail breakdown"]
    lines += [f"\t{op}: {n}" for op, n in p.rows()]
    for target, n in sorted(p.subgraphs.items()):
        lines.append(f"{target} subgraph #: {n}")
    if not p.subgraphs:
        lines.append("subgraphs: none")
    return "\n".join(lines)


def table_html(p: OpCounts) -> str:
    """An HTML table for notebooks."""
    head = f"<b>{p.total} ops</b>" + (
        f' <span style="color:#c92a2a;font-weight:bold">[{html.escape(p.mark)}]</span>' if p.mark else ""
    )
    rows = "".join(f"<tr><td>{html.escape(op)}</td><td style='text-align:right'>{n}</td></tr>" for op, n in p.rows())
    sub = ", ".join(f"{html.escape(t)}: {n}" for t, n in sorted(p.subgraphs.items())) or "none"
    return f"<div>{head}<br>subgraphs per target: {sub}<table><tr><th>op</th><th>count</th></tr>{rows}</table></div>"


def plot(p: OpCounts, ax=None, top: int = 25):
    """A horizontal bar chart of the ``top`` most frequent ops, coloured by nothing but count."""
    rows = p.rows()[:top]
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 0.28 * len(rows) + 1.2))
    ax.barh([op.replace("relax.", "") for op, _ in rows][::-1], [n for _, n in rows][::-1], color="#4c6ef5")
    title = f"{p.total} ops; subgraphs: " + (", ".join(f"{t} {n}" for t, n in sorted(p.subgraphs.items())) or "none")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("count")
    if p.mark:
        ax.text(
            0.98,
            0.02,
            p.mark.upper(),
            transform=ax.transAxes,
            ha="right",
            va="bottom",
            color="#c92a2a",
            fontsize=12,
            fontweight="bold",
            alpha=0.8,
        )
    return ax
