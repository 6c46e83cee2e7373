"""Round 14's F8 and F9: an option of the wrong type or of no such name got the Fix "name 'llvm' or 'cuda'", which the
user had done; and mfloat-abi off ARM and a num-cores no CPU has were taken without a word, and ignored."""

import numpy as np
import pytest
from graphs import Double

from byoc_workbench.core import targets
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.measure.time import runner

SM90 = {"kind": "cuda", "arch": "sm_90"}


def _line(tvm_target) -> str:
    with pytest.raises(WorkbenchError) as err:
        targets.resolve(tvm_target)
    line = str(err.value)
    assert "\n" not in line and "name 'llvm' (the CPU)" not in line
    return line


@pytest.mark.parametrize(
    "tvm_target, said",
    [
        ("llvm -vector-width=abc", "its vector-width is 'abc', not a whole number. Fix: give vector-width as a whole"),
        (
            {"kind": "llvm", "num-cores": "4"},
            "not a whole number. Fix: give num-cores as a whole number: {'num-cores': 4}",
        ),
        ({"kind": "llvm", "num-cores": True}, "its num-cores is True, not a whole number"),  # TVM took it as 1
        (
            {"kind": "llvm", "mattr": "+avx2"},
            "Fix: give mattr as a list of text: {'mattr': ['+avx2']}, or leave it out.",
        ),
        ({"kind": "llvm", "mcpu": None}, "its mcpu is None, not text. Fix: give mcpu as text, or leave it out."),
        ({"kind": "llvm", "fast-math": 2}, "its fast-math is 2, not True or False"),  # TVM took it as True
        (SM90 | {"host": {"kind": "llvm", "cl-opt": "-x"}}, "Fix: give cl-opt as a list of text: {'cl-opt': ['-x']}"),
        ({"kind": "cuda", "arch": 90}, "its arch is 90, not text. Fix: give arch as text: {'arch': 'sm_90'}"),
    ],
)
def test_an_option_of_the_wrong_type_names_the_option_and_its_form(tvm_target, said):
    assert said in _line(tvm_target)


@pytest.mark.parametrize(
    "tvm_target, said",
    [
        ({"kind": "llvm", "bogus": 1}, "llvm targets have no option 'bogus'. Fix: leave bogus out; llvm targets take "),
        ("llvm -mcpus=x86-64", "llvm targets have no option 'mcpus'. Fix: leave mcpus out (did you mean mcpu?)"),
        (SM90 | {"x": 1}, "cuda targets have no option 'x'. Fix: leave x out; cuda targets take "),
    ],
)
def test_an_option_the_kind_has_not_is_named_with_the_kinds_options(tvm_target, said):
    line = _line(tvm_target)
    assert said in line and "mcpu, " in line  # the kind's options, as TVM lists them


def test_options_written_as_text_in_their_right_form_are_read():
    """``-fast-math=true`` was text to TVM, which wants a bool; an armv7 triple takes mfloat-abi."""
    assert bool(targets.resolve("llvm -fast-math=true").attrs["fast-math"]) is True
    assert bool(targets.resolve("llvm -fast-math=false").attrs["fast-math"]) is False
    assert str(targets.resolve("llvm -mtriple=armv7a-linux-gnueabihf -mfloat-abi=hard").attrs["mfloat-abi"]) == "hard"
    x = np.ones((4, 4), "float32")
    out = runner.build_and_run(Double, [x], 1, 0, tvm_target="llvm -fast-math=true -num-cores=4096", progress=False)
    np.testing.assert_array_equal(out.outputs, x + x)


@pytest.mark.parametrize(
    "tvm_target, said",
    [
        ("llvm -mfloat-abi=hard", "mfloat-abi=hard in the target 'llvm -mfloat-abi=hard' is for 32-bit ARM CPUs, and "),
        ("llvm -mtriple=aarch64-linux-gnu -mfloat-abi=soft", "is for 32-bit ARM CPUs, and aarch64-linux-gnu is none"),
        ("llvm -num-cores=100000", "num-cores=100000 in the target 'llvm -num-cores=100000' is not a number of cores"),
        ("llvm -num-cores=4097", "Fix: leave num-cores out, or give it 1 to 4096 ("),
    ],
)
def test_an_option_llvm_would_ignore_is_one_line(tvm_target, said):
    assert said in _line(tvm_target)
