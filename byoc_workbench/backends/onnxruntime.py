"""The ``onnxruntime`` backend: each subgraph becomes an ONNX Runtime session.

The session runs on the CPU everywhere, and on the CUDA provider where
onnxruntime-gpu and an NVIDIA GPU exist. TVM's tensors reach it through
DLPack, so inputs are read and outputs written in place, with no copies.
"""

from __future__ import annotations

import functools
import os

import numpy as np
import tvm

from byoc_workbench.backends import onnx, phases
from byoc_workbench.backends.base import Backend, Compiled, register_packed
from byoc_workbench.core.errors import WorkbenchError, first_line, import_optional

_KDLCPU = 1


def _ort():
    return import_optional("onnxruntime", "pip install onnxruntime (onnxruntime-gpu on an NVIDIA machine)")


def providers() -> list:
    """The execution providers a session gets: CUDA first where it can run, always the CPU."""
    ort = _ort()
    if "CUDAExecutionProvider" in ort.get_available_providers() and tvm.cuda(0).exist:
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def session_options(threads: int | None = None, spinning: bool = False):
    """Full graph optimisation, one intra-op thread per core.

    ``spinning=False``: TVM's own threads run the host ops right after, so idle
    ONNX Runtime threads sleep instead of spinning on the same cores.
    """
    ort = _ort()
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = threads or _cores()
    so.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    so.log_severity_level = 3  # its warnings (shape merging in small subgraphs) are noise to a reader; errors stay
    return so


def _errors(ort) -> tuple:
    state = ort.capi.onnxruntime_pybind11_state
    return tuple(getattr(state, n) for n in ("Fail", "InvalidGraph", "NotImplemented", "InvalidArgument", "EPFail"))


def make_session(model: bytes, name: str, threads: int | None = None, spinning: bool = False):
    """An InferenceSession for a serialized ONNX model, or a one-line error if ONNX Runtime rejects it."""
    ort = _ort()
    try:
        return ort.InferenceSession(model, sess_options=session_options(threads, spinning), providers=providers())
    except _errors(ort) as err:
        raise WorkbenchError(f"ONNX Runtime rejected {name}: {first_line(err)}", onnx.FIX) from None


class Runner:
    """A packed function: ``(*inputs, *outputs)`` TVM tensors, outputs written in place."""

    def __init__(self, session):
        self.session = session
        self.inputs = [i.name for i in session.get_inputs()]
        self.outputs = [o.name for o in session.get_outputs()]
        self.on_gpu = session.get_providers()[0] == "CUDAExecutionProvider"
        self._ort = _ort()

    def _value(self, t):
        # Zero-copy: the OrtValue borrows the TVM tensor's memory.
        return self._ort.OrtValue.from_dlpack(t)

    def __call__(self, *args):
        ins, outs = args[: len(self.inputs)], args[len(self.inputs) :]
        if not self.on_gpu and any(t.device.dlpack_device_type() != _KDLCPU for t in args):
            return self._through_host(ins, outs)
        binding = self.session.io_binding()
        for name, t in zip(self.inputs, ins):
            binding.bind_ortvalue_input(name, self._value(t))
        for name, t in zip(self.outputs, outs):
            binding.bind_ortvalue_output(name, self._value(t))
        phases.mark("inputs")  # binding is the boundary's cost here: no copies (see backends.phases)
        self.session.run_with_iobinding(binding)
        phases.mark("compute")

    def _through_host(self, ins, outs):
        """A CPU-only ONNX Runtime cannot read GPU memory: copy through the host."""
        feed = {n: t.numpy() for n, t in zip(self.inputs, ins)}
        phases.mark("inputs")
        results = self.session.run(self.outputs, feed)
        phases.mark("compute")
        for out, res in zip(outs, results):
            out.copyfrom(np.asarray(res, order="C"))


def compile_subgraph(
    name: str, func, threads: int | None = None, spinning: bool = False, fp16: bool = False, **options
) -> Compiled:
    """Translate ``func`` to ONNX (float16 in the graph with ``fp16``, as its detail says), open a session (see
    :func:`session_options`) and register it."""
    model = onnx.translate(func, name, fp16=fp16)
    data = model.SerializeToString()
    session = make_session(data, name, threads, spinning)
    runner = Runner(session)
    header = f"# onnxruntime {_ort().__version__} on {', '.join(session.get_providers())}\n"
    source = header + onnx.onnx_text(model)
    where = session.get_providers()[0].replace("ExecutionProvider", "")  # what ran it: CPU, or CUDA
    detail = f"{where}, fp16" if fp16 else where
    return register_packed("onnxruntime", name, runner, data, source, len(runner.outputs), detail)


def whole_model(path):
    """``run(inputs) -> outputs`` for a whole ONNX file, with the same session options (an anchor of ``bench``)."""
    ort = _ort()
    so = session_options()  # quiet: MXNet's export keeps initializers among the inputs, ORT would warn per weight
    try:
        session = ort.InferenceSession(str(path), sess_options=so, providers=providers())
    except _errors(ort) as err:
        raise WorkbenchError(f"ONNX Runtime rejected {path}: {first_line(err)}", "check it with onnx.checker") from None
    names = [i.name for i in session.get_inputs()]

    def run(inputs):
        return session.run(None, dict(zip(names, inputs)))

    return run


BACKEND = Backend(
    "onnxruntime",
    compile_subgraph,
    "ONNX Runtime: CPU everywhere, CUDA with onnxruntime-gpu",
    onnx.guard_rules,
    native="onnxruntime",  # its own target's subgraphs
    own_target=functools.partial(onnx.own_target, "onnxruntime"),
    packages=("onnx", "onnxruntime"),
    install="pip install onnx onnxruntime",
    pretty="ONNX Runtime",
    whole_model=whole_model,
    ran_on="onnxruntime (CPU)",
)
