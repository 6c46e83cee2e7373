"""The teaching codegen: readable source, correct kernels, and the relax.ext hook."""

import graphs
import numpy as np
import pytest
import tvm
from tvm import relax

from byoc_workbench import stages
from byoc_workbench.backends import kernels, registry
from byoc_workbench.backends.teaching import TEACHING
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.measure.compiler import execute
from byoc_workbench.models import demo


def test_generated_source_is_readable_numpy(demo_mod, byoc):
    final = stages.run_stages(demo_mod, byoc.rules, stages.keep_all)[-1]
    src = {name: g.source for name, g in final.generated.items()}
    assert sorted(src) == ["byoc_target_0", "byoc_target_1", "byoc_target_2"]
    assert "def byoc_target_0(iter1):" in src["byoc_target_0"]
    assert "np.add(iter1, np.array(1, dtype='int32'))" in src["byoc_target_0"]
    assert "kernels.conv2d(d1, w1, strides=(1, 1), padding=(1, 1, 1, 1)" in src["byoc_target_2"]
    assert "# byoc-target.reshape" in src["byoc_target_2"] and "np.reshape(" in src["byoc_target_2"]


def test_partitioned_demo_matches_tvm_alone(demo_mod, byoc, reference_output):
    final = stages.run_stages(demo_mod, byoc.rules)[-1]
    assert len(final.generated) == 2
    out = execute.run(final.mod, demo.demo_inputs())
    assert out.shape == (1, 56, 56, 32)
    np.testing.assert_allclose(out, reference_output, rtol=1e-5, atol=1e-5)
    assert np.abs(reference_output).max() > 0.1  # the comparison is not between zeros


@pytest.mark.parametrize("strides,padding,dilation,groups", graphs.CONV_CASES)
def test_conv2d_kernel_matches_tvm(strides, padding, dilation, groups):
    mod, (x, w) = graphs.conv2d_case(strides, padding, dilation, groups)
    expected = execute.run(mod, [x, w])
    pad = (padding[0], padding[1], padding[0], padding[1])
    got = kernels.conv2d(x, w, strides, pad, dilation, groups)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_upstream_run_codegen_drives_the_registered_codegen(byoc):
    """relax.ext.byoc_target works with upstream RunCodegen on a graph without control flow."""
    assert registry.register_ext("teaching", "byoc_target") == "relax.ext.byoc_target"
    assert tvm.get_global_func("relax.ext.byoc_target", allow_missing=True) is not None
    mod = graphs.build(["conv_bias_relu", "add", "reshape_roundtrip"])
    part = [s for s in stages.run_stages(mod, byoc.rules, stages.keep_all) if s.name == "partition"][0]
    lowered = relax.transform.RunCodegen()(part.mod)
    assert not [
        gv for gv, f in lowered.functions.items() if isinstance(f, relax.Function) and f.attrs and "Codegen" in f.attrs
    ]
    np.testing.assert_allclose(
        execute.run(lowered, graphs.inputs()), execute.run(mod, graphs.inputs()), rtol=1e-5, atol=1e-5
    )


def test_unsupported_op_is_a_clear_error():
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((2, 3), "float32"))
    with bb.function("f", [x]):
        with bb.dataflow():
            y = bb.emit_output(relax.op.cumsum(x, axis=0))
        bb.emit_func_output(y)
    with pytest.raises(WorkbenchError, match="no NumPy emitter for relax.cumsum") as err:
        TEACHING.generate("f", bb.get()["f"])
    assert "\n" not in str(err.value)


def test_two_modules_with_same_subgraph_names_do_not_collide(byoc):
    a = graphs.build(["conv_bias_relu"])
    b = graphs.build(["conv_relu"])
    fa = stages.run_stages(a, byoc.rules)[-1]
    fb = stages.run_stages(b, byoc.rules)[-1]
    assert fa.generated["byoc_target_0"].symbol != fb.generated["byoc_target_0"].symbol
    vm_a = execute.build(fa.mod)
    execute.build(fb.mod)
    np.testing.assert_allclose(
        execute.run(fa.mod, graphs.inputs(), vm=vm_a), execute.run(a, graphs.inputs()), rtol=1e-5, atol=1e-5
    )
