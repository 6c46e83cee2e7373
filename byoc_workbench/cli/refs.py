"""Which model a command names: its arguments made into one :class:`~byoc_workbench.subjects.ModelRef`,
for :func:`byoc_workbench.subjects.load` (or, for a zoo model's import and run, :mod:`byoc_workbench.workflow`)."""

from __future__ import annotations

from byoc_workbench import subjects
from byoc_workbench.cli.args import input_shapes


def model_ref(args, what, kinds=None, rules=None) -> subjects.ModelRef:
    """The :class:`~byoc_workbench.subjects.ModelRef` of the model ``what`` a command names, with its options
    (``--model``, ``--weights``, ``--image``, ``--torch``, ``--input-shape``, ``--input-dtype``, ``--target``)."""
    given = {k: getattr(args, k, None) for k in ("weights", "image", "torch", "target")}
    return subjects.ModelRef.parse(
        what,
        getattr(args, "ssd_model", None),
        shapes=input_shapes(args),
        rules=rules,
        kinds=kinds or subjects.KINDS,
        **given,
    )
