"""Write GluonCV's models as the package ships them (byoc_workbench/data/zoo): needs MXNet and GluonCV.

    .venv-mxnet/bin/python tools/ship_zoo.py              # every model GluonCV builds (about 15 minutes)
    .venv-mxnet/bin/python tools/ship_zoo.py --models resnet18_v1,ssd_512_resnet50_v1_coco
    .venv-mxnet/bin/python tools/ship_zoo.py --check      # compare the shipped files with a fresh export

Each model's symbol, parameter table and classes go to ``<name>.json.xz``; for the models the
workbench lists (``zoo.MODELS``), its seeded weights too, as a recipe over the seed's draws and the
arrays no draw gives (``<name>.seed0.npz.xz``). The recipe is checked before it is written: the
weights it regenerates are the seeded ones, bit for bit. See byoc_workbench/models/shipped.py.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from byoc_workbench.frontends import gluon  # noqa: E402
from byoc_workbench.models import seeded, shipped, support, zoo  # noqa: E402
from byoc_workbench.models.gluoncv_import import import_gluoncv  # noqa: E402

FOLDER = Path(str(shipped.FOLDER))
SEED = 0


def _classes(block, task: str) -> list | None:
    names = getattr(block, "classes", None)
    if isinstance(names, (list, tuple)):  # DANet's is a property of its class, never set
        return list(names)
    if task == "classification":
        imagenet = import_gluoncv("gluoncv.data.imagenet.classification", gluon.INSTALL_FIX)
        return list(imagenet.ImageNet1kAttr().classes)
    return None


def _recipe(model: shipped.ShippedModel, values: dict) -> tuple[dict, dict]:
    """How each parameter the graph reads comes from the seed's draws, and the arrays carried."""
    used = {p.name: values[p.name] for p in model.used}
    how, carried = shipped.recipe(used, shipped.draws(model.plan(), SEED))
    recipe = {"seed": SEED, "how": how, "sha256": shipped.arrays_sha256(used.values())}
    return recipe, carried


def export(name: str, task: str, family: str, folder: Path) -> str:
    """Write ``name`` into ``folder``; a few words on what was written."""
    listed = name in zoo.MODELS
    if listed:
        shape = zoo.model_spec(name).input_shape
        block = zoo.build_block(name, shape)
        seeded.seeded_init(block, SEED, shape)
    else:
        block = support.gluon_block(name)
        block.initialize()
        shape = support.traced_shape(name, block)
    traced = gluon.trace(block, [shape])
    keys = {p.name: key for key, p in block._collect_params_with_prefix().items()}
    table = tuple(
        shipped.Param(n, keys.get(n, n), tuple(p.shape), np.dtype(p.dtype).name, p.grad_req != "null")
        for n, p in sorted(block.collect_params().items())
    )
    model = shipped.ShippedModel(
        name=name,
        task=task,
        family=family,
        input_shape=tuple(shape),
        inputs=tuple(traced.inputs),
        prefix=block.prefix,
        graph=traced.graph,
        params=table,
        classes=tuple(_classes(block, task) or ()),
        seeded=None,
        made_with={p: importlib.metadata.version(p) for p in ("mxnet", "gluoncv")},
    )
    carried = onnx = None
    if listed:
        values = {k: np.asarray(v, "float32") for k, v in traced.params().items()}
        recipe, carried = _recipe(model, values)
        model = shipped.ShippedModel(**{**model.__dict__, "seeded": recipe})
        onnx = _onnx_without_weights(traced.graph, values, shape, folder / f"{name}.onnx")
    shipped.write_shipped(folder, model, carried, onnx)
    size = sum(f.stat().st_size for f in folder.glob(f"{name}.*"))
    return f"{size / 1024:.0f} KB" + (f", {len(carried)} arrays carried" if carried else "")


def _onnx_without_weights(graph: dict, params: dict, shape, scratch: Path) -> bytes | None:
    """MXNet's own ONNX export of the model (``mx.onnx.export_model``) without the initializers its parameters
    fill (a seat adds them back by name: :func:`byoc_workbench.measure.bench.anchors.export_onnx`), serialized;
    None where the exporter refuses the model."""
    import json
    import logging

    import mxnet as mx
    import onnx

    quiet = logging.getLogger()
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # the exporter logs every op, and warns that box_nms becomes class-agnostic
    try:
        sym = mx.sym.load_json(json.dumps(graph))
        nd = {k: mx.nd.array(v) for k, v in params.items()}
        mx.onnx.export_model(sym, nd, in_shapes=[tuple(shape)], in_types=[np.float32], onnx_file_path=str(scratch))
    except Exception as err:  # noqa: BLE001 - MXNet's exporter refuses ops in its own ways
        print(f"  no ONNX export: {type(err).__name__}: {str(err)[:120]}")
        return None
    finally:
        quiet.setLevel(level)
    model = onnx.load(str(scratch))
    scratch.unlink()
    kept = [t for t in model.graph.initializer if t.name not in params]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    return model.SerializeToString()


def _check_regenerates(name: str) -> None:
    model = shipped.read_shipped(name)
    if model.seeded is not None:
        model.seeded_weights(SEED)  # raises if the digest differs


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", help="comma-separated names (default: every model GluonCV builds, and zoo.MODELS)")
    p.add_argument("--out", type=Path, default=FOLDER, help=f"folder to write (default {FOLDER})")
    args = p.parse_args(argv)
    names = {n: (s.task, s.family) for n, s in zoo.MODELS.items()}
    names.update({r["name"]: (r["task"], r["family"]) for r in support.records() if r["status"] != "not built"})
    if args.models:
        wanted = args.models.split(",")
        names = {n: names.get(n) or (zoo.model_spec(n).task, zoo.model_spec(n).family) for n in wanted}
    args.out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for i, (name, (task, family)) in enumerate(sorted(names.items())):
        with tempfile.TemporaryDirectory() as scratch:
            try:
                said = export(name, task, family, Path(scratch))
            except Exception as err:  # noqa: BLE001 - GluonCV fails in many ways; the walk goes on
                failed += 1
                print(f"[{i + 1}/{len(names)}] {name}: not shipped ({type(err).__name__}: {err})", flush=True)
                continue
            for f in Path(scratch).iterdir():
                shutil.move(f, args.out / f.name)
        if args.out == FOLDER:
            _check_regenerates(name)
        print(f"[{i + 1}/{len(names)}] {name}: {said}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
