"""Exercises 6 and 7 of notebook 04, each with a self-check: C emitters of a codegen of your own.

Each emitter is compiled into a codegen, run on a small graph's subgraphs and compared
with TVM alone. Until it passes, the c codegen's own emitter stands in, so the notebook
runs on. The feedback, titles and hints are :mod:`byoc_workbench.exercises`' own.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tvm
from tvm import relax

from byoc_workbench import stages
from byoc_workbench.backends import c
from byoc_workbench.backends.emit import NoCode, make_codegen
from byoc_workbench.core import ir
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.exercises import _NOT_ANSWERED, BYOC, Feedback, _demo, _f32, feedback
from byoc_workbench.flow.partition import flatten_subgraphs
from byoc_workbench.flow.rules import Rule, get_target
from byoc_workbench.measure.check.compare import output_error
from byoc_workbench.measure.compiler import execute


@dataclasses.dataclass(repr=False)
class EmitterFeedback(Feedback):
    """Feedback on emitters; ``emit`` holds yours where they passed, the c codegen's where not yet."""

    emit: dict = dataclasses.field(default_factory=dict)


# The cases each emitter is tried on, one graph each, so that a failure says which one.
CASES = {
    "relu": ("on values of both signs",),
    "add": ("on equal shapes", "on a (8, 1, 1) bias broadcast over (1, 8, 5, 5)", "on a scalar constant"),
}


def _probe(op_name: str, case: str) -> tvm.IRModule:
    """A graph exercising one op in one of its :data:`CASES`."""
    op = relax.op
    bb = relax.BlockBuilder()
    x, b = relax.Var("x", _f32((1, 8, 5, 5))), relax.Var("b", _f32((8,)))
    with bb.function("main", [x, b]):
        with bb.dataflow():
            if op_name == "relax.nn.relu":
                y = bb.emit(op.nn.relu(x))
            elif case == CASES["add"][0]:
                y = bb.emit(op.add(x, bb.emit(op.nn.relu(x))))
            elif case == CASES["add"][1]:
                y = bb.emit(op.add(x, bb.emit(op.expand_dims(b, [1, 2]))))
            else:
                y = bb.emit(op.add(x, relax.const(0.25, "float32")))
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    return bb.get()


def _why_inf(diff: float) -> str:
    return (
        " (inf: your code wrote a NaN or an infinity where TVM has a number, e.g. it read past an input)"
        if not np.isfinite(diff)
        else ""
    )


def _trials(codegen, mod, rules, prune=stages.keep_all) -> tuple:
    """``(largest difference, prune stage)``: ``mod`` partitioned by ``rules``, and each subgraph's
    code from ``codegen`` run once (:meth:`Codegen.trial`, so a crash in C is one line) against TVM alone."""
    pruned = next(s for s in stages.run_stages(mod, rules, prune) if s.name == "prune")
    flat = flatten_subgraphs(pruned.mod)
    rng = np.random.RandomState(7)
    worst = 0.0
    for name in ir.subgraph_functions(pruned.mod):
        func = pruned.mod[name]
        inputs = [rng.uniform(-1, 1, [int(d) for d in p.ty.shape.values]).astype(str(p.ty.dtype)) for p in func.params]
        want = execute.run(tvm.IRModule({flat.get_global_var(name): flat[name]}), inputs, entry=name)
        try:
            got = codegen.trial(name, func, inputs)
        except SystemExit as err:  # an emitter's exit() would end the notebook's kernel: it is feedback too
            code = "" if err.code is None else repr(err.code)
            raise WorkbenchError(
                f"it called exit({code})", "return the code as a str, or raise to say why not"
            ) from err
        want = want if isinstance(want, list) else [want]
        # output_error counts a NaN where TVM has none as an infinite error (max() would skip it).
        worst = max([worst, *(output_error(g, w)[0] for g, w in zip(got, want))])
    return worst, pruned


def _compile_error(err: WorkbenchError) -> str | None:
    """None when the emitter is still unwritten (it returned ``...`` or nothing), else what went wrong."""
    return None if isinstance(err, NoCode) and err.value in (None, ...) else err.cause


def check_emitters(relu, add) -> EmitterFeedback:
    """Exercise 6: C emitters for ``relu`` and ``add``, each compiled and run against TVM alone.

    ``feedback.emit`` maps each op to your emitter when it passed, else to the
    c codegen's own, so the notebook runs on while you work on yours.
    """
    fb = feedback(6, EmitterFeedback)
    for short, op_name, emitter in (("relu", "relax.nn.relu", relu), ("add", "relax.add", add)):
        fb.emit[short] = c.EMITTERS[op_name]
        stand_in = f"{short}: not written yet (the c codegen's {short} stands in meanwhile)"
        if not callable(emitter):
            fb.wrong.append(stand_in if emitter in (None, ...) else f"{short}: an emitter is a function of one Op")
            continue
        codegen = make_codegen("exercise", {"relax.expand_dims": c.copy, op_name: emitter}, "c")
        rules = [Rule("probe", n.rsplit(".", 1)[-1], "op", op=n) for n in (op_name, "relax.expand_dims")]
        failed = []
        try:
            for case in CASES[short]:
                diff, _ = _trials(codegen, _probe(op_name, case), rules)
                if not diff <= 1e-6:
                    failed.append(f"by up to {diff:.3g} {case}{_why_inf(diff)}")
        except WorkbenchError as err:
            fb.wrong.append(f"{short}: {_compile_error(err)}" if _compile_error(err) else stand_in)
            continue
        if failed:
            fb.wrong.append(f"{short}: it compiles, but differs from TVM alone " + "; ".join(failed))
        else:
            fb.right.append(f"{short}: it compiles, and computes what TVM alone does {', '.join(CASES[short])}")
            fb.emit[short] = emitter
    return fb


def check_reshape_emitter(reshape) -> EmitterFeedback:
    """Exercise 7: a C emitter for ``reshape``, with byoc-target's reshape rule on, on the demo.

    The exit branch's subgraph then takes its reshape: the feedback shows the
    subgraphs with and without it, and each subgraph's output against TVM alone.
    ``feedback.emit`` holds your reshape once it passes, the c codegen's until then.
    """
    fb = feedback(7, EmitterFeedback, emit={"reshape": c.copy})
    if reshape is ... or reshape is None:
        fb.wrong.append(_NOT_ANSWERED)
        return fb
    if not callable(reshape):
        fb.wrong.append(f"an emitter is a function of one Op, got {type(reshape).__name__}")
        return fb
    emit = {"conv2d": c.conv2d, "expand_dims": c.copy, "relu": c.unary, "add": c.binary, "reshape": reshape}
    mod, rules = _demo(), get_target(BYOC).rules
    try:
        diff, pruned = _trials(make_codegen("exercise", emit, "c"), mod, rules, stages.no_mac())
    except WorkbenchError as err:
        fb.wrong.append(f"your reshape: {_compile_error(err)}" if _compile_error(err) else _NOT_ANSWERED)
        return fb
    if diff > 1e-5:
        fb.wrong.append(f"a subgraph's output differs from TVM alone by up to {diff:.3g}: the reshape's copy is off")
        return fb
    without = next(s for s in stages.run_stages(mod, [r for r in rules if r.name != "reshape"]) if s.name == "prune")
    fb.emit["reshape"] = reshape
    fb.right.append(f"each subgraph through your C equals TVM alone (max difference {diff:.1e})")
    held = "; ".join(
        f"{sg.name} holds {', '.join(op.removeprefix('relax.') for op in sg.ops)}" for sg in pruned.subgraphs
    )
    fb.right.append(
        f"with the reshape rule on, {held} (without it, {without.subgraphs[-1].name} ends at relu "
        "and the host runs the reshape)"
    )
    return fb
