"""Calls go down the floors only: no module calls a method that only a class on a floor above its own defines
(the layers contract sees imports; this sees an object handed down and called back, as a ``Workbench`` was)."""

import ast
import collections
import functools
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "byoc_workbench"
LAYERS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]["layers"]
# Methods of other libraries' objects that share a name with a method of ours on a floor above the caller:
# TVM's BlockBuilder.emit, Relax's from_onnx, argparse's parse_args, a file's read, numpy's load, and the like.
THEIRS = {
    *("emit", "graph", "start", "parse", "parse_args", "read", "from_onnx", "script", "reset", "const", "_leaf"),
    "compile",  # re.compile, tvm.compile
    "load",
}
PLAIN = set().union(*(dir(t) for t in (dict, list, str, set, tuple, bytes, object)))


def _floor(module: str) -> int | None:
    """The floor of a module, counted from the bottom (the layers contract lists them top first)."""
    for i, layer in enumerate(LAYERS):
        for room in layer.replace(":", "|").split("|"):
            if module == room.strip() or module.startswith(room.strip() + "."):
                return len(LAYERS) - i
    return None


@functools.cache  # parsed once for every test of the file; the trees are only read
def _modules() -> dict:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        if (floor := _floor(module)) is not None:
            out[module] = (floor, ast.parse(path.read_text()))
    return out


def _calls_up(modules: dict) -> list:
    """``module:line calls .name()`` for each call of a method that only a class on a floor above defines."""
    methods, functions = collections.defaultdict(set), collections.defaultdict(set)
    for floor, tree in modules.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        methods[item.name].add(floor)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions[node.name].add(floor)
    up = []
    for module, (floor, tree) in modules.items():
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            name = node.func.attr
            if name in THEIRS or name in PLAIN:
                continue
            above = {f for f in methods.get(name, ()) if f > floor}
            if above and not any(f <= floor for f in functions[name]):
                up.append(f"{module}:{node.lineno} calls .{name}()")
    return up


def test_no_module_calls_back_a_method_only_a_floor_above_defines():
    up = _calls_up(_modules())
    assert not up, "a call up the floors (hand the data down instead): " + "; ".join(up)


def test_the_check_finds_a_workbench_handed_down_and_called_back():
    probe = ast.parse("def report(wb):\n    return wb.with_rule('relax.add', False)\n")
    modules = _modules() | {"byoc_workbench.flow.probe": (_floor("byoc_workbench.flow.probe"), probe)}
    assert _calls_up(modules) == _calls_up(_modules()) + ["byoc_workbench.flow.probe:2 calls .with_rule()"]
