"""The user's own model, from an ONNX file or a PyTorch program, as the workbench holds it.

:func:`byoc_workbench.frontends.onnx_import.import_onnx` and
:func:`byoc_workbench.frontends.torch_import.import_torch` both return an
:class:`OwnModel`: the Relax module, example inputs, and the framework the
model came from, kept as the reference every offloaded run is checked
against (ONNX Runtime on the original file, or eager PyTorch).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable

import numpy as np

from byoc_workbench.core.errors import WorkbenchError


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
        As imported, before :func:`byoc_workbench.core.transforms.prepare`.
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


#: An input's dims where only its dtype was given (``--input-dtype`` alone).
DEFAULT_DIMS = (1, 3, 224, 224)
#: The dtypes an input may have: NumPy holds them (the workbench keeps its inputs as arrays), TVM imports them.
INPUT_DTYPES = ("float32", "float16", "float64", "int64", "int32", "int16", "int8", "uint8", "bool")
#: The most bytes the example inputs may take together: past it a typo in a shape (an extra digit)
#: asks for hundreds of GiB, and the allocation fails or the machine swaps.
MAX_INPUT_BYTES = 4 * 2**30


def _size(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return ""


def check_input_size(shapes: dict, dtypes: dict) -> None:
    """A one-line error when the inputs of ``shapes`` (``{name: dims}``) would take over :data:`MAX_INPUT_BYTES`."""
    sizes = {
        name: float(np.prod([float(d) for d in dims])) * np.dtype(dtypes.get(name, "float32")).itemsize
        for name, dims in shapes.items()
        if all(isinstance(d, (int, np.integer)) for d in dims)
    }
    total = sum(sizes.values())
    if total > MAX_INPUT_BYTES:
        name = max(sizes, key=sizes.get)
        raise WorkbenchError(
            f"The input {name} of shape {'x'.join(map(str, shapes[name]))} would take {_size(sizes[name])}"
            + (f" ({_size(total)} for all inputs)" if len(sizes) > 1 else "")
            + f", over the limit of {_size(MAX_INPUT_BYTES)}",
            "check the shape for a typo; give a smaller one, e.g. --input-shape 1,3,224,224",
        )


def checked_seed(seed) -> int:
    """``seed``, or a one-line error where it is not a whole number NumPy's generator takes."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**32:
        raise WorkbenchError(
            f"The seed must be a whole number from 0 to 2**32 - 1, got {seed!r:.40}", "pass e.g. seed=0"
        )
    return int(seed)


def seeded_inputs(shapes: dict, dtypes: dict, seed: int = 0) -> list:
    """One seeded input per name: normal floats, or small integers for integer inputs."""
    check_input_size(shapes, dtypes)
    rng = np.random.RandomState(checked_seed(seed))
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


def _typed(value) -> tuple[list, str]:
    """``(dims, dtype)`` of one input's entry: its dims, or ``{"shape": dims, "dtype": name}`` (see
    :func:`forward_inputs`)."""
    if not _is_typed(value):
        return list(value), "float32"
    dtype = value["dtype"]
    if dtype not in INPUT_DTYPES:
        raise WorkbenchError(f"Unknown input dtype {dtype!r}", f"choose one of: {', '.join(INPUT_DTYPES)}")
    return list(value.get("shape") or DEFAULT_DIMS), dtype


def _is_typed(value) -> bool:
    # unambiguous: in {name: entry} the entries are dims or dicts, never a string
    return isinstance(value, dict) and isinstance(value.get("dtype"), str)


def forward_inputs(forward, shape, owner: str) -> list:
    """``[(name, dims, dtype)]`` for the inputs of ``owner``'s ``forward`` that ``shape`` gives: the first input's
    entry, or ``{name: entry}`` for any. An entry is the input's dims (a float32 input), or
    ``{"shape": dims, "dtype": "int64"}`` (``--input-dtype``; without ``"shape"``, :data:`DEFAULT_DIMS`)."""
    try:
        params = inspect.signature(forward).parameters.values()
    except (TypeError, ValueError):
        params = []
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names = [p.name for p in positional]
    if not isinstance(shape, dict) or _is_typed(shape):
        return [(names[0] if names else "input", *_typed(shape))]
    unknown = [n for n in shape if n not in names]
    if unknown:
        raise WorkbenchError(
            f"{owner}.forward has no input named {', '.join(unknown)}",
            f"name one of: {', '.join(names)}" if names else "give the shape without a name: --input-shape 1,3,224,224",
        )
    needed = [p.name for p in positional if p.default is p.empty]
    missing = [n for n in needed if n not in shape]
    if missing:
        raise WorkbenchError(
            f"No shape was given for {owner}.forward's input {', '.join(missing)}",
            f"give each: --input-shape {missing[0]}=1,3,224,224",
        )
    taken = names[: max(names.index(n) for n in shape) + 1]
    gaps = [n for n in taken if n not in shape]
    if gaps:
        raise WorkbenchError(
            f"Shapes were given for later inputs of {owner}.forward, not for {', '.join(gaps)}",
            f"give {gaps[0]} a shape too",
        )
    return [(n, *_typed(shape[n])) for n in taken]
