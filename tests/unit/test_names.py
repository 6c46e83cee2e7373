"""A name means one thing in the package: no two modules share a basename outside ``cli/``, no module is
imported under another name, no two modules define one public name (but for ``SAME_INTERFACE``), and each of
the questions below has one answer (STYLE.md, habits 13 and 16)."""

import ast
import collections
import fnmatch
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


def _public_top_level(tree: ast.Module) -> set:
    """The public names a module defines at its top: classes, functions and ALL_CAPS constants."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name) and t.id.isupper()}
    return {n for n in names if not n.startswith("_")}


# The names more than one module may define, each with the modules (globs under byoc_workbench/) that may:
# a module outside them that defines one clashes like any other.
SAME_INTERFACE = {
    # Deliberately one interface, which each of these modules answers its own way.
    "BACKEND": ("backends/*",),  # every built-in backend module's one record
    "compile_subgraph": ("backends/*",),  # Backend.compile; the registry's tries them in turn
    "Runner": ("backends/*",),  # the packed function a runtime backend registers
    "whole_model": ("backends/*",),  # Backend.whole_model
    "missing": ("backends/registry.py", "backends/tensorrt.py"),  # Backend.missing; the registry's asks it
    "guard_rules": ("backends/onnx.py", "backends/pytorch.py"),  # Backend.guard
    "EMITTERS": ("backends/c.py", "backends/teaching.py"),  # a codegen's table of emitters
    "conv2d": ("backends/c.py", "backends/teaching.py", "backends/kernels.py"),  # emitters, and the kernel
    "permute_dims": ("backends/c.py", "backends/teaching.py"),
    "CONVERTERS": ("backends/onnx_ops.py", "backends/pytorch_ops.py", "frontends/mxnet.py"),  # converter tables
    "SUPPORTED_OPS": ("backends/onnx_ops.py", "backends/pytorch_ops.py", "backends/teaching.py"),
    "unsupported": ("backends/onnx_ops.py", "backends/pytorch_ops.py", "frontends/mxnet_common.py"),
    "binary": ("backends/c.py", "frontends/mxnet_tensor.py"),  # a table's factory for a family of ops
    "unary": ("backends/c.py", "frontends/mxnet_tensor.py"),
    "assemble": ("backends/c_source.py", "backends/numpy_source.py"),  # a codegen's source assembled and tried
    "trial": ("backends/c_source.py", "backends/numpy_source.py"),
    "FIX": (
        "backends/onnx.py",
        "backends/openvino.py",
        "backends/pytorch.py",
        "measure/compiler/cuda.py",
    ),  # a module's
    "INSTALL_FIX": ("frontends/*.py", "measure/cluster.py"),  # one fix line
    "main": ("cli/__init__.py", "doctor.py", "export.py"),  # an entry module's
    # A translator's legality checks (legal.py's, shared by both translators).
    "CHECKS": ("backends/legal.py", "backends/onnx_ops.py", "backends/pytorch_ops.py"),
    "PRECISIONS": ("backends/openvino.py", "backends/pytorch.py"),  # a backend's precisions
    "FORMAT": ("measure/compiler/compiled.py", "models/shipped.py"),  # the version of what the module writes
    # Compile a module to run it (the notebooks call timing.build).
    "build": ("measure/compiler/execute.py", "measure/time/timing.py"),
    # Run a model once and check or show it (the notebooks call all three).
    "run": ("measure/bench/byom.py", "measure/compiler/execute.py", "workflow.py"),
    # A source codegen's loader of its source as a runner; subjects.load, a model reference's Subject.
    "load": ("backends/*_source.py", "subjects.py"),
    # A drawing module's HTML table, and its Graphviz digraph, of its own thing.
    "table_html": ("draw/counts.py", "draw/detections.py", "draw/placements.py"),
    "to_dot": ("draw/latency.py", "draw/render.py"),
}


def test_no_two_modules_define_one_public_name():
    where = collections.defaultdict(list)
    for path, tree in _modules().items():
        for name in _public_top_level(tree):
            where[name].append(path.relative_to(PACKAGE).as_posix())
    allowed = {name: SAME_INTERFACE.get(name, ()) for name in where}
    clashes = {
        name: paths
        for name, paths in where.items()
        if len(paths) > 1 and not all(any(fnmatch.fnmatch(p, glob) for glob in allowed[name]) for p in paths)
    }
    assert not clashes
    assert not {name for name in SAME_INTERFACE if len(where.get(name, ())) < 2}, "allowed, yet defined once"
