"""Helpers shared by the importer's tests: tiny symbol graphs, TVM runs, and MXNet-against-TVM checks."""

from __future__ import annotations

import numpy as np
import pytest

from byoc_workbench.frontends import from_mxnet


def chain_graph(ops):
    """A symbol JSON: one 'data' input feeding a chain of (op, name, attrs) nodes."""
    nodes = [{"op": "null", "name": "data", "inputs": []}]
    for op, name, attrs in ops:
        nodes.append({"op": op, "name": name, "attrs": attrs, "inputs": [[len(nodes) - 1, 0, 0]]})
    return {"nodes": nodes, "arg_nodes": [0], "heads": [[len(nodes) - 1, 0, 0]]}


def run_tvm(mod, *inputs):
    import tvm
    from tvm import relax

    vm = relax.VirtualMachine(tvm.compile(mod, "llvm"), tvm.cpu())
    out = vm["main"](*[tvm.runtime.tensor(np.asarray(x)) for x in inputs])
    return [out.numpy()] if hasattr(out, "numpy") else [o.numpy() for o in out]


def mxnet_or_skip():
    return pytest.importorskip("mxnet")


def check_symbol(sym, shapes, rng, params=None, rtol=1e-5, atol=1e-5):
    """Run ``sym`` in MXNet and through the importer in TVM, compare every output."""
    mx = mxnet_or_skip()
    values = {}
    known = {n: np.shape(v) for n, v in (params or {}).items()}
    arg_shapes, _, aux_shapes = sym.infer_shape(**shapes, **known)
    for name, shape in zip(sym.list_arguments() + sym.list_auxiliary_states(), arg_shapes + aux_shapes):
        values[name] = (params or {}).get(name)
        if values[name] is None:
            values[name] = rng.uniform(0.5, 1.5, shape) if name.endswith("var") else rng.randn(*shape)
        values[name] = np.asarray(values[name], dtype="float32")
    # A Group lists a shared input once per output, so bind by position.
    args = [mx.nd.array(values[n]) for n in sym.list_arguments()]
    aux = [mx.nd.array(values[n]) for n in sym.list_auxiliary_states()]
    expected = [o.asnumpy() for o in sym.bind(mx.cpu(), args, aux_states=aux).forward(is_train=False)]
    weights = {n: v for n, v in values.items() if n not in shapes}
    mod, _ = from_mxnet(sym, weights, None, shapes)
    got = run_tvm(mod, *[values[n] for n in shapes])
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)
