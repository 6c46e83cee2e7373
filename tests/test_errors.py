"""Bad input gives one line naming the cause and the fix; nothing crashes."""

import os
import subprocess
import sys
import textwrap

import pytest
import tvm
from tvm import relax

from byoc_workbench.draw import render
from byoc_workbench.errors import WorkbenchError
from byoc_workbench.flow import rules, stages
from byoc_workbench.models import demo
from byoc_workbench.session import Workbench


def one_line(err):
    text = str(err.value)
    assert "\n" not in text and "Fix:" in text, text
    return text


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


def test_module_without_main():
    with pytest.raises(WorkbenchError) as err:
        stages.check_module(tvm.IRModule({}))
    assert "main" in one_line(err)


def test_python_model_file_that_raises(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("x = 1\nraise RuntimeError('boom')\n")
    with pytest.raises(WorkbenchError) as err:
        demo.load_model_file(path)
    text = one_line(err)
    assert "RuntimeError" in text and "line 2" in text and "boom" in text


def test_model_file_without_mod(tmp_path):
    path = tmp_path / "empty.py"
    path.write_text("y = 2\n")
    with pytest.raises(WorkbenchError) as err:
        demo.load_model_file(path)
    assert "does not define mod" in one_line(err)


def test_missing_dot_binary(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH with no dot on it
    with pytest.raises(WorkbenchError) as err:
        render.check_dot()
    assert "apt-get install graphviz" in one_line(err)


def test_cli_without_dot_prints_one_line(tmp_path):
    env = dict(os.environ, PATH=str(tmp_path))
    proc = subprocess.run(
        [sys.executable, "-m", "byoc_workbench.cli", "stages", "demo", "--out", str(tmp_path / "o")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("error: Graphviz's dot program is not installed")
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_cli_bad_model_file_prints_one_line(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(textwrap.dedent("import nothing_here_at_all\n"))
    proc = subprocess.run(
        [sys.executable, "-m", "byoc_workbench.cli", "stages", str(path), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "ModuleNotFoundError" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_rule_matching_nothing_is_not_an_error(demo_mod, byoc):
    only_conv_relu = [r for r in byoc.rules if r.name == "conv2d_relu"]
    s = stages.run_stages(demo_mod, only_conv_relu)
    assert s[2].notes == ["rule byoc-target.conv2d_relu matched nothing"]
    assert all(not x.subgraphs for x in s)
