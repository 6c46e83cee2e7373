"""What the docs say stays true: every notebook introduced in the README, every module and path the docs
name present, every command and option of the CLI documented, every module the notebooks import named
among the entry points, and no development process (issue numbers, paths only this project's machines
have) in anything a user reads."""

import ast
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "byoc_workbench"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# What users see: the package (its docstrings and printouts), the docs and the notebooks.
USER_FACING = [PACKAGE, ROOT / "docs", ROOT / "README.md", ROOT / "notebooks"]
ISSUE = re.compile(r"\bissue\s*#?\d+", re.IGNORECASE)
SLASHED = re.compile(r"byoc_workbench/[\w/]*\w\.py|byoc_workbench/[\w/]+/")
DOTTED = re.compile(r"byoc_workbench(?:\.[A-Za-z_]\w*)+")
QUOTED_PY = re.compile(r"`([\w./-]+\.py)`")
# Where a file a doc names by its short path (`flow/regions.py`, `tools/zoo_support.py`) may live.
SOURCES = [
    p.relative_to(ROOT).as_posix()
    for d in ("byoc_workbench", "tools", "benchmarks", "examples", "notebooks", "tests")
    for p in (ROOT / d).rglob("*.py")
]


def _section(text: str, heading: str) -> str:
    """The text under ``heading``, up to the next heading of its level or above."""
    level = heading.split()[0]
    start = text.index(heading + "\n") + len(heading) + 1
    ends = [m.start() for m in re.finditer(rf"^#{{1,{len(level)}}} ", text[start:], re.M)]
    return text[start : start + ends[0]] if ends else text[start:]


def test_the_readme_introduces_every_notebook():
    section = _section((ROOT / "README.md").read_text(), "## What each notebook teaches")
    notebooks = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert len(notebooks) >= 6, notebooks
    missing = [name for name in notebooks if f"`{name}`" not in section]
    assert not missing, f"README.md's 'What each notebook teaches' has no paragraph for {missing}"
    order = [section.index(f"`{name}`") for name in notebooks]
    assert order == sorted(order), "introduce the notebooks in their order"


def _user_files():
    for top in USER_FACING:
        for path in [top] if top.is_file() else sorted(top.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix in (".py", ".md", ".ipynb", ".js"):
                yield path


def test_nothing_users_see_names_an_issue():
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()[:100]}"
        for path in _user_files()
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if ISSUE.search(line)
    ]
    assert not found, "users do not know the project's issues; say what the text means instead:\n" + "\n".join(found)


def test_no_doc_cites_a_path_a_clone_lacks():
    texts = [*DOCS, *(ROOT / "notebooks").glob("*.ipynb")]
    found = [f"{p.relative_to(ROOT)}" for p in texts if "seed/" in p.read_text()]
    assert not found, f"{found} cite a path only this project's machines have; cite the public tutorial"


def _module_file(parts: list) -> Path | None:
    """The file of module ``byoc_workbench.<parts>``, or None."""
    base = ROOT.joinpath("byoc_workbench", *parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _defines(path: Path, names: list) -> bool:
    """Whether module ``path`` defines ``names[0]`` at its top level (and a class there ``names[1]``)."""
    tree = ast.parse(path.read_text())
    found = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found.update({t.id: node for t in targets if isinstance(t, ast.Name)})
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found.update({(a.asname or a.name).split(".")[0]: node for a in node.names})
    if names[0] not in found:
        lazy = "__getattr__" in found and any(  # a lazy name, e.g. byoc_workbench.Workbench
            isinstance(c, ast.Constant) and c.value == names[0] for c in ast.walk(tree)
        )
        return lazy
    node = found[names[0]]
    if len(names) > 1 and isinstance(node, ast.ClassDef):
        members = {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        members |= {
            t.id for n in node.body if isinstance(n, ast.AnnAssign) for t in [n.target] if isinstance(t, ast.Name)
        }
        return names[1] in members
    return True


def _dotted_exists(name: str) -> bool:
    parts = name.split(".")[1:]
    for cut in range(len(parts), -1, -1):  # the longest prefix that is a module, then its attributes
        path = _module_file(parts[:cut])
        if path is not None:
            return cut == len(parts) or _defines(path, parts[cut:])
    return False


def _py_exists(path: str) -> bool:
    return any(f == path or f.endswith("/" + path) for f in SOURCES)


def test_every_module_the_docs_name_exists():
    wrong = []
    for doc in DOCS:
        text = doc.read_text()
        where = doc.relative_to(ROOT)
        wrong += [f"{where}: {p}" for p in set(SLASHED.findall(text)) if not (ROOT / p).exists()]
        wrong += [f"{where}: {n}" for n in set(DOTTED.findall(text)) if not _dotted_exists(n)]
        wrong += [f"{where}: {p}" for p in set(QUOTED_PY.findall(text)) if not _py_exists(p)]
    assert not wrong, "the docs name modules that do not exist (moved or renamed?):\n" + "\n".join(sorted(wrong))


def test_the_architecture_names_only_folders_that_exist():
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    folders = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*") if p.is_dir()}
    named = set(re.findall(r"`((?:[a-z_]+/)+)`", text))
    wrong = [f for f in named if f.rstrip("/") not in folders and not (ROOT / f).is_dir()]
    assert not wrong, f"docs/ARCHITECTURE.md names folders that do not exist: {wrong}"


def test_the_cli_doc_names_every_command_and_option():
    import argparse

    from byoc_workbench import cli

    parser = cli.parser()
    text = (ROOT / "docs" / "cli.md").read_text()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    missing = [f"`{name}`" for name in commands if f"`{name}`" not in text]
    for name, sub in commands.items():
        options = {o for a in sub._actions for o in a.option_strings if o.startswith("--") and o != "--help"}
        missing += [f"{name} {o}" for o in sorted(options) if o not in text]
    assert not missing, f"docs/cli.md does not document {missing}"


def _notebook_imports() -> set:
    """The package names the notebooks import: ``measure.time.runner``, a module, ``Workbench`` for a short name."""
    found = set()
    statement = re.compile(r"^\s*from byoc_workbench(\.[\w.]+)? import ([\w, ]+)", re.M)
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        for m in statement.finditer("\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")):
            module = (m[1] or ".")[1:]
            for name in (n.strip() for n in m[2].split(",")):
                sub = f"{module}.{name}" if module else name
                is_module = _module_file(sub.split(".")) is not None
                found.add(sub if is_module else module or name)
    return found


def test_the_architecture_names_every_module_the_notebooks_import():
    section = _section((ROOT / "docs" / "ARCHITECTURE.md").read_text(), "## Entry points")
    missing = sorted(n for n in _notebook_imports() if not re.search(rf"(?<![\w.]){re.escape(n)}(?!\w)", section))
    assert not missing, f"docs/ARCHITECTURE.md's 'Entry points' does not name what the notebooks import: {missing}"


def test_a_verdict_is_a_tie_within_the_spread_and_a_ratio_beyond_it():
    from byoc_workbench.measure.time import clock

    a, b = clock.Latency(0.364, 0.335, 0.518, 10), clock.Latency(0.335, 0.309, 0.367, 10)
    tie = clock.verdict("pruned", a, "unpruned", b)
    assert tie.faster is None and tie.line().startswith("'pruned' and 'unpruned' tie here")
    fast = clock.verdict("pruned", clock.Latency(1.0, 0.99, 1.01, 5), "unpruned", clock.Latency(2.0, 1.9, 2.1, 5))
    assert fast.faster == "pruned" and "'pruned' is 2.00x faster here" in fast.line()


def test_notebook_02_prints_its_own_pruning_verdict_and_its_prose_claims_none():
    """One account of pruning: the verdict comes from the runs the table shows; the prose names no winner."""
    import nbformat

    nb = nbformat.read(ROOT / "notebooks" / "02_ssd_tensorrt.ipynb", as_version=4)
    prose = " ".join(c.source for c in nb.cells if c.cell_type == "markdown")
    prose = re.sub(r"<!-- bench:\w+ -->.*?<!-- /bench -->", "", prose)  # the bench record's own verdict
    for claim in ("not pruning is faster", "pruning is faster", "unpruned build is the faster", "it turns around"):
        assert claim not in prose.lower(), claim
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "runner.race(pruned, unpruned)" in code  # from interleaved rounds, not two runs one after the other
