"""Workshop exercises, each with a self-check.

A check takes the attendee's answer, runs it through the workbench's own stages
(the ones the notebooks draw) and returns :class:`Feedback`: what is right, what
is wrong and a hint. The expected answers are computed, not stored, except
where an exercise asks for a prediction about a graph defined here.

Exercises 1 to 4 use small graphs (notebook 01); exercise 5 uses the SSD
(notebook 03). Exercises 6 and 7, C emitters of a codegen of your own (notebook 04),
are in :mod:`byoc_workbench.exercises_codegen`; every exercise's title and hint is
here, in ``EXERCISES``. Solutions: ``notebooks/solutions/``.
"""

from __future__ import annotations

import ast
import collections
import dataclasses
import inspect
import textwrap
import typing

import numpy as np
import tvm
from tvm import relax

from byoc_workbench import stages
from byoc_workbench.core import ir
from byoc_workbench.core.errors import WorkbenchError, whole_number
from byoc_workbench.core.text import wrap
from byoc_workbench.flow.prune import check_prune_rule
from byoc_workbench.flow.rules import Rule, Target, get_target, pattern_rule
from byoc_workbench.measure.compiler import execute
from byoc_workbench.models import demo
from byoc_workbench.session import Workbench

BYOC = "byoc-target"
CHANGES = ("more", "fewer", "same")
_NOT_ANSWERED = "not answered yet: replace each ... with your answer"


@dataclasses.dataclass(repr=False)
class Feedback:
    """What a self-check found. Shown as text in a notebook; ``passed`` when nothing is wrong.

    Hints are graded by the try: none before an answer; after a first wrong answer ``hint``
    (the idea, or what this mistake shows); after a second, ``api`` (which calls to make); after
    more, where the worked answer is. No hint holds the answer's code: only the solution key does.
    """

    exercise: str
    right: list = dataclasses.field(default_factory=list)
    wrong: list = dataclasses.field(default_factory=list)
    hint: str = ""
    number: int = 0  # the exercise's number, which grades the hints by the tries so far
    api: str = ""
    tries: int = 0  # this answer's try at the exercise, counted when it is first shown

    def __post_init__(self) -> None:
        # Each field of its type, lines and names as str: a str where a list of lines belongs shows a letter a line.
        for name, kind in typing.get_type_hints(type(self)).items():
            value = getattr(self, name)
            strings = value if kind in (list, dict) and isinstance(value, kind) else ()
            if not isinstance(value, kind) or isinstance(value, bool) or not all(isinstance(s, str) for s in strings):
                takes = {list: "a list of str", dict: "a dict with str keys"}.get(kind, kind.__name__)
                example = f", e.g. {name}=[{value!r:.40}]" if kind is list and isinstance(value, str) else ""
                raise WorkbenchError(
                    f"{name} is {takes}; got {type(value).__name__} ({value!r:.40})", f"pass {name} as {takes}{example}"
                )

    @property
    def passed(self) -> bool:
        return not self.wrong

    def shown_hint(self) -> str:
        """The hint for this try, or "" before any answer was given. A hint that names the mistake
        made (set by the check) stands at every try; the generic one moves from the idea to the API."""
        if not self.hint or all(w == _NOT_ANSWERED for w in self.wrong):
            return ""
        if not self.tries:
            _TRIES[self.number] += 1
            self.tries = _TRIES[self.number]
        generic = self.number in EXERCISES and self.hint == EXERCISES[self.number][1]
        hint = self.api if generic and self.api and self.tries > 1 else self.hint
        key = SOLUTION_KEYS.get(self.number)
        return hint + (
            f" The worked answer is in solutions/{key}.py, beside this notebook." if key and self.tries > 2 else ""
        )

    def __repr__(self) -> str:
        lines = [f"{self.exercise}: {'solved' if self.passed else 'not yet'}"]
        lines += [wrap(x, indent=" " * 9, first="  right: ") for x in self.right]
        lines += [wrap(x, indent=" " * 9, first="  wrong: ") for x in self.wrong]
        if not self.passed and self.shown_hint():
            lines.append(wrap(self.shown_hint(), indent=" " * 9, first="  hint:  "))
        return "\n".join(lines)


_TRIES: collections.Counter = collections.Counter()  # exercise number -> wrong answers shown so far
SOLUTION_KEYS = {1: "part1", 2: "part1", 3: "part1", 4: "part1", 5: "ssd", 6: "codegen", 7: "codegen"}


def reset_tries() -> None:
    """Start every exercise's hints again from the first (a new attendee at the same kernel)."""
    _TRIES.clear()


# Each exercise's title, its first hint (the idea) and its second (the API), by number.
EXERCISES = {
    1: (
        "a pattern for conv2d + relu (no bias)",
        "a pattern is a small graph of its own: relu whose input is a conv2d, whose inputs are anything",
        "compose tvm.relax.dpl calls: is_op('relax.nn.<name>')(its inputs), with wildcard() for any input; "
        "draw the graph with Workbench(exercises.conv_relu_graph(), ...) and count the conv2d -> relu pairs",
    ),
    2: (
        "a per-op rule for multiply",
        "a claimed op joins the regions of claimed neighbours: without the rule the partition of multiply_graph() "
        "has 2 subgraphs, {conv2d, relu} and {add}, with the host's multiply between them",
        "op_rule(target, name, op) claims every call of one op; the op is named as TVMScript writes it "
        "(the relax. prefix); then count the subgraphs multiply no longer cuts apart",
    ),
    3: (
        "a prune rule: at least 2 MAC ops",
        "offloading pays for the subgraphs that do the heavy arithmetic: count the multiply-accumulate ops in each",
        "count the ops that are in byoc_workbench.core.ir.MAC_OPS (conv2d and matmul are, multiply and add are not); "
        "return None to keep a subgraph, and a short reason such as '1 MAC op' to send it back to the host",
    ),
    4: (
        "your own graph, partitioned",
        "a region grows along claimed neighbours of one target and stops at an op the host keeps",
        "write mod with @I.ir_module (a main with at least three ops in a dataflow block) and rules with "
        "op_rule/pattern_rule; draw Workbench(mod, target).view('merge').svg to see the regions before predicting",
    ),
    5: (
        "one TensorRT rule off on the SSD",
        "a rule that is off leaves its ops on the host, where they cut the subgraphs around them",
        "pruning then sends back every piece without a MAC op (conv2d): compare len(wb.stage('partition').subgraphs) "
        "and the same for 'prune' with the rule on (wb.with_rule(name, True)) and off",
    ),
    6: (
        "C emitters for relu and add",
        "an emitter returns C statements for one call: a loop over every output element; an input may be smaller "
        "than the output (a bias, a scalar), and is then read as NumPy broadcasts it",
        "the loop runs to op.size and writes op.out; op.index(k) is the element of input k that output element i "
        "reads (compare the two ways: the case that failed names the shape)",
    ),
    7: (
        "a C emitter for reshape",
        "a reshape keeps every element in its order, so the output is a copy of the input",
        "copy op.size elements of type op.ctype: a loop, or memcpy with the size in bytes (sizeof)",
    ),
}


def feedback(number: int, cls: type = Feedback, **fields) -> Feedback:
    """Exercise ``number``'s empty feedback, with its title and graded hints (``cls``: a subclass)."""
    if whole_number(number) not in EXERCISES:
        raise WorkbenchError(
            f"There is no exercise {number!r:.40}", f"pass one of: {', '.join(map(str, sorted(EXERCISES)))}"
        )
    if not (isinstance(cls, type) and issubclass(cls, Feedback)):
        raise WorkbenchError(f"cls is a Feedback subclass; got {cls!r:.40}", "pass a Feedback subclass")
    takes = {f.name for f in dataclasses.fields(cls)} - {"exercise", "hint", "api", "number"}
    unknown = sorted(set(fields) - takes)
    if unknown:
        raise WorkbenchError(
            f"feedback takes no keyword {unknown[0]!r} (its exercise, hint, api and number come from the exercise)",
            f"pass only: {', '.join(sorted(takes))}",
        )
    title, idea, api = EXERCISES[number]
    return cls(f"Exercise {number}, {title}", hint=idea, api=api, number=whole_number(number), **fields)


def _unanswered(answer) -> bool:
    """``...``, None, or a ``def`` whose body is still only ``...``, ``pass`` or a docstring.

    Read from its source, not its bytecode: ``def f(name, ops): return None`` and ``lambda ops: None``
    compile as the blank ``def f(name, ops): ...`` does, yet each is an answer to judge. So is a
    function whose source cannot be read.
    """
    if answer is ... or answer is None:
        return True
    if getattr(getattr(answer, "__code__", None), "co_name", "<lambda>") == "<lambda>":
        return False  # not a function, or a lambda: an answer either way
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(answer)))
    except (OSError, TypeError, SyntaxError):
        return False
    body = getattr(tree.body[0], "body", None) if tree.body else None
    return bool(body) and all(_blank_statement(s) for s in body)


def _blank_statement(statement: ast.stmt) -> bool:
    """``pass``, ``...`` or a docstring."""
    value = getattr(statement, "value", None)
    return isinstance(statement, ast.Pass) or (
        isinstance(statement, ast.Expr)
        and isinstance(value, ast.Constant)
        and (value.value is ... or isinstance(value.value, str))
    )


def _start(number: int, *answers) -> Feedback:
    """Exercise ``number``'s feedback, already saying so when an answer is still ``...``."""
    fb = feedback(number)
    if any(_unanswered(a) for a in answers):
        fb.wrong.append(_NOT_ANSWERED)
    return fb


def _predicted(fb: Feedback, what: str, predicted, actual) -> None:
    """Compare a prediction with what the stages gave."""
    if not isinstance(predicted, (int, str)) or isinstance(predicted, bool):
        fb.wrong.append(f"the prediction of {what} should be a number or a word, got {predicted!r}")
    elif predicted == actual:
        fb.right.append(f"{what}: {actual}, as you predicted")
    else:
        fb.wrong.append(f"{what}: you predicted {predicted}, the stages give {actual}")


def _stages_error(fb: Feedback, err: Exception) -> Feedback:
    fb.wrong.append(f"running the stages with your answer failed: {err}")
    return fb


def _f32(shape) -> relax.TensorType:
    return relax.TensorType(shape, "float32")


# --- the graphs the exercises are about ---------------------------------------------------


def conv_relu_graph() -> tvm.IRModule:
    """Three convolutions: conv2d + relu, conv2d + bias + relu, conv2d + relu."""
    op = relax.op
    bb = relax.BlockBuilder()
    x, w, b = relax.Var("x", _f32((1, 8, 16, 16))), relax.Var("w", _f32((8, 8, 3, 3))), relax.Var("b", _f32((8,)))
    with bb.function("main", [x, w, b]):
        with bb.dataflow():
            y = bb.emit(op.nn.relu(bb.emit(op.nn.conv2d(x, w, padding=1))))
            conv = bb.emit(op.nn.conv2d(y, w, padding=1))
            y = bb.emit(op.nn.relu(bb.emit(op.add(conv, bb.emit(op.expand_dims(b, [1, 2]))))))
            y = bb.emit(op.nn.relu(bb.emit(op.nn.conv2d(y, w, padding=1))))
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    return bb.get()


def multiply_graph() -> tvm.IRModule:
    """conv2d + relu, then a multiply by 0.5, an add of the input, and a sigmoid."""
    op = relax.op
    bb = relax.BlockBuilder()
    x, w = relax.Var("x", _f32((1, 8, 16, 16))), relax.Var("w", _f32((8, 8, 3, 3)))
    with bb.function("main", [x, w]):
        with bb.dataflow():
            y = bb.emit(op.nn.relu(bb.emit(op.nn.conv2d(x, w, padding=1))))
            y = bb.emit(op.multiply(y, relax.const(0.5, "float32")))
            y = bb.emit(op.sigmoid(bb.emit(op.add(y, x))))
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    return bb.get()


def _claimed_ops(wb: Workbench) -> collections.Counter:
    return collections.Counter(op for sg in wb.stage("partition").subgraphs for op in sg.ops)


# --- exercise 1: a pattern ------------------------------------------------------------------

CONV_RELU = collections.Counter({"relax.nn.conv2d": 2, "relax.nn.relu": 2})


def check_conv2d_relu(pattern, predicted_matches) -> Feedback:
    """Exercise 1: a pattern for conv2d + relu without bias, and how often it matches :func:`conv_relu_graph`."""
    fb = _start(1, pattern, predicted_matches)
    if fb.wrong:
        return fb
    try:
        rule = pattern_rule("exercise", "conv2d_relu", pattern)
        wb = Workbench(conv_relu_graph(), Target("exercise", (rule,)), prune_rule=stages.keep_all)
        matches = wb.stage("annotate").rule_matches[rule.qualified]
        claimed = _claimed_ops(wb)
    except WorkbenchError as err:
        return _stages_error(fb, err)
    _predicted(fb, "the number of matches", predicted_matches, 2)
    if claimed == CONV_RELU and matches == 2:
        fb.right.append("your pattern matched twice, each time a conv2d and the relu after it")
        on_demo = Workbench(_demo(), wb.target).stage("annotate").rule_matches[rule.qualified]
        fb.right.append(
            f"on the demo graph it matches {on_demo} times: there a bias add sits between every conv2d and its relu"
        )
        return fb
    found = ", ".join(f"{op} x{n}" for op, n in sorted(claimed.items())) or "nothing"
    fb.wrong.append(f"your pattern matched {matches} times and claimed {found}; expected 2 matches of conv2d + relu")
    if claimed["relax.add"]:
        fb.hint = "your pattern also takes the bias add: the exercise asks for conv2d feeding relu directly"
    elif claimed and not claimed["relax.nn.conv2d"]:
        fb.hint = "your pattern claims the relu alone: make relu's input the conv2d pattern, not a wildcard"
    elif not claimed:
        fb.hint = "it matches nothing: check the op names (relax.nn.conv2d, relax.nn.relu) and that relu wraps conv2d"
    return fb


def _demo() -> tvm.IRModule:
    return demo.demo_module()


# --- exercise 2: a per-op rule --------------------------------------------------------------


def check_multiply_rule(rule, predicted_subgraphs) -> Feedback:
    """Exercise 2: a per-op rule for ``multiply`` on byoc-target, and the partition of :func:`multiply_graph`."""
    fb = _start(2, rule, predicted_subgraphs)
    if fb.wrong:
        return fb
    if not isinstance(rule, Rule):
        fb.wrong.append(f"build the rule with op_rule(...), got {type(rule).__name__}")
        return fb
    for ok, good, bad in (
        (rule.kind == "op", "it is a per-op rule", "it is a pattern rule; the exercise asks for a per-op rule"),
        (rule.op == "relax.multiply", "it claims relax.multiply", f"it claims {rule.op}, not relax.multiply"),
        (rule.target == BYOC, f"its target is {BYOC}", f"its target is {rule.target!r}, not {BYOC!r}"),
    ):
        (fb.right if ok else fb.wrong).append(good if ok else bad)
    try:
        wb = Workbench(multiply_graph(), get_target(BYOC), extra_rules=(rule,), prune_rule=stages.keep_all)
        subgraphs = wb.stage("partition").subgraphs
    except WorkbenchError as err:
        return _stages_error(fb, err)
    _predicted(fb, "the number of subgraphs", predicted_subgraphs, len(subgraphs))
    if fb.passed:
        ops = ", ".join(op.removeprefix("relax.") for op in subgraphs[0].ops)
        fb.right.append(f"claiming multiply joins the two regions into one subgraph: {ops}")
    return fb


# --- exercise 3: a prune rule ---------------------------------------------------------------

PRUNE_CASES = (  # (ops of a subgraph, number of MAC ops in it)
    (["relax.add"], 0),
    (["relax.multiply", "relax.add", "relax.multiply"], 0),
    (["relax.nn.conv2d", "relax.nn.relu"], 1),
    (["relax.nn.conv2d", "relax.add", "relax.nn.conv2d"], 2),
    (["relax.matmul", "relax.nn.relu", "relax.matmul"], 2),
    (["relax.nn.conv2d"] * 3, 3),
)


def check_prune_exercise(rule) -> Feedback:
    """Exercise 3: a prune rule ``(name, ops) -> reason or None`` that keeps subgraphs with at least 2 MAC ops."""
    fb = _start(3, rule)
    if fb.wrong:
        return fb
    try:
        check_prune_rule(rule)  # a function of (name, ops), not the maker of one
    except WorkbenchError as err:
        fb.wrong.append(f"{err.cause}: {err.fix}")
        return fb
    for ops, macs in PRUNE_CASES:
        short = "[" + ", ".join(op.removeprefix("relax.") for op in ops) + "]"
        try:
            verdict = rule("subgraph", list(ops))
        except (Exception, SystemExit) as err:  # the attendee's code can raise anything, or exit (ending the kernel)
            fb.wrong.append(f"on {short} your rule raised {type(err).__name__}: {err}")
            continue
        if verdict is not None and not (isinstance(verdict, str) and verdict):
            fb.wrong.append(f"on {short} it returned {verdict!r}: return None to keep, or a non-empty reason")
        elif (verdict is None) == (macs >= 2):
            fb.right.append(f"{short}: {'kept' if verdict is None else 'pruned'} ({macs} MAC)")
        else:
            fb.wrong.append(f"{short} has {macs} MAC op(s), so it should be {'kept' if macs >= 2 else 'pruned'}")
    if fb.passed:
        demo_left = len(Workbench(_demo(), get_target(BYOC), prune_rule=rule).stage("prune").subgraphs)
        three = len(Workbench(conv_relu_graph(), get_target(BYOC), prune_rule=rule).stage("prune").subgraphs)
        fb.right.append(
            f"on the demo it leaves {demo_left} subgraphs (each holds at most one conv2d); "
            f"on conv_relu_graph() it keeps {three}, the one subgraph with all three convolutions"
        )
    return fb


# --- exercise 4: your own graph -------------------------------------------------------------


def check_own_graph(mod, rules, predicted_subgraphs) -> Feedback:
    """Exercise 4: a graph of at least three ops of your own, rules for it, and its partition predicted."""
    fb = _start(4, mod, rules, predicted_subgraphs)
    if fb.wrong:
        return fb
    target = rules if isinstance(rules, Target) else None
    if target is None:
        rules = tuple(rules) if isinstance(rules, (list, tuple)) else (rules,)
        if not rules or not all(isinstance(r, Rule) for r in rules):
            fb.wrong.append("rules should be a list of op_rule(...)/pattern_rule(...) values, or a Target")
            return fb
        target = Target(rules[0].target, rules, "your rules")
    try:
        wb = Workbench(mod, target, prune_rule=stages.keep_all)
        ops, subgraphs = wb.stage("source").op_count, wb.stage("partition").subgraphs
        matched = {k: v for k, v in wb.stage("annotate").rule_matches.items() if v}
    except WorkbenchError as err:
        return _stages_error(fb, err)
    (fb.right if ops >= 3 else fb.wrong).append(f"your graph has {ops} ops" + ("" if ops >= 3 else ", fewer than 3"))
    if matched:
        fb.right.append("your rules matched: " + ", ".join(f"{k} x{v}" for k, v in matched.items()))
    else:
        fb.wrong.append("none of your rules matched anything, so nothing is offloaded")
    _predicted(fb, "the number of subgraphs", predicted_subgraphs, len(subgraphs))
    if fb.passed:
        fb.right += [f"{sg.name}: {', '.join(sg.ops)}" for sg in subgraphs]
        fb.right += _runs_the_same(wb)
    return fb


def _runs_the_same(wb: Workbench) -> list:
    """Where the teaching codegen compiled every subgraph, run both modules on random inputs and compare."""
    codegen = wb.stage("codegen")
    offloaded = {sg.name for sg in codegen.subgraphs}
    if not offloaded or not offloaded <= set(codegen.generated):
        return []  # a subgraph no codegen compiled cannot run
    rng = np.random.RandomState(0)
    inputs = []
    for p in wb.mod["main"].params:
        ty = p.ty
        if not isinstance(ty, relax.TensorType) or ty.shape is None or ty.dtype != "float32":
            return []
        if not all(isinstance(getattr(d, "value", None), int) for d in ty.shape.values):
            return []  # a symbolic shape: no one input size to try
        inputs.append(rng.uniform(-1, 1, [int(d) for d in ty.shape.values]).astype("float32"))
    try:
        diff = float(np.abs(execute.run(codegen.mod, inputs) - execute.run(wb.mod, inputs)).max())
    except (WorkbenchError, RuntimeError, ValueError) as err:  # TVM's errors derive from RuntimeError
        return [f"(it could not be run to compare with TVM alone: {str(err).splitlines()[0]})"]
    return [f"compiled by the teaching codegen, it computes what TVM alone does (max difference {diff:.1e})"]


# --- exercise 5: one TensorRT rule off, on the SSD ------------------------------------------


def rule_off(wb: Workbench, rule) -> Workbench:
    """Exercise 5's workbench: ``wb`` with ``rule`` switched off, or ``wb`` itself while the answer is ``...``.

    So the notebook runs top to bottom before the attendee answers; the check then says
    "not answered yet". A rule that does not exist is the one-line error of :meth:`Workbench.with_rule`.
    """
    if not isinstance(wb, Workbench):
        raise WorkbenchError(
            f"rule_off takes a Workbench, got {type(wb).__name__} ({wb!r:.40})", "pass the SSD's workbench, wb"
        )
    return wb if rule is ... else wb.with_rule(rule, False)


def check_ssd_rule_off(wb, partition_change, prune_change) -> Feedback:
    """Exercise 5: the SSD's workbench with one TensorRT rule switched off.

    Predict whether the partition gives ``"more"``, ``"fewer"`` or the ``"same"`` number of
    subgraphs as with every rule on, and the same after pruning. The feedback explains the counts.
    """
    fb = _start(5, wb, partition_change, prune_change)
    if fb.wrong:
        return fb
    if not isinstance(wb, Workbench) or wb.target.name != "tensorrt":
        fb.wrong.append("pass the SSD's workbench for target tensorrt, with one rule switched off")
        return fb
    off = [r.qualified for r in wb.all_rules if r.qualified not in wb.enabled]
    if len(off) != 1:
        fb.wrong.append(f"{len(off)} rules are off; switch exactly one off: wb.with_rule('tensorrt.<name>', False)")
        return fb
    full = wb.with_rule(off[0], True)
    claimed = full.stage("annotate").rule_matches.get(off[0], 0)
    if not claimed:
        fb.wrong.append(f"{off[0]} matches nothing on the SSD, so switching it off changes nothing")
        fb.hint = "pick a rule with a count in wb.stage('annotate').rule_matches, e.g. one for conv2d or reshape"
        return fb
    counts = {name: (len(full.stage(name).subgraphs), len(wb.stage(name).subgraphs)) for name in ("partition", "prune")}
    for name, answer in (("partition", partition_change), ("prune", prune_change)):
        before, after = counts[name]
        if answer not in CHANGES:
            fb.wrong.append(f"answer {name} with one of {', '.join(CHANGES)}, got {answer!r}")
        else:
            change = "more" if after > before else "fewer" if after < before else "same"
            _predicted(fb, f"{name} stage, {before} -> {after} subgraphs", answer, change)
    fb.right.append(f"with every rule on, {off[0]} claims {claimed} calls; off, they stay on the host")
    if fb.passed:
        fb.right.append(_explain(wb, counts))
    return fb


def _explain(wb: Workbench, counts: dict) -> str:
    (p0, p1), (q0, q1) = counts["partition"], counts["prune"]
    text = f"the host ops split what was {p0} subgraphs into {p1}" if p1 > p0 else f"partition: {p0} -> {p1}"
    left = wb.stage("prune").subgraphs
    if not left:
        return text + "; none holds a MAC op any more, so pruning sends every one back to the host"
    macs = [sum(op in ir.MAC_OPS for op in sg.ops) for sg in left]
    if q1 > q0:
        return text + f"; the {sum(macs)} MAC ops are now spread over {q1} subgraphs, each with its own boundaries"
    biggest = max(len(sg.ops) for sg in left)
    return text + f"; pruning returns the pieces without a MAC op, leaving {q1} (the largest holds {biggest} ops)"
