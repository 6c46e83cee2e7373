"""The user's PyTorch module made the workbench's own before its export: checked, copied and run once; and its
exported graph checked for an in-place update of memory that two of its tensors share.

torch is imported inside functions only, as in :mod:`byoc_workbench.frontends.torch_import`, which exports the
copy this module makes and imports it into Relax.
"""

from __future__ import annotations

import copy

from byoc_workbench.core.errors import WorkbenchError, first_line, import_optional
from byoc_workbench.frontends.own import INPUT_DTYPES

INSTALL_FIX = "install the PyTorch extra: pip install -e .[pytorch] (or make setup EXTRAS=pytorch)"
# To run a lower precision than the frontend imports: the backend's, on the float32 import.
BACKEND_PRECISION = "--backend torch --precision bf16, or options={'precision': 'bf16'}"
# PyTorch's refusal of an in-place write into a tensor whose elements overlap (an expanded one)
_OVERLAPPING = "more than one element of the written-to tensor refers to a single memory location"


class TorchImportError(WorkbenchError):
    """A PyTorch program that ``torch.export`` or TVM's PyTorch frontend cannot take."""


def load_torch():
    """``torch``, or the one line saying how to install it."""
    return import_optional("torch", INSTALL_FIX)


def exited(what: str, err: SystemExit, fix: str) -> TorchImportError:
    """The one line for user code that called ``sys.exit``: else it would end the command with no word."""
    return TorchImportError(f"{what} called sys.exit({'' if err.code is None else repr(err.code)})", fix)


def _describe(inputs) -> str:
    """``1x3x64x64 float32, 1x16 int64``: the inputs as a cause names them."""
    return ", ".join(f"{'x'.join(map(str, x.shape)) or 'scalar'} {str(x.dtype).removeprefix('torch.')}" for x in inputs)


def _listed(names: list) -> str:
    """``0.weight, 0.bias, 1.weight, ...``: the first three of ``names``."""
    return ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")


def check_importable(torch, module, inputs, name: str) -> None:
    """One line for inputs the workbench cannot hold (nested, sparse, on the meta device, of another dtype), or a
    module it cannot import: TorchScript, a module with no forward (nn.ModuleList, or ``forward = None``), or
    weights that hold no values, have no shapes yet (lazy layers) or are not float32."""
    if isinstance(module, torch.jit.ScriptModule):
        raise TorchImportError(
            f"{name} is TorchScript, which torch.export cannot take",
            "pass the nn.Module itself, as it was before torch.jit.script or torch.jit.trace",
        )
    forward = getattr(module, "forward", None)
    if getattr(forward, "__func__", None) is torch.nn.Module.forward:  # nn.ModuleList, nn.ModuleDict
        raise TorchImportError(
            f"{name} has no forward method, so it computes nothing",
            "pass a module whose forward computes the model, e.g. nn.Sequential(*layers) to run a list of layers "
            "in order",
        )
    if not callable(forward):  # forward = None, in the class or on the instance
        raise TorchImportError(
            f"{name}.forward is {'None' if forward is None else 'a ' + type(forward).__name__}, so {name} has no "
            "callable forward",
            f"define forward(self, ...) in {name}'s class, and assign nothing else to forward",
        )
    for i, x in enumerate(inputs):
        dtype = str(x.dtype).removeprefix("torch.")
        if x.is_nested:  # torch.nested: its sequences differ in length, and it has no one shape to export
            raise TorchImportError(
                f"Example input {i} of {name} is a nested tensor (torch.nested), which has no one shape to export",
                "pass a dense tensor: pad the sequences to one length, x.to_padded_tensor(0.0)",
            )
        if x.is_meta:
            raise TorchImportError(
                f"Example input {i} of {name} is on the meta device, which holds no values",
                "pass tensors with values, e.g. torch.randn(1, 3, 224, 224)",
            )
        if x.layout != torch.strided:  # sparse (COO, CSR...) or another layout numpy cannot hold
            raise TorchImportError(
                f"Example input {i} of {name} is a {str(x.layout).removeprefix('torch.')} tensor",
                "pass it dense: x.to_dense()",
            )
        if dtype not in INPUT_DTYPES:
            raise TorchImportError(
                f"Example input {i} of {name} is {dtype}; the workbench takes {', '.join(INPUT_DTYPES)}",
                f"import in float32 (x.float() and module.float()) and run bf16 at the backend: {BACKEND_PRECISION}"
                if dtype in ("bfloat16", "float8_e4m3fn", "float8_e5m2")
                else "pass the real and imaginary parts as real tensors: torch.view_as_real(x)"
                if x.is_complex()
                else "convert the inputs to one of those dtypes, e.g. x.float()",
            )
    weights = _weights(module).items()
    lazy = [n for n, t in weights if torch.nn.parameter.is_lazy(t)]
    if lazy:  # an UninitializedParameter holds no storage to copy, nor a shape to export
        raise TorchImportError(
            f"{name}'s lazy layers have no shapes yet ({_listed(lazy)})",
            "run the module once on an input first (module(x)), or give the layers their sizes "
            "(e.g. nn.Linear(in_features, out_features) for nn.LazyLinear(out_features))",
        )
    empty = [n for n, t in weights if t.is_meta]
    if empty:
        raise TorchImportError(
            f"{name}'s weights are on the meta device ({_listed(empty)}), which holds no values",
            "give the module its weights first, e.g. module.to_empty(device='cpu') then module.load_state_dict(...)",
        )
    reduced = sorted({str(t.dtype).removeprefix("torch.") for _, t in weights if t.is_floating_point()} - {"float32"})
    if reduced:  # its converters compute convolutions and matmuls in float32, then fail at the bias
        raise TorchImportError(
            f"{name}'s weights are {', '.join(reduced)}; TVM's PyTorch frontend imports float32 weights only",
            "import it in float32: module.float() and float32 inputs (x.float()); a lower precision is the "
            f"backend's to run: {BACKEND_PRECISION}",
        )


def private_copy(torch, module, name: str):
    """The module, copied: TVM's importer takes the exported weights by DLPack, without a copy, so a change
    to the user's module after the import would move the workbench's outputs and its reference alike.

    ``copy.deepcopy`` runs the class's own ``__deepcopy__``, which may hand back the module, its submodules or
    their tensors: then the modules are copied one by one (:func:`_rebuilt`), and what still holds the user's
    storage is cloned into the copy."""
    try:
        copied = copy.deepcopy(module)
        if not _parts(module).isdisjoint(_parts(copied)):
            copied = _rebuilt(module)
    except Exception as err:  # an attribute deepcopy cannot copy: a lock, an open file, a generator
        raise TorchImportError(
            f"{name} cannot be copied ({type(err).__name__}: {first_line(err)})",
            "keep what deepcopy cannot copy (locks, open files) out of the module's attributes",
        ) from None
    theirs = {t.untyped_storage().data_ptr() for t in _weights(module).values()} - {0}  # 0: an empty tensor
    for m in copied.modules():
        for table in (m._parameters, m._buffers):
            for key, t in table.items():
                if t is not None and t.untyped_storage().data_ptr() in theirs:
                    clone = t.detach().clone()
                    table[key] = torch.nn.Parameter(clone, t.requires_grad) if table is m._parameters else clone
    return copied.eval()


def _overlaps_itself(t) -> bool:
    """Whether two elements of ``t`` are one in memory, as in an expanded tensor (a stride 0 over a size above 1),
    which PyTorch refuses to write to."""
    return any(stride == 0 and size > 1 for stride, size in zip(t.stride(), t.shape))


def _rebuilt(module):
    """``module`` copied module by module, its class's ``__deepcopy__`` unasked: every module of it is mapped to
    a fresh instance first, so deep-copying their states copies the tensors and never hands back a module."""
    modules = list(module.modules())
    memo = {id(m): type(m).__new__(type(m)) for m in modules}
    for m in modules:
        memo[id(m)].__setstate__(copy.deepcopy(m.__getstate__(), memo))
    return memo[id(module)]


def _parts(module) -> set:
    """The ids of the module's modules and of their tables of parameters and buffers."""
    return {id(x) for m in module.modules() for x in (m, m._parameters, m._buffers)}


def _weights(module) -> dict:
    """``{name: tensor}`` of the module's parameters and buffers."""
    return {**dict(module.named_parameters()), **dict(module.named_buffers())}


def held_tensors(torch, module) -> dict[str, object]:
    """``{name: tensor}`` of ``module``'s parameters, buffers and tensor attributes, by the names torch.export gives
    them (``layer.buf``): which share memory is read here, as :func:`private_copy` may not keep it (a parameter's
    deepcopy copies its data alone)."""
    return {
        f"{prefix}.{key}".lstrip("."): t
        for prefix, m in module.named_modules()
        for key, t in {**vars(m), **m._parameters, **m._buffers}.items()
        if torch.is_tensor(t)
    }


def refuse_aliased_update(exported, held: dict[str, object], name: str) -> None:
    """One line where ``exported``'s graph updates in place a tensor of ``held`` (:func:`held_tensors` of the user's
    module) whose memory another one shares (one views the other): torch.export's decomposition then fails, or
    the others miss the update that eager PyTorch shows them."""
    sig = exported.graph_signature
    names = {**sig.inputs_to_parameters, **sig.inputs_to_buffers, **sig.inputs_to_lifted_tensor_constants}
    for node in exported.graph.nodes:
        alias = _first_alias(node)
        if alias is None or not alias.is_write:
            continue
        base = node.args[0]
        while _first_alias(base) is not None:  # through views and in-place ops, which return their input
            base = base.args[0]
        mine = held.get(names.get(getattr(base, "name", None)))
        memory = 0 if mine is None else mine.untyped_storage().data_ptr()
        others = [k for k, t in held.items() if t is not mine and t.untyped_storage().data_ptr() == memory]
        if memory and others:
            updated = names[base.name]
            raise TorchImportError(
                f"{name}.forward updates self.{updated} in place, and self.{updated} shares its memory with "
                f"{', '.join('self.' + k for k in others[:3])}: torch.export fails on such an update, or loses it "
                "for the tensors that share the memory",
                "give each tensor memory of its own (register_buffer(name, t.clone()), not a view of another "
                "tensor), or compute a new tensor in forward instead of updating one in place",
            )


def _first_alias(node):
    """The alias annotation of ``node``'s op on its first argument, or None: ``Tensor(a!) self`` of ``add_`` (it
    writes there and returns it), ``Tensor(a) self`` of ``view`` (it returns a view of it)."""
    schema = getattr(getattr(node, "target", None), "_schema", None)
    if getattr(node, "op", "") != "call_function" or schema is None or not schema.arguments:
        return None
    return schema.arguments[0].alias_info


def call(torch, module, inputs, names=None):
    """``module(*inputs)`` (tensors or arrays) on copies of the inputs, its weights (only those ``names`` when given)
    put back after, as they were: a forward that updates one in place (``self.w.add_(1)``) or assigns it anew leaves
    them as given, so every call agrees.

    Not ``torch.func.functional_call``: given a submodule used twice, it puts back plain tensors for the parameters
    (which ``torch.export`` then refuses), and it refuses ``nn.DataParallel``."""
    kept = [
        (table, key, t, t.clone())
        for prefix, m in module.named_modules()  # a submodule used twice is named once
        for table in (m._parameters, m._buffers)
        for key, t in table.items()
        if t is not None and (names is None or f"{prefix}.{key}".lstrip(".") in names)
    ]
    try:
        with torch.no_grad():
            return module(*(torch.as_tensor(x).clone() for x in inputs))
    finally:
        with torch.no_grad():
            for table, key, t, value in kept:
                table[key] = t
                if not _overlaps_itself(t):  # PyTorch refuses every write into it (copy_ too), so forward wrote none
                    t.copy_(value)


def run_eagerly(torch, module, inputs, name: str) -> None:
    """Run the module once, so that inputs it cannot take (a wrong shape or dtype) are told as such,
    not as something torch.export cannot trace."""
    try:
        call(torch, module, inputs)
    except SystemExit as err:
        raise exited(f"{name}.forward", err, "make forward return its outputs instead of exiting") from None
    except Exception as err:  # the user's module can raise anything
        if _OVERLAPPING in str(err):  # the example inputs are fresh, contiguous copies: forward made the overlap
            raise TorchImportError(
                f"{name}.forward writes in place into a tensor whose elements share memory (an expanded one), "
                f"which PyTorch refuses: {first_line(err)}",
                "clone it before the in-place op (t.expand(...).clone().add_(1)), or compute a new tensor "
                "(t.expand(...) + 1)",
            ) from None
        odd = any(x.is_floating_point() and x.dtype != torch.float32 for x in inputs)
        raise TorchImportError(
            f"{name} cannot run on inputs {_describe(inputs)}: {type(err).__name__}: {first_line(err)}",
            "pass float32 inputs (x.float()), of the shapes forward takes"
            if odd
            else "give the inputs forward takes: their shapes and dtypes "
            "(with --torch: --input-shape, and --input-dtype for token ids or masks)",
        ) from None
