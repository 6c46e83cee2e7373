"""Print the pinned requirements of pyproject.toml's optional extras, for `make setup EXTRAS=...`.

``python tools/extras.py pytorch`` -> ``torch==2.14.1 torchvision==0.29.1``. The
workbench is installed with ``--no-deps`` (its pins live in requirements.txt),
so an extra's packages are installed by name from here.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def optional_dependencies(text: str) -> dict:
    """``[project.optional-dependencies]`` of a pyproject.toml whose entries are one line each: read without
    tomllib, which Python 3.10 lacks."""
    extras, inside = {}, False
    for line in text.splitlines():
        if line.startswith("["):
            inside = line.strip() == "[project.optional-dependencies]"
        elif inside and "=" in line and not line.lstrip().startswith("#"):
            name, value = line.split("=", 1)
            extras[name.strip()] = ast.literal_eval(value.split("#")[0].strip() if "]" in value else value.strip())
    return extras


def main(names: list) -> int:
    extras = optional_dependencies((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
    wanted = [n for arg in names for n in arg.replace(",", " ").split()]
    unknown = [n for n in wanted if n not in extras]
    if unknown:
        print(f"error: unknown extra {', '.join(unknown)}. Fix: use one of: {', '.join(extras)}.", file=sys.stderr)
        return 2
    print(" ".join(req for n in wanted for req in extras[n]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
