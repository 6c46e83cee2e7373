"""Zoo model specs and their trained weights: GluonCV's URLs and sha1 sums, the cache, download, prefetch.

Trained weights are GluonCV's own files (same names, URLs and sha1 sums as
``gluoncv.model_zoo.model_store``), fetched once into :func:`weights_dir`, which is
``$BYOC_WORKBENCH_CACHE/models`` or ``~/.cache/byoc-workbench/models``. A workshop fills
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
from typing import Literal, TypedDict, get_args

from byoc_workbench.core import files, output_paths, progress
from byoc_workbench.core.errors import WorkbenchError, did_you_mean
from byoc_workbench.core.files import CACHE_ENV

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "ssd_512_resnet50_v1_coco"
# GluonCV's host, overridable as GluonCV does it (e.g. a workshop mirror).
REPO_ENV = "MXNET_GLUON_REPO"
APACHE_REPO_URL = "https://apache-mxnet.s3-accelerate.dualstack.amazonaws.com/"
DOWNLOAD_TIMEOUT_S = 10.0


#: The tasks a zoo model can have, and what its outputs are drawn as.
Task = Literal["detection", "segmentation", "pose", "classification"]
TASKS = get_args(Task)


@dataclass(frozen=True)
class ModelSpec:
    """What the workbench knows about one zoo model.

    ``task`` is what it does (one of :data:`TASKS`); ``family`` its architecture
    (``"SSD"``, ``"YOLOv3"``...), which decides how it partitions.
    """

    name: str
    input_shape: tuple[int, int, int, int]
    task: Task
    sha1: str  # GluonCV's sha1 of the trained .params file
    family: str = ""


def _specs(task: Task, family: str, shape: tuple, *entries) -> tuple:
    return tuple(ModelSpec(name, (1, 3, *shape), task, sha1, family) for name, sha1 in entries)


# Each family's models at the input size GluonCV's demos use. Segmentation models
# are built for their input size (their upsampling is fixed when they are built).
MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        *_specs(
            "detection",
            "SSD",
            (512, 512),
            ("ssd_512_resnet50_v1_coco", "c48351620d4f0cbc49e4f7a84c8e67ef8fdc6e09"),
            ("ssd_512_mobilenet1.0_coco", "da9756faa5b9b4e34dedcf83ee0733d5895796ad"),
            ("ssd_512_mobilenet1.0_voc", "37c180765a4eb3e67751d6bacac47bb9156f5fff"),
            ("ssd_512_vgg16_atrous_voc", "daf8181b615b480236fcb8474545077891276945"),
        ),
        *_specs(
            "detection",
            "SSD",
            (300, 300),
            ("ssd_300_vgg16_atrous_voc", "0e169fbb64efdee6985c3c175ec4298c4bda0298"),
            ("ssd_300_vgg16_atrous_coco", "b302ad8a8660345c368448141d8acf30b5a3801d"),
        ),
        *_specs(
            "detection",
            "YOLOv3",
            (416, 416),
            ("yolo3_darknet53_coco", "09767802230b45af1c27697a2dad6d1ebaacc1e2"),
            ("yolo3_mobilenet1.0_coco", "66dbbae67be8f1e3cd3c995ce626a2bdc89769c6"),
            ("yolo3_mobilenet1.0_voc", "3b47835ac3dd80f29576633949aa58aee3094353"),
        ),
        *_specs(
            "detection",
            "CenterNet",
            (512, 512),
            ("center_net_resnet18_v1b_voc", "38c509d456a6e14e4c54e961ed43bffe8cf62840"),
            ("center_net_resnet18_v1b_coco", "dccae71d1f069343326750bc9b0508a2a760dd80"),
            ("center_net_mobilenetv3_small_duc_voc", "8a8e9cbcbac3a496f0904dc22e148b1978ea672f"),
        ),
        *_specs(
            "detection",
            "Faster R-CNN",
            (512, 512),
            ("faster_rcnn_resnet50_v1b_voc", "447328d89d70ae1e2ca49226b8d834e5a5456df3"),
            ("faster_rcnn_resnet50_v1b_coco", "5b4690fb7c5b62c44fb36c67d0642b633697f1bb"),
        ),
        *_specs("segmentation", "FCN", (480, 480), ("fcn_resnet50_ade", "3479525af7bdbf345e74e150aaae2e48174c0c5f")),
        *_specs("segmentation", "PSPNet", (480, 480), ("psp_resnet50_ade", "3f220f537400dfa607c3d041ed3b172db39b0b01")),
        *_specs(
            "segmentation",
            "DeepLabV3",
            (480, 480),
            ("deeplab_resnet50_ade", "c7789b237adc7253405bee57c84d53b15db45942"),
        ),
        *_specs(
            "pose",
            "Simple Pose",
            (256, 192),
            ("simple_pose_resnet18_v1b", "f63d42ac8f83b239d4e08b636b888b8e50cd066d"),
            ("simple_pose_resnet50_v1b", "e2c7b1adea31264bc9220511308b4efa89c6fc50"),
            ("mobile_pose_mobilenetv3_small", "c2a11fae8970c2c2e79e2b77a4c4d62e3d3e054f"),
        ),
        *_specs(
            "classification",
            "classification",
            (224, 224),
            ("resnet50_v1", "cc729d95031ca98cf2ff362eb57dee4d9994e4b2"),
            ("resnet18_v1", "a0666292f0a30ff61f857b0b66efc0228eb6a54b"),
            ("mobilenetv2_1.0", "f9952bcde7a7982947ac5240546e1c1c8f057370"),
            ("mobilenetv3_small", "10430433698d18f49991e4a366c9fce8f9286298"),
        ),
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
        raise UnknownModelError(
            f"Unknown model {name!r}{did_you_mean(name, MODELS)}", f"use one of: {', '.join(MODELS)}"
        ) from None


def weights_dir(path: str | os.PathLike | None = None) -> Path:
    """The weights cache: ``path``, else :func:`byoc_workbench.core.files.cache_dir` of ``models``
    (``$BYOC_WORKBENCH_CACHE/models``, else ``~/.cache/byoc-workbench/models``)."""
    return Path(os.path.expanduser(os.fspath(path))) if path else files.cache_dir("models")


def check_cache(cache: str | os.PathLike | None = None) -> Path:
    """:func:`weights_dir`, or a one-line :class:`DownloadError` where it cannot be a folder: a file (a FIFO, a link
    that leads nowhere) is at it or above it, and no weights can go there, downloaded or put by hand."""
    folder = weights_dir(cache)
    there = output_paths.existing_ancestor(folder)
    if not there.is_dir():
        what = output_paths.kind_of(there) if there.exists() else "a link that leads nowhere"
        raise DownloadError(
            f"The weights cache {folder} cannot be a folder: {there} is {what}",
            f"move or remove {there}, or set ${CACHE_ENV} to another folder",
        )
    return folder


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


#: Larger than any GluonCV weights file (the zoo's largest are a few hundred MB): a file over it is the wrong one,
#: said so without hashing it (a disk image or a sparse file there would take minutes to hash).
MAX_WEIGHTS_BYTES = 1 << 30

#: What :func:`weights_state` finds at a model's trained-weights path.
State = Literal["trained", "not cached", "wrong size", "wrong sha1", "not a regular file"]


def weights_state(name: str, cache: str | os.PathLike | None = None) -> State:
    """What is at the trained weights' path of ``name``: ``"trained"`` (GluonCV's file: its sha1 checked),
    ``"not cached"``, or what makes it ignored: ``"wrong size"`` (larger than :data:`MAX_WEIGHTS_BYTES`, not read),
    ``"wrong sha1"``, or ``"not a regular file"`` (a FIFO or a device would block the read forever)."""
    path = weights_dir(cache) / params_file_name(name)
    if not path.is_file():
        return "not a regular file" if path.exists() or path.is_symlink() else "not cached"
    if path.stat().st_size > MAX_WEIGHTS_BYTES:
        return "wrong size"
    return "trained" if sha1_of(path) == model_spec(name).sha1 else "wrong sha1"


def cached_weights(name: str, cache: str | os.PathLike | None = None) -> Path | None:
    """Path of the cached trained weights if present with the right sha1, else None (what is there instead is
    said, and ignored)."""
    path = weights_dir(cache) / params_file_name(name)
    state = weights_state(name, cache)
    if state in _IGNORED:
        logger.warning("%s %s; ignoring it", path, _IGNORED[state])
    return path if state == "trained" else None


_IGNORED = {
    "wrong size": f"is larger than any GluonCV weights file (over {MAX_WEIGHTS_BYTES >> 20} MiB)",
    "wrong sha1": "has the wrong sha1",
    "not a regular file": "is not a regular file",
}


def in_the_way(path: Path) -> str | None:
    """What at ``path`` no weights file can be copied over, in words: ``"link"`` (cp writes through it),
    ``"folder"`` (cp puts the file inside it), ``"FIFO"`` (cp blocks writing into it) or a device; None for a
    regular file or nothing."""
    if path.is_symlink():
        return "link"
    if path.is_dir():
        return "folder"
    return output_paths.kind_of(path).removeprefix("a ") if path.exists() and not path.is_file() else None


def put_by_hand(target: Path) -> str:
    """How to put the weights file ``target`` in place by hand: what is in the way removed first."""
    thing = in_the_way(target)
    return (
        f"remove the {thing} at {target}, then put {target.name} there" if thing else f"put {target.name} at {target}"
    )


def download_weights(
    name: str, cache: str | os.PathLike | None = None, repo_url: str | None = None, timeout: float = DOWNLOAD_TIMEOUT_S
) -> Path:
    """Download GluonCV's trained weights into the cache, checking the sha1.

    Parameters
    ----------
    name : str
    cache : path, optional
        See :func:`weights_dir`.
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
    target = check_cache(cache) / params_file_name(name)
    if target.is_dir():  # the download would be moved into it
        raise DownloadError(
            f"A {in_the_way(target)} is at {target}, where {name}'s weights go",
            f"{put_by_hand(target)} (or run again to download it), or pass --weights PATH",
        )
    url = weights_url(name, repo_url)
    try:
        files.make_folder(target.parent)
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
            raise DownloadError(f"{url} gave a file with the wrong sha1", f"retry, or {put_by_hand(target)}")
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
            f"Cannot download {url} ({reason})", f"{put_by_hand(target)} or pass --weights PATH"
        ) from None


class Fetched(TypedDict):
    """What :func:`prefetch` did for one model: the file, or why it is missing and how to supply it."""

    ok: bool
    path: str
    error: str | None
    how_to_fix: str | None


def prefetch(
    models=None,
    cache: str | os.PathLike | None = None,
    repo_url: str | None = None,
    timeout: float = DOWNLOAD_TIMEOUT_S,
) -> dict[str, Fetched]:
    """Fill the cache with trained weights ahead of a workshop.

    Returns
    -------
    dict[str, Fetched]
        ``{name: {"ok": bool, "path": str, "error": str | None, "how_to_fix": str | None}}``;
        for each failure, where to put the file by hand and the ``--weights`` flag.
    """
    models = list(models or MODELS)
    for name in models:
        model_spec(name)  # an unknown name is a usage error, not a download failure
    cache = check_cache(cache)  # so is a cache no file can be put in: one line, not one per model
    report: dict[str, Fetched] = {}
    for name in models:
        target = cache / params_file_name(name)
        try:
            path = download_weights(name, cache, repo_url, timeout)
            report[name] = {"ok": True, "path": str(path), "error": None, "how_to_fix": None}
        except DownloadError as err:
            put = f"download {weights_url(name, repo_url)}, unzip it and {put_by_hand(target)}"
            report[name] = {
                "ok": False,
                "path": str(target),
                "error": err.cause,
                "how_to_fix": f"{put}, or pass --weights /path/to/{target.name}",
            }
    return report
