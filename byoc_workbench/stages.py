"""The BYOC stages, each a function from IRModule to IRModule.

source -> composite -> annotate -> merge -> partition -> prune -> codegen

``run_stages`` runs them all for one rule set and returns a :class:`Stage`
per step, holding the module, a structured summary and what changed since the
step before. Nothing here changes global state except registering generated
kernels under content-hashed names.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import tvm
import tvm_ffi
from tvm import relax

from byoc_workbench.backends.registry import CodegenResult, check_options, describe, guard, run_codegen
from byoc_workbench.core import ir, transforms, tvm_private
from byoc_workbench.core.errors import WorkbenchError, true_or_false
from byoc_workbench.flow.fusion import fuse_rules
from byoc_workbench.flow.partition import inline_subgraphs, partition, subgraph_names
from byoc_workbench.flow.prune import PruneRule, check_prune_rule, keep_all, no_mac, prune
from byoc_workbench.flow.regions import Region, propose_regions
from byoc_workbench.flow.rules import check_rules, get_target
from byoc_workbench.flow.summary import Stage, Subgraph, rule_matches, summarize, unmatched_notes

STAGES = ("source", "composite", "annotate", "merge", "partition", "prune", "codegen")


def check_module(mod) -> tvm.IRModule:
    """``mod`` normalized and type-checked, or a one-line error."""
    if not isinstance(mod, tvm.IRModule):
        raise WorkbenchError(
            f"Expected a tvm.IRModule, got {type(mod).__name__}.",
            "pass a Relax IRModule, e.g. one written with @I.ir_module.",
        )
    if "main" not in [gv.name_hint for gv in mod.get_global_vars()]:
        raise WorkbenchError("The module has no function named main.", "name the entry function main.")
    if not isinstance(mod["main"], relax.Function):
        raise WorkbenchError(
            f"The module's main is a {type(mod['main']).__name__}, not a Relax function: no BYOC stage applies to it",
            "write main with @R.function (it may call TIR functions with R.call_tir)",
        )
    try:
        mod = relax.transform.Normalize()(mod)
        # well_formed raises on the first thing wrong (it returns nothing). Scoping and dataflow rules
        # first; the type of every binding is checked by _types_agree, 100 times cheaper than
        # well_formed's own check (a second on 6,000 ops), which then runs only to say what is wrong.
        relax.analysis.well_formed(mod, check_ty=False)
        if not _types_agree(mod):
            relax.analysis.well_formed(mod)
    except (RuntimeError, ValueError, TypeError) as err:  # what TVM raises, as the first line says
        first = next(
            (ln for ln in str(err).splitlines() if ln.strip() and not ln.startswith(("Traceback", "  File"))), str(err)
        )
        raise WorkbenchError(
            f"The module fails type checking: {first.strip()}",
            "fix the types of the module (shapes, dtypes, arguments) so that relax.transform.Normalize accepts it.",
        ) from None
    return mod


def _types_agree(mod: tvm.IRModule) -> bool:
    """Whether each binding's variable has its value's type, in every Relax function, through branches
    and local functions (a ``match_cast`` gives its own). False sends the module to ``well_formed``."""

    def seq(body) -> bool:
        for block in tvm_private.items(body.blocks):
            for b in tvm_private.items(block.bindings):
                value = b.value
                kind = type(value)  # exact type tests, as ir.walk's
                if kind is relax.If and not (seq(value.true_branch) and seq(value.false_branch)):
                    return False
                if kind is relax.Function and not seq(value.body):
                    return False
                if type(b) is relax.MatchCast:
                    continue
                have, want = value.ty, b.var.ty
                if not (have.same_as(want) or tvm_ffi.structural_equal(have, want)):
                    return False
        return True

    return all(seq(f.body) for f in mod.functions.values() if isinstance(f, relax.Function))


def composite(mod: tvm.IRModule, rules, fuse=None) -> tvm.IRModule:
    """Pattern rules: each match becomes a call to a function with a ``Composite`` attribute.

    ``fuse(mod, rules)`` may stand in for ``FuseOpsByPattern`` (a cache, see
    :class:`byoc_workbench.session.Workbench`); it must return the same module.
    """
    return (fuse or fuse_rules)(mod, [r for r in rules if r.kind == "pattern"])


def annotate(mod: tvm.IRModule, rules, fuse=None) -> tvm.IRModule:
    """Per-op rules: each claimed call is wrapped like a one-op composite, so every
    claimed node now names its target (the prefix of its ``Composite`` name)."""
    return (fuse or fuse_rules)(mod, [r for r in rules if r.kind == "op"])


def returned_notes(returned: dict) -> list:
    """The prune stage's notes on its :attr:`~byoc_workbench.flow.summary.Stage.returned`: one per subgraph."""
    return [f"{n} returned to host: {why}" for n, why in returned.items()]


class Merged(NamedTuple):
    """The merge stage's module (unchanged) and the regions that can become subgraphs."""

    mod: tvm.IRModule
    regions: list[Region]


def merge(mod: tvm.IRModule) -> Merged:
    """Find the regions that can become subgraphs. The IR is unchanged."""
    return Merged(mod, propose_regions(mod))


def codegen(mod: tvm.IRModule, backend: str | None = None, *, registry=None, **options) -> CodegenResult:
    """Compile subgraphs with ``backend``; see :func:`byoc_workbench.backends.registry.run_codegen`."""
    return run_codegen(mod, backend, registry=registry, **options)


def run_stages(mod: tvm.IRModule, rules, *args, **kw) -> list:
    """Run every stage for ``rules``; one :class:`Stage` per step (:func:`iter_stages`'s, same arguments)."""
    return list(iter_stages(mod, rules, *args, **kw))


def iter_stages(
    mod: tvm.IRModule,
    rules,
    prune_rule: PruneRule | None = None,
    check: bool = True,
    backend: str | None = None,
    options: dict | None = None,
    fuse=None,
    source=None,
    registry=None,
):
    """Every stage for ``rules``, one :class:`Stage` at a time: a stage is computed when the one before
    it has been taken and the next is asked for, so a reader that stops at partition pays nothing after it.

    ``check=False`` skips :func:`check_module`, for a module already checked.
    ``backend`` and ``options`` go to the codegen stage (None: each target's
    own codegen). A chosen backend narrows the rules to what it can compile
    (:func:`~byoc_workbench.backends.registry.guard`): for the ONNX-based
    backends, rules never claim a call the ONNX translator cannot convert; a
    codegen keeps the rules of other targets whose ops it has emitters for,
    and the annotate stage's notes say how many it kept. ``fuse`` stands in for :func:`fuse_rules`;
    ``source`` is the source stage of ``mod`` from an earlier run (no rule changes it). ``registry``
    is where backends are found by name (default :data:`~byoc_workbench.backends.registry.DEFAULT`).
    The arguments are checked, and the module too, before the first stage is asked for.
    """
    mod = check_module(mod) if check else mod
    rules = check_rules(rules)
    guarded = guard(backend, rules, registry) if backend is not None else rules
    if backend is not None:  # checked now, not only where a subgraph is compiled (round 8: none was, none said)
        check_options(backend, options, registry)
    prune_rule = check_prune_rule(prune_rule)
    return _stages(mod, rules, guarded, prune_rule, backend, options, fuse, source, registry)


def _stages(mod, rules, guarded, prune_rule, backend, options, fuse, source, registry):
    kept = {r.qualified for r in guarded}
    dropped = [r.qualified for r in rules if r.qualified not in kept]
    rules = guarded
    memo: dict = {}  # each function's walk, kept while the stages after leave it unchanged
    last = source

    def summary(name, m, **kw):
        nonlocal last
        last = summarize(name, m, last, memo=memo, **kw)
        return last

    if source is not None:
        yield source
    else:
        yield summary("source", mod, notes=(transforms.prepared(mod) or {}).get("notes", ()))  # e.g. batch-norm folding
    m = composite(mod, rules, fuse)
    yield summary("composite", m)
    m = annotate(m, rules, fuse)
    annotated = summary("annotate", m)
    matches = rule_matches(annotated, rules)
    more = f" and {len(dropped) - 4} more" if len(dropped) > 4 else ""
    dropped_note = [
        f"backend {backend} compiles {len(kept)} of the {len(kept) + len(dropped)} rules; "
        f"left off: {', '.join(dropped[:4])}{more}"
    ]
    annotated.notes = unmatched_notes(matches) + (dropped_note if dropped else [])
    annotated.rule_matches = matches
    yield annotated
    m, regions = merge(m)
    region_subgraphs = [Subgraph(f"region_{r.id}", r.target, list(r.ops)) for r in regions]
    yield summary("merge", m, subgraphs=region_subgraphs, regions=regions)
    # Each subgraph's ops are its region's: the census need not walk the functions partition made.
    # A name the module already has is given to its own function, and partition numbers the new one.
    taken = {gv.name_hint for gv in m.get_global_vars()}
    by_id = {r.id: r for r in regions}
    lifted = {name: by_id[rid].places for rid, name in subgraph_names(regions).items() if name not in taken}
    m = partition(m, regions)
    partitioned = summary("partition", m, regions=regions, lifted=lifted)
    yield partitioned
    m, reasons = prune(m, prune_rule, ops={s.name: s.ops for s in partitioned.subgraphs})
    yield summary("prune", m, notes=returned_notes(reasons), returned=reasons)
    yield codegen_stage(last, backend, options, memo, registry)


def codegen_stage(
    pruned: Stage, backend: str | None = None, options: dict | None = None, memo=None, registry=None
) -> Stage:
    """The codegen stage after the prune stage ``pruned``: its subgraphs compiled by ``backend``
    (None: each target's own codegen), with what compiled each one (``generated``), why the others were
    not (``skipped``) and notes saying both; ``memo`` as for :func:`~byoc_workbench.flow.summary.summarize`;
    backends found by name in ``registry`` (default :data:`~byoc_workbench.backends.registry.DEFAULT`)."""
    offloaded = pruned.subgraphs  # compiled now, or listed as skipped in the notes
    m, generated, skipped = codegen(pruned.mod, backend, registry=registry, **(options or {}))
    if backend is not None:  # what no backend took went back to the host
        offloaded = [s for s in offloaded if s.name not in skipped]
    notes = describe(generated, skipped)
    stage = summarize(
        "codegen", m, pruned, subgraphs=offloaded, notes=notes, generated=generated, skipped=skipped, memo=memo
    )
    for c in stage.changes:
        if c["kind"] == "removed" and c["from"].function in generated:
            c["kind"] = "compiled"
    return stage


def restage(stages: list, regions: list, names: dict, backend: dict, options: dict | None = None) -> list:
    """``stages`` (from :func:`run_stages`) redone from partition on, for a placement.

    ``regions`` (e.g. the merge stage's, some cut in pieces) are lifted as
    ``names`` says (``{region id: function}``); each subgraph then goes to the
    backend ``backend`` names for it, and one it places on ``tvm`` returns to
    the host at the prune stage. The codegen stage's subgraphs carry their
    backend as their target, so a diagram colours each by the backend that runs it.
    """
    kept = list(stages[: STAGES.index("partition")])

    def add(name, m, **kw):
        kept.append(summarize(name, m, kept[-1], **kw))

    m = partition(kept[STAGES.index("annotate")].mod, regions, names)
    add("partition", m, regions=regions)
    on_host = [n for n in ir.subgraph_functions(m) if backend.get(n, "tvm") == "tvm"]
    m = inline_subgraphs(m, on_host)
    add("prune", m, notes=[f"{n} placed on tvm" for n in on_host])
    offloaded = {n: backend[n] for n in ir.subgraph_functions(m)}
    stage = codegen_stage(kept[-1], offloaded, options)
    stage.subgraphs = [dataclasses.replace(s, target=offloaded[s.name]) for s in stage.subgraphs]
    return [*kept, stage]


__all__ = [
    "STAGES",
    "PruneRule",
    "keep_all",
    "no_mac",
    "prune",
    "restage",
    "run_stages",
    "iter_stages",
    "codegen_stage",
    "check_module",
]


def offload(
    mod, backend: str = "onnxruntime", prune: bool = True, target: str = "tensorrt", rules=None, options=None
) -> list:
    """The stages of a prepared module (:func:`byoc_workbench.core.transforms.prepare`) with ``target``'s
    rules, pruned (or not), its subgraphs compiled by ``backend`` (with ``options``); the last stage is codegen."""
    ir.module_given(mod, "offload")
    prune = true_or_false(prune, "prune is True or False", "pass prune=False to keep every subgraph")
    rules = get_target(target).rules if rules is None else rules
    prune_rule = no_mac() if prune else keep_all
    return run_stages(mod, rules, prune_rule, check=False, backend=backend, options=options)
