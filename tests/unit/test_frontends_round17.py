"""Round 17's C8, C9 and C10: a ``--torch`` spec's dotted path after the colon is followed (a namespace's or a
class's factory) or refused with a Fix that imports when followed; a forward that updates in place a tensor that
another tensor of the module views is told so; and one that writes into an expanded tensor is told so, not blamed
on its inputs."""

import numpy as np
import pytest
from messages import one_line, refused

from byoc_workbench import cli
from byoc_workbench.frontends import torch_import
from byoc_workbench.measure.compiler import execute
from byoc_workbench.session import Workbench

torch = pytest.importorskip("torch", reason="needs the [pytorch] extra: pip install -e .[pytorch]")

_MODS = """
import types
import torch

def tiny():
    return torch.nn.Linear(4, 2)

ns = types.SimpleNamespace(tiny=tiny)

class Factories:
    @staticmethod
    def tiny():
        return tiny()

    @classmethod
    def made(cls):
        return tiny()

class Net(torch.nn.Linear):
    def __init__(self):
        super().__init__(4, 2)
"""


@pytest.fixture
def factories(tmp_path, monkeypatch):
    """Module ``r17_mods`` (factories in a namespace and a class) and package ``r17_pkg``, whose submodule
    ``sub.deep`` has ``tiny`` and is imported by nobody."""
    (tmp_path / "r17_mods.py").write_text(_MODS)
    (tmp_path / "r17_pkg" / "sub").mkdir(parents=True)
    (tmp_path / "r17_pkg" / "__init__.py").write_text("")
    (tmp_path / "r17_pkg" / "sub" / "__init__.py").write_text("")
    (tmp_path / "r17_pkg" / "sub" / "deep.py").write_text(_MODS)
    monkeypatch.syspath_prepend(str(tmp_path))


@pytest.mark.parametrize("spec", ["r17_mods:ns.tiny", "r17_mods:Factories.tiny", "r17_mods:Factories.made"])
def test_a_dotted_path_to_a_factory_of_a_namespace_or_class_imports_it(factories, spec):
    """C8: these were told "pass e.g. --torch r17_mods:ns" (or ``:Factories``), which names no factory."""
    model = torch_import.import_spec(spec, shape=(1, 4))
    assert model.mark == f"weights as {spec} made them, after torch.manual_seed(0)"
    assert model.reference(model.inputs)[0].shape == (1, 2)


@pytest.mark.parametrize(
    "spec, meant",
    [
        ("r17_pkg:sub.deep.tiny", "r17_pkg.sub.deep:tiny"),  # modules go before the colon
        ("r17_pkg.sub:deep.Factories.made", "r17_pkg.sub.deep:Factories.made"),
        ("r17_mods:Net.forward", "r17_mods:Net"),  # a method needs an instance; the class makes one
        ("r17_mods:ns.tinny", "r17_mods:FACTORY"),
    ],
)
def test_a_dotted_path_through_a_module_or_to_a_method_is_refused_with_a_fix_that_imports(
    factories, capsys, spec, meant
):
    """C8: ``r17_pkg:sub.deep.tiny`` was told "pass e.g. --torch r17_pkg:sub", a module and no factory."""
    assert cli.main(["run", "--torch", spec]) == 2
    assert one_line(capsys.readouterr().err.strip()).endswith(f"Fix: pass e.g. --torch {meant}.")
    if "FACTORY" not in meant:
        assert torch_import.import_spec(meant, shape=(1, 4)).reference


class ViewsABuffer(torch.nn.Module):
    """Buffer ``b`` is a view of buffer ``a`` (or its own copy, ``apart``); forward updates ``b`` in place."""

    def __init__(self, apart=False):
        super().__init__()
        self.register_buffer("a", torch.zeros(2, 4))
        self.register_buffer("b", self.a.view(-1).clone() if apart else self.a.view(-1))

    def forward(self, x):
        self.b[0] += 1
        return x + self.a.sum(0)


class ReadsAView(torch.nn.Module):
    """A tensor attribute (no buffer) views buffer ``buf``, which forward updates in place."""

    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.zeros(4))
        self.v = self.buf.view(2, 2)

    def forward(self, x):
        self.buf.add_(1)
        return x + self.v.sum()


class ViewsAParameter(torch.nn.Module):
    """Buffer ``buf`` views parameter ``w``'s data; forward updates ``buf`` in place."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(4))
        self.register_buffer("buf", self.w.data.view(2, 2))

    def forward(self, x):
        self.buf.add_(1)
        return x + self.w


@pytest.mark.parametrize(
    "make, updated, shares",
    [(ViewsABuffer, "self.b", "self.a"), (ReadsAView, "self.buf", "self.v"), (ViewsAParameter, "self.buf", "self.w")],
)
def test_an_in_place_update_of_a_tensor_another_one_views_is_told_so(make, updated, shares):
    """C9: the first was blamed on "Python control flow" (torch.export's run_decompositions fails with an
    AssertionError); the others imported, and TVM's outputs and the reference missed the update eager PyTorch sees."""
    refused(
        lambda: Workbench.from_torch(make(), (torch.randn(2, 4),)),
        f"{make.__name__}.forward updates {updated} in place, and {updated} shares its memory with {shares}",
        "Fix: give each tensor memory of its own",
    )


def test_the_fix_for_an_update_of_a_viewed_buffer_works():
    x = torch.randn(2, 4)
    wb = Workbench.from_torch(ViewsABuffer(apart=True), (x,))
    want = ViewsABuffer(apart=True)(x).numpy()
    np.testing.assert_allclose(execute.run(wb.model.mod, wb.model.inputs)[0], want, rtol=1e-6, strict=True)


class UpdatesAnAttribute(torch.nn.Module):
    """Updates in place ``v``, a tensor attribute, or a buffer (``registered``)."""

    def __init__(self, registered=False):
        super().__init__()
        if registered:
            self.register_buffer("v", torch.zeros(4))
        else:
            self.v = torch.zeros(4)

    def forward(self, x):
        self.v.add_(1)
        return x + self.v


def test_an_in_place_update_of_a_tensor_attribute_is_told_so_and_its_fix_works():
    """C9: torch.export's "Constant v is mutated in the forward method" came with the Fix to avoid "Python control
    flow on tensor values"."""
    x = torch.randn(2, 4)
    line = refused(
        lambda: Workbench.from_torch(UpdatesAnAttribute(), (x,)),
        "UpdatesAnAttribute.forward updates self.v in place, a tensor attribute that is no buffer",
        "Fix: register it as a buffer with memory of its own: self.register_buffer('v', t.clone())",
    )
    assert "control flow" not in line
    wb = Workbench.from_torch(UpdatesAnAttribute(registered=True), (x,))
    want = UpdatesAnAttribute(registered=True)(x).numpy()
    np.testing.assert_allclose(execute.run(wb.model.mod, wb.model.inputs)[0], want, rtol=1e-6, strict=True)


class WritesExpanded(torch.nn.Module):
    """Writes in place into an expanded tensor: its buffer's (``buffer``) or its input's, cloned first (``clone``)."""

    def __init__(self, buffer=True, clone=False):
        super().__init__()
        self.buffer, self.clone = buffer, clone
        self.register_buffer("buf", torch.zeros(1, 4))

    def forward(self, x):
        e = (self.buf if self.buffer else x[:1]).expand(2, -1)
        return x * (e.clone() if self.clone else e).add_(1)


@pytest.mark.parametrize("buffer", [True, False])
def test_an_in_place_write_into_an_expanded_tensor_is_told_so_not_blamed_on_the_inputs(buffer):
    """C10: "cannot run on inputs 2x4 float32: RuntimeError: unsupported operation: more than one element of the
    written-to tensor refers to a single memory location", with the Fix to give the inputs forward takes."""
    line = refused(
        lambda: Workbench.from_torch(WritesExpanded(buffer), (torch.randn(2, 4),)),
        "WritesExpanded.forward writes in place into a tensor whose elements share memory (an expanded one)",
        ".clone()",
    )
    assert "input" not in line


def test_the_fix_for_a_write_into_an_expanded_tensor_works():
    x = torch.randn(2, 4)
    wb = Workbench.from_torch(WritesExpanded(clone=True), (x,))
    np.testing.assert_allclose(execute.run(wb.model.mod, wb.model.inputs)[0], (x * 1).numpy(), rtol=1e-6)
