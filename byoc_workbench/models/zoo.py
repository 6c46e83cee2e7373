"""GluonCV models with their weights: trained (downloaded), a local file, or seeded.

Weights come from one of three places, recorded in :attr:`LoadedModel.weights`:

* ``"trained"``: GluonCV's own download, cached (see :mod:`.weights`);
* a path: a ``.params`` file as written by ``Block.save_parameters``;
* ``"untrained"``: a deterministic seeded initialisation, for offline use (see
  :mod:`.seeded`). Every result built from it must say "untrained weights"
  (see :attr:`LoadedModel.weights_label`).

This module loads; :mod:`.weights` holds the specs, the cache and the download,
:mod:`.seeded` the initialisation, and :mod:`byoc_workbench.frontends.gluon` the tracing. The
names the CLI and notebooks use (``MODELS``, ``DEFAULT_MODEL``, ``model_spec``,
``weights_dir``, ``prefetch``) are re-exported here. mxnet and gluoncv are imported
inside the functions that need them, so this module imports on any Python.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from byoc_workbench import files
from byoc_workbench.errors import MissingDependencyError, first_line
from byoc_workbench.frontends import MXNetImportError, from_gluon, gluon
from byoc_workbench.models import seeded
from byoc_workbench.models.gluoncv_import import import_gluoncv
from byoc_workbench.models.seeded import seeded_init
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
    input_shape : tuple
        ``(1, 3, H, W)`` the block was built for (segmentation) and calibrated on (seeded weights).
    """

    name: str
    block: object
    weights: str
    spec: ModelSpec
    seed: int | None = None
    input_shape: tuple = ()  # what it was built and calibrated for; the spec's by default

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


def build_block(name: str, input_shape=None):
    """The GluonCV network of ``name``, built with no weights (nothing is downloaded).

    A segmentation model fixes its upsampling to its input size when it is built, so it
    is built for ``input_shape`` (default: the model's own, :attr:`ModelSpec.input_shape`).
    """
    spec = model_spec(name)
    mx = gluon.import_mxnet()  # first, so that a missing mxnet is named as such, not as a broken gluoncv
    model_zoo = import_gluoncv("gluoncv.model_zoo", gluon.INSTALL_FIX)
    # Classification nets take no pretrained_base argument.
    kwargs = {} if spec.kind == "classification" else {"pretrained_base": False}
    if spec.kind == "segmentation":
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
    input_shape=None,
    block=None,
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
        See :func:`weights_dir`.
    seed : int
    input_shape : tuple, optional
        ``(1, 3, H, W)``; the model's own (:attr:`ModelSpec.input_shape`) by default.
    block : mxnet.gluon.HybridBlock, optional
        ``name``'s network as :func:`build_block` gives it, perhaps reconfigured (fewer
        proposals, say); built here when None.

    Returns
    -------
    LoadedModel
    """
    spec = model_spec(name)
    if weights not in (None, "trained", "untrained"):
        _weights_file(weights)  # a wrong path fails in a second, before the network is built
    shape = tuple(input_shape or spec.input_shape)
    block_given = block
    block = block if block is not None else build_block(name, shape)
    found = None
    if weights is None:
        found = cached_weights(name, cache)
        weights = "trained" if found else "untrained"
        if not found:
            logger.warning("no trained weights for %s in %s; using %s", name, weights_dir(cache), UNTRAINED_LABEL)
    if weights == "untrained":
        _seeded(block, name, seed, shape, kept=block_given is None)
        loaded = LoadedModel(name, block, "untrained", spec, seed, shape)
    elif weights == "trained":
        # found: already verified above, not hashed again (a 100 MB file for the SSD)
        load_params_file(block, found or download_weights(name, cache), name)
        loaded = LoadedModel(name, block, "trained", spec, input_shape=shape)
    else:
        load_params_file(block, weights, name)
        loaded = LoadedModel(name, block, os.fspath(weights), spec, input_shape=shape)
    block.hybridize()
    return loaded


def seeded_file(name: str, seed: int, shape) -> Path:
    """Where the seeded weights of ``name`` are kept: keyed by the seed, the input size, the seeding code
    and MXNet's and GluonCV's versions (``$BYOC_WORKBENCH_CACHE/seeded``)."""
    versions = [importlib.metadata.version(p) for p in ("mxnet", "gluoncv")]
    code = hashlib.sha1(Path(seeded.__file__).read_bytes() + " ".join(versions).encode()).hexdigest()[:12]
    return files.cache_dir("seeded") / f"{name}-seed{seed}-{'x'.join(map(str, shape))}-{code}.params"


def _seeded(block, name: str, seed: int, shape, kept: bool) -> None:
    """:func:`seeded_init`, or its result kept from an earlier run: calibrating the SSD's batch norms and
    heads takes tens of seconds, and gives the same weights every time. A block given by the caller
    (perhaps reconfigured) is always seeded afresh (``kept=False``)."""
    path = seeded_file(name, seed, shape) if kept else None
    if path is not None and files.intact(path):
        try:
            block.load_parameters(str(path), allow_missing=False, ignore_extra=False)
            return
        except Exception as err:  # noqa: BLE001 - mxnet raises its own errors: seed again
            logger.warning("seeded weights %s do not load (%s); seeding again", path.name, first_line(err))
    seeded_init(block, seed, shape)
    if path is None:
        return

    def write():
        files.write_with(path, block.save_parameters, suffix=".params")
        files.seal(path)

    files.keep("seeded", write)  # an unwritable cache: seeded again next time


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
    built_for = input_shape if model_spec(model if loaded is None else loaded.name).kind == "segmentation" else None
    loaded = loaded or load_model(model, weights, input_shape=built_for)
    shape = tuple(input_shape or loaded.input_shape)
    try:
        mod, used = from_gluon(loaded.block, {"data": shape}, bind_params=bind_params)
    except MXNetImportError as err:
        raise ModelImportError(f"{loaded.name}: {err.cause}", err.fix) from err
    return ImportedModel(mod, used, loaded, shape)


def symbol_and_params(model: LoadedModel) -> tuple[dict, dict]:
    """The model's MXNet graph (symbol JSON as a dict) and its parameters as numpy arrays.

    The block is traced once on zeros (:func:`byoc_workbench.frontends.gluon.trace`)
    if it has not run since it was hybridized.
    """
    traced = gluon.trace(model.block, [model.input_shape])
    return traced.graph, traced.params()
