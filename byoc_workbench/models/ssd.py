"""The SSD workflow in a few calls: import a zoo model into Relax, summarise it, run it.

These are the functions behind ``byoc-workbench import ssd --summary`` and
``byoc-workbench run ssd --save-outputs``; the CLI only parses arguments.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from ..errors import WorkbenchError
from . import images, zoo

logger = logging.getLogger(__name__)


class SSDError(WorkbenchError):
    """A request the SSD workflow cannot serve (wrong model kind, unknown backend)."""


@dataclass
class ImportedModel:
    """A zoo model imported into Relax, with where its weights came from."""

    mod: object  # tvm.IRModule
    params: dict
    model: zoo.LoadedModel
    input_shape: tuple

    @property
    def weights_label(self) -> str:
        """See :attr:`byoc_workbench.models.zoo.LoadedModel.weights_label`."""
        return self.model.weights_label


class Detections(dict):
    """``{"ids", "scores", "boxes"}`` numpy arrays (batch axis kept), plus provenance.

    A plain dict for ``numpy.savez(path, **detections)``; ``weights`` and
    ``weights_label`` say whether the weights were trained.
    """

    weights: str = ""
    weights_label: str = ""
    backend: str = ""  # what ran it, e.g. "onnxruntime (CPU) + tvm (llvm) for the rest"
    notes: tuple = ()  # the codegen stage's note per subgraph
    warnings: tuple = ()  # e.g. non-finite outputs (see nonfinite_warning)


def relax_op_counts(mod) -> dict[str, int]:
    """Count the Relax operator calls in ``mod``, most frequent first."""
    from ..draw.profile import profile

    return dict(profile(mod).rows())


def import_model(
    model: str = zoo.DEFAULT_MODEL,
    weights=None,
    input_shape=None,
    bind_params: bool = True,
    loaded: zoo.LoadedModel | None = None,
) -> ImportedModel:
    """Load a zoo model and import it into Relax.

    Parameters
    ----------
    model : str
        A name from :data:`byoc_workbench.models.zoo.MODELS`.
    weights : None, "trained", "untrained" or path
        See :func:`byoc_workbench.models.zoo.load_model`.
    input_shape : tuple, optional
        ``(1, 3, H, W)``; defaults to the model's (512x512 for SSD).
    bind_params : bool
        Bind the weights as constants (True) or keep them as inputs of ``main``.
    loaded : LoadedModel, optional
        An already loaded model, to skip loading.
    """
    from .frontend import from_mxnet

    loaded = loaded or zoo.load_model(model, weights)
    shape = tuple(input_shape or loaded.spec.input_shape)
    graph, params = zoo.symbol_and_params(loaded)
    mod, used = from_mxnet(graph, params, None, {"data": shape}, bind_params=bind_params)
    return ImportedModel(mod, used, loaded, shape)


def import_summary(model: str = zoo.DEFAULT_MODEL, weights=None) -> dict:
    """Import ``model`` and describe the result.

    Returns
    -------
    dict
        ``{"model", "op_count", "ops": {relax op: count}, "params": number of
        scalar weights, "weights": "trained" | "untrained" | path}``.
    """
    imported = import_model(model, weights)
    ops = relax_op_counts(imported.mod)
    return {
        "model": model,
        "op_count": sum(ops.values()),
        "ops": ops,
        "params": int(sum(int(np.prod(a.shape)) for a in imported.params.values())),
        "weights": imported.model.weights,
    }


OUTPUTS = ("ids", "scores", "boxes")


def nonfinite_warning(outputs, loaded, names=OUTPUTS, what: str = "") -> str | None:
    """One line naming the first output holding NaN or infinity and the likely cause, or None.

    Weights that load but are damaged (flipped bits in a ``.params`` file)
    compute such outputs without any error; the run still finishes.
    """
    for name, out in zip(names, outputs):
        out = np.asarray(out)
        if not np.issubdtype(out.dtype, np.floating):
            continue
        bad = ~np.isfinite(out)
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            if loaded.weights == "untrained":
                cause = "the seeded weights overflow: please report it as a bug"
            else:
                cause = f"the weights ({loaded.weights_label}) are likely corrupted, e.g. a damaged .params file"
            return (
                f"{what or loaded.name}: output {name} holds {int(bad.sum())} non-finite values "
                f"(first {out[where]} at {list(where)}); {cause}: fetch it again (byoc-workbench prefetch) "
                "or compare with --weights untrained"
            )
    return None


def _detections(outputs, loaded, backend: str = "", notes=()) -> Detections:
    ids, scores, boxes = (np.asarray(o) for o in outputs)
    result = Detections(ids=ids, scores=scores, boxes=boxes)
    result.weights, result.weights_label = loaded.weights, loaded.weights_label
    result.backend, result.notes = backend, tuple(notes)
    warning = nonfinite_warning((ids, scores, boxes), loaded)
    result.warnings = (warning,) if warning else ()
    if warning:
        logger.warning("%s", warning)
    if not loaded.is_trained:
        logger.warning("detections from %s: %s", loaded.name, loaded.weights_label)
    return result


def offload(
    mod, backend: str = "onnxruntime", prune: bool = True, target: str = "tensorrt", rules=None, options=None
) -> list:
    """The stages of a prepared module (:func:`byoc_workbench.transforms.prepare`) with ``target``'s
    rules, pruned (or not), its subgraphs compiled by ``backend`` (with ``options``); the last stage is codegen."""
    from ..flow import stages
    from ..flow.rules import get_target

    rules = get_target(target).rules if rules is None else rules
    prune_rule = stages.no_mac() if prune else stages.keep_all
    return stages.run_stages(mod, rules, prune_rule, check=False, backend=backend, options=options)


def run(
    model: str = zoo.DEFAULT_MODEL,
    weights=None,
    image=None,
    backend: str = "tvm",
    short: int = 512,
    progress: bool = False,
) -> Detections:
    """Detect objects in one picture with an SSD model.

    Parameters
    ----------
    model : str
        A detection model of the zoo.
    weights : None, "trained", "untrained" or path
        See :func:`byoc_workbench.models.zoo.load_model`.
    image : path, optional
        JPEG or PNG; None for the default picture (:func:`images.default_image_path`).
    backend : "tvm", "mxnet", or a backend of the registry
        ``tvm``: import into Relax, build for ``llvm`` and run in the Relax VM.
        ``mxnet``: run the Gluon block itself (the reference).
        ``onnxruntime``, ``tensorrt``, ``auto``, ``c``, ... : partition with
        upstream's TensorRT rules (those the backend can compile), prune, and
        offload the subgraphs through that backend (``auto``: TensorRT where it
        can run, else ONNX Runtime); TVM runs the rest.
    short : int
        Short side of the resized picture (GluonCV's ``load_test``).
    progress : bool
        Progress bars on the build and the run.

    Returns
    -------
    Detections
        ``ids`` (1, 100, 1), ``scores`` (1, 100, 1), ``boxes`` (1, 100, 4) in the
        resized picture's pixels; rows of -1 are empty. ``backend`` says what ran.
    """
    from ..backends import registry

    try:
        registry.check_backend(backend, also=("mxnet",))
    except WorkbenchError as err:
        raise SSDError(err.cause, err.fix) from None
    if zoo.model_spec(model).kind != "detection":
        detection = [n for n, s in zoo.MODELS.items() if s.kind == "detection"]
        raise SSDError(f"{model} is not a detection model", f"use one of: {', '.join(detection)}")
    if backend == "tensorrt":  # fail in a second, before the model is built and imported
        from ..backends import tensorrt

        tensorrt.check()
    x, _ = images.load_test(image, short=short)
    loaded = zoo.load_model(model, weights)
    if backend == "mxnet":
        import mxnet as mx

        return _detections([o.asnumpy() for o in loaded.block(mx.nd.array(x))], loaded, "mxnet")
    from .. import runner
    from ..transforms import prepare

    imported = import_model(model, input_shape=x.shape, loaded=loaded)
    if backend == "tvm":
        what, notes = imported.mod, ()
    else:
        what = offload(prepare(imported.mod), backend)[-1]
        notes = what.notes
    result = runner.build_and_run(what, [x], repeat=1, warmup=0, label=f"{model} on {backend}", progress=progress)
    return _detections(result.outputs, loaded, result.backend, notes)


def model_workbench(
    model: str | None = None, weights=None, target: str = "tensorrt", prune_rule=None, imported=None, enabled=None
) -> tuple:
    """``(Workbench, ImportedModel)`` for a zoo model, prepared for ``target``'s rules.

    The workbench's titles carry the weights' label when they are untrained;
    ``enabled`` names the rules switched on (all when None).
    """
    from ..flow import stages
    from ..flow.rules import get_target
    from ..session import Workbench
    from ..transforms import prepare

    imported = imported or import_model(model or zoo.DEFAULT_MODEL, weights)
    mark = imported.weights_label if not imported.model.is_trained else ""
    prune_rule = prune_rule or stages.no_mac()
    wb = Workbench(prepare(imported.mod), get_target(target), enabled, prune_rule, mark=mark)
    return wb, imported
