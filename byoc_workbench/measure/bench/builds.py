"""Ready-made builds to time: the Part 1 demo loop, and a zoo model offloaded.

Each returns ``(Built, inputs)`` for :func:`byoc_workbench.measure.time.timing.profile`
and :func:`byoc_workbench.measure.check.numerics.compare`.
"""

from __future__ import annotations

from byoc_workbench import stages
from byoc_workbench.backends.registry import DEFAULT, OWN_TARGETS
from byoc_workbench.flow import rules
from byoc_workbench.measure.time import timing
from byoc_workbench.models import demo
from byoc_workbench.models.images import model_input


def demo_build(backend: str | None = None, prune: bool = True, options: dict | None = None) -> tuple:
    """``(Built, inputs)`` for the Part 1 demo loop; ``backend`` None is the teaching codegen.

    The demo is partitioned with ``byoc-target``'s rules, or with the rules of
    the backend's own target when it has one (a codegen registered with rules).
    ``options`` go to the backend (e.g. ``{"precision": "bf16"}`` for openvino).
    """
    prune_rule = stages.no_mac() if prune else stages.keep_all
    target = own_target(backend) or rules.get_target("byoc-target")
    found = stages.run_stages(demo.demo_module(), target.rules, prune_rule, backend=backend, options=options)
    return timing.build(found), demo.demo_inputs()


def own_target(backend: str | None):
    """The registered target whose subgraphs go to ``backend`` by default (its ``native`` codegen), or None."""
    native = getattr(DEFAULT.backends.get(backend or ""), "native", None)
    own = native and native not in OWN_TARGETS  # the ONNX runtimes' own targets claim every op they convert
    name = next((n for n in rules.TARGETS if own and rules.codegen_name(n) == native), None)
    return rules.get_target(name) if name else None


def model_build(
    backend: str = "onnxruntime", prune: bool = True, *, workbench, image=None, options: dict | None = None
) -> tuple:
    """``(Built, inputs)`` for a zoo model's workbench (:func:`byoc_workbench.subjects.model_workbench`)
    with its rules (upstream's TensorRT ones), offloaded through ``backend``, on ``image`` cut to
    the model's input shape."""
    x = model_input(image, [int(d) for d in workbench.mod["main"].params[0].ty.shape.values])[0]
    found = stages.offload(workbench.mod, backend, prune, rules=workbench.rules, options=options)
    return timing.build(found, mark=workbench.mark), [x]
