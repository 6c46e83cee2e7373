"""Which model? The one answer for every entry point: the CLI, the search, the ready-made builds and
the zoo workflow.

A model is named by a small dict, so that it can be measured in another process or on another
machine (:func:`byoc_workbench.measure.search.measure_candidate`)::

    {"kind": "demo"}
    {"kind": "ssd", "model": "ssd_512_resnet50_v1_coco", "weights": None, "image": None}
    {"kind": "onnx", "path": "model.onnx", "input_shapes": {"data": [1, 3, 224, 224]}}
    {"kind": "torch", "spec": "torchvision.models:resnet18", "shape": [1, 3, 224, 224]}  # or {"x": [...]}
    {"kind": "file", "path": "mymodel.py", "target": "mychip"}

with an optional ``"target"`` (whose rules make the units; default
``tensorrt``, ``byoc-target`` for the demo) and ``"rules"`` (the qualified
names switched on; default all). :func:`load` returns a :class:`Subject`:
the workbench (module and rules), the example inputs, the weights' mark, and
what a whole-model reference runs on (:attr:`Subject.source`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from pathlib import Path

import numpy as np
import tvm
import tvm_ffi

from byoc_workbench import stages
from byoc_workbench.errors import WorkbenchError
from byoc_workbench.flow.rules import check_rules, get_target, target_and_extra
from byoc_workbench.frontends.own import seeded_inputs
from byoc_workbench.frontends.torch_import import import_spec
from byoc_workbench.models import demo, weights, zoo
from byoc_workbench.models.images import model_input
from byoc_workbench.session import Workbench
from byoc_workbench.transforms import prepare
from byoc_workbench.user_file import import_user_file

logger = logging.getLogger(__name__)

KINDS = ("demo", "ssd", "onnx", "torch", "file")
#: A PyTorch program's input when none is given.
DEFAULT_SHAPE = [1, 3, 224, 224]


@dataclasses.dataclass
class Subject:
    """A model to search placements for.

    ``anchors(repeat)`` (when the model has a whole-model form, e.g. an ONNX
    file) returns ``({label: entry}, {label: why skipped})`` of the
    whole-model anchors; ``detection`` says outputs are SSD detections,
    compared as a set. ``source`` is what the whole-model references run on:
    the imported zoo model (MXNet and its ONNX export), an ONNX file's path, or None.
    """

    name: str
    workbench: object
    inputs: list
    description: dict
    detection: bool = False
    source: object = None
    notes: list = dataclasses.field(default_factory=list)

    @property
    def mark(self) -> str:
        return self.workbench.mark

    def model_key(self) -> str:
        """The model's content (module and inputs, not the rules) as a hex digest, for the cache."""
        h = hashlib.sha1(f"{tvm_ffi.structural_hash(self.workbench.mod):016x}".encode())
        for x in self.inputs:
            a = np.asarray(x, order="C")  # np.ascontiguousarray makes a 0-d array 1-d
            h.update(f"{a.dtype}{a.shape}".encode() + a.tobytes())
        return h.hexdigest()


def of(workbench, inputs, name: str = "model", detection: bool = False, source=None) -> Subject:
    """A subject for a workbench already made (not serialisable: measured in this process only)."""
    return Subject(
        name, workbench, [np.asarray(x) for x in inputs], {"kind": "workbench", "name": name}, detection, source
    )


def check_description(description: dict) -> dict:
    """``description`` when it names a kind :func:`load` knows, else a one-line error."""
    if not isinstance(description, dict) or description.get("kind") not in KINDS:
        raise WorkbenchError(
            f"Not a model description: {description!r:.80}", f"pass a dict with kind one of: {', '.join(KINDS)}"
        )
    return description


def load(description: dict) -> Subject:
    """The :class:`Subject` a description names, imported afresh (the SSD: about 15 s)."""
    d = check_description(description)
    kind = d["kind"]
    target = d.get("target")
    enabled = d.get("rules")
    if kind == "demo":
        wb = Workbench(demo.demo_module(), target or "byoc-target", enabled)
        return Subject("demo", wb, demo.demo_inputs(), d)
    if kind == "ssd":
        return _ssd(d, target, enabled)
    if kind == "onnx":
        shapes = d.get("input_shapes")
        wb = Workbench.from_onnx(d["path"], target or "tensorrt", input_shapes=shapes, enabled=enabled)
        return Subject(wb.model.name, wb, wb.model.inputs, d, wb.model.detection, Path(d["path"]))
    if kind == "torch":
        model = import_spec(d["spec"], shape=d.get("shape") or DEFAULT_SHAPE)
        wb = Workbench.from_model(model, target or "tensorrt", enabled)
        return Subject(model.name, wb, model.inputs, d)
    return _file(d, target, enabled)


def _ssd(d: dict, target, enabled) -> Subject:
    name = d.get("model") or zoo.DEFAULT_MODEL
    spec = zoo.model_spec(name)
    x, _ = model_input(d.get("image"), spec.input_shape)  # a bad picture fails before the import
    wb, imported = model_workbench(name, d.get("weights"), target or "tensorrt", enabled=enabled)
    return Subject(name, wb, [x], d, detection=spec.kind == "detection", source=imported)


def _file(d: dict, target, enabled) -> Subject:
    """A ``.py`` file defining ``mod`` (and perhaps ``rules``): inputs are seeded from ``main``'s shapes."""
    mod, user_rules = load_model_file(d["path"])
    tgt, extra = target_and_extra(target, user_rules, d["path"])
    wb = Workbench(mod, tgt, enabled, extra_rules=extra)
    params = wb.mod["main"].params
    shapes, dtypes = {}, {}
    for p in params:
        dims = getattr(p.ty, "shape", None)
        if dims is None or not hasattr(dims, "values") or not all(hasattr(v, "value") for v in dims.values):
            raise WorkbenchError(
                f"{d['path']}: main's input {p.name} has no static shape, so the search cannot make an input",
                "give main static input shapes",
            )
        shapes[p.name] = [int(v.value) for v in dims.values]
        dtypes[p.name] = str(p.ty.dtype)
    return Subject(d["path"], wb, seeded_inputs(shapes, dtypes), d)


def model_workbench(
    model: str | None = None, weights=None, target: str = "tensorrt", prune_rule=None, imported=None, enabled=None
) -> tuple:
    """``(Workbench, ImportedModel)`` for a zoo model, prepared for ``target``'s rules.

    The workbench's titles carry the weights' label when they are untrained;
    ``enabled`` names the rules switched on (all when None).
    """
    imported = imported or zoo.import_model(model or zoo.DEFAULT_MODEL, weights)
    mark = imported.weights_label if not imported.model.is_trained else ""
    prune_rule = prune_rule or stages.no_mac()
    wb = Workbench(prepare(imported.mod), get_target(target), enabled, prune_rule, mark=mark)
    return wb, imported


def load_model_file(path: str | Path):
    """Load ``mod`` (and optional ``rules``) from a user's Python file.

    Returns ``(mod, rules_or_None)``. Whatever the file does wrong (it raises,
    calls ``sys.exit``, defines no ``mod`` or ``rules`` of the wrong kind) is
    one :class:`WorkbenchError` naming the file and its line (see :func:`import_user_file`).
    """
    path = Path(path)
    module = import_user_file(path, "Model file", "pass 'demo' or the path of a .py file that defines mod.")
    mod = getattr(module, "mod", None)
    if not isinstance(mod, tvm.IRModule):
        raise WorkbenchError(
            f"Model file {path} does not define mod as a tvm.IRModule (got {type(mod).__name__}).",
            "assign your module to a top-level variable named mod, e.g. mod = MyModule.",
        )
    rules = getattr(module, "rules", None)
    return mod, None if rules is None else check_rules(rules, f"rules in {path}")


def _is_python(model: str) -> bool:
    """A path naming a Python file (``.py`` in any case); another existing file is refused by name."""
    if model.lower().endswith(".py"):
        return True
    path = Path(model)
    if path.is_file():
        raise WorkbenchError(
            f"{model} is neither a .py nor a .onnx file", "pass a .py file that defines mod, or a .onnx file"
        )
    return path.exists()  # a directory: load_model_file says so


def module_and_rules(model: str) -> tuple:
    """``(module, user_rules)`` for ``demo`` or a Python file defining ``mod``."""
    if model == "demo":
        return demo.demo_module(), None
    if _is_python(model):
        return load_model_file(model)
    raise WorkbenchError(
        f"Unknown model '{model}'.", "use demo, ssd, a zoo model's name, or the path of a .py file that defines mod."
    )


def zoo_name(what: str, model_option: str) -> str | None:
    """The zoo model a command names: ``ssd`` stands for ``--model`` (SSD-ResNet50 by default),
    a zoo model's name for itself; None for anything else (``demo``, a file)."""
    if what == "ssd":
        return model_option
    return what if what in weights.MODELS else None


# --- the command line's model arguments ------------------------------------------------------------

#: What to type when a command was given no model, or one it does not know.
NAME_A_MODEL = "name one: demo, ssd, a zoo model's name, a .py or .onnx file, or --torch module:factory"


def is_own(model: str | None, torch_spec: str | None = None) -> bool:
    """An ONNX file (``.onnx`` in any case) or a PyTorch ``module:factory``: the user's own model
    (see :mod:`byoc_workbench.measure.byom`)."""
    return bool(torch_spec) or (model or "").lower().endswith(".onnx")


def check_no_shapes(model, shapes) -> None:
    """A one-line error when input shapes were given for a model that takes none (demo, the zoo, a .py file)."""
    if shapes:
        raise WorkbenchError(
            f"--input-shape applies to a .onnx file or --torch, not to {model}",
            "remove --input-shape (this model's inputs are fixed)",
        )


def own_workbench(path, torch_spec=None, shapes=None, target=None, enabled=None, prune_rule=None) -> Workbench:
    """The workbench of an ONNX file, or of a PyTorch ``module:factory`` (default target: tensorrt).

    ``shapes`` fixes the inputs' shapes: ``{name: shape}``, one shape, or None
    (the file's own; :data:`DEFAULT_SHAPE` for PyTorch, whose names are ``forward``'s parameters).
    """
    target = target or "tensorrt"
    if torch_spec:
        if path:
            raise WorkbenchError(f"Both {path} and --torch were given", "give one model: a file, or --torch")
        model = import_spec(torch_spec, shape=shapes or DEFAULT_SHAPE)
        return Workbench.from_model(model, target, enabled, prune_rule)
    return Workbench.from_onnx(path, target, input_shapes=shapes, enabled=enabled, prune_rule=prune_rule)


def workbench_for(
    model, ssd_model, weights=None, target=None, enabled=None, prune_rule=None, torch_spec=None, shapes=None
) -> tuple:
    """``(Workbench, name, collapse)`` for any model a command names.

    ``model`` is demo, ssd (``ssd_model``, with ``weights``), a zoo model's name, a
    ``.py`` or ``.onnx`` file, or None with ``torch_spec``. ``collapse`` says the
    model is big enough to draw collapsed: true for everything but demo and ``.py`` files.
    """
    name = zoo_name(model, ssd_model)
    if name:
        check_no_shapes(model, shapes)
        wb, _ = model_workbench(name, weights, target or "tensorrt", prune_rule, enabled=enabled)
        return wb, name, True
    if is_own(model, torch_spec):
        wb = own_workbench(model, torch_spec, shapes, target, enabled, prune_rule)
        return wb, wb.model.name, True
    if model is None:
        raise WorkbenchError("A model is required: model, or --torch MODULE:FACTORY", NAME_A_MODEL)
    check_no_shapes(model, shapes)
    mod, user_rules = module_and_rules(model)
    target, extra = target_and_extra(target, user_rules, model)
    return Workbench(mod, target, enabled=enabled, prune_rule=prune_rule, extra_rules=extra), model, False


def zoo_model(what: str | None, model_option: str) -> str:
    """The zoo model ``what`` names (see :func:`zoo_name`), or the one-line error listing the zoo's names."""
    name = zoo_name(what, model_option)
    if what is None:
        raise WorkbenchError("A model is required: model, or --torch MODULE:FACTORY", NAME_A_MODEL)
    if name is None:
        weights.model_spec(what)  # the one-line error that lists the zoo's names
    return name


def describe(model, ssd_model, weights=None, image=None, torch_spec=None, shapes=None) -> dict:
    """The description (see the module's docstring) of the model a command names, for :func:`load`."""
    if torch_spec:
        if model:
            raise WorkbenchError(f"Both {model} and --torch were given", "give one model: a file, or --torch")
        return {"kind": "torch", "spec": torch_spec, "shape": shapes or None}
    if model is None:
        raise WorkbenchError("A model is required: model, or --torch MODULE:FACTORY", NAME_A_MODEL)
    if is_own(model):
        return {"kind": "onnx", "path": model, "input_shapes": shapes}
    check_no_shapes(model, shapes)
    if model == "demo":
        return {"kind": "demo"}
    name = zoo_name(model, ssd_model)
    if name:
        return {"kind": "ssd", "model": name, "weights": weights, "image": image}
    if _is_python(model):
        return {"kind": "file", "path": model}
    raise WorkbenchError(f"Unknown model '{model}'", NAME_A_MODEL)
