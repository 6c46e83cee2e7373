"""A build for a device this machine does not have compiles, and running it is one line (issue F6 of round 8):
CUDA without a GPU, whose VM TVM refuses in C++ when it loads, and another CPU's triple, which TVM refuses when
the first function is called. A CUDA build compiles only for an arch the CUDA compiler takes, GPU kernels or none."""

import numpy as np
import pytest
import tvm
from graphs import Double
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.target import codegen

from byoc_workbench.core import targets
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.measure.compiler import cuda, execute
from byoc_workbench.measure.time import runner

SM90 = {"kind": "cuda", "arch": "sm_90"}
ELSEWHERE = (
    "llvm -mtriple="
    + ("x86_64" if tvm.target.Target("llvm").attrs["mtriple"].startswith("aarch64") else "aarch64")
    + "-linux-gnu"
)


def _refused(call) -> str:
    with pytest.raises(WorkbenchError) as err:
        call()
    line = str(err.value)
    assert "\n" not in line and "a device this machine" in line
    return line


@pytest.mark.skipif(cuda.loads_here() and tvm.cuda(0).exist, reason="this machine runs CUDA builds")
def test_a_cuda_build_without_a_gpu_is_one_line():
    x = np.ones((4, 4), "float32")
    for call in (lambda: execute.build(Double, SM90), lambda: runner.build_and_run(Double, [x], tvm_target=SM90)):
        line = _refused(call)
        assert line.startswith("error: The build is for cuda sm_90, a device this machine does not have")
        assert "execute.compile(mod, tvm_target) compiles it here" in line


def test_a_build_for_another_cpu_compiles_and_running_it_is_one_line():
    assert execute.compile(Double, ELSEWHERE) is not None  # compiling for it stays allowed
    x = np.ones((4, 4), "float32")
    for call in (
        lambda: execute.build(Double, ELSEWHERE),
        lambda: runner.build_and_run(Double, [x], tvm_target=ELSEWHERE),
    ):
        assert "Fix: run it on such a machine, or leave mtriple out (this machine's)" in _refused(call)


OWN_TRIPLE = str(tvm.target.Target("llvm").attrs["mtriple"])
OTHER_SYSTEM = OWN_TRIPLE.split("-")[0] + ("-apple-darwin" if "linux" in OWN_TRIPLE else "-pc-linux-gnu")


def test_a_build_for_this_cpus_architecture_on_another_system_is_one_line_before_it_runs():
    """Only the architecture was compared: x86_64-pc-windows-msvc on Linux segfaulted as its VM loaded."""
    for triple in (OTHER_SYSTEM, OWN_TRIPLE.split("-")[0] + "-pc-windows-msvc"):
        assert "Fix: run it on such a machine" in _refused(lambda t=triple: execute.build(Double, f"llvm -mtriple={t}"))
    assert execute.build(Double, {"kind": "llvm", "mtriple": OWN_TRIPLE}) is not None


def _features(spec) -> set:
    return set(codegen.llvm_get_cpu_features(tvm.target.Target(spec)))


HERE = codegen.llvm_get_system_cpu()


def _lacking() -> str:
    """A feature LLVM knows for this CPU's architecture that this CPU has not."""
    own = _features({"kind": "llvm", "mcpu": HERE})
    wanted = ["avx512fp16", "amx-tile", "avx512bf16", "avx512f", "avx2", "sve2", "sme", "sve"]
    lacking = next((f for f in wanted if f not in own and f in _features({"kind": "llvm", "mattr": [f"+{f}"]})), None)
    if lacking is None:
        pytest.skip(f"this CPU ({HERE}) has every feature the test could ask for")
    return lacking


@pytest.mark.parametrize("mcpu", [{}, {"mcpu": HERE}], ids=["no mcpu", "this CPU named"])
def test_a_build_for_instructions_this_cpu_lacks_is_one_line_before_it_runs(mcpu):
    """``llvm -mcpu=sapphirerapids`` on a CPU without AVX512-FP16 died of SIGILL, with no line at all. When the
    ``mattr`` asks for what this CPU lacks, naming this CPU (which the user may have done) is no fix."""
    lacking = _lacking()
    with pytest.raises(WorkbenchError) as err:
        execute.build(Double, {"kind": "llvm", "mattr": [f"+{lacking}"]} | mcpu)
    line = str(err.value)  # with what the feature implies (+avx512fp16: avx512bw and avx512f too on znver3)
    assert line.startswith("error: The build is for a CPU with ") and f", which this one ({HERE}) has not" in line
    assert lacking in line.split(", which this one")[0]
    assert str(err.value).endswith(
        f"Fix: leave mcpu and mattr out (code for any CPU of this kind), or drop +{lacking} from mattr."
    )
    assert execute.build(Double, f"llvm -mcpu={HERE}") is not None  # this CPU, named


def test_a_gpu_builds_host_is_checked_against_this_cpu_before_it_runs():
    """The VM's own code and the ops on the CPU are built for the host: a CUDA target with another system's, another
    architecture's or another CPU's host passed, given as a dict, as text or as a Target's host."""
    other = {"kind": "llvm", "mtriple": OWN_TRIPLE.split("-")[0] + "-pc-windows-msvc"}
    lacking = {"kind": "llvm", "mattr": [f"+{_lacking()}"]}
    for tvm_target, line in [
        (SM90 | {"host": other}, f"The build is for {other['mtriple']}, a device this machine"),
        (tvm.target.Target(SM90, host=other), f"The build is for {other['mtriple']}, a device this machine"),
        (SM90 | {"host": ELSEWHERE}, f"The build is for {ELSEWHERE.split('=')[1]}, a device this machine"),
        (SM90 | {"host": f"llvm -mattr={lacking['mattr'][0]}"}, "The build is for a CPU with"),
        (tvm.target.Target(SM90, host=lacking), "The build is for a CPU with"),
    ]:
        with pytest.raises(WorkbenchError) as err:
            execute.check_runs_here(tvm_target)
        assert str(err.value).startswith(f"error: {line}") and "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("tvm_target", "line"),
    [
        ("llvm -host=cuda", "The target 'llvm -host=cuda' has a host"),  # an InternalError in CUDA's code generation
        ("llvm -mtriple=x86_64-pc-linux-gnux32", "TVM cannot build for 'x86_64-pc-linux-gnux32'"),  # LLVM aborted
        ({"kind": "cuda", "arch": "sm_90", "host": "llvm -mcpu=nonsense"}, "'nonsense' in the target {'kind': 'llvm'"),
        # LLVM's verifier failed in C++ on an item without its sign, or empty; a feature LLVM does not know was
        # skipped with a log line, and the build made without it
        ("llvm -mattr=avx2", "'avx2' in the mattr of the target 'llvm -mattr=avx2' is not +feature or -feature"),
        ("llvm -mattr=+avx2,,+fma", "'' in the mattr of the target 'llvm -mattr=+avx2,,+fma' is not +feature or"),
        ({"kind": "llvm", "mattr": ["+"]}, "'+' in the mattr of the target {'kind': 'llvm', 'mattr': ['+']} is not"),
        ({"kind": "llvm", "mattr": [" +sse2"]}, "' +sse2' in the mattr of the target"),
        ("llvm -mattr=+nonsense", "'+nonsense' in the target 'llvm -mattr=+nonsense' is not a feature LLVM knows"),
        # LLVM killed the process: "SSE register return with SSE disabled", "64-bit code requested on a subtarget..."
        ("llvm -mtriple=x86_64-linux-gnu -mattr=-sse,-sse2", "'-sse' in the target 'llvm -mtriple=x86_64-linux-gnu"),
        ({"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mattr": ["-64bit"]}, "'-64bit' in the target {'kind'"),
        ("llvm -mattr=-SSE2", "'-SSE2' in the target 'llvm -mattr=-SSE2' is not a feature LLVM knows"),
        ("llvm -mattr=++sse2", "'++sse2' in the target 'llvm -mattr=++sse2' is not a feature LLVM knows"),
        ("llvm -mtriple=aarch64-linux-gnu -mattr=+sse2", "'+sse2' in the target 'llvm -mtriple=aarch64-linux-gnu"),
        ({"kind": "cuda", "arch": "sm_90", "host": "llvm -mattr=avx2"}, "'avx2' in the mattr of the target {'kind"),
        # TVM's InternalErrors as it builds
        ("llvm -jit=foo", "jit='foo' in the target 'llvm -jit=foo' is not a JIT of TVM's"),
        ("llvm -vector-width=-1", "vector-width=-1 in the target 'llvm -vector-width=-1' is not a number of bits"),
        ("llvm -vector-width=0", "vector-width=0 in the target"),
        ("llvm -cl-opt=junk", "'junk' in the cl-opt of the target 'llvm -cl-opt=junk' is not an LLVM option"),
        ("llvm -cl-opt=-unroll-threshold:int=x", "'-unroll-threshold:int=x' in the cl-opt of the target"),
        ("llvm -cl-opt=---unroll-threshold", "'---unroll-threshold' in the cl-opt of the target"),
        # round 13's B-N2: TVM's InternalErrors as it builds ("invalid -mfloat-abi option", "Invalid -vector-width
        # value", "there were errors parsing command-line options"); a number past an int's range it wrapped
        ("llvm -mfloat-abi=junk", "mfloat-abi='junk' in the target 'llvm -mfloat-abi=junk' is not a float ABI"),
        (SM90 | {"host": {"kind": "llvm", "mfloat-abi": ""}}, "mfloat-abi='' in the target {'kind': 'llvm', 'mfl"),
        ("llvm -vector-width=100000", "vector-width=100000 in the target 'llvm -vector-width=100000' is not a number"),
        (
            {"kind": "llvm", "cl-opt": ["-unroll-threshold:int=99999999999999999999"]},
            "'-unroll-threshold:int=99999999999999999999' in the cl-opt of the target {'kind': 'llvm', 'cl-opt': "
            "['-unroll-threshold:int=99999999999999999999']} is past what an LLVM int holds",
        ),
        ("llvm -cl-opt=-unroll-threshold:int=2147483648", "'-unroll-threshold:int=2147483648' in the cl-opt of"),
        ("llvm -cl-opt=-unroll-threshold:uint=-1", "'-unroll-threshold:uint=-1' in the cl-opt of the target 'llvm"),
        # what TVM read as another number without a word: opt-level 3, and a count of cores below 1
        ("llvm -opt-level=9", "opt-level=9 in the target 'llvm -opt-level=9' is not an LLVM opt-level"),
        ("llvm -opt-level=-1", "opt-level=-1 in the target 'llvm -opt-level=-1' is not an LLVM opt-level"),
        ("llvm -num-cores=-3", "num-cores=-3 in the target 'llvm -num-cores=-3' is not a number of cores"),
    ],
)
def test_a_target_tvm_or_llvm_would_die_on_is_one_line(tvm_target, line, capfd):
    with pytest.raises(WorkbenchError) as err:
        targets.resolve(tvm_target)
    assert str(err.value).startswith(f"error: {line}") and "\n" not in str(err.value)
    assert capfd.readouterr().err == ""  # nor LLVM's own line ("'+nonsense' is not a recognized feature")


def test_text_options_are_typed_as_the_kind_takes_them():
    """``-mattr=+avx2`` was refused by TVM (a list option given text), and a host as text in TVM's old words."""
    assert list(targets.resolve("llvm -mattr=+avx2,+fma").attrs["mattr"]) == ["+avx2", "+fma"]
    host = targets.resolve({"kind": "cuda", "arch": "sm_90", "host": "llvm -mcpu=x86-64"}).host
    assert str(host.attrs["mcpu"]) == "x86-64"


def test_cpu_options_in_their_right_form_still_build_and_run():
    here = _features({"kind": "llvm", "mcpu": codegen.llvm_get_system_cpu()})
    own = sorted(here - _features({"kind": "llvm"}))[0]  # a feature this CPU has and some of its kind lack
    assert list(targets.resolve(f"llvm -mattr=-{own}").attrs["mattr"]) == [f"-{own}"]
    tvm_target = (
        f"llvm -mattr=+{own} -jit=mcjit -vector-width=128 -opt-level=2 -num-cores=2 "
        "-cl-opt=-unroll-threshold:int=100,--vectorize-loops,-unroll-max-count:uint=4294967295"
    )
    x = np.ones((4, 4), "float32")
    np.testing.assert_array_equal(
        runner.build_and_run(Double, [x], 1, 0, tvm_target=tvm_target, progress=False).outputs, x + x
    )


@I.ir_module
class OnlyCpu:
    """Nothing for the GPU: the box filter runs on the CPU, and main hands its result back."""

    @R.function
    def main(b: R.Tensor((1, 8, 6), "float32")):
        counted = R.vision.get_valid_counts(b, score_threshold=0.2, id_index=0, score_index=1)
        return counted


@pytest.mark.parametrize("mod", [OnlyCpu, Double], ids=["no GPU kernel", "a GPU kernel"])
def test_a_cuda_build_for_an_arch_the_compiler_refuses_is_one_line_gpu_kernels_or_none(mod):
    """With no GPU kernel nvcc never ran, and the build claimed "cuda sm_1000", an arch that does not exist."""
    try:
        compiler = cuda.find()
    except WorkbenchError as err:
        pytest.skip(str(err))  # no CUDA compiler here
    with pytest.raises(WorkbenchError) as err:
        execute.compile(mod, "cuda -arch=sm_1000")
    line = str(err.value)
    assert line.startswith(f"error: {compiler} cannot compile for sm_1000 (") and "\n" not in line
    assert "Fix: ask for an arch it compiles: " in line
    assert bool(cuda.source(execute.compile(mod, SM90))) == (mod is Double)  # sm_90 compiles, kernels or none
