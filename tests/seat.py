"""A seat's working copies: the notebooks run from a folder outside the repository, as a JupyterHub seat
or a copied notebook runs them, so nothing they read may come from the repository's working directory."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


def copies(where: Path) -> Path:
    """The notebooks and their solution keys copied into ``where`` by ``make lab``'s own copier."""
    spec = importlib.util.spec_from_file_location("lab_copies", ROOT / "tools" / "lab_copies.py")
    lab_copies = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lab_copies)
    lab_copies.sync(NOTEBOOKS, where, fresh=True)
    assert ROOT not in where.resolve().parents, where
    return where


def execute(nb, where: Path, timeout: int):
    """Run ``nb`` (a notebook node) top to bottom in a fresh kernel whose working directory is ``where``."""
    NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(where)}}).execute()
    return nb


def read(where: Path, name: str):
    return nbformat.read(where / name, as_version=4)
