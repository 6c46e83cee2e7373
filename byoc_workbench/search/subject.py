"""What a search measures, from a serialisable description: the model, its inputs, how outputs compare.

A description is a small dict, so that one candidate can be measured in
another process or on another machine (:func:`byoc_workbench.search.measure_candidate`)::

    {"kind": "demo"}
    {"kind": "ssd", "model": "ssd_512_resnet50_v1_coco", "weights": None, "image": None}
    {"kind": "onnx", "path": "model.onnx", "input_shapes": {"data": [1, 3, 224, 224]}}
    {"kind": "torch", "spec": "torchvision.models:resnet18", "shape": [1, 3, 224, 224]}
    {"kind": "file", "path": "mymodel.py", "target": "mychip"}

with an optional ``"target"`` (whose rules make the units; default
``tensorrt``, ``byoc-target`` for the demo) and ``"rules"`` (the qualified
names switched on; default all).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Callable

import numpy as np

from ..errors import WorkbenchError

logger = logging.getLogger(__name__)

KINDS = ("demo", "ssd", "onnx", "torch", "file")


@dataclasses.dataclass
class Subject:
    """A model to search placements for.

    ``anchors(repeat)`` (when the model has a whole-model form, e.g. an ONNX
    file) returns ``({label: entry}, {label: why skipped})`` of the
    whole-model anchors; ``detection`` says outputs are SSD detections,
    compared as a set.
    """

    name: str
    workbench: object
    inputs: list
    description: dict
    detection: bool = False
    anchors: Callable | None = None
    notes: list = dataclasses.field(default_factory=list)

    @property
    def mark(self) -> str:
        return self.workbench.mark

    def key(self) -> str:
        """The model's content (module and inputs, not the rules) as a hex digest, for the cache."""
        import tvm_ffi

        h = hashlib.sha1(f"{tvm_ffi.structural_hash(self.workbench.mod):016x}".encode())
        for x in self.inputs:
            a = np.ascontiguousarray(x)
            h.update(f"{a.dtype}{a.shape}".encode() + a.tobytes())
        return h.hexdigest()


def of(workbench, inputs, name: str = "model", detection: bool = False, anchors=None) -> Subject:
    """A subject for a workbench already made (not serialisable: measured in this process only)."""
    return Subject(
        name, workbench, [np.asarray(x) for x in inputs], {"kind": "workbench", "name": name}, detection, anchors
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
    from ..session import Workbench

    d = check_description(description)
    kind = d["kind"]
    target = d.get("target")
    enabled = d.get("rules")
    if kind == "demo":
        from ..models import demo

        wb = Workbench(demo.demo_module(), target or "byoc-target", enabled)
        return Subject("demo", wb, demo.demo_inputs(), d)
    if kind == "ssd":
        return _ssd(d, target, enabled)
    if kind == "onnx":
        shapes = d.get("input_shapes")
        wb = Workbench.from_onnx(d["path"], target or "tensorrt", input_shapes=shapes, enabled=enabled)
        anchors = _file_anchors(d["path"], wb.model.inputs)
        return Subject(wb.model.name, wb, wb.model.inputs, d, wb.model.detection, anchors)
    if kind == "torch":
        from ..models.torch_import import import_spec

        model = import_spec(d["spec"], shape=d.get("shape") or [1, 3, 224, 224])
        wb = Workbench.from_model(model, target or "tensorrt", enabled)
        return Subject(model.name, wb, model.inputs, d)
    return _file(d, target, enabled)


def _ssd(d: dict, target, enabled) -> Subject:
    from .. import workflow
    from ..models import zoo
    from ..models.images import model_input

    name = d.get("model") or zoo.DEFAULT_MODEL
    spec = zoo.model_spec(name)
    x, _ = model_input(d.get("image"), spec.input_shape)  # a bad picture fails before the import
    wb, imported = workflow.model_workbench(name, d.get("weights"), target or "tensorrt", enabled=enabled)

    def anchors(repeat: int) -> tuple:
        from .. import bench

        entries = {}
        lat, _ = bench.mxnet_anchor(imported.model.block, x, repeat, progress=False)
        entries["mxnet"] = lat.to_json() | {"ran_on": "mxnet (hybridized, static_alloc)"}
        found, _, skipped = bench.export_anchors(imported.model, x, repeat, progress=False)
        for label, entry in found.items():
            entries[label] = entry | {"note": bench.CLASS_AGNOSTIC}
        return entries, skipped

    return Subject(name, wb, [x], d, detection=spec.kind == "detection", anchors=anchors)


def _file_anchors(path, inputs):
    def anchors(repeat: int) -> tuple:
        from .. import bench

        entries, _, skipped = bench.whole_model_anchors(path, inputs, repeat, progress=False)
        return entries, skipped

    return anchors


def _file(d: dict, target, enabled) -> Subject:
    """A ``.py`` file defining ``mod`` (and perhaps ``rules``): inputs are seeded from ``main``'s shapes."""
    from ..flow.rules import target_and_extra
    from ..models.own import seeded_inputs
    from ..models.user_file import load_model_file
    from ..session import Workbench

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
