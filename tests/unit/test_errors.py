"""Bad input gives one line naming the cause and the fix; nothing crashes."""

import ast
import builtins
import importlib
import inspect
import os
import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tvm
from messages import one_line
from tvm import relax

import byoc_workbench
from byoc_workbench import stages, subjects
from byoc_workbench.core import errors
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.draw import renderers
from byoc_workbench.flow import rules
from byoc_workbench.session import Workbench

PACKAGE = Path(byoc_workbench.__file__).parent


def test_rendering_is_one_line_with_one_period_each():
    err = WorkbenchError("Bad rule.", "use another")
    assert str(err) == err.line == "error: Bad rule. Fix: use another."
    assert (err.cause, err.fix) == ("Bad rule.", "use another")
    quoted = WorkbenchError("TVM says:\n  shapes differ.\n", "fix the shapes.  ")
    assert one_line(quoted) == "error: TVM says: shapes differ. Fix: fix the shapes."


def test_notebook_shows_the_same_line_instead_of_a_traceback(capsys):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_cell(
        "from byoc_workbench.core.errors import WorkbenchError\nraise WorkbenchError('Bad rule', 'use another')"
    )
    assert capsys.readouterr().out == "error: Bad rule. Fix: use another.\n"


def test_missing_optional_package_says_what_to_install():
    with pytest.raises(errors.MissingDependencyError) as err:
        errors.import_optional("no_such_package_here", "pip install no-such-package")
    assert isinstance(err.value, WorkbenchError)
    assert one_line(err).endswith("Fix: pip install no-such-package.")


def _package_modules():
    for info in pkgutil.walk_packages([str(PACKAGE)], "byoc_workbench."):
        if not info.name.endswith("__main__"):  # running it would start the CLI
            yield importlib.import_module(info.name)


def test_every_exception_class_derives_from_workbench_error():
    found = {}
    for module in _package_modules():
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and issubclass(cls, BaseException):
                found[f"{module.__name__}.{name}"] = cls
    assert len(found) >= 14, sorted(found)  # the areas' own classes were found, not just errors.py's
    strays = sorted(name for name, cls in found.items() if not issubclass(cls, WorkbenchError))
    assert not strays, f"exception classes outside WorkbenchError: {strays}"


def test_only_errors_py_subclasses_a_builtin_exception():
    # Catches classes that the import scan cannot see, e.g. ones defined inside a function.
    builtin = {
        n
        for n in dir(builtins)
        if isinstance(getattr(builtins, n), type) and issubclass(getattr(builtins, n), BaseException)
    }
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = {b.id for b in node.bases if isinstance(b, ast.Name)}
                if bases & builtin and not (path.name == "errors.py" and node.name == "WorkbenchError"):
                    offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}")
    assert not offenders, offenders


def test_unknown_rule_name(demo_mod, byoc):
    with pytest.raises(WorkbenchError) as err:
        Workbench(demo_mod, byoc, enabled={"byoc-target.add", "byoc-target.nope"})
    assert "byoc-target.nope" in one_line(err)
    with pytest.raises(WorkbenchError) as err:
        rules.select(byoc.rules, ["add"])
    assert "target.rule" in one_line(err)


def test_rule_that_is_not_a_pattern():
    with pytest.raises(WorkbenchError) as err:
        rules.pattern_rule("byoc-target", "bad", "relax.nn.conv2d")
    assert "not a valid pattern" in one_line(err)
    with pytest.raises(WorkbenchError) as err:
        rules.op_rule("byoc-target", "bad", "relax.no_such_op")
    assert "relax.no_such_op" in one_line(err)


def test_module_that_fails_type_checking():
    x = relax.Var("x", relax.TensorType((2, 3), "float32"))
    y = relax.Var("y", relax.TensorType((4, 5), "float32"))
    func = relax.Function(
        [x, y], relax.SeqExpr([], relax.Call(tvm.ir.Op.get("relax.add"), [x, y])), relax.TensorType((2, 3), "float32")
    )
    mod = tvm.IRModule({tvm.ir.GlobalVar("main"): func})
    with pytest.raises(WorkbenchError) as err:
        stages.check_module(mod)
    assert "fails type checking" in one_line(err)


def _malformed(kind: str):
    """A one-function module broken in one way that Normalize lets through and well_formed does not."""
    op = tvm.ir.Op.get("relax.nn.relu")
    x = relax.Var("x", relax.TensorType((2, 3), "float32"))
    y = relax.Var("y", relax.TensorType((2, 3), "float32"))
    if kind == "undefined variable":
        body = relax.SeqExpr([], relax.Call(op, [y]))
    elif kind == "variable of another type":
        z = relax.Var("z", relax.TensorType((7, 7), "float32"))
        body = relax.SeqExpr([relax.BindingBlock([relax.VarBinding(z, relax.Call(op, [x]))])], z)
    elif kind == "dataflow variable outside its block":
        d = relax.DataflowVar("d", relax.TensorType((2, 3), "float32"))
        body = relax.SeqExpr([relax.DataflowBlock([relax.VarBinding(d, relax.Call(op, [x]))])], d)
    else:  # bound twice
        twice = [relax.VarBinding(y, relax.Call(op, [x])), relax.VarBinding(y, relax.Call(op, [x]))]
        body = relax.SeqExpr([relax.BindingBlock(twice)], y)
    ret = relax.TensorType((7, 7) if kind == "variable of another type" else (2, 3), "float32")
    return tvm.IRModule({tvm.ir.GlobalVar("main"): relax.Function([x], body, ret)})


@pytest.mark.parametrize(
    "kind, says",
    [
        ("undefined variable", "Var y is not defined"),
        ("variable of another type", "cannot be assigned to a var"),
        ("dataflow variable outside its block", "used outside DataflowBlock"),
        ("bound twice", "defined more than once"),
    ],
)
def test_a_module_that_is_not_well_formed_is_one_line_naming_what(kind, says):
    """check_module checks types binding by binding (well_formed's own check takes a second on
    6,000 ops): each break it could miss is still refused, with well_formed's words."""
    with pytest.raises(WorkbenchError) as err:
        stages.check_module(_malformed(kind))
    assert "fails type checking" in one_line(err) and says in one_line(err)


def test_well_formed_raises_and_check_module_says_so_in_one_line():
    """TVM 0.27's well_formed returns nothing and raises on what is wrong (it never returns False):
    check_module relies on the raise, and turns it into the one line, with no traceback."""
    with pytest.raises(ValueError, match="Var y is not defined"):
        relax.analysis.well_formed(relax.transform.Normalize()(_malformed("undefined variable")), check_ty=False)
    assert relax.analysis.well_formed(stages.check_module(_malformed_free()), check_ty=False) is None
    with pytest.raises(WorkbenchError) as err:
        stages.check_module(_malformed("undefined variable"))
    line = one_line(err)
    assert line.startswith("error: The module fails type checking: Var y is not defined") and "\n" not in line
    assert "Traceback" not in line and err.value.__cause__ is None


def _malformed_free():
    """The one-function module of :func:`_malformed`, with nothing broken."""
    x = relax.Var("x", relax.TensorType((2, 3), "float32"))
    body = relax.SeqExpr([], relax.Call(tvm.ir.Op.get("relax.nn.relu"), [x]))
    return tvm.IRModule({tvm.ir.GlobalVar("main"): relax.Function([x], body, relax.TensorType((2, 3), "float32"))})


def test_module_without_main():
    with pytest.raises(WorkbenchError) as err:
        stages.check_module(tvm.IRModule({}))
    assert "main" in one_line(err)


def test_python_model_file_that_raises(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("x = 1\nraise RuntimeError('boom')\n")
    with pytest.raises(WorkbenchError) as err:
        subjects.load_model_file(path)
    text = one_line(err)
    assert "RuntimeError" in text and "line 2" in text and "boom" in text


def test_model_file_without_mod(tmp_path):
    path = tmp_path / "empty.py"
    path.write_text("y = 2\n")
    with pytest.raises(WorkbenchError) as err:
        subjects.load_model_file(path)
    assert "does not define mod" in one_line(err)


def test_no_graphviz_at_all(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH with no dot on it
    monkeypatch.setattr(renderers, "FINDERS", (renderers._system_dot,))  # and no graphviz-pure wheel
    with pytest.raises(WorkbenchError) as err:
        renderers.require_graphviz()
    assert "No Graphviz is installed" in one_line(err) and "pip install graphviz-pure" in one_line(err)


@pytest.mark.slow  # over 10 s: `make test` and `make test-slow` run it, not test-fast
def test_cli_without_graphviz_prints_one_line(tmp_path):
    env = dict(os.environ, PATH=str(tmp_path))
    code = (  # as where the graphviz-pure wheel is not installed
        "import sys; from byoc_workbench.draw import renderers; renderers.FINDERS = (renderers._system_dot,); "
        "from byoc_workbench import cli; sys.exit(cli.main())"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "stages", "demo", "--out", str(tmp_path / "o")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert one_line(proc.stderr.strip()).startswith("error: No Graphviz is installed")


@pytest.mark.slow  # over 10 s: `make test` and `make test-slow` run it, not test-fast
def test_cli_bad_model_file_prints_one_line(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(textwrap.dedent("import nothing_here_at_all\n"))
    proc = subprocess.run(
        [sys.executable, "-m", "byoc_workbench.cli", "stages", str(path), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "ModuleNotFoundError" in one_line(proc.stderr.strip())


def test_rule_matching_nothing_is_not_an_error(demo_mod, byoc):
    only_conv_relu = [r for r in byoc.rules if r.name == "conv2d_relu"]
    s = stages.run_stages(demo_mod, only_conv_relu)
    assert s[2].notes == ["rule byoc-target.conv2d_relu matched nothing"]
    assert all(not x.subgraphs for x in s)


def test_an_error_line_read_back_is_the_same_error():
    err = WorkbenchError("Unknown target 'x'. It has a period", "choose one of: byoc-target, tensorrt")
    back = WorkbenchError.from_line(err.line + "\n")
    assert back.line == err.line and back.fix == "choose one of: byoc-target, tensorrt."
    for line in ("ValueError: Fix: this", "error: no fix here", "", "error: a. Fixed: b."):
        assert WorkbenchError.from_line(line) is None
    assert errors.nearest("tensort", ["tensorrt", "tvm", "tensort"], n=3) == ["tensorrt"]  # never the very word
