"""An ONNX file's model, its inputs and outputs, and the shapes given for them, checked before anything runs.

:func:`check_onnx_model` refuses a file that holds no model the workbench can import and run, in one line: no
nodes, too old an opset, no outputs, an input or output ONNX Runtime's Python API cannot take or give or one
declared with a dim of 0, a sparse weight, a tensor of 4-bit elements. :func:`resolve_shapes` lays the shapes a user
gives (``--input-shape``, ``input_shapes=``) over the file's own dims, refusing in one line a size that is no whole
number from 1, a wrong count of dims, a dim the file fixes otherwise, or no shape for an input the file gives
none; :func:`check_sizes` refuses shapes too small for the model's layers, once they are imported;
:func:`shape_fix` words the fix for the model at hand, with its own input's name and sizes.
:class:`OnnxImportError` is every ONNX import error's class.
"""

from __future__ import annotations

import numpy as np
from tvm import relax

from byoc_workbench.core import ir, ir_types
from byoc_workbench.core.errors import WorkbenchError, import_optional, whole_number
from byoc_workbench.frontends.own import DEFAULT_DIMS

INSTALL_FIX = "pip install onnx onnxruntime (both pinned in requirements.txt; make setup installs them)"


class OnnxImportError(WorkbenchError):
    """An ONNX file the workbench cannot read, or a node TVM's ONNX frontend cannot convert."""


def onnx_module():
    return import_optional("onnx", INSTALL_FIX)


MIN_OPSET = 7  # ONNX Runtime's oldest: its kernels for older opsets are gone
STANDARD_DOMAINS = ("", "ai.onnx")  # the standard ops' domain, by its two names
#: Elements under a byte: TVM neither copies a weight of them in nor allocates a tensor of them ("bits % 8 == 0").
_SUB_BYTE = ("INT4", "UINT4", "FLOAT4E2M1", "INT2", "UINT2")

#: What an input that is no tensor of numbers is, by the field of ONNX's TypeProto that it sets.
_NOT_TENSORS = {
    "sequence_type": "a sequence",
    "map_type": "a map",
    "optional_type": "an optional",
    "sparse_tensor_type": "a sparse tensor",
    "tensor_type": "a tensor of no element type",
    None: "of no type at all",
}


def opset(model) -> int:
    """The model's standard ONNX opset."""
    return next((o.version for o in model.opset_import if o.domain in STANDARD_DOMAINS), 1)


def check_onnx_model(path, model) -> None:
    """A one-line error for a file that parses but holds no model the workbench can import and run against ONNX
    Runtime, the reference: no nodes, too old an opset, no outputs, an input :func:`graph_inputs` refuses or an
    output :func:`_tensor_dtype` does, a sparse weight (TVM's ONNX frontend reads none), or a weight, constant or
    cast of 4-bit elements, in any graph or function of the model (:func:`_scopes`)."""
    onnx = onnx_module()
    export = "re-export the model, e.g. torch.onnx.export(..., opset_version=17), and pass that file"
    if not model.HasField("graph") or not model.graph.node:
        empty = "is empty" if path.stat().st_size == 0 else "holds no graph nodes"
        raise OnnxImportError(f"{path} {empty}: it is not an ONNX model, or the model computes nothing", export)
    if not any(o.domain in STANDARD_DOMAINS for o in model.opset_import):
        raise OnnxImportError(
            f"{path} declares no opset for the default ONNX domain: its opset_import names "
            + (", ".join(repr(o.domain) for o in model.opset_import) or "none"),
            "set opset_import, e.g. onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid('', 17)]), "
            "and save the model again",
        )
    if opset(model) < MIN_OPSET:
        raise OnnxImportError(
            f"{path} uses ONNX opset {opset(model)}; ONNX Runtime, the reference, runs opset {MIN_OPSET} onwards",
            export,
        )
    if not model.graph.output:
        raise OnnxImportError(f"{path} declares no outputs, so there is nothing to compute or check", export)
    graph_inputs(model)  # the inputs first: an Identity of a bfloat16 input has a bfloat16 output
    for value in model.graph.output:
        if value.type.WhichOneof("value") == "tensor_type" and not value.type.tensor_type.elem_type:
            raise OnnxImportError(
                f"Output {value.name} is a tensor of no element type (0), which ONNX Runtime, the reference, does "
                "not load",
                f"declare {value.name}'s element type, e.g. helper.make_tensor_value_info({value.name!r}, "
                "TensorProto.FLOAT, shape), and export the model again",
            )
        if value.type.WhichOneof("value") == "tensor_type":
            _tensor_dtype(value, "Output")  # a sequence or an optional output imports; ONNX Runtime gives lists
    for value in _typed_by_inference(model):
        _tensor_dtype(value, "Output")
    small = {getattr(onnx.TensorProto, t, None): t.lower() for t in _SUB_BYTE}
    for where, scope in _scopes(model):
        sparse = next(_sparse(scope), None)
        if sparse is not None:
            raise OnnxImportError(
                f"{path} keeps its {sparse}{where}, which TVM's ONNX frontend does not read",
                "save the model with its weights dense: each sparse_initializer as a plain initializer of the same "
                "name, each Constant's sparse_value as its value",
            )
        name, elem = next(((n, e) for n, e in _made_types(scope) if e in small), (None, None))
        if name is not None:
            raise OnnxImportError(
                f"{path} makes {name}{where}, a tensor of {small[elem]}, and TVM holds no tensor of elements under a "
                "byte",
                f"export the model with int8/uint8 (or float32) in place of {small[elem]}, e.g. its weights quantized "
                "to 8 bits",
            )


def _scopes(model):
    """``(where, graph or function)`` for the main graph (where ``""``), each model-local function's body (`` in
    local function Q``) and each graph inside their nodes, an If's branches or a Loop's or Scan's body (`` in the
    then-branch of If node 'c'``), at any depth: TVM's frontend imports them all, and a 4-bit tensor in any fails."""

    def inside(where, nodes):
        for node in nodes:
            for attr in node.attribute:
                for graph in [attr.g] if attr.HasField("g") else attr.graphs:
                    label = node.name or (node.output[0] if node.output else "")
                    within = f" in the {attr.name.replace('_', '-')} of {node.op_type} node {label!r}{where}"
                    yield within, graph
                    yield from inside(within, graph.node)

    yield "", model.graph
    yield from inside("", model.graph.node)
    for function in model.functions:
        where = f" in local function {function.name}"
        yield where, function
        yield from inside(where, function.node)


def _sparse(scope):
    """Each sparse tensor of ``scope`` (a graph or a function), as a cause names it: a sparse initializer, or a
    Constant's ``sparse_value``."""
    yield from (f"weight {t.values.name} as a sparse initializer" for t in getattr(scope, "sparse_initializer", ()))
    for node in scope.node:
        if node.output and any(a.HasField("sparse_tensor") for a in node.attribute):
            yield f"constant {node.output[0]} as a Constant's sparse_value"


def _made_types(scope):
    """``(name, ONNX element type)`` of each tensor whose type ``scope`` (a graph or a function) names: its weights,
    its constants' values, its casts' and quantizations' results (every other op's result takes its type from these,
    or from the inputs)."""
    yield from ((t.name, t.data_type) for t in getattr(scope, "initializer", ()))
    for node in scope.node:
        for attr in node.attribute if node.output else ():
            if attr.HasField("t") or attr.name in ("to", "output_dtype"):
                yield node.output[0], attr.t.data_type if attr.HasField("t") else attr.i


def _typed_by_inference(model) -> list:
    """The outputs declared with no type at all, as ONNX's shape inference types them (ONNX Runtime runs them, and
    gives what they compute); none where the inference fails (ONNX Runtime then says why, loading the model)."""
    names = {v.name for v in model.graph.output if v.type.WhichOneof("value") is None}
    if not names:
        return []
    try:
        inferred = onnx_module().shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - ONNX's InferenceError, and what its C++ raises on a model ORT refuses anyway
        return []
    return [v for v in inferred.graph.output if v.name in names and v.type.tensor_type.elem_type]


def _tensor_dtype(value, role: str) -> np.dtype:
    """The NumPy dtype of ``value``, a graph input or output (``role``) that is a tensor of some element type; one
    line where it is of strings (TVM has no string tensors, and NumPy would call their type ``object``), complex
    (neither TVM nor ONNX Runtime computes on it), or of a type NumPy has only through ml_dtypes (bfloat16, float8,
    int4), whose arrays ONNX Runtime's Python API, the reference, neither takes nor gives."""
    onnx = onnx_module()
    elem = value.type.tensor_type.elem_type
    if elem == onnx.TensorProto.STRING:
        raise OnnxImportError(
            f"{role} {value.name} is a tensor of strings, and TVM has no string tensors",
            "export the model with numeric inputs (text as token ids, int64), the strings turned into numbers before it"
            if role == "Input"
            else f"export the model with numeric outputs (labels as int64 ids), {value.name} made text after it",
        )
    dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem))
    if dtype.kind == "c":
        raise OnnxImportError(
            f"{role} {value.name} is a tensor of {dtype.name}, and neither TVM nor ONNX Runtime, the reference, "
            "computes on complex tensors",
            f"export the model with float32 {role.lower()}s: each complex one's real and imaginary parts apart",
        )
    if dtype.isbuiltin != 1:  # 2: a type ml_dtypes registers with NumPy
        takes = "takes" if role == "Input" else "gives"
        raise OnnxImportError(
            f"{role} {value.name} is a tensor of {dtype.name}, and ONNX Runtime's Python API, the reference, "
            f"{takes} no NumPy array of {dtype.name}",
            f"export the model with float32 inputs, cast to {dtype.name} inside it if it must compute in it"
            if role == "Input"
            else f"cast {value.name} to float32 inside the model (a Cast node, to=FLOAT, before the output) and "
            "export it again",
        )
    return dtype


def graph_inputs(model) -> dict[str, tuple[list[int | str] | None, np.dtype]]:
    """``{name: (dims, numpy dtype)}`` of the real inputs (not initializers); a dim is an int (-1: dynamic) or a
    name, and dims are None where the file gives no shape at all, not even a rank. Each is one line where it is no
    tensor (a sequence, a map, an optional), of no element type, of a type :func:`_tensor_dtype` refuses, or
    declared with a dim of 0: ONNX Runtime, the reference, then takes no other size there."""
    weights = {t.name for t in model.graph.initializer}
    out = {}
    for index, value in enumerate(model.graph.input):
        if value.name in weights:
            continue
        tensor, kind = value.type.tensor_type, value.type.WhichOneof("value")
        if kind != "tensor_type" or not tensor.elem_type:
            raise OnnxImportError(
                f"Input {value.name} is {_NOT_TENSORS.get(kind, kind)}, and the workbench (as TVM's ONNX frontend) "
                "takes tensors of numbers only",
                "export the model with each input a tensor of numbers (a sequence's tensors as inputs of their own)",
            )
        dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in tensor.shape.dim]
        if 0 in dims:
            raise OnnxImportError(
                f"Input {value.name} declares dim {dims.index(0)} as 0 in the file, a fixed size of 0 (an empty "
                "tensor): ONNX Runtime, the reference, takes no other size there, and the workbench takes sizes from 1",
                f"declare that dim as a name in the file (model.graph.input[{index}].type.tensor_type.shape."
                f"dim[{dims.index(0)}].dim_param = 'N', then onnx.save(model, path)) and give its size: "
                + given_as(value.name, dims),
            )
        out[value.name] = (dims if tensor.HasField("shape") else None, _tensor_dtype(value, "Input"))
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
    keys = [k for k in given if not isinstance(k, str)]
    if keys:
        raise OnnxImportError(
            f"The shapes given are keyed by {keys[0]!r} ({type(keys[0]).__name__}), not by an input's name",
            f"key each shape by its input's name, one of: {', '.join(inputs)}",
        )
    unknown = [n for n in given if n not in inputs]
    if unknown:
        raise OnnxImportError(f"The model has no input named {', '.join(unknown)}", f"name one of: {', '.join(inputs)}")
    shapes = {}
    for name, (dims, _) in inputs.items():
        if dims is None and name not in given:
            raise OnnxImportError(
                f"Input {name} has no shape in the file, not even a count of dims, so its size is not known",
                f"give {name}'s whole shape, a size for each of its dims: e.g. {given_as(name, None)}",
            )
        shape = _given(name, given[name], dims) if name in given else dims
        bad = [(d, s) for d, s in zip(dims or (), shape) if isinstance(d, int) and d > 0 and d != s]
        if bad:
            raise OnnxImportError(
                f"Input {name} is fixed at {dims} in the file; {shape} was given", f"give {name} the shape {dims}"
            )
        shapes[name] = [str(s) if whole_number(s) is None else whole_number(s) for s in shape]
    return shapes


def _given(name: str, shape, dims: list | None) -> list:
    """The shape given for input ``name``, checked: as many sizes as the file's ``dims`` (any number where the file
    gives none), each a whole number from 1."""
    if isinstance(shape, (str, bytes)) or not np.iterable(shape):
        raise OnnxImportError(
            f"The shape given for input {name} is {shape!r:.40}, not a sequence of sizes", shape_fix({name: dims})
        )
    shape = list(shape)
    if dims is not None and len(shape) != len(dims):
        raise OnnxImportError(
            f"Input {name} has {len(dims)} dims ({dims}), the shape given has {len(shape)}",
            f"give {len(dims)} sizes for {name}",
        )
    bad = [s for s in shape if whole_number(s) is None or whole_number(s) < 1]
    if bad:
        raise OnnxImportError(
            f"The shape given for input {name}, {shape}, has {', '.join(map(repr, bad))}: "
            "a size is a whole number from 1",
            shape_fix({name: dims}),
        )
    return shape


def with_shapes(model, shapes: dict):
    """A copy of ``model`` with each input of ``shapes`` declared at its shape there, a size or a name per dim; a
    dynamic one (-1) is declared with neither, as TVM's frontend reads an unknown size (it takes -1 for a size)."""
    fixed = onnx_module().ModelProto()
    fixed.CopyFrom(model)
    for value in fixed.graph.input:
        if value.name in shapes:
            shape = value.type.tensor_type.shape
            shape.SetInParent()  # a file's input with no shape at all gets one
            del shape.dim[:]
            for size in shapes[value.name]:
                dim = shape.dim.add()
                if isinstance(size, str) and size != "?":
                    dim.dim_param = size
                elif isinstance(size, int) and size > 0:
                    dim.dim_value = size
    return fixed


def check_sizes(mod, shapes: dict) -> None:
    """A one-line error where ``shapes`` are too small for the layers of ``mod``, the model imported at them: a
    convolution's or a pooling's window larger than its input leaves a size of 0 or less (TVM's "negative output
    shape", ONNX Runtime's "Invalid input shape"), found here rather than by the build or the reference's run."""
    for step in ir.walk(mod["main"], mod):
        op = ir.callee_name(step.value) if isinstance(step.value, relax.Call) else ""
        ty = step.var.ty
        if (
            isinstance(ty, relax.TensorType)
            and ir_types.is_static(ty)
            and any(d < 0 or d == 0 and op.startswith("relax.nn.") for d in ir_types.dims(ty))
        ):
            given = "; ".join(f"{n} {list(s)}" for n, s in shapes.items())
            raise OnnxImportError(
                f"The input shape {given} is too small for the model: its {op.removeprefix('relax.')} {step.var.name}"
                f" would give {ir_types.type_str(ty)}, a size below 1",
                "give a larger input shape (--input-shape, or input_shapes= from Python): the model's layers need "
                "a larger one",
            )


def all_static(shapes: dict) -> bool:
    return all(isinstance(d, int) and d > 0 for s in shapes.values() for d in s)


def shape_fix(shapes: dict) -> str:
    """How to give a shape to the first input of ``shapes`` (``{input: dims}``) whose sizes are not all known."""
    name, dims = next(
        ((n, d) for n, d in shapes.items() if d is None or not all_static({n: d})), next(iter(shapes.items()))
    )
    return f"give every input's shape, e.g. {given_as(name, dims)}"


def given_as(name: str, dims: list | None) -> str:
    """``--input-shape x=1,4 (Python: ...)``: a shape for input ``name`` as the CLI and Python take it, the known
    sizes of its ``dims`` kept and 1 for the rest (:data:`~byoc_workbench.frontends.own.DEFAULT_DIMS` where the
    file gives no dims at all)."""
    example = DEFAULT_DIMS if dims is None else tuple(d if isinstance(d, int) and d > 0 else 1 for d in dims)
    return f"--input-shape {name}={','.join(map(str, example))} (Python: input_shapes={{{name!r}: {example}}})"


def unknown_sizes(shapes: dict) -> str:
    """``x's size N (dim 0) is``: the sizes of ``shapes`` that are not known, as a cause names them."""
    said = [
        f"{name}'s size at dim {k} ({d} in the file: dynamic)" if isinstance(d, int) else f"{name}'s size {d} (dim {k})"
        for name, dims in shapes.items()
        for k, d in enumerate(dims)
        if not (isinstance(d, int) and d > 0)
    ]
    return ", ".join(said[:4]) + (", ..." if len(said) > 4 else "") + (" is" if len(said) == 1 else " are")
