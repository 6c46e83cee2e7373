"""A zoo model as a folder that a machine without MXNet loads: its Relax module as TVMScript, its weights
regenerated there from the seed, and its input.

The GPU machine this project is lent has Python 3.12, numpy 2 and no MXNet; the shipped zoo
(:mod:`.shipped`) imports a zoo model there too, and this export carries the module as it was
imported here, for a check that must run the very module this machine built. The SSD's 200 MB of
weights do not fit in what one call may carry. Most of those weights are the seed's draws as they came
out (:func:`byoc_workbench.models.shipped.draw`, numpy only), or a draw times one number; the rest
(batch-norm statistics, biases, anchors) are a few MB. So :func:`export` writes:

- ``module.py``: the imported module with its weights as ``main``'s parameters (TVMScript; TVM 0.27's
  ``save_json`` crashes on the SSD);
- ``recipe.json``: the seed, the draws in order, and how each parameter comes from them;
- ``carried.npz``: the parameters that are not draws, and the input picture;
- the SHA-256 of the weights, which :func:`load` checks after regenerating them.

:func:`load` parses the module, regenerates the weights, checks them and binds
them: the module the workbench imports on a machine with MXNet, weight for weight.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import tvm
from tvm import relax

from byoc_workbench.errors import WorkbenchError
from byoc_workbench.models import images, shipped, zoo

FORMAT = 2  # 2: the recipe of shipped.recipe


@dataclasses.dataclass
class Portable:
    """A model loaded from an export: the module with its weights bound, its input, and what it is."""

    name: str
    mod: tvm.IRModule
    inputs: list
    task: str  # the zoo's kind: detection, classification...
    mark: str  # e.g. "untrained weights (seed 0), regenerated from the seed"


def export(name: str, out: str | Path, input_shape=None, seed: int = 0) -> Path:
    """Write ``name`` (a zoo model with seeded weights) to the folder ``out``; needs MXNet and GluonCV.

    The recipe is checked before it is written: the weights it regenerates are the imported ones, bit for bit.
    """
    spec = zoo.model_spec(name)
    shape = tuple(input_shape or spec.input_shape)
    loaded = zoo.load_model(name, "untrained", seed=seed, input_shape=shape)
    imported = zoo.import_model(name, input_shape=shape, bind_params=False, loaded=loaded)
    params = {k: np.asarray(v, "float32") for k, v in imported.params.items()}
    plan = shipped.read(name).plan()
    how, carried = shipped.recipe(params, shipped.draws(plan, seed))
    x, _ = images.model_input(None, shape)
    recipe = {
        "format": FORMAT,
        "name": name,
        "task": spec.kind,
        "input_shape": list(shape),
        "seed": seed,
        "mark": f"{zoo.UNTRAINED_LABEL} (seed {seed}), regenerated from the seed",
        "plan": [[n, list(s)] for n, s in plan],
        "params": how,
        "sha256": shipped.digest(params.values()),
        "tvm": tvm.__version__,
    }
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "module.py").write_text(imported.mod.script(show_meta=True))
    np.savez_compressed(out / "carried.npz", input=x, **{f"param:{k}": v for k, v in carried.items()})
    (out / "recipe.json").write_text(json.dumps(recipe, indent=1))
    if shipped.digest(_weights(recipe, np.load(out / "carried.npz")).values()) != recipe["sha256"]:
        raise RuntimeError(f"{name}: the recipe does not regenerate the imported weights")
    return out


def _weights(recipe: dict, carried) -> dict:
    draws = shipped.draws(recipe["plan"], recipe["seed"])
    out = {}
    for key, how in recipe["params"].items():  # as shipped.recipe wrote them
        if "carried" in how:
            out[key] = np.asarray(carried[f"param:{key}"], "float32")
        else:
            out[key] = draws[key] * np.float32(how["scale"]) if "scale" in how else draws[key]
    return out


def load(folder: str | Path) -> Portable:
    """The model :func:`export` wrote to ``folder``, its weights regenerated, checked and bound (TVM and numpy only)."""
    folder = Path(folder)
    try:
        recipe = json.loads((folder / "recipe.json").read_text())
        text = (folder / "module.py").read_text()
        carried = np.load(folder / "carried.npz")
    except (OSError, ValueError) as err:
        raise WorkbenchError(
            f"{folder} is not a model export ({err})", "write one with tools/gpu_pack.py or portable.export"
        ) from None
    if recipe.get("format") != FORMAT:
        raise WorkbenchError(f"{folder} is an export of format {recipe.get('format')}", "export it again")
    weights = _weights(recipe, carried)
    if shipped.digest(weights.values()) != recipe["sha256"]:
        raise WorkbenchError(
            f"{folder}: the weights regenerated here differ from the exported ones",
            "export again with this numpy's RandomState (it is meant to give the same draws everywhere)",
        )
    mod = tvm.script.from_source(text)
    bound = relax.transform.BindParams("main", {k: tvm.runtime.tensor(v) for k, v in weights.items()})(mod)
    x = np.asarray(carried["input"], "float32")
    return Portable(recipe["name"], bound, [x], recipe["task"], recipe["mark"])
