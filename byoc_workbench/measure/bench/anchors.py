"""The whole-model anchors that ``bench`` and ``search`` time beside the offloaded builds.

For a zoo model: MXNet's own hybridized block (static memory), and ONNX
Runtime and OpenVINO (at f32) on the whole model as MXNet's ONNX exporter
writes it, where that exporter takes the model; it makes ``box_nms``
class-agnostic, so their detections differ from TVM's by design. For an ONNX
file: ONNX Runtime and OpenVINO on the file itself. For a PyTorch program:
eager PyTorch. Each maker returns :class:`Anchors`: ``{label: entry}``, ``{label: outputs}``,
``{label: why skipped}``; an anchor that cannot run here is skipped with its
one-line reason, and the others still run.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from byoc_workbench.backends import registry
from byoc_workbench.core.errors import WorkbenchError, first_line
from byoc_workbench.frontends import gluon, onnx_import
from byoc_workbench.measure.time import clock
from byoc_workbench.models import shipped, zoo

logger = logging.getLogger(__name__)

CLASS_AGNOSTIC = "MXNet's ONNX exporter makes box_nms class-agnostic: its detections differ from TVM's by design"
# The backends that run a whole ONNX file as an anchor: those whose record has a whole-model runner.
WHOLE_MODEL = tuple(b.name for b in registry.BUILTIN if b.whole_model is not None)


class Timed(NamedTuple):
    """One anchor run on its own: how long it took, and its outputs."""

    latency: clock.Latency
    outputs: Any


class Runs(NamedTuple):
    """The runtimes ready to run a whole model, by label, and why each of the others cannot."""

    runs: dict[str, Callable[[], Any]]
    skipped: dict[str, str]


class Anchors(NamedTuple):
    """Anchors timed: each one's JSON entry and outputs by label, and why each skipped one could not run."""

    entries: dict[str, dict[str, Any]]
    outputs: dict[str, Any]
    skipped: dict[str, str]


#: Why MXNet's own anchors are missing on a seat without it (MXNet is a cross-check, not a requirement).
NO_MXNET = "mxnet is not installed: MXNet's anchors are a cross-check (Python 3.11, requirements-mxnet.txt)"


def mxnet_anchor(block, x, repeat: int, progress: bool = True, max_seconds: float | None = None) -> Timed:
    """:class:`Timed` (latency, outputs) of the Gluon block itself, hybridized with static memory."""
    import mxnet as mx

    block.hybridize(static_alloc=True, static_shape=True)
    data = mx.nd.array(x)
    out: list = [None]

    def once():
        got = block(data)  # one array (pose, classifiers) or a tuple (detectors, segmentation)
        out[0] = [o.asnumpy() for o in (got if isinstance(got, (list, tuple)) else [got])]  # waits for MXNet

    return Timed(clock.measure(once, repeat, 2, "run mxnet", progress, max_seconds), out[0])


def export_onnx(loaded: zoo.LoadedModel, shape, path: str | os.PathLike) -> Path:
    """The whole model as MXNet's own ONNX exporter (``mx.onnx.export_model``) wrote it where the zoo was
    shipped (:meth:`~byoc_workbench.models.shipped.ShippedModel.onnx`), with ``loaded``'s weights: no MXNet
    needed here."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load_from_string(shipped.read_shipped(loaded.name).onnx(shape))
    inputs = {i.name for i in model.graph.input}
    weights = [numpy_helper.from_array(np.asarray(v, "float32"), k) for k, v in loaded.params.items() if k in inputs]
    model.graph.initializer.extend(weights)
    onnx.save(model, str(path))
    return Path(path)


@contextlib.contextmanager
def whole_model_runs(path, inputs, backends=WHOLE_MODEL):
    """Yields :class:`Runs` (``{label: run}``, ``{label: why skipped}``): each of ``backends`` ready to run a
    whole ONNX file.

    ``run()`` runs the file once on ``inputs`` and returns its outputs. Labels
    are ``<backend>_whole_model``. ONNX Runtime runs with the backend's own
    session options; OpenVINO at f32 (it would silently run bf16 on CPUs that have
    it). Both get the file with its inputs fixed at the shapes of ``inputs`` and its
    shape arithmetic folded (:func:`byoc_workbench.frontends.onnx_import.static_shapes`):
    OpenVINO's CPU plugin cannot compile the dynamic anchor slices of MXNet's SSD
    export, and ONNX Runtime folds the same arithmetic itself anyway. A backend
    that is not installed, or that rejects the file, is skipped with its one-line reason.
    """
    runs, skipped = {}, {}
    with tempfile.TemporaryDirectory(prefix="byoc-anchor-") as tmp:
        folded = _static(path, inputs, Path(tmp) / Path(path).name)
        for backend in backends:
            label = f"{backend}_whole_model"
            try:
                run = registry.DEFAULT.backends[backend].whole_model(folded)
            except WorkbenchError as err:
                skipped[label] = err.line
                continue
            runs[label] = functools.partial(run, inputs)
        yield Runs(runs, skipped)


def whole_model_anchors(
    path, inputs, repeat: int, progress: bool = True, max_seconds: float | None = None, backends=WHOLE_MODEL
) -> Anchors:
    """:class:`Anchors` (``{label: entry}``, ``{label: outputs}``, ``{label: why skipped}``) of each of
    ``backends`` on a whole ONNX file, timed (see :func:`whole_model_runs`)."""
    with whole_model_runs(path, inputs, backends) as (runs, skipped):
        return Anchors(*_timed(runs, repeat, f" on {Path(path).name}", progress, max_seconds), skipped)


def _ran_on(backend: str) -> str:
    """Where ``backend``'s whole-model anchor runs, as its record says it: ``openvino (CPU, f32)``."""
    return registry.DEFAULT.backends[backend].ran_on


def _timed(runs: dict, repeat: int, where: str, progress: bool = True, max_seconds: float | None = None) -> tuple:
    """``({label: entry}, {label: outputs})``: each of :func:`whole_model_runs`' runs timed; ``where`` ends
    each entry's ``ran_on``."""
    entries, outputs = {}, {}
    for label, run in runs.items():
        out: list = [None]

        def once(run=run, out=out):
            out[0] = run()

        backend = label.removesuffix("_whole_model")
        lat = clock.measure(once, repeat, 2, f"run {backend} whole model", progress, max_seconds)
        entries[label] = lat.to_json() | {"ran_on": _ran_on(backend) + where}
        outputs[label] = out[0]
    return entries, outputs


def _static(path, inputs, to: Path) -> Path:
    """The ONNX file at ``path`` with its real inputs fixed at the shapes of ``inputs``, folded, its weights
    constants (not graph inputs), saved at ``to``."""
    import onnx

    model = onnx.load(str(path))
    names = list(onnx_import.graph_inputs(model))
    try:
        folded = onnx_import.static_shapes(model, {n: list(np.shape(x)) for n, x in zip(names, inputs)})
    except WorkbenchError as err:  # the backends then get the file as it is, and say what they make of it
        logger.warning("%s kept as it is: %s", path, err.cause)
        return Path(path)
    # MXNet's exporter lists every weight among the graph's inputs, and an input may change at run time, so
    # ONNX Runtime would keep each batch norm apart from its convolution: the weights are constants here.
    weights = {t.name for t in folded.graph.initializer}
    real = [v for v in folded.graph.input if v.name not in weights]
    del folded.graph.input[:]
    folded.graph.input.extend(real)
    onnx.save(folded, str(to))
    return to


def export_anchors(loaded, x, repeat: int, progress: bool = True, max_seconds: float | None = None) -> Anchors:
    """:class:`Anchors`: :func:`whole_model_anchors` on MXNet's
    own ONNX export of ``loaded`` (:func:`export_onnx`), each anchor skipped with why where the exporter
    or a runtime refuses the model."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            path = export_onnx(loaded, x.shape, Path(tmp) / f"{loaded.name}.onnx")
            return whole_model_anchors(path, [x], repeat, progress, max_seconds)
        except clock.OverBudget:
            raise  # the user's bound
        except Exception as err:  # MXNet's exporter and the runtimes refuse ops in their own ways
            why = f"MXNet's ONNX export of {loaded.name} does not run: {first_line(err)}"
            return Anchors({}, {}, {f"{backend}_whole_model": why for backend in WHOLE_MODEL})


def zoo_anchors(
    loaded, x, repeat: int, progress: bool = True, max_seconds: float | None = None, opened: Runs | None = None
) -> Anchors:
    """:class:`Anchors` of a zoo model: MXNet's own block
    (:func:`mxnet_anchor`) and the runtimes on its ONNX export (:func:`export_anchors`, or ``opened``: what
    :func:`subject_runs` yielded). A detector's exported anchors carry a ``note``: their NMS is class-agnostic."""
    entries, outputs, skipped = {}, {}, {}
    if gluon.has_mxnet():
        lat, outputs["mxnet"] = mxnet_anchor(loaded.block(), x, repeat, progress, max_seconds)
        entries["mxnet"] = lat.to_json() | {"ran_on": "mxnet (hybridized, static_alloc)"}
    else:
        skipped["mxnet"] = NO_MXNET
    if opened is None:
        found, more, also = export_anchors(loaded, x, repeat, progress, max_seconds)
    else:
        found, more = _timed(opened.runs, repeat, "", progress, max_seconds)
        also = opened.skipped
    skipped.update(also)
    for label, entry in found.items():
        entries[label] = entry | {"ran_on": f"{_ran_on(label.removesuffix('_whole_model'))}, MXNet's ONNX export"}
        if loaded.spec.task == "detection":
            entries[label]["note"] = CLASS_AGNOSTIC
        outputs[label] = more[label]
    return Anchors(entries, outputs, skipped)


def own_anchors(model, repeat: int, progress: bool = True, max_seconds: float | None = None) -> Anchors:
    """:class:`Anchors` of your own model
    (:class:`~byoc_workbench.frontends.own.OwnModel`): the runtimes on its ONNX file, or eager PyTorch."""
    if model.path is not None:  # an ONNX file's
        return whole_model_anchors(model.path, model.inputs, repeat, progress, max_seconds)
    out: list = [None]

    def once():
        out[0] = model.reference(model.inputs)

    lat = clock.measure(once, repeat, 2, "run eager pytorch", progress, max_seconds)
    return Anchors({"pytorch_eager": lat.to_json() | {"ran_on": "eager PyTorch (CPU)"}}, {"pytorch_eager": out[0]}, {})


def subject_anchors(subject, repeat: int, opened: Runs) -> Anchors:
    """:class:`Anchors`: the whole-model anchors of a :class:`~byoc_workbench.subjects.Subject` whose
    :attr:`source` is a zoo model or an ONNX file, timed on ``opened`` (what :func:`subject_runs` yielded,
    which the search's finals time again)."""
    if subject.onnx_file is not None:
        return Anchors(*_timed(opened.runs, repeat, f" on {subject.onnx_file.name}", False), opened.skipped)
    return zoo_anchors(subject.loaded, subject.inputs[0], repeat, False, opened=opened)


@contextlib.contextmanager
def subject_runs(subject):
    """Yields :class:`Runs` (``{label: run}``, ``{label: why skipped}``): the whole-model runtimes of a
    :class:`~byoc_workbench.subjects.Subject`, ready to run (a zoo model on MXNet's own ONNX export,
    an ONNX file as it is), for the search to time beside its finalists, round after round."""
    if subject.onnx_file is not None:
        with whole_model_runs(subject.onnx_file, subject.inputs) as found:
            yield found
        return
    loaded, x = subject.loaded, subject.inputs[0]
    with tempfile.TemporaryDirectory() as tmp:
        try:
            path = export_onnx(loaded, x.shape, Path(tmp) / f"{loaded.name}.onnx")
        except Exception as err:  # noqa: BLE001 - MXNet's exporter refuses ops in its own ways
            why = f"MXNet's ONNX export of {loaded.name} does not run: {first_line(err)}"
            yield Runs({}, {f"{backend}_whole_model": why for backend in WHOLE_MODEL})
            return
        with whole_model_runs(path, [x]) as found:
            yield found
