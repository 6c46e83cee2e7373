"""`byoc-workbench stages`: diagrams and summary.json."""

import json
import textwrap

import pytest
from messages import one_line

from byoc_workbench import cli
from byoc_workbench.cli.args import InputDtype, InputShape, input_dtype, named_shape
from byoc_workbench.core import output_paths
from byoc_workbench.core.errors import WorkbenchError


def run(args):
    return cli.main(args)


def test_stages_demo_writes_diagrams_and_summary(tmp_path, capsys):
    assert run(["stages", "demo", "--out", str(tmp_path)]) == 0
    names = sorted(p.name for p in tmp_path.iterdir() if p.name != output_paths.WRITTEN)
    assert names == [
        "00-source.svg",
        "01-composite.svg",
        "02-annotate.svg",
        "03-merge.svg",
        "04-partition.svg",
        "05-prune.svg",
        "06-codegen.svg",
        "summary.json",
    ]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["model"] == "demo"
    part = [s for s in summary["stages"] if s["name"] == "partition"][0]
    assert part["op_count"] == 11
    assert [(s["name"], s["target"], s["ops"]) for s in part["subgraphs"]] == [
        ("byoc_target_0", "byoc-target", ["relax.add"]),
        ("byoc_target_1", "byoc-target", ["relax.nn.conv2d", "relax.expand_dims", "relax.add", "relax.nn.relu"]),
        (
            "byoc_target_2",
            "byoc-target",
            ["relax.nn.conv2d", "relax.expand_dims", "relax.add", "relax.nn.relu", "relax.reshape"],
        ),
    ]
    assert "<svg" in (tmp_path / "04-partition.svg").read_text()[:1000]


def test_rules_flag(tmp_path):
    run(["stages", "demo", "--out", str(tmp_path), "--rules", "byoc-target.add,byoc-target.conv2d_bias_relu"])
    part = [s for s in json.loads((tmp_path / "summary.json").read_text())["stages"] if s["name"] == "partition"][0]
    assert all("relax.reshape" not in s["ops"] for s in part["subgraphs"])
    assert len(part["subgraphs"]) == 3


def test_empty_rules_means_none(tmp_path):
    run(["stages", "demo", "--out", str(tmp_path), "--rules", ""])
    stages = json.loads((tmp_path / "summary.json").read_text())["stages"]
    assert all(s["subgraphs"] == [] for s in stages)


def test_dot_format(tmp_path):
    run(["stages", "demo", "--out", str(tmp_path), "--format", "dot"])
    assert (tmp_path / "03-merge.dot").read_text().startswith("digraph")


def test_unknown_rule_exits_2(tmp_path, capsys):
    assert run(["stages", "demo", "--out", str(tmp_path), "--rules", "byoc-target.nope"]) == 2
    err = capsys.readouterr().err
    assert one_line(err.rstrip("\n")).startswith("error: Unknown rule byoc-target.nope") and err.count("\n") == 1


@pytest.mark.parametrize("where", ["under_a_file", "is_a_file"])
def test_unwritable_out_is_one_line(tmp_path, capsys, where):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    out = blocker / "diagrams" if where == "under_a_file" else blocker
    assert run(["stages", "demo", "--out", str(out)]) == 2
    err = one_line(capsys.readouterr().err.rstrip("\n"))
    assert f"{blocker} is a file, not a directory" in err and "--out" in err


def test_read_only_out_is_one_line(tmp_path, capsys):
    import os

    if os.geteuid() == 0:
        pytest.skip("root writes into read-only directories")
    out = tmp_path / "ro"
    out.mkdir(mode=0o500)
    assert run(["stages", "demo", "--out", str(out)]) == 2
    assert "Permission denied" in one_line(capsys.readouterr().err.rstrip("\n"))


def test_unwritable_save_outputs_fails_before_the_run(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    assert run(["run", "ssd", "--save-outputs", str(blocker / "out.npz")]) == 2
    assert "--save-outputs" in one_line(capsys.readouterr().err.rstrip("\n"))


def test_negative_min_mac_ops_is_refused(tmp_path, capsys):
    assert run(["stages", "demo", "--out", str(tmp_path / "o"), "--min-mac-ops", "-1"]) == 2
    assert "--min-mac-ops: '-1' is not a whole number, 0 or more" in one_line(capsys.readouterr().err.rstrip("\n"))
    assert not (tmp_path / "o").exists(), "refused before anything was written"


def test_a_bug_keeps_its_traceback(tmp_path, monkeypatch):
    """Only WorkbenchError is a user's mistake; any other exception is a bug and is not swallowed."""

    def broken(args):
        raise ValueError("a bug in the workbench")

    import byoc_workbench.cli.stages

    monkeypatch.setattr(byoc_workbench.cli.stages, "cmd_stages", broken)
    with pytest.raises(ValueError, match="a bug in the workbench"):
        run(["stages", "demo", "--out", str(tmp_path)])


def test_bring_your_own_model_and_rules(tmp_path):
    model = tmp_path / "mine.py"
    model.write_text(
        textwrap.dedent("""
        from tvm.script import ir as I, relax as R
        from tvm.relax.dpl import is_op, wildcard
        from byoc_workbench.flow.rules import op_rule, pattern_rule

        @I.ir_module
        class Mine:
            @R.function
            def main(x: R.Tensor((2, 8), "float32"), w: R.Tensor((8, 4), "float32")) -> R.Tensor((2, 4), "float32"):
                with R.dataflow():
                    y = R.matmul(x, w)
                    z = R.nn.relu(y)
                    o = R.multiply(z, z)
                    R.output(o)
                return o

        mod = Mine
        rules = [
            pattern_rule(
                "mychip", "matmul_relu", is_op("relax.nn.relu")(is_op("relax.matmul")(wildcard(), wildcard()))
            ),
            op_rule("mychip", "multiply", "relax.multiply"),
        ]
    """)
    )
    out = tmp_path / "out"
    assert run(["stages", str(model), "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    part = [s for s in summary["stages"] if s["name"] == "partition"][0]
    assert [(s["target"], s["ops"]) for s in part["subgraphs"]] == [
        ("mychip", ["relax.matmul", "relax.nn.relu", "relax.multiply"])
    ]
    codegen = [s for s in summary["stages"] if s["name"] == "codegen"][0]
    assert codegen["notes"] == ["mychip_0: not compiled, no 'mychip' codegen in this installation"]


@pytest.mark.slow  # over 10 s: `make test` and `make test-slow` run it, not test-fast
def test_the_workbench_needs_no_mxnet(tmp_path):
    """With mxnet and gluoncv unimportable (a seat), Part 1 works, Part 2 imports a zoo model as the package ships
    it, and what only MXNet does (its own run of a model, the cross-check) says what to install, in one line."""
    import subprocess
    import sys

    script = (
        "import sys; sys.modules['mxnet'] = None; sys.modules['gluoncv'] = None\n"
        "from byoc_workbench import cli\n"
        f"assert cli.main(['stages', 'demo', '--out', {str(tmp_path)!r}]) == 0\n"
        "from byoc_workbench.widgets import workbench_widget\n"
        "assert workbench_widget().view.subgraphs\n"
        "assert cli.main(['import', 'resnet18_v1', '--weights', 'untrained', '--summary']) == 0\n"
        "sys.exit(cli.main(['run', 'resnet18_v1', '--backend', 'mxnet', '--weights', 'untrained']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert (tmp_path / "summary.json").exists()
    summary = json.loads(proc.stdout[proc.stdout.index("\n{") + 1 :])  # after the stages' lines
    assert summary["model"] == "resnet18_v1" and summary["ops"]["relax.nn.conv2d"] == 20
    err = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and "requirements-mxnet.txt" in one_line(err[0]) and "Python 3.11" in err[0], err


def test_stages_of_a_big_file_are_drawn_collapsed_with_each_group_opened(tmp_path, capsys):
    """Past 300 ops: the collapsed views, each top-level block in a file of its own; --full: all of it at once."""
    from byoc_workbench.models.synthetic import model_source

    model = tmp_path / "residual.py"
    model.write_text(model_source(400).replace("residual_model(400)", "residual_model(400, blocks_per_stage=50)"))
    out = tmp_path / "out"
    assert run(["stages", str(model), "--target", "tensorrt", "--format", "dot", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "a full picture would lay out all 400 ops of each stage at once: --full draws them" in printed
    groups = sorted(p.name for p in out.glob("00-source--*.dot"))
    assert groups == [f"00-source--main-stage{k}.dot" for k in (0, 1)]
    collapsed = (out / "00-source.dot").read_text()
    opened = (out / groups[1]).read_text()
    assert "main/stage1.block7." not in collapsed and "main/stage1.block7." in opened  # its blocks, folded
    assert "main/stage0.block7." not in opened  # the other group stays closed

    full = tmp_path / "full"
    assert run(["stages", str(model), "--target", "tensorrt", "--format", "dot", "--full", "--out", str(full)]) == 0
    assert "drawing the full pictures" in capsys.readouterr().out
    assert not list(full.glob("00-source--*"))
    whole = (full / "00-source.dot").read_text()
    assert "stage0.block7.conv" in whole and "stage1.block7.conv" in whole


@pytest.mark.parametrize(
    "argv, line",
    [
        (
            ["bench", "--no", "ssd"],
            "error: ambiguous option: --no could match --no-unpruned, --no-anchors. "
            "Fix: spell --no out in full (`byoc-workbench bench --help` lists them).",
        ),
        (
            ["doctor", "--json=1"],
            "error: argument --json: ignored explicit argument '1'. Fix: see `byoc-workbench doctor --help`.",
        ),
        (
            ["import"],
            "error: the following arguments are required: what. "
            "Fix: add what (`byoc-workbench import --help` lists them).",
        ),
        (
            ["stages", "demo", "--out", "o", "--format", "sv"],
            "error: argument --format: invalid choice: 'sv' "
            "(choose from 'svg', 'dot'). Fix: use one of: svg, dot (did you mean svg?).",
        ),
        (
            ["doctor", "extra"],
            "error: unrecognized arguments: extra. Fix: remove extra (`byoc-workbench --help` lists them).",
        ),
    ],
)
def test_argparse_refusals_are_one_line_with_a_fix(argv, line, capsys):
    """Each refusal argparse makes, as one line whose fix comes from the argument at fault."""
    assert run(argv) == 2
    assert capsys.readouterr().err == line + "\n"


def test_bench_without_tvm_says_its_outputs_were_not_checked(capsys):
    """TVM alone is the zoo's and the demo's reference: without it nothing is checked, and the notes say so."""
    assert cli.main(["bench", "demo", "--backends", "onnxruntime", "--repeat", "1", "--no-anchors", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["outputs_match"] == {}
    assert not [n for n in result["notes"] if n.startswith("outputs checked against")]
    assert "outputs not checked: tvm alone did not run (add tvm to the backends)" in result["notes"]


def test_bench_of_tvm_alone_says_there_is_nothing_to_check_it_against(capsys):
    """With tvm alone (named twice: once is kept) it ran, and the note says so, not that it did not run."""
    assert cli.main(["bench", "demo", "--backends", "tvm,tvm", "--repeat", "1", "--no-anchors", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert list(result["backends"]) == ["tvm"]
    assert "outputs not checked: only tvm alone ran (add another backend to check it against)" in result["notes"]


def test_input_shape_and_dtype_names_may_have_spaces_around_them():
    assert named_shape(" x = 1, 3,8 ,8") == InputShape("x", [1, 3, 8, 8])
    assert input_dtype("ids = int64 ") == InputDtype("ids", "int64")


def test_the_zoos_options_go_to_the_zoo_models_among_several():
    """``bench demo resnet18_v1 --weights untrained``: the weights are resnet18_v1's, the demo takes none; with no
    zoo model among them the option would be ignored, and is refused."""
    from byoc_workbench.cli.refs import model_refs

    args = cli.parser().parse_args(["bench", "demo", "resnet18_v1", "--weights", "untrained"])
    demo, zoo = model_refs(args, args.what)
    assert demo.kind == "demo" and demo.weights is None and (zoo.name, zoo.weights) == ("resnet18_v1", "untrained")
    args = cli.parser().parse_args(["bench", "demo", "demo", "--weights", "untrained"])
    with pytest.raises(WorkbenchError, match="--weights applies to GluonCV zoo models only, not to demo, demo"):
        model_refs(args, args.what)


def test_cached_with_the_cache_turned_off_is_one_line(monkeypatch, capsys):
    monkeypatch.setenv("BYOC_WORKBENCH_NO_CACHE", "1")
    assert cli.main(["search", "demo", "--cached"]) == 2
    assert "--cached measures nothing and reads the cache, which BYOC_WORKBENCH_NO_CACHE turns off" in one_line(
        capsys.readouterr().err.strip()
    )
