"""Which Graphviz lays out the diagrams, and the one call that runs it.

Two can, both a program with ``dot``'s flags: ``graphviz-pure`` (a port of Graphviz 16.1.0 to Rust,
one static program in a wheel that pip installs on every seat, Python 3.10 to 3.13 on Linux, macOS and
Windows) and a system's ``dot``. The wheel's comes first: it writes the same bytes on every seat,
those of Graphviz 16.1.0, where a system's ``dot`` is whatever version the seat has (Debian 12's
measures labels with the seat's fonts and orders some nodes differently). The system's ``dot`` is
used where the wheel is not installed. docs/ARCHITECTURE.md has the measurements.

:func:`chosen` says which (a :class:`Renderer`), :func:`lay_out` runs it, and :func:`require_graphviz` is the
one-line error, with its fix, where there is none.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import logging
import re
import shutil
import subprocess
import sys
from pathlib import Path

from byoc_workbench.core.errors import WorkbenchError

log = logging.getLogger(__name__)

WHEEL, DOT = "graphviz-pure", "dot"
SYSTEM_DOT = {  # sys.platform: how a seat installs a system dot instead of the wheel
    "linux": "sudo apt-get install graphviz",
    "darwin": "brew install graphviz",
    "win32": "winget install graphviz",
}
# Graphviz's own version in `-V`: "dot - graphviz version 2.43.0 (0)", "... (Rust port of Graphviz 16.1.0)".
_VERSION = re.compile(r"(?i)graphviz (?:version )?(\d+(?:\.\d+)+)")


@dataclasses.dataclass(frozen=True)
class Renderer:
    """A Graphviz that lays out diagrams: ``name`` (``graphviz-pure`` or ``dot``), Graphviz's own
    ``version`` (the one it follows, for the port) and ``path``, the program."""

    name: str
    version: str
    path: str


@functools.lru_cache(maxsize=4)
def _version(path: str) -> str | None:
    """Graphviz's version from ``path -V``; None where the program does not run."""
    try:
        out = subprocess.run([path, "-V"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        log.warning("%s does not run (%s)", path, err)
        return None
    found = _VERSION.findall(out.stderr + out.stdout)
    return found[-1] if out.returncode == 0 and found else None


def _wheel() -> Renderer | None:
    """graphviz-pure's program, found through its wheel's file list: the venv's bin folder need not be on PATH
    (a kernel started by its Python alone)."""
    try:
        dist = importlib.metadata.distribution(WHEEL)
    except importlib.metadata.PackageNotFoundError:
        return None
    names = (WHEEL, f"{WHEEL}.exe")
    program = next((dist.locate_file(f) for f in dist.files or () if f.name in names), None)
    path = str(Path(program).resolve()) if program is not None else shutil.which(WHEEL)  # no file list: PATH
    version = _version(path) if path and Path(path).is_file() else None
    return Renderer(WHEEL, version, path) if version else None


def _system_dot() -> Renderer | None:
    path = shutil.which("dot")
    version = _version(path) if path else None
    return Renderer(DOT, version, path) if version else None


FINDERS = (_wheel, _system_dot)  # in order of preference: the first one found lays out every diagram


def available() -> list[Renderer]:
    """Every Graphviz this process can use, the one :func:`chosen` picks first."""
    return [r for r in (find() for find in FINDERS) if r is not None]


def chosen() -> Renderer | None:
    """The Graphviz that lays out the diagrams: graphviz-pure's, else the system's ``dot``; None where
    there is neither."""
    return next((r for r in (find() for find in FINDERS) if r is not None), None)


def install_fix() -> str:
    """How this seat gets a Graphviz."""
    dot = SYSTEM_DOT.get(sys.platform, "your system's graphviz package")
    return f"make setup, or pip install graphviz-pure (or install Graphviz's dot: {dot})"


def require_graphviz() -> Renderer:
    """:func:`chosen`'s Graphviz, or a one-line error saying how to install one."""
    renderer = chosen()
    if renderer is None:
        raise WorkbenchError(
            "No Graphviz is installed (neither graphviz-pure nor a dot program), so diagrams cannot be drawn",
            install_fix(),
        )
    return renderer


def lay_out(source: str, fmt: str = "svg", renderer: Renderer | None = None) -> str:
    """The DOT text ``source`` laid out by ``renderer`` (by default :func:`require_graphviz`'s) as ``fmt``: ``svg``,
    or ``json`` for the positions. A diagram Graphviz rejects raises a RuntimeError: it is the
    workbench's bug, not the user's."""
    renderer = renderer or require_graphviz()
    done = subprocess.run([renderer.path, f"-T{fmt}"], input=source.encode("utf-8"), capture_output=True)
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip()
        raise RuntimeError(f"{renderer.name} could not lay out the diagram: {why}")
    if done.stderr:  # warnings, e.g. a font without metrics in graphviz-pure: measured as Times instead
        log.debug("%s: %s", renderer.name, done.stderr.decode(errors="replace").strip())
    return done.stdout.decode("utf-8")
