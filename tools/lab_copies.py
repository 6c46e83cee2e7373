"""Working copies of the notebooks for ``make lab``, so that running them never touches git.

JupyterLab saves outputs into the notebook it runs. ``make lab`` serves
``lab/`` (ignored by git) instead of ``notebooks/``: each notebook is copied
there the first time (the solution keys of ``solutions/`` too), and again after
``git pull`` brings a new version of it,
unless the attendee has changed their copy, which is then kept and named in a
line saying how to take the new one. ``--fresh`` (``make lab-fresh``) replaces
every copy; an edited one is first renamed ``<name>.<time>.bak.ipynb`` beside it,
one line each.

Usage: python tools/lab_copies.py SOURCE_DIR LAB_DIR [--fresh]
"""

from __future__ import annotations

import filecmp
import shutil
import sys
import time
from pathlib import Path

from byoc_workbench.cli.args import Parser
from byoc_workbench.core import output_paths
from byoc_workbench.core.errors import WorkbenchError


def sync(source: Path, lab: Path, fresh: bool = False) -> list:
    """Copy or refresh each ``source/*.ipynb``, and the solution keys in ``source/solutions/``, into ``lab``
    (so that Lab's file browser reaches them); returns one line per file that was not refreshed, or, with
    ``fresh``, per edited copy kept as a backup. Both folders are checked before anything is copied."""
    shipped = _checked(source, lab)
    pristine = lab / ".pristine"  # the version each copy was made from
    lines = []
    try:
        for nb in shipped:
            rel = nb.relative_to(source)
            copy, orig = lab / rel, pristine / rel
            if copy.exists() and copy.samefile(nb):  # a link to the shipped file: as new as it gets
                continue
            copy.parent.mkdir(parents=True, exist_ok=True)
            orig.parent.mkdir(parents=True, exist_ok=True)
            edited = copy.exists() and not any(_same(copy, f) for f in (nb, orig))
            if edited and not fresh:
                if not _same(nb, orig):
                    lines.append(
                        f"note: {nb} has changed since your copy {copy} was made; your copy is kept. To take the "
                        f"new one: rm {copy}, or make lab-fresh for all of them (it keeps edited copies as .bak files)."
                    )
                continue
            if edited:
                lines.append(f"kept your edited {copy} as {_backup(copy)}")
            shutil.copyfile(nb, copy)
            shutil.copyfile(nb, orig)
    except OSError as err:
        raise WorkbenchError(
            f"cannot write {err.filename or lab} ({err.strerror or err})", f"free some space, or make {lab} writable"
        ) from None
    return lines


def _checked(source: Path, lab: Path) -> list:
    """The files of ``source`` to copy; a one-line error for a source with none, or a lab that is not a folder
    of its own that can be written."""
    if not source.is_dir():
        why = "does not exist" if not source.exists() else "is not a folder"
        raise WorkbenchError(f"SOURCE_DIR {source} {why}", "pass the folder of the notebooks (notebooks)")
    shipped = sorted(source.glob("*.ipynb")) + sorted(source.glob("solutions/*.py"))
    if not shipped:
        raise WorkbenchError(f"SOURCE_DIR {source} holds no notebook (*.ipynb)", "pass the folder of the notebooks")
    output_paths.check_dir(lab, "LAB_DIR")  # a file, in a file, or a folder that cannot be written
    if lab.resolve() == source.resolve():
        raise WorkbenchError(f"LAB_DIR {lab} is SOURCE_DIR {source} itself", "pass a folder of its own (lab)")
    return shipped


def _same(a: Path, b: Path) -> bool:
    return a.exists() and b.exists() and filecmp.cmp(a, b, shallow=False)


def _backup(copy: Path) -> Path:
    """``copy`` renamed ``<name>.<time>.bak<suffix>`` beside it, where Lab's file browser shows it."""
    kept = copy.with_name(f"{copy.stem}.{time.strftime('%Y%m%d-%H%M%S')}.bak{copy.suffix}")
    if kept.exists():  # the same second as the last backup: never replace one
        raise WorkbenchError(f"{kept} exists already", "run it again in a second")
    copy.rename(kept)
    return kept


def main(argv=None) -> int:
    parser = Parser(prog="tools/lab_copies.py", description=__doc__.splitlines()[0])
    parser.add_argument("source", metavar="SOURCE_DIR", help="the notebooks' folder (notebooks)")
    parser.add_argument("lab", metavar="LAB_DIR", help="the working copies' folder (lab)")
    parser.add_argument("--fresh", action="store_true", help="replace every copy; an edited one is kept as a backup")
    try:
        args = parser.parse_args(argv)
        lines = sync(Path(args.source), Path(args.lab), args.fresh)
    except WorkbenchError as err:
        print(err, file=sys.stderr)
        return err.status
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
