"""Every exercise's self-check, run twice: on the solution key (it must pass) and on a wrong answer
(it must fail, saying what is wrong and giving its hint)."""

import importlib.util
import sys
from pathlib import Path

import pytest
from tvm.relax.dpl import is_op, wildcard
from tvm.script import ir as I
from tvm.script import relax as R

from byoc_workbench import exercises, exercises_codegen, get_target, op_rule, stages

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def _key(name):
    """A solution module from notebooks/solutions, registered so that its TVMScript parses."""
    spec = importlib.util.spec_from_file_location(f"solutions_{name}", NOTEBOOKS / "solutions" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


part1 = _key("part1")


@pytest.fixture(autouse=True)
def first_try():
    """Each test answers as a new attendee: the hints start again from the first."""
    exercises.reset_tries()


def _passes(fb):
    assert fb.passed, repr(fb)
    assert repr(fb).splitlines()[0].endswith(": solved") and "wrong:" not in repr(fb)


def _fails(fb, *expected):
    """Not passed, with the expected text among its wrong lines, and the hint shown."""
    text = repr(fb)
    assert not fb.passed and fb.shown_hint(), text
    assert " ".join(f"hint: {fb.shown_hint()}".split()) in " ".join(text.split())  # wrapped to the page
    for piece in expected:
        assert any(piece in line for line in fb.wrong), (piece, text)


@pytest.mark.parametrize(
    "check, n",
    [
        (exercises.check_conv2d_relu, 2),
        (exercises.check_multiply_rule, 2),
        (exercises.check_prune_exercise, 1),
        (exercises.check_own_graph, 3),
        (exercises.check_ssd_rule_off, 3),
    ],
)
def test_unanswered_says_so_and_keeps_the_hint_for_a_wrong_answer(check, n):
    fb = check(*[...] * n)
    assert not fb.passed and fb.wrong == [exercises._NOT_ANSWERED], repr(fb)
    assert fb.hint and "hint:" not in repr(fb), repr(fb)  # no answer given away before anyone tries


def test_exercise1_pattern():
    _passes(exercises.check_conv2d_relu(part1.conv2d_relu, part1.conv2d_relu_matches))
    conv = is_op("relax.nn.conv2d")(wildcard(), wildcard())
    with_bias = is_op("relax.nn.relu")(is_op("relax.add")(conv, wildcard()))
    fb = exercises.check_conv2d_relu(with_bias, 2)
    _fails(fb, "matched 1 times")
    assert "bias" in fb.hint
    fb = exercises.check_conv2d_relu(is_op("relax.nn.relu")(wildcard()), 3)
    _fails(fb, "matched 3 times", "you predicted 3, the stages give 2")
    assert "relu alone" in fb.hint


def test_exercise2_multiply_rule():
    _passes(exercises.check_multiply_rule(part1.multiply_rule, part1.multiply_subgraphs))
    _fails(exercises.check_multiply_rule(part1.multiply_rule, 2), "you predicted 2, the stages give 1")
    other = op_rule("mychip", "multiply", "relax.multiply")
    _fails(exercises.check_multiply_rule(other, 1), "its target is 'mychip'", "the stages give 3")


def test_the_starter_prune_rule_is_not_answered_and_nothing_is_right():
    """Notebook 01 hands out `def my_prune_rule(name, ops): ...`, which returns None (keep) for every case."""

    def my_prune_rule(name, ops): ...

    fb = exercises.check_prune_exercise(my_prune_rule)
    assert fb.wrong == [exercises._NOT_ANSWERED] and fb.right == [], repr(fb)


def test_exercise3_prune_rule():
    _passes(exercises.check_prune_exercise(part1.at_least_two_macs))
    _passes(exercises.check_prune_exercise(stages.no_mac(2)))  # the package's own rule is an answer too
    _fails(
        exercises.check_prune_exercise(stages.no_mac(1)), "[nn.conv2d, nn.relu] has 1 MAC op(s), so it should be pruned"
    )
    _fails(exercises.check_prune_exercise(lambda name, ops: False), "returned False")
    _fails(exercises.check_prune_exercise(lambda name, ops: ops[5]), "raised IndexError")


@I.ir_module
class TwoOps:
    @R.function
    def main(x: R.Tensor((2, 8), "float32"), w: R.Tensor((8, 4), "float32")):
        with R.dataflow():
            y = R.nn.relu(R.matmul(x, w))
            R.output(y)
        return y


def test_exercise4_own_graph():
    fb = exercises.check_own_graph(part1.own_graph, part1.own_rules, part1.own_subgraphs)
    _passes(fb)
    assert any("computes what TVM alone does" in line for line in fb.right)  # it really ran
    _fails(exercises.check_own_graph(part1.own_graph, part1.own_rules, 1), "you predicted 1, the stages give 2")
    relu = op_rule("mychip", "relu", "relax.nn.relu")
    _fails(exercises.check_own_graph(TwoOps, [relu], 1), "fewer than 3")
    _fails(exercises.check_own_graph(part1.own_graph, get_target("tensorrt"), 0), "the stages give")


@pytest.fixture(scope="module")
def ssd_workbench():
    from byoc_workbench.workflow import model_workbench

    wb, _ = model_workbench(weights="untrained")
    return wb


def test_exercise5_ssd_rule_off(ssd_workbench):
    key = _key("ssd")
    assert exercises.rule_off(ssd_workbench, ...) is ssd_workbench  # unanswered: the notebook still runs
    fb = exercises.check_ssd_rule_off(
        exercises.rule_off(ssd_workbench, key.rule_off), key.partition_change, key.prune_change
    )
    _passes(fb)
    assert any("none holds a MAC op" in line for line in fb.right)  # the explanation of the new count
    off = ssd_workbench.with_rule(key.rule_off, False)
    _fails(exercises.check_ssd_rule_off(off, "fewer", "more"), "you predicted fewer", "you predicted more")
    _fails(exercises.check_ssd_rule_off(ssd_workbench, "same", "same"), "0 rules are off")
    _fails(
        exercises.check_ssd_rule_off(ssd_workbench.with_rule("tensorrt.nn.conv3d", False), "same", "same"),
        "matches nothing on the SSD",
    )


# Notebook 03 runs top to bottom in JupyterLab, its suggested calls pasted at the end: tests/browser/.


codegen_key = _key("codegen")


def test_exercise6_c_emitters():
    fb = exercises_codegen.check_emitters(codegen_key.relu, codegen_key.add)
    _passes(fb)
    assert fb.emit == {"relu": codegen_key.relu, "add": codegen_key.add}
    # Unwritten, one forgets broadcasting, one crashes: each said, the c codegen's own stands in, the kernel lives.
    no_broadcast = lambda op: f"for (long i = 0; i < {op.size}; ++i) {op.out}[i] = {op.args[0]}[i] + {op.args[1]}[i];"  # noqa: E731
    fb = exercises_codegen.check_emitters(..., no_broadcast)
    _fails(fb, "relu: not written yet", "add: it compiles, but differs from TVM alone")
    said = next(line for line in fb.wrong if line.startswith("add:"))
    assert "broadcast over (1, 8, 5, 5)" in said and "on a scalar constant" in said, said  # which cases failed
    assert "on equal shapes" not in said, "equal shapes need no broadcasting: that case passes"
    assert "op.args[k][op.index(k)]" not in repr(fb) and "memcpy(op.out" not in " ".join(exercises.EXERCISES[7])
    from byoc_workbench.backends import c

    assert fb.emit == {"relu": c.unary, "add": c.binary}
    # A store to address 8, never mapped: a far index into the buffer may land in the fork's inherited heap.
    crash = lambda op: f"*(volatile float *)(long)8 = {op.out}[0];"  # noqa: E731
    fb = exercises_codegen.check_emitters(crash, lambda op: "not C;")
    _fails(fb, "relu: The C of probe_0 crashed (SIGSEGV) on a trial run", "add: cc could not compile the C of probe_0")


def test_exercise7_reshape_emitter():
    fb = exercises_codegen.check_reshape_emitter(codegen_key.reshape)
    _passes(fb)
    assert any("byoc_target_2 holds nn.conv2d, expand_dims, add, nn.relu, reshape" in line for line in fb.right)
    unanswered = exercises_codegen.check_reshape_emitter(...)
    assert not unanswered.passed and "hint:" not in repr(unanswered)  # the hint waits for a wrong answer
    half = lambda op: f"memcpy({op.out}, {op.args[0]}, {op.size});"  # noqa: E731  bytes, not elements
    _fails(exercises_codegen.check_reshape_emitter(half), "a subgraph's output differs from TVM alone")


def test_hints_are_graded_by_the_try_and_never_hold_the_answer():
    """The same wrong reshape three times: the idea, then the API, then where the worked answer is.
    No hint, at any try of any exercise, holds the solution key's code."""
    half = lambda op: f"memcpy({op.out}, {op.args[0]}, {op.size});"  # noqa: E731  bytes, not elements
    title, idea, api = exercises.EXERCISES[7]
    shown = [exercises_codegen.check_reshape_emitter(half) for _ in range(3)]
    texts = [" ".join(repr(fb).split()) for fb in shown]  # lines broken to fit the page, joined again
    flat = lambda s: " ".join(s.split())  # noqa: E731
    assert f"hint: {flat(idea)}" in texts[0] and flat(api) not in texts[0]
    assert f"hint: {flat(api)}" in texts[1] and "solutions/" not in texts[1]
    assert "solutions/codegen.py, beside this notebook" in texts[2]
    assert flat(repr(shown[0])) == texts[0]  # shown again, it keeps its own try's hint
    keys = {name: (NOTEBOOKS / "solutions" / f"{name}.py").read_text() for name in ("part1", "ssd", "codegen")}
    code = {ln.strip() for key in keys.values() for ln in key.splitlines() if len(ln.strip()) > 12}
    code = {ln for ln in code if not ln.startswith(("#", '"""', "def ", "import ", "from ", "return "))}
    for number, (_title, first, second) in exercises.EXERCISES.items():
        for hint in (first, second):
            assert not [ln for ln in code if ln in hint], (number, hint)


def test_exercise6_where_there_is_no_fork_a_spawned_trial_says_the_same(monkeypatch):
    """Windows has no fork: the trial runs in a spawned process, and a right emitter, a crash and a hang read alike."""
    from byoc_workbench.backends import c_source

    monkeypatch.delattr(c_source.os, "fork")
    monkeypatch.setattr(c_source, "TRIAL_S", 10.0)
    _passes(exercises_codegen.check_emitters(codegen_key.relu, codegen_key.add))
    crash = lambda op: f"*(volatile float *)(long)8 = {op.out}[0];"  # noqa: E731
    hang = lambda op: "for (;;) {}"  # noqa: E731
    fb = exercises_codegen.check_emitters(crash, hang)
    _fails(fb, "relu: The C of probe_0 crashed or failed on a trial run", "add: The C of probe_0 did not finish")
