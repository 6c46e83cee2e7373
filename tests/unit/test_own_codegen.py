"""Bring your own codegen: a short one offloads the demo through the Python API and the CLI, and
every backend reaches the runtime through one registration path, with no import circle."""

import ast
import io
import tokenize
from pathlib import Path

import numpy as np
import pytest
from tvm.relax.dpl import is_op, wildcard

from byoc_workbench import cli, stages
from byoc_workbench.backends import base, codegen, registry
from byoc_workbench.core import ir
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.flow import rules, summary
from byoc_workbench.measure.bench import builds
from byoc_workbench.measure.compiler import execute
from byoc_workbench.models import demo

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "mychip.py"


def code_lines(path: Path) -> int:
    """Lines holding code: no blank lines, comments or docstrings."""
    src = path.read_text()
    lines = set()
    docstrings = set()
    for node in ast.walk(ast.parse(src)):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
        ):
            docstrings.update(range(body[0].lineno, body[0].end_lineno + 1))
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            lines.update(range(tok.start[0], tok.end[0] + 1))
    return len(lines - docstrings)


@pytest.fixture(scope="module")
def mychip():
    return codegen.load_codegen_file(EXAMPLE)


def test_a_thirty_line_codegen_offloads_the_demo(mychip, reference_output):
    assert code_lines(EXAMPLE) <= 30
    assert mychip.name == "mychip" and mychip.language == "numpy"
    target = rules.get_target("mychip")  # registered with its rules
    found = stages.run_stages(demo.demo_module(), target.rules, stages.keep_all)  # the target's own codegen
    final = found[-1]
    assert {n: g.backend for n, g in final.generated.items()} == {f"mychip_{k}": "mychip" for k in range(3)}
    conv_bias_relu = ["relax.nn.conv2d", "relax.expand_dims", "relax.add", "relax.nn.relu"]
    assert [sg.ops for sg in summary.stage(found, "partition").subgraphs] == [
        ["relax.add"],
        conv_bias_relu,
        conv_bias_relu,
    ]
    assert not [s for fn in ir.host_functions(final.mod) for s in ir.walk(final.mod[fn], final.mod) if s.composite]
    sources = {n: g.source for n, g in final.generated.items()}
    assert "kernels.conv2d(d1, w1, (1, 1), (1, 1, 1, 1), (1, 1))" in sources["mychip_1"]
    assert "iter1 + np.array(1, dtype='int32')" in sources["mychip_0"]  # the loop counter's add
    out = execute.run(final.mod, demo.demo_inputs())
    np.testing.assert_allclose(out, reference_output, rtol=1e-5, atol=1e-5)


def test_the_same_codegen_through_the_cli(capsys):
    code = cli.main(["compare", "demo", "--no-prune", "--backend", str(EXAMPLE), "--tolerance", "1e-5", "--json"])
    data = __import__("json").loads(capsys.readouterr().out)
    assert code == 0 and data["over_tolerance"] == []
    assert [(r["name"], r["backend"], r["calls"]) for r in data["subgraphs"]] == [
        ("mychip_0", "mychip", 2),
        ("mychip_1", "mychip", 2),
        ("mychip_2", "mychip", 1),
    ]
    assert data["max_rel"] < 1e-5
    assert cli.main(["profile", "demo", "--backend", "no/such/codegen.py"]) == 2
    assert "Codegen file no/such/codegen.py does not exist" in capsys.readouterr().err


def test_a_codegen_is_a_backend_everywhere(mychip):
    assert "mychip" in registry.choices()
    assert registry.backends_for(None, "mychip") == ("mychip",)  # its target's subgraphs go to it
    assert builds.native_target("mychip").name == "mychip" and builds.native_target("onnxruntime") is None
    assert registry.register_ext("mychip") == "relax.ext.mychip"


def test_missing_emitters_and_bad_tables_are_one_line(mychip, demo_mod, byoc, fresh_registry):
    # Chosen by name on another target's rules, a codegen takes the rules it has emitters for, and says so.
    found = stages.run_stages(demo_mod, byoc.rules, stages.keep_all, backend="mychip")
    assert "backend mychip compiles 3 of the 4 rules; left off: byoc-target.reshape" in found[2].notes
    assert [sg.ops[-1] for sg in found[-1].subgraphs] == ["relax.add", "relax.nn.relu", "relax.nn.relu"]
    # Its own rules are its own word: a subgraph holding an op without an emitter is one line.
    exit_branch = summary.stage(stages.run_stages(demo_mod, byoc.rules), "prune").mod["byoc_target_2"]
    with pytest.raises(WorkbenchError, match="mychip codegen has no NumPy emitter for relax.reshape") as err:
        mychip.compile("byoc_target_2", exit_branch)
    assert "\n" not in str(err.value) and "Fix: add one to its emit table ('reshape'" in str(err.value)
    for bad, match in [
        (dict(name="my chip", emit={"relu": str}), "must be a word"),
        (dict(name="x", emit={"relu": 3}), "is a int, not a function"),
        (dict(name="x", emit={}), "emit is an empty dict"),
        (dict(name="x", emit={"relu": str}, language="rust"), "Unknown codegen language"),
        (dict(name="tvm", emit={"relu": str}), "a backend choice already"),
        (dict(name="c", emit={"relu": str}), "a built-in backend already"),
        (dict(name="x", emit={"relu": str}, rules=[rules.op_rule("y", "relu", "relax.nn.relu")]), "target 'y'"),
    ]:
        with pytest.raises(WorkbenchError, match=match) as err:
            codegen.register_codegen(**bad, registry=fresh_registry)
        assert "\n" not in str(err.value)


def test_an_emitter_that_raises_is_named(demo_mod, byoc):
    def relu(op):
        return op.args[7]

    codegen.register_codegen("broken", emit={**mychip_emit(), "relu": relu})
    with pytest.raises(WorkbenchError, match=r"The broken emitter for relax.nn.relu \(relu\) raised IndexError"):
        stages.run_stages(demo_mod, [r for r in byoc.rules if r.name != "reshape"], backend="broken")
    codegen.register_codegen("broken", emit={**mychip_emit(), "relu": lambda op: None})
    with pytest.raises(WorkbenchError, match="returned NoneType, not code"):
        stages.run_stages(demo_mod, [r for r in byoc.rules if r.name != "reshape"], backend="broken")


def mychip_emit() -> dict:
    return dict(codegen.load_codegen_file(EXAMPLE).emit)


def test_a_fused_emitter_takes_the_whole_composite(demo_mod, byoc, reference_output):
    """An emitter keyed by a rule's name replaces the walk into its composite; op.ops lists the calls inside."""
    seen = []

    def conv2d_bias_relu(op):
        seen.append((op.op, [o.op for o in op.ops], op.shapes))
        conv = op.ops[0].attrs
        return (
            f"np.maximum(kernels.conv2d({op.args[0]}, {op.args[1]}, {conv['strides']}, {conv['padding']}) "
            f"+ {op.args[2]}.reshape(-1, 1, 1), 0)"
        )

    fused = codegen.register_codegen(
        "fused", emit={"conv2d_bias_relu": conv2d_bias_relu, "add": mychip_emit()["relax.add"]}
    )
    assert fused.fused("byoc-target.conv2d_bias_relu") is conv2d_bias_relu
    final = stages.run_stages(demo_mod, [r for r in byoc.rules if r.name != "reshape"], backend="fused")[-1]
    assert seen[0] == (
        "byoc-target.conv2d_bias_relu",
        ["relax.nn.conv2d", "relax.expand_dims", "relax.add", "relax.nn.relu"],
        [(1, 32, 56, 56), (32, 32, 3, 3), (32,)],
    )
    assert "np.maximum(kernels.conv2d(" in final.generated["byoc_target_1"].source
    np.testing.assert_allclose(execute.run(final.mod, demo.demo_inputs()), reference_output, rtol=1e-5, atol=1e-5)


def test_restrict_keeps_the_rules_a_codegen_can_compile():
    from byoc_workbench.backends.c import C

    trt = rules.get_target("tensorrt").rules
    kept = {r.name for r in C.restrict(trt)}
    assert {"nn.conv2d", "nn.relu", "add", "multiply", "reshape", "transpose"} <= kept
    assert not kept & {"nn.max_pool2d", "nn.softmax", "concatenate", "nn.batch_norm"}
    conv = rules.pattern_rule("c", "conv", is_op("relax.nn.conv2d")(wildcard(), wildcard()))
    pool = rules.op_rule("c", "pool", "relax.nn.max_pool2d")
    assert C.guard([conv, pool]) == (conv, pool)  # its own target's rules stay: a missing emitter is an error


# --- one path to the runtime, no circle -------------------------------------------------------


def test_every_backend_registers_through_register_packed(demo_mod, byoc):
    pytest.importorskip("onnxruntime")
    for backend in ("teaching", "c", "onnxruntime"):
        final = stages.run_stages(demo_mod, byoc.rules, backend=backend)[-1]
        for g in final.generated.values():
            assert base.registered_by(g.symbol) == backend
            assert g.symbol.startswith(f"byoc_workbench.{backend}.{g.name}.")
    # TensorRT cannot run here: its compile_subgraph is read instead. No module but base registers functions.
    callers = {}
    for path in (ROOT / "byoc_workbench").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "attr", getattr(node.func, "id", ""))
                callers.setdefault(name, set()).add(path.name)
    assert callers["register_global_func"] == {"base.py"}
    assert callers["remove_global_func"] == {"base.py"}
    assert {"teaching.py", "c.py", "onnxruntime.py", "tensorrt.py"} & callers["register_packed"] == {
        "onnxruntime.py",
        "tensorrt.py",
    }
    assert "emit.py" in callers["register_packed"]  # teaching and c are codegens: Codegen.compile registers them


def _imports(path: Path, package: str) -> set:
    """The modules of ``byoc_workbench.<package>`` that ``path`` imports, at its top or inside a function."""
    prefix = f"byoc_workbench.{package}"
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom):
            continue
        module = (prefix + (f".{node.module}" if node.module else "")) if node.level == 1 else node.module or ""
        if module == prefix:
            out.update(f"{package}.{a.name}" for a in node.names)
        elif module.startswith(prefix + "."):
            out.add(f"{package}.{module[len(prefix) + 1 :].split('.')[0]}")
    return out


def test_no_import_circle_between_the_registry_and_the_backends():
    folder = ROOT / "byoc_workbench" / "backends"
    graph = {p.stem: {m.split(".")[-1] for m in _imports(p, "backends")} for p in folder.glob("*.py")}
    assert {"base", "c", "teaching", "emit"} <= graph["registry"] | graph["codegen"]  # the graph is read
    # register_codegen (codegen.py) adds to the registry; nothing the registry holds imports it.
    assert "registry" not in set().union(*(deps for name, deps in graph.items() if name not in ("registry", "codegen")))
    seen, done = set(), set()

    def visit(m, path):
        assert m not in seen or m in done, f"import circle: {' -> '.join(path + [m])}"
        if m in seen:
            return
        seen.add(m)
        for d in graph.get(m, ()):
            visit(d, path + [m])
        done.add(m)

    for m in graph:
        visit(m, [])


def test_the_widget_runs_and_times_a_codegen_of_your_own():
    """A codegen registered with rules is its target's codegen: the widget compiles with it and times it."""
    from byoc_workbench.widgets import workbench_widget

    codegen.load_codegen_file(ROOT / "examples" / "mychip_c.py")
    w = workbench_widget(target="mychip_c", inputs=demo.demo_inputs(), stage="codegen")
    assert w.workbench is not None, w.status.value
    assert set(w.view.generated) == {"mychip_c_1", "mychip_c_2"}
    assert "int mychip_c_2(const float* " in w.view.generated["mychip_c_2"]
    assert w.set_time(True), w.status.value
    assert set(w._measured[1].backends.values()) == {"mychip_c"}


# --- registries are values; a compiled subgraph's symbol goes with its record ---------------------


def _pruned(mod, byoc):
    return summary.stage(stages.run_stages(mod, byoc.rules, stages.keep_all), "prune").mod


def test_a_registry_is_a_value(fresh_registry, demo_mod, byoc):
    """A codegen registered in a registry of its own changes nothing the default registry says."""
    from byoc_workbench.backends.teaching import TEACHING

    mine = [rules.op_rule("mine", "add", "relax.add")]
    codegen.register_codegen("mine", emit=dict(TEACHING.emit), rules=mine, registry=fresh_registry)
    assert "mine" in registry.choices(fresh_registry) and "mine" not in registry.choices()
    assert rules.get_target("mine", fresh_registry.targets).rules == tuple(mine)
    with pytest.raises(WorkbenchError, match="Unknown target 'mine'"):
        rules.get_target("mine")
    assert registry.backends_for(None, "mine", fresh_registry) == ("mine",)
    assert registry.backends_for(None, "mine") == ()
    with pytest.raises(WorkbenchError, match="Unknown backend 'mine'"):
        registry.run_codegen(_pruned(demo_mod, byoc), "mine")
    _, generated, _ = registry.run_codegen(_pruned(demo_mod, byoc), "mine", registry=fresh_registry)
    assert {g.backend for g in generated.values()} == {"mine"}
    other = registry.Registry.builtin()
    assert "mine" not in other.backends and "mine" not in other.targets
    fresh_registry.reset()
    assert tuple(fresh_registry.backends) == base.BUILTIN_NAMES and list(fresh_registry.targets) == [
        "byoc-target",
        "tensorrt",
        "onnxruntime",  # the runtimes' own targets
        "openvino",
        "torch",
    ]


def test_a_released_build_takes_its_symbols_with_it(fresh_registry, demo_mod, byoc, reference_output):
    import gc

    import tvm

    from byoc_workbench.backends.teaching import TEACHING

    def registered(symbol):
        return tvm.get_global_func(symbol, allow_missing=True) is not None

    codegen.register_codegen("released", emit=dict(TEACHING.emit), registry=fresh_registry)
    mod, generated, _ = registry.run_codegen(_pruned(demo_mod, byoc), "released", registry=fresh_registry)
    symbols = [g.symbol for g in generated.values()]
    assert len(symbols) == 3 and all(registered(s) and base.registered_by(s) == "released" for s in symbols)
    vm = execute.build(mod)  # the VM looks the functions up now, and keeps them
    del generated
    gc.collect()
    assert not [s for s in symbols if registered(s) or base.registered_by(s)]
    out = execute.run(mod, demo.demo_inputs(), vm=vm)
    np.testing.assert_allclose(out, reference_output, rtol=1e-5, atol=1e-5)
    # Compiled twice, one symbol: it stays until the last record holding it is released.
    func = _pruned(demo_mod, byoc)["byoc_target_1"]
    first, again = (fresh_registry.backends["released"].compile("byoc_target_1", func) for _ in range(2))
    assert first.symbol == again.symbol
    first.release()
    first.release()  # a second release does nothing
    assert registered(again.symbol)
    again.release()
    assert not registered(again.symbol)


def test_an_emit_key_that_names_no_op_or_composite_is_one_line(fresh_registry):
    relu = codegen.register_codegen("chip", emit={"relu": str}, registry=fresh_registry).emit["relax.nn.relu"]
    with pytest.raises(WorkbenchError, match=r"emit key 'relux' names no Relax op .* did you mean relu") as err:
        codegen.register_codegen("chipU", emit={"relux": relu}, language="c", registry=fresh_registry)
    assert "\n" not in str(err.value) and "chipU" not in fresh_registry.backends
    for composite in ("conv2d_bias_relu", "byoc-target.conv2d_bias_relu", "tensorrt.nn.conv2d"):
        codegen.register_codegen("chipU", emit={composite: relu}, registry=fresh_registry)
    own = [rules.pattern_rule("chipU", "twice", is_op("relax.add")(wildcard(), wildcard()))]
    codegen.register_codegen("chipU", emit={"twice": relu}, rules=own, registry=fresh_registry)
    with pytest.raises(WorkbenchError, match="emit key 'relax.relux'"):
        codegen.register_codegen("chipU", emit={"relax.relux": relu}, registry=fresh_registry)
