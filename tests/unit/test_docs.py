"""The README is a front door; docs/ARCHITECTURE.md maps the whole package."""

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
    modules = sorted({p.name for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"})
    assert not [m for m in modules if m not in text], [m for m in modules if m not in text]
