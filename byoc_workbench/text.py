"""Plain-text printouts that read well in a notebook at 1366x768.

JupyterLab breaks an output line that is too long anywhere, even inside a word
("mul/tiply"), so every printout the package makes keeps its lines within
:data:`WIDTH` characters, broken between words.
"""

from __future__ import annotations

import textwrap

WIDTH = 96  # characters: a JupyterLab output at 1366x768, file browser open, fits about 110


def wrap(text: str, width: int = WIDTH, indent: str = "", first: str = "") -> str:
    """``text`` broken between words into lines of at most ``width`` characters; the first line starts
    with ``first``, the others with ``indent``. Existing line breaks are kept."""
    lines = []
    for k, para in enumerate(text.splitlines() or [""]):
        lead = first if k == 0 else indent
        lines += textwrap.wrap(
            para, width, initial_indent=lead, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
        ) or [lead.rstrip()]
    return "\n".join(lines)
