"""Where the time goes in a build: every VM call timed and attributed to a binding or a subgraph.

:func:`build` compiles the codegen stage's module as ``tvm.compile`` would,
keeping what names each VM call's site (see "How a VM call is attributed").
:func:`profile` then times every call the Relax VM makes (``set_instrument``)
over several runs and returns plain data; :mod:`byoc_workbench.draw.latency`
draws it. :mod:`byoc_workbench.measure.check.numerics` reruns each offloaded
subgraph with TVM alone through the same instrument (:class:`~byoc_workbench.measure.time.recorder.Recorder`).

Measurement has its homes in :mod:`byoc_workbench.measure`:
:mod:`~byoc_workbench.measure.time.clock` times whole runs and records where
(:func:`~byoc_workbench.measure.machine.machine`); this module times every VM
call and writes a run down (:func:`run_json`). ``bench``, ``profile``,
``compare``, ``search`` and ``benchmarks/gpu_check.py`` all measure through
them; neither imports ``bench`` or ``search``.

How a VM call is attributed
---------------------------
- A **TIR kernel** belongs to the Relax binding that calls it. ``LegalizeOps``
  turns each host op into ``R.call_tir(<kernel>, ...)`` bound to the same
  variable, but it shares one kernel between identical calls (SSD's host tail:
  268 calls, 101 kernels). In a function without branches every binding runs
  once per call of the function, in order, so the k-th call of a kernel within
  one call of its function is its k-th call site there (dead bindings are
  removed first, as the pipeline would). Only in a function with branches does
  each call site get a copy of its kernel under a name of its own, so that the
  VM's symbol names the site: copies are compiled again, and on TVM alone for
  the SSD they would more than double the build (653 kernels, not 276).
  ``tvm.compile``'s pipeline for ``llvm`` does not fuse (no ``FuseOps``), so a
  kernel is one op. Under a fusing pipeline a fused kernel
  would be one binding in the lowered module, and its time would go to the
  variable that binding defines: the fused group's output.
- An **offloaded subgraph** is a call to the packed symbol of its
  :class:`~byoc_workbench.backends.registry.Compiled` record. The runners mark
  the end of input conversion and of compute (:mod:`.backends.phases`), so a
  call becomes three entries: ``<subgraph> ▸ in`` and ``<subgraph> ▸ out``
  (kind ``boundary``: the cost of crossing into and out of the backend) and
  the compute itself (kind ``subgraph``). A runner without marks (TensorRT)
  gives one compute entry.
- **VM builtins** (allocation, shape checks, ``reshape`` views, If conditions)
  are one entry per builtin, kind ``builtin``; other packed functions one per
  symbol, kind ``extern``.
- Calls of Relax functions (the demo's recursive ``while_loop``) are not
  entries: their time is that of the calls inside them.

Each call is keyed by its symbol, its function and its place among that
symbol's calls in one call of the function, and by its rank among such calls in
one run (a loop's iterations); it is timed in every run, and its median taken;
an entry's time is the sum of its calls' medians. The end-to-end median comes from plain runs (no
instrument) interleaved with the timed ones; what the entries miss is the VM's
own dispatch between calls, and they gain the instrument's own overhead.
``Profile.paired`` compares each timed run's entries with the plain run beside
it, and takes the median over runs: on a machine whose load comes and goes, the
two medians can fall in different moments, a run and its neighbour rarely do.
"""

from __future__ import annotations

import collections
import dataclasses
import statistics
import time
from typing import Any

import numpy as np
import tvm
from tvm import relax

from byoc_workbench.core import devices, ir, ir_edit, targets
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.flow.summary import BOUNDARY, HOST, stage
from byoc_workbench.measure.compiler import execute
from byoc_workbench.measure.time import clock
from byoc_workbench.measure.time.recorder import Recorder

_KERNEL_CALLS = ("relax.call_tir", "relax.call_tir_inplace", "relax.call_tir_with_grad")
_PACKED_CALLS = ("relax.call_dps_packed", "relax.call_pure_packed", "relax.call_packed")


@dataclasses.dataclass(frozen=True)
class Site:
    """What the calls to one VM symbol stand for."""

    name: str  # "while_loop/inc" (a binding), "byoc_target_1" (a subgraph) or the symbol
    target: str
    kind: str  # kernel, subgraph, builtin or extern
    op: str = ""  # the Relax op of a kernel
    backend: str = ""  # the backend that compiled a subgraph
    function: str = ""  # the host function holding the binding
    var: object = None  # the relax.Var the binding defines, when there is exactly one
    num_outputs: int = 0  # a subgraph's outputs come last in its arguments
    detail: str = ""  # how its backend runs it, e.g. "CPU, bf16" (Compiled.detail)
    device: str = ""  # in a GPU build: "gpu" or "cpu" for a kernel (byoc_workbench.core.devices), "" otherwise


@dataclasses.dataclass
class Built:
    """A codegen stage's module compiled for timing, and what its VM calls stand for."""

    vm: relax.VirtualMachine
    sites: dict  # VM symbol -> Site
    functions: frozenset  # the Relax functions: their calls are frames, not entries
    partitioned: tvm.IRModule  # the prune stage's module: the subgraphs before codegen
    subgraphs: dict  # subgraph name -> Site
    stages: list  # what run_stages returned: the map draws the codegen stage
    mark: str = ""  # e.g. "untrained weights"
    in_order: dict = dataclasses.field(default_factory=dict)  # (function, kernel) -> [Site per call, in order]
    tvm_target: str = "llvm"  # what TVM built for: "llvm", or a GPU target (its calls are then timed to the end)
    placement: devices.Placement | None = None  # a GPU build's: where each binding ran (None for the CPU)


@dataclasses.dataclass
class Entry:
    name: str
    target: str
    kind: str  # kernel, subgraph, boundary, builtin or extern
    time_s: float
    calls: int
    site: Site | None = dataclasses.field(default=None, repr=False)
    phase: str = ""  # "in" or "out" for a boundary entry

    def to_json(self) -> dict[str, Any]:
        out = {"name": self.name, "target": self.target, "kind": self.kind, "time_s": self.time_s, "calls": self.calls}
        if self.site is not None:
            out.update({k: v for k, v in (("op", self.site.op), ("backend", self.site.backend)) if v})
        return out


@dataclasses.dataclass
class Profile:
    """Measured time per entry, slowest first, and the end-to-end median of the same session."""

    entries: list
    end_to_end_s: float
    runs: int
    backends: dict  # subgraph -> what ran it and how, e.g. "torch (eager, bf16)": precision is part of a placement
    mark: str = ""
    paired: float = float("nan")  # median over runs of a timed run's entries over the plain run beside it

    @property
    def total_s(self) -> float:
        return sum(e.time_s for e in self.entries)

    @property
    def ratio(self) -> float:
        """Sum of the entries over the end-to-end median."""
        return self.total_s / self.end_to_end_s if self.end_to_end_s else float("nan")

    @property
    def by_target(self) -> dict[str, float]:
        """Seconds per target (``boundary`` for the crossings), largest first."""
        return _sum_by(self.entries, lambda e: e.target)

    @property
    def by_kind(self) -> dict[str, float]:
        return _sum_by(self.entries, lambda e: e.kind)

    @property
    def by_device(self) -> dict[str, float]:
        """In a GPU build, seconds per place: ``gpu`` and ``cpu`` kernels, ``copy`` between them, ``other``
        (builtins, offloaded subgraphs); empty for a CPU build."""
        if not any(e.site is not None and e.site.device for e in self.entries):
            return {}
        return _sum_by(self.entries, lambda e: e.site.device if e.site is not None and e.site.device else "other")

    def top(self, n: int = 10) -> list:
        return self.entries[:n]

    def to_json(self) -> dict[str, Any]:
        out = {
            "total_s": self.total_s,
            "end_to_end_s": self.end_to_end_s,
            "ratio": self.ratio,
            "paired_ratio": self.paired,
            "runs": self.runs,
            "by_target": self.by_target,
            "by_kind": self.by_kind,
            "by_device": self.by_device,
            "subgraphs": self.backends,
            "entries": [e.to_json() for e in self.entries],
        }
        if self.mark:
            out["weights"] = self.mark
        return out


def _sum_by(entries, key) -> dict:
    sums: dict = collections.defaultdict(float)
    for e in entries:
        sums[key(e)] += e.time_s
    return dict(sorted(sums.items(), key=lambda kv: -kv[1]))


# --- building ----------------------------------------------------------------------


def _kernel(value):
    """The kernel's GlobalVar when ``value`` calls a TIR kernel, else None."""
    if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op) and value.op.name in _KERNEL_CALLS:
        gv = value.args[0]
        return gv if isinstance(gv, tvm.ir.GlobalVar) else None
    return None


def _packed_symbol(value) -> str | None:
    if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op) and value.op.name in _PACKED_CALLS:
        first = value.args[0]
        return str(first.global_symbol) if isinstance(first, relax.ExternFunc) else None
    return None


def site_names(mod: tvm.IRModule) -> dict[tuple[str, relax.Var], str]:
    """``{(function, var): "function/var"}``, with ``~k`` for the k-th reuse of a name within a
    function (inlined composites reuse theirs), as the stage diagrams name their nodes."""
    names = {}
    for fname in ir.host_functions(mod):
        taken: set = set()
        func = mod[fname]
        for var in [*func.params, *(s.var for s in ir.walk(func, mod, descend=False))]:
            base = f"{fname}/{var.name}"
            name, k = base, 1
            while name in taken:
                name, k = f"{base}~{k}", k + 1
            taken.add(name)
            names[(fname, var)] = name
    return names


def _kernel_sites(mod: tvm.IRModule) -> tuple:
    """``(module, {kernel: (function, var)}, {(function, kernel): [var, ...]})``.

    In a function with branches each call site calls a kernel of its own (the
    first mapping); in one without, a kernel's call sites are listed in the
    order they run (the second), and share the kernel.
    """
    editor = ir_edit.ModuleEditor(mod)
    copies: collections.Counter = collections.Counter()
    sites: dict = {}
    in_order: dict = collections.defaultdict(list)
    for fname in ir.host_functions(mod):
        branches = any(type(s.value) is relax.If for s in ir.walk(mod[fname], mod, descend=False))

        def per_block(is_df, bindings, fname=fname, branches=branches):
            out = []
            for b in bindings:
                gv = _kernel(b.value)
                if gv is not None and not branches:
                    in_order[(fname, gv.name_hint)].append(b.var)
                elif gv is not None:
                    # A distinct attribute names the site: no pass that shares equal functions merges the copies.
                    name = f"{gv.name_hint}_site{copies[gv.name_hint]}"
                    copies[gv.name_hint] += 1
                    new_gv = editor.add(name, mod[gv].with_attr("byoc_workbench.call_site", name))
                    v = b.value
                    b = relax.VarBinding(b.var, relax.Call(v.op, [new_gv, *v.args[1:]], v.attrs, v.ty_args))
                    sites[name] = (fname, b.var)
                out.append(b)
            return out

        editor.update(fname, ir_edit.rebuild(mod[fname], per_block))
    return editor.finish(), sites, dict(in_order)


def build(stages, tvm_target="llvm", mark: str = "") -> Built:
    """Compile the codegen stage of ``stages`` (from ``run_stages``) for :func:`profile` and
    :func:`byoc_workbench.measure.check.numerics.compare`.

    The build is ``tvm.compile``'s, but for kernel names (see the module's
    docstring): each call site of a TIR kernel calls a copy of its own. For a
    GPU ``tvm_target`` the module is placed first (:func:`byoc_workbench.core.devices.place`):
    each kernel's site says whether it ran on the GPU or the CPU, and the copies
    between them are entries of their own (kind ``copy``).
    """
    codegen, pruned = stage(stages, "codegen"), stage(stages, "prune")
    mod = codegen.mod
    if ir.subgraph_functions(mod):
        raise WorkbenchError(
            f"Subgraphs {', '.join(ir.subgraph_functions(mod))} were not compiled, so the module cannot run.",
            "choose a backend (run_stages(..., backend='onnxruntime' or 'teaching')) or switch their rules off.",
        )
    execute.check_gpu_builds(mod, tvm_target)  # here: legalizing leaves no trace of what it looks for
    placement = devices.propose(mod) if targets.is_gpu(tvm_target) else None
    placed = devices.place(mod, placement, tvm_target) if placement is not None else mod
    origin = _origins(mod, placed)
    ops = {s.var: s.op for fname in ir.host_functions(placed) for s in ir.walk(placed[fname], placed, descend=False)}
    with targets.resolve(tvm_target):
        legal = tvm.transform.Sequential(
            [
                relax.backend.DispatchSampling(),
                relax.backend.DispatchSortScan(),
                relax.transform.LegalizeOps(),
                relax.transform.DeadCodeElimination(),  # what runs is what is listed
            ]
        )(placed)
    legal, kernel_sites, kernel_order = _kernel_sites(legal)
    names = site_names(placed)

    def kernel_site(kernel, fname, var) -> Site:
        op = (ops.get(var) or kernel).replace("relax.", "")
        name = names.get((fname, var), f"{fname}/{var.name} ({kernel})")  # a binding LegalizeOps added
        # a tuple's type holds no device (the box filter's): the placement's own record says where it ran
        device = "" if placement is None else "cpu" if placement.runs_on_cpu(fname, var.name) else "gpu"
        return Site(name, HOST, "kernel", op, function=fname, var=origin.get(var.__chandle__(), var), device=device)

    sites = {kernel: kernel_site(kernel, fname, var) for kernel, (fname, var) in kernel_sites.items()}
    in_order = {(f, k): [kernel_site(k, f, v) for v in vs] for (f, k), vs in kernel_order.items()}
    byoc_targets = {s.name: s.target for s in codegen.subgraphs}
    subgraphs = {}
    packed_sites: dict = collections.defaultdict(list)
    for fname in ir.host_functions(legal):
        for s in ir.walk(legal[fname], legal, descend=False):
            symbol = _packed_symbol(s.value)
            if symbol is not None:
                packed_sites[symbol].append((fname, s.var))
    for name, c in codegen.generated.items():
        where = packed_sites.get(c.symbol, [])
        fname, var = where[0] if len(where) == 1 else ("", None)
        where_to = byoc_targets.get(name, c.backend)
        var = origin.get(var.__chandle__(), var) if var is not None else None
        subgraphs[name] = Site(name, where_to, "subgraph", "", c.backend, fname, var, c.num_outputs, c.detail)
        sites[c.symbol] = subgraphs[name]
    for symbol, where in packed_sites.items():
        if symbol not in sites:
            fname, var = where[0] if len(where) == 1 else ("", None)
            sites[symbol] = Site(symbol, HOST, "extern", function=fname, var=var)
    if placement is not None:
        sites[_COPY] = Site("copies between GPU and CPU", HOST, "copy", device="copy")
    functions = frozenset(gv.name_hint for gv, f in legal.functions.items() if isinstance(f, relax.Function))
    vm = execute.build(legal, tvm_target, placed=True)  # placed once, here: the sites name the placed module's bindings
    return Built(vm, sites, functions, pruned.mod, subgraphs, list(stages), mark, in_order, str(tvm_target), placement)


_COPY = "vm.builtin.to_device"  # what R.to_vdevice becomes in the VM


def _origins(mod: tvm.IRModule, placed: tvm.IRModule) -> dict:
    """``{placed variable's handle: the module's own variable}``: placing retypes the CPU's bindings and adds
    copies, in order, so the two walks pair up once the copies are left out."""
    if placed is mod:
        return {}
    out = {}
    for fname in ir.host_functions(mod):
        mine = [s.var for s in ir.walk(mod[fname], mod, descend=False)]
        theirs = [s.var for s in ir.walk(placed[fname], placed, descend=False) if s.op != "relax.to_vdevice"]
        out.update({t.__chandle__(): m for m, t in zip(mine, theirs)})
    return out


def _site(built: Built, symbol: str, function: str = "", k: int = 0) -> Site:
    """What the ``k``-th call of ``symbol`` within one call of ``function`` stands for."""
    ordered = built.in_order.get((function, symbol))
    if ordered is not None and k < len(ordered):
        return ordered[k]
    if symbol in built.sites:
        return built.sites[symbol]
    kind = "builtin" if symbol.startswith("vm.builtin.") else "extern"
    return Site(symbol, HOST, kind)


# --- recording ---------------------------------------------------------------------


def _split(call) -> dict:
    """A call's time by phase: ``in``, ``compute`` and ``out`` from the runner's marks, else all compute."""
    _, start, end, nested, marks, *_ = call
    at = dict(marks)
    if "inputs" in at and "compute" in at:
        return {"in": at["inputs"] - start, "compute": at["compute"] - at["inputs"], "out": end - at["compute"]}
    return {"compute": end - start - nested}


def tensors(inputs, device=None) -> list:
    """``inputs`` as TVM tensors on ``device`` (the CPU by default; those that are already tensors kept)."""
    dev = device or tvm.cpu()
    return [a if isinstance(a, tvm.runtime.Tensor) else tvm.runtime.tensor(np.asarray(a), dev) for a in inputs]


def profile(
    built: Built,
    inputs,
    runs: int = 10,
    warmup: int = 2,
    entry: str = "main",
    max_seconds: float | None = None,
    plain: bool = True,
    outputs: list | None = None,
) -> Profile:
    """Time every VM call of ``built`` over ``runs`` runs; see the module's docstring for the attribution.

    Parameters
    ----------
    built : Built
        From :func:`build`.
    inputs : list of arrays
        The arguments of ``entry``.
    runs, warmup : int
        Timed runs (each also paired with a plain run for the end-to-end
        median), after ``warmup`` untimed ones.
    max_seconds : float, optional
        Refuse the runs when the first one says they would take longer
        (:func:`byoc_workbench.measure.time.clock.check_budget`).
    plain : bool
        False: no plain runs; the end-to-end median is that of the timed runs
        themselves (for a build whose one run takes tens of seconds).
    outputs : list, optional
        Receives the last run's outputs (as NumPy arrays), so a check needs no extra run.
    """
    if runs < 1:
        raise WorkbenchError(f"runs must be 1 or more, got {runs}.", "pass runs=10 or so.")
    fn = execute.synced(built.vm[entry], built.tvm_target)
    args = tensors(inputs, execute.device(built.tvm_target))
    for i in range(warmup):
        t0 = time.perf_counter()
        fn(*args)
        if i == 0:  # each timed run is a plain run and an instrumented one: about 3 plain runs
            why = f"profile ({runs} timed runs of about 3 runs' time each, a plain and an instrumented one)"
            clock.check_budget(time.perf_counter() - t0, warmup - 1 + 3 * runs, max_seconds, why)
    recorder = Recorder(built.functions, entry=entry, sync=execute.sync_of(built.tvm_target))
    ends, pairs = [], []
    per_call: dict = collections.defaultdict(lambda: collections.defaultdict(list))
    for _ in range(runs):
        if plain:
            t0 = time.perf_counter()
            fn(*args)
            ends.append(time.perf_counter() - t0)
        rank: collections.Counter = collections.Counter()
        t0 = time.perf_counter()
        calls = recorder.run(built.vm, fn, args)
        if not plain:
            ends.append(time.perf_counter() - t0)
        attributed = 0.0
        for call in calls:
            key = (call[0], call[5], call[6])  # symbol, function, its place in one call of the function
            for phase, seconds in _split(call).items():
                per_call[(key, rank[key])][phase].append(seconds)
                attributed += seconds
            rank[key] += 1
        pairs.append(attributed / ends[-1] if ends[-1] else float("nan"))
    if outputs is not None:
        result = execute.to_numpy(recorder.result)
        outputs[:] = result if isinstance(result, list) else [result]
    return Profile(
        _entries(built, per_call),
        statistics.median(ends),
        runs,
        {name: f"{s.backend} ({s.detail})" if s.detail else s.backend for name, s in built.subgraphs.items()},
        built.mark,
        statistics.median(pairs),
    )


def _entries(built: Built, per_call: dict) -> list:
    """One entry per site and phase: the sum over its calls of each call's median."""
    groups: dict = {}
    for ((symbol, function, k), _), by_phase in per_call.items():
        site = _site(built, symbol, function, k)
        for phase, samples in by_phase.items():
            key = (site.name, phase)
            if key not in groups:
                groups[key] = Entry(
                    site.name if phase == "compute" else f"{site.name} ▸ {phase}",
                    site.target if phase == "compute" else BOUNDARY,
                    site.kind if phase == "compute" else BOUNDARY,
                    0.0,
                    0,
                    site,
                    "" if phase == "compute" else phase,
                )
            groups[key].time_s += statistics.median(samples)
            groups[key].calls += 1
    return sorted(groups.values(), key=lambda e: (-e.time_s, e.name))


# --- the record ------------------------------------------------------------------


def run_json(run) -> dict[str, Any]:
    """A :class:`byoc_workbench.measure.time.runner.Run` as ``bench`` writes it: latency, what ran it, build seconds."""
    return run.latency.to_json() | {"ran_on": run.backend, "build_s": run.build_s}


def where_time_goes(built: Built, inputs, runs: int, top: int = 10) -> dict[str, Any]:
    """One build's time per VM call (:func:`profile`): the slowest entries, and the seconds per kind
    (offloaded subgraph, boundary, host kernel, builtin)."""
    p = profile(built, inputs, runs=runs)
    rows = [{"name": e.name, "kind": e.kind, "target": e.target, "time_s": e.time_s} for e in p.top(top)]
    return {"end_to_end_s": p.end_to_end_s, "by_kind": p.by_kind, "top": rows}
