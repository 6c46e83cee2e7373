"""Working copies of the notebooks for ``make lab``, so that running them never touches git.

JupyterLab saves outputs into the notebook it runs. ``make lab`` serves
``lab/`` (ignored by git) instead of ``notebooks/``: each notebook is copied
there the first time (the solution keys of ``solutions/`` too), and again after
``git pull`` brings a new version of it,
unless the attendee has changed their copy, which is then kept and named in a
line saying how to take the new one. ``--fresh`` (``make lab-fresh``) replaces
every copy; an edited one is first renamed ``<name>.<time>.bak.ipynb`` beside it,
one line each. Each copy goes through a temporary renamed into place: an interrupted
run leaves the old copy or the new one, never half of one, and writes through no link (a linked ``.pristine``
or ``solutions`` folder included). Once the copies are in place, Ctrl-C or SIGTERM no longer changes the status.

Usage: python tools/lab_copies.py SOURCE_DIR LAB_DIR [--fresh]
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from byoc_workbench_cli import exit_on_signals, ignore_signals

if __name__ == "__main__":  # before the package's imports, which load TVM (half a second)
    exit_on_signals("no copy is half-made (each is renamed into place whole): run it again to finish.")

from byoc_workbench.cli.args import Parser  # noqa: E402
from byoc_workbench.core import files, output_paths  # noqa: E402
from byoc_workbench.core.errors import WorkbenchError  # noqa: E402


def sync(source: Path, lab: Path, fresh: bool = False) -> list:
    """Copy or refresh each ``source/*.ipynb``, and the solution keys in ``source/solutions/``, into ``lab``
    (so that Lab's file browser reaches them); returns one line per file that was not refreshed, or, with
    ``fresh``, per edited copy kept as a backup. Both folders are checked before anything is copied."""
    shipped = _checked(source, lab)
    lines = []
    try:
        for rel, new in shipped.items():
            copy, orig = lab / rel, lab / ".pristine" / rel  # orig: the version the copy was made from
            if copy.exists() and copy.samefile(source / rel):  # a link to the shipped file: as new as it gets
                continue
            mine, made_from = _plain(copy), _plain(orig)
            edited = mine is not None and mine not in (new, made_from)
            if edited and not fresh:
                if made_from != new:
                    why = (
                        f"{source / rel} has changed since your copy {copy} was made"
                        if made_from is not None
                        else f"your copy {copy} differs from {source / rel}, and no record says what it was made from"
                    )
                    lines.append(
                        f"note: {why}; your copy is kept. To take the new one: rm {copy}, "
                        "or make lab-fresh for all of them (it keeps edited copies as .bak files)."
                    )
                continue
            if edited:
                lines.append(f"kept your edited {copy} as {_backup(copy)}")
            files.write_atomic(copy, new)  # the copy first: a copy equal to its notebook is never taken as edited
            files.write_atomic(orig, new)
    except OSError as err:
        raise WorkbenchError(
            f"cannot write {err.filename or lab} ({err.strerror or err})", f"free some space, or make {lab} writable"
        ) from None
    return lines


def _checked(source: Path, lab: Path) -> dict:
    """The files of ``source`` to copy, by their path in it, with their bytes; a one-line error for a source with
    none or with one that is no plain file, for a lab that is not a folder of its own that can be written, and
    for a copy's place in it, or a folder on the way to it, taken by a link or by something else."""
    if not source.is_dir():
        why = "does not exist" if not source.exists() else "is not a folder"
        raise WorkbenchError(f"SOURCE_DIR {source} {why}", "pass the folder of the notebooks (notebooks)")
    shipped = sorted(source.glob("*.ipynb")) + sorted(source.glob("solutions/*.py"))
    if not shipped:
        raise WorkbenchError(f"SOURCE_DIR {source} holds no notebook (*.ipynb)", "pass the folder of the notebooks")
    output_paths.check_dir(lab, "LAB_DIR")  # a file, in a file, or a folder that cannot be written
    if lab.resolve() == source.resolve():
        raise WorkbenchError(f"LAB_DIR {lab} is SOURCE_DIR {source} itself", "pass a folder of its own (lab)")
    for nb in shipped:
        copy = lab / nb.relative_to(source)
        _folders_on_the_way(lab, copy.relative_to(lab))
        if not nb.is_file():  # a FIFO would wait for ever, a link to /dev/zero fill the disk
            fix = f"put the notebook itself at {nb} (git restore {nb}), or pass another SOURCE_DIR"
            raise WorkbenchError(f"SOURCE_DIR's {nb} {output_paths.not_a_file(nb)}", fix)
        if copy.is_symlink() and not (copy.exists() and copy.samefile(nb)):
            raise WorkbenchError(
                f"{copy} is a link to {os.readlink(copy)}, and no copy is written through a link",
                f"remove the link {copy}, or pass another LAB_DIR",
            )
        if copy.exists() and not copy.is_file():
            raise WorkbenchError(
                f"{copy} {output_paths.not_a_file(copy)}, where the copy of {nb} goes",
                f"remove {copy}, or pass another LAB_DIR",
            )
    try:
        return {nb.relative_to(source): nb.read_bytes() for nb in shipped}
    except OSError as err:
        fix = f"make {err.filename} readable, or pass another SOURCE_DIR"
        raise WorkbenchError(f"cannot read {err.filename} ({err.strerror or err})", fix) from None


def _folders_on_the_way(lab: Path, rel: Path) -> None:
    """A one-line error for a folder under ``lab`` on the way to the copy ``rel`` or to its record in
    ``.pristine`` that is a link (the copy would be written wherever it leads, over a file there) or no folder."""
    for written in (rel, ".pristine" / rel):
        for folder in [lab / p for p in reversed(written.parents[:-1])]:
            if folder.is_symlink():
                raise WorkbenchError(
                    f"{folder} is a link to {os.readlink(folder)}, and no copy is written through a link",
                    f"remove the link {folder}, or pass another LAB_DIR",
                )
            if folder.exists() and not folder.is_dir():
                raise WorkbenchError(
                    f"{folder} is {output_paths.kind_of(folder)}, where a folder of the copies goes",
                    f"remove {folder}, or pass another LAB_DIR",
                )


def _plain(path: Path) -> bytes | None:
    """What ``path`` holds where it is a plain file, else None (a FIFO in ``.pristine`` is no record of anything)."""
    return path.read_bytes() if path.is_file() else None


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
    if __name__ == "__main__":  # the copies are in place: a signal from here to the exit must not make them a failure
        ignore_signals()
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
