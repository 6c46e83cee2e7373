"""The ``torch`` backend: each subgraph becomes a torch function, run eagerly or under ``torch.compile``.

PyTorch is the vendor runtime a GPU machine ships: cuDNN and cuBLAS behind its
eager ops on an NVIDIA GPU, oneDNN on a CPU, Triton behind ``torch.compile``,
and torchvision's NMS on either. Unlike TensorRT it builds no engine: a subgraph
is a list of torch calls, one per Relax op (:mod:`.pytorch_ops`), ready at once.

Tensors cross by DLPack in both directions, with no copy, on the device they
are on: a subgraph runs where TVM hands it its inputs (the GPU in a CUDA build,
the CPU otherwise), and writes its results into TVM's output buffers.

On a GPU an eager subgraph is replayed as a CUDA graph: its first call runs it
twice (cuDNN and cuBLAS choose their kernels) and records its launches once, and
every later call copies the inputs in and replays them, with no Python between
kernels. A subgraph whose ops read a value back to the host (NMS counts its
boxes) cannot be recorded, and runs eagerly.

Options: ``compile=True`` runs the function under ``torch.compile`` (its first
call compiles, seconds to minutes; later calls are fused kernels); ``precision``
``"f16"`` or ``"bf16"`` runs the floats in that type (weights and inputs cast,
outputs cast back to float32); ``graphs=False`` keeps a GPU subgraph eager. The
record's ``detail`` says which.

The backend brings a target of its own (``torch``): one rule per op the table converts,
so it claims the detectors' NMS and box arithmetic as well as their backbones.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import logging
import warnings

import numpy as np
from tvm import relax

from byoc_workbench.backends import lowering, phases
from byoc_workbench.backends.base import Backend, Compiled, register_packed
from byoc_workbench.backends.pytorch_ops import CONVERTERS, SUPPORTED_OPS, unsupported
from byoc_workbench.core import ir_types
from byoc_workbench.core.errors import WorkbenchError, import_optional
from byoc_workbench.flow import rules

FIX = "switch off the rule that offloads it, or add a converter in byoc_workbench/backends/pytorch_ops.py"
PRECISIONS = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
# Ops whose torch code waits for a value on the host (a box count, NMS's survivors): no CUDA graph records them.
HOST_READS = frozenset({"relax.vision.non_max_suppression"})

logger = logging.getLogger(__name__)


def _torch():
    return import_optional("torch", "make setup EXTRAS=pytorch (pip install torch torchvision)")


def sees_a_gpu() -> bool:
    """Whether torch is installed and sees an NVIDIA GPU (nothing imported when torch is not installed)."""
    return importlib.util.find_spec("torch") is not None and bool(_torch().cuda.is_available())


class Program:
    """A subgraph as torch calls: each step reads the values before it and binds its own (its
    :func:`.lowering.lower_subgraph` steps, each op call converted by :data:`.pytorch_ops.CONVERTERS`)."""

    def __init__(self, func: relax.Function, name: str):
        self.name = name
        self.consts: list = []  # numpy arrays, moved to a device once per device
        self.steps: list = []  # (converter, call, [read(env) per argument], slot)
        self.lines: list = []  # the program as text, a line a step
        self.params = len(func.params)
        self.static = all(ir_types.is_static(p.ty) for p in func.params)
        self.ops: set = set()
        self._outs: list = []  # a read of each op call's result
        lowered = lowering.lower_subgraph(func, name)
        for step in lowered.steps:
            if isinstance(step, lowering.Constant):
                self.consts.append(step.expr.value.numpy())
            elif isinstance(step, lowering.OpCall):
                reads = [self._read(a) for a in step.args]
                slot = self.params + step.out
                self.steps.append((CONVERTERS[step.name], step.call, reads, slot))
                self.ops.add(step.name)
                args = ", ".join(r.text for r in reads if r is not _NONE)
                self.lines.append(f"{step.var.name} = {step.name.removeprefix('relax.')}({args})")
                self._outs.append(_slot(slot, step.var.name))
        self.result = self._read(lowered.result)

    def _read(self, ref) -> _Ref:
        """A reference of the lowering as a read of the run's values."""
        if isinstance(ref, tuple):
            refs = [self._read(r) for r in ref]
            return _Ref(lambda env: tuple(r(env) for r in refs), "(" + ", ".join(r.text for r in refs) + ")")
        if isinstance(ref, lowering.Item):
            base, k = self._read(ref.of), ref.index
            return _Ref(lambda env: base(env)[k], f"{base.text}[{k}]")
        if isinstance(ref, lowering.Input):
            return _slot(ref.index)
        if isinstance(ref, lowering.Const):
            return _const(ref.index)
        if isinstance(ref, lowering.Out):
            return self._outs[ref.index]
        return _NONE  # a static argument: the converter reads it from the call

    def run(self, torch, inputs: list, consts: list, device) -> list:
        env = {"consts": consts}
        for i, x in enumerate(inputs):
            env[i] = x
        for convert, call, reads, slot in self.steps:
            env[slot] = convert(torch, call, [r(env) for r in reads], device)
        out = self.result(env)
        return list(_flatten(out))


class _Ref:
    """How a step reads a value: ``ref(env)``; ``text`` names it in the program's listing."""

    def __init__(self, read, text: str):
        self.read, self.text = read, text

    def __call__(self, env):
        return self.read(env)


def _slot(i: int, name: str = "") -> _Ref:
    return _Ref(lambda env: env[i], name or f"in{i}")


def _const(j: int) -> _Ref:
    return _Ref(lambda env: env["consts"][j], f"const{j}")


_NONE = _Ref(lambda env: None, "")  # a static argument: the converter reads it from the call


def _flatten(value):
    if isinstance(value, (tuple, list)):
        for v in value:
            yield from _flatten(v)
    else:
        yield value


class Runner:
    """A packed function: ``(*inputs, *outputs)`` TVM tensors, read and written in place through DLPack."""

    def __init__(self, program: Program, compile: bool, precision: str, graphs: bool = True):
        self.torch = _torch()
        self.program = program
        self.precision = precision
        self.dtype = getattr(self.torch, PRECISIONS[precision])
        self._consts: dict = {}  # device -> the constants there
        run = self._run
        self.fn = self.torch.compile(run, dynamic=False) if compile else run
        self.graphs = graphs and not compile and program.static and not program.ops & HOST_READS
        self._graph = None  # (graph, its input buffers, its outputs) once recorded on a GPU

    def _run(self, inputs, consts, device):
        return self.program.run(self.torch, inputs, consts, device)

    def consts(self, device) -> list:
        if device not in self._consts:
            t = self.torch
            tensors = [t.from_numpy(np.array(c, order="C")).to(device) for c in self.program.consts]
            self._consts[device] = [self._cast(c) for c in tensors]
        return self._consts[device]

    def _cast(self, x):
        return x.to(self.dtype) if self.precision != "f32" and x.dtype == self.torch.float32 else x

    def __call__(self, *args):
        t = self.torch
        n = self.program.params
        ins = [self._cast(t.from_dlpack(a)) for a in args[:n]]
        device = ins[0].device if ins else t.device("cpu")
        phases.mark("inputs")
        with t.inference_mode(), self._exact():
            if self.graphs and device.type == "cuda":
                results = self._replay(ins, device)
            else:
                results = self.fn(ins, self.consts(device), device)
        phases.mark("compute")
        for out, res in zip(args[n:], results):
            t.from_dlpack(out).copy_(res)

    @contextlib.contextmanager
    def _exact(self):
        """At f32, float32 arithmetic: cuDNN's convolutions take TF32 on a GPU unless told not to (10 bits of
        mantissa, which moves an untrained SSD's scores across its 0.01 threshold)."""
        flags = self.torch.backends.cudnn, self.torch.backends.cuda.matmul
        saved = [f.allow_tf32 for f in flags]
        for f in flags:
            f.allow_tf32 = f.allow_tf32 and self.precision != "f32"
        try:
            yield
        finally:
            for f, was in zip(flags, saved):
                f.allow_tf32 = was

    def _replay(self, ins, device) -> list:
        """The subgraph as a CUDA graph, recorded at its first call (eager if recording fails)."""
        t = self.torch
        if self._graph is None:
            static, consts = [x.clone() for x in ins], self.consts(device)
            side = t.cuda.Stream(device)
            side.wait_stream(t.cuda.current_stream(device))
            with t.cuda.stream(side):  # cuDNN and cuBLAS choose kernels and workspaces outside the recording
                for _ in range(2):
                    self.fn(static, consts, device)
            t.cuda.current_stream(device).wait_stream(side)
            graph = t.cuda.CUDAGraph()
            try:
                with t.cuda.graph(graph), warnings.catch_warnings():
                    # A subgraph of views only (a reshape) records no kernel: its outputs read the input buffers.
                    warnings.filterwarnings("ignore", "The CUDA Graph is empty")
                    outs = self.fn(static, consts, device)
            except RuntimeError as err:
                logger.warning("%s runs eagerly: a CUDA graph cannot record it (%s)", self.program.name, err)
                self.graphs = False
                return self.fn(ins, consts, device)
            self._graph = (graph, static, outs)
        graph, static, outs = self._graph
        for buffer, x in zip(static, ins):
            buffer.copy_(x)
        graph.replay()
        return outs


def compile_subgraph(
    name: str, func, compile: bool = False, precision: str = "f32", graphs: bool = True, **options
) -> Compiled:
    """A torch function computing ``func``, registered as a packed function; one line naming every op it lacks."""
    if precision not in PRECISIONS:
        raise WorkbenchError(f"Unknown precision {precision!r} for torch", f"choose one of: {', '.join(PRECISIONS)}")
    reasons = list(dict.fromkeys(r for r in map(unsupported, [s.value for s in lowering.op_steps(func)]) if r))
    if reasons:
        raise WorkbenchError(f"{name}: the torch backend cannot run {'; '.join(reasons)}", FIX)
    torch = _torch()
    program = Program(func, name)
    runner = Runner(program, compile, precision, graphs)
    # "CUDA graph" only where one can be recorded: a static subgraph, on a machine whose torch sees a GPU.
    graphed = runner.graphs and torch.cuda.is_available()
    mode = "torch.compile" if compile else "eager, CUDA graph on GPU" if graphed else "eager"
    header = f"# torch {torch.__version__}, {mode}, {precision}: {len(program.steps)} calls\n"
    source = header + "\n".join(program.lines)
    content = hashlib.sha256(source.encode() + b"".join(c.tobytes() for c in program.consts)).digest()
    num_outputs = len(func.ret_ty.fields) if isinstance(func.ret_ty, relax.TupleType) else 1
    detail = f"{mode}, {precision}"
    return register_packed("torch", name, runner, content, source, num_outputs, detail, precision)


def target_rules(target: str = "torch") -> tuple[rules.Rule, ...]:
    """The torch target: one per-op rule for every op the table converts, each asking what
    :func:`.pytorch_ops.unsupported` asks, so it claims exactly what the backend runs."""
    return rules.every_op_rules(target, SUPPORTED_OPS, lambda call: unsupported(call) is None, "run by torch")


def guard_rules(rule_set) -> tuple[rules.Rule, ...]:
    """``rule_set`` narrowed to the calls the torch backend runs (every op a match holds)."""
    return rules.narrowed(rule_set, lambda call: unsupported(call) is not None)


BACKEND = Backend(
    "torch",
    compile_subgraph,
    "PyTorch, eager or torch.compile, where TVM hands it the tensors (GPU or CPU), NMS included",
    guard_rules,
    native="torch",
    own_target=lambda: rules.Target("torch", target_rules(), "every op the torch backend runs, NMS included"),
    packages=("torch", "torchvision"),
    install="make setup EXTRAS=pytorch (pip install torch torchvision)",
    precisions=tuple(PRECISIONS),
)
