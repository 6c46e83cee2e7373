"""The ``tensorrt`` backend: each subgraph's ONNX becomes a TensorRT engine.

Built with TensorRT's own ONNX parser and builder (the Python API of
TensorRT 10 and later), with a workspace limit and a timing cache. Cold
builds take tens of seconds, so engines are cached on disk, keyed by a hash
of the ONNX, the TensorRT version and the GPU, and sealed as every cache entry is
(:func:`byoc_workbench.core.files.trusted`): a damaged or foreign engine is built again, never run. At run
time the engine reads and writes the device buffers TVM passes in, on TVM's stream.

FP16 is written into the graph (float16 weights and casts, see
:func:`byoc_workbench.backends.onnx.translate`): TensorRT 11 removed the
builder's FP16 flag, and its networks are always strongly typed.

TensorRT needs an NVIDIA GPU. Where TensorRT or the GPU is missing, every
entry point raises one WorkbenchError naming what is missing and the fix.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import tvm
import tvm_ffi

from byoc_workbench.backends import onnx
from byoc_workbench.backends.base import Backend, Compiled, register_packed
from byoc_workbench.core import files, ir_types
from byoc_workbench.core.errors import WorkbenchError, import_optional

logger = logging.getLogger(__name__)

WORKSPACE_BYTES = 1 << 30
ELSEWHERE = "or choose backend onnxruntime or auto"
_KDLCUDA = 2


def engine_dir() -> Path:
    """Where engines are cached: ``$BYOC_WORKBENCH_CACHE/engines``, else ``~/.cache/byoc-workbench/engines``."""
    return files.cache_dir("engines")


def _trusted_bytes(path: Path, cache: str) -> bytes | None:
    """The entry's bytes when its seal proves it whole and its own (:func:`files.trusted`, which says a damaged
    one once); else None, as under ``BYOC_WORKBENCH_NO_CACHE=1``. A FIFO or a device is never a trusted entry, so it
    is never waited on or read."""
    if files.no_cache() or not files.trusted(path, cache):
        return None
    try:
        return path.read_bytes()
    except OSError:  # replaced or removed since it was checked
        return None


def _keep(path: Path, data: bytes) -> None:
    files.keep("engines", lambda: files.write_sealed(path, data))


def _trt():
    # OSError too: the bindings can import while TensorRT's libraries are missing (libnvonnxparser).
    return import_optional("tensorrt", f"pip install .[tensorrt] on a machine with an NVIDIA GPU, {ELSEWHERE}")


def _gpu() -> tvm.runtime.Device:
    dev = tvm.cuda(0)
    if not dev.exist:
        raise WorkbenchError(
            "TensorRT needs an NVIDIA GPU, and none is visible.",
            f"run on a machine with an NVIDIA GPU and its driver, {ELSEWHERE}.",
        )
    return dev


class _Logger:
    """TensorRT's logger, created once: TensorRT wants a single logger per process."""

    instance = None

    @classmethod
    def get(cls, trt):
        if cls.instance is None:
            cls.instance = trt.Logger(trt.Logger.WARNING)
        return cls.instance


class Installed(NamedTuple):
    """What :func:`tensorrt_and_gpu` found: the ``tensorrt`` module and the GPU device it builds for."""

    trt: object
    dev: tvm.runtime.Device


def tensorrt_and_gpu() -> Installed:
    """``(tensorrt module, GPU device)``, or the one-line error saying what is missing."""
    trt = _trt()
    return Installed(trt, _gpu())


def missing() -> WorkbenchError | None:
    """Why the tensorrt backend cannot run here (its ``cause`` and ``fix``), or None when it can."""
    try:
        tensorrt_and_gpu()
    except WorkbenchError as err:
        return err
    return None


def _builder(trt):
    try:
        return trt.Builder(_Logger.get(trt))
    except TypeError:  # "factory function returned nullptr" after a CUDA initialization failure
        raise WorkbenchError(
            "TensorRT could not start: CUDA initialization failed (no usable NVIDIA GPU or driver).",
            f"check nvidia-smi and the driver, {ELSEWHERE}.",
        ) from None


def build_engine(trt, model: bytes, name: str, workspace: int = WORKSPACE_BYTES) -> bytes:
    """A serialized engine (plan) for an ONNX model; the timing cache is shared across builds."""
    builder = _builder(trt)
    flags = 0
    strongly_typed = getattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED", None)
    if strongly_typed is not None:  # TensorRT 10: keep the graph's own float16/float32 casts
        flags |= 1 << int(strongly_typed)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, _Logger.get(trt))
    if not parser.parse(model):
        errors = "; ".join(str(parser.get_error(i)).strip().replace("\n", " ") for i in range(parser.num_errors))
        raise WorkbenchError(f"TensorRT's ONNX parser rejected {name}: {errors}.", onnx.FIX + ".")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, workspace)
    config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
    timing_path = engine_dir() / f"timing-{trt.__version__}.cache"
    timing = config.create_timing_cache(_trusted_bytes(timing_path, "TensorRT timing cache") or b"")
    config.set_timing_cache(timing, ignore_mismatch=True)
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise WorkbenchError(
            f"TensorRT could not build an engine for {name} (see TensorRT's log above).",
            f"raise the workspace limit or switch off the rules that offload the failing layers, {ELSEWHERE}.",
        )
    _keep(timing_path, bytes(config.get_timing_cache().serialize()))
    return bytes(plan)


class Engine(NamedTuple):
    """A serialized TensorRT engine, the file it is cached in, and whether it came from the cache."""

    plan: bytes
    path: Path
    was_cached: bool


def cached_engine(trt, dev, model: bytes, name: str, workspace: int = WORKSPACE_BYTES) -> Engine:
    """``(plan, path, was_cached)``: the engine from the disk cache, built and stored on a miss."""
    key = hashlib.sha256(
        b"|".join([model, trt.__version__.encode(), dev.device_name.encode(), str(dev.compute_version).encode()])
    ).hexdigest()[:20]
    return cached(engine_dir() / f"{name}-{key}.engine", lambda: build_engine(trt, model, name, workspace))


def cached(path: Path, build: Callable[[], bytes]) -> Engine:
    """The engine kept at ``path`` when the cache can trust it, else ``build()``'s, kept sealed for next time.

    The cache's part apart from TensorRT's: ``build`` is what makes the plan.
    """
    plan = _trusted_bytes(path, "engine cache")
    if plan is not None:
        return Engine(plan, path, True)
    plan = build()
    _keep(path, plan)  # atomically, then sealed: a concurrent reader never trusts half an engine
    return Engine(plan, path, False)


class Runner:
    """A packed function running an engine on ``(*inputs, *outputs)`` TVM tensors.

    GPU tensors are used in place on TVM's current stream. CPU tensors (a VM
    built for llvm) go through device buffers allocated once.
    """

    def __init__(self, trt, dev, plan: bytes, inputs: list, outputs: list):
        self._ffi = tvm_ffi
        self.dev = dev
        self.runtime = trt.Runtime(_Logger.get(trt))
        self.engine = self.runtime.deserialize_cuda_engine(plan)
        self.context = self.engine.create_execution_context()
        self.names = list(inputs) + list(outputs)
        self.num_inputs = len(inputs)
        self._staging = None

    def __call__(self, *args):
        on_device = all(t.device.dlpack_device_type() == _KDLCUDA for t in args)
        buffers = args if on_device else self._stage(args)
        for name, t in zip(self.names, buffers):
            self.context.set_tensor_address(name, t.data_ptr())
        stream = self._ffi.get_raw_stream(buffers[0].device)
        if not self.context.execute_async_v3(stream):
            raise RuntimeError("TensorRT's execute_async_v3 failed; see TensorRT's log")
        if not on_device:
            self.dev.sync()
            for out, staged in zip(args[self.num_inputs :], buffers[self.num_inputs :]):
                staged.copyto(out)

    def _stage(self, args) -> list:
        if self._staging is None:
            self._staging = [tvm.runtime.empty(t.shape, t.dtype, self.dev) for t in args]
        for host, staged in zip(args[: self.num_inputs], self._staging):
            staged.copyfrom(host)
        return self._staging

    def layers(self) -> list:
        """The engine's layers, as TensorRT's inspector reports them."""
        trt = _trt()
        info = self.engine.create_engine_inspector().get_engine_information(trt.LayerInformationFormat.JSON)
        return json.loads(info).get("Layers", [])


def check_static(name: str, func) -> None:
    """A one-line error unless every input and output of ``func`` has a static shape.

    An engine built from an ONNX graph with dynamic dimensions needs an
    optimisation profile (the range of shapes it serves); this backend builds
    engines for one shape, so a symbolic batch ``n`` goes to ONNX Runtime instead.
    """
    ret = func.ret_ty
    types = [(p.name, p.ty) for p in func.params] + [
        ("output", t) for t in (ret.fields if hasattr(ret, "fields") else [ret])
    ]
    dynamic = [f"{n} {ir_types.type_str(t)}" for n, t in types if not ir_types.is_static(t)]
    if dynamic:
        raise WorkbenchError(
            f"{name}: a TensorRT engine for dynamic shapes ({', '.join(dynamic)}) needs an optimisation profile, "
            "which this backend does not build",
            f"give main's inputs static shapes, {ELSEWHERE} (ONNX Runtime runs dynamic shapes)",
        )


def compile_subgraph(name: str, func, fp16: bool = False, workspace: int = WORKSPACE_BYTES, **options) -> Compiled:
    """Translate ``func`` to ONNX, build (or load) its engine and register it as a packed function."""
    check_static(name, func)
    trt, dev = tensorrt_and_gpu()
    model = onnx.translate(func, name, fp16=fp16)
    data = model.SerializeToString()
    plan, path, was_cached = cached_engine(trt, dev, data, name, workspace)
    inputs = [i.name for i in model.graph.input]
    outputs = [o.name for o in model.graph.output]
    runner = Runner(trt, dev, plan, inputs, outputs)
    layers = runner.layers()
    header = [
        f"# TensorRT {trt.__version__} engine on {dev.device_name}, {'fp16' if fp16 else 'fp32'}, "
        f"{'from the cache' if was_cached else 'built'}: {path}",
        f"# {len(layers)} layers:",
    ]
    body = [f"#   {layer.get('Name', layer) if isinstance(layer, dict) else layer}" for layer in layers]
    source = "\n".join(header + body) + "\n\n" + onnx.onnx_text(model)
    detail = f"{dev.device_name}, {'fp16' if fp16 else 'fp32'}"  # what every table's label says ran it
    return register_packed("tensorrt", name, runner, path.name.encode(), source, len(outputs), detail)


BACKEND = Backend(
    "tensorrt",
    compile_subgraph,
    "TensorRT engines from the same ONNX (NVIDIA GPU)",
    onnx.guard_rules,
    packages=("onnx", "tensorrt"),
    install="pip install .[tensorrt] on a machine with an NVIDIA GPU",
    missing=missing,  # installed, it needs a GPU too
    pretty="TensorRT",
)
