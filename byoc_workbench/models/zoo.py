"""GluonCV models with their weights: trained (downloaded), a local file, or seeded.

Weights come from one of three places, recorded in :attr:`LoadedModel.weights`:

* ``"trained"``: GluonCV's own download, cached (see :mod:`.weights`);
* a path: a ``.params`` file as written by ``Block.save_parameters``;
* ``"untrained"``: a deterministic seeded initialisation, for offline use (see
  :mod:`.seeded`). Every result built from it must say "untrained weights"
  (see :attr:`LoadedModel.weights_label`).

This module loads; :mod:`.weights` holds the specs, the cache and the download,
:mod:`.seeded` the initialisation, and :mod:`.frontend.gluon` the tracing. The
names the CLI and notebooks use (``MODELS``, ``DEFAULT_MODEL``, ``model_spec``,
``cache_dir``, ``prefetch``) are re-exported here. mxnet and gluoncv are imported
inside the functions that need them, so this module imports on any Python.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import MissingDependencyError, first_line
from .frontend import gluon
from .gluoncv_import import import_gluoncv
from .seeded import seeded_init
from .weights import (
    CACHE_ENV,
    DEFAULT_MODEL,
    MODELS,
    REPO_ENV,
    DownloadError,
    ModelSpec,
    UnknownModelError,
    WeightsError,
    ZooError,
    cache_dir,
    cached_weights,
    download_weights,
    model_spec,
    params_file_name,
    prefetch,
    weights_url,
)

__all__ = [
    "CACHE_ENV",
    "DEFAULT_MODEL",
    "MODELS",
    "REPO_ENV",
    "DownloadError",
    "LoadedModel",
    "MissingDependencyError",
    "ModelSpec",
    "UnknownModelError",
    "WeightsError",
    "ZooError",
    "build_block",
    "cache_dir",
    "cached_weights",
    "download_weights",
    "load_model",
    "load_params_file",
    "model_spec",
    "params_file_name",
    "prefetch",
    "seeded_init",
    "symbol_and_params",
    "weights_url",
]

logger = logging.getLogger(__name__)

UNTRAINED_LABEL = "untrained weights"


@dataclass
class LoadedModel:
    """A Gluon block and the provenance of its weights.

    Attributes
    ----------
    name : str
    block : mxnet.gluon.HybridBlock
        Initialised and hybridized.
    weights : str
        ``"trained"``, ``"untrained"`` or the path of the ``.params`` file used.
    spec : ModelSpec
    seed : int or None
        The seed of an untrained initialisation.
    """

    name: str
    block: object
    weights: str
    spec: ModelSpec
    seed: int | None = None

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


def build_block(name: str):
    """The GluonCV network of ``name``, built with no weights (nothing is downloaded)."""
    spec = model_spec(name)
    mx = gluon.import_mxnet()  # first, so that a missing mxnet is named as such, not as a broken gluoncv
    model_zoo = import_gluoncv("gluoncv.model_zoo", gluon.INSTALL_FIX)
    # Classification nets take no pretrained_base argument.
    kwargs = {"pretrained_base": False} if spec.kind == "detection" else {}
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
        raise WeightsError(f"Weights file {path} does not exist", "pass the path of a .params file")
    return path


def load_params_file(block, path: str | os.PathLike, name: str = "model") -> None:
    """Load a ``Block.save_parameters`` file, with one-line errors for bad files."""
    path = _weights_file(path)
    try:
        block.load_parameters(str(path), allow_missing=False, ignore_extra=False)
    except Exception as err:  # mxnet raises MXNetError, AssertionError or ValueError
        raise WeightsError(
            f"Cannot load {path} into {name} ({first_line(err, last=True, limit=200)})",
            f"pass a .params file saved from GluonCV's {name} (Block.save_parameters), or weights='untrained'",
        ) from None


@gluon.quiet_mxnet
def load_model(
    name: str = DEFAULT_MODEL,
    weights: str | os.PathLike | None = None,
    cache: str | os.PathLike | None = None,
    seed: int = 0,
) -> LoadedModel:
    """Build a zoo model with its weights.

    Parameters
    ----------
    name : str
        One of :data:`MODELS`.
    weights : {None, "trained", "untrained"} or path
        None: the cached trained weights if present, else untrained (logged).
        "trained": cached or downloaded, else :class:`DownloadError`.
        "untrained": :func:`seeded_init` with ``seed``. A path: that file.
    cache : path, optional
        See :func:`cache_dir`.
    seed : int

    Returns
    -------
    LoadedModel
    """
    spec = model_spec(name)
    if weights not in (None, "trained", "untrained"):
        _weights_file(weights)  # a wrong path fails in a second, before the network is built
    block = build_block(name)
    found = None
    if weights is None:
        found = cached_weights(name, cache)
        weights = "trained" if found else "untrained"
        if not found:
            logger.warning("no trained weights for %s in %s; using %s", name, cache_dir(cache), UNTRAINED_LABEL)
    if weights == "untrained":
        seeded_init(block, seed, spec.input_shape)
        loaded = LoadedModel(name, block, "untrained", spec, seed)
    elif weights == "trained":
        # found: already verified above, not hashed again (a 100 MB file for the SSD)
        load_params_file(block, found or download_weights(name, cache), name)
        loaded = LoadedModel(name, block, "trained", spec)
    else:
        load_params_file(block, weights, name)
        loaded = LoadedModel(name, block, os.fspath(weights), spec)
    block.hybridize()
    return loaded


def symbol_and_params(model: LoadedModel) -> tuple[dict, dict]:
    """The model's MXNet graph (symbol JSON as a dict) and its parameters as numpy arrays.

    The block is traced once on zeros (:func:`byoc_workbench.models.frontend.gluon.trace`)
    if it has not run since it was hybridized.
    """
    traced = gluon.trace(model.block, [model.spec.input_shape])
    return traced.graph, traced.params()
