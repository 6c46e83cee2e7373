"""The zoo as the package ships it: every listed model there, its seeded weights regenerated bit for bit and
checked, a .params file's names mapped to the graph's, and every damage said in one line."""

from __future__ import annotations

import io
import lzma
import shutil

import numpy as np
import pytest

from byoc_workbench.models import shipped, support, zoo
from byoc_workbench.models.shipped import ShippedError

SMALL = "resnet18_v1"


def test_every_listed_model_ships_with_its_seeded_weights_and_every_built_one_with_its_symbol():
    names = set(shipped.names())
    assert set(zoo.MODELS) <= names
    converts = {r["name"] for r in support.records() if r["status"] == "converts"}
    assert converts <= names
    for name in zoo.MODELS:
        model = shipped.read_shipped(name)
        assert model.seeded is not None and model.seeded["seed"] == 0, name
        assert model.input_shape == zoo.model_spec(name).input_shape, name
        assert model.task == zoo.model_spec(name).task and (model.classes or model.task == "pose"), name


def test_seeded_weights_regenerate_to_the_shipped_digest_and_differ_by_seed():
    model = shipped.read_shipped(SMALL)
    weights = model.seeded_weights(0)
    assert list(weights) == [p.name for p in model.used]
    assert shipped.arrays_sha256(weights.values()) == model.seeded["sha256"]
    assert all(w.dtype == np.float32 for w in weights.values())
    with pytest.raises(ShippedError, match="seed 0, not seed 3"):
        model.seeded_weights(3)


def test_a_damaged_carried_array_is_one_line_not_silently_other_weights(tmp_path, monkeypatch):
    folder = tmp_path / "zoo"
    folder.mkdir()
    for f in shipped.FOLDER.iterdir():
        if f.name.startswith(SMALL + "."):
            shutil.copy(str(f), folder / f.name)
    packed = folder / f"{SMALL}.seed0.npz.xz"
    carried = dict(np.load(io.BytesIO(lzma.decompress(packed.read_bytes()))))
    first = sorted(carried)[0]
    carried[first] = carried[first] + np.float32(1e-3)
    buffer = io.BytesIO()
    np.savez(buffer, **carried)
    packed.write_bytes(lzma.compress(buffer.getvalue()))
    monkeypatch.setattr(shipped, "FOLDER", folder)
    with pytest.raises(ShippedError, match="differ from the shipped ones") as err:
        shipped.read_shipped(SMALL).seeded_weights(0)
    assert "\n" not in err.value.line and err.value.line.startswith("error: ")
    (folder / f"{SMALL}.json.xz").write_bytes(lzma.compress(b"{not json"))
    with pytest.raises(ShippedError, match="cannot be read"):
        shipped.read_shipped(SMALL)
    with pytest.raises(ShippedError, match="not among the shipped models"):
        shipped.read_shipped("no_such_model")


def test_a_params_file_maps_by_structure_by_name_with_or_without_prefix_and_says_what_is_missing():
    model = shipped.read_shipped(SMALL)
    weights = model.seeded_weights(0)
    by_key = {p.key: weights[p.name] for p in model.used}
    assert any("." in k for k in by_key)  # save_parameters names a parameter by the block's structure
    for keyed in (
        by_key,
        {f"arg:{p.name}": weights[p.name] for p in model.used},
        {p.name[len(model.prefix) :]: weights[p.name] for p in model.used},
    ):
        got = model.from_file(keyed, "f.params")
        assert all(np.array_equal(got[n], weights[n]) for n in weights)
    short = dict(list(by_key.items())[1:])
    with pytest.raises(ShippedError, match="lacks 1 of resnet18_v1's parameters"):
        model.from_file(short, "f.params")
    first = model.used[0]
    wrong = {**by_key, first.key: np.zeros((2, 2), "float32")}
    with pytest.raises(ShippedError, match=r"of shape \(2, 2\)"):
        model.from_file(wrong, "f.params")


def test_load_model_without_mxnet_gives_the_shipped_graph_and_weights():
    loaded = zoo.load_model(SMALL, "untrained")
    model = shipped.read_shipped(SMALL)
    assert loaded.graph == model.graph and loaded.classes == model.classes and loaded.weights == "untrained"
    assert loaded.weights_label == "untrained weights (seed 0)"
    assert set(loaded.params) == {p.name for p in model.used}
