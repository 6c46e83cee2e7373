"""Why ONNX Runtime, the reference, refused to load an ONNX file, as one line whose Fix matches the cause.

ONNX Runtime loads every file before it is imported (:func:`byoc_workbench.frontends.onnx_import.static_shapes`),
so its refusal is the first word on a file that is broken: an op or domain it does not know, a call to a function
the file does not define, a recursive function, an element type its kernels lack, a type declared other than
computed, an opset or IR version, shapes that do not fit the model's layers, or else a malformed graph (a cycle, a
name defined twice, an attribute the op has not), whose Fix quotes onnx.checker where the checker finds the fault.
"""

from __future__ import annotations

import re

from byoc_workbench.core.errors import shorten
from byoc_workbench.frontends.onnx_shapes import OnnxImportError, onnx_module

_EXPORT = "e.g. torch.onnx.export(..., opset_version=17)"
_IN_FLOAT32 = "export the model in float32 (in PyTorch: model.float() and float32 inputs before torch.onnx.export)"


def ort_message(err: BaseException) -> str:
    """ONNX Runtime's error without its prefix, temporary path and C++ signature: what is wrong, whole."""
    text = " ".join(str(err).split())
    text = re.sub(r"Load model from \S+ failed: ?", "", text)
    text = re.sub(r"/onnxruntime_src/\S+:\d+ .*?\) (?=[A-Z[])", "", text)  # the source line and its signature
    text = re.sub(r"\[ONNXRuntimeError\] : \d+ : \w+ : ", "", text)  # ahead, and again after the signature
    m = re.search(r"Opset (\d+) is under development.*?till opset (\d+)", text)
    if m:
        return f"opset {m.group(1)} is not a released one; this ONNX Runtime supports up to opset {m.group(2)}"
    return text


def load_refusal(model, message: str, name: str, shapes: dict) -> OnnxImportError:
    """Why ONNX Runtime refused ``model`` (``message``, from :func:`ort_message`), loaded as the file ``name``
    with inputs at ``shapes``; the Fix names the input shapes only where the cause is about shapes."""
    op = re.search(r"No Op registered for (\S+) with domain_version of (\d+)", message)
    if op:
        return OnnxImportError(
            f"{name} uses {op.group(1)}, which is no op of ONNX opset {op.group(2)}: "
            "neither ONNX Runtime nor TVM knows it",
            f"export the model with standard ONNX ops and a released opset, {_EXPORT}",
        )
    domain = re.search(r"No opset import for domain '([^']*)'", message)
    if domain:
        ops = sorted({n.op_type for n in model.graph.node if n.domain == domain.group(1)})
        return OnnxImportError(
            f"{name} uses ops of the domain {domain.group(1)!r} ({', '.join(ops[:3])}), "
            "which neither ONNX Runtime nor TVM knows",
            f"export the model with standard ONNX ops and a released opset, {_EXPORT}",
        )
    unknown = re.search(r"([\w.]+):(\w+)\(-?\d+\) is not a registered function/op", message)
    if unknown:
        return _unregistered(model, name, *unknown.groups())
    cycle = re.search(r"must not be recursive\. Cycle detected: (.*?)\.?$", message)
    if cycle:  # before the checker below, which recursion crashes (onnx 1.x: a segmentation fault)
        return OnnxImportError(
            f"{name}'s local functions call themselves ({cycle.group(1)}), and ONNX Runtime, the reference, "
            "loads no recursive function",
            "export the model again with no function calling itself (the functions inlined)",
        )
    kernel = re.search(r"Could not find an implementation for (\w+)\(", message)
    types = sorted(_input_types(model, kernel.group(1)) - {"float32"}) if kernel else []
    if types:
        return OnnxImportError(
            f"ONNX Runtime, the reference, has no {kernel.group(1)} kernel for {' or '.join(types)}, "
            f"the element type of {name}'s {kernel.group(1)} inputs",
            _IN_FLOAT32,
        )
    taken = re.search(r"Type '(\S+)' of input parameter \((.*?)\) of operator \((\w+)\)", message)
    if taken:
        return OnnxImportError(
            f"{name}'s {taken.group(3)} is given {taken.group(2)}, a {taken.group(1)}, and ONNX's {taken.group(3)} "
            "takes no such type",
            _IN_FLOAT32,
        )
    declared = re.search(r"Type \((\S+)\) of output arg \((.*?)\) .*? expected type \((\S+)\)", message)
    if declared:
        value, said, made = declared.group(2), declared.group(1), declared.group(3)
        return OnnxImportError(
            f"{name} declares {value} a {said}, and the node that makes it gives a {made}",
            f"make them agree: cast {value} to the type declared (a Cast node before it, to=FLOAT for float32), "
            "and export the model again",
        )
    if re.search(r"IR version|opset|Could not find an implementation|No graph", message, re.IGNORECASE):
        return OnnxImportError(
            f"ONNX Runtime, the reference, cannot load {name}: {shorten(message, 400)}",
            f"re-export the model with a released ONNX opset and IR version that ONNX Runtime supports, {_EXPORT}",
        )
    if re.search(r"ShapeInference|\bshapes?\b|dimension|\brank\b", message):  # not an op's name: Shape, Reshape
        return OnnxImportError(
            f"ONNX Runtime cannot load {name} with inputs {shapes}: {shorten(message, 400)}",
            "check the input shapes; the model must run in ONNX Runtime, the reference",
        )
    said = _checker_says(model)
    fix = "correct that in the model and export it again"
    if said:
        fix = (
            "export the model again, and run onnx.checker.check_model(model, full_check=True) before saving it "
            f"(here it says: {said})"
        )
    elif said == "":
        fix += "; onnx.checker passes this file, so ONNX Runtime's reason is the one to go by"
    return OnnxImportError(
        f"ONNX Runtime, the reference, cannot load {name}: the model is malformed: {shorten(_malformed(message), 400)}",
        fix,
    )


def _unregistered(model, name: str, domain: str, op: str) -> OnnxImportError:
    """The refusal of a node ``op`` of ``domain``, a domain the file declares: a function the file does not define
    where it defines others of that domain, else an op that neither ONNX Runtime nor the workbench knows."""
    defined = [f.name for f in model.functions if f.domain == domain]
    if defined:
        return OnnxImportError(
            f"{name} calls function {op} of domain {domain!r}, which the file does not define "
            f"(it defines {', '.join(defined[:3])})",
            f"export the model again with the function {op} defined in it, or inlined",
        )
    return OnnxImportError(
        f"{name}'s op {op} of domain {domain!r} is one neither ONNX Runtime nor the workbench knows, "
        "nor a function the file defines",
        f"export the model with standard ONNX ops in place of {op} (or, if {op} is a function of the model's own, "
        f"with it defined in the file or inlined), {_EXPORT}",
    )


def _checker_says(model) -> str | None:
    """What ``onnx.checker.check_model(model, full_check=True)`` finds wrong in ``model``, less its context; ``""``
    where it passes, None where it could not check (a model too large for one protobuf message)."""
    onnx = onnx_module()
    try:
        onnx.checker.check_model(model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as err:
        return shorten(" ".join(str(err).split()).split(" ==> Context")[0], 200).rstrip(".")
    except Exception:  # noqa: BLE001 - protobuf's size limit, or what else keeps the checker from reading it
        return None
    return ""


def _malformed(message: str) -> str:
    """ONNX Runtime's reason a graph is malformed, without its preamble and its listing of the node's inputs."""
    text = re.sub(r"^(Fatal error|Error): ", "", message.removeprefix("This is an invalid model. "))
    node = re.match(r'In Node, \("([^"]*)", (\w+), "[^"]*", -?\d+\) : .*? , Error (.*)', text)
    if node:
        label = f" {node.group(1)!r}" if node.group(1) else ""
        return f"its {node.group(2)} node{label}: {node.group(3)}"
    return text


def _input_types(model, op: str) -> set[str]:
    """The element types (NumPy's names: ``float64``, ``bfloat16``) of the inputs of ``model``'s ``op`` nodes."""
    onnx = onnx_module()
    try:
        graph = onnx.shape_inference.infer_shapes(model).graph
    except Exception:  # onnx's checker refuses what ONNX Runtime has named already; the file's own types remain
        graph = model.graph
    types = {v.name: v.type.tensor_type.elem_type for v in [*graph.input, *graph.value_info, *graph.output]}
    types.update({t.name: t.data_type for t in graph.initializer})
    found = {types[i] for n in graph.node if n.op_type == op for i in n.input if types.get(i)}
    return {onnx.helper.tensor_dtype_to_np_dtype(t).name for t in found}
