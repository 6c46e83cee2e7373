"""A name means one thing in the package: no two modules share a basename outside ``cli/``, no module is
imported under another name, and each of the questions below has one answer (STYLE.md, habits 13 and 16)."""

import ast
import collections
import functools
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "byoc_workbench"
# One clock, one machine as every cache keys it, one keep threshold, one own model, no bare cache `key`;
# one model reference and one loaded model, and none of the resolvers they replaced.
ONCE = ("measure", "machine_key", "KEEP_S", "own_model", "key", "ModelRef", "Subject")
GONE = ("zoo_model", "zoo_name", "is_own", "workbench_for", "own_workbench", "module_and_rules", "Benched", "described")


@functools.cache  # parsed once for every test of the file; the trees are only read
def _modules() -> dict:
    return {p: ast.parse(p.read_text(), str(p)) for p in sorted(PACKAGE.rglob("*.py"))}


def _aliases(tree: ast.AST) -> list:
    """``import byoc_workbench.x as y`` and ``from byoc_workbench(.x) import m as y`` (relative ones too)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [f"{a.name} as {a.asname}" for a in node.names if a.name.startswith("byoc_workbench") and a.asname]
        elif isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("byoc_workbench")):
            out += [f"{node.module}.{a.name} as {a.asname}" for a in node.names if a.asname]
    return out


def test_no_two_modules_share_a_name_outside_the_cli():
    by_name = collections.defaultdict(list)
    for path in PACKAGE.rglob("*.py"):
        if path.name != "__init__.py" and "cli" not in path.relative_to(PACKAGE).parts[:-1]:
            by_name[path.name].append(path.relative_to(PACKAGE).as_posix())
    assert not {n: ps for n, ps in by_name.items() if len(ps) > 1}


def test_no_package_module_is_imported_under_another_name():
    found = {p.relative_to(ROOT).as_posix(): _aliases(t) for p, t in _modules().items()}
    assert not {p: a for p, a in found.items() if a}


def test_the_notebooks_import_no_package_module_under_another_name():
    found = {}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "code":
                lines = "".join(cell["source"]).splitlines()
                code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in lines)
                found.setdefault(path.name, []).extend(_aliases(ast.parse(code)))
    assert found and not {p: a for p, a in found.items() if a}


def _definitions(tree: ast.Module):
    """``(name, line)`` of every function and class, and of every name a module assigns at its top."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name, node.lineno
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        yield from ((t.id, node.lineno) for t in targets if isinstance(t, ast.Name))


def test_each_answer_is_defined_once():
    defined = collections.defaultdict(list)
    for path, tree in _modules().items():
        for name, line in _definitions(tree):
            defined[name].append(f"{path.relative_to(ROOT).as_posix()}:{line}")
    counts = {name: len(defined[name]) for name in ONCE + GONE}
    once = {"measure": 1, "machine_key": 1, "KEEP_S": 1, "own_model": 1, "key": 0, "ModelRef": 1, "Subject": 1}
    assert counts == once | dict.fromkeys(GONE, 0), {name: defined[name] for name in ONCE + GONE}


# Names that meant two things (issue 41): each is now defined, as a module, a class or a function, in one file.
ONE_MEANING = ("Session", "Plan", "Cluster", "Report", "cache_dir", "op_counts", "profile")


def test_each_name_that_meant_two_things_lives_in_one_module():
    where = collections.defaultdict(set)
    for path, tree in _modules().items():
        rel = path.relative_to(ROOT).as_posix()
        defined = {name for name, _ in _definitions(tree)}
        for name in ONE_MEANING:  # a class, a function, or a module of its name (``Cluster`` and cluster.py)
            if name in defined or path.stem == name.lower():
                where[name].add(rel)
    assert not {name: sorted(paths) for name, paths in where.items() if len(paths) > 1}
