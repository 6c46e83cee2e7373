"""Progress bars that leave a line of text behind, never a widget.

tqdm's notebook bars are ipywidgets. A finished one is closed, and a saved
notebook opened again shows "Error displaying widget: model not found" where
each one was. So in a Jupyter kernel :func:`bar` draws tqdm's text bar into one
output, updated in place, and when the work ends that output becomes one
plain line (``Bar.done``, e.g. "TVM alone: built in 9.8 s; 1 run, 973 VM
calls"). In a terminal it is tqdm's bar on stderr, cleared when done; into a
pipe or a file (a log, CI) nothing is drawn, so no ``\r`` redraws pile up there.
"""

from __future__ import annotations

import contextlib
import sys

from tqdm import tqdm


def in_notebook() -> bool:
    """True inside a Jupyter kernel (JupyterLab, nbclient), where outputs are saved with the notebook."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


class _Line:
    """A file for tqdm that shows the last line written to it in one display output."""

    def __init__(self):
        from IPython.display import display  # noqa: PLC0415  only in a kernel, where IPython is loaded (0.1 s)

        self.text = ""
        self.handle = display({"text/plain": ""}, raw=True, display_id=True)

    def write(self, s: str) -> None:
        text = s.replace("\r", "").strip()  # tqdm redraws with "\r<bar>"
        if text and text != self.text:
            self.show(text)

    def show(self, text: str) -> None:
        self.text = text
        self.handle.update({"text/plain": text}, raw=True)

    def flush(self) -> None:
        pass


class Bar:
    """One bar over phases of work: ``update`` counts, ``phase`` starts the next count, ``done`` is
    the line a notebook keeps (tqdm's last line when it is empty)."""

    def __init__(self, tq=None):
        self.tq = tq
        self.done = ""

    def update(self, n: int = 1) -> None:
        if self.tq is not None:
            self.tq.update(n)

    def phase(self, desc: str, total: int | None = None, unit: str = "it") -> None:
        if self.tq is not None:
            self.tq.unit = unit
            self.tq.set_description_str(desc, refresh=False)
            self.tq.reset(total=total)


@contextlib.contextmanager
def bar(total: int | None = None, desc: str = "", unit: str = "it", enabled: bool = True, **options):
    """A :class:`Bar`; ``enabled=False`` (or a stderr that is no terminal, outside a notebook) shows nothing,
    ``options`` go to tqdm (e.g. ``unit_scale``)."""
    line = _Line() if enabled and in_notebook() else None
    if not enabled or (line is None and not (sys.stderr and sys.stderr.isatty())):  # None: closed (2>&-)
        yield Bar()
        return
    file = line if line is not None else sys.stderr
    tq = tqdm(total=total, desc=desc, unit=unit, file=file, leave=line is not None, ascii=False, **options)
    b = Bar(tq)
    try:
        yield b
    finally:
        tq.close()
        if line is not None and b.done:
            line.show(b.done)
