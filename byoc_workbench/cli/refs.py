"""Which model a command names: its arguments made into one :class:`~byoc_workbench.subjects.ModelRef`,
for :func:`byoc_workbench.subjects.load` (or, for a zoo model's import and run, :mod:`byoc_workbench.workflow`)."""

from __future__ import annotations

from pathlib import Path

from byoc_workbench import subjects
from byoc_workbench.cli.args import input_shapes
from byoc_workbench.core.errors import WorkbenchError


def model_ref(args, what, kinds=None, rules=None, alone=True) -> subjects.ModelRef:
    """The :class:`~byoc_workbench.subjects.ModelRef` of the model ``what`` a command names, with its options
    (``--model``, ``--weights``, ``--image``, ``--torch``, ``--input-shape``, ``--input-dtype``, ``--target``);
    ``alone`` False for one of several models (:func:`model_refs`)."""
    given = {k: getattr(args, k, None) for k in ("weights", "image", "torch", "target")}
    _check_torch_module(given["torch"])
    return subjects.ModelRef.parse(
        what,
        getattr(args, "ssd_model", None),
        shapes=input_shapes(args),
        rules=rules,
        kinds=kinds or subjects.KINDS,
        alone=alone,
        **given,
    )


def model_refs(args, whats: list, kinds=None) -> list[subjects.ModelRef]:
    """:func:`model_ref` of each of several models, the zoo's options (``--weights``, ``--image``, ``--model``)
    going to the zoo models among them: refused only when none takes them."""
    refs = [model_ref(args, what, kinds, alone=False) for what in whats]
    zoo = {"zoo_model": getattr(args, "ssd_model", None), "weights": args.weights, "image": args.image}
    subjects.check_zoo_options(list(zip(refs, whats)), **zoo)
    return refs


def _check_torch_module(spec) -> None:
    """A one-line error for ``--torch path/to/module.py:factory``: Python imports a module by its dotted name
    (a path would reach the import as a relative import, and its TypeError would blame the user's module)."""
    module, _, factory = (spec or "").partition(":")
    if module and not all(part.isidentifier() for part in module.split(".")):
        path = Path(module.removesuffix(".py"))
        raise WorkbenchError(
            f"--torch takes module:factory, the module named as Python imports it, not a path: got {spec!r}",
            f"put its directory on PYTHONPATH: PYTHONPATH={path.parent} byoc-workbench ... "
            f"--torch {path.name.lstrip('.')}:{factory}",
        )
