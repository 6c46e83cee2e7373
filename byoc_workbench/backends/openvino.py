"""The ``openvino`` backend: each subgraph's ONNX compiled by OpenVINO for the CPU.

The subgraph goes through the same ONNX translator as ``onnxruntime``
(:mod:`.onnx`). OpenVINO's CPU plugin picks its inference precision itself
unless told: on CPUs with bf16 (AVX512-BF16, AMX) it silently runs bfloat16,
about twice as fast and 0.43 relative error away on the SSD. So the
precision is always set, ``f32`` unless ``precision`` asks for ``bf16`` or
``f16``, and the source a reader sees names the precision OpenVINO reports.

TVM's host buffers reach OpenVINO without copies: an ``ov.Tensor`` shares
their memory, inputs and outputs alike, and it is set on the infer request
only when TVM hands over another buffer. Buffers elsewhere (a GPU) are
copied through the host, and that copy is what the runner's ``inputs`` and
``compute`` marks time (:mod:`.phases`), so the latency map's boundary nodes
show it.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import sys

import numpy as np

from byoc_workbench.backends import onnx, phases
from byoc_workbench.backends.base import Backend, Compiled, register_packed
from byoc_workbench.core.errors import WorkbenchError, first_line, import_optional

PRECISIONS = ("f32", "bf16", "f16")
FIX = "pip install openvino (see requirements.txt), or choose backend onnxruntime"
_KDLCPU = 1


@functools.cache
def package():
    """``openvino``, imported with its telemetry pool shut down (doctor's check goes through here too)."""
    try:
        return import_optional("openvino", FIX)
    finally:
        _stop_telemetry()


def _stop_telemetry() -> None:
    """Shut down the thread pool that ``import openvino`` starts to send its telemetry (``openvino_telemetry``).

    A Ctrl-C while that pool starts its thread leaves a worker that nothing wakes: after the command's last
    line the interpreter waits for it for ever. Shut down, the pool wakes it, and drops later events (the
    library catches the refusal).
    """
    telemetry = sys.modules.get("openvino_telemetry")
    if telemetry is not None:
        with contextlib.suppress(RuntimeError):  # no Telemetry was set up: no pool
            telemetry.Telemetry().force_shutdown(0)  # the executor's shutdown(cancel_futures=True)


@functools.lru_cache(maxsize=1)
def core():
    """One ``ov.Core`` per process: it holds the plugins and their caches."""
    return package().Core()


def check_precision(precision: str) -> str:
    """``precision`` when OpenVINO takes it, else a one-line error naming the choices."""
    if precision not in PRECISIONS:
        raise WorkbenchError(
            f"Unknown precision {precision!r} for openvino", f"choose one of: {', '.join(PRECISIONS)} (f32 is exact)"
        )
    return precision


def config(precision: str = "f32", threads: int | None = None) -> dict[str, str | int]:
    """The CPU plugin's settings: the precision always set, latency first, one thread per core."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return {
        "INFERENCE_PRECISION_HINT": check_precision(precision),
        "PERFORMANCE_HINT": "LATENCY",
        "INFERENCE_NUM_THREADS": int(threads or cores),  # a NumPy integer too
    }


def compile_model(model, name: str, precision: str = "f32", threads: int | None = None, fix: str = ""):
    """``model`` (ONNX bytes or a file path) compiled for the CPU, or a one-line error if OpenVINO rejects it."""
    settings = config(precision, threads)
    try:
        return core().compile_model(core().read_model(model), "CPU", settings)
    except RuntimeError as err:  # OpenVINO's errors are RuntimeErrors; what went wrong is said last
        cause = f"OpenVINO rejected {name}: {first_line(err, last=True)}"
        raise WorkbenchError(cause, fix or onnx.FIX) from None


def effective_precision(compiled) -> str:
    """The precision OpenVINO says it infers in: ``f32``, ``bf16`` or ``f16``."""
    text = str(compiled.get_property("INFERENCE_PRECISION_HINT")).lower()
    return next((p for p, word in (("bf16", "bfloat16"), ("f16", "float16"), ("f32", "float32")) if word in text), text)


def host_view(t) -> np.ndarray:
    """A writable NumPy array over a TVM host tensor's memory (no copy).

    ``np.from_dlpack`` gives a read-only array, and ``ov.Tensor`` shares only
    writable memory, so the view is made from the same address.
    """
    if str(t.dtype) == "bool":  # NumPy before 1.25 takes no bool through DLPack: the same view, by address
        shape = tuple(int(d) for d in t.shape)
        arr = np.empty(shape, np.bool_) if 0 in shape else None
        if arr is not None:
            return arr
        buf = (ctypes.c_char * int(np.prod(shape, dtype=np.int64))).from_address(t.data_ptr())
        return np.frombuffer(buf, dtype=np.bool_).reshape(shape)
    arr = np.from_dlpack(t)
    if arr.nbytes == 0:
        return np.empty(arr.shape, arr.dtype)
    buf = (ctypes.c_char * arr.nbytes).from_address(arr.ctypes.data)
    return np.frombuffer(buf, dtype=arr.dtype).reshape(arr.shape)


class Runner:
    """A packed function: ``(*inputs, *outputs)`` TVM tensors, outputs written in place."""

    def __init__(self, compiled):
        self.compiled = compiled
        self.request = compiled.create_infer_request()
        self.num_inputs = len(compiled.inputs)
        self._ov = package()
        self._bound: list = [None] * (self.num_inputs + len(compiled.outputs))  # (address, shape) set per port

    def _bind(self, k: int, t) -> None:
        """Share TVM's buffer ``t`` on port ``k``, unless the same buffer is already there."""
        key = (t.data_ptr(), tuple(t.shape))
        if self._bound[k] == key:
            return
        tensor = self._ov.Tensor(host_view(t), shared_memory=True)
        if k < self.num_inputs:
            self.request.set_input_tensor(k, tensor)
        else:
            self.request.set_output_tensor(k - self.num_inputs, tensor)
        self._bound[k] = key

    def __call__(self, *args):
        if any(t.device.dlpack_device_type() != _KDLCPU for t in args):
            return self._through_host(args)
        for k, t in enumerate(args):
            self._bind(k, t)
        phases.mark("inputs")  # sharing is the boundary's whole cost here: no copies
        self.request.infer()
        phases.mark("compute")

    def _through_host(self, args):
        """OpenVINO's CPU plugin reads host memory only: one copy in, one copy out, both timed."""
        ins, outs = args[: self.num_inputs], args[self.num_inputs :]
        self._bound = [None] * len(self._bound)
        feed = [np.asarray(t.numpy(), order="C") for t in ins]
        phases.mark("inputs")
        results = self.request.infer(feed)
        phases.mark("compute")
        for out, port in zip(outs, self.compiled.outputs):
            out.copyfrom(np.asarray(results[port], order="C"))


def compile_subgraph(name: str, func, precision: str = "f32", threads: int | None = None, **options) -> Compiled:
    """Translate ``func`` to ONNX, compile it for the CPU at ``precision`` (OpenVINO's own inference precision,
    f32 unless asked: what its detail says) and register it."""
    model = onnx.translate(func, name)
    data = model.SerializeToString()
    compiled = compile_model(data, name, precision, threads)
    runner = Runner(compiled)
    got = effective_precision(compiled)
    header = (
        f"# openvino {package().__version__.split('-')[0]} on CPU ({core().get_property('CPU', 'FULL_DEVICE_NAME')}), "
        f"inference precision {got}" + (f" (asked {precision})" if got != precision else "") + "\n"
    )
    source = header + onnx.onnx_text(model)
    content = data + precision.encode()
    # What ran, and what was asked where this CPU ran otherwise (bf16 without AVX512-BF16 or AMX runs f32).
    detail = f"CPU, {got}" + (f", {precision} asked: not on this CPU" if got != precision else "")
    return register_packed("openvino", name, runner, content, source, len(compiled.outputs), detail, got)


def whole_model(path, precision: str = "f32"):
    """``run(inputs) -> outputs`` for a whole ONNX file on OpenVINO's CPU plugin (an anchor of ``bench``)."""
    fix = "give the file static shapes first (byoc_workbench.frontends.onnx_import.static_shapes), or skip openvino"
    compiled = compile_model(str(path), str(path), precision, fix=fix)
    request = compiled.create_infer_request()

    def run(inputs):
        result = request.infer(list(inputs))
        return [result[o] for o in compiled.outputs]

    return run


BACKEND = Backend(
    "openvino",
    compile_subgraph,
    "OpenVINO on the CPU from the same ONNX (f32 unless precision= says)",
    onnx.guard_rules,
    native="openvino",
    own_target=functools.partial(onnx.own_target, "openvino"),
    packages=("onnx", "openvino"),
    install="pip install onnx openvino",
    pretty="OpenVINO",
    precisions=PRECISIONS,
    whole_model=whole_model,
    ran_on="openvino (CPU, f32)",
)
