"""The c codegen: C loops compiled by the system's compiler, run on TVM's buffers, equal to TVM alone."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import graphs
import numpy as np
import pytest
import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R

from byoc_workbench import stages
from byoc_workbench.backends import c_source, registry
from byoc_workbench.backends.c import C
from byoc_workbench.backends.codegen import register_codegen
from byoc_workbench.backends.planner import broadcast_index
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.flow import rules, summary
from byoc_workbench.measure.compiler import execute
from byoc_workbench.models import demo

OPS = {
    "conv2d": "relax.nn.conv2d",
    "relu": "relax.nn.relu",
    "add": "relax.add",
    "expand_dims": "relax.expand_dims",
    "multiply": "relax.multiply",
    "permute_dims": "relax.permute_dims",
    "reshape": "relax.reshape",
    "sigmoid": "relax.sigmoid",
    "maximum": "relax.maximum",
}
CTEST = tuple(rules.op_rule("ctest", name, op) for name, op in OPS.items())


@I.ir_module
class ConvNet:
    """conv/relu/add and friends, 15 ops; the max_pool2d stays on the host and cuts it in two."""

    @R.function
    def main(
        x: R.Tensor((1, 4, 12, 12), "float32"),
        w1: R.Tensor((8, 4, 3, 3), "float32"),
        w2: R.Tensor((8, 2, 3, 3), "float32"),
        w3: R.Tensor((6, 8, 3, 3), "float32"),
        b: R.Tensor((8,), "float32"),
    ) -> R.Tensor((1, 48), "float32"):
        with R.dataflow():
            c1 = R.nn.conv2d(x, w1, padding=(1, 1))
            e = R.expand_dims(b, axis=[1, 2])
            r1 = R.nn.relu(R.add(c1, e))
            c2 = R.nn.conv2d(r1, w2, padding=(1, 1), groups=4)
            s = R.add(r1, R.nn.relu(c2))
            p = R.nn.max_pool2d(s, pool_size=(2, 2), strides=(2, 2))
            c3 = R.nn.conv2d(p, w3, strides=(2, 2), padding=(1, 0, 2, 1), dilation=(1, 2))
            m = R.multiply(R.nn.relu(c3), R.const(0.5, "float32"))
            t = R.permute_dims(m, [0, 2, 3, 1])
            g = R.maximum(R.sigmoid(t), R.const(0.6, "float32"))
            y = R.reshape(g, (1, 48))
            R.output(y)
        return y


def convnet_inputs():
    rng = np.random.RandomState(3)
    shapes = [(1, 4, 12, 12), (8, 4, 3, 3), (8, 2, 3, 3), (6, 8, 3, 3), (8,)]
    return [rng.uniform(-1, 1, s).astype("float32") for s in shapes]


def test_the_demo_through_c_equals_tvm_alone(demo_mod, byoc, reference_output):
    final = stages.run_stages(demo_mod, byoc.rules, stages.keep_all, backend="c")[-1]
    assert {n: g.backend for n, g in final.generated.items()} == {f"byoc_target_{k}": "c" for k in range(3)}
    src = final.generated["byoc_target_2"].source
    assert "int byoc_target_2(const int32_t* " not in src and "int byoc_target_2(const float* d1, " in src
    assert "memcpy(out0, " in src, "the reshape writes the subgraph's output buffer"
    assert "int byoc_target_0(const int32_t* iter1, const int32_t* const0, int32_t* out0)" in (
        final.generated["byoc_target_0"].source
    )
    np.testing.assert_allclose(execute.run(final.mod, demo.demo_inputs()), reference_output, rtol=1e-5, atol=1e-5)


def test_a_conv_relu_add_model_through_c_equals_tvm_alone():
    found = stages.run_stages(ConvNet, CTEST, stages.keep_all, backend="c")
    part = summary.stage(found, "partition")
    assert sum(len(sg.ops) for sg in part.subgraphs) == 14 and len(part.subgraphs) == 2  # all but the pool
    final = found[-1]
    assert {g.backend for g in final.generated.values()} == {"c"} and len(final.generated) == 2
    got, want = execute.run(final.mod, convnet_inputs()), execute.run(ConvNet, convnet_inputs())
    assert np.abs(want).max() > 0.5 and got.shape == (1, 48)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_upstream_run_codegen_drives_relax_ext_c():
    part = summary.stage(stages.run_stages(ConvNet, CTEST, stages.keep_all), "partition").mod
    assert registry.register_ext("c", "ctest") == "relax.ext.ctest"
    lowered = relax.transform.RunCodegen()(part)
    script = lowered.script(show_meta=False)
    assert "R.call_dps_packed" in script and '"Codegen"' not in script
    np.testing.assert_allclose(
        execute.run(lowered, convnet_inputs()), execute.run(ConvNet, convnet_inputs()), rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("strides,padding,dilation,groups", graphs.CONV_CASES)
def test_conv2d_emitter_matches_tvm(strides, padding, dilation, groups):
    mod, inputs = graphs.conv2d_case(strides, padding, dilation, groups)
    final = stages.run_stages(mod, CTEST[:1], stages.keep_all, backend="c")[-1]
    assert list(final.generated) == ["ctest_0"]
    np.testing.assert_allclose(execute.run(final.mod, inputs), execute.run(mod, inputs), rtol=1e-4, atol=1e-4)


def test_broadcast_index():
    assert broadcast_index((1, 32, 4, 4), (1, 32, 4, 4)) == "i"
    assert broadcast_index((), (2, 3)) == "0"
    assert broadcast_index((32, 1, 1), (1, 32, 4, 4)) == "(i / 16)"
    assert broadcast_index((3,), (2, 3)) == "(i % 3)"
    assert broadcast_index((2, 1), (2, 3)) == "(i / 3)"
    assert broadcast_index((4, 1, 5), (4, 3, 5)) == "(i / 15) * 5 + (i % 5)"


def test_libraries_are_cached_by_content(tmp_path, monkeypatch, demo_mod, byoc):
    monkeypatch.setenv("BYOC_WORKBENCH_CACHE", str(tmp_path))
    first = stages.run_stages(demo_mod, byoc.rules, backend="c")[-1]
    libs = sorted((tmp_path / "c").glob("*.so"))
    assert [p.name.rsplit("-", 1)[0] for p in libs] == ["byoc_target_1", "byoc_target_2"]
    assert all(p.with_suffix(".c").read_text() == first.generated[p.name.rsplit("-", 1)[0]].source for p in libs)
    stamps = [p.stat().st_mtime_ns for p in libs]
    again = stages.run_stages(demo_mod, byoc.rules, backend="c")[-1]
    assert [p.stat().st_mtime_ns for p in sorted((tmp_path / "c").glob("*.so"))] == stamps
    assert {n: g.symbol for n, g in again.generated.items()} == {n: g.symbol for n, g in first.generated.items()}


def test_an_unwritable_cache_keeps_no_library_says_so_once_and_runs(
    tmp_path, monkeypatch, caplog, demo_mod, byoc, reference_output
):
    """The cache's root a file (a read-only or full cache is the same OSError): each library is compiled
    into a folder of this process's, one warning line says so, and the demo still gives TVM alone's outputs."""
    from byoc_workbench.core import files

    blocker = tmp_path / "a file"
    blocker.write_text("")
    monkeypatch.setenv("BYOC_WORKBENCH_CACHE", str(blocker))
    monkeypatch.setattr(files, "_unkept", set())
    for _ in range(2):  # the second build finds its library, loaded, in the process's folder: never rewritten
        final = stages.run_stages(demo_mod, byoc.rules, stages.keep_all, backend="c")[-1]
        out = execute.run(final.mod, demo.demo_inputs())
        np.testing.assert_allclose(out, reference_output, rtol=1e-5, atol=1e-5)
    warned = [r.getMessage() for r in caplog.records if "c cache: nothing is kept" in r.getMessage()]
    assert len(warned) == 1 and str(blocker) in warned[0], warned
    assert blocker.read_text() == ""


def test_the_runner_uses_tvm_buffers_in_place(demo_mod, byoc):
    final = stages.run_stages(demo_mod, byoc.rules, backend="c")[-1]
    runner = tvm.get_global_func(final.generated["byoc_target_1"].symbol)
    d, w, b = (tvm.runtime.tensor(a) for a in demo.demo_inputs())
    out = tvm.runtime.empty((1, 32, 56, 56), "float32")
    before = out.data_ptr()
    runner(d, w, b, out)
    assert out.data_ptr() == before and np.abs(out.numpy()).max() > 0.1


def test_no_compiler_is_one_line_naming_how_to_get_one(monkeypatch, demo_mod, byoc):
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(WorkbenchError) as err:
        stages.run_stages(demo_mod, byoc.rules, backend="c")
    line = str(err.value)
    assert "\n" not in line and line.startswith("error: No C compiler found")
    assert all(k in line for k in ("apt-get install gcc", "brew install gcc", "conda install -c conda-forge compilers"))
    monkeypatch.setenv("CC", "no-such-cc")
    with pytest.raises(WorkbenchError, match="The C compiler CC=no-such-cc is not on PATH"):
        c_source.compiler()


def test_a_compile_error_names_the_line(demo_mod, byoc):
    register_codegen(
        "badc", emit={**C.emit, "relax.nn.relu": lambda op: f"{op.out}[0] = undefined_thing;"}, language="c"
    )
    with pytest.raises(WorkbenchError, match=r"could not compile the C of byoc_target_1: line \d+: .*undefined_thing"):
        stages.run_stages(demo_mod, byoc.rules, backend="badc")


def test_static_shapes_only():
    @I.ir_module
    class Dynamic:
        @R.function
        def main(x: R.Tensor(("n", 4), "float32")):
            with R.dataflow():
                y = R.nn.relu(x)
                R.output(y)
            return y

    with pytest.raises(WorkbenchError, match="needs tensors of static shape in relax.nn.relu"):
        stages.run_stages(Dynamic, CTEST[1:2], stages.keep_all, backend="c")


def test_a_fused_c_emitter(demo_mod, byoc, reference_output):
    from byoc_workbench.backends import c

    fused = register_codegen("cfused", emit={**C.emit, "conv2d_bias_relu": c.conv2d_bias_relu}, language="c")
    final = stages.run_stages(demo_mod, byoc.rules, backend="cfused")[-1]
    src = final.generated["byoc_target_1"].source
    assert "malloc" not in src and "v > 0 ? v : 0" in src, "one kernel, no intermediates"
    assert (
        fused.plan(
            "byoc_target_1", summary.stage(stages.run_stages(demo_mod, byoc.rules), "prune").mod["byoc_target_1"]
        )
        .steps[0][0]
        .op
        == "byoc-target.conv2d_bias_relu"
    )
    np.testing.assert_allclose(execute.run(final.mod, demo.demo_inputs()), reference_output, rtol=1e-5, atol=1e-5)


def test_a_scratch_folder_whose_process_died_unwarned_is_swept(tmp_path, monkeypatch):
    """The libraries an unwritable cache does not keep go to a folder of the process's, removed at exit; a
    process ended by a signal or ``os._exit`` skips its exit, and its folder is swept by the next one made."""
    child = (
        "import os; from byoc_workbench.backends import c_source; print(c_source._scratch(), flush=True); os._exit(0)"
    )
    done = subprocess.run(
        [sys.executable, "-c", child], env={**os.environ, "TMPDIR": str(tmp_path)}, capture_output=True, text=True
    )
    left = Path(done.stdout.strip())
    assert left.parent == tmp_path and left.is_dir(), done.stderr[-2000:]  # os._exit ran no atexit
    alive = tmp_path / f"{c_source.SCRATCH}{os.getpid()}-abcdefgh"  # this process's: in use
    alive.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    c_source._scratch.cache_clear()
    try:
        made = c_source._scratch()
    finally:
        c_source._scratch.cache_clear()
    assert not left.exists() and alive.is_dir() and made.is_dir() and made.parent == tmp_path
