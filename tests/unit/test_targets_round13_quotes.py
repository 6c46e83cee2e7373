"""B-N10 of round 13: a target's text was split at each space, quotes and all. A host given in quotes
(``"'llvm -mcpu=znver3'"``, ``'"llvm"'``) was refused as a host that is not the CPU, ``-host='llvm -mcpu=x'`` was cut
in two, and ``cuda -host=llvm -mcpu=x`` gave the mcpu to CUDA, which does not read it, and built for a generic host.
Text is now read as a shell reads it, and what still cannot be the host's is one line."""

import numpy as np
import pytest
from graphs import Double
from tvm.target import codegen

from byoc_workbench.core import targets
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.measure.time import runner

HERE = codegen.llvm_get_system_cpu()
SM90 = {"kind": "cuda", "arch": "sm_90"}


@pytest.mark.parametrize(
    "tvm_target",
    [
        SM90 | {"host": f"'llvm -mcpu={HERE}'"},
        SM90 | {"host": f'"llvm -mcpu={HERE}"'},
        f"cuda -arch=sm_90 -host='llvm -mcpu={HERE}'",
        f'cuda -arch=sm_90 -host="llvm -mcpu={HERE}"',
        f"cuda -arch=sm_90 '-host=llvm -mcpu={HERE}'",
    ],
)
def test_a_quoted_host_is_read_with_its_options(tvm_target):
    resolved = targets.resolve(tvm_target)
    assert str(resolved.attrs["arch"]) == "sm_90" and "mcpu" not in resolved.attrs
    assert resolved.host.kind.name == "llvm" and str(resolved.host.attrs["mcpu"]) == HERE


@pytest.mark.parametrize("host", ["'llvm'", '"llvm"'])
def test_a_quoted_host_alone_is_the_cpu(host):
    assert str(targets.resolve(SM90 | {"host": host}).host) == str(targets.resolve(SM90).host)


def test_quoted_text_builds_what_its_quotes_hold():
    """TVM writes a Target's cl-opt in quotes when it has several; text quoted whole is read inside its quotes."""
    assert list(targets.resolve("llvm -cl-opt='-unroll-threshold:int=100,--vectorize-loops'").attrs["cl-opt"]) == [
        "-unroll-threshold:int=100",
        "--vectorize-loops",
    ]
    for text in (f"'llvm -mcpu={HERE}'", f"llvm -mcpu='{HERE}'", f"\"llvm -mcpu='{HERE}'\""):
        assert str(targets.resolve(text).attrs["mcpu"]) == HERE
    x = np.ones((4, 4), "float32")
    out = runner.build_and_run(Double, [x], 1, 0, tvm_target=f"'llvm -mcpu={HERE}'", progress=False)
    np.testing.assert_array_equal(out.outputs, x + x)


@pytest.mark.parametrize(
    ("tvm_target", "line"),
    [
        (  # the host's option, unquoted, went to CUDA, which does not read it: a generic host, without a word
            f"cuda -arch=sm_90 -host=llvm -mcpu={HERE}",
            f"error: The target 'cuda -arch=sm_90 -host=llvm -mcpu={HERE}' gives CUDA a mcpu, which it does not read. "
            "Fix: leave mcpu out (arch names the GPU), or give it to the host, in quotes with the host: "
            "-host='llvm -mcpu=znver3'.",
        ),
        (
            "cuda -arch=sm_90 -host='llvm -mcpu=x",
            'error: Cannot read the target "cuda -arch=sm_90 -host=\'llvm -mcpu=x": no closing quotation. '
            "Fix: close each quote, or leave quotes and \\ out.",
        ),
        (
            SM90 | {"host": '"llvm'},
            "error: Cannot read the target '\"llvm': no closing quotation. Fix: close each quote, or leave quotes",
        ),
    ],
)
def test_what_cannot_be_the_hosts_is_one_line(tvm_target, line):
    with pytest.raises(WorkbenchError) as err:
        targets.resolve(tvm_target)
    assert str(err.value).startswith(line) and "\n" not in str(err.value)
