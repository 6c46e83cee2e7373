"""Limits kept by a machine: no file of the package or the tests over 500 lines, no function over 80, no
public function returning a bare tuple or dict."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("byoc_workbench", "tests")
MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80


def _lengths() -> dict:
    """Each Python file's lines, and each function's (its def to its last line; of two of one name in a
    file, the longer)."""
    found = {}
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            source = path.read_text()
            found[rel] = (len(source.splitlines()), MAX_FILE_LINES)
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    key, lines = f"{rel}::{node.name}", node.end_lineno - node.lineno + 1
                    found[key] = (max(lines, found.get(key, (0,))[0]), MAX_FUNCTION_LINES)  # the longest of a name
    return found


def test_no_file_or_function_is_over_its_limit():
    lengths = _lengths()
    assert len([k for k in lengths if k.startswith("tests/")]) > 100  # the tests are measured, not just the package
    over = {k: n for k, (n, limit) in lengths.items() if n > limit}
    assert not over, f"over {MAX_FILE_LINES} lines a file or {MAX_FUNCTION_LINES} a function: {over}"


def test_no_public_function_returns_a_bare_tuple_or_dict():
    # A result of several things is a NamedTuple or a dataclass; a mapping says what it maps (issue 41).
    bare = []
    for path in sorted((ROOT / "byoc_workbench").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
                if isinstance(node.returns, ast.Name) and node.returns.id in ("tuple", "dict"):
                    bare.append(f"{path.relative_to(ROOT).as_posix()}:{node.lineno} {node.name} -> {node.returns.id}")
    assert not bare, f"bare tuple or dict returned: {bare}"
