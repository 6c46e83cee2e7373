"""Load pictures as SSD inputs, the way GluonCV's ``presets.ssd.load_test`` does.

The steps match GluonCV: decode to RGB, resize so the short side is ``short``
(the long side at most ``max_size``) with bicubic interpolation, then
``to_tensor`` (HWC uint8 -> CHW float in [0, 1]) and ``normalize``. OpenCV does
the decoding and resizing, as inside MXNet, so no mxnet is needed here.

The offline default picture is matplotlib's ``grace_hopper.jpg`` (a public-domain
portrait of Grace Hopper, so one "person"), which every install of the pinned
matplotlib ships.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import NamedTuple

import matplotlib
import numpy as np

from byoc_workbench.core import output_paths
from byoc_workbench.core.errors import WorkbenchError

logger = logging.getLogger(__name__)

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")


class ImageError(WorkbenchError):
    """Base class of the image errors."""


class MissingImageError(ImageError):
    """The image path does not exist."""


class NotAnImageError(ImageError):
    """The file exists but does not decode as an image."""


def default_image_path() -> Path:
    """Path of the offline default picture (matplotlib's ``grace_hopper.jpg``)."""
    path = Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"
    if not path.is_file():
        raise MissingImageError(f"{path} is missing from this matplotlib", "reinstall matplotlib or pass --image PATH")
    return path


def read_image(path: str | os.PathLike) -> np.ndarray:
    """Decode a JPEG or PNG file to an RGB ``(H, W, 3)`` uint8 array.

    Raises
    ------
    MissingImageError, NotAnImageError
    """
    path = Path(path)
    if not path.is_file():
        if path.is_dir():
            raise NotAnImageError(f"Image {path} is a directory", "pass the path of a JPEG or PNG file in it")
        raise MissingImageError(f"Image {path} {output_paths.not_a_file(path)}", "pass the path of a JPEG or PNG file")
    try:
        data = np.fromfile(path, dtype=np.uint8)
    except OSError as err:
        raise NotAnImageError(
            f"Cannot read {path} ({err.strerror or err})", "pass a JPEG or PNG file you can read"
        ) from None
    image = None
    if data.size:
        import cv2

        # IMREAD_COLOR drops alpha and expands grey, like mx.image.imread(flag=1).
        image = cv2.imdecode(data, cv2.IMREAD_COLOR)
    if image is None:
        raise NotAnImageError(f"{path} is not a readable image", "pass a JPEG or PNG file")
    return np.asarray(image[:, :, ::-1], order="C")


def resize_short_within(image: np.ndarray, short: int, max_size: int) -> np.ndarray:
    """Resize so the short side is ``short`` and the long side at most ``max_size``.

    Same arithmetic as ``gluoncv.data.transforms.image.resize_short_within``
    (``mult_base=1``, bicubic).
    """
    import cv2

    h, w = image.shape[:2]
    if h < 1 or w < 1:
        raise NotAnImageError(
            f"The picture is {w}x{h} pixels: it has no pixels to resize", "pass a picture of at least 1x1"
        )
    size_min, size_max = min(h, w), max(h, w)
    scale = float(short) / float(size_min)
    if np.round(scale * size_max) > max_size:
        scale = float(max_size) / float(size_max)
    # A side never rounds to 0 pixels: a 3000x1 picture becomes 1024x1, not 1024x0 (which OpenCV refuses).
    new_w, new_h = max(1, int(np.round(w * scale))), max(1, int(np.round(h * scale)))
    return cv2.resize(image, (new_w, new_h), interpolation=cv2.INTER_CUBIC)


def to_input(image: np.ndarray, mean=MEAN, std=STD) -> np.ndarray:
    """HWC uint8 RGB -> normalised ``(1, 3, H, W)`` float32, as to_tensor + normalize."""
    x = image.astype(np.float32).transpose(2, 0, 1) / np.float32(255.0)
    x = (x - np.asarray(mean, np.float32)[:, None, None]) / np.asarray(std, np.float32)[:, None, None]
    return x[None].astype(np.float32)


def load_test(
    path: str | os.PathLike | None = None,
    short: int = 512,
    max_size: int = 1024,
    mean=MEAN,
    std=STD,
    size: tuple | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Load a picture as GluonCV's ``presets.ssd.load_test(path, short)`` does.

    Parameters
    ----------
    path : path, optional
        A JPEG or PNG file; None for :func:`default_image_path`.
    short, max_size : int
        Target short side and cap on the long side.
    size : (height, width), optional
        Cut the resized picture to its top-left ``size``: the model's own input
        (512x512 for the SSD), as ``byoc-workbench bench`` measures it.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        The ``(1, 3, H, W)`` float32 network input and the resized ``(H, W, 3)``
        uint8 RGB image to draw boxes on (boxes are in its coordinates).
    """
    path = default_image_path() if path is None else path
    resized = resize_short_within(read_image(path), short, max_size)
    if size is not None:
        h, w = (int(d) for d in size)
        if resized.shape[0] < h or resized.shape[1] < w:
            raise ImageError(
                f"The picture is {resized.shape[0]}x{resized.shape[1]} once resized, smaller than {h}x{w}",
                "pass a larger picture",
            )
        resized = np.asarray(resized[:h, :w], order="C")
    logger.debug("loaded %s as %s", path, resized.shape)
    return to_input(resized, mean, std), resized


class ModelInput(NamedTuple):
    """A picture as a model takes it (``x``, N, C, H, W) and as it is drawn (``picture``, H, W, RGB)."""

    x: np.ndarray
    picture: np.ndarray


def model_input(image, shape) -> ModelInput:
    """``(x, picture)``: the picture as GluonCV's ``load_test`` prepares it, cut to ``shape``
    (N, C, H, W), and the RGB picture cut the same way (for drawing).

    A picture narrower or lower than ``shape`` once resized (one far wider than
    tall, say) is padded at the right and bottom with zeros, the mean colour
    after normalisation, and a warning says so.
    """
    x, picture = load_test(image, short=min(int(d) for d in shape[2:]))
    h, w = (int(d) for d in shape[2:])
    if x.shape[2] < h or x.shape[3] < w:
        # A wide input (pose's 256x192 is tall) needs the other side long enough too.
        x, picture = load_test(image, short=max(int(d) for d in shape[2:]))
    if x.shape[2] < h or x.shape[3] < w:
        logger.warning(
            "the picture is %dx%d once resized, smaller than the model's %dx%d: padded with the mean colour",
            x.shape[3],
            x.shape[2],
            w,
            h,
        )
        padded = np.zeros((*x.shape[:2], max(h, x.shape[2]), max(w, x.shape[3])), x.dtype)
        padded[:, :, : x.shape[2], : x.shape[3]] = x
        shown = np.zeros((*padded.shape[2:], picture.shape[2]), picture.dtype)
        shown[: picture.shape[0], : picture.shape[1]] = picture
        x, picture = padded, shown
    return ModelInput(np.asarray(x[:, :, :h, :w], order="C"), np.asarray(picture[:h, :w], order="C"))
