"""The shipped zoo damaged every way a disk, a copy or another install can (each damage x each file of a model,
Hypothesis drawing where the damage falls): loading the model is a one-line error, or the very weights it
ships, never other ones. The shipped files carry no seal: the recipe's digest is their check.

What replaced the seeded weights' cache (a model's seeded weights, once calibrated by MXNet and kept): the
package ships them as a recipe (:mod:`byoc_workbench.models.shipped`). One damage of each file, said in one
line, is in test_shipped.py; the other kinds of cache entry are in test_cache_damage.py.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from damage import DAMAGES, damage_entry
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.models import shipped, zoo

SMALL, OTHER = "resnet18_v1", "mobilenetv3_small"  # two classifiers the workbench lists: both ship seeded, and exported
FILES = (f"{SMALL}.json.xz", f"{SMALL}.seed0.npz.xz")
# A seal is the cache's; "another model's" is a mix-up of copies: the file of the same kind of another model.
KINDS = sorted(set(DAMAGES) - {"its seal removed"} | {"another model's"})


@functools.cache
def _shipped_weights() -> dict:
    return zoo.load_model(SMALL, "untrained").params


def _damaged(folder: Path, which: str, damage: str, at: float) -> None:
    for model in (SMALL, OTHER):
        for f in Path(str(shipped.FOLDER)).glob(f"{model}.*"):
            shutil.copy(f, folder / f.name)
    if damage == "another model's":
        shutil.copy(folder / which.replace(SMALL, OTHER), folder / which)
    else:
        damage_entry(folder / which, damage, at)


@pytest.mark.parametrize("which", FILES)
@pytest.mark.parametrize("damage", KINDS)
@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(at=st.floats(0.0, 0.99))
def test_a_damaged_shipped_file_is_one_line_never_other_weights(which, damage, at):
    want = _shipped_weights()
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as patch:
        _damaged(Path(tmp), which, damage, at)
        patch.setattr(shipped, "FOLDER", Path(tmp))
        try:
            got = zoo.load_model(SMALL, "untrained")
        except WorkbenchError as err:
            assert isinstance(err, shipped.ShippedError), err.line
            assert err.line.startswith("error: ") and "\n" not in err.line and SMALL in err.line, err.line
            return
    assert got.graph == shipped.read_shipped(SMALL).graph, f"{damage} {which}: another model's graph"
    assert got.params.keys() == want.keys(), f"{damage} {which}: another model's weights"
    for key, value in want.items():
        assert np.array_equal(got.params[key], value), f"{damage} {which}: other weights ({key})"


@functools.cache
def _shipped_onnx() -> bytes:
    model = shipped.read_shipped(SMALL)
    return model.onnx(model.input_shape)


@pytest.mark.parametrize("damage", KINDS)
@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(at=st.floats(0.0, 0.99))
def test_a_damaged_shipped_onnx_export_is_one_line_never_another(damage, at):
    """MXNet's ONNX export, shipped for the whole-model anchors: damaged, it is one line, never another export."""
    want = _shipped_onnx()
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as patch:
        _damaged(Path(tmp), f"{SMALL}.onnx.xz", damage, at)
        patch.setattr(shipped, "FOLDER", Path(tmp))
        try:
            model = shipped.read_shipped(SMALL)
            got = model.onnx(model.input_shape)
        except WorkbenchError as err:
            assert isinstance(err, shipped.ShippedError), err.line
            assert err.line.startswith("error: ") and "\n" not in err.line and SMALL in err.line, err.line
            return
    assert got == want, f"{damage}: another ONNX export than {SMALL}'s"
