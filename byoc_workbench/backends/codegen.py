"""Bring your own codegen: per-op emitters, and the workbench does the rest.

A vendor's codegen, in the workbench, is a table of **emitters**: for each
Relax op it takes (``"relax.nn.relu"``, or ``"relu"`` for short), a function
that gets one call as an :class:`~.planner.Op` (its input names, shapes, dtypes
and attributes) and returns the code for it::

    from byoc_workbench.backends.codegen import register_codegen

    def relu(op):  # NumPy: an expression for the result
        return f"np.maximum({op.args[0]}, 0)"

    def relu_c(op):  # C: statements that write op.out
        return f"for (long i = 0; i < {op.size}; ++i) {op.out}[i] = {op.args[0]}[i] > 0 ? {op.args[0]}[i] : 0;"

    register_codegen("mychip", emit={"relu": relu}, language="numpy", rules=my_rules)

A composite (a pattern rule's match) is emitted op by op, unless the table has
an emitter for the composite itself (keyed by its rule name, e.g.
``"conv2d_relu"``): then that one emitter gets the composite's inputs, with the
ops inside in ``op.ops``, and writes the fused kernel.

The workbench walks each subgraph in order (:mod:`.planner`), names every
value, allocates the intermediates, assembles one function
(:mod:`.numpy_source` or :mod:`.c_source`), and registers it through
:func:`.base.register_packed`, as every other backend does (:mod:`.emit`).
Registered in the default registry (:data:`.registry.DEFAULT`), the codegen is
then a backend by name everywhere: ``run_stages(..., backend="mychip")``, the
widget (its target's subgraphs go to it), ``profile``/``compare``, the CLI's
``--backend``, and upstream ``RunCodegen`` through ``registry.register_ext``.
"""

from __future__ import annotations

import tvm

from byoc_workbench.backends import base
from byoc_workbench.backends.emit import Codegen, keyed_op, make_codegen
from byoc_workbench.backends.registry import DEFAULT, Registry
from byoc_workbench.core.errors import WorkbenchError, nearest
from byoc_workbench.core.user_file import import_user_file
from byoc_workbench.flow.rules import Rule, Target, Targets, codegen_name

RESERVED = ("auto", "tvm")  # backend choices that are not backends
# Names a run already reports for something else: the frameworks (run --backend mxnet, the references).
FRAMEWORKS = ("mxnet", "gluon", "gluoncv", "onnx", "torch", "pytorch")


def register_codegen(
    name: str, emit: dict, language: str = "numpy", rules=None, doc: str = "", registry: Registry | None = None
) -> Codegen:
    """Make a codegen and register it as the backend ``name``; returns the :class:`~.emit.Codegen`.

    Parameters
    ----------
    name : str
        The backend's name (``--backend name``), also its codegen name for
        ``relax.ext.<name>``: letters, digits and ``_``, and not a name the
        workbench uses already (``auto``, ``tvm``, a built-in backend or target,
        a framework such as ``mxnet``). Registering the same name again replaces it.
    emit : dict
        ``{op: emitter}``: op is a Relax op name (``"relax.add"``, or ``"add"``)
        or a composite's rule name for a fused emitter; an emitter takes an
        :class:`~.planner.Op` and returns a str: in NumPy an expression for the result
        (``np`` and ``kernels``, the workbench's NumPy kernels, are in scope),
        in C the statements that write ``op.out``.
    language : "numpy" or "c"
    rules : sequence of Rule or Target, optional
        Register a target ``name`` with these rules too (``get_target(name)``,
        the CLI's ``--target``); its subgraphs then go to this codegen by default.
    doc : str
        One line shown beside the name.
    registry : Registry, optional
        Where to register it; default :data:`.registry.DEFAULT`, the one the
        stages, the widget and the command line read.
    """
    codegen = make_codegen(name, emit, language, doc)  # checks the name's form first
    taken = _taken(name)
    if taken:
        raise WorkbenchError(f"{name} is {taken} already", "give your codegen a name of its own, such as mychip")
    target = None if rules is None else _target(name, rules, doc)
    registry = DEFAULT if registry is None else registry
    _check_keys(name, emit, [registry.targets.get(t) for t in registry.targets] + [target] * (target is not None))
    registry.add(codegen.backend(), target)
    return codegen


def _check_keys(name: str, emit: dict, targets: list) -> None:
    """A one-line error for an emit key that names neither a Relax op nor a composite of ``targets``'
    rules (``rule`` or ``target.rule``): its emitter would never be called."""
    composites = {n for t in targets for r in t.rules for n in (r.name, r.qualified)}
    unknown = next((k for k in emit if keyed_op(k) is None and k not in composites), None)
    if unknown is None:
        return
    ops = {n.removeprefix("relax.") for n in tvm.ir.Op.list_op_names() if n.startswith("relax.")}
    words = composites | ops | {n.rsplit(".", 1)[-1] for n in ops}
    close = nearest(unknown.removeprefix("relax."), sorted(words), n=3)
    raise WorkbenchError(
        f"Codegen {name}'s emit key {unknown!r} names no Relax op and no rule's composite: "
        "its emitter would never be called",
        (f"did you mean {' or '.join(close)}? " if close else "")
        + "key an emitter by an op ('relu', 'relax.add') or by a rule's name, passing your own rules as rules=[...]",
    )


def _taken(name: str) -> str:
    """What a name a codegen may not take stands for already (``""`` when it is free); any case."""
    lower = name.lower()
    targets = {t.lower() for t in Targets.builtin()} | {codegen_name(t).lower() for t in Targets.builtin()}
    if lower in RESERVED:
        return "a backend choice"
    if lower in base.BUILTIN_NAMES:
        return "a built-in backend"
    if lower in FRAMEWORKS:
        return "a framework's name"
    if lower in targets:
        return "a built-in target"
    return ""


def _target(name: str, rules, doc: str) -> Target:
    """The target ``name`` of a codegen's rules, or a one-line error when a rule is for another target."""
    if isinstance(rules, (str, bytes, dict)) or not (isinstance(rules, Target) or hasattr(rules, "__iter__")):
        raise WorkbenchError(
            f"The rules of codegen {name} must be a list of rules, got {type(rules).__name__}",
            f"pass rules=[op_rule({name!r}, ...), ...], or leave rules out",
        )
    rule_list = tuple(rules.rules if isinstance(rules, Target) else rules)
    wrong = [r for r in rule_list if not isinstance(r, Rule) or r.target != name]
    if wrong:
        r = wrong[0]
        got = f"target {r.target!r}" if isinstance(r, Rule) else f"a {type(r).__name__}"
        raise WorkbenchError(
            f"The rules of codegen {name} must be Rules for target {name!r}, got {got}",
            f"build them with op_rule({name!r}, ...) or pattern_rule({name!r}, ...)",
        )
    return Target(name, rule_list, doc or f"rules of the {name} codegen")


# --- from the command line ------------------------------------------------------------------


def load_codegen_file(path) -> Codegen:
    """Import a user's Python file that calls :func:`register_codegen`; returns the codegen it registered.

    The file must leave exactly one codegen registered in the default registry among its
    top-level names (``mychip = register_codegen("mychip", ...)``).
    """
    fix = "pass the path of a .py file that calls register_codegen(...) and keeps its result"
    module = import_user_file(path, "Codegen file", fix)
    found = {v.name: v for v in vars(module).values() if isinstance(v, Codegen) and v.name in DEFAULT.backends}
    if len(found) != 1:
        raise WorkbenchError(
            f"Codegen file {path} registers {len(found) or 'no'} codegen{'s' if len(found) != 1 else ''}"
            + (f" ({', '.join(found)})" if found else ""),
            "keep one result of register_codegen at the top level of the file, e.g. mychip = register_codegen(...)",
        )
    return next(iter(found.values()))


def resolve_backend(value: str | None) -> str | None:
    """A ``--backend`` value as a backend's name: a ``.py`` file is loaded (:func:`load_codegen_file`)."""
    if value and value.endswith(".py"):
        return load_codegen_file(value).name
    return value
