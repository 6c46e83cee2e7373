"""The user's own model, from an ONNX file or a PyTorch program, as the workbench holds it.

:func:`byoc_workbench.models.onnx_import.import_onnx` and
:func:`byoc_workbench.models.torch_import.import_torch` both return an
:class:`OwnModel`: the Relax module, example inputs, and the framework the
model came from, kept as the reference every offloaded run is checked
against (ONNX Runtime on the original file, or eager PyTorch).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from ..errors import WorkbenchError

#: Equal to the reference: the largest error at most this fraction of the output's largest magnitude
#: (:func:`byoc_workbench.models.matching.output_error`), as ``compare`` checks each subgraph.
TOLERANCE = 1e-3


@dataclasses.dataclass
class OwnModel:
    """A model imported from another framework.

    Attributes
    ----------
    name : str
        The file's name, or ``module:factory`` for a PyTorch program.
    kind : str
        ``"onnx"`` or ``"pytorch"``.
    mod : tvm.IRModule
        As imported, before :func:`byoc_workbench.transforms.prepare`.
    inputs : list of numpy.ndarray
        Example inputs, seeded (or the ones given).
    reference : callable
        ``reference(inputs) -> [numpy outputs]`` in the original framework.
    reference_name : str
        What ``reference`` runs, e.g. ``"onnxruntime on resnet.onnx"``.
    import_s : float
        Seconds from the file (or the module) to the Relax module.
    source_ops : int
        Nodes of the original graph (ONNX nodes, or the exported program's calls).
    notes : list of str
        What the import did on the way (static shapes, names, work-arounds).
    mark : str
        Shown on every title and table, e.g. ``"seeded weights (torch.manual_seed(0))"``.
    """

    name: str
    kind: str
    mod: object
    inputs: list
    reference: Callable
    reference_name: str
    import_s: float = 0.0
    source_ops: int = 0
    notes: list = dataclasses.field(default_factory=list)
    mark: str = ""
    path: object = None  # the ONNX file, when there is one
    detection: bool = False  # outputs are (ids, scores, boxes) rows, compared as a set

    def check(self, outputs, tolerance: float = TOLERANCE) -> dict:
        """``outputs`` against the reference on :attr:`inputs`: ``{"equal", "max_rel", "max_abs", "outputs"}``."""
        return check_outputs(self.reference(self.inputs), outputs, tolerance, self.detection)


def as_list(outputs) -> list:
    """A run's outputs as a flat list of numpy arrays."""
    if isinstance(outputs, (list, tuple)):
        return [a for o in outputs for a in as_list(o)]
    return [np.asarray(outputs)]


def check_outputs(ref, got, tolerance: float = TOLERANCE, detection: bool = False) -> dict:
    """Each output of ``got`` against ``ref`` (see :data:`TOLERANCE`); detections are matched as sets."""
    from .matching import output_error

    ref, got = as_list(ref), as_list(got)
    if len(ref) != len(got):
        raise WorkbenchError(
            f"The build returned {len(got)} outputs, the reference {len(ref)}",
            "report it: the import changed the model's outputs",
        )
    rows = []
    for k, (a, b) in enumerate(zip(ref, got)):
        max_abs, max_rel = output_error(b, a)
        rows.append({"output": k, "shape": list(a.shape), "max_abs": max_abs, "max_rel": max_rel})
    out = {
        "outputs": rows,
        "max_abs": max((r["max_abs"] for r in rows), default=0.0),
        "max_rel": max((r["max_rel"] for r in rows), default=0.0),
        "tolerance": tolerance,
    }
    if detection:
        from .matching import same_detections, unmatched

        out["equal"] = bool(same_detections(ref[:3], got[:3]))
        out["detections_found"] = f"{len(ref[0][0]) - len(unmatched(ref[:3], got[:3]))}/{len(ref[0][0])}"
    else:
        out["equal"] = out["max_rel"] <= tolerance
    return out


def seeded_inputs(shapes: dict, dtypes: dict, seed: int = 0) -> list:
    """One seeded input per name: normal floats, or small integers for integer inputs."""
    rng = np.random.RandomState(seed)
    out = []
    for name, shape in shapes.items():
        dtype = np.dtype(dtypes.get(name, "float32"))
        if np.issubdtype(dtype, np.floating):
            out.append(rng.standard_normal(shape).astype(dtype))
        elif dtype == np.bool_:
            out.append(rng.randint(0, 2, shape).astype(dtype))
        else:
            out.append(rng.randint(0, 10, shape).astype(dtype))
    return out
