"""The rule checkboxes: one group for a handful of rules; for a large target (TensorRT has 52),
groups by op family side by side, a filter box, and the rules that matched nothing folded away.

The pure helpers come first (which family an op belongs to, how rules group, which rules
show) and are tested on their own; :class:`RulePanel` only wires checkboxes and buttons.
"""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as W

from byoc_workbench.widgets.html import esc, rule_label_html

COMPACT_FROM = 13  # from this many rules on, group by op family and fold the rules that matched nothing
# Families in the order the panel shows them; a pattern of several ops joins the first family it touches.
OP_FAMILIES = ("conv / matmul", "pool / norm", "activation", "elementwise", "reduce", "shape / data movement", "other")
_FAMILY_OPS = {
    "activation": {"relu", "sigmoid", "tanh", "silu", "gelu", "gelu_tanh", "softmax", "log_softmax", "leakyrelu",
                   "prelu", "softplus", "hardswish", "selu", "elu"},
    "elementwise": {"add", "subtract", "multiply", "divide", "floor_divide", "power", "minimum", "maximum", "clip",
                    "negative", "abs", "sqrt", "rsqrt", "log", "exp", "floor", "ceil", "round", "erf", "atan", "cos",
                    "sin", "tan", "sign", "square", "equal", "not_equal", "less", "less_equal", "greater",
                    "greater_equal", "where", "astype", "mod", "bias_add"},
    "reduce": {"mean", "min", "max", "prod", "sum", "variance", "std", "argmax", "argmin", "cumsum"},
    "shape / data movement": {"reshape", "strided_slice", "split", "concat", "permute_dims", "squeeze",
                              "expand_dims", "layout_transform", "batch_flatten", "flatten", "resize2d", "take",
                              "broadcast_to", "tile", "repeat", "gather_elements", "gather_nd", "scatter_elements",
                              "dynamic_strided_slice", "flip", "pad"},
}  # fmt: skip


def op_family(op: str) -> str:
    """The family of a Relax op name: ``relax.nn.conv2d`` -> ``conv / matmul``."""
    name = op.rsplit(".", 1)[-1]
    if name.startswith("conv") or "matmul" in name or name in ("dense", "linear"):
        return "conv / matmul"
    if "pool" in name or name.endswith("norm"):
        return "pool / norm"
    return next((f for f, ops in _FAMILY_OPS.items() if name in ops), "other")


def rule_family(rule) -> str:
    """The family of the ops a rule claims; a pattern joins its heaviest op's (conv2d+add+relu: conv)."""
    return min((op_family(o) for o in rule.ops), key=OP_FAMILIES.index, default="other")


def rule_groups(rules) -> list:
    """``[(title, rules)]``: one group per target for a handful of rules, else one per op family."""
    rules = list(rules)
    if len(rules) < COMPACT_FROM:
        return [(f"target {t}", [r for r in rules if r.target == t]) for t in dict.fromkeys(r.target for r in rules)]
    return [(f, members) for f in OP_FAMILIES if (members := [r for r in rules if rule_family(r) == f])]


def matched_nothing(rule, enabled, matches) -> bool:
    """The rule is on and claimed no call."""
    return rule.qualified in enabled and not matches.get(rule.qualified, 0)


def shown_rules(rules, enabled, matches, text: str = "", show_unmatched: bool = True) -> set:
    """The names of the rules to show: those ``text`` finds in a name, op or family when
    filtering, else all but the ones that matched nothing unless ``show_unmatched``."""
    text = text.strip().lower()
    if text:
        return {r.qualified for r in rules if text in " ".join((r.qualified, *r.ops, rule_family(r))).lower()}
    return {r.qualified for r in rules if show_unmatched or not matched_nothing(r, enabled, matches)}


def _small_button(text: str, tooltip: str, css: str, action) -> W.Button:
    b = W.Button(description=text, tooltip=tooltip, layout=W.Layout(width="auto"))
    b.add_class("byoc-small").add_class(css)
    b.on_click(lambda _: action())
    return b


class RulePanel(W.VBox):
    """Checkboxes for ``rules``, grouped, with ``prune`` (the prune checkbox) in a column beside them.

    ``on_change(names, on)`` applies a change and returns False when it failed, and the boxes
    go back. :meth:`update` shows new match counts. ``title`` heads a large target's panel."""

    def __init__(self, rules, enabled, on_change: Callable, prune: W.Widget, title: str = "", disabled: bool = False):
        self.rules = tuple(rules)
        self.compact = len(self.rules) >= COMPACT_FROM
        self._on_change = on_change
        self._enabled, self._matches = set(enabled), {}
        self._counted = False  # no match counts until the first update: fold nothing yet
        self._syncing = False
        # One doc shared by 52 rules is said once, in the title (and in each checkbox's tooltip).
        self._inline_doc = not self.compact or len({r.doc for r in self.rules}) > 1
        self.boxes: dict = {}
        self.labels: dict = {}
        self.rows: dict = {}
        self.groups: list = []
        for name, members in rule_groups(self.rules):
            head = W.HBox(
                [
                    W.HTML(f"<b>{esc(name)}</b>").add_class("byoc-group-title"),
                    _small_button(
                        "all on", f"switch on every rule of {name}", "byoc-all-on", self._group(members, True)
                    ),
                    _small_button(
                        "all off", f"switch off every rule of {name}", "byoc-all-off", self._group(members, False)
                    ),
                ]
            ).add_class("byoc-rule-group-head")
            rows = [head]
            for r in members:
                box = W.Checkbox(
                    value=r.qualified in self._enabled,
                    description=r.qualified,
                    indent=False,
                    disabled=disabled,
                    tooltip=f"{r.kind}: {r.doc}" if r.doc else r.kind,
                    layout=W.Layout(width="auto"),
                )
                box.add_class("byoc-rule")
                box.observe(self._on_box, names="value")
                label = W.HTML(rule_label_html(r, self._enabled, {}, doc=self._inline_doc))
                self.boxes[r.qualified], self.labels[r.qualified] = box, label
                self.rows[r.qualified] = W.HBox([box, label]).add_class("byoc-rule-row")
                rows.append(self.rows[r.qualified])
            self.groups.append((members, W.VBox(rows).add_class("byoc-rule-group")))
        prune_column = W.VBox([W.HTML("<b>prune</b>"), prune]).add_class("byoc-rule-group")
        columns = W.HBox([g for _, g in self.groups] + [prune_column]).add_class("byoc-rule-columns")
        self.filter = self.fold = None
        if not self.compact:
            super().__init__([columns])
        else:
            self.filter = W.Text(
                placeholder="filter rules: conv, add, pool…", continuous_update=True, layout=W.Layout(width="220px")
            )
            self.filter.add_class("byoc-rule-filter")
            self.filter.observe(lambda _: self._refresh(), names="value")
            self.fold = W.ToggleButton(value=False, description="", icon="chevron-right", layout=W.Layout(width="auto"))
            self.fold.add_class("byoc-small").add_class("byoc-fold-unmatched")
            self.fold.observe(lambda _: self._refresh(), names="value")
            self.title = W.HTML("").add_class("byoc-rules-title")
            self._title = title
            super().__init__([W.HBox([self.title, self.filter, self.fold]).add_class("byoc-rules-bar"), columns])
        self.add_class("byoc-rules")
        self._refresh()

    # --- what the widget calls ------------------------------------------------------

    def update(self, enabled, matches: dict) -> None:
        """Show ``enabled`` and ``matches`` (calls each rule claimed at the annotate stage)."""
        self._enabled, self._matches, self._counted = set(enabled), dict(matches), True
        by_name = {r.qualified: r for r in self.rules}
        self._syncing = True
        try:
            for q, box in self.boxes.items():
                box.value = q in self._enabled
                self.labels[q].value = rule_label_html(by_name[q], self._enabled, self._matches, doc=self._inline_doc)
        finally:
            self._syncing = False
        self._refresh()

    def unmatched(self) -> list:
        """The rules that are on and matched nothing (none before the first update)."""
        return [r for r in self.rules if self._counted and matched_nothing(r, self._enabled, self._matches)]

    # --- wiring ---------------------------------------------------------------------

    def _refresh(self) -> None:
        """Show the rows the filter and the fold let through, and say how many are folded."""
        if not self.compact:
            return
        unmatched = self.unmatched()
        show_unmatched = self.fold.value or not self._counted
        shown = shown_rules(self.rules, self._enabled, self._matches, self.filter.value, show_unmatched)
        for q, row in self.rows.items():
            row.layout.display = None if q in shown else "none"
        for members, group in self.groups:
            group.layout.display = None if any(r.qualified in shown for r in members) else "none"
        n = len(unmatched)
        self.fold.description = f"{n} rule{'s' if n != 1 else ''} matched nothing"
        self.fold.icon = "chevron-down" if self.fold.value else "chevron-right"
        self.fold.tooltip = ("hide" if self.fold.value else "show") + " the rules that are on but claimed no call"
        self.fold.layout.display = None if n else "none"
        matched = sum(1 for r in self.rules if self._matches.get(r.qualified, 0))
        self.title.value = (
            f"{self._title} <span style='color:#868e96'>· {len(self.rules)} rules, {matched} matched</span>"
        )

    def _group(self, members, on: bool):
        def action():
            shown = shown_rules(members, self._enabled, self._matches, self.filter.value if self.filter else "")
            names = [r.qualified for r in members if r.qualified in shown and (r.qualified in self._enabled) != on]
            if names:
                self._on_change(names, on)

        return action

    def _on_box(self, change) -> None:
        if self._syncing:
            return
        if not self._on_change([change["owner"].description], change["new"]):
            self._syncing = True
            try:
                change["owner"].value = change["old"]
            finally:
                self._syncing = False
