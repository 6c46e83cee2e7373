"""The README is a front door; docs/ARCHITECTURE.md maps the whole package."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "byoc_workbench"


def test_the_readme_is_a_front_door_that_links_the_guides():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250, "keep the README a front door: details go to docs/"
    for doc in ("docs/instructors.md", "docs/ARCHITECTURE.md", "docs/cli.md"):
        assert f"({doc})" in readme and (ROOT / doc).is_file(), doc
    for section in (
        "## The two commands",
        "## What each notebook teaches",
        "## The command line",
        "## Troubleshooting",
    ):
        assert section in readme, section


def test_the_architecture_names_every_subpackage_and_module():
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    subpackages = sorted(p.parent.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("__init__.py"))
    missing = [s for s in subpackages if s != "." and f"{s}/" not in text]
    assert not missing, f"docs/ARCHITECTURE.md does not name {missing}"
    # Every module, in every floor: a new one gets its line in the room that owns it.
    modules = sorted(p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py") if p.name != "__init__.py")
    sections = _sections(text)
    assert not [m for m in modules if not _names(sections, m)], [m for m in modules if not _names(sections, m)]


def _sections(text: str) -> list:
    """(heading, body) of each section of a Markdown page."""
    return [s.partition("\n")[::2] for s in re.split(r"(?m)^(?=#)", text) if s.strip()]


def _names(sections: list, module: str) -> bool:
    """Whether the page names ``module`` (a path in the package) where it lives: by its path, or by its
    file name in the section of its folder (``bench.py`` under ``measure/`` is not ``cli/bench.py``;
    ``core.py`` under ``measure/`` names ``measure/search/core.py`` where the section says ``search/``);
    a top-level module in a heading, or in a section that is no folder's."""
    *folders, name = module.split("/")
    if folders and any(module in heading + body for heading, body in sections):
        return True
    alone = re.compile(rf"(?<![\w/.]){re.escape(name)}")  # the name, not the end of another path
    if not folders:
        return any(alone.search(heading) or ("/`" not in heading and alone.search(body)) for heading, body in sections)
    return any(
        f"`{folders[0]}/`" in heading and alone.search(body) and all(f"{f}/" in body for f in folders[1:])
        for heading, body in sections
    )
