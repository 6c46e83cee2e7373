"""A build for a device this machine does not have compiles, and running it is one line (issue F6 of round 8):
CUDA without a GPU, whose VM TVM refuses in C++ when it loads, and another CPU's triple, which TVM refuses when
the first function is called."""

import numpy as np
import pytest
import tvm
from tvm.script import ir as I
from tvm.script import relax as R

from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.measure.compiler import cuda, execute
from byoc_workbench.measure.time import runner

SM90 = {"kind": "cuda", "arch": "sm_90"}
ELSEWHERE = (
    "llvm -mtriple="
    + ("x86_64" if tvm.target.Target("llvm").attrs["mtriple"].startswith("aarch64") else "aarch64")
    + "-linux-gnu"
)


@I.ir_module
class Double:
    @R.function
    def main(x: R.Tensor((4, 4), "float32")):
        y = R.add(x, x)
        return y


def _refused(call) -> str:
    with pytest.raises(WorkbenchError) as err:
        call()
    line = str(err.value)
    assert "\n" not in line and "a device this machine" in line
    return line


@pytest.mark.skipif(cuda.loads_here() and tvm.cuda(0).exist, reason="this machine runs CUDA builds")
def test_a_cuda_build_without_a_gpu_is_one_line():
    x = np.ones((4, 4), "float32")
    for call in (lambda: execute.build(Double, SM90), lambda: runner.build_and_run(Double, [x], target=SM90)):
        line = _refused(call)
        assert line.startswith("error: The build is for cuda sm_90, a device this machine does not have")
        assert "execute.compile(mod, target) compiles it here" in line


def test_a_build_for_another_cpu_compiles_and_running_it_is_one_line():
    assert execute.compile(Double, ELSEWHERE) is not None  # compiling for it stays allowed
    x = np.ones((4, 4), "float32")
    for call in (lambda: execute.build(Double, ELSEWHERE), lambda: runner.build_and_run(Double, [x], target=ELSEWHERE)):
        assert "Fix: run it on such a machine, or build for 'llvm'" in _refused(call)
