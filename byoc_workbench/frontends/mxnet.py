"""Import MXNet symbols and Gluon blocks into Relax.

Relax has no MXNet frontend, so the workbench carries its own. The importer is a
table that maps an MXNet op name to a converter (see ``mxnet_nn``,
``mxnet_tensor``, ``mxnet_index`` and ``mxnet_detection``). Before anything is converted the whole
graph is checked, and every op missing from the table is reported in one error.

The symbol is read as JSON, so importing a symbol needs neither mxnet nor
gluoncv; only :func:`from_gluon` does. Every failure is an
:class:`MXNetImportError` (a :class:`~byoc_workbench.core.errors.WorkbenchError`) that
names the node: a converter refuses attribute values it does not cover, and an
error raised while converting a node is reported with that node's name.
"""

from __future__ import annotations

import json
import logging
import os
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import tvm
from tvm import relax

import byoc_workbench.core.progress
from byoc_workbench.core import tvm_private
from byoc_workbench.core.errors import WorkbenchError, first_line
from byoc_workbench.core.ir_edit import rename_vars
from byoc_workbench.frontends import gluon
from byoc_workbench.frontends.mxnet_attrs import Attrs
from byoc_workbench.frontends.mxnet_common import EXTEND_FIX, MXNetConversionError, MXNetImportError
from byoc_workbench.frontends.mxnet_detection import DETECTION_CONVERTERS
from byoc_workbench.frontends.mxnet_index import INDEX_CONVERTERS
from byoc_workbench.frontends.mxnet_nn import NN_CONVERTERS
from byoc_workbench.frontends.mxnet_tensor import TENSOR_CONVERTERS
from byoc_workbench.frontends.naming import binding_names

logger = logging.getLogger(__name__)

Converter = Callable[[relax.BlockBuilder, list, Attrs], object]

#: The converter table: MXNet op name -> converter(bb, inputs, attrs).
CONVERTERS: dict[str, Converter] = {
    **NN_CONVERTERS,
    **TENSOR_CONVERTERS,
    **INDEX_CONVERTERS,
    **DETECTION_CONVERTERS,
}

SYMBOL_FIX = "pass the -symbol.json that MXNet wrote (Symbol.save or HybridBlock.export)"


class UnsupportedOperatorError(MXNetImportError):
    """The graph holds ops that have no converter; ``missing`` maps op -> node names."""

    def __init__(self, missing: Mapping[str, list[str]]):
        self.missing = dict(missing)
        listing = "; ".join(
            f"{op} ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"
            for op, names in sorted(self.missing.items())
        )
        super().__init__(
            f"{len(self.missing)} unsupported MXNet op(s): {listing}",
            "add a converter for each to byoc_workbench.frontends.mxnet.CONVERTERS (or pass converters=...)",
        )


@dataclass(frozen=True)
class SymbolNode:
    """One node of an MXNet symbol graph: ``inputs`` are (node index, output index)."""

    index: int
    op: str
    name: str
    attrs: dict
    inputs: tuple


def load_symbol_json(symbol) -> dict[str, object]:
    """Return the graph dict of an MXNet symbol.

    Parameters
    ----------
    symbol : str, os.PathLike, dict or mxnet.symbol.Symbol
        A ``-symbol.json`` path, its JSON text, the parsed dict, or a Symbol.
    """
    if isinstance(symbol, dict):
        return _checked(symbol)
    if hasattr(symbol, "tojson"):
        return json.loads(symbol.tojson())
    text = os.fspath(symbol)
    if not text.lstrip().startswith("{"):
        if not os.path.exists(text):
            raise MXNetImportError(f"Symbol file {text!r} does not exist", "pass a -symbol.json path")
        with open(text) as f:
            text = f.read()
    try:
        graph = json.loads(text)
    except json.JSONDecodeError as err:
        raise MXNetImportError(f"The symbol is not valid JSON ({err})", "pass an MXNet -symbol.json") from None
    return _checked(graph)


def _checked(graph) -> dict:
    # Every later step indexes nodes by these numbers; MXNet writes nodes in topological
    # order, so an input always refers to an earlier node.
    if not isinstance(graph, dict) or "nodes" not in graph or "heads" not in graph:
        raise MXNetImportError("The symbol JSON has no 'nodes'/'heads'", SYMBOL_FIX)
    try:
        for i, node in enumerate(graph["nodes"]):
            missing = {"op", "name", "inputs"} - set(node)
            if missing:
                raise ValueError(f"node {i} has no {', '.join(sorted(missing))}")
            if not all(0 <= int(entry[0]) < i for entry in node["inputs"]):
                raise ValueError(f"an input refers to a node that is not before node {i}")
        if not all(0 <= int(head[0]) < len(graph["nodes"]) for head in graph["heads"]):
            raise ValueError("a head refers to a node that does not exist")
    except (KeyError, TypeError, IndexError, ValueError) as err:
        raise MXNetImportError(f"The symbol JSON is malformed ({type(err).__name__}: {err})", SYMBOL_FIX) from None
    return graph


def graph_nodes(graph: dict) -> list[SymbolNode]:
    """Parse the ``nodes`` list of a symbol graph into :class:`SymbolNode` records."""
    nodes = []
    for i, raw in enumerate(graph["nodes"]):
        attrs = raw.get("attrs", raw.get("param", raw.get("attr", {}))) or {}
        nodes.append(SymbolNode(i, raw["op"], raw["name"], attrs, tuple((e[0], e[1]) for e in raw["inputs"])))
    return nodes


def reachable(graph: dict) -> set[int]:
    """Indices of the nodes the graph's heads depend on (MXNet keeps dead nodes in JSON)."""
    nodes, seen = graph["nodes"], set()
    stack = [head[0] for head in graph["heads"]]
    while stack:
        i = stack.pop()
        if i not in seen:
            seen.add(i)
            stack.extend(entry[0] for entry in nodes[i]["inputs"])
    return seen


def with_outputs(symbol, names: list[str]) -> dict[str, object]:
    """A copy of the graph whose outputs are the nodes ``names`` (output 0 of each).

    Used to compare intermediate tensors, e.g. the input of ``_contrib_box_nms``.
    """
    graph = dict(load_symbol_json(symbol))
    index = {node["name"]: i for i, node in enumerate(graph["nodes"])}
    missing = [n for n in names if n not in index]
    if missing:
        raise MXNetImportError(f"No node named {missing} in the symbol", "use names from op_inventory or graph_nodes")
    graph["heads"] = [[index[n], 0, 0] for n in names]
    return graph


def op_inventory(symbol) -> dict[str, int]:
    """Count the operator nodes of an MXNet symbol by op name, most frequent first."""
    counts: dict[str, int] = {}
    for node in graph_nodes(load_symbol_json(symbol)):
        if node.op != "null":
            counts[node.op] = counts.get(node.op, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def find_unsupported(symbol, converters: Mapping[str, Converter] | None = None) -> dict[str, list[str]]:
    """Map every op without a converter to the names of the nodes that use it."""
    table = CONVERTERS if converters is None else converters
    missing: dict[str, list[str]] = OrderedDict()
    for node in graph_nodes(load_symbol_json(symbol)):
        if node.op != "null" and node.op not in table:
            missing.setdefault(node.op, []).append(node.name)
    return dict(missing)


def check_supported(symbol, converters: Mapping[str, Converter] | None = None) -> None:
    """Raise :class:`UnsupportedOperatorError` listing every unsupported op, if any."""
    missing = find_unsupported(symbol, converters)
    if missing:
        raise UnsupportedOperatorError(missing)


def _as_numpy(value, dtype) -> np.ndarray:
    if hasattr(value, "asnumpy"):
        value = value.asnumpy()
    elif hasattr(value, "numpy"):
        value = value.numpy()
    return np.asarray(value, dtype=dtype, order="C")


def _strip_prefix(params: Mapping | None) -> dict:
    # A file written by ``export`` prefixes keys with "arg:"/"aux:"; accept both forms.
    out = {}
    for key, value in (params or {}).items():
        out[key.split(":", 1)[1] if key[:4] in ("arg:", "aux:") else key] = value
    return out


def _convert_nodes(bb, nodes, values, converters, progress) -> list:
    """Convert every op node; returns ``[(node name, its output values)]`` in order (see :mod:`..naming`)."""
    converted = []
    with byoc_workbench.core.progress.bar(len(nodes), "MXNet -> Relax", "node", enabled=progress is not False) as bar:
        for node in nodes:
            bar.update()
            if node.op == "null":
                continue
            try:
                inputs = [values[i][k] for i, k in node.inputs]
                values[node.index] = _outputs_of(bb, converters[node.op](bb, inputs, Attrs(node.attrs, node.name)))
                converted.append((node.name, values[node.index]))
            except WorkbenchError:
                raise
            except Exception as err:  # TVM's type inference or a converter meeting a case it does not check
                raise MXNetConversionError(
                    f"Node {node.name!r} ({node.op}) failed to convert: {type(err).__name__}: {first_line(err)}",
                    f"check the node's attributes and input shapes; if MXNet runs it, {EXTEND_FIX}",
                ) from err
        bar.done = f"MXNet -> Relax: {len(converted)} MXNet ops converted"
    return converted


def _outputs_of(bb, result) -> list:
    if isinstance(result, (list, tuple)):
        return [bb.normalize(r) for r in result]
    expr = bb.normalize(result)
    if hasattr(expr.ty, "fields"):
        expr = bb.emit(expr)
        return [bb.emit(relax.TupleGetItem(expr, i)) for i in range(len(expr.ty.fields))]
    return [bb.emit(expr)]


def _head(values, raw_nodes, i, k):
    if k >= len(values[i]):
        raise MXNetImportError(
            f"The symbol's heads ask for output {k} of node {raw_nodes[i]['name']!r}, which has {len(values[i])}",
            SYMBOL_FIX,
        )
    return values[i][k]


def _graph_inputs(nodes, shape_dict: dict, params: dict, dtype: str, bind_params: bool) -> tuple:
    """``(values, inputs, param_vars, used_params)`` of the graph's ``null`` nodes: each data input a
    variable of its shape; each parameter a constant, or (``bind_params=False``) a variable too."""
    values: dict[int, list] = {}
    inputs, param_vars, used_params = [], [], OrderedDict()
    for node in nodes:
        if node.op != "null":
            continue
        if node.name in shape_dict:
            var = relax.Var(node.name, relax.TensorType(tuple(shape_dict[node.name]), dtype))
            inputs.append(var)
            values[node.index] = [var]
        elif node.name in params:
            array = _as_numpy(params[node.name], dtype)
            used_params[node.name] = array
            if bind_params:
                values[node.index] = [relax.const(array, dtype)]
            else:
                var = relax.Var(node.name, relax.TensorType(array.shape, dtype))
                param_vars.append(var)
                values[node.index] = [var]
        else:
            raise MXNetImportError(
                f"Graph input {node.name!r} has neither a shape nor a parameter value",
                "add it to shape_dict (data) or to arg_params/aux_params (weights)",
            )
    if not inputs:
        raise MXNetImportError(
            f"No graph input is named in shape_dict {sorted(shape_dict)}",
            "pass e.g. shape_dict={'data': (1, 3, 512, 512)}",
        )
    return values, inputs, param_vars, used_params


def from_mxnet(
    symbol,
    arg_params: Mapping | None = None,
    aux_params: Mapping | None = None,
    shape_dict: Mapping[str, tuple] | None = None,
    dtype: str = "float32",
    bind_params: bool = True,
    converters: Mapping[str, Converter] | None = None,
    progress: bool | None = None,
) -> tuple[tvm.IRModule, dict[str, np.ndarray]]:
    """Convert an MXNet symbol and its parameters to a Relax IRModule.

    Parameters
    ----------
    symbol : str, os.PathLike, dict or mxnet.symbol.Symbol
        The graph (see :func:`load_symbol_json`).
    arg_params, aux_params : dict
        Parameter name -> array (NDArray or numpy). Keys may carry the
        ``arg:``/``aux:`` prefixes of an exported ``.params`` file.
    shape_dict : dict
        Input name -> shape for every graph input that is not a parameter.
    dtype : str
        Dtype of the inputs and parameters.
    bind_params : bool
        True: parameters become Relax constants. False: ``main`` takes them as
        extra inputs after the data inputs, in graph order.
    converters : dict, optional
        A converter table to use instead of :data:`CONVERTERS`.
    progress : bool, optional
        Show a progress bar over the nodes (default: only on a terminal).

    Returns
    -------
    (tvm.IRModule, dict)
        The module with ``main`` in one dataflow block, and the parameters as
        numpy arrays (in ``main``'s parameter order when not bound).
    """
    graph = load_symbol_json(symbol)
    table = CONVERTERS if converters is None else converters
    check_supported(graph, table)
    shape_dict = dict(shape_dict or {})
    params = {**_strip_prefix(arg_params), **_strip_prefix(aux_params)}
    live = reachable(graph)
    nodes = [node for node in graph_nodes(graph) if node.index in live]

    values, inputs, param_vars, used_params = _graph_inputs(nodes, shape_dict, params, dtype, bind_params)
    bb = relax.BlockBuilder()
    try:
        with bb.function("main", inputs + param_vars):
            with bb.dataflow():
                converted = _convert_nodes(bb, nodes, values, table, progress)
                heads = [_head(values, graph["nodes"], i, k) for i, k, *_ in graph["heads"]]
                out = bb.emit_output(heads[0] if len(heads) == 1 else relax.Tuple(heads))
            bb.emit_func_output(out)
    except WorkbenchError:
        # A refused node leaves the dataflow scope's binding block open, and TVM prints a
        # warning after the one-line error when the builder is destroyed with it.
        tvm_private.end_block(bb)
        raise
    mod = bb.get()
    main = mod["main"]
    mod[mod.get_global_var("main")] = rename_vars(main, binding_names(main, converted))
    logger.info("imported %d MXNet nodes, %d params", len(nodes), len(used_params))
    return mod, dict(used_params)


def from_gluon(
    block,
    shape_dict: Mapping[str, tuple],
    bind_params: bool = True,
    dtype: str = "float32",
    progress: bool | None = None,
) -> tuple[tvm.IRModule, dict[str, np.ndarray]]:
    """Convert a Gluon ``HybridBlock`` to Relax (see :func:`from_mxnet`).

    The block is hybridized and, if it has never run, run once on zeros so that
    MXNet traces its symbol; no file is written.

    Parameters
    ----------
    block : mxnet.gluon.HybridBlock
        An initialised block.
    shape_dict : dict
        Input name -> shape; a Gluon block's input is usually named ``data``.
    """
    traced = gluon.trace(block, list(shape_dict.values()), dtype)
    # A traced graph names its inputs "data", "data0"...; map them to shape_dict's order.
    renamed = dict(zip(traced.inputs, shape_dict.values()))
    return from_mxnet(
        traced.graph, traced.params(), None, renamed, dtype=dtype, bind_params=bind_params, progress=progress
    )
