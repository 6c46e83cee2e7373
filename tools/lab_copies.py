"""Working copies of the notebooks for ``make lab``, so that running them never touches git.

JupyterLab saves outputs into the notebook it runs. ``make lab`` serves
``lab/`` (ignored by git) instead of ``notebooks/``: each notebook is copied
there the first time (the solution keys of ``solutions/`` too), and again after
``git pull`` brings a new version of it,
unless the attendee has changed their copy, which is then kept and named in a
line saying how to take the new one.

Usage: python tools/lab_copies.py SOURCE_DIR LAB_DIR [--fresh]
"""

from __future__ import annotations

import filecmp
import shutil
import sys
from pathlib import Path


def sync(source: Path, lab: Path, fresh: bool = False) -> list:
    """Copy or refresh each ``source/*.ipynb``, and the solution keys in ``source/solutions/``, into ``lab``
    (so that Lab's file browser reaches them); returns one line per file that was not refreshed."""
    pristine = lab / ".pristine"  # the version each copy was made from
    kept = []
    for nb in sorted(source.glob("*.ipynb")) + sorted(source.glob("solutions/*.py")):
        rel = nb.relative_to(source)
        copy, orig = lab / rel, pristine / rel
        copy.parent.mkdir(parents=True, exist_ok=True)
        orig.parent.mkdir(parents=True, exist_ok=True)
        untouched = copy.exists() and orig.exists() and filecmp.cmp(copy, orig, shallow=False)
        if fresh or not copy.exists() or untouched:
            shutil.copyfile(nb, copy)
            shutil.copyfile(nb, orig)
        elif not filecmp.cmp(nb, orig, shallow=False):
            kept.append(
                f"note: {nb} has changed since your copy {copy} was made; your copy is kept. "
                f"To take the new one: rm {copy} (or make lab-fresh for all of them)."
            )
    return kept


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    fresh = "--fresh" in args
    source, lab = (Path(a) for a in args if a != "--fresh")
    for line in sync(source, lab, fresh):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
