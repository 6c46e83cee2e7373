"""Static diagrams in a notebook: as wide as the output area, full size on a click.

Jupyter shows a bare SVG at its own size, so a wide stage diagram runs off the
right edge of the output area, where nothing says it goes on. ``Diagram`` fits
the SVG to the output's width and toggles to full size, in a box that scrolls
both ways, when clicked. It needs no kernel, so it also works in a saved notebook.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

PT = 4 / 3  # CSS pixels per point: Graphviz writes sizes in pt
HINT = "Click the diagram for full size (it scrolls); click again to fit the width."
MIN_LABEL_PX = 10  # no label drawn smaller, whatever the output's width: a wider diagram scrolls instead
_SIZE = re.compile(r'<svg\b([^>]*?)\swidth="([\d.]+)pt"\s+height="([\d.]+)pt"')
_FONT = re.compile(r'font-size="([\d.]+)"')


def natural_width(svg: str) -> float | None:
    """The SVG's own width in CSS pixels, or None when it names none in pt."""
    m = _SIZE.search(svg)
    return float(m.group(2)) * PT if m else None


def readable_width(svg: str) -> float | None:
    """The least width, in CSS pixels, at which the SVG's smallest label is :data:`MIN_LABEL_PX` tall
    (never more than its own width), or None when it names no size or no font."""
    full = natural_width(svg)
    sizes = [float(f) for f in _FONT.findall(svg)]
    if full is None or not sizes or min(sizes) <= 0:
        return None
    return min(full, full * MIN_LABEL_PX / (min(sizes) * PT))


def svg_body(svg: str) -> str:
    """The ``<svg>`` element alone, without the XML prolog and DOCTYPE Graphviz writes."""
    start = svg.find("<svg")
    return svg[start:] if start >= 0 else svg


def diagram_html(svg: str, hint: str = HINT) -> str:
    """HTML for a Graphviz SVG: fits the width, never wider than full size; a click toggles full size.

    At first it never shrinks below the width at which its smallest label is :data:`MIN_LABEL_PX`
    tall: a diagram too wide for that scrolls sideways in its box. A click shows it at full size; the
    next one fits the width as the hint says, the whole diagram in the column however small its labels.
    The toggle is an inline handler, which Jupyter keeps for trusted output (any output the user ran);
    elsewhere the diagram still fits.
    """
    body = svg_body(svg)
    full = natural_width(body)
    if full is None:
        return f'<div class="byoc-diagram">{body}</div>'
    least = readable_width(body) or 0
    fit = f"width:100%;height:auto;max-width:{full:.0f}px;min-width:{least:.0f}px"
    body = _SIZE.sub(lambda m: f'<svg{m.group(1)} style="{fit};display:block"', body, count=1)
    # Toggles the svg between full size (the box scrolls what does not fit) and fitting the width, the
    # readable least width given up once asked for.
    toggle = (
        "var s=this.querySelector('svg').style,z=s.maxWidth==='none';"
        f"s.width=z?'100%':'{full:.0f}px';s.maxWidth=z?'{full:.0f}px':'none';if(z)s.minWidth='0';"
        "this.style.maxHeight=z?'':'80vh';"
        "this.style.cursor=z?'zoom-in':'zoom-out'"
    )
    box = f'style="cursor:zoom-in;max-width:100%;overflow:auto" onclick="{html.escape(toggle)}"'
    return (
        f'<div class="byoc-diagram" {box} title="{html.escape(hint)}">{body}</div>'
        f'<div class="byoc-diagram-hint" style="color:#6c757d;font-size:12px">{html.escape(hint)}</div>'
    )


@dataclass(frozen=True)
class Diagram:
    """A Graphviz SVG that displays in a notebook through :func:`diagram_html`.

    ``display(Diagram(view.svg))``, or make it the last expression of a cell.
    """

    svg: str

    def _repr_html_(self) -> str:
        return diagram_html(self.svg)


def code_html(text: str, css: str = "byoc-code") -> str:
    """Source text in a ``<pre>`` that keeps its lines whole and scrolls, never breaking a line in two."""
    return (
        f'<pre class="{css}" style="max-height:420px;overflow:auto;white-space:pre;font-size:12px;margin:0">'
        f"{html.escape(text)}</pre>"
    )


@dataclass(frozen=True)
class Code:
    """Source text (TVMScript, a backend's artifact) as written: long lines scroll sideways instead of
    being broken mid-word. ``display(Code(mod.script()))``."""

    text: str

    def _repr_html_(self) -> str:
        return code_html(self.text)

    def __repr__(self) -> str:
        return self.text
