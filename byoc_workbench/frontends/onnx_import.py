"""ONNX files into Relax, through TVM's own ONNX frontend, with static shapes first.

Three steps, each of which a user can see in the import's notes:

1. **Static shapes.** Where every input's shape is known (given, or fixed in
   the file), ONNX Runtime's basic graph optimisations fold the shape
   arithmetic (``Shape``, ``Gather`` on shapes, ``ConstantOfShape``, ...)
   into constants and write the result back as ONNX. Only its constant
   folding and no-op eliminations run: its fusions are switched off, so the
   graph keeps the file's ops and node names. This is what lets TVM's frontend
   take MXNet's export of the SSD, which it refuses as written ("cannot handle
   ShapeExpr inputs"). ONNX Runtime is the reference runtime already, so this
   adds no dependency (``onnxsim`` does the same with onnxruntime underneath;
   ``onnxslim`` reimplements folding in Python, with sympy).
2. **TVM's frontend**, given the nodes in an order that makes each value before
   it is read (:func:`in_order`: ONNX Runtime sorts a main graph listed out of order),
   and subclassed in two places: each node's name is kept, and
   ``NonMaxSuppression`` gets an honest type. Upstream types its selected
   indices with the largest possible count, while its lowering returns only the
   boxes selected; everything computed from that shape downstream (MXNet's
   export sorts and pads by it) is then wrong, and ``tvm.compile`` fails at a
   ``gather_nd`` (apache-tvm 0.27). Here the count is a symbolic dimension.
3. **Names.** Each binding is named after its ONNX node: MXNet's exporter keeps
   the Gluon names (``ssd0_resnetv10_stage1_conv0_fwd``), PyTorch's writes
   scopes (``/layer1/layer1.0/conv1/Conv``, kept as ``layer1.0.conv1.Conv``).
   :mod:`byoc_workbench.draw.blocks` groups the diagrams by them.

An op that TVM's frontend refuses is one line naming the op and its node.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import heapq
import io
import logging
import os
import re
import tempfile
import time
import warnings
from pathlib import Path

import tvm
from tvm import relax, tirx

from byoc_workbench.backends.onnxruntime import providers, session_options
from byoc_workbench.core import tvm_private
from byoc_workbench.core.errors import MissingDependencyError, WorkbenchError, first_line, import_optional
from byoc_workbench.core.ir_edit import rename_vars
from byoc_workbench.core.output_paths import not_a_file
from byoc_workbench.frontends.naming import binding_names
from byoc_workbench.frontends.onnx_refusal import load_refusal, ort_message
from byoc_workbench.frontends.onnx_shapes import (
    INSTALL_FIX,
    STANDARD_DOMAINS,
    OnnxImportError,
    all_static,
    check_onnx_model,
    check_sizes,
    graph_inputs,
    onnx_module,
    opset,
    resolve_shapes,
    shape_fix,
    unknown_sizes,
    with_shapes,
)
from byoc_workbench.frontends.own import OwnModel, check_input_size, seeded_inputs

logger = logging.getLogger(__name__)

# ONNX Runtime's basic-level fusions: off, so the graph keeps the file's ops (constant folding stays on).
_FUSIONS = (
    "ConvAddFusion",
    "ConvMulFusion",
    "ConvBNFusion",
    "ReluClipFusion",
    "ReshapeFusion",
    "NotWhereFusion",
    "DivMulFusion",
    "GemmActivationFusion",
    "MatMulAddFusion",
    "ConstantSharing",
    "CommonSubexpressionElimination",
)


def read_onnx(path) -> object:
    """The ``onnx.ModelProto`` in ``path``, or a one-line error."""
    onnx = onnx_module()
    if not isinstance(path, (str, os.PathLike)) or not str(path).strip():
        raise OnnxImportError(f"Not the path of an ONNX file: {path!r:.80}", "pass the path of a .onnx file")
    path = Path(path)
    try:
        path.stat()
    except OSError as err:
        if err.errno != errno.ENOENT:  # too long a name, a link loop, a folder it may not enter
            raise OnnxImportError(
                f"Cannot read {str(path):.80} ({err.strerror})", "pass the path of a .onnx file"
            ) from None
    if not path.is_file():
        raise OnnxImportError(f"ONNX file {path} {not_a_file(path)}", "pass the path of a .onnx file")
    try:
        model = onnx.load(str(path), load_external_data=False)
        _load_external_data(path, model)
    except OnnxImportError:
        raise
    except Exception as err:  # protobuf's DecodeError, or an OSError from external data
        raise OnnxImportError(
            f"{path} is not a readable ONNX model ({first_line(err)})",
            "pass a file written by onnx.save or torch.onnx.export",
        ) from None
    check_onnx_model(path, model)
    return model


def _load_external_data(path: Path, model) -> None:
    """Read in the data ``model`` keeps in other files, as ``onnx.load`` does, with a one-line error where such a file
    lies outside the model's folder (a link out of it, say), where ONNX Runtime, the reference, reads none, or where
    a tensor's offset and length in it (the model's own file, even) give another size than the tensor's: onnx reads
    what they give, and ONNX Runtime fails ("Deserialize tensor ... failed")."""
    onnx = onnx_module()
    helper, folder = onnx.external_data_helper, path.parent.resolve()
    every = helper._get_all_tensors(model)  # what onnx.load reads external data for, subgraphs included
    external = [(t, helper.ExternalDataInfo(t).location) for t in every if helper.uses_external_data(t)]
    for tensor, location in external:
        where = (folder / location).resolve()
        if not where.is_relative_to(folder):
            raise OnnxImportError(
                f"{path} keeps tensor {tensor.name}'s data in {location}, which leads out of the model's folder "
                f"(to {where}); ONNX Runtime, the reference, reads none there",
                f"put the data file itself (not a link to it) in {folder}, beside the model",
            )
    onnx.load_external_data_for_model(model, str(path.parent))
    for tensor, location in external:
        try:
            onnx.numpy_helper.to_array(tensor)
        except ValueError:
            raise OnnxImportError(
                f"{path} keeps tensor {tensor.name} (shape {list(tensor.dims)}) in {location}, but its offset and "
                f"length there give {len(tensor.raw_data)} bytes, not the tensor's size",
                "save the model again with onnx.save(model, path, save_as_external_data=True): it writes the data too",
            ) from None


def static_shapes(model, shapes: dict, name: str = "the model"):
    """``model`` with its inputs fixed at ``shapes`` and its shape arithmetic folded (see the module's notes)."""
    onnx = onnx_module()
    ort = import_optional("onnxruntime", INSTALL_FIX)
    fixed = with_shapes(model, shapes)
    with tempfile.TemporaryDirectory(prefix="byoc-onnx-") as tmp:
        src, dst = Path(tmp) / "fixed.onnx", Path(tmp) / "folded.onnx"
        onnx.save(fixed, str(src))
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(dst)
        options.log_severity_level = 3  # MXNet's export lists every weight among the inputs; ORT warns per weight
        try:
            ort.InferenceSession(
                str(src), options, providers=["CPUExecutionProvider"], disabled_optimizers=list(_FUSIONS)
            )
        except Exception as err:  # ORT's InvalidGraph, Fail, NotImplemented: the file or the shapes given
            raise load_refusal(model, ort_message(err), name, shapes) from None
        folded = onnx.load(str(dst))
    odd = sorted({n.domain for n in folded.graph.node if n.domain not in STANDARD_DOMAINS})
    if odd:  # never expected at the basic level; keep the file as it was rather than hand TVM foreign ops
        logger.warning("ONNX Runtime's folding left ops of domain %s; importing the file unfolded", ", ".join(odd))
        return fixed
    return folded


def scoped_name(node) -> str:
    """A node's name as the diagrams group it: ``/layer1/layer1.0/conv1/Conv`` -> ``layer1.0.conv1.Conv``.

    Names without ``/`` scopes (MXNet's exporter keeps the Gluon names) stay as
    they are; a node without a name takes its first output's.
    """
    name = node.name or (node.output[0] if node.output else node.op_type)
    if "/" not in name:
        return re.sub(r"[^\w.]", "_", name)
    *scopes, op = [s for s in name.split("/") if s]
    path = ""
    for scope in scopes:  # PyTorch writes each scope's qualified name (layer1.0); others just the attribute
        path = scope if path and scope.startswith(path + ".") or not path else f"{path}.{scope}"
    return re.sub(r"[^\w.]", "_", f"{path}.{op}" if path else op)


def _check_ops(graph) -> None:
    """Refuse a graph with ops TVM's ONNX frontend has no converter for, naming every such op and its nodes."""
    known = tvm_private.onnx_converters()
    missing: dict = {}
    for node in graph.node:
        if node.op_type not in known:
            missing.setdefault(node.op_type, []).append(node.name or node.output[0])
    if missing:
        listing = "; ".join(
            f"{op} (node {', '.join(map(repr, names[:3]))}{', ...' if len(names) > 3 else ''})"
            for op, names in sorted(missing.items())
        )
        raise OnnxImportError(
            f"TVM's ONNX frontend has no converter for {len(missing)} op(s): {listing}",
            "re-export the model without them (e.g. a lower opset, or with the ops decomposed)",
        )


def _symbolic_range(inputs) -> bool:
    start, limit, delta = inputs[:3]
    consts = all(isinstance(x, tvm.ir.expr.Constant) for x in (start, delta))
    return consts and tvm.ir.is_prim_expr(limit)


def _arange(bb, inputs):
    """Range(0, n, 1) with n a shape's symbolic size: arange keeps n as its length, so the
    result's shape is provably that of the tensor n was read from (ScatterND checks it)."""
    start, delta = (int(x.value.numpy()) for x in (inputs[0], inputs[2]))
    dtype = str(inputs[0].ty.dtype)
    return bb.normalize(relax.op.arange(start, inputs[1], delta, dtype=dtype))


def _selected(bb, selected, count_name: str):
    """NonMaxSuppression's selected indices cut to the count its lowering reports, under a symbolic
    size: upstream's claim the largest possible count, and every shape computed from them would be wrong."""
    item = bb.lookup_binding(selected)
    count = bb.emit(relax.op.astype(relax.TupleGetItem(item.tuple_value, 1), "int64"))
    end = bb.emit(relax.op.concat([count, relax.const([3], "int64")], axis=0))
    zero, one = relax.const([0, 0], "int64"), relax.const([1, 1], "int64")
    cut = bb.emit(relax.op.dynamic_strided_slice(selected, zero, end, one))
    return bb.match_cast(cut, relax.TensorType([tirx.Var(count_name, "int64"), 3], "int64"))


class _ImporterFixes:
    """What :func:`_importer_class` adds to TVM's ONNX importer, ahead of it in the class's order: each
    node's outputs recorded, and two converters fixed (see the module)."""

    def __init__(self, shapes, dtypes, graph):
        self.shapes = shapes  # every input's, symbolic dims too: upstream takes the static ones
        super().__init__({k: v for k, v in shapes.items() if all_static({k: v})}, dtypes)
        self.converted: list = []  # (node name, [outputs]) in order
        self.nodes, self.next = list(graph.node), 0  # nodes convert in order; many have no name
        self.nms = 0

    def check_ops(self, graph):
        _check_ops(graph)

    def convert(self, op_name, inputs, attrs, opset):
        name = tvm_private.onnx_node_name(attrs)
        node = self._node(name, op_name)
        try:
            out = self._fixed(op_name, inputs, attrs, opset)
        except WorkbenchError:
            raise
        except Exception as err:  # the frontend's converters raise anything
            label = scoped_name(node) if node is not None else name
            raise OnnxImportError(
                f"TVM's ONNX frontend cannot convert node {label!r} ({op_name}): {first_line(err)}",
                "check that node's inputs and attributes"
                + ("" if all_static(self.shapes) else "; " + shape_fix(self.shapes)),
            ) from err
        if node is not None:
            outs = list(out.fields) if isinstance(out, relax.Tuple) else [out]
            self.converted.append((scoped_name(node), outs))
        return out

    def _fixed(self, op_name, inputs, attrs, opset):
        """The node converted by upstream, but for Expand of a shape, Range to a symbolic size and
        NonMaxSuppression's count; a call bound here, so the binding can take the node's name."""
        if op_name == "Expand" and inputs[0] is not None and isinstance(inputs[0].ty, relax.ShapeType):
            inputs[0] = self.bb.emit(relax.op.shape_to_tensor(inputs[0]))  # upstream reads data.ty.shape
        if op_name == "Range" and _symbolic_range(inputs):
            out = _arange(self.bb, inputs)
        else:
            out = super().convert(op_name, inputs, attrs, opset)
        if op_name == "NonMaxSuppression":
            out = _selected(self.bb, out, f"nms_count{self.nms}" if self.nms else "nms_count")
            self.nms += 1
        elif isinstance(out, relax.Call):
            out = self.bb.emit(out)
        return out

    def _node(self, name: str, op: str):
        """The graph node being converted: the next one of this name and op (None inside an If's branch)."""
        for i in range(self.next, len(self.nodes)):
            if self.nodes[i].name == name and self.nodes[i].op_type == op:
                self.next = i + 1
                return self.nodes[i]
        return None


def _importer_class():
    """TVM's ONNX importer (imported only when a file is) with :class:`_ImporterFixes`'s changes."""

    class Importer(_ImporterFixes, tvm_private.onnx_importer_base()):
        """TVM's ONNX importer, recording each node's outputs and fixing two converters (see the module)."""

    return Importer


def in_order(model):
    """``model``, or where a node of a graph (an If's branch included) reads a value made by a later one, a copy
    with each graph's nodes sorted so that every value is made before it is read, in the file's order otherwise:
    ONNX Runtime sorts a main graph itself, TVM's frontend converts nodes in the order listed."""
    if all(_order(g) == list(range(len(g.node))) for g in _graphs(model.graph)):
        return model
    ordered = onnx_module().ModelProto()
    ordered.CopyFrom(model)
    for graph in reversed(_graphs(ordered.graph)):  # inner graphs first: sorting a graph copies its nodes
        order = _order(graph)
        placed = set(order)
        stuck = [n.name or n.op_type for i, n in enumerate(graph.node) if i not in placed]
        if stuck:  # ONNX Runtime refuses such a file first, where it loads it before the import
            raise OnnxImportError(
                f"{len(stuck)} node(s) of graph {graph.name!r} ({', '.join(stuck[:3])}{', ...' * (len(stuck) > 3)})"
                " wait on one another in a cycle: each reads a value that no node can make before it",
                "re-export the model: a node may not read its own output, directly or through other nodes",
            )
        nodes = [copy.deepcopy(graph.node[i]) for i in order]
        del graph.node[:]
        graph.node.extend(nodes)
    return ordered


def _graphs(graph) -> list:
    """``graph`` and every graph inside its nodes (If branches, Loop and Scan bodies), outer ones first."""
    inner = [g for node in graph.node for a in node.attribute for g in ([a.g] if a.HasField("g") else a.graphs)]
    return [graph, *(s for g in inner for s in _graphs(g))]


def _reads(node) -> set:
    """The names ``node`` reads: its inputs, and what its subgraphs read from outside themselves."""
    names = {x for x in node.input if x}
    for a in node.attribute:
        for g in [a.g] if a.HasField("g") else a.graphs:
            inside = {x for n in g.node for x in n.output} | {v.name for v in (*g.input, *g.initializer)}
            names |= {x for n in g.node for x in _reads(n)} - inside
    return names


def _order(graph) -> list:
    """The indices of ``graph``'s nodes in an order that makes each value before a node reads it, each node as early
    in the listed order as it can be; the nodes of a cycle, and those after it, left out."""
    made = {x: i for i, node in enumerate(graph.node) for x in node.output if x}
    then: list = [[] for _ in graph.node]
    waits = []
    for i, node in enumerate(graph.node):
        before = {made[x] for x in _reads(node) if x in made}
        waits.append(len(before))
        for j in before:
            then[j].append(i)
    ready, order = [i for i, n in enumerate(waits) if n == 0], []
    while ready:
        order.append(heapq.heappop(ready))
        for k in then[order[-1]]:
            waits[k] -= 1
            if waits[k] == 0:
                heapq.heappush(ready, k)
    return order


def to_relax(model, shapes: dict):
    """The Relax module of ``model`` (inputs at ``shapes``), each binding named after its ONNX node."""
    model = in_order(model)
    inputs = graph_inputs(model)
    dtypes = {name: str(dtype) for name, (_, dtype) in inputs.items()}
    importer = _importer_class()(shapes, dtypes, model.graph)
    chatter = io.StringIO()
    try:
        # upstream prints "Error converting operator ..." and warns about every renamed input
        with contextlib.redirect_stdout(chatter), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mod = importer.from_onnx(model.graph, opset(model))
    except BaseException as err:
        # A failure inside main's body leaves its binding block open, and TVM warns on stderr, after the one-line
        # error, when the builder goes with it; one before main has none to close.
        with contextlib.suppress(tvm.error.InternalError):
            tvm_private.end_block(importer.bb)
        m = re.search(r"Node (.*) cannot handle ShapeExpr inputs", str(err)) if isinstance(err, ValueError) else None
        if m is None:
            raise
        node = next((n for n in model.graph.node if n.name == m.group(1)), None)
        op = f" ({node.op_type})" if node is not None else ""
        raise OnnxImportError(
            f"TVM's ONNX frontend cannot convert node {m.group(1)!r}{op}: it computes on a shape that is only "
            "known at run time",
            shape_fix(shapes) if not all_static(shapes) else "report it: this node's shape arithmetic was not folded",
        ) from None
    main = mod["main"]
    mod[mod.get_global_var("main")] = rename_vars(main, binding_names(main, importer.converted))
    return relax.transform.Normalize()(mod)


def ort_reference(path, shapes: dict):
    """``run(inputs) -> outputs`` of ONNX Runtime on the original file."""
    ort = import_optional("onnxruntime", INSTALL_FIX)
    options = session_options()
    options.log_severity_level = 3
    session = ort.InferenceSession(str(path), sess_options=options, providers=providers())
    names = [i.name for i in session.get_inputs()]

    def run(inputs):
        return session.run(None, dict(zip(names, inputs)))

    return run


def _looks_like_detections(model) -> bool:
    """Three outputs shaped (N, K, 1), (N, K, 1), (N, K, 4): GluonCV's ids, scores and boxes."""
    dims = [[d.dim_value for d in o.type.tensor_type.shape.dim] for o in model.graph.output]
    return len(dims) == 3 and all(len(d) == 3 for d in dims) and [d[-1] for d in dims] == [1, 1, 4]


def import_onnx(path, input_shapes=None, seed: int = 0, inputs=None) -> OwnModel:
    """Import an ONNX file into Relax (see the module's notes).

    Parameters
    ----------
    path : str or os.PathLike
        The ``.onnx`` file.
    input_shapes : dict or tuple, optional
        ``{input: shape}`` (or one shape for a one-input model), over the file's
        own dims; needed where the file leaves a dim symbolic (a batch size).
    seed : int
        Seed of the example inputs.
    inputs : list of numpy.ndarray, optional
        Example inputs to use instead of seeded ones.

    Returns
    -------
    OwnModel
        ``reference`` runs ONNX Runtime on the original file.
    """
    t0 = time.perf_counter()
    model = read_onnx(path)
    shapes = resolve_shapes(model, input_shapes)
    dtypes = {name: dtype for name, (_, dtype) in graph_inputs(model).items()}
    check_input_size(shapes, dtypes)  # before ONNX Runtime and TVM work on a shape with a typo in it
    notes = [f"{len(model.graph.node)} ONNX nodes, opset {opset(model)}"]
    if all_static(shapes):
        folded = static_shapes(model, shapes, Path(path).name)
        notes.append(
            f"static shapes {shapes}: ONNX Runtime's constant folding left {len(folded.graph.node)} nodes "
            f"of {len(model.graph.node)}"
        )
    else:
        folded = with_shapes(model, shapes)  # a dynamic dim (-1) as an unknown size, not a size of -1
        notes.append(f"input shapes {shapes} are not all known: imported as written, with symbolic dims")
    mod = to_relax(folded, shapes)
    check_sizes(mod, shapes)
    import_s = time.perf_counter() - t0
    if inputs is None:
        if not all_static(shapes):
            raise OnnxImportError(
                f"Example inputs need every input's size, and {unknown_sizes(shapes)} not known", shape_fix(shapes)
            )
        inputs = seeded_inputs(shapes, dtypes, seed)
    return OwnModel(
        name=Path(path).name,
        kind="onnx",
        mod=mod,
        inputs=list(inputs),
        reference=ort_reference(path, shapes),
        reference_name=f"onnxruntime on {Path(path).name}",
        import_s=import_s,
        source_ops=len(model.graph.node),
        notes=notes,
        path=Path(os.fspath(path)),
        detection=_looks_like_detections(model),
    )


__all__ = [
    "MissingDependencyError",
    "OnnxImportError",
    "import_onnx",
    "read_onnx",
    "resolve_shapes",
    "scoped_name",
    "static_shapes",
    "to_relax",
]
