"""Which of GluonCV's detection, segmentation and pose models the importer takes, and what stops the rest.

- :func:`zoo_names` lists those tasks' models, each with its task and family, as the records name them;
  :func:`gluoncv_names` reads the same from GluonCV's own list where MXNet is (the cross-check);
- :func:`check_model` imports one's shipped symbol (:mod:`.shipped`, traced at its own input size by
  ``tools/ship_zoo.py``, no MXNet needed): ``converts``, or ``refused`` with the one-line
  error naming the model and the ops it lacks, or ``not built`` where GluonCV itself
  could not build it offline (int8 models download their base), so nothing was shipped;
- :func:`check_all` runs each check in a process of its own (:func:`check_apart`), so that a
  crash or a hang is recorded as such instead of ending the walk;
- :func:`table` turns the records into the support table of ``docs/zoo.md``, and
  :func:`zoo_summary` into the README's line.

``python tools/zoo_support.py`` walks the whole list and writes the records
(:func:`records` reads them, from the package's data, wherever a notebook runs)
and the table; ``make test`` rechecks a sample of them.
"""

from __future__ import annotations

import collections
import contextlib
import importlib.resources
import json
import logging
import subprocess
import sys
import time
import warnings
from typing import TypedDict

from byoc_workbench.core import ir
from byoc_workbench.core.errors import WorkbenchError, first_line
from byoc_workbench.frontends import (
    MXNetImportError,
    UnsupportedOperatorError,
    find_unsupported,
    from_mxnet,
    gluon,
    op_inventory,
)
from byoc_workbench.models import shipped
from byoc_workbench.models.gluoncv_import import import_gluoncv

CHECKED_TASKS = ("detection", "segmentation", "pose")
# The factory's module (gluoncv.model_zoo.<module>), first match wins -> (task, family).
FAMILIES = (
    ("ssd", "detection", "SSD"),
    ("yolo3", "detection", "YOLOv3"),
    ("faster_rcnn", "detection", "Faster R-CNN"),
    ("mask_rcnn", "detection", "Mask R-CNN"),
    ("center_net", "detection", "CenterNet"),
    ("deeplabv3b_plus", "segmentation", "DeepLabV3+"),
    ("deeplabv3", "segmentation", "DeepLabV3"),
    ("fcn", "segmentation", "FCN"),
    ("pspnet", "segmentation", "PSPNet"),
    ("icnet", "segmentation", "ICNet"),
    ("fastscnn", "segmentation", "Fast-SCNN"),
    ("danet", "segmentation", "DANet"),
    ("mobile_pose", "pose", "Mobile Pose"),
    ("simple_pose", "pose", "Simple Pose"),
    ("alpha_pose", "pose", "AlphaPose"),
)
# GluonCV's int8 models live in one module: their names say what they are.
_INT8 = (("ssd", "detection", "SSD"), ("fcn", "segmentation", "FCN"), ("psp", "segmentation", "PSPNet"))
_INT8 += (("deeplab", "segmentation", "DeepLabV3"), ("pose", "pose", "Simple Pose"))
STATUSES = ("converts", "refused", "not built", "crashed")


class SupportRecord(TypedDict):
    """One model's check, as :func:`check_model` returns it and the walk writes it (``data/zoo-support.json``)."""

    name: str
    task: str
    family: str
    status: str  # one of STATUSES
    input_shape: list[int] | None
    ops: list[str]  # the MXNet ops it lacks, when refused
    error: str
    mxnet_ops: int
    relax_ops: int
    seconds: float | None


def zoo_names() -> dict[str, tuple[str, str]]:
    """``{name: (task, family)}`` for every detection, segmentation and pose model GluonCV lists (as the
    committed records name them: GluonCV's own list, read where MXNet is by ``tools/ship_zoo.py``)."""
    return {r["name"]: (r["task"], r["family"]) for r in records()}


def gluoncv_names() -> dict[str, tuple[str, str]]:
    """``{name: (task, family)}`` from GluonCV's own list (``get_model_list``), each family read from the module
    its factory lives in (needs mxnet and gluoncv: the cross-check of :func:`zoo_names`)."""
    gluon.import_mxnet()
    registry = import_gluoncv("gluoncv.model_zoo.model_zoo", gluon.INSTALL_FIX)
    found = {}
    for name in registry.get_model_list():
        family = _family(name, registry._models[name].__module__)
        if family:
            found[name] = family
    return found


def _family(name: str, module: str):
    if module.endswith("quantized"):
        found = next(((t, f"{fam} (int8)") for key, t, fam in _INT8 if key in name), None)
        return found
    return next(((t, fam) for key, t, fam in FAMILIES if key in module), None)


def traced_shape(name: str, block) -> tuple[int, int, int, int]:
    """The input a model is traced at: its own size (GluonCV's demos' for detectors)."""
    if "pose" in name:
        return (1, 3, 320, 256) if name.startswith("alpha_pose") else (1, 3, 256, 192)
    if name.startswith("ssd_300"):
        return (1, 3, 300, 300)
    crop = getattr(block, "crop_size", None)
    return (1, 3, crop, crop) if crop else (1, 3, 512, 512)


def gluon_block(name: str):
    """GluonCV's ``name`` built with no weights (nothing downloaded); needs mxnet and gluoncv."""
    mx = gluon.import_mxnet()
    get_model = import_gluoncv("gluoncv.model_zoo", gluon.INSTALL_FIX).get_model  # torch beside it: see there
    kwargs = {"pretrained": False, "pretrained_base": False}
    if "custom" in name:
        kwargs["classes"] = ("object",)  # a custom model is GluonCV's architecture for your own classes
    with mx.name.NameManager():
        try:
            return get_model(name, **kwargs)
        except TypeError as err:
            if "pretrained_base" not in str(err):
                raise
            del kwargs["pretrained_base"]
            return get_model(name, **kwargs)


@contextlib.contextmanager
def _quiet():
    """GluonCV's and MXNet's warnings and log lines off while one model is checked, and back after:
    a check run in the caller's process must not silence the caller."""
    before = logging.root.manager.disable
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            yield
        finally:
            logging.disable(before)


def check_model(name: str, task: str = "", family: str = "") -> SupportRecord:
    """Import ``name``'s shipped symbol (:mod:`.shipped`) at its own input size; the record of what happened.

    Returns
    -------
    SupportRecord
        ``{"name", "task", "family", "status", "input_shape", "ops" (the MXNet ops it
        lacks, when refused), "error" (the one-line message), "mxnet_ops", "relax_ops"}``;
        ``status`` is one of :data:`STATUSES` but ``crashed``. A model the package does not ship (GluonCV
        could not build it, or MXNet trace it, where the zoo was shipped: int8 models) keeps the walk's record.
    """
    with _quiet():
        return _check(name, task, family)


def _check(name: str, task: str, family: str) -> dict:
    record = {"name": name, "task": task, "family": family, "status": "", "input_shape": None, "ops": []}
    record.update(error="", mxnet_ops=0, relax_ops=0)
    start = time.perf_counter()
    if not shipped.has(name):  # GluonCV could not build it, or MXNet could not trace it: as the walk recorded it
        committed = next((r for r in records() if r["name"] == name), None)
        return committed or _timed({**record, "status": "not built", "error": f"{name}: not shipped"}, start)
    model = shipped.read_shipped(name)
    record["input_shape"] = list(model.input_shape)
    record["mxnet_ops"] = sum(op_inventory(model.graph).values())
    missing = find_unsupported(model.graph)
    try:
        if missing:
            raise UnsupportedOperatorError(missing)
        shapes = {model.inputs[0]: model.input_shape}
        mod, _ = from_mxnet(model.graph, model.zero_weights(), None, shapes, bind_params=False, progress=False)
    except MXNetImportError as err:
        record.update(status="refused", ops=sorted(missing), error=f"error: {name}: {err.cause}. Fix: {err.fix}.")
        return _timed(record, start)
    record.update(status="converts", relax_ops=len(ir.ops_in(mod["main"], mod)))
    return _timed(record, start)


def _timed(record: dict, start: float) -> dict:
    record["seconds"] = round(time.perf_counter() - start, 1)
    return record


def check_all(names: dict, timeout: float = 900.0, progress=print) -> list:
    """:func:`check_model` each of ``names`` (``{name: (task, family)}``) in a process of its own (:func:`check_apart`).

    A process that dies (a segfault) or hangs past ``timeout`` seconds gives a
    ``crashed`` record with what it printed last; nothing stops the walk.
    """
    records = []
    for i, (name, (task, family)) in enumerate(names.items()):
        record = check_apart(name, task, family, timeout)
        records.append(record)
        if progress:
            progress(f"[{i + 1}/{len(names)}] {name}: {said(record)}")
    return records


def check_apart(name: str, task: str = "", family: str = "", timeout: float = 900.0) -> SupportRecord:
    """:func:`check_model` in a process of its own: a crash or a hang past ``timeout`` seconds is a ``crashed`` record.

    One model of the walk, wherever it runs (``tools/zoo_support.py --ray`` makes each a Ray task).
    """
    code = f"import json, sys; from {__name__} import check_model; print(json.dumps(check_model(*sys.argv[1:])))"
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, name, task, family], capture_output=True, text=True, timeout=timeout
        )
        lines = done.stdout.strip().splitlines()
        record = json.loads(lines[-1]) if done.returncode == 0 and lines else None
        why = f"exit status {done.returncode}: {first_line(done.stderr.strip() or 'no output', last=True)}"
    except subprocess.TimeoutExpired:
        record, why = None, f"no answer after {timeout:.0f} s"
    return record or crashed(name, task, family, f"the check {why}")


def crashed(name: str, task: str, family: str, why: str) -> SupportRecord:
    """The record of a model whose check never answered (``why``: a crash, a hang, a task that died)."""
    record = {"name": name, "task": task, "family": family, "status": "crashed", "input_shape": None}
    record.update(ops=[], error=f"{name}: {why}", mxnet_ops=0, relax_ops=0, seconds=None)
    return record


def said(record: dict) -> str:
    """A record in a few words, for a progress line: its status and the ops that stop it."""
    return f"{record['status']} {' '.join(record['ops'])}".rstrip()


START, END = "<!-- zoo-support:start -->", "<!-- zoo-support:end -->"
#: The walk's committed records, shipped with the package (read through the package, never the working directory).
RECORDS = importlib.resources.files("byoc_workbench") / "data" / "zoo-support.json"


def records() -> list:
    """The committed records of the last walk: one per model, its status, input size and error."""
    return json.loads(RECORDS.read_text())


def zoo_summary(records: list) -> str:
    """One line: how many models the walk saw, and how many of them convert, are refused or were not built."""
    counts = collections.Counter(r["status"] for r in records)
    return (
        f"{len(records)} models of GluonCV's detection, segmentation and pose zoo: "
        + ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts[s])
        + " (`byoc_workbench/data/zoo-support.json` has each model, its input size and its error)."
    )


def table(records: list) -> str:
    """The support table (Markdown): per task and family, how many convert, and what stops the rest."""
    groups: dict = collections.defaultdict(list)
    for r in records:
        groups[(CHECKED_TASKS.index(r["task"]), r["family"])].append(r)
    lines = [zoo_summary(records), "", "| task | family | convert | what stops the others |", "|---|---|---|---|"]
    for (task, family), rows in sorted(groups.items()):
        ok = sum(r["status"] == "converts" for r in rows)
        stops = collections.Counter()
        for r in rows:
            if r["status"] == "refused":
                stops.update(r["ops"])
            elif r["status"] != "converts":
                stops[r["status"]] += 1
        why = ", ".join(f"`{op}` ({n})" if op not in STATUSES else f"{op} ({n})" for op, n in sorted(stops.items()))
        lines.append(f"| {CHECKED_TASKS[task]} | {family} | {ok} of {len(rows)} | {why or '—'} |")
    return "\n".join(lines)


def replace_table(text: str, records: list, full: bool = True) -> str:
    """``text`` with the part between :data:`START` and :data:`END` regenerated: the :func:`table`
    (docs/zoo.md), or with ``full`` False its :func:`zoo_summary` line (the README)."""
    if START not in text or END not in text:
        raise WorkbenchError(f"The text has no {START} ... {END} markers", "add them where the table belongs")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{table(records) if full else zoo_summary(records)}\n{END}{tail}"
