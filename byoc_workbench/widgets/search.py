"""The search's widget: the model coloured by backend, for the chosen placement or any other in the table.

The pure twin is :mod:`byoc_workbench.draw.placements`: the table rows and the
diagram of a placement come from it; the widget only picks which placement
the diagram shows.
"""

from __future__ import annotations

import ipywidgets as W

from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.draw import placements, render
from byoc_workbench.measure.search.result import SearchResult
from byoc_workbench.widgets.graph_view import GraphView


def dropdown_options(result, n: int = placements.SHOWN) -> list:
    """``[(label, assign)]`` for the dropdown: the table's placements in its order, the chosen one first."""
    return [(("chosen: " if r is result.chosen else "") + r.what, r.assign) for r in placements.ordered(result)[:n]]


class SearchWidget(W.VBox):
    """A placement picker, the diagram of the picked placement, and the table of the best few."""

    def __init__(self, result, height: int = 460):
        self.result = result
        self.options = dropdown_options(result)
        self.picker = W.Dropdown(
            options=[(label, k) for k, (label, _) in enumerate(self.options)],
            description="placement",
            layout=W.Layout(width="100%"),
            style={"description_width": "initial"},
        )
        self.view = GraphView(height=height)
        self.table = W.HTML(placements.table_html(result))
        self.picker.observe(lambda change: self.show(change["new"]), names="value")
        super().__init__([self.picker, self.view, self.table])
        if self.options:
            self.show(0)

    def show(self, k: int) -> None:
        """Draw the ``k``-th placement of the dropdown."""
        label, assign = self.options[k]
        self.view.svg = render.to_svg(self.result.dot(assign, f"{self.result.model}: {label}"))


def search_widget(result) -> SearchWidget:
    """The widget of a :class:`~byoc_workbench.measure.search.SearchResult`
    (from :func:`byoc_workbench.measure.search.search`)."""
    if not isinstance(result, SearchResult):
        raise WorkbenchError(
            f"search_widget takes a search's result, not {type(result).__name__}",
            "pass what byoc_workbench.measure.search.search(...) returned",
        )
    return SearchWidget(result)
