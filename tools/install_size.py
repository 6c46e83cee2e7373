"""How much disk the install takes: the whole environment, what ``make setup`` puts in it, and the [pytorch] extra.

``make setup`` installs ``requirements.txt`` (and the workbench itself, with ``--no-deps``); an extra adds its
own packages on top. A package belongs to the extra when the extra's requirements pull it in and
``requirements.txt``'s do not. Sizes are disk blocks, as ``du`` counts them, in MB (2**20 bytes).

    python tools/install_size.py   # prints the JSON tools/bench_numbers.py record keeps
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
# Installed beside the pins by venv and by make setup itself: part of what make setup makes.
SETUP_TOOLS = ("pip", "setuptools", "wheel", "byoc-workbench")


def _requirements(lines) -> list:
    return [Requirement(line) for line in (raw.split("#")[0].strip() for raw in lines) if line]


def closure(requirements: list) -> set:
    """The canonical names of the installed distributions ``requirements`` pull in, theirs too."""
    seen, todo = set(), [(r.name, tuple(r.extras)) for r in requirements]
    while todo:
        name, extras = todo.pop()
        key = (canonicalize_name(name), extras)
        if key in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen.add(key)
        for req in _requirements(dist.requires or []):
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in ("", *extras)):
                todo.append((req.name, tuple(req.extras)))
    return {name for name, _ in seen}


def dist_mb(names: set) -> float:
    """The disk blocks of the files of the distributions ``names`` (each file once)."""
    found = set()
    for dist in metadata.distributions():
        if canonicalize_name(dist.metadata["Name"]) in names:
            found.update(Path(os.path.realpath(f.locate())) for f in dist.files or [])
    return sum(p.stat().st_blocks * 512 for p in found if p.is_file()) / 2**20


def du_mb(path: Path) -> float:
    out = subprocess.run(["du", "-sk", str(path)], check=True, capture_output=True, text=True).stdout
    return int(out.split()[0]) / 1024


def sizes(venv: Path | None = None) -> dict:
    """The environment's size (``du``), what ``make setup`` installs of it, and the [pytorch] extra's packages
    (``None`` when torch is not installed)."""
    venv = Path(venv or sys.prefix)
    setup = closure(_requirements((ROOT / "requirements.txt").read_text().splitlines())) | set(SETUP_TOOLS)
    installed = {canonicalize_name(d.metadata["Name"]) for d in metadata.distributions()}
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    torch = closure(_requirements(extras["pytorch"])) - setup
    venv_mb = du_mb(venv)
    return {
        "how": "du -sk of the environment; make setup's part is the environment less every installed package that "
        "requirements.txt does not pull in; the [pytorch] extra's part is the disk blocks of the packages its "
        "requirements pull in and requirements.txt does not",
        "venv_mb": round(venv_mb, 1),
        "setup_mb": round(venv_mb - dist_mb(installed - setup), 1),
        "pytorch_extra_mb": round(dist_mb(torch), 1) if "torch" in torch else None,
        "pytorch_extra_packages": sorted(torch),
    }


if __name__ == "__main__":
    print(json.dumps(sizes(), indent=2))
