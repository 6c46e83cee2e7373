"""An ONNX file's inputs, and the shapes given for them, checked before anything runs.

:func:`resolve_shapes` lays the shapes a user gives (``--input-shape``, ``input_shapes=``) over the
file's own dims, refusing in one line a size that is no whole number from 1, a wrong count of dims or
a dim the file fixes otherwise; :func:`shape_fix` words the fix for the model at hand, with its own
input's name and sizes. :class:`OnnxImportError` is every ONNX import error's class.
"""

from __future__ import annotations

import numpy as np

from byoc_workbench.core.errors import WorkbenchError, import_optional

INSTALL_FIX = "pip install onnx onnxruntime (both pinned in requirements.txt; make setup installs them)"


class OnnxImportError(WorkbenchError):
    """An ONNX file the workbench cannot read, or a node TVM's ONNX frontend cannot convert."""


def onnx_module():
    return import_optional("onnx", INSTALL_FIX)


def graph_inputs(model) -> dict[str, tuple[list[int | str], np.dtype]]:
    """``{name: (dims, numpy dtype)}`` of the real inputs (not initializers); a dim is an int or a name. An input
    of strings is one line: TVM has no string tensors, and NumPy would call their type ``object``."""
    onnx = onnx_module()
    weights = {t.name for t in model.graph.initializer}
    out = {}
    for value in model.graph.input:
        if value.name in weights:
            continue
        tensor = value.type.tensor_type
        if tensor.elem_type == onnx.TensorProto.STRING:
            raise OnnxImportError(
                f"Input {value.name} is a tensor of strings, and TVM has no string tensors",
                "export the model with numeric inputs (text as token ids, int64), the strings turned into "
                "numbers before it",
            )
        dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in tensor.shape.dim]
        out[value.name] = (dims, np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type)))
    return out


def resolve_shapes(model, given=None) -> dict[str, list[int | str]]:
    """``{input: shape}``: ``given`` (a dict, or one shape for a one-input model) over the file's own dims.

    A dim the file leaves symbolic and ``given`` does not fix stays a name.
    """
    inputs = graph_inputs(model)
    if given is None:
        given = {}
    elif not isinstance(given, dict):
        if len(inputs) != 1:
            raise OnnxImportError(
                f"One shape was given for a model with {len(inputs)} inputs ({', '.join(inputs)})",
                "give a shape per input: input_shapes={name: shape, ...}",
            )
        given = {next(iter(inputs)): given}
    unknown = [n for n in given if n not in inputs]
    if unknown:
        raise OnnxImportError(f"The model has no input named {', '.join(unknown)}", f"name one of: {', '.join(inputs)}")
    shapes = {}
    for name, (dims, _) in inputs.items():
        shape = _given(name, given[name], dims) if name in given else dims
        bad = [(d, s) for d, s in zip(dims, shape) if isinstance(d, int) and d > 0 and d != s]
        if bad:
            raise OnnxImportError(
                f"Input {name} is fixed at {dims} in the file; {shape} was given", f"give {name} the shape {dims}"
            )
        shapes[name] = [int(s) if isinstance(s, (int, np.integer)) else str(s) for s in shape]
    return shapes


def _given(name: str, shape, dims: list) -> list:
    """The shape given for input ``name``, checked: as many sizes as the file's ``dims``, each a whole number from 1."""
    if isinstance(shape, (str, bytes)) or not np.iterable(shape):
        raise OnnxImportError(
            f"The shape given for input {name} is {shape!r:.40}, not a sequence of sizes", shape_fix({name: dims})
        )
    shape = list(shape)
    if len(shape) != len(dims):
        raise OnnxImportError(
            f"Input {name} has {len(dims)} dims ({dims}), the shape given has {len(shape)}",
            f"give {len(dims)} sizes for {name}",
        )
    bad = [s for s in shape if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1]
    if bad:
        raise OnnxImportError(
            f"The shape given for input {name}, {shape}, has {', '.join(map(repr, bad))}: "
            "a size is a whole number from 1",
            shape_fix({name: dims}),
        )
    return shape


def all_static(shapes: dict) -> bool:
    return all(isinstance(d, int) and d > 0 for s in shapes.values() for d in s)


def shape_fix(shapes: dict) -> str:
    """How to give a shape to the first input of ``shapes`` (``{input: dims}``) whose sizes are not all known,
    as the CLI and Python take it: its known sizes kept, 1 for the rest."""
    name, dims = next(((n, d) for n, d in shapes.items() if not all_static({n: d})), next(iter(shapes.items())))
    example = [d if isinstance(d, int) and d > 0 else 1 for d in dims]
    return (
        f"give every input's shape, e.g. --input-shape {name}={','.join(map(str, example))} "
        f"(Python: input_shapes={{{name!r}: {tuple(example)}}})"
    )


def unknown_sizes(shapes: dict) -> str:
    """``x's size N (dim 0) is``: the sizes of ``shapes`` that are not known, as a cause names them."""
    said = [
        f"{name}'s size {d} (dim {k})"
        for name, dims in shapes.items()
        for k, d in enumerate(dims)
        if not (isinstance(d, int) and d > 0)
    ]
    return ", ".join(said[:4]) + (", ..." if len(said) > 4 else "") + (" is" if len(said) == 1 else " are")
