"""Which model? The one answer for every entry point: the CLI, the search, the ready-made builds and the zoo workflow.

A model is named by a :class:`ModelRef`, made from a command's arguments or Python values by :meth:`ModelRef.parse`
and written as a small dict (:meth:`ModelRef.to_json`), so that it can be measured in another process or on another
machine (:func:`byoc_workbench.measure.search.measure_candidate`)::

    {"kind": "demo"}
    {"kind": "zoo", "model": "ssd_512_resnet50_v1_coco", "weights": None, "image": None}  # "ssd" reads as "zoo"
    {"kind": "onnx", "path": "model.onnx", "input_shapes": {"data": [1, 3, 224, 224]}}
    {"kind": "torch", "spec": "torchvision.models:resnet18", "shape": [1, 3, 224, 224]}  # or {"x": [...]}
    {"kind": "file", "path": "mymodel.py", "target": "mychip"}

with an optional ``"target"`` (whose rules make the units; default ``tensorrt``, ``byoc-target`` for the demo) and
``"rules"`` (the qualified names switched on; default all). Each kind is a class (:class:`ModelKind`; a reference's
is :attr:`ModelRef.model`) that loads its model and answers what the commands ask of it, so no caller compares
kinds. :func:`load` returns a :class:`Subject`: the workbench (module and rules), the example inputs, the weights'
mark, and what a whole-model reference runs on (:attr:`Subject.source`).
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import hashlib
import logging
import os
import time
from pathlib import Path
from typing import ClassVar, Literal, NamedTuple, get_args

import numpy as np
import tvm
import tvm_ffi

from byoc_workbench import stages
from byoc_workbench.core.errors import WorkbenchError, did_you_mean, true_or_false
from byoc_workbench.core.transforms import prepare
from byoc_workbench.core.user_file import import_user_file
from byoc_workbench.flow.rules import check_rules, get_target, target_and_extra
from byoc_workbench.frontends.own import seeded_inputs
from byoc_workbench.frontends.torch_import import import_spec
from byoc_workbench.models import demo, zoo
from byoc_workbench.models.images import model_input
from byoc_workbench.session import Workbench

logger = logging.getLogger(__name__)

Kind = Literal["demo", "zoo", "onnx", "torch", "file"]
KINDS: tuple[Kind, ...] = get_args(Kind)
#: A PyTorch program's input when none is given.
DEFAULT_SHAPE = [1, 3, 224, 224]
#: What to type when a command was given no model, or one it does not know.
NAME_A_MODEL = "name one: demo, ssd, a zoo model's name, a .py or .onnx file, or --torch module:factory"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelRef:
    """Which model: ``kind`` (one of :data:`KINDS`) and what names it of that kind.

    ``name`` is a zoo model's (with ``weights`` and ``image``), ``path`` an ONNX or
    Python file's, ``spec`` a PyTorch ``module:factory``; ``shapes`` fixes an ONNX
    file's or PyTorch program's inputs; ``target`` and ``rules`` make the units.
    """

    kind: Kind
    name: str | None = None
    path: str | None = None
    spec: str | None = None
    shapes: object = None
    weights: str | None = None
    image: str | None = None
    target: str | None = None
    rules: tuple | None = None

    @classmethod
    def parse(
        cls,
        model,
        zoo_model=None,
        *,
        weights=None,
        image=None,
        torch=None,
        shapes=None,
        target=None,
        rules=None,
        kinds=KINDS,
        alone=True,
    ) -> ModelRef:
        """The model a command (or a caller in Python) names: ``model`` is demo, ssd (``zoo_model``, with ``weights``
        and ``image``), a zoo model's name, a ``.onnx`` or ``.py`` file, or None with ``torch`` (``module:factory``).
        ``shapes`` fix an ONNX file's or PyTorch program's inputs; ``target`` and ``rules`` (names switched on) make
        the units. A model of a kind not in ``kinds`` is one line saying which kinds the command takes. A command
        of several models parses each with ``alone`` False, then checks the zoo's options against them all
        (:func:`check_zoo_options`)."""
        ref = cls._parse(model, zoo_model, weights, image, torch, shapes, "file" in kinds)
        if alone:
            check_zoo_options([(ref, model)], zoo_model=zoo_model, weights=weights, image=image)
        if ref.kind not in kinds:
            said = [_CLASSES[k].said for k in kinds]
            takes = " or ".join(said) if len(said) < 3 else f"{', '.join(said[:-1])} or {said[-1]}"
            fix = f"use one of: {', '.join(zoo.MODELS)}" if kinds == ("zoo",) else f"pass {takes}"
            if ref.kind == "file" and "torch" in kinds:  # how docs/cli.md passes a PyTorch program: its factory
                path = Path(ref.path)
                fix = f"for a PyTorch program: PYTHONPATH={path.parent} byoc-workbench ... --torch {path.stem}:FACTORY"
            raise WorkbenchError(f"{ref.label} is {ref.model.said}; this command takes {takes}", fix)
        return dataclasses.replace(ref, target=target or None, rules=None if rules is None else tuple(rules))

    @classmethod
    def _parse(cls, model, zoo_model, weights, image, torch, shapes, files: bool) -> ModelRef:
        if torch:
            if model:
                raise WorkbenchError(f"Both {model} and --torch were given", "give one model: a file, or --torch")
            return cls(kind="torch", spec=torch, shapes=shapes or None)
        if model is None:
            raise WorkbenchError("A model is required: model, or --torch MODULE:FACTORY", NAME_A_MODEL)
        model = os.fspath(model) if isinstance(model, os.PathLike) else model
        if not isinstance(model, str):
            raise WorkbenchError(f"A model is named by a string, got {type(model).__name__}", NAME_A_MODEL)
        if not model.strip():
            raise WorkbenchError(f"The model's name is empty ({model!r})", NAME_A_MODEL)
        if model.lower().endswith(".onnx"):
            return cls(kind="onnx", path=model, shapes=shapes)
        check_no_shapes(model, shapes)
        name = (zoo_model or zoo.DEFAULT_MODEL) if model == "ssd" else model if model in zoo.MODELS else None
        if model == "demo":
            return cls(kind="demo")
        if name:
            return cls(kind="zoo", name=name, weights=weights, image=image)
        if Path(model).is_dir():
            raise WorkbenchError(f"{model} is a directory, not a model", NAME_A_MODEL)
        if model.lower().endswith(".py"):
            return cls(kind="file", path=model)
        if Path(model).exists():
            raise _not_a_model(model, files)
        fix = NAME_A_MODEL if files else f"use one of: {', '.join(zoo.MODELS)}"
        raise zoo.UnknownModelError(f"Unknown model '{model}'{did_you_mean(model, ('demo', 'ssd', *zoo.MODELS))}", fix)

    def to_json(self) -> dict[str, object]:
        """The dict that names this model (see the module's docstring), for :meth:`from_json`."""
        d = {"kind": self.kind} | {key: getattr(self, f) for f, key in self.model.keys.items()}
        if self.target:
            d["target"] = self.target
        if self.rules is not None:
            d["rules"] = list(self.rules)
        return d

    @classmethod
    def from_json(cls, description: dict) -> ModelRef:
        """The reference a dict names (``"ssd"`` reads as ``"zoo"``), else a one-line error."""
        kind = description.get("kind") if isinstance(description, dict) else None
        kind = "zoo" if kind == "ssd" else kind
        if kind not in KINDS:
            raise WorkbenchError(
                f"Not a model description: {description!r:.80}", f"pass a dict with kind one of: {', '.join(KINDS)}"
            )
        return _CLASSES[kind].read(description)

    @property
    def imported(self) -> bool:
        """A model imported from a framework (the zoo, an ONNX file, PyTorch): large, and drawn collapsed."""
        return self.model.imported

    @property
    def model(self) -> ModelKind:
        """This model's kind (:class:`ModelKind`): it loads the model and answers what the commands ask."""
        return _CLASSES[self.kind](self)

    @property
    def label(self) -> str:
        """What a result calls the model: its name, path or spec, else its kind."""
        return self.name or self.path or self.spec or self.kind


@dataclasses.dataclass
class Subject:
    """A model loaded (:func:`load`): what every command needs of it.

    ``ref`` names it (None for a workbench made in this process, :func:`of`); ``inputs`` are its example inputs (a
    ``.py`` file's seeded from ``main``'s shapes when first asked for); ``task`` is a zoo model's (detection, ...),
    ``"detection"`` for your own model whose outputs are SSD detections, compared as a set. ``source`` is what the
    whole-model references run on: the imported zoo model (MXNet and its ONNX export), an ONNX file's path, or None.
    ``notes`` say how long the import took.
    """

    name: str
    workbench: Workbench
    given_inputs: object  # the inputs, or () -> them
    ref: ModelRef | None
    task: str | None = None
    family: str | None = None  # a zoo model's
    source: object = None
    notes: tuple = ()

    @functools.cached_property
    def inputs(self) -> list:
        return self.given_inputs() if callable(self.given_inputs) else self.given_inputs

    @property
    def detection(self) -> bool:
        return self.task == "detection"

    @property
    def alone(self):
        """The module TVM alone builds: the model as imported, before the workbench prepared it."""
        if isinstance(self.source, zoo.ImportedModel):
            return self.source.mod
        return self.workbench.mod if self.workbench.model is None else self.workbench.model.mod

    @property
    def loaded(self) -> zoo.LoadedModel | None:
        """A zoo model's :class:`~byoc_workbench.models.zoo.LoadedModel` (its block and task); else None."""
        return self.source.model if isinstance(self.source, zoo.ImportedModel) else None

    @property
    def onnx_file(self) -> Path | None:
        """The ONNX file a whole-model reference runs on as it is; None for another model."""
        return self.source if isinstance(self.source, Path) else None

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
    if not isinstance(workbench, Workbench):
        raise _wrong("workbench", workbench, "a Workbench", "pass one, e.g. Workbench(mod, target)")
    arrays = [np.asarray(x) for x in inputs] if isinstance(inputs, (list, tuple)) else None
    if arrays is None or any(a.dtype.kind not in "biufc" for a in arrays):
        raise _wrong("inputs", inputs, "a list of arrays of numbers", "pass one NumPy array per input of main")
    detection = true_or_false(detection, "detection is True or False", "pass detection=True for SSD detections")
    return Subject(name, workbench, arrays, None, "detection" if detection else None, source=source)


def of_own(wb, ref: ModelRef | None = None, source=None) -> Subject:
    """A subject for a workbench holding your own model (``Workbench.from_onnx``, ``from_torch``)."""
    m = wb.model if isinstance(wb, Workbench) else None
    if m is None:
        raise _wrong("wb", wb, "a Workbench holding your own model", "pass what Workbench.from_onnx(path) gave")
    note = f"import: {m.import_s:.1f} s ({m.source_ops} source ops)"
    return Subject(m.name, wb, m.inputs, ref, "detection" if m.detection else None, source=source, notes=(note,))


def load(ref, prune_rule=None) -> Subject:
    """The :class:`Subject` a :class:`ModelRef` (or its dict) names, imported afresh (the SSD: about 15 s).

    ``prune_rule`` prunes the workbench's subgraphs (default: those without a MAC op).
    """
    ref = ref if isinstance(ref, ModelRef) else ModelRef.from_json(ref)
    return ref.model.load(None if ref.rules is None else list(ref.rules), prune_rule)


@dataclasses.dataclass(frozen=True)
class ModelKind(abc.ABC):
    """A model of one kind, named by ``ref``: it loads itself and knows what the commands ask of it."""

    ref: ModelRef
    kind: ClassVar[Kind]
    said: ClassVar[str]  # what it is, in a sentence: "an ONNX file"
    #: Its :class:`ModelRef` fields and the keys its dict writes them under (what search caches and Ray tasks pass).
    keys: ClassVar[dict[str, str]] = {}
    #: Imported from a framework (the zoo, an ONNX file, PyTorch): large, and drawn collapsed.
    imported: ClassVar[bool] = False
    #: ``run`` checks its outputs against the framework it came from (a zoo model's are read as its task reads them).
    checked: ClassVar[bool] = False
    #: ``bench`` times it (a .py file has no framework to time it against).
    benched: ClassVar[bool] = True
    #: The backend its ready-made builds offload to when none is named (None: its target's own codegen).
    default_backend: ClassVar[str | None] = "onnxruntime"
    #: A backend with a target of its own partitions it by that target's rules (its ready-made builds).
    partitioned_by_backend: ClassVar[bool] = False

    @classmethod
    def read(cls, description: dict) -> ModelRef:
        """The reference its dict names (see the module's docstring)."""
        fields = {f: description.get(key) for f, key in cls.keys.items()}
        rules = description.get("rules")
        rules = None if rules is None else tuple(rules)
        return ModelRef(kind=cls.kind, target=description.get("target"), rules=rules, **fields)

    def with_picture(self, weights, image) -> ModelRef:
        """Its reference with ``weights`` and ``image`` where it names none (a zoo model's); else as it is."""
        return self.ref

    @property
    def target(self) -> str:
        return self.ref.target or "tensorrt"

    @abc.abstractmethod
    def load(self, enabled: list | None, prune_rule) -> Subject:
        """The :class:`Subject`, imported afresh: the rules ``enabled`` (all when None), pruned by ``prune_rule``."""


class DemoModel(ModelKind):
    """The Part 1 demo, written in Relax: nothing to check it against but TVM alone."""

    kind = "demo"
    said = "the Relax demo"
    default_backend = None
    partitioned_by_backend = True

    def load(self, enabled, prune_rule) -> Subject:
        tgt, extra = target_and_extra(self.ref.target, None, None)
        wb = Workbench(demo.demo_module(), tgt, enabled, prune_rule, extra_rules=extra)
        return Subject("demo", wb, demo.demo_inputs(), self.ref)


class ZooModel(ModelKind):
    """A GluonCV zoo model (``"ssd"`` is one), imported from MXNet with its weights, on a picture."""

    kind = "zoo"
    said = "a GluonCV zoo model"
    keys = {"name": "model", "weights": "weights", "image": "image"}
    imported = True

    @classmethod
    def read(cls, description: dict) -> ModelRef:
        ref = super().read(description)
        return dataclasses.replace(ref, name=ref.name or zoo.DEFAULT_MODEL)

    def with_picture(self, weights, image) -> ModelRef:
        return dataclasses.replace(self.ref, weights=self.ref.weights or weights, image=self.ref.image or image)

    def load(self, enabled, prune_rule) -> Subject:
        ref, t0 = self.ref, time.perf_counter()
        spec = zoo.model_spec(ref.name)
        x, _ = model_input(ref.image, spec.input_shape)  # a bad picture fails before the import
        wb, imported = model_workbench(ref.name, ref.weights, self.target, prune_rule, enabled=enabled)
        note = f"import and prepare: {time.perf_counter() - t0:.1f} s"
        return Subject(ref.name, wb, [x], ref, spec.task, spec.family, source=imported, notes=(note,))


class OnnxModel(ModelKind):
    """An ONNX file, checked against ONNX Runtime on the file."""

    kind = "onnx"
    said = "an ONNX file"
    keys = {"path": "path", "shapes": "input_shapes"}
    imported = checked = True

    def load(self, enabled, prune_rule) -> Subject:
        ref = self.ref
        wb = Workbench.from_onnx(ref.path, self.target, input_shapes=ref.shapes, enabled=enabled, prune_rule=prune_rule)
        return of_own(wb, ref, Path(ref.path))


class TorchModel(ModelKind):
    """A PyTorch program (``module:factory``), checked against eager PyTorch."""

    kind = "torch"
    said = "a PyTorch program"
    keys = {"spec": "spec", "shapes": "shape"}
    imported = checked = True

    def load(self, enabled, prune_rule) -> Subject:
        program = import_spec(self.ref.spec, shape=self.ref.shapes or DEFAULT_SHAPE)
        return of_own(Workbench.from_model(program, self.target, enabled, prune_rule), self.ref)


class PythonFileModel(ModelKind):
    """A Python file that defines ``mod`` (and perhaps ``rules``); its inputs seeded from ``main``'s shapes."""

    kind = "file"
    said = "a Python file"
    keys = {"path": "path"}
    benched = False

    def load(self, enabled, prune_rule) -> Subject:
        path = self.ref.path
        mod, user_rules = load_model_file(path)
        tgt, extra = target_and_extra(self.ref.target, user_rules, path)
        wb = Workbench(mod, tgt, enabled, prune_rule, extra_rules=extra)
        return Subject(path, wb, functools.partial(_seeded, wb, path), self.ref)


_CLASSES = {k.kind: k for k in (DemoModel, ZooModel, OnnxModel, TorchModel, PythonFileModel)}


def _seeded(wb, path) -> list:
    """Inputs for a ``.py`` file's module, seeded from ``main``'s static shapes, else a one-line error."""
    shapes, dtypes = {}, {}
    for p in wb.mod["main"].params:
        dims = getattr(p.ty, "shape", None)
        if dims is None or not hasattr(dims, "values") or not all(hasattr(v, "value") for v in dims.values):
            raise WorkbenchError(
                f"{path}: main's input {p.name} has no static shape, so the search cannot make an input",
                "give main static input shapes",
            )
        shapes[p.name] = [int(v.value) for v in dims.values]
        dtypes[p.name] = str(p.ty.dtype)
    return seeded_inputs(shapes, dtypes)


class ZooWorkbench(NamedTuple):
    """A zoo model's workbench, and the model as imported (:func:`model_workbench`)."""

    workbench: Workbench
    imported: zoo.ImportedModel


def zoo_ref(model) -> ModelRef:
    """The zoo model ``model`` names: a :class:`ModelRef` of the zoo, or a name :meth:`ModelRef.parse` reads
    as one (``"ssd"``, ``"resnet18_v1"``); else the one-line error that lists the zoo's names."""
    ref = model if isinstance(model, ModelRef) else ModelRef.parse(model, kinds=("zoo",))
    zoo.model_spec(ref.name if ref.kind == "zoo" else ref.label)
    return ref


def model_workbench(
    model: str | ModelRef | None = None,
    weights=None,
    target: str = "tensorrt",
    prune_rule=None,
    imported=None,
    enabled=None,
) -> ZooWorkbench:
    """``(Workbench, ImportedModel)`` for a zoo model (a name or a :class:`ModelRef`, :func:`zoo_ref`; default
    the SSD), prepared for ``target``'s rules.

    ``weights`` default to the reference's; the workbench's titles carry their label when they are untrained;
    ``enabled`` names the rules switched on (all when None).
    """
    if imported is None:
        ref = zoo_ref(zoo.DEFAULT_MODEL if model is None else model)
        imported = zoo.import_model(ref.name, weights or ref.weights)
    elif not isinstance(imported, zoo.ImportedModel):
        raise _wrong("imported", imported, "what zoo.import_model gave", "pass zoo.import_model(name), or leave it out")
    mark = imported.weights_label if not imported.model.is_trained else ""
    prune_rule = prune_rule or stages.no_mac()
    wb = Workbench(prepare(imported.mod), get_target(target), enabled, prune_rule, mark=mark)
    return ZooWorkbench(wb, imported)


class ModelFile(NamedTuple):
    """What a user's Python file defines: ``mod``, and its ``rules`` (None when it defines none)."""

    mod: tvm.IRModule
    rules: tuple | None


def load_model_file(path: str | Path) -> ModelFile:
    """Load ``mod`` (and optional ``rules``) from a user's Python file; whatever it does wrong (raises, calls
    ``sys.exit``, defines no ``mod`` or bad ``rules``) is one :class:`WorkbenchError` naming it and its line."""
    if not isinstance(path, (str, os.PathLike)):
        raise _wrong("path", path, "a str or a pathlib.Path", "pass the path of a .py file that defines mod")
    module = import_user_file(path, "Model file", "pass 'demo' or the path of a .py file that defines mod.")
    mod = getattr(module, "mod", None)
    if not isinstance(mod, tvm.IRModule):
        raise WorkbenchError(
            f"Model file {path} does not define mod as a tvm.IRModule (got {type(mod).__name__}).",
            "assign your module to a top-level variable named mod, e.g. mod = MyModule.",
        )
    rules = getattr(module, "rules", None)
    return ModelFile(mod, None if rules is None else check_rules(rules, f"rules in {path}"))


def check_zoo_options(models: list, **given) -> None:
    """A one-line error for a GluonCV zoo model's options (``--model`` with ssd alone) given where none of
    ``models`` (``(ModelRef, what was typed)`` pairs) takes them: they would be ignored, and the run would not
    be of the picture or the weights the user named."""
    given = [f"--{'model' if k == 'zoo_model' else k}" for k, v in given.items() if v is not None]
    takes = [ref for ref, typed in models if ref.kind == "zoo" and (typed == "ssd" or "--model" not in given)]
    if given and not takes:
        which, named = "the ssd" if given == ["--model"] else "GluonCV zoo models", " and ".join(given)
        labels = ", ".join(ref.label for ref, _ in models)
        raise WorkbenchError(
            f"{named} appl{'y' if len(given) > 1 else 'ies'} to {which} only, not to {labels}", f"remove {named}"
        )


def _wrong(name: str, value, takes: str, fix: str) -> WorkbenchError:
    return WorkbenchError(f"{name} must be {takes}, got {type(value).__name__} ({value!r:.40})", fix)


def _not_a_model(model: str, files: bool) -> WorkbenchError:
    """The error for a path that names no model (``files``: the command takes Python files too)."""
    takes = "pass a .py file that defines mod, or a .onnx file" if files else "pass a .onnx file"
    if not Path(model).is_file():
        return WorkbenchError(f"{model} is not a regular file (a FIFO, a device or a socket)", takes)
    what = "neither a .py nor a .onnx file" if files else "not a .onnx file"
    return WorkbenchError(f"{model} is {what}", f"{takes}: a model's kind is told by its suffix")


def check_no_shapes(model, shapes) -> None:
    """A one-line error when input shapes were given for a model that takes none (demo, the zoo, a .py file)."""
    if shapes:
        raise WorkbenchError(
            f"--input-shape applies to a .onnx file or --torch, not to {model}",
            "remove --input-shape (this model's inputs are fixed)",
        )
