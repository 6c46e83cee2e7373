"""The workbench's state as plain values: the pure twin of the widgets.

A :class:`Workbench` holds a module, a target and the set of enabled rules.
``view(stage)`` returns everything a widget shows for one stage (SVG, script,
subgraph table, diff, per-node details) as data, so it can be tested and
timed without a browser.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import gc
import unicodedata
from collections.abc import Mapping
from functools import cached_property, wraps

import tvm

from byoc_workbench import stages
from byoc_workbench.backends.registry import DEFAULT, Registry, guard
from byoc_workbench.core.errors import WorkbenchError, did_you_mean, true_or_false
from byoc_workbench.core.transforms import prepare
from byoc_workbench.draw import folding, render
from byoc_workbench.draw.graph import Graph, Node, build_graph
from byoc_workbench.flow import summary
from byoc_workbench.flow.prune import check_prune_rule
from byoc_workbench.flow.report import partition_report
from byoc_workbench.flow.reuse import FuseCache
from byoc_workbench.flow.rules import Rule, Target, as_target, check_rules, select
from byoc_workbench.frontends.onnx_import import import_onnx
from byoc_workbench.frontends.own import OwnModel
from byoc_workbench.frontends.torch_import import import_torch


@dataclasses.dataclass
class View:
    stage: str
    svg: str
    dot: str
    subgraphs: list  # rows: {"name", "target", "ops", "op_count"}
    changes: list  # lines
    notes: list  # lines
    nodes: dict  # node id -> details dict
    rule_matches: dict
    generated: dict  # subgraph name -> source
    # target -> {op: count} of the ops each offload target holds at this stage (claimed, grouped or lifted)
    claimed: dict = dataclasses.field(default_factory=dict)
    measured: bool = False  # the SVG is the latency map of a measured build
    mod: tvm.IRModule | None = dataclasses.field(default=None, repr=False, compare=False)  # the stage's module

    @cached_property
    def script(self) -> str:
        """The stage's module as TVMScript, printed when first asked for (a second on 6,000 ops)."""
        return self.mod.script(show_meta=False) if self.mod is not None else ""


_ANNOTATE = stages.STAGES.index("annotate")


@contextlib.contextmanager
def cycles_paused(on: bool = True):
    """Python's cycle collector paused, then resumed (``on=False``: left alone): a stage or a diagram makes
    hundreds of thousands of small objects and almost no cycles, while each full collection walks every
    object alive, the caches of thousands of functions included (a third of a toggle's time on 12,000 ops).

    The first pause also freezes what is alive (TVM, the frameworks it imports, half of all objects,
    living as long as the process), so no full collection walks it again. A collector the caller
    switched off stays off; one the caller froze is not frozen again.
    """
    was = on and gc.isenabled()
    if was:
        if not gc.get_freeze_count():
            gc.freeze()
        gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _paused(method):
    """``method`` run in :func:`cycles_paused` when its workbench was made with ``pause_gc``."""

    @wraps(method)
    def run(self, *args, **kw):
        with cycles_paused(self.pause_gc):
            return method(self, *args, **kw)

    return run


def _switch(name, on) -> bool:
    return true_or_false(
        on, f"Rule {name!r} is switched by True or False", "pass True to switch it on, False to switch it off"
    )


def _label(value, what: str) -> str:
    """``value`` as a title shows it: text on one line, without control characters (a NUL, a newline, a
    right-to-left override, which would turn the rest of the title around); anything else is a one-line error."""
    if not isinstance(value, str):
        raise WorkbenchError(f"{what} must be text; got {type(value).__name__} {value!r:.40}", f"pass {what} as a str")
    return "".join(c for c in " ".join(value.split()) if unicodedata.category(c) not in ("Cc", "Cf"))


def _stage_name(name) -> str:
    if name not in stages.STAGES:
        raise WorkbenchError(f"Unknown stage {name!r:.60}", f"choose one of: {', '.join(stages.STAGES)}")
    return name


def why_unclaimed(target: Target, enabled: set) -> dict[str, str]:
    """For each op a target's rules mention: why a host call to it was not claimed."""
    reasons: dict = {}
    for rule in target.rules:
        for op in rule.ops:
            if rule.qualified not in enabled:
                text = f"rule {rule.qualified} could claim it but is switched off"
            elif rule.kind == "op":
                text = (
                    f"rule {rule.qualified} is on, but its check rejected this call "
                    "or the call is outside a dataflow block"
                )
            else:
                text = f"rule {rule.qualified} is on, but the rest of its pattern does not match here"
            reasons.setdefault(op, []).append(text)
    return {op: "; ".join(texts) for op, texts in reasons.items()}


class Workbench:
    """One module, one target, one rule set, and every stage computed from them.

    The module is checked once, here; ``with_rule`` and ``with_prune`` make
    new workbenches that share it. ``enabled`` names the rules switched on
    (None: all), or maps rule names to True or False, switching those named
    on or off and leaving the others on. :meth:`from_onnx` and :meth:`from_torch`
    make one for the user's own model, kept as :attr:`model`.

    ``registry`` is where a target's name and ``backend`` are looked up, and
    where each target's own codegen is found; by default the notebook's
    :data:`~byoc_workbench.backends.registry.DEFAULT`, the one ``register_codegen``
    adds to, so the workbench sees what the notebook registered (names before it
    is made, codegens before its codegen stage is computed). ``pause_gc=True``
    pauses Python's cycle collector while it computes (:func:`cycles_paused`), as
    the widget asks; otherwise the workbench leaves the collector alone.
    """

    model = None  # the OwnModel behind from_onnx / from_torch: example inputs and the reference run

    def __init__(
        self,
        mod: tvm.IRModule,
        target: Target | str,
        enabled=None,
        prune_rule=None,
        extra_rules=(),
        mark: str = "",
        backend: str | None = None,
        registry: Registry | None = None,
        pause_gc: bool = False,
    ):
        self.mod = stages.check_module(mod)
        self.mark = _label(mark, "mark")  # e.g. "untrained weights": every title says it
        self.registry = DEFAULT if registry is None else registry
        if not isinstance(self.registry, Registry):
            raise WorkbenchError(f"registry must be a Registry, got {type(registry).__name__}", "leave registry out")
        self.pause_gc = pause_gc
        self.target = as_target(target, self.registry.targets)
        self.extra_rules = check_rules(extra_rules, "extra_rules")  # beyond the target's table, e.g. a user's own
        check_rules(self.all_rules, f"target {self.target.name}'s rules and extra_rules")  # one name, one rule
        self.backend = backend  # what compiles the codegen stage's subgraphs; None: each target's own codegen
        # The rules as run_stages has them for this backend: narrowed to what it can compile.
        self._stage_rules = guard(backend, self.all_rules, self.registry) if backend is not None else self.all_rules
        self.enabled = self._names(enabled)
        self.prune_rule = check_prune_rule(prune_rule)
        self._runs = _Runs(self.mod, self._stage_rules)  # shared with the workbenches made from this one

    @classmethod
    def from_model(cls, model, target: Target | str = "tensorrt", enabled=None, prune_rule=None) -> Workbench:
        """A workbench on an imported :class:`~byoc_workbench.frontends.own.OwnModel`, prepared for the
        target's patterns (batch norm folded, see :func:`byoc_workbench.core.transforms.prepare`)."""
        if not isinstance(model, OwnModel):
            raise WorkbenchError(
                f"from_model takes an imported model (an OwnModel), got {type(model).__name__} ({model!r:.40})",
                "use Workbench.from_onnx(path) or Workbench.from_torch(module, example_inputs)",
            )
        wb = cls(prepare(model.mod), target, enabled, prune_rule, mark=model.mark)
        wb.model = model
        return wb

    @classmethod
    def from_onnx(
        cls, path, target: Target | str = "tensorrt", input_shapes=None, enabled=None, prune_rule=None, seed: int = 0
    ) -> Workbench:
        """A workbench on an ONNX file (see :func:`byoc_workbench.frontends.onnx_import.import_onnx`).

        ``input_shapes`` fixes the inputs' shapes (``{name: shape}``, or one
        shape), so that the file's shape arithmetic is folded before import.
        """
        if "\0" in str(path):  # no file's name holds one, and os.stat raises ValueError, not OSError, on it
            raise WorkbenchError(f"The path {str(path)!r:.80} holds a NUL character", "pass the path of a .onnx file")
        return cls.from_model(import_onnx(path, input_shapes, seed), target, enabled, prune_rule)

    @classmethod
    def from_torch(
        cls, module, example_inputs, target: Target | str = "tensorrt", enabled=None, prune_rule=None, name="", mark=""
    ) -> Workbench:
        """A workbench on a PyTorch module, through ``torch.export`` (see
        :func:`byoc_workbench.frontends.torch_import.import_torch`, for ``name`` and ``mark`` too)."""
        model = import_torch(module, example_inputs, name=_label(name, "name"), mark=_label(mark, "mark"))
        return cls.from_model(model, target, enabled, prune_rule)

    def report(self, model: str = "", targets=None):
        """The partitioning report (:func:`byoc_workbench.flow.report.partition_report`) of the stages up to
        prune, titled ``model`` (default: the imported model's name); ``targets`` as there."""
        ran = [self.stage(n) for n in stages.STAGES[: stages.STAGES.index("prune") + 1]]
        model = _label(model or getattr(self.model, "name", "") or "module", "model")
        return partition_report(ran, self.rules, self.all_rules, self.target.name, model, self.mark, targets)

    @property
    def all_rules(self) -> tuple[Rule, ...]:
        return tuple(self.target.rules) + self.extra_rules

    @property
    def rules(self) -> tuple[Rule, ...]:
        return tuple(r for r in self.all_rules if r.qualified in self.enabled)

    def _names(self, enabled) -> set:
        """The names of the rules ``enabled`` switches on (see the class's notes). select() checks
        the names: an unknown one, even one switched off, is a one-line error."""
        if enabled is None:
            return {r.qualified for r in self.all_rules}
        if isinstance(enabled, Mapping):
            select(self.all_rules, list(enabled))
            off = {name.strip() for name, on in enabled.items() if not _switch(name, on)}
            return {r.qualified for r in self.all_rules if r.qualified not in off}
        return {r.qualified for r in select(self.all_rules, enabled)}

    def _with(self, **changes) -> Workbench:
        """A copy with ``changes``, sharing the checked module; its stages are computed afresh."""
        wb = object.__new__(Workbench)
        cached = ("_planned", "_annotate", "_graphs")
        wb.__dict__.update({k: v for k, v in self.__dict__.items() if k not in cached})
        wb.__dict__.update(changes)
        return wb

    def with_rule(self, name: str, on: bool) -> Workbench:
        """A new workbench with rule ``name`` switched on (``on=True``) or off (``False``)."""
        on = _switch(name, on)
        chosen = select(self.all_rules, [name])  # an unknown name is a one-line error, whether switched on or off
        if not chosen:
            raise WorkbenchError(
                f"with_rule needs a rule's name; got {name!r}",
                "pass one such as 'byoc-target.add' (wb.enabled holds the names of the rules on)",
            )
        enabled = set(self.enabled)
        (enabled.add if on else enabled.discard)(chosen[0].qualified)
        return self._with(enabled=enabled)

    def with_prune(self, prune_rule) -> Workbench:
        """A new workbench with another prune rule (see :func:`byoc_workbench.flow.prune.prune`)."""
        return self._with(prune_rule=check_prune_rule(prune_rule))

    @cached_property
    def _planned(self) -> tuple:
        """``(key, run)``: the stages for the enabled rules (a :class:`_Run`, computed as far as asked),
        the codegen stage by each target's own codegen.

        Rules that name no op of the module can never match, so the stages are
        computed for the others and kept (see :class:`_Runs`): switching such a
        rule, or switching a rule back, recomputes nothing. Only the annotate
        stage's match counts and notes depend on every enabled rule.
        """
        fuse = self._runs.fuse
        effective = tuple(r for r in self._stage_rules if r.qualified in self.enabled and fuse.can_match(r))
        key = (tuple(r.qualified for r in effective), self.prune_rule)
        mod, prune_rule, source, registry = self.mod, self.prune_rule, self._runs.source(), self.registry
        # The run holds what it needs, not this workbench: a workbench holds its run, and a cycle between
        # them would leave a toggle's stages and diagrams to the cycle collector (see cycles_paused).
        run = self._runs.get(
            key,
            lambda: _Run(
                lambda: stages.iter_stages(
                    mod, effective, prune_rule, check=False, fuse=fuse, source=source, registry=registry
                )
            ),
        )
        return key, run

    @cached_property
    def _annotate(self) -> summary.Stage:
        """The annotate stage, its match counts and notes for every enabled rule."""
        run = self._planned[1].upto(_ANNOTATE)
        matches = {r.qualified: run.rule_matches.get(r.qualified, 0) for r in self.rules}
        return dataclasses.replace(run, rule_matches=matches, notes=summary.unmatched_notes(matches))

    @property
    def stages(self) -> list:
        """Every stage for the enabled rules, the codegen stage compiled by :attr:`backend`.

        Compiling is the slow part (seconds on the SSD), so with a backend it
        happens when the codegen stage is first asked for, once per rule set.
        A stage is computed when it, or one after it, is first asked for: a
        toggle redrawn at the partition stage does not prune or compile.
        """
        return [self.stage(name) for name in stages.STAGES]

    @_paused
    def stage(self, name: str) -> summary.Stage:
        if _stage_name(name) == "annotate":
            return self._annotate
        if name == "codegen" and self.backend is not None:
            key, run = self._planned
            pruned = run.upto(stages.STAGES.index("prune"))
            return self._runs.get(
                (*key, self.backend), lambda: stages.codegen_stage(pruned, self.backend, registry=self.registry)
            )
        return self._planned[1].upto(stages.STAGES.index(name))

    @_paused
    def graph(self, name: str, expand=(), collapse: bool = False, strict: bool = True) -> Graph:
        """The stage's graph; ``expand`` holds node ids to draw open (with ``strict``, an id that opens nothing
        at this stage is a one-line error); ``collapse`` hides constants and folds long data-movement runs.

        The graph with no call opened is kept per stage (see :meth:`_closed_graph`): opening
        or closing a block or a folded run only folds it again, and only opening a composite or
        a subgraph call walks the module again.
        """
        expand = folding.node_ids(expand)
        collapse = true_or_false(collapse, "collapse is True or False", "pass collapse=True to fold, False to draw all")
        strict = true_or_false(strict, "strict is True or False", "pass strict=False to skip ids that open nothing")
        base = self._closed_graph(name, collapse)
        g = self._build_graph(name, expand, collapse) if any(e in base.nodes for e in expand) else base
        g = folding.fold_chains(g, keep_open=expand) if collapse else g
        unopened = folding.unopened(g, expand) if strict else []
        if unopened:
            raise WorkbenchError(
                f"The {name} stage has no node {unopened[0]!r} to open{did_you_mean(unopened[0], g.nodes)}",
                "pass ids a View's nodes are keyed by (a composite, a subgraph or a folded run opens)",
            )
        return g

    def _closed_graph(self, name: str, collapse: bool) -> Graph:
        """The stage's graph with no call opened, kept for the last few stages drawn. Composite and
        annotate draw one graph when the annotate stage leaves the module as it was."""
        s = self.stage(name)
        same = name == "annotate" and s.mod is self.stage("composite").mod
        key = ("composite" if same else name, collapse)
        kept = self.__dict__.setdefault("_graphs", collections.OrderedDict())
        if key not in kept:
            kept[key] = self._build_graph(name, (), collapse)
            while len(kept) > 4:  # a 6,000-op graph is megabytes
                kept.popitem(last=False)
        kept.move_to_end(key)
        return kept[key]

    def _build_graph(self, name: str, expand, collapse: bool) -> Graph:
        s = self.stage(name)
        packed = {}
        if name == "codegen":  # its calls name a generated symbol; this says which subgraph each one runs
            subgraphs = {sg.name: sg for sg in s.subgraphs}
            packed = {c.symbol: subgraphs[n] for n, c in s.generated.items() if n in subgraphs}
        # Stages before merge are laid out in the regions merge will draw: stepping on, the boxes appear.
        early = stages.STAGES.index(name) <= stages.STAGES.index("merge")
        return build_graph(
            s.mod,
            regions=self.stage("merge").regions if early else None,
            layout_only=name != "merge",
            expand=expand,
            why_unclaimed=why_unclaimed(self.target, self.enabled),
            packed=packed,
            constants=not collapse,
            # partition and prune summarize each subgraph as the drawing would (target, ops)
            subgraphs=s.subgraphs if name in ("partition", "prune") else (),
        )

    def title(self, name: str) -> str:
        return f"{_stage_name(name)} — target {self.target.name}" + (f" — {self.mark}" if self.mark else "")

    def dot(self, name: str, expand=(), collapse: bool = False):
        return render.to_dot(self.graph(name, expand, collapse), title=self.title(name), show_shapes=not collapse)

    @_paused
    def view(self, name: str, expand=(), svg: bool = True, collapse: bool = False, strict: bool = True) -> View:
        svg = true_or_false(svg, "svg is True or False", "pass svg=False to skip the picture")
        s = self.stage(name)
        g = self.graph(name, expand, collapse, strict)
        dot = render.to_dot(g, title=self.title(name), show_shapes=not collapse)
        annotate = self.stage("annotate")
        names: dict = {}  # node id -> the Relax variables it draws, as the TVMScript tab names them
        for (_fn, var), nid in g.sites.items():
            names.setdefault(nid, []).append(var.name)
        return View(
            stage=name,
            svg=render.to_svg(dot) if svg else "",
            dot=dot.source,
            subgraphs=[{"name": x.name, "target": x.target, "op_count": len(x.ops), "ops": x.ops} for x in s.subgraphs],
            changes=[summary.describe_change(c) for c in s.changes],
            notes=list(s.notes),
            nodes={nid: node_details(n, names.get(nid, ())) for nid, n in g.nodes.items()},
            rule_matches=dict(annotate.rule_matches),
            generated={k: v.source for k, v in s.generated.items()},
            claimed=claimed_ops(s),
            mod=s.mod,
        )


class _Run:
    """One rule set's stages (from :func:`~byoc_workbench.stages.iter_stages`), computed as far as asked."""

    def __init__(self, start):
        self._start = start  # () -> the stages' generator
        self.done: list = []
        self._more = start()
        self._error: Exception | None = None

    def upto(self, index: int) -> summary.Stage:
        """Stage ``index``, computing those before it that are not yet; a stage that raised raises again.
        An interrupt (Ctrl-C, a kernel interrupt) is not an answer: the next ask starts the run over."""
        while len(self.done) <= index:
            if self._error is not None:
                raise self._error
            try:
                self.done.append(next(self._more))
            except Exception as err:  # kept so that asking again says the same, not "no such stage"
                self._error = err
                raise
            except BaseException:  # the generator is closed: start again when asked again
                self.done, self._more = [], self._start()
                raise
        return self.done[index]


class _Runs:
    """Stage runs per rule set, most recent last, shared by a workbench and those made from it.

    A widget toggles a rule off and on again, or steps back through rule sets;
    keeping the last few runs makes those toggles free, and :class:`FuseCache`
    makes a new rule set's composite stage cheap.
    """

    def __init__(self, mod, rules, size: int = 8):
        self.fuse = FuseCache(mod, rules)
        self.size = size
        self._runs: collections.OrderedDict = collections.OrderedDict()

    def source(self):
        """The source stage of any earlier run: no rule changes it."""
        return next((run.done[0] for run in self._runs.values() if isinstance(run, _Run) and run.done), None)

    def get(self, key, compute):
        if key not in self._runs:
            self._runs[key] = compute()
            while len(self._runs) > self.size:
                self._runs.popitem(last=False)
        self._runs.move_to_end(key)
        return self._runs[key]


def claimed_ops(s: summary.Stage) -> dict[str, dict[str, int]]:
    """``{target: {op: count}}``: the ops each offload target holds at stage ``s``, most frequent first."""
    counts: dict = {}
    for (op, _owner, target), n in s.owners.items():
        if target != summary.HOST:
            counts.setdefault(target, collections.Counter())[op] += n
    return {t: dict(c.most_common()) for t, c in sorted(counts.items())}


def node_details(n: Node, variables=()) -> dict[str, object]:
    """What clicking a node shows; ``variables`` are the Relax variables it draws."""
    d = {
        "id": n.id,
        "kind": n.kind,
        "label": n.label,
        "op": n.op,
        "target": n.target,
        "cluster": n.cluster,
        "output": n.ty,
        "inputs": n.input_types,
        "attrs": n.attrs,
        "variables": list(variables),
    }
    if n.rule:
        d["claimed_by"] = n.rule
    elif n.kind == "op":
        d["claimed_by"] = None
        d["why_not_claimed"] = n.why
    if n.ops:
        d["ops_inside"] = n.ops
    if n.on_cpu:
        d["on_cpu_in_a_gpu_build"] = n.on_cpu
    return d
