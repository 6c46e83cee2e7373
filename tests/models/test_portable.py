"""A zoo model exported for a machine with numpy and TVM only (the GPU check's), from the shipped model (no MXNet):
loaded back there, it is the module the workbench imports, weight for weight; a recipe that does not regenerate the
weights is refused in one line, never run."""

import json

import pytest
import tvm_ffi
from tvm import relax

from byoc_workbench.errors import WorkbenchError
from byoc_workbench.models import portable, zoo


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    return portable.export(zoo.DEFAULT_MODEL, tmp_path_factory.mktemp("export") / "ssd")


def test_the_export_loads_as_the_imported_module(export):
    loaded = portable.load(export)
    assert loaded.task == "detection" and loaded.inputs[0].shape == (1, 3, 512, 512)
    assert "untrained weights" in loaded.mark and "regenerated from the seed" in loaded.mark
    imported = zoo.import_model(zoo.DEFAULT_MODEL, weights="untrained").mod
    normal = relax.transform.Normalize()
    assert tvm_ffi.structural_hash(normal(loaded.mod)) == tvm_ffi.structural_hash(normal(imported))


def test_most_weights_are_regenerated_not_carried(export):
    recipe = json.loads((export / "recipe.json").read_text())
    kinds = [("scale" in h and "scaled") or ("draw" in h and "drawn") or "carried" for h in recipe["params"].values()]
    assert kinds.count("drawn") > 200 and kinds.count("scaled") > 0
    size = sum(p.stat().st_size for p in export.iterdir())
    assert size < 4 << 20, f"the export is {size / 2**20:.1f} MiB: the SSD's weights are 200 MB"


def test_a_recipe_that_draws_other_weights_is_refused(export, tmp_path):
    for f in export.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    recipe = json.loads((tmp_path / "recipe.json").read_text())
    recipe["seed"] += 1
    (tmp_path / "recipe.json").write_text(json.dumps(recipe))
    with pytest.raises(WorkbenchError, match="regenerated here differ"):
        portable.load(tmp_path)
    with pytest.raises(WorkbenchError, match="is not a model export"):
        portable.load(tmp_path / "nothing")
