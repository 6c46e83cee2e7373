"""One backend, one record (issue 49): what the workbench knows of a backend lives in its module's
``BACKEND`` record, the registry is a list of them, and no table keyed by backend names lives elsewhere."""

import ast
import importlib
import importlib.metadata
import importlib.util
import json
from pathlib import Path

import pytest

from byoc_workbench import stages
from byoc_workbench.backends import base, onnxruntime, registry
from byoc_workbench.backends.teaching import TEACHING
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.measure.machine import machine, machine_key
from byoc_workbench.measure.time import runner

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "byoc_workbench"
BUILTIN = frozenset(base.BUILTIN_NAMES)
# Collections of two or more built-in backend names that stay outside backends/, each with why it is no fact table.
# (A function's default argument is never one: ``backends=("tvm", "onnxruntime")`` is a choice.)
EXCEPTIONS = {
    ("draw/render.py", "TARGET_COLORS"): "keyed by target (the rule set that claims a node: byoc-target, tensorrt, "
    "onnxruntime), not by backend: a node is coloured before any backend compiles it",
    ("measure/search/core.py", "DEFAULT_BACKENDS"): "the search's default choice of backends, not a fact about them",
}


def _backend_names(nodes) -> list:
    return [n.value for n in nodes if isinstance(n, ast.Constant) and n.value in BUILTIN]


def _owner(stmt: ast.stmt) -> str:
    """The name a top-level statement defines (its function, class or assigned name), else ``""``."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return stmt.name
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
    return next((t.id for t in targets if isinstance(t, ast.Name)), "")


def tables(source: str) -> list:
    """``(owner, line)`` of each fact table in ``source`` keyed by two or more built-in backend names: a dict
    literal, and a tuple, list or set literal that a membership test or a loop reads or a module assigns."""
    found = []
    for stmt in ast.parse(source).body:
        defaults = {
            id(n)
            for f in ast.walk(stmt)
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            for d in (*f.args.defaults, *f.args.kw_defaults)
            if d is not None
            for n in ast.walk(d)
        }
        top = getattr(stmt, "value", None) if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
        for node in ast.walk(stmt):
            if id(node) in defaults:
                continue
            if isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
                read = node.comparators
            elif isinstance(node, (ast.For, ast.comprehension)):
                read = [node.iter]
            else:
                read = [node] if node is top or isinstance(node, ast.Dict) else []
            for k in read:
                names = k.keys if isinstance(k, ast.Dict) else getattr(k, "elts", [])
                if isinstance(k, (ast.Dict, ast.Tuple, ast.List, ast.Set)) and len(_backend_names(names)) >= 2:
                    found.append((_owner(stmt), k.lineno))
    return found


def test_the_scan_finds_the_tables_it_was_written_for():
    source = """
PRETTY = {"tensorrt": "TensorRT", "onnxruntime": "ONNX Runtime"}
REDUCED = ("openvino", "torch")
ONE = ("onnxruntime", "tvm")
def options(args, backend, backends=("tvm", "onnxruntime", "openvino")):
    if backend not in {"openvino", "torch"}:
        return {"onnxruntime": 1, "mxnet": 2}
    return [p for p in ("onnxruntime", "openvino", "mxnet")]
"""
    assert tables(source) == [("PRETTY", 2), ("REDUCED", 3), ("options", 6), ("options", 8)]


def test_no_table_outside_backends_is_keyed_by_backend_names():
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("backends/"):
            continue
        for owner, line in tables(path.read_text()):
            if (rel, owner) not in EXCEPTIONS:
                found.setdefault(rel, []).append(f"{owner or '<module>'}:{line}")
    assert not found, f"a backend's facts belong in its record (backends/<module>.py BACKEND): {found}"


def test_each_exception_is_still_there():
    for rel, owner in EXCEPTIONS:
        assert owner in [o for o, _ in tables((PACKAGE / rel).read_text())], f"{rel}: {owner} is gone; drop it"


def test_the_registry_is_each_backend_modules_one_record():
    for record in registry.BUILTIN:
        module = "pytorch" if record.name == "torch" else record.name
        assert importlib.import_module(f"byoc_workbench.backends.{module}").BACKEND is record
    assert tuple(b.name for b in registry.BUILTIN) == base.BUILTIN_NAMES
    assert tuple(registry.Registry.builtin().backends.values()) == registry.BUILTIN


def test_a_record_of_the_basic_fields_is_a_backend_like_any_other(fresh_registry):
    mine = base.Backend("mine", TEACHING.compile, "a codegen of mine")
    fresh_registry.add(mine)
    assert registry.missing("mine", fresh_registry) is None
    assert registry.pretty("mine", fresh_registry) == "mine"
    assert registry.take_precision(["mine", "openvino"], fresh_registry) == ("openvino",)
    assert registry.take_precision(registry.choices(fresh_registry), fresh_registry) == ("openvino", "torch")


def test_a_missing_package_is_a_record_with_its_records_fix(fresh_registry):
    fresh_registry.add(base.Backend("gone", TEACHING.compile, "", packages=("no_such_package_b49",), install="ask"))
    why = registry.missing("gone", fresh_registry)
    assert isinstance(why, WorkbenchError) and (why.cause, why.fix) == (
        "gone needs no_such_package_b49, which is not installed",
        "ask",
    )
    assert registry.pretty("tensorrt") == "TensorRT" and runner.RanOn(refused={"openvino": "x"}).why() == [
        "OpenVINO not available: x"
    ]


def test_the_machine_key_versions_every_builtin_backends_packages():
    info = machine()
    packages = {p for b in registry.BUILTIN for p in b.packages}
    assert {"torch", "torchvision", "onnxruntime", "openvino", "tensorrt"} <= packages
    assert packages <= set(json.loads(machine_key(info)))
    upgraded = info | {"torch": "0.0.1+another"}
    assert machine_key(upgraded) != machine_key(info)
    if importlib.util.find_spec("torch") is not None:
        assert info["torch"] == importlib.metadata.version("torch")


def test_onnx_runtimes_detail_says_where_it_ran(demo_mod, byoc):
    pytest.importorskip("onnxruntime")
    final = stages.run_stages(demo_mod, byoc.rules, backend="onnxruntime")[-1]
    provider = onnxruntime.providers()[0].removesuffix("ExecutionProvider")
    assert final.generated and {runner.describe_backend(g) for g in final.generated.values()} == {
        f"onnxruntime ({provider})"
    }
