"""Ready-made builds to time: the model a :class:`~byoc_workbench.subjects.ModelRef` names, offloaded
(``profile``, ``compare``), and a zoo model's workbench offloaded (notebooks 02 and 04).

Each is a :class:`~byoc_workbench.measure.time.timing.Built` for :func:`byoc_workbench.measure.time.timing.profile`
and :func:`byoc_workbench.measure.check.numerics.compare`.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from byoc_workbench import stages, subjects
from byoc_workbench.backends.registry import DEFAULT
from byoc_workbench.flow import rules
from byoc_workbench.measure.bench import byom
from byoc_workbench.measure.time import timing
from byoc_workbench.models.images import model_input


class Ready(NamedTuple):
    """A build ready to time, and the inputs to time it on."""

    built: timing.Built
    inputs: list


def ready(ref: subjects.ModelRef, backend: str | None = None, prune: bool = True, options: dict | None = None) -> Ready:
    """The model ``ref`` names (:func:`byoc_workbench.subjects.load`), its rules, pruned by its prune rule (or
    not), its subgraphs compiled by ``backend``, and its inputs. With no backend named, the demo's subgraphs go
    to its target's own codegen (the teaching one for ``byoc-target``), any other model's to ONNX Runtime. The
    demo is partitioned with the rules of the backend's own target when it has one (a codegen registered with
    rules). ``options`` go to the backend (e.g. ``{"precision": "bf16"}`` for openvino)."""
    own = native_target(backend)
    if own and ref.model.partitioned_by_backend:
        ref = dataclasses.replace(ref, target=own.name)
    subject = subjects.load(ref)
    backend = backend or ref.model.default_backend
    found = byom.offloaded(subject.workbench, backend, prune, options)
    return Ready(timing.build(found, mark=subject.mark), subject.inputs)


def native_target(backend: str | None):
    """The registered target whose subgraphs go to ``backend`` by default (its ``native`` codegen), or None."""
    chosen = DEFAULT.backends.get(backend or "")
    native = getattr(chosen, "native", None)
    own = native and chosen.own_target is None  # a runtime's own target (every op it runs) partitions no demo
    name = next((n for n in rules.TARGETS if own and rules.codegen_name(n) == native), None)
    return rules.get_target(name) if name else None


def model_build(
    backend: str = "onnxruntime", prune: bool = True, *, workbench, image=None, options: dict | None = None
) -> Ready:
    """The build of a zoo model's workbench (:func:`byoc_workbench.subjects.model_workbench`)
    with its rules (upstream's TensorRT ones), offloaded through ``backend``, and ``image`` cut to
    the model's input shape."""
    x = model_input(image, [int(d) for d in workbench.mod["main"].params[0].ty.shape.values])[0]
    found = stages.offload(workbench.mod, backend, prune, rules=workbench.rules, options=options)
    return Ready(timing.build(found, mark=workbench.mark), [x])
