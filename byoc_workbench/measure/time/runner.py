"""The seed's ``build_and_run``: build a module, warm it up, time it, and show what was built.

:func:`build_and_run` takes a module at any point of the flow: TVM alone
(the imported model), a partitioned one (its subgraphs are compiled by the
backend named here first), or a codegen stage (its compiled subgraphs kept).
It returns a :class:`Run`: the outputs, a
:class:`~byoc_workbench.measure.time.clock.Latency` (median, min, max), the
runtime's :class:`Structure` (VM functions, TIR kernels, external functions
and the backend holding each) and the artifact of each subgraph (an ONNX
summary, a TensorRT engine's layers, or generated NumPy or C source).

Every printout names the backend that actually ran (:class:`RanOn`), e.g.
``onnxruntime (CPU) — TensorRT not available: tensorrt is not importable``.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable

import numpy as np
import tvm

import byoc_workbench.core.progress
from byoc_workbench.backends import onnxruntime, pytorch, registry, tensorrt
from byoc_workbench.core import ir, text
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.measure.compiler import cuda, execute
from byoc_workbench.measure.machine import machine
from byoc_workbench.measure.time import clock, kept

# --- what was built -----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class External:
    """An external function the VM calls: a compiled subgraph, and the backend that holds it."""

    subgraph: str
    symbol: str
    backend: str


@dataclasses.dataclass(frozen=True)
class Structure:
    """The runtime's structure, as the seed prints ``lib.get_lib()`` and its imported modules."""

    executable: str  # the executable module's kind, e.g. relax.VMExecutable
    libraries: tuple  # kinds of the modules it imports, e.g. ("llvm",)
    functions: tuple  # Relax functions the VM interprets
    kernels: tuple  # TIR kernels compiled into the libraries
    externals: tuple  # External per compiled subgraph
    builtins: tuple  # vm.builtin.* and other packed functions of TVM's runtime

    def lines(self) -> list:
        libs = ", ".join(self.libraries) or "none"
        out = [
            f"{self.executable}",
            text.wrap(f"  VM functions ({len(self.functions)}): {', '.join(self.functions)}", indent="  |    "),
            text.wrap(
                f"  |- {libs} library: {len(self.kernels)} TIR kernels" + _sample(self.kernels), indent="  |    "
            ),
            f"  |- external functions ({len(self.externals)}):" + ("" if self.externals else " none"),
        ]
        out += [
            text.wrap(f"  |    {e.subgraph} held by {e.backend}, as {e.symbol}", indent="  |      ")
            for e in self.externals
        ]
        out.append(
            text.wrap(f"  |- TVM runtime builtins ({len(self.builtins)})" + _sample(self.builtins), indent="  |    ")
        )
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


def _sample(names, n: int = 4) -> str:
    if not names:
        return ""
    more = f", … {len(names) - n} more" if len(names) > n else ""
    return ": " + ", ".join(names[:n]) + more


_GLOBAL = re.compile(r"^@(\S+?)(:| packed_func;)$", re.MULTILINE)


def structure(executable, generated: dict | None = None) -> Structure:
    """What ``executable`` (from :func:`byoc_workbench.measure.compiler.execute.compile`) holds.

    ``generated`` (``{subgraph: Compiled}``) names the subgraph and backend of
    each external function.
    """
    by_symbol = {c.symbol: c for c in (generated or {}).values()}
    lib = executable.mod
    imports = list(lib.imports_)
    functions, kernels, externals, builtins = [], [], [], []
    for name, kind in _GLOBAL.findall(executable.as_text()):
        if kind == ":":
            functions.append(name)
        elif name in by_symbol:
            c = by_symbol[name]
            externals.append(External(c.name, name, describe_backend(c)))
        elif any(m.implements_function(name) for m in imports):
            kernels.append(name)
        else:
            builtins.append(name)
    # An executable from the build cache imports its host code as a loaded "library"; LLVM compiled it.
    kinds = tuple("llvm" if m.kind == "library" else m.kind for m in imports)
    return Structure(lib.kind, kinds, *map(tuple, (functions, kernels, externals, builtins)))


def describe_backend(compiled) -> str:
    """``onnxruntime (CPU)``, ``onnxruntime (CUDA)``, ``openvino (CPU, f32)``, ``tensorrt`` or ``teaching``:
    the backend and its record's ``detail``."""
    return f"{compiled.backend} ({compiled.detail})" if compiled.detail else compiled.backend


@dataclasses.dataclass
class RanOn:
    """Where a build ran: the backends that ran its subgraphs (as :func:`describe_backend` names them,
    none when TVM ran it all), TVM's target for the rest, why a backend tried first took nothing
    (``{backend: why}``), and how many subgraphs went back to TVM. ``str()`` is the phrase every
    printout shows, e.g. ``onnxruntime (CPU) + tvm (llvm) for the rest — TensorRT not available: …``."""

    backends: tuple = ()
    tvm_target: str = "llvm"
    refused: dict = dataclasses.field(default_factory=dict)
    back_on_tvm: int = 0

    @classmethod
    def of(cls, generated: dict, skipped: dict | None = None, tvm_target: str = "llvm") -> RanOn:
        """Where a build ran whose subgraphs ``generated`` (``{name: Compiled}``) compiled and ``skipped`` did not."""
        refused: dict = {}
        for c in generated.values():
            for backend, why in c.tried:
                refused.setdefault(backend, why)
        names = tuple(sorted({describe_backend(c) for c in generated.values()}))
        return cls(names, tvm_target, refused, len(skipped or ()) if generated else 0)

    def ran(self) -> str:
        """What ran the build, e.g. ``onnxruntime (CPU) + tvm (llvm) for the rest`` or ``tvm alone (llvm)``."""
        if not self.backends:
            return f"tvm alone ({self.tvm_target})"
        more = f"; {self.back_on_tvm} subgraph(s) back on tvm" if self.back_on_tvm else ""
        return ", ".join(self.backends) + f" + tvm ({self.tvm_target}) for the rest" + more

    def why(self) -> list:
        """One phrase per backend that did not run: ``TensorRT not available: <why>``."""
        return [f"{registry.pretty(b)} not available: {why}" for b, why in self.refused.items()]

    def __str__(self) -> str:
        return " — ".join([self.ran(), *self.why()])


# --- build and run ------------------------------------------------------------------


@dataclasses.dataclass
class Run:
    """One module built and run: outputs, latency, the runtime's structure and each subgraph's artifact."""

    label: str
    ran: RanOn
    latency: clock.Latency
    build_s: float
    outputs: list
    structure: Structure
    generated: dict  # subgraph -> Compiled
    skipped: dict  # subgraph -> why TVM kept it
    vm: object = dataclasses.field(repr=False, default=None)
    mark: str = ""  # e.g. "untrained weights"
    measured: str = ""  # when a kept run was measured (:mod:`byoc_workbench.measure.time.kept`); "" for this one
    call: Callable[[], object] | None = dataclasses.field(repr=False, default=None)  # one more run, same inputs

    @property
    def backend(self) -> str:
        """Where it ran, as every printout says it (:class:`RanOn`)."""
        return str(self.ran)

    def line(self) -> str:
        """``label [what ran]: build, latency``, broken between words at :data:`byoc_workbench.core.text.WIDTH`."""
        mark = f" — {self.mark}" if self.mark else ""
        kept = f"; {self.measured}" if self.measured else ""
        return text.wrap(
            f"{self.label} [{self.backend}]: build {text.seconds(self.build_s)}, {self.latency}{kept}{mark}",
            indent="  ",
        )

    def artifact(self, subgraph: str | None = None, lines: int | None = 40) -> str:
        """The generated artifact of one subgraph (default: the first), as its backend shows it:
        an ONNX summary, a TensorRT engine's layers, or generated NumPy or C source; ``lines`` caps it."""
        if not self.generated:
            return "nothing was offloaded: TVM compiled the whole module"
        name = subgraph or next(iter(self.generated))
        text = self.generated[name].source.splitlines()
        more = f"\n… {len(text) - lines} more lines" if lines is not None and len(text) > lines else ""
        head = f"# {name}, compiled by {describe_backend(self.generated[name])}"
        return "\n".join([head, *text[:lines]]) + more

    def __str__(self) -> str:
        return self.line() + "\nRuntime structure:\n" + str(self.structure)


def _module_and_generated(what, backend: str | None, options: dict) -> tuple:
    """``(module, generated, skipped)`` from a module or a codegen stage, subgraphs compiled by ``backend``."""
    if hasattr(what, "generated") and hasattr(what, "mod"):  # a codegen Stage
        mod, generated, skipped = what.mod, dict(what.generated or {}), {}
    else:
        mod, generated, skipped = what, {}, {}
    if ir.subgraph_functions(mod):
        # Subgraphs left uncompiled: the backend compiles them; with "tvm" they go back to the host.
        mod, more, skipped = registry.run_codegen(mod, backend or "tvm", **options)
        generated.update(more)
    return mod, generated, skipped


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunOptions:
    """How :func:`build_and_run` builds and reports; it takes them as keywords (a misspelt one is a TypeError)."""

    tvm_target: str = "llvm"
    # For a partitioned module: any backend of the registry (``onnxruntime``, ``tensorrt``, ``auto``,
    # ``teaching``, ``c``, yours) or ``tvm`` (see :mod:`byoc_workbench.backends.registry`).
    backend: str | None = None
    label: str = ""  # what the printout calls this build
    mark: str = ""  # e.g. "untrained weights"
    progress: bool = True
    options: dict | None = None  # the backend's own keywords, for its codegen
    max_seconds: float | None = None  # refuse the timed runs when the first one says they would take longer
    # For a slow baseline (TVM alone): keep the run on disk and, next time the same build gets the same
    # inputs on this machine, show the kept run instead of running it again (:mod:`byoc_workbench.measure.time.kept`);
    # the printout says when it was measured. ``BYOC_WORKBENCH_NO_CACHE=1`` measures it again.
    keep: bool = False


def build_and_run(what, inputs, repeat: int = 10, warmup: int = 1, **kw) -> Run:
    """Build ``what`` for ``tvm_target``, warm up, run it ``repeat`` times, and report.

    Parameters
    ----------
    what : tvm.IRModule or codegen Stage
        A module (TVM alone, or partitioned: its subgraphs go to ``backend``),
        or the codegen stage of ``run_stages``, whose subgraphs are compiled.
    inputs : list of arrays
        The arguments of ``main``, copied once to ``tvm_target``'s device.
    repeat, warmup : int
        Timed and untimed runs. With ``warmup=0`` (a slow baseline run once)
        the first timed run shows a progress bar per VM call.
    **kw
        :class:`RunOptions`' fields: ``tvm_target``, ``backend``, ``label``, ``mark``, ``progress``,
        ``options``, ``max_seconds``, ``keep``.
    """
    opts = RunOptions(**kw)
    tvm_target = opts.tvm_target
    execute.check_runs_here(tvm_target)
    mod, generated, skipped = _module_and_generated(what, opts.backend, opts.options or {})
    name = opts.label or "module"
    with byoc_workbench.core.progress.bar(
        desc=f"{name}: build ({tvm_target})", unit="build", enabled=opts.progress
    ) as bar:
        t0 = time.perf_counter()
        executable = execute.compile(mod, tvm_target)
        vm = execute.virtual_machine(executable, tvm_target)
        build_s = time.perf_counter() - t0
        dev = execute.device(tvm_target)
        args = [tvm.runtime.tensor(np.asarray(a), dev) for a in inputs]
        fn = execute.synced(vm["main"], tvm_target)
        run_key = kept.run_key(mod, tvm_target, inputs, repeat, warmup) if opts.keep and not generated else None
        found = kept.kept_run(run_key) if run_key else None
        if found is not None:
            latency, outputs, when = found
            measured, counted = f"measured {when} on this machine and kept", ""
        else:
            timed = _timed(vm, executable, fn, args, name, bar, repeat, warmup, opts.progress, opts.max_seconds)
            (latency, outputs, counted), measured = timed, ""
            if run_key:
                kept.store(run_key, latency, outputs)
        runs = f"{latency.runs} run{'s' if latency.runs != 1 else ''}"
        said = f" ({measured})" if measured else counted
        bar.done = text.wrap(
            f"{name}: built in {text.seconds(build_s)}; {runs}, median {text.seconds(latency.median_s)}{said}",
            indent="  ",
        )
    return Run(
        name,
        RanOn.of(generated, skipped, tvm_target),
        latency,
        build_s,
        outputs,
        structure(executable, generated),
        generated,
        skipped,
        vm,
        opts.mark,
        measured,
        lambda: fn(*args),
    )


def _timed(vm, executable, fn, args, name: str, bar, repeat: int, warmup: int, progress: bool, max_seconds):
    """``(latency, outputs of the last timed run, ", N VM calls" or "")``; a slow baseline run once
    (``warmup=0``) counts its VM calls on ``bar``."""
    calls: list = []
    if warmup == 0 and progress:
        fn = _first_call_with_progress(vm, executable, fn, name, bar, calls)
    last: list = [None]

    def once():
        last[0] = fn(*args)  # the outputs of the last timed run: no extra run of a slow baseline

    latency = clock.measure(once, repeat, warmup, f"{name}: run", max_seconds=max_seconds, bar=bar)
    return latency, execute.to_numpy(last[0]), f", {calls[0]} VM calls" if calls else ""


def _first_call_with_progress(vm, executable, fn, name: str, bar: byoc_workbench.core.progress.Bar, calls: list):
    """``fn`` whose first call counts the VM calls ``main`` makes on ``bar`` (a slow baseline:
    tens of seconds) and appends their number to ``calls``; later calls run without the instrument."""
    expected = sum(
        1 for ln in executable.as_text().split("@main:", 1)[-1].split("\n@", 1)[0].splitlines() if "call" in ln
    )
    state = {"first": True}

    def wrapped(*args):
        if not state["first"]:
            return fn(*args)
        state["first"] = False
        tq = bar.tq
        runs = (tq.desc, tq.total, tq.unit) if tq is not None else None
        bar.phase(f"{name}: VM calls of run 1", expected, "call")
        count = [0]

        def instrument(func, symbol, before, ret, *a):
            if not before:
                count[0] += 1
                bar.update()
            return 0

        vm.set_instrument(instrument)
        try:
            return fn(*args)
        finally:
            vm.set_instrument(lambda *a: 0)
            calls.append(count[0])
            if runs is not None:
                bar.phase(*runs)  # back to counting runs

    return wrapped


# --- for notebook 02 ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Choice:
    """The offloading backend this machine can run, the target TVM builds for, and a line saying why."""

    backend: str
    tvm_target: str
    line: str


def offload_choice() -> Choice:
    """Where notebook 02 builds and runs: on an NVIDIA GPU (with a CUDA compiler), TVM on CUDA, what it has
    no GPU kernel for on the CPU (:mod:`byoc_workbench.core.devices`), and the subgraphs on TensorRT where it runs,
    else on torch on the GPU, else on ONNX Runtime; without a GPU, ONNX Runtime and TVM on the CPU. The line
    says which, and why."""
    no_trt = tensorrt.missing()
    if no_trt is None:
        line = "TensorRT and an NVIDIA GPU are here: subgraphs run on TensorRT, TVM on CUDA."
        return Choice("tensorrt", "cuda", line)
    tvm_target, where = "llvm", "TVM on the CPU (llvm)"
    if tvm.cuda(0).exist:
        try:
            cuda.find()
            tvm_target, where = "cuda", "TVM on the GPU (CUDA, NMS on the CPU)"
        except WorkbenchError as err:
            where += f", since {err.cause[0].lower()}{err.cause[1:]}"
    if tvm_target == "cuda" and pytorch.sees_a_gpu():
        backend, runs_on = "torch", "torch on the GPU (eager, replayed as CUDA graphs where nothing waits for the host)"
    else:
        provider = onnxruntime.providers()[0].replace("ExecutionProvider", "") if tvm_target == "cuda" else "CPU"
        backend, runs_on = "onnxruntime", f"ONNX Runtime ({provider})"
    line = (
        f"No TensorRT here: {no_trt.cause.rstrip('. ')}. The offloaded subgraphs run on {runs_on}, the rest on {where}."
    )
    return Choice(backend, tvm_target, text.wrap(line + " Every timing says so."))


def speedup_table(runs, baseline: Run | None = None) -> str:
    """A text table of several runs: latency, speedup over ``baseline`` (default: the first) and what ran
    each; under it, why a backend did not run, the machine, and the weights' mark."""
    runs = list(runs)
    base = baseline or runs[0]
    marks = {r.mark for r in runs if r.mark}
    width = max(12, *(len(r.label) for r in runs))
    head = f"{'build':{width}s} {'median':>8s} {'min':>8s} {'runs':>4s} {'speedup':>7s}  ran on"
    lines = [head]
    whys = []
    for r in runs:
        lat = r.latency
        ran = r.ran.ran()
        whys += [w for w in r.ran.why() if w not in whys]
        row = (
            f"{r.label:{width}s} {text.seconds(lat.median_s):>8s} {text.seconds(lat.min_s):>8s} "
            f"{lat.runs:4d} {base.latency.median_s / lat.median_s:6.1f}x  "
        )
        # What ran goes under the row when the line would be too long for a notebook.
        lines.append(row + ran if len(row + ran) <= text.WIDTH else f"{row.rstrip()}\n    ran on {ran}")
    lines += [text.wrap(w, indent="  ", first="note: ") for w in whys]
    lines.append(
        text.wrap(
            f"speedup over {base.label}, measured here ({text.machine_line(machine())}): it depends on the "
            "machine and on what else runs on it.",
            indent="  ",
        )
    )
    if marks:
        lines.append(f"[{'; '.join(sorted(marks))}]")
    return "\n".join(lines)


def race(a: Run, b: Run, rounds: int = 10) -> str:
    """Which of two builds is faster here, or a tie (:func:`byoc_workbench.measure.time.clock.verdict`), from
    ``rounds`` runs of each taken in turn (:func:`~byoc_workbench.measure.time.clock.round_robin`): the machine's
    drift falls on both alike, where two runs timed one after the other can differ by 2x on a busy CPU. As lines
    that fit a notebook."""
    times = clock.round_robin({a.label: a.call, b.label: b.call}, rounds)
    said = clock.verdict(a.label, clock.Latency.of(times[a.label]), b.label, clock.Latency.of(times[b.label]))
    return text.wrap(f"{rounds} rounds, each build once a round: {said.line()}", indent="  ")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SubgraphCost:
    """What one subgraph costs per run, in seconds, offloaded (compute, crossings) and on the host."""

    subgraph: str
    compute_s: float  # the offloaded call itself
    boundary_s: float  # the crossings into and out of the backend
    host_s: float  # the same ops as TVM's host kernels
    host_kernels: int  # how many host kernels were found


def subgraph_cost(offloaded, on_host, subgraph: str, partitioned=None) -> SubgraphCost:
    """What one subgraph costs offloaded and on the host, from two :class:`~.timing.Profile`\\ s.

    ``offloaded`` is a profile of a build that offloads ``subgraph``; ``on_host``
    one of a build where TVM runs the same ops (e.g. after pruning). With
    ``partitioned`` (the module holding the subgraph function, e.g.
    ``Built.partitioned``), every binding of the subgraph is looked up on the
    host; without, only the binding its call defines. Returns a :class:`SubgraphCost`, seconds per run:
    ``compute_s`` and ``boundary_s`` (into and out of the backend) offloaded,
    ``host_s`` on TVM, and ``host_kernels``: how many host kernels were found.
    """
    entries = [e for e in offloaded.entries if e.name == subgraph or e.name.startswith(f"{subgraph} ▸ ")]
    site = next((e.site for e in entries if e.kind == "subgraph"), None)
    compute = sum(e.time_s for e in entries if e.kind == "subgraph")
    boundary = sum(e.time_s for e in entries if e.kind != "subgraph")
    host, kernels = 0.0, 0
    if site is not None and site.var is not None:
        names = {site.var.name}
        if partitioned is not None and subgraph in [gv.name_hint for gv in partitioned.get_global_vars()]:
            names |= {s.var.name for s in ir.walk(partitioned[subgraph], descend=False)}
        for e in on_host.entries:
            if e.kind == "kernel" and e.site is not None and e.site.var is not None:
                if e.site.function == site.function and e.site.var.name in names:
                    host, kernels = host + e.time_s, kernels + 1
    return SubgraphCost(subgraph=subgraph, compute_s=compute, boundary_s=boundary, host_s=host, host_kernels=kernels)


def subgraph_cost_line(cost: SubgraphCost, backend: str) -> str:
    offloaded = cost.compute_s + cost.boundary_s
    verdict = "costs more offloaded" if offloaded > cost.host_s else "costs less offloaded"
    return text.wrap(
        f"{cost.subgraph}: offloaded to {backend} {text.seconds(offloaded)} per run "
        f"({text.seconds(cost.compute_s)} compute + {text.seconds(cost.boundary_s)} crossing in and out); "
        f"the same ops on TVM {text.seconds(cost.host_s)} ({cost.host_kernels} kernels): it {verdict}",
        indent="  ",
    )
