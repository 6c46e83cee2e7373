"""GluonCV models and their weights: trained (downloaded), a local file, or seeded.

Weights come from one of three places, recorded in :attr:`LoadedModel.weights`:

* ``"trained"``: GluonCV's own download (same file names, URLs and sha1 sums as
  ``gluoncv.model_zoo.model_store``), cached in :func:`cache_dir`, which is
  ``$BYOC_WORKBENCH_CACHE`` or ``~/.cache/byoc-workbench/models``;
* a path: a ``.params`` file as written by ``Block.save_parameters``;
* ``"untrained"``: a deterministic seeded initialisation, for offline use. Every
  result built from it must say "untrained weights" (see ``weights_label``).

mxnet and gluoncv are imported inside the functions that need them, so this
module imports on any Python.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from ..errors import MissingDependencyError as MissingDependencyError  # re-exported for callers of the zoo
from ..errors import WorkbenchError, first_line, import_optional
from .frontend import gluon

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "ssd_512_resnet50_v1_coco"
DEFAULT_CACHE = "~/.cache/byoc-workbench/models"
CACHE_ENV = "BYOC_WORKBENCH_CACHE"
# GluonCV's host, overridable as GluonCV does it (e.g. a workshop mirror).
REPO_ENV = "MXNET_GLUON_REPO"
APACHE_REPO_URL = "https://apache-mxnet.s3-accelerate.dualstack.amazonaws.com/"
DOWNLOAD_TIMEOUT_S = 10.0
UNTRAINED_LABEL = "untrained weights"


@dataclass(frozen=True)
class ModelSpec:
    """What the workbench knows about one zoo model."""

    name: str
    input_shape: tuple[int, int, int, int]
    kind: str  # "detection" or "classification"
    sha1: str  # GluonCV's sha1 of the trained .params file


MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            "ssd_512_resnet50_v1_coco", (1, 3, 512, 512), "detection", "c48351620d4f0cbc49e4f7a84c8e67ef8fdc6e09"
        ),
        ModelSpec(
            "ssd_512_mobilenet1.0_coco", (1, 3, 512, 512), "detection", "da9756faa5b9b4e34dedcf83ee0733d5895796ad"
        ),
        ModelSpec("resnet50_v1", (1, 3, 224, 224), "classification", "cc729d95031ca98cf2ff362eb57dee4d9994e4b2"),
    )
}


class ZooError(WorkbenchError):
    """Base class of the zoo's errors: names, weights files and downloads."""


class UnknownModelError(ZooError):
    """A model name the workbench does not know."""


class WeightsError(ZooError):
    """A ``.params`` file that is missing, corrupt, or for another model."""


class DownloadError(ZooError):
    """Trained weights could not be downloaded."""


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


# --- names and the cache ---------------------------------------------------------------


def model_spec(name: str) -> ModelSpec:
    """Return the :class:`ModelSpec` of ``name`` or raise :class:`UnknownModelError`."""
    try:
        return MODELS[name]
    except KeyError:
        raise UnknownModelError(f"Unknown model {name!r}", f"use one of: {', '.join(MODELS)}") from None


def cache_dir(path: str | os.PathLike | None = None) -> Path:
    """The weights cache: ``path``, else ``$BYOC_WORKBENCH_CACHE``, else ``~/.cache/byoc-workbench/models``."""
    chosen = path or os.environ.get(CACHE_ENV) or DEFAULT_CACHE
    return Path(os.path.expanduser(os.fspath(chosen)))


def params_file_name(name: str) -> str:
    """GluonCV's file name for the trained weights, e.g. ``resnet50_v1-cc729d95.params``."""
    return f"{name}-{model_spec(name).sha1[:8]}.params"


def weights_url(name: str, repo_url: str | None = None) -> str:
    """The zip URL GluonCV downloads the trained weights from."""
    repo = repo_url or os.environ.get(REPO_ENV) or APACHE_REPO_URL
    repo = repo if repo.endswith("/") else repo + "/"
    return f"{repo}gluon/models/{params_file_name(name)[: -len('.params')]}.zip"


def sha1_of(path: str | os.PathLike) -> str:
    """Hex sha1 of a file."""
    digest = hashlib.sha1()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def cached_weights(name: str, cache: str | os.PathLike | None = None) -> Path | None:
    """Path of the cached trained weights if present with the right sha1, else None."""
    path = cache_dir(cache) / params_file_name(name)
    if not path.exists():
        return None
    if sha1_of(path) != model_spec(name).sha1:
        logger.warning("%s has the wrong sha1; ignoring it", path)
        return None
    return path


def download_weights(
    name: str, cache: str | os.PathLike | None = None, repo_url: str | None = None, timeout: float = DOWNLOAD_TIMEOUT_S
) -> Path:
    """Download GluonCV's trained weights into the cache, checking the sha1.

    Parameters
    ----------
    name : str
    cache : path, optional
        See :func:`cache_dir`.
    repo_url : str, optional
        Host to use instead of GluonCV's (``$MXNET_GLUON_REPO`` is also honoured).
    timeout : float
        Seconds to wait on the connection; a dead network fails fast.

    Returns
    -------
    pathlib.Path
        The verified ``.params`` file.
    """
    found = cached_weights(name, cache)
    if found:
        return found
    target = cache_dir(cache) / params_file_name(name)
    url = weights_url(name, repo_url)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise DownloadError(
            f"Cannot create the weights cache {target.parent} ({err.strerror or err})",
            f"set ${CACHE_ENV} to a directory you can write to",
        ) from None
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        zip_path = Path(tmp) / "weights.zip"
        _fetch(url, zip_path, timeout, target)
        try:
            with zipfile.ZipFile(zip_path) as zf:
                zf.extract(target.name, tmp)
        except (zipfile.BadZipFile, KeyError) as err:
            raise DownloadError(
                f"{url} is not GluonCV's weights archive ({err})",
                f"check ${REPO_ENV} or supply the file with --weights",
            ) from None
        if sha1_of(Path(tmp) / target.name) != model_spec(name).sha1:
            raise DownloadError(f"{url} gave a file with the wrong sha1", f"retry, or put a good copy at {target}")
        shutil.move(str(Path(tmp) / target.name), target)
    logger.info("downloaded %s to %s", name, target)
    return target


def _fetch(url: str, dest: Path, timeout: float, target: Path) -> None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, open(dest, "wb") as out:
            total = int(response.headers.get("Content-Length") or 0) or None
            with tqdm(total=total, unit="B", unit_scale=True, desc=target.name, leave=False) as bar:
                for chunk in iter(lambda: response.read(1 << 20), b""):
                    out.write(chunk)
                    bar.update(len(chunk))
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", err)
        raise DownloadError(
            f"Cannot download {url} ({reason})", f"put {target.name} in {target.parent} or pass --weights PATH"
        ) from None


def prefetch(
    models=None,
    cache: str | os.PathLike | None = None,
    repo_url: str | None = None,
    timeout: float = DOWNLOAD_TIMEOUT_S,
) -> dict:
    """Fill the cache with trained weights ahead of a workshop.

    Returns
    -------
    dict
        ``{name: {"ok": bool, "path": str, "error": str | None, "how_to_fix": str | None}}``;
        for each failure, where to put the file by hand and the ``--weights`` flag.
    """
    models = list(models or MODELS)
    for name in models:
        model_spec(name)  # an unknown name is a usage error, not a download failure
    report = {}
    for name in models:
        target = cache_dir(cache) / params_file_name(name)
        try:
            path = download_weights(name, cache, repo_url, timeout)
            report[name] = {"ok": True, "path": str(path), "error": None, "how_to_fix": None}
        except DownloadError as err:
            report[name] = {
                "ok": False,
                "path": str(target),
                "error": err.cause,
                "how_to_fix": (
                    f"download {weights_url(name, repo_url)}, unzip it and put "
                    f"{target.name} at {target}, or pass --weights /path/to/{target.name}"
                ),
            }
    return report


# --- building and initialising ---------------------------------------------------------


def _import_mxnet():
    mxnet = gluon.import_mxnet()
    model_zoo = import_optional("gluoncv.model_zoo", gluon.INSTALL_FIX)
    return mxnet, model_zoo


def build_block(name: str):
    """The GluonCV network of ``name``, built with no weights (nothing is downloaded)."""
    spec = model_spec(name)
    _, model_zoo = _import_mxnet()
    # Classification nets take no pretrained_base argument.
    kwargs = {"pretrained_base": False} if spec.kind == "detection" else {}
    return model_zoo.get_model(name, pretrained=False, **kwargs)


def seeded_init(
    block,
    seed: int = 0,
    input_shape=(1, 3, 224, 224),
    background_logit: float = 4.0,
    class_scale: float = 0.6,
    box_scale: float = 0.1,
) -> None:
    """Initialise every learnt parameter from ``seed``, deterministically.

    Conv and dense weights are He-normal. Batch-norm statistics are then measured
    on a seeded calibration batch, so activations stay of order one through 50
    layers instead of overflowing (random moving statistics make SSD's boxes
    infinite). The SSD anchors are constants and keep the values the model
    computes. The class predictors are scaled by ``class_scale`` and favour the
    background class by ``background_logit``, so that scores neither saturate at 1
    (where they would tie exactly) nor crowd around 1/81: near-ties make the NMS
    order arbitrary. With the defaults the 100 kept scores span about 0.1-0.9 and
    consecutive ones differ by 1e-6 or more. The box predictors are scaled by
    ``box_scale`` so that boxes stay near their anchors.
    The calibration batch holds the default picture and seeded noise, so both
    kinds of input give sensible activations.
    """
    mx, _ = _import_mxnet()
    rng = np.random.RandomState(seed)
    block.initialize(force_reinit=False)
    # Gluon infers most shapes lazily; one forward pass makes them known.
    block(mx.nd.zeros(input_shape))
    params = block.collect_params()
    for name, param in sorted(params.items()):
        if param.grad_req == "null" and not _is_bn_stat(name):
            continue  # constants such as the SSD anchors: computed by the model, not learnt
        param.set_data(mx.nd.array(_draw(name, param.shape, rng), dtype=param.dtype))
    _tame_predictors(block, rng, background_logit, class_scale, box_scale, mx)
    _calibrate_batch_norm(block, params, rng, input_shape, mx)


def _is_bn_stat(name: str) -> bool:
    return name.endswith(("running_mean", "running_var", "moving_mean", "moving_var"))


def _draw(name: str, shape, rng: np.random.RandomState) -> np.ndarray:
    if name.endswith("gamma"):
        return rng.uniform(0.5, 1.5, shape)
    if name.endswith("beta"):
        return rng.uniform(-0.2, 0.2, shape)
    if name.endswith(("running_mean", "moving_mean")):
        return np.zeros(shape)
    if name.endswith(("running_var", "moving_var")):
        return np.ones(shape)
    if name.endswith("bias"):
        return rng.uniform(-0.1, 0.1, shape)
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else int(shape[0])
    return rng.normal(0.0, np.sqrt(2.0 / max(fan_in, 1)), shape)


def _tame_predictors(block, rng, background_logit: float, class_scale: float, box_scale: float, mx) -> None:
    classes = getattr(block, "class_predictors", None)
    if classes is None:
        return
    groups = len(block.classes) + 1
    for predictors, scale in ((classes, class_scale), (block.box_predictors, box_scale)):
        for param in predictors.collect_params().values():
            value = param.data().asnumpy() * scale
            if param.name.endswith("bias") and predictors is classes:
                value = rng.uniform(-1.0, 1.0, param.shape)
                value[::groups] += background_logit  # channel c is anchor c // groups, class c % groups
            # An mx.nd array, not numpy: MXNet cannot copy numpy into oneDNN-laid-out memory.
            param.set_data(mx.nd.array(value, dtype=param.dtype))


def _calibration_batch(rng, input_shape) -> np.ndarray:
    # The default picture (natural image statistics) and seeded noise, at the input size.
    import cv2

    from . import images

    height, width = input_shape[2], input_shape[3]
    picture = cv2.resize(images.read_image(images.default_image_path()), (width, height), interpolation=cv2.INTER_CUBIC)
    noise = rng.uniform(-2.0, 2.0, (1, 3, height, width)).astype(np.float32)
    return np.concatenate([images.to_input(picture), noise])


def _calibrate_batch_norm(block, params, rng, input_shape, mx) -> None:
    # Random moving statistics let activations grow ~1e4x through ResNet-50. In a
    # training-mode pass each BatchNorm normalises with its batch statistics, so the
    # BatchNorm inputs seen in that one pass are exactly what inference sees once the
    # moving statistics equal them. (A training pass does not update the moving
    # statistics here, so they are measured on the inputs instead.)
    block.hybridize()
    block(mx.nd.zeros(input_shape))
    data_vars, sym = block._cached_graph
    sym = mx.sym.Group(list(sym)) if isinstance(sym, (list, tuple)) else sym
    graph = json.loads(sym.tojson())
    nodes = graph["nodes"]
    taps, heads = [], []
    for node in nodes:
        if node["op"] != "BatchNorm":
            continue
        heads.append([node["inputs"][0][0], node["inputs"][0][1], 0])
        axis = int(node.get("attrs", {}).get("axis", 1))
        taps.append((axis, nodes[node["inputs"][3][0]]["name"], nodes[node["inputs"][4][0]]["name"]))
    if not taps:
        return
    # The same graph with every BatchNorm input as an output.
    graph["heads"] = heads
    group = mx.sym.load_json(json.dumps(graph))
    batch = mx.nd.array(_calibration_batch(rng, input_shape))
    tapped = mx.gluon.SymbolBlock(group, [mx.sym.var(data_vars[0].name)], params=params)
    with mx.autograd.train_mode():
        outputs = tapped(batch)
    for (axis, mean_name, var_name), out in zip(taps, outputs):
        x = out.asnumpy().astype(np.float64)
        axes = tuple(a for a in range(x.ndim) if a != axis % x.ndim)
        params[mean_name].set_data(mx.nd.array(x.mean(axis=axes)))
        # 1x1 feature maps in a batch of two can give a near-zero variance.
        params[var_name].set_data(mx.nd.array(np.maximum(x.var(axis=axes), 1e-2)))


def load_params_file(block, path: str | os.PathLike, name: str = "model") -> None:
    """Load a ``Block.save_parameters`` file, with one-line errors for bad files."""
    path = Path(path)
    if not path.is_file():
        raise WeightsError(f"Weights file {path} does not exist", "pass the path of a .params file")
    try:
        block.load_parameters(str(path), allow_missing=False, ignore_extra=False)
    except Exception as err:  # mxnet raises MXNetError, AssertionError or ValueError
        raise WeightsError(
            f"Cannot load {path} into {name} ({first_line(err, last=True, limit=200)})",
            f"pass a .params file saved from GluonCV's {name} (Block.save_parameters), or weights='untrained'",
        ) from None


def _quiet_mxnet(func):
    """Run ``func`` without MXNet's "Cannot decide type" warning, which every
    hybridized forward of a zoo model prints and which says nothing to a user."""
    import functools
    import warnings

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Cannot decide type", category=UserWarning)
            return func(*args, **kwargs)

    return wrapper


@_quiet_mxnet
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
    block = build_block(name)
    if weights is None:
        found = cached_weights(name, cache)
        weights = "trained" if found else "untrained"
        if not found:
            logger.warning("no trained weights for %s in %s; using %s", name, cache_dir(cache), UNTRAINED_LABEL)
    if weights == "untrained":
        seeded_init(block, seed, spec.input_shape)
        loaded = LoadedModel(name, block, "untrained", spec, seed)
    elif weights == "trained":
        load_params_file(block, download_weights(name, cache), name)
        loaded = LoadedModel(name, block, "trained", spec)
    else:
        load_params_file(block, weights, name)
        loaded = LoadedModel(name, block, os.fspath(weights), spec)
    block.hybridize()
    return loaded


@_quiet_mxnet
def symbol_and_params(model: LoadedModel) -> tuple[dict, dict]:
    """The model's MXNet graph (symbol JSON as a dict) and its parameters as numpy arrays.

    The block is traced once on zeros if it has not run since it was hybridized.
    """
    mx, _ = _import_mxnet()
    block = model.block
    if not getattr(block, "_cached_graph", None):
        block.hybridize()
        block(mx.nd.zeros(model.spec.input_shape))
    sym = block._cached_graph[1]
    sym = mx.sym.Group(list(sym)) if isinstance(sym, (list, tuple)) else sym
    graph = json.loads(sym.tojson())
    used = set(sym.list_arguments()) | set(sym.list_auxiliary_states())
    params = {n: p.data().asnumpy() for n, p in block.collect_params().items() if n in used}
    return graph, params
