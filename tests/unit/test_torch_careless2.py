"""A careless user's PyTorch modules (round 11's R6, R7, R8, R17): a result NumPy cannot hold and lazy layers are
one line each; a submodule used twice, and a module wrapped in DataParallel, import and check equal. Round 13's
B-N5, B-N8 and A-N6: a nested input, ``forward = None`` and a --torch spec naming a method are one line each."""

import numpy as np
import pytest
from messages import refused

from byoc_workbench import cli
from byoc_workbench.measure.compiler import execute
from byoc_workbench.session import Workbench

torch = pytest.importorskip("torch", reason="needs the [pytorch] extra: pip install -e .[pytorch]")


class Casts(torch.nn.Module):
    """Returns its input, and its double in ``dtype``."""

    def __init__(self, dtype):
        super().__init__()
        self.dtype = dtype

    def forward(self, x):
        return x, (x * 2).to(self.dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float8_e4m3fn])
def test_an_output_numpy_cannot_hold_is_one_line_naming_it(dtype):
    name = str(dtype).removeprefix("torch.")
    refused(lambda: Workbench.from_torch(Casts(dtype), (torch.randn(1, 4),)), f"output 1 as {name},", "out.float()")


def test_lazy_layers_are_one_line_until_the_module_has_run_once():
    module, x = torch.nn.Sequential(torch.nn.LazyLinear(4)), torch.randn(2, 4)
    refused(lambda: Workbench.from_torch(module, (x,)), "lazy layers have no shapes yet (0.weight, 0.bias)", "(x)")
    module(x)  # what the Fix says
    wb = Workbench.from_torch(module, (x,))
    np.testing.assert_allclose(execute.run(wb.model.mod, wb.model.inputs)[0], module(x).detach(), rtol=1e-5, atol=1e-6)


class TiedByAttribute(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
        self.b.weight = self.a.weight

    def forward(self, x):
        return self.b(self.a(x))


def _shared():
    lin = torch.nn.Linear(4, 4)
    return torch.nn.Sequential(lin, torch.nn.ReLU(), lin)


@pytest.mark.parametrize("make", [_shared, TiedByAttribute])
def test_a_submodule_or_weight_used_twice_imports_and_checks_equal(make):
    """Round 11's R8: the eager run put plain tensors back for the shared Linear's parameters, which torch.export
    then refused, saying the module could not be traced."""
    torch.manual_seed(0)
    module, x = make(), torch.randn(2, 4)
    wb = Workbench.from_torch(module, (x,))
    built, reference = execute.run(wb.model.mod, wb.model.inputs)[0], wb.model.reference(wb.model.inputs)[0]
    np.testing.assert_allclose(built, reference, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(reference, module(x).detach(), rtol=1e-6)
    assert all(isinstance(p, torch.nn.Parameter) for m in module.modules() for p in m._parameters.values())


def test_a_module_in_dataparallel_is_imported_as_its_module_and_marked_so():
    torch.manual_seed(0)
    inner, x = torch.nn.Linear(4, 3), torch.randn(2, 4)
    wb = Workbench.from_torch(torch.nn.DataParallel(inner), (x,), mark="mine")
    assert (wb.model.name, wb.model.mark) == ("Linear", "mine; Linear imported from DataParallel's .module")
    np.testing.assert_allclose(execute.run(wb.model.mod, wb.model.inputs)[0], inner(x).detach(), rtol=1e-5, atol=1e-6)


def test_a_module_in_distributed_data_parallel_is_imported_as_its_module(tmp_path):
    dist = torch.distributed
    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    try:
        wrapped = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 3))
        wb = Workbench.from_torch(wrapped, (torch.randn(2, 4),))
    finally:
        dist.destroy_process_group()
    assert wb.model.mark == "Linear imported from DistributedDataParallel's .module"


@pytest.mark.parametrize(
    "module",
    [torch.nn.ModuleList([torch.nn.Linear(4, 4)]), torch.nn.ModuleDict({"a": torch.nn.Linear(4, 4)})],
    ids=["ModuleList", "ModuleDict"],
)
def test_a_module_with_no_forward_is_told_to_pass_one_that_computes(module):
    """S11: its eager run's NotImplementedError ("missing the required forward") was told to fix the inputs."""
    name = type(module).__name__
    line = refused(lambda: Workbench.from_torch(module, (torch.randn(1, 4),)), f"{name} has no forward method")
    assert "pass a module whose forward computes the model, e.g. nn.Sequential(*layers)" in line
    assert "input" not in line


@pytest.mark.parametrize("layout", [torch.strided, torch.jagged])
def test_a_nested_example_input_is_one_line_saying_how_to_make_it_dense(layout):
    """B-N5: a module that fails on a nested input was a traceback: describing the input read its .shape, which a
    nested tensor has not ("NestedTensorImpl doesn't support sizes"); a jagged one was told to call to_dense()."""
    nested = torch.nested.nested_tensor([torch.randn(2, 4), torch.randn(3, 4)], layout=layout)
    module = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Softmax(0))
    refused(
        lambda: Workbench.from_torch(module, (nested,)),
        "Example input 0 of Sequential is a nested tensor (torch.nested)",
        "Fix: pass a dense tensor: pad the sequences to one length, x.to_padded_tensor(0.0).",
    )


class ForwardNone(torch.nn.Module):
    forward = None


class ForwardSetToNone(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.forward = None


@pytest.mark.parametrize("make", [ForwardNone, ForwardSetToNone])
def test_a_forward_that_is_none_is_said_to_be_none_not_a_matter_of_inputs(make):
    """B-N8: "'NoneType' object is not callable" from the eager run, with the Fix to give the inputs forward takes."""
    name = make.__name__
    line = refused(
        lambda: Workbench.from_torch(make(), (torch.randn(1, 4),)), f"{name}.forward is None, so {name} has no callable"
    )
    assert f"Fix: define forward(self, ...) in {name}'s class" in line and "input" not in line


@pytest.mark.parametrize(
    "spec, meant",
    [
        ("tm:Net.forward", "tm:Net"),
        ("tm.py:Net.forward", "tm:Net"),
        ("tm.py:", "tm:FACTORY"),
        ("tm:Net()", "tm:Net"),
        ("torchvision:models.resnet18", "torchvision.models:resnet18"),
    ],
)
def test_a_torch_spec_naming_a_method_or_no_factory_says_the_spec_once(spec, meant, capsys):
    """A-N6: ``--torch tm:Net.forward`` was told "pass e.g. --torch tm:Net.forward", the input again, and ``tm.py:``
    "--torch tm.py:FACTORY", a file where every other error asks for the module's name."""
    assert cli.main(["run", "--torch", spec]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: --torch takes module:factory, one colon and a function's name, got {spec!r}. "
        f"Fix: pass e.g. --torch {meant}."
    )
