"""Trace a Gluon block to its MXNet symbol: the one place that runs a block to see its graph.

The importer (:func:`byoc_workbench.frontends.from_gluon`), the zoo
(:func:`byoc_workbench.models.zoo.symbol_and_params`) and the seeded batch-norm
calibration all start from this trace. mxnet is imported inside the functions,
so this module imports on any Python.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from byoc_workbench.core.errors import first_line, import_optional
from byoc_workbench.frontends.mxnet_common import MXNetImportError

INSTALL_FIX = "use Python 3.11 and `make test-mxnet`'s venv, or pip install -r requirements-mxnet.txt"


def has_mxnet() -> bool:
    """Whether mxnet is installed (looked up, not imported: importing it takes a second)."""
    return importlib.util.find_spec("mxnet") is not None


def import_mxnet():
    """The ``mxnet`` module, or :class:`~byoc_workbench.core.errors.MissingDependencyError` saying what to install."""
    return import_optional("mxnet", INSTALL_FIX)


def quiet_mxnet(func):
    """Run ``func`` without MXNet's "Cannot decide type" warning, which every
    hybridized forward of a zoo model prints and which says nothing to a user."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Cannot decide type", category=UserWarning)
            return func(*args, **kwargs)

    return wrapper


@dataclass(frozen=True)
class GluonTrace:
    """The graph MXNet recorded for a hybridized block.

    Attributes
    ----------
    graph : dict
        The symbol as JSON (``nodes``, ``heads``...), every output a head.
    inputs : list of str
        The names MXNet gave the data inputs (``data``, ``data0``...), in call order.
    block : mxnet.gluon.HybridBlock
    """

    graph: dict
    inputs: list
    block: object

    def params(self) -> dict[str, np.ndarray]:
        """The block's parameters that the graph reads, as numpy arrays."""
        used = {node["name"] for node in self.graph["nodes"] if node["op"] == "null"}
        return {name: p.data().asnumpy() for name, p in self.block.collect_params().items() if name in used}


@quiet_mxnet
def trace(block, input_shapes: Sequence[tuple], dtype: str = "float32") -> GluonTrace:
    """Trace ``block``: hybridize it and run it once on zeros, unless it already ran hybridized.

    Parameters
    ----------
    block : mxnet.gluon.HybridBlock
        An initialised block.
    input_shapes : sequence of tuple
        One shape per input, in call order.
    dtype : str
        Dtype of the zeros the block is run on.
    """
    mx = import_mxnet()
    # _cached_graph is where Gluon keeps the traced (inputs, outputs); hybridize() clears it.
    if not getattr(block, "_cached_graph", None):
        block.hybridize()
        try:
            block(*[mx.nd.zeros(shape, dtype=dtype) for shape in input_shapes])
        except Exception as err:  # MXNet raises MXNetError, ValueError or AssertionError for bad inputs
            raise MXNetImportError(
                f"{type(block).__name__} does not run on inputs of shape {list(input_shapes)} "
                f"({first_line(err, last=True)})",
                "pass the shapes the block expects, one per input (e.g. {'data': (1, 3, 224, 224)}), "
                "and initialise it first",
            ) from err
    data_vars, sym = block._cached_graph
    sym = mx.sym.Group(list(sym)) if isinstance(sym, (list, tuple)) else sym
    return GluonTrace(json.loads(sym.tojson()), [v.name for v in data_vars], block)


@quiet_mxnet
def symbol_block(graph: dict, inputs: Sequence[str], params: dict):
    """An MXNet ``SymbolBlock`` of ``graph`` (symbol JSON) with ``params`` (numpy, by name), hybridized."""
    mx = import_mxnet()
    block = mx.gluon.SymbolBlock(mx.sym.load_json(json.dumps(graph)), [mx.sym.var(name) for name in inputs])
    block_params = block.collect_params()
    for name, value in params.items():
        if name in block_params:
            block_params[name]._load_init(mx.nd.array(value, dtype=value.dtype), mx.cpu())
    block.hybridize(static_alloc=True, static_shape=True)
    return block
