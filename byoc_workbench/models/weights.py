"""Zoo model specs and their trained weights: GluonCV's URLs and sha1 sums, the cache, download, prefetch.

Trained weights are GluonCV's own files (same names, URLs and sha1 sums as
``gluoncv.model_zoo.model_store``), fetched once into :func:`cache_dir`, which is
``$BYOC_WORKBENCH_CACHE`` or ``~/.cache/byoc-workbench/models``. A workshop fills
the cache ahead of time with :func:`prefetch` (``byoc-workbench prefetch``), and
where the host is down a user puts the file there by hand or passes its path.
Nothing here needs mxnet.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .. import progress
from ..errors import WorkbenchError

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "ssd_512_resnet50_v1_coco"
DEFAULT_CACHE = "~/.cache/byoc-workbench/models"
CACHE_ENV = "BYOC_WORKBENCH_CACHE"
# GluonCV's host, overridable as GluonCV does it (e.g. a workshop mirror).
REPO_ENV = "MXNET_GLUON_REPO"
APACHE_REPO_URL = "https://apache-mxnet.s3-accelerate.dualstack.amazonaws.com/"
DOWNLOAD_TIMEOUT_S = 10.0


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
    """Base class of the zoo's errors: model names, weights files and downloads."""


class UnknownModelError(ZooError):
    """A model name the workbench does not know."""


class WeightsError(ZooError):
    """A ``.params`` file that is missing, corrupt, or for another model."""


class DownloadError(ZooError):
    """Trained weights could not be downloaded."""


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
            with progress.bar(total, target.name, "B", unit_scale=True) as bar:
                for chunk in iter(lambda: response.read(1 << 20), b""):
                    out.write(chunk)
                    bar.update(len(chunk))
                bar.done = f"downloaded {target.name}"
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
