"""The MXNet importer without MXNet: symbol JSON it refuses, each in one error naming the node or the ops,
the reshape codes, and parameters bound or kept as inputs."""

from __future__ import annotations

import numpy as np
import pytest
from messages import one_line
from mxnet_check import chain_graph, run_tvm

from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.frontends import (
    CONVERTERS,
    MXNetImportError,
    UnsupportedOperatorError,
    find_unsupported,
    from_mxnet,
)
from byoc_workbench.frontends.mxnet_tensor import mxnet_reshape_shape


def test_every_unsupported_op_is_listed_in_one_error():
    graph = chain_graph([("FooOp", "foo_a", {}), ("relu", "r", {}), ("BarOp", "bar", {}), ("FooOp", "foo_b", {})])
    with pytest.raises(UnsupportedOperatorError) as info:
        from_mxnet(graph, {}, {}, {"data": (1, 3)})
    err = info.value
    assert isinstance(err, WorkbenchError)
    assert err.missing == {"FooOp": ["foo_a", "foo_b"], "BarOp": ["bar"]}
    message = one_line(err)
    for text in ("FooOp", "foo_a", "foo_b", "BarOp", "bar", "CONVERTERS"):
        assert text in message


def test_error_lists_ops_deleted_from_a_copy_of_the_table():
    graph = chain_graph([("Flatten", "f", {}), ("softmax", "s", {"axis": "-1"}), ("relu", "r", {})])
    table = dict(CONVERTERS)
    del table["Flatten"], table["softmax"]
    assert find_unsupported(graph, table) == {"Flatten": ["f"], "softmax": ["s"]}
    with pytest.raises(UnsupportedOperatorError, match="Flatten.*softmax"):
        from_mxnet(graph, {}, {}, {"data": (1, 3)}, converters=table)
    # The module-level table is untouched.
    assert "Flatten" in CONVERTERS


def test_input_without_shape_or_value_is_a_clear_error():
    graph = chain_graph([("relu", "r", {})])
    with pytest.raises(MXNetImportError, match="shape_dict"):
        from_mxnet(graph, {}, {}, {"x": (1, 3)})


def test_bad_symbol_json_is_a_clear_error(tmp_path):
    with pytest.raises(MXNetImportError, match="does not exist"):
        from_mxnet(tmp_path / "nope-symbol.json", {}, {}, {"data": (1,)})
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(MXNetImportError, match="not valid JSON"):
        from_mxnet(tmp_path / "bad.json", {}, {}, {"data": (1,)})


REFUSALS = {
    "conv_4d_kernel": ("Convolution", {"kernel": "(3, 3, 3, 3)", "num_filter": "2"}, (1, 2, 5, 5, 5, 5), "4-d kernel"),
    "conv_layout_rank": ("Convolution", {"kernel": "(3, 3)", "layout": "NCDHW"}, (1, 2, 5, 5), "layout='NCDHW'"),
    "conv_data_rank": ("Convolution", {"kernel": "(3, 3)"}, (1, 2, 5, 5, 5), "on 5-d data"),
    "conv_stride_rank": ("Convolution", {"kernel": "(3, 3)", "stride": "(1, 1, 1)"}, (1, 2, 5, 5), "stride="),
    "conv_no_kernel": ("Convolution", {"num_filter": "2"}, (1, 2, 5, 5), "attribute 'kernel'"),
    "conv_bad_kernel": ("Convolution", {"kernel": "(3, x)"}, (1, 2, 5, 5), "is not a tuple"),
    "pool_4d_kernel": ("Pooling", {"kernel": "(2, 2, 2, 2)"}, (1, 2, 4, 4, 4, 4), "4-d kernel"),
    "pool_layout": ("Pooling", {"kernel": "(2, 2, 2)", "layout": "NCHW"}, (1, 2, 4, 4, 4), "layout='NCHW'"),
    "pool_lp": ("Pooling", {"kernel": "(2, 2)", "pool_type": "lp"}, (1, 2, 4, 4), "pool_type='lp'"),
    "pool_same": ("Pooling", {"kernel": "(2, 2)", "pooling_convention": "same"}, (1, 2, 4, 4), "'same'"),
    "global_pool_rank": ("Pooling", {"global_pool": "True"}, (1, 2, 3, 3, 3, 3), "global Pooling"),
    "slice_axis_no_axis": ("slice_axis", {"begin": "0"}, (4, 4), "attribute 'axis'"),
    # Not checked by the converter: TVM's type inference refuses it, and the error names the node.
    "reshape_size": ("Reshape", {"shape": "(5, 7)"}, (1, 3), "failed to convert"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_converter_refuses_what_it_cannot_convert(case):
    """Each refusal is a one-line WorkbenchError that names the node, never a crash."""
    op, attrs, shape, text = REFUSALS[case]
    with pytest.raises(MXNetImportError) as info:
        from_mxnet(chain_graph([(op, "node_x", attrs)]), {}, {}, {"data": shape})
    message = one_line(info)
    assert "'node_x'" in message and text in message


def _malformed(change):
    graph = chain_graph([("relu", "r", {}), ("relu", "s", {})])
    change(graph)
    return graph


MALFORMED = {
    "node_without_inputs": (lambda g: g["nodes"][1].pop("inputs"), "node 1 has no inputs"),
    "input_from_a_later_node": (lambda g: g["nodes"][1].update(inputs=[[2, 0, 0]]), "not before node 1"),
    "head_out_of_range": (lambda g: g.update(heads=[[7, 0, 0]]), "does not exist"),
    "head_output_out_of_range": (lambda g: g.update(heads=[[2, 1, 0]]), "output 1 of node 's'"),
    "nodes_not_a_list": (lambda g: g.update(nodes=3), "malformed"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_symbol_is_a_clear_error(case):
    change, text = MALFORMED[case]
    with pytest.raises(MXNetImportError) as info:
        from_mxnet(_malformed(change), {}, {}, {"data": (1, 3)})
    assert text in one_line(info)


@pytest.mark.parametrize(
    "in_shape, spec, reverse, expected",
    [
        ((2, 3, 4), (0, -1), False, (2, 12)),
        ((2, 3, 4), (-2,), False, (2, 3, 4)),
        ((2, 3, 4), (-3, 4), False, (6, 4)),
        ((2, 12), (0, -4, 3, -1), False, (2, 3, 4)),
        ((1, 490560 // 6, 6), (1, -1), False, (1, 490560)),
        ((10, 5, 4), (-1, 0), True, (50, 4)),
        ((2, 3, 4), (0, -1, 4), False, (2, 3, 4)),
    ],
)
def test_reshape_special_codes(in_shape, spec, reverse, expected):
    assert mxnet_reshape_shape(in_shape, spec, reverse) == expected


def test_params_bound_or_kept_as_inputs():
    graph = {
        "nodes": [
            {"op": "null", "name": "data", "inputs": []},
            {"op": "null", "name": "w", "inputs": []},
            {"op": "null", "name": "b", "inputs": []},
            {
                "op": "FullyConnected",
                "name": "fc",
                "attrs": {"num_hidden": "2"},
                "inputs": [[0, 0, 0], [1, 0, 0], [2, 0, 0]],
            },
        ],
        "arg_nodes": [0, 1, 2],
        "heads": [[3, 0, 0]],
    }
    rng = np.random.RandomState(0)
    w, b, x = rng.randn(2, 3).astype("float32"), rng.randn(2).astype("float32"), rng.randn(4, 3).astype("float32")
    bound, params = from_mxnet(graph, {"arg:w": w, "arg:b": b}, {}, {"data": (4, 3)})
    free, _ = from_mxnet(graph, {"w": w, "b": b}, {}, {"data": (4, 3)}, bind_params=False)
    assert len(bound["main"].params) == 1 and len(free["main"].params) == 3
    assert list(params) == ["w", "b"]
    expected = x @ w.T + b
    np.testing.assert_allclose(run_tvm(bound, x)[0], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(run_tvm(free, x, w, b)[0], expected, rtol=1e-5, atol=1e-6)
