"""A codegen as a table of emitters: :class:`Codegen`, built and checked by :func:`make_codegen`.

An emitter is a function of one call (an :class:`~.planner.Op`) returning the
code for it. A :class:`Codegen` plans a subgraph (:mod:`.planner`), calls the
emitters, assembles the function (:mod:`.numpy_source` or :mod:`.c_source`)
and registers it through :func:`.base.register_packed`.
:func:`.codegen.register_codegen` makes one a backend by name.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import tvm
from tvm import relax

from byoc_workbench.backends import base, c_source, numpy_source
from byoc_workbench.backends.planner import Op, SubgraphPlan, plan_subgraph
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.flow.partition import flatten_subgraphs
from byoc_workbench.flow.rules import Rule, codegen_name

LANGUAGES = ("numpy", "c")

Emitter = Callable[[Op], str]


class Generated(NamedTuple):
    """One subgraph's generated source and the plan it was written from."""

    source: str
    plan: SubgraphPlan


def keyed_op(key: str) -> str | None:
    """The Relax op an emitter key names (``"relu"``, ``"nn.relu"``, ``"relax.nn.relu"``), or None."""
    for name in (key, f"relax.{key}", f"relax.nn.{key}"):
        if not name.startswith("relax."):
            continue
        try:
            tvm.ir.Op.get(name)
        except Exception:  # TVM raises its own error type for an unknown op
            continue
        return name
    return None


@dataclasses.dataclass(frozen=True)
class Codegen:
    """A codegen: a name, its emitters by Relax op (or composite) name, and the language they write.

    Build one with :func:`make_codegen`, or with :func:`.codegen.register_codegen`,
    which also makes it a backend. ``emit`` holds full op names after construction.
    """

    name: str
    emit: dict
    language: str = "numpy"
    doc: str = ""

    @property
    def ops(self) -> frozenset:
        """The Relax ops it has an emitter for."""
        return frozenset(k for k in self.emit if k.startswith("relax."))

    def fused(self, composite: str | None) -> Emitter | None:
        """The emitter for a whole composite (``target.rule``, or its rule name), if there is one."""
        if not composite:
            return None
        return self.emit.get(composite) or self.emit.get(composite.split(".", 1)[-1])

    def takes(self, rule) -> bool:
        """Whether every call ``rule`` claims has an emitter (each op, or the composite as a whole)."""
        return self.fused(rule.qualified) is not None or set(rule.ops) <= self.ops

    def restrict(self, rules) -> tuple[Rule, ...]:
        """The rules it can compile everything of: the TensorRT table cut down to the ops it emits."""
        return tuple(r for r in rules if self.takes(r))

    def guard(self, rules) -> tuple[Rule, ...]:
        """:meth:`restrict` for rules of other targets; its own target's rules are kept, so
        a missing emitter is a one-line error rather than a silently unclaimed op."""
        return tuple(r for r in rules if r.target == self.name or self.takes(r))

    def plan(self, name: str, func: relax.Function) -> SubgraphPlan:
        """Walk ``func``: every value named, every op an :class:`~.planner.Op`, nothing emitted yet."""
        return plan_subgraph(self, name, func)

    def generate(self, name: str, func: relax.Function) -> Generated:
        """``(source, plan)``: the generated source of one subgraph, compiled or run by nothing yet."""
        plan = self.plan(name, func)
        pieces = [p if isinstance(p, str) else (p[0], self._call(p[0], p[1])) for p in plan.steps]
        language = _language(self.language)
        return Generated(language.assemble(plan, pieces, self.name), plan)

    def compile(self, name: str, func: relax.Function, **options) -> base.Compiled:
        """Generate, build and register one subgraph; the host then calls the returned symbol.

        A codegen of the user's own is first tried on seeded inputs against TVM
        (:meth:`check`), so that a crash, an ``exit()``, a hang or a wrong result
        is one line here, not a dead process or a loop that never ends later.
        """
        source, plan = self.generate(name, func)
        if self.name not in base.BUILTIN_NAMES:  # the built-in codegens' emitters are tested op by op
            self.check(name, func, source, plan)
        runner = _language(self.language).load(source, plan)
        content = source.encode() + b"".join(np.asarray(c, order="C").tobytes() for _, c in plan.constants)
        return base.register_packed(self.name, name, runner, content, source, len(plan.outputs))

    def trial(self, name: str, func: relax.Function, inputs: list) -> list:
        """Run one subgraph's generated code once on NumPy ``inputs`` (C: in a child process, so
        a crash cannot take this one down); returns its outputs. Nothing is registered."""
        source, plan = self.generate(name, func)
        language = _language(self.language)
        try:
            return language.trial(source, plan, inputs)
        except WorkbenchError:
            raise
        except Exception as err:  # the generated NumPy is the user's code
            what = f"{type(err).__name__}: {err}".splitlines()[0]
            raise WorkbenchError(
                f"The code {self.name} generated for {name} raised {what}", "fix the emitter that wrote it"
            ) from err

    def check(self, name: str, func: relax.Function, source: str, plan: SubgraphPlan) -> None:
        """Run ``source`` once on seeded inputs (C in a child process, with a time limit) against TVM
        alone on the same inputs; a one-line error naming the codegen when it differs.

        A subgraph whose inputs have symbolic sizes is not tried: there is no size to seed.
        """
        shapes = [p.ty.shape.values if hasattr(p.ty.shape, "values") else None for p in func.params]
        if any(s is None or not all(type(d).__name__ == "IntImm" for d in s) for s in shapes):
            return
        rng = np.random.RandomState(7)
        inputs = [_seeded(rng, [int(d) for d in s], str(p.ty.dtype)) for s, p in zip(shapes, func.params)]
        got = _language(self.language).trial(source, plan, inputs)
        for k, (have, want) in enumerate(zip(got, _tvm_outputs(name, func, inputs))):
            if have.shape != want.shape or not np.allclose(have, want, rtol=1e-4, atol=1e-4):
                diff = np.abs(have.astype(float) - want.astype(float)) if have.shape == want.shape else None
                how = f"differs by up to {np.nanmax(diff):.3g}" if diff is not None else f"has shape {have.shape}"
                raise WorkbenchError(
                    f"The code {self.name} generated for {name} is wrong on a trial run: its output {k} {how} "
                    f"from TVM's ({', '.join(sorted({p[0].op for p in plan.steps if not isinstance(p, str)}))})",
                    f"fix the {self.name} emitter of the op that computes it; try it alone with codegen.plan",
                )

    def backend(self, native: str | None = None) -> base.Backend:
        """It as a backend, for a registry; subgraphs with ``Codegen == native`` go to it by default."""
        doc = self.doc or f"your own codegen, in {self.language}"
        return base.Backend(self.name, self.compile, doc, self.guard, native or codegen_name(self.name))

    def _call(self, op: Op, emitter: Emitter) -> str:
        try:
            code = emitter(op)
        except WorkbenchError:
            raise
        except Exception as err:  # the emitter is the user's code: say which one, and what it raised
            what = f"{type(err).__name__}: {err}".splitlines()[0]
            raise WorkbenchError(
                f"The {self.name} emitter for {op.op} ({getattr(emitter, '__name__', 'emitter')}) raised {what}",
                "fix the emitter; call it on the Op shown by codegen.plan(name, func) to try it alone",
            ) from err
        if not isinstance(code, str) or not code.strip():
            got = "an empty str" if isinstance(code, str) else type(code).__name__
            raise NoCode(
                f"The {self.name} emitter for {op.op} ({getattr(emitter, '__name__', 'emitter')}) returned {got}, "
                "not code",
                "return the code for this one call as a str"
                + (" (an expression for the result)" if self.language == "numpy" else " (C statements)"),
                code,
            )
        if self.language == "numpy":
            _check_python(code, f"The {self.name} emitter for {op.op} ({getattr(emitter, '__name__', 'emitter')})")
        return code


def _check_python(code: str, who: str) -> None:
    """A one-line error naming ``who`` when ``code`` is not Python (an expression, or several statements)."""
    text = code.strip()
    try:
        compile(text, "<emitted>", "exec" if "\n" in text else "eval")
    except SyntaxError as err:
        raise WorkbenchError(
            f"{who} returned code that is not valid Python ({err.msg}): {text.splitlines()[0]!r:.120}",
            "return an expression for the result, such as np.maximum(x, 0) "
            "(or statements that assign op.out, on several lines)",
        ) from None


class NoCode(WorkbenchError):
    """An emitter returned no code (``value`` is what it returned: ``...`` while unwritten, often)."""

    def __init__(self, cause: str, fix: str, value=None):
        super().__init__(cause, fix)
        self.value = value


def _seeded(rng, shape: list, dtype: str) -> np.ndarray:
    """Seeded trial inputs: values of both signs for floats, small counts for integers, both for bools."""
    if dtype == "bool":
        return rng.uniform(size=shape) < 0.5
    if "int" in dtype:
        return rng.randint(0, 4, size=shape).astype(dtype)
    return rng.uniform(-1, 1, shape).astype(dtype)


def _tvm_outputs(name: str, func: relax.Function, inputs: list) -> list:
    """What TVM alone computes for the subgraph ``func`` on ``inputs``, as a list of arrays."""
    flat = flatten_subgraphs(tvm.IRModule({name: func}))
    vm = relax.VirtualMachine(tvm.compile(flat, target="llvm"), tvm.cpu())
    out = vm[name](*[tvm.runtime.tensor(a) for a in inputs])
    return (
        [o.numpy() for o in out] if isinstance(out, (list, tuple)) or type(out).__name__ == "Array" else [out.numpy()]
    )


def _language(language: str):
    if language == "c":
        return c_source
    return numpy_source


def make_codegen(name: str, emit: dict, language: str = "numpy", doc: str = "") -> Codegen:
    """A :class:`Codegen`, checked: a name fit for ``relax.ext.<name>``, a known language, callable
    emitters under names of Relax ops (or of composites)."""
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", name):
        raise WorkbenchError(
            f"A codegen name must be a word such as mychip, got {name!r}",
            "pass a name of letters, digits and _, starting with a letter",
        )
    if language not in LANGUAGES:
        raise WorkbenchError(f"Unknown codegen language {language!r}", f"choose one of: {', '.join(LANGUAGES)}")
    example = 'pass emit={"relax.nn.relu": relu, ...}, each value a function of one Op returning code'
    if not isinstance(emit, dict):
        raise WorkbenchError(f"emit must be a dict of emitters, got {type(emit).__name__}", example)
    if not emit:
        raise WorkbenchError("emit is an empty dict: the codegen would emit nothing", example)
    table = {}
    for key, fn in emit.items():
        if not isinstance(key, str) or not key:
            raise WorkbenchError(
                f"The emit table's keys must be op names such as 'relu' or 'relax.add', got {key!r}", example
            )
        if not callable(fn):
            raise WorkbenchError(
                f"The emitter for {key!r} is a {type(fn).__name__}, not a function", "pass a function of one Op"
            )
        table[keyed_op(key) or key] = fn
    return Codegen(name, table, language, doc)
