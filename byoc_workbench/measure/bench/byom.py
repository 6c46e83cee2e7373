"""Bring your own model: run and bench an ONNX file or a PyTorch program as the SSD is run and benched.

A workbench made by :meth:`~byoc_workbench.session.Workbench.from_onnx` or
:meth:`~byoc_workbench.session.Workbench.from_torch` holds the model's
example inputs and its reference (ONNX Runtime on the original file, or eager
PyTorch). :func:`run` builds it (TVM alone, or its target's subgraphs
offloaded through a backend) and checks the outputs against that reference;
:func:`byoc_workbench.measure.bench.bench.bench_model` times every build and the
whole-model anchors in one process, as it does for a zoo model.
:func:`example` gives notebook 05's model: a ResNet-18 as a PyTorch program and an ONNX
file when the PyTorch extra is installed, and as an ONNX file from MXNet's exporter when not.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import numbers
import os
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from byoc_workbench import stages
from byoc_workbench.backends.onnx import translate
from byoc_workbench.backends.registry import check_backend, check_options
from byoc_workbench.core import files, output_paths, text
from byoc_workbench.core.errors import WorkbenchError, true_or_false, whole_number
from byoc_workbench.core.transforms import prepare
from byoc_workbench.frontends.own import checked_seed
from byoc_workbench.measure.check.compare import check_outputs, found_text
from byoc_workbench.measure.time import runner
from byoc_workbench.models import zoo
from byoc_workbench.session import Workbench

logger = logging.getLogger(__name__)


def _workbench(wb) -> Workbench:
    if not isinstance(wb, Workbench):
        raise WorkbenchError(
            f"Expected a Workbench holding your model, got {type(wb).__name__}",
            "pass what Workbench.from_onnx(path) or Workbench.from_torch(module, example_inputs) gave",
        )
    return wb


def own_model(wb):
    """The :class:`~byoc_workbench.frontends.own.OwnModel` a workbench holds, or a one-line error."""
    if _workbench(wb).model is None:
        raise WorkbenchError(
            "This workbench holds no imported model (no example inputs, no reference)",
            "make it with Workbench.from_onnx(path) or Workbench.from_torch(module, example_inputs)",
        )
    return wb.model


def offloaded(wb, backend: str | None = "onnxruntime", prune: bool = True, options: dict | None = None) -> list:
    """The workbench's stages with its rules, pruned by its prune rule (or not), compiled by ``backend`` (None:
    each target's own codegen) with ``options``, both checked first
    (:func:`~byoc_workbench.backends.registry.check_options`)."""
    _workbench(wb)
    prune = true_or_false(prune, "prune is True or False", "pass prune=False to keep every subgraph")
    if backend is not None:
        check_backend(backend, registry=wb.registry)
    check_options(backend, options, wb.registry)
    prune_rule = wb.prune_rule if prune else stages.keep_all
    return stages.run_stages(
        wb.mod, wb.rules, prune_rule, check=False, backend=backend, options=options, registry=wb.registry
    )


#: What :func:`build_run` passes on to :func:`~byoc_workbench.measure.time.runner.build_and_run`.
RUN_KEYWORDS = ("tvm_target", "progress", "max_seconds", "keep")


def build_run(
    wb, backend: str, prune: bool = True, repeat: int = 1, warmup: int = 0, options: dict | None = None, **kw
) -> runner.Run:
    """One build of the model run on its example inputs: ``backend`` ``"tvm"`` is TVM alone, another's
    subgraphs are compiled with ``options`` (:func:`offloaded`); ``kw`` are :data:`RUN_KEYWORDS`."""
    model = own_model(wb)
    check_options(check_backend(backend, registry=wb.registry), options, wb.registry)
    prune = true_or_false(prune, "prune is True or False", "pass prune=False to keep every subgraph")
    repeat, warmup = _count("repeat", repeat, 1), _count("warmup", warmup, 0)
    unknown = sorted(set(kw) - set(RUN_KEYWORDS))
    if unknown:
        raise WorkbenchError(f"build_run takes no keyword {unknown[0]!r}", f"pass only: {', '.join(RUN_KEYWORDS)}")
    for name in ("keep", "progress"):
        if name in kw:
            true_or_false(kw[name], f"{name} is True or False", f"pass {name}=True or {name}=False")
    seconds = kw.get("max_seconds")
    if seconds is not None:  # any real number, NumPy's too (np.bool_ is none), as a count takes NumPy's integers
        if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real) or not seconds > 0:
            raise WorkbenchError(
                f"max_seconds is a number of seconds above 0, got {type(seconds).__name__} ({seconds!r:.40})",
                "pass e.g. max_seconds=60, or leave it out for no limit",
            )
        kw["max_seconds"] = float(seconds)
    what = model.mod if backend == "tvm" else offloaded(wb, backend, prune, options)[-1]
    label = "tvm alone" if backend == "tvm" else f"{backend}{'' if prune else '_unpruned'}"
    return runner.build_and_run(what, model.inputs, repeat, warmup, label=label, mark=wb.mark, **kw)


def _count(name: str, value, least: int) -> int:
    """``value`` as an int, or a one-line error where it is no whole number from ``least`` (:func:`whole_number`)."""
    number = whole_number(value)
    if number is None or number < least:
        raise WorkbenchError(
            f"{name} must be a whole number, {least} or more, got {type(value).__name__} ({value!r:.40})",
            f"pass e.g. {name}={least + 2}",
        )
    return number


def run(wb, backend: str = "onnxruntime", prune: bool = True, progress: bool = False) -> dict[str, Any]:
    """Run the model once through ``backend`` and check it against the reference.

    Returns
    -------
    dict
        ``model``, ``ran_on``, ``build_s``, ``run_s``, ``reference`` (what it
        was checked against), ``check`` (see :meth:`~byoc_workbench.frontends.own.OwnModel.check`),
        ``notes`` (the codegen stage's) and ``outputs``.
    """
    progress = true_or_false(progress, "progress is True or False", "pass progress=True to show the bars")
    model = own_model(wb)
    result = build_run(wb, backend, prune, progress=progress)
    return {
        "model": model.name,
        "ran_on": result.backend,
        "build_s": result.build_s,
        "run_s": result.latency.median_s,
        "reference": model.reference_name,
        "check": check_outputs(model.reference(model.inputs), result.outputs, detection=model.detection),
        "weights": wb.mark or "as in the model",
        "outputs": result.outputs,
    }


def run_text(result: dict) -> str:
    """What :func:`run` gave, in two lines: where it ran, its times, and its check against the reference."""
    keys = {"model", "ran_on", "weights", "build_s", "run_s", "reference", "check"}
    checked = {"equal", "max_rel", "tolerance"}
    whole = isinstance(result, dict) and keys <= result.keys() and isinstance(result["check"], dict)
    if not (whole and checked <= result["check"].keys() and _as_run_gave(result)):
        raise WorkbenchError(
            f"run_text takes what byom.run gave, got {type(result).__name__} ({result!r:.40})",
            "pass it the result of byom.run(wb)",
        )
    c = result["check"]
    verdict = "equal" if c["equal"] else "DIFFERENT"
    found = f", detections found {found_text(c['detections'])}" if "detections" in c else ""
    return "\n".join(
        [
            f"{result['model']} on {result['ran_on']} ({result['weights']}): build {text.seconds(result['build_s'])},"
            f" run {text.seconds(result['run_s'])}",
            f"outputs against {result['reference']}: {verdict} (max relative error {c['max_rel']:.2e}, "
            f"tolerance {c['tolerance']:g}{found})",
        ]
    )


def _as_run_gave(result: dict) -> bool:
    """Whether the values :func:`run_text` prints are of the types :func:`run` gives them: times and errors numbers,
    the verdict True or False, detections (where any) a record of what was found."""
    c = result["check"]
    times = (result["build_s"], result["run_s"], c["max_rel"], c["tolerance"])
    found = c.get("detections", {"found": 0, "of": 0})
    return (
        all(isinstance(t, numbers.Real) and not isinstance(t, bool) for t in times)
        and isinstance(c["equal"], (bool, np.bool_))
        and isinstance(found, dict)
        and {"found", "of"} <= found.keys()
    )


ADD_PYTORCH = "make lab EXTRAS=pytorch, or pip install -e .[pytorch]"


@dataclass
class Example:
    """Notebook 05's ResNet-18: an ONNX file, and the PyTorch program it was written from when torch is here.

    Attributes
    ----------
    onnx_path : Path
        Written by ``torch.onnx.export`` from ``torch_model``, or, without torch, by the workbench's own
        translator from GluonCV's ``resnet18_v1`` (:func:`example`).
    input_shape : tuple
        ``(1, 3, H, W)``, the shape the file was written for.
    mark : str
        What the weights are (both are seeded, nothing is downloaded); shown on every title.
    model : str
        Whose ResNet-18 it is (``torchvision resnet18`` or ``GluonCV resnet18_v1``).
    exporter : str
        What wrote the ONNX file.
    torch_model, torch_input : torch.nn.Module, torch.Tensor or None
        torchvision's ``resnet18`` and its example input; None without torch.
    hint : str
        Without torch: one line saying why the PyTorch half is missing and how to add it; else ``""``.
    """

    onnx_path: Path
    input_shape: tuple
    mark: str
    model: str
    exporter: str
    torch_model: object = None
    torch_input: object = None
    hint: str = ""

    def text(self) -> str:
        """What the example is, in a line or two (and the hint, without torch)."""
        lines = [
            text.wrap(f"ResNet-18 ({self.model}), input {self.input_shape}, {self.mark}", indent="  "),
            f"ONNX file: {self.onnx_path.name}, written by {self.exporter}",
        ]
        return "\n".join(filter(None, (*lines, self.hint)))


def _missing_torch() -> str:
    """``""`` when torch and torchvision import, else the one line that says how to add them."""
    for name in ("torch", "torchvision"):
        try:
            importlib.import_module(name)
        except ImportError:
            return f"PyTorch half skipped (no {name}): {ADD_PYTORCH}"
    return ""


#: The least ``size`` :func:`example` takes: ResNet-18 halves its input five times (a stride of 32 in all).
MIN_SIZE = 32
#: The most: ResNet-18 was made for 224; at 1024 its first activation alone takes 64 MiB, and the export, the import's
#: folding, the builds and the reference each hold several, so a larger one would take gigabytes and minutes.
MAX_SIZE = 1024


def _write_example(name: str, filename: str, directory, write) -> Path:
    """``write(path)`` the example's file ``filename`` into ``directory`` (checked first: never over a file the
    workbench did not write there), else into the cache's folder ``examples/<name>`` (made by the write, so a
    failed call leaves none); where the cache cannot be written (a missing or read-only path, a file), into a
    folder of the system's temporary one named by the user and ``name``, with one warning: the notebook's first
    cell goes on, and a later session (or one stopped by SIGTERM) reuses that folder instead of adding one (or
    makes a private one when that name is taken: by a file, a link or another user's folder)."""
    if directory:
        out = output_paths.check_dir(directory, "directory=", [filename])
        try:
            with files.staged(out) as tmp:
                write(tmp / filename)
        except files.OutputError as err:
            raise WorkbenchError(err.cause, "pass directory= a folder you can write to, or leave it out") from None
        return out / filename
    folder = files.cache_dir("examples") / name
    try:
        write(folder / filename)
        return folder / filename
    except OSError as err:
        instead = Path(tempfile.gettempdir()) / f"byoc-byom-{os.getuid()}-{name}"
        with contextlib.suppress(FileExistsError):
            instead.mkdir(mode=0o700)
        if instead.is_symlink() or not instead.is_dir() or instead.stat().st_uid != os.getuid():
            instead = Path(tempfile.mkdtemp(prefix="byoc-byom-"))  # a file, a link or somebody else's: one of its own
        logger.warning("cannot write the example to %s (%s); writing it to %s instead", folder, err.strerror, instead)
        write(instead / filename)
        return instead / filename


def example(size: int = 96, seed: int = 0, directory=None) -> Example:
    """Notebook 05's ResNet-18 on seeded weights, at ``size`` x ``size``: nothing is downloaded.

    With torch and torchvision: torchvision's ``resnet18(weights=None)`` after
    ``torch.manual_seed(seed)``, and the ONNX file ``torch.onnx.export`` writes from it; ``size`` is a whole
    number from :data:`MIN_SIZE` to :data:`MAX_SIZE`. Without them: GluonCV's ``resnet18_v1`` on the zoo's
    seeded weights (:func:`byoc_workbench.models.zoo.import_model`, ``"untrained"``, the shipped seed 0 whatever
    ``seed`` is; no MXNet), written by the
    workbench's own translator (:func:`byoc_workbench.backends.onnx.translate`). The file goes
    to ``directory`` (never over a file of yours there), by default to a folder of the cache's ``examples`` named
    by its size and seed: written again, atomically, by each call (see :func:`_write_example` where the cache
    cannot be written).
    """
    number = whole_number(size)
    if number is None or not MIN_SIZE <= number <= MAX_SIZE:
        raise WorkbenchError(
            f"size must be a whole number of pixels, at least {MIN_SIZE} (ResNet-18 halves its input five times) and at"
            f" most {MAX_SIZE} (ResNet-18 was made for 224; larger takes gigabytes), got {type(size).__name__} "
            f"({size!r:.40})",
            "pass e.g. size=96",
        )
    size = number
    if directory is not None and not isinstance(directory, (str, os.PathLike)):
        raise WorkbenchError(
            f"directory= is a {type(directory).__name__} ({directory!r:.40}), not a path",
            "pass directory= the path of a folder (a str or a pathlib.Path), or leave it out",
        )
    seed = checked_seed(seed)
    shape = (1, 3, size, size)
    name = f"{size}x{size}-seed{seed}"
    hint = _missing_torch()
    if hint:
        imported = zoo.import_model("resnet18_v1", "untrained", input_shape=shape)
        data = translate(prepare(imported.mod)["main"], "resnet18_v1").SerializeToString()
        path = _write_example(name, "resnet18_v1.onnx", directory, lambda to: files.write_atomic(to, data))
        exporter = "the workbench's own Relax-to-ONNX translator (backends/onnx.py)"
        return Example(path, shape, imported.weights_label, "GluonCV resnet18_v1", exporter, hint=hint)
    import torch
    import torchvision

    torch.manual_seed(seed)
    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    with warnings.catch_warnings():
        # torch >= 2.9 warns that the TorchScript exporter is legacy; it is the one whose node names keep the scopes.
        warnings.simplefilter("ignore", DeprecationWarning)
        path = _write_example(
            name,
            "resnet18.onnx",
            directory,
            lambda to: files.write_with(
                to, lambda n: torch.onnx.export(model, (x,), n, dynamo=False, opset_version=17), ".onnx"
            ),
        )
    mark = f"seeded weights (torch.manual_seed({seed}))"
    return Example(path, shape, mark, "torchvision resnet18", "torch.onnx.export", model, x)


def import_text(*workbenches) -> str:
    """One line per workbench (None skipped): its source ops, its Relax ops, the import's time and notes."""
    lines = []
    for wb in (w for w in workbenches if w is not None):
        m = own_model(wb)
        lines.append(
            text.wrap(
                f"{m.name:22s} {m.source_ops:4d} source ops -> {wb.stage('source').op_count:4d} Relax ops, "
                f"import {m.import_s:.1f} s; " + "; ".join(m.notes),
                indent="  ",
            )
        )
    return "\n".join(lines)


def stages_side_by_side(wb_torch, wb_onnx) -> str:
    """The stages' op and subgraph counts side by side; the ONNX file's alone when ``wb_torch`` is None."""
    own_model(wb_onnx)
    if wb_torch is not None:
        own_model(wb_torch)
    columns = [("PyTorch", wb_torch), ("ONNX", wb_onnx)] if wb_torch is not None else [("ONNX", wb_onnx)]
    lines = [f"{'stage':10s}" + "".join(f" {title:>22s}" for title, _ in columns)]
    for k, stage in enumerate(wb_onnx.stages):
        cells = [wb.stages[k] for _, wb in columns]
        lines.append(
            f"{stage.name:10s}" + "".join(f" {s.op_count:6d} ops {len(s.subgraphs):3d} subgraphs" for s in cells)
        )
    return "\n".join(lines)
