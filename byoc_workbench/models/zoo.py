"""GluonCV models with their weights: trained (downloaded), a local file, or seeded; no MXNet needed.

A model's graph is the symbol the package ships (:mod:`.shipped`, written by ``tools/ship_zoo.py``
where MXNet is). Its weights come from one of three places, recorded in :attr:`LoadedModel.weights`:

* ``"trained"``: GluonCV's own download, cached (see :mod:`.weights`), read by the workbench's
  own reader of MXNet's file format (:mod:`byoc_workbench.frontends.mxnet_params`);
* a path: a ``.params`` file as written by ``Block.save_parameters``;
* ``"untrained"``: a deterministic seeded initialisation, for offline use (see
  :mod:`.seeded`), regenerated from the seed and checked. Every result built from it must say
  "untrained weights" (see :attr:`LoadedModel.weights_label`).

Where MXNet is (the ``mxnet`` extra), a Gluon block can still be built, seeded and traced
(:func:`build_block`, ``load_model(block=...)``): the cross-check of all of the above.

This module loads; :mod:`.weights` holds the specs, the cache and the download,
:mod:`.seeded` the initialisation, and :mod:`byoc_workbench.frontends.gluon` the tracing. The
names the CLI and notebooks use (``MODELS``, ``DEFAULT_MODEL``, ``model_spec``,
``weights_dir``, ``prefetch``) are re-exported here.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from byoc_workbench.core import output_paths
from byoc_workbench.core.errors import MissingDependencyError, WorkbenchError, first_line
from byoc_workbench.frontends import MXNetImportError, from_mxnet, gluon
from byoc_workbench.frontends.mxnet_params import read_params
from byoc_workbench.models import shipped
from byoc_workbench.models.gluoncv_import import import_gluoncv
from byoc_workbench.models.seeded import seeded_init
from byoc_workbench.models.shipped import ShippedError
from byoc_workbench.models.weights import (
    CACHE_ENV,
    DEFAULT_MODEL,
    MODELS,
    REPO_ENV,
    TASKS,
    DownloadError,
    ModelSpec,
    UnknownModelError,
    WeightsError,
    ZooError,
    cached_weights,
    check_cache,
    download_weights,
    model_spec,
    params_file_name,
    prefetch,
    weights_dir,
    weights_url,
)

__all__ = [
    "CACHE_ENV",
    "DEFAULT_MODEL",
    "MODELS",
    "REPO_ENV",
    "DownloadError",
    "ImportedModel",
    "LoadedModel",
    "MissingDependencyError",
    "ModelImportError",
    "ModelSpec",
    "UnknownModelError",
    "WeightsError",
    "ZooError",
    "build_block",
    "weights_dir",
    "cached_weights",
    "check_cache",
    "download_weights",
    "import_model",
    "load_model",
    "load_params_file",
    "model_spec",
    "params_file_name",
    "prefetch",
    "seeded_init",
    "symbol_and_params",
    "TASKS",
    "weights_url",
]

logger = logging.getLogger(__name__)

UNTRAINED_LABEL = "untrained weights"


@dataclass
class LoadedModel:
    """A zoo model's graph and weights, and where the weights came from.

    Attributes
    ----------
    name : str
    graph : dict
        The MXNet symbol as JSON: the shipped one (:mod:`.shipped`), or traced from a Gluon block.
    params : dict
        The weights the graph reads, by parameter name, as numpy arrays.
    weights : str
        ``"trained"``, ``"untrained"`` or the path of the ``.params`` file used.
    spec : ModelSpec
    seed : int or None
        The seed of an untrained initialisation.
    input_shape : tuple
        ``(1, 3, H, W)`` the model runs at. A segmentation model's graph is traced for it; seeded weights are
        calibrated at the model's own size (:attr:`ModelSpec.input_shape`) whatever this is.
    classes : tuple
        What the model tells apart (ImageNet's classes for a classifier).
    inputs : tuple
        The graph's data inputs, in call order.
    """

    name: str
    graph: dict
    params: dict
    weights: str
    spec: ModelSpec
    seed: int | None = None
    input_shape: tuple = ()  # what it was built and calibrated for; the spec's by default
    classes: tuple = ()
    inputs: tuple = ("data",)

    def __post_init__(self):
        self.input_shape = tuple(self.input_shape or self.spec.input_shape)

    @property
    def is_trained(self) -> bool:
        """False only for the seeded initialisation."""
        return self.weights != "untrained"

    @property
    def weights_label(self) -> str:
        """Short text to show on every table or picture made from this model."""
        if self.weights == "untrained":
            return f"{UNTRAINED_LABEL} (seed {self.seed})"
        if self.weights == "trained":
            return "trained weights (GluonCV)"
        return f"weights from {self.weights}"

    @gluon.quiet_mxnet
    def block(self):
        """The model as an MXNet ``SymbolBlock`` with these weights, hybridized: MXNet's own run, the
        cross-check of everything the workbench does without it (needs mxnet)."""
        return gluon.symbol_block(self.graph, self.inputs, self.params)


def build_block(name: str, input_shape=None):
    """The GluonCV network of ``name``, built with no weights (nothing is downloaded; needs mxnet and gluoncv).

    A segmentation model fixes its upsampling to its input size when it is built, so it
    is built for ``input_shape`` (default: the model's own, :attr:`ModelSpec.input_shape`).
    """
    spec = model_spec(name)
    mx = gluon.import_mxnet()  # first, so that a missing mxnet is named as such, not as a broken gluoncv
    model_zoo = import_gluoncv("gluoncv.model_zoo", gluon.INSTALL_FIX)
    # Classification nets take no pretrained_base argument.
    kwargs = {} if spec.task == "classification" else {"pretrained_base": False}
    if spec.task == "segmentation":
        height, width = (input_shape or spec.input_shape)[2:]
        kwargs.update(height=height, width=width, crop_size=height)
    # Gluon numbers blocks per process (ssd0_, ssd1_, ...); a fresh name scope keeps a model's node
    # names, and so the diagrams' node and block ids, the same however many models came before.
    with mx.name.NameManager():
        return model_zoo.get_model(name, pretrained=False, **kwargs)


def _weights_file(path: str | os.PathLike) -> Path:
    """``path`` if it is a file, else a one-line error (checked before the model is built)."""
    if not str(path).strip():
        raise WeightsError("The weights path is empty", "pass trained, untrained, or the path of a .params file")
    path = Path(path)
    if path.is_dir():
        raise WeightsError(f"Weights file {path} is a directory", "pass the path of a .params file in it")
    if not path.is_file():
        raise WeightsError(f"Weights file {path} {output_paths.not_a_file(path)}", "pass the path of a .params file")
    return path


def load_params_file(model: shipped.ShippedModel, path: str | os.PathLike) -> dict[str, np.ndarray]:
    """The graph's weights from a GluonCV ``.params`` file (read without MXNet), with one-line errors for bad files."""
    path = _weights_file(path)
    try:
        return model.from_file(read_params(path), str(path))
    except WorkbenchError as err:
        raise WeightsError(f"Cannot load {path} into {model.name} ({err.cause})", err.fix) from None


def load_model(
    name: str = DEFAULT_MODEL,
    weights: str | os.PathLike | None = None,
    cache: str | os.PathLike | None = None,
    seed: int = 0,
    input_shape=None,
    block=None,
) -> LoadedModel:
    """A zoo model's graph with its weights: the shipped graph (no MXNet), or ``block``'s.

    Parameters
    ----------
    name : str
        One of :data:`MODELS`.
    weights : {None, "trained", "untrained"} or path
        None: the cached trained weights if present, else untrained (logged).
        "trained": cached or downloaded, else :class:`DownloadError`.
        "untrained": the seeded initialisation of ``seed`` (:mod:`.seeded`). A path: that ``.params`` file.
    cache : path, optional
        See :func:`weights_dir`.
    seed : int
    input_shape : tuple, optional
        ``(1, 3, H, W)``; the model's own (:attr:`ModelSpec.input_shape`) by default. A segmentation
        model at another size, another seed than the shipped one, or a ``block`` given, needs MXNet.
    block : mxnet.gluon.HybridBlock, optional
        ``name``'s network as :func:`build_block` gives it, perhaps reconfigured (fewer proposals, say).

    Returns
    -------
    LoadedModel
    """
    spec = model_spec(name)
    if weights not in (None, "trained", "untrained"):
        _weights_file(weights)  # a wrong path fails in a second, before anything is read
    shape = tuple(input_shape or spec.input_shape)
    found = None
    if weights is None:
        found = cached_weights(name, cache)
        weights = "trained" if found else "untrained"
        if not found:
            logger.warning("no trained weights for %s in %s; using %s", name, weights_dir(cache), UNTRAINED_LABEL)
    ship = shipped.read_shipped(name)
    path = None  # seeded
    if weights == "trained":
        path = found or download_weights(name, cache)
    elif weights != "untrained":
        path = weights
    if block is not None or _needs_mxnet(ship, spec, shape, weights, seed):
        graph, params, inputs = _from_block(name, block, path, seed, shape)
    elif path is None:
        graph, params, inputs = ship.graph, ship.seeded_weights(seed), ship.inputs
    else:
        graph, params, inputs = ship.graph, load_params_file(ship, path), ship.inputs
    label = os.fspath(weights) if weights not in ("trained", "untrained") else weights
    kept_seed = seed if weights == "untrained" else None
    return LoadedModel(name, graph, params, label, spec, kept_seed, shape, ship.classes, inputs)


def _needs_mxnet(ship: shipped.ShippedModel, spec: ModelSpec, shape, weights, seed: int) -> bool:
    """What the shipped model cannot give: a segmentation model traced at another size, another seed."""
    other_size = spec.task == "segmentation" and tuple(shape) != tuple(ship.input_shape)
    other_seed = weights == "untrained" and (ship.seeded or {}).get("seed") != seed
    if (other_size or other_seed) and not gluon.has_mxnet():
        what = f"input {shape}" if other_size else f"seed {seed}"
        raise ShippedError(
            f"{ship.name} ships at input {ship.input_shape} with seed {(ship.seeded or {}).get('seed')}, not {what}",
            "use its own size and seed 0, or MXNet (the mxnet extra, Python 3.11) to build it again",
        )
    return other_size or other_seed


class Traced(NamedTuple):
    """A Gluon block's graph, the weights it reads, and its data inputs."""

    graph: dict
    params: dict
    inputs: tuple


@gluon.quiet_mxnet
def _from_block(name: str, block, path, seed: int, shape) -> Traced:
    """The MXNet way: build (or take) the Gluon block, seed it (``path`` None) or load ``path``, and trace it."""
    block = block if block is not None else build_block(name, shape)
    if path is None:
        seeded_init(block, seed, shape)
    else:
        try:
            block.load_parameters(str(_weights_file(path)), allow_missing=False, ignore_extra=False)
        except Exception as err:  # mxnet raises MXNetError, AssertionError or ValueError
            raise WeightsError(
                f"Cannot load {path} into {name} ({first_line(err, last=True, limit=200)})",
                f"pass a .params file saved from GluonCV's {name} (Block.save_parameters), or weights='untrained'",
            ) from None
    traced = gluon.trace(block, [shape])
    return Traced(traced.graph, traced.params(), tuple(traced.inputs))


@dataclass
class ImportedModel:
    """A zoo model imported into Relax, with where its weights came from."""

    mod: object  # tvm.IRModule
    params: dict
    model: LoadedModel
    input_shape: tuple

    @property
    def weights_label(self) -> str:
        """See :attr:`LoadedModel.weights_label`."""
        return self.model.weights_label


class ModelImportError(ZooError):
    """A zoo model the importer refuses; the message names the model and the op."""


def import_model(
    model: str = DEFAULT_MODEL,
    weights=None,
    input_shape=None,
    bind_params: bool = True,
    loaded: LoadedModel | None = None,
) -> ImportedModel:
    """Load a zoo model and import it into Relax with :func:`~byoc_workbench.frontends.from_gluon`.

    Parameters
    ----------
    model : str
        A name from :data:`MODELS`.
    weights : None, "trained", "untrained" or path
        See :func:`load_model`.
    input_shape : tuple, optional
        ``(1, 3, H, W)``; defaults to the loaded model's.
    bind_params : bool
        Bind the weights as constants (True) or keep them as inputs of ``main``.
    loaded : LoadedModel, optional
        An already loaded model, to skip loading.

    Raises
    ------
    ModelImportError
        One line naming the model and what stopped the importer (the ops it lacks).
    """
    # Only a segmentation model must be built for the input size; the others keep the weights
    # seeded at their own size, the same whatever size they are imported at.
    built_for = input_shape if model_spec(model if loaded is None else loaded.name).task == "segmentation" else None
    loaded = loaded or load_model(model, weights, input_shape=built_for)
    shape = tuple(input_shape or loaded.input_shape)
    try:
        mod, used = from_mxnet(loaded.graph, loaded.params, None, {loaded.inputs[0]: shape}, bind_params=bind_params)
    except MXNetImportError as err:
        raise ModelImportError(f"{loaded.name}: {err.cause}", err.fix) from err
    return ImportedModel(mod, used, loaded, shape)


def symbol_and_params(model: LoadedModel) -> tuple[dict, dict]:
    """The model's MXNet graph (symbol JSON as a dict) and its parameters as numpy arrays."""
    return model.graph, model.params
