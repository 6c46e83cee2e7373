"""Image loading: GluonCV's SSD preprocessing, the default picture, clear errors."""

from __future__ import annotations

import numpy as np
import pytest
from messages import one_line
from PIL import Image

from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.models import images


def test_default_picture_is_shipped():
    path = images.default_image_path()
    assert path.is_file() and path.name == "grace_hopper.jpg"


def test_load_test_shapes_and_types():
    x, orig = images.load_test(short=512)
    assert x.dtype == np.float32 and x.shape == (1, 3, 600, 512)
    assert orig.dtype == np.uint8 and orig.shape == (600, 512, 3)
    assert -2.2 < x.min() < x.max() < 2.7


def test_missing_image(tmp_path):
    with pytest.raises(images.MissingImageError) as info:
        images.load_test(tmp_path / "nope.jpg")
    assert isinstance(info.value, WorkbenchError) and "nope.jpg" in one_line(info)


@pytest.mark.parametrize("content", [b"", b"hello, not a picture\n" * 20])
def test_not_an_image(tmp_path, content):
    path = tmp_path / "fake.jpg"
    path.write_bytes(content)
    with pytest.raises(images.NotAnImageError) as info:
        images.load_test(path)
    assert "JPEG or PNG" in one_line(info)


def test_long_side_is_capped(tmp_path):
    path = tmp_path / "wide.png"
    Image.fromarray(np.random.RandomState(0).randint(0, 255, (100, 1000, 3), dtype=np.uint8)).save(path)
    x, orig = images.load_test(path, short=512, max_size=1024)
    assert orig.shape == (102, 1024, 3) and x.shape == (1, 3, 102, 1024)


def _variants(tmp_path):
    src = Image.open(images.default_image_path())
    src.save(tmp_path / "rgb.png")
    src.convert("L").save(tmp_path / "grey.png")
    src.convert("RGBA").save(tmp_path / "rgba.png")
    return [images.default_image_path(), tmp_path / "rgb.png", tmp_path / "grey.png", tmp_path / "rgba.png"]


@pytest.mark.mxnet
@pytest.mark.parametrize("short", [512, 300])
def test_matches_gluoncv_load_test(tmp_path, short):
    from byoc_workbench.models.gluoncv_import import import_gluoncv

    ssd = import_gluoncv("gluoncv.data.transforms.presets.ssd", "pip install gluoncv")  # beside torch too

    for path in _variants(tmp_path):
        x, orig = images.load_test(path, short=short)
        ref_x, ref_orig = ssd.load_test(str(path), short=short)
        assert x.shape == ref_x.shape and orig.shape == ref_orig.shape
        if short == 512:
            # The picture is 512 wide: no resampling, so the result is exact.
            np.testing.assert_array_equal(orig, ref_orig)
            np.testing.assert_allclose(x, ref_x.asnumpy(), rtol=0, atol=1e-6)
        else:
            # OpenCV builds differ in bicubic rounding by at most one grey level.
            assert np.abs(orig.astype(int) - ref_orig.astype(int)).max() <= 1
            np.testing.assert_allclose(x, ref_x.asnumpy(), rtol=0, atol=1.01 / 255 / 0.224)
