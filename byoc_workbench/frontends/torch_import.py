"""PyTorch programs into Relax: ``torch.export``, then TVM's ``from_exported_program``, names kept.

torch is an optional extra (``pip install -e .[pytorch]``), imported inside functions only. The user's module is
checked, copied and run once first, by :mod:`byoc_workbench.frontends.torch_module`.

Each binding is named after the module that computed it, from the exported
program's ``nn_module_stack``: ``layer1.0.conv1.convolution`` is the
convolution of ``model.layer1[0].conv1``. So the diagrams' groups
(:mod:`byoc_workbench.draw.blocks`) are the module's own attribute names.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import io
import itertools
import logging
import re
import sys
import time
import types
from pathlib import Path

import numpy as np
import tvm
from tvm import relax

from byoc_workbench.core import tvm_private
from byoc_workbench.core.errors import WorkbenchError, first_line, shorten, user_error
from byoc_workbench.core.ir_edit import map_bindings, rename_vars
from byoc_workbench.core.output_paths import not_a_file
from byoc_workbench.frontends.naming import binding_names
from byoc_workbench.frontends.own import DEFAULT_DIMS, OwnModel, checked_seed, forward_inputs, seeded_inputs
from byoc_workbench.frontends.torch_module import (
    BACKEND_PRECISION,
    INSTALL_FIX,
    TorchImportError,
    call,
    check_importable,
    exited,
    held_tensors,
    load_torch,
    private_copy,
    refuse_aliased_update,
    run_eagerly,
)

logger = logging.getLogger(__name__)

# Relax ops whose TVM 0.27 kernels fail to build on bool tensors (LLVM compares i1 as floats, or a check
# wants a float or a bool's min value): computed on uint8 and cast back, torch's meaning kept (add is or,
# multiply is and, max is any).
_UINT8_FOR_BOOL = frozenset(
    f"relax.{op}"
    for op in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")
    + ("maximum", "minimum", "max", "min", "argmax", "argmin", "add", "multiply")
)
# TVM's frontend types a bool tensor's cumulative sum as bool (torch: int64), so no cast can give torch's values.
_BOOL_REFUSED = {"relax.cumsum": "cumsum", "relax.cumprod": "cumprod"}


def module_path(node) -> str:
    """The qualified name of the innermost module around an exported node (``layer1.0.conv1``), or ``""``."""
    stack = node.meta.get("nn_module_stack") or {}
    paths = [path for path, _cls in stack.values() if path]
    return paths[-1] if paths else ""


def node_name(node) -> str:
    """``<module path>.<op>``, e.g. ``layer1.0.conv1.convolution``; the op alone outside any submodule."""
    op = getattr(node.target, "__name__", str(node.target)).split(".")[0].lstrip("_")
    path = module_path(node)
    return re.sub(r"[^\w.]", "_", f"{path}.{op}" if path else op)


def _importer_class():
    class Importer(tvm_private.torch_importer_base()):
        """TVM's importer, recording each node's outputs under its module's name."""

        def create_convert_map(self):
            self.converted = []  # (name, [outputs]) in order
            return {key: self._recorded(f) for key, f in super().create_convert_map().items()}

        def _recorded(self, convert):
            def run(node, *args):
                try:
                    out = convert(node, *args)
                except WorkbenchError:
                    raise
                except Exception as err:  # a converter meeting a case it does not cover
                    raise TorchImportError(
                        f"TVM's PyTorch frontend cannot convert node {node.name} ({node.target}) in "
                        f"{module_path(node) or 'the top module'}: {first_line(err)}",
                        "rewrite that part of the module with ops the frontend covers, or export it to ONNX",
                    ) from err
                if isinstance(out, relax.Call):
                    out = self.block_builder.emit(out)
                outs = list(out) if isinstance(out, (list, tuple)) else [out]
                self.converted.append((node_name(node), [o for o in outs if isinstance(o, relax.Expr)]))
                return out

            return run

        def check_ops(self, nodes):
            missing: dict = {}
            for node in nodes:
                if node.op == "call_function" and node.target.__name__ not in self.convert_map:
                    missing.setdefault(node.target.__name__, []).append(module_path(node) or node.name)
            if missing:
                listing = "; ".join(f"{op} (in {', '.join(sorted(set(w))[:3])})" for op, w in sorted(missing.items()))
                raise TorchImportError(
                    f"TVM's PyTorch frontend has no converter for {len(missing)} op(s): {listing}",
                    "rewrite those parts with ops the frontend covers, or export the module to ONNX",
                )

    return Importer


def _numpy(outputs) -> list:
    """The outputs' tensors as arrays, in ``forward``'s order (:func:`_check_outputs` made sure NumPy holds them)."""
    return [t.detach().cpu().numpy() for t in load_torch().utils._pytree.tree_leaves(outputs)]


def _what(value) -> str:
    """``int 5``, ``str '/tmp'``: a value a cause names, its type first."""
    return f"{type(value).__name__} {shorten(repr(value), 60)}"


def _check_outputs(program, name: str) -> None:
    """Refuse, in one line, a ``forward`` whose result is not tensors (None, or a number beside a tensor)."""
    torch = load_torch()
    [out] = [n for n in program.graph.nodes if n.op == "output"]
    leaves = torch.utils._pytree.tree_leaves(out.args[0])

    def what(v) -> str:
        if isinstance(v, torch.fx.Node):
            return "a value that is no tensor"
        return "None" if v is None else f"the {type(v).__name__} {v!r}"

    bad = [
        f"output {k} is {what(v)}"
        for k, v in enumerate(leaves)
        if not (isinstance(v, torch.fx.Node) and isinstance(v.meta.get("val"), torch.Tensor))
    ]
    if not leaves or bad:
        raise TorchImportError(
            f"{name}.forward must return tensors, and {'; '.join(bad) if bad else 'it returns none'}",
            "return tensors, or tuples, lists or dicts of tensors, and nothing else",
        )
    unheld = {k: v.meta["val"] for k, v in enumerate(leaves) if not _numpy_holds(torch, v.meta["val"].dtype)}
    if unheld:  # the workbench compares outputs as arrays
        listed = ", ".join(f"output {k} as {str(t.dtype).removeprefix('torch.')}" for k, t in unheld.items())
        raise TorchImportError(
            f"{name}.forward returns {listed}, which NumPy cannot hold",
            "return the real and imaginary parts as real tensors: torch.view_as_real(out)"
            if any(t.is_complex() for t in unheld.values())
            else f"return float32 (e.g. return out.float()), and run a lower precision at the backend: "
            f"{BACKEND_PRECISION}",
        )


def _numpy_holds(torch, dtype) -> bool:
    """Whether ``.numpy()`` takes a tensor of ``dtype``: not bfloat16, the float8s, complex32 or quantized ones."""
    try:
        torch.empty(0, dtype=dtype).numpy()
    except TypeError:  # "Got unsupported ScalarType BFloat16"
        return False
    return True


def _is_bool(expr) -> bool:
    return isinstance(expr.ty, relax.TensorType) and expr.ty.dtype == "bool"


def bool_ops_on_uint8(mod):
    """``mod`` with each op of :data:`_UINT8_FOR_BOOL` that takes bool tensors computed on uint8 (casts
    bound before it, and after it where it gave bool); the count of ops rewritten. The casts are named
    after the op's binding, so the diagrams group them with it."""
    count = 0

    def rewrite(b, is_df):
        nonlocal count
        value = b.value
        op = value.op.name if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op) else ""
        if not any(_is_bool(a) for a in getattr(value, "args", ())):
            return None
        if op in _BOOL_REFUSED:
            raise TorchImportError(
                f"TVM imports the {_BOOL_REFUSED[op]} of a bool tensor ({b.var.name}) as bool, not as torch's int64",
                f"cast first in forward: x.long().{_BOOL_REFUSED[op]}(dim)",
            )
        if op not in _UINT8_FOR_BOOL:
            return None
        count += 1
        out, args = [], []
        for k, a in enumerate(value.args):
            if _is_bool(a):
                cast = relax.BlockBuilder().normalize(relax.op.astype(a, "uint8"))
                out.append(relax.VarBinding(tvm_private.new_var(f"{b.var.name}.in{k}", cast.ty, is_df), cast))
                a = out[-1].var
            args.append(a)
        call = relax.BlockBuilder().normalize(relax.Call(value.op, args, value.attrs, value.ty_args))
        if call.ty.dtype == b.var.ty.dtype:
            return [*out, relax.VarBinding(b.var, call)]
        computed = tvm_private.new_var(f"{b.var.name}.uint8", call.ty, is_df)
        return [*out, relax.VarBinding(computed, call), relax.VarBinding(b.var, relax.op.astype(computed, "bool"))]

    return map_bindings(mod, rewrite), count


def _export(torch, module, inputs, name: str, held: dict) -> tuple:
    """``(program, reference)``: ``module`` exported and decomposed, and the exported program run eagerly. What it
    reads but does not own (a global, a closure's tensor) is lifted as constants, copied: TVM takes them by DLPack."""
    chatter = io.StringIO()  # on some failures torch prints whole FX graphs (thousands of lines) first
    with torch.no_grad(), contextlib.redirect_stdout(chatter), contextlib.redirect_stderr(chatter):
        try:
            exported = torch.export.export(module, tuple(x.clone() for x in inputs))
        except Exception as err:  # torch's export errors are many classes (UserError, Unsupported, ...)
            logger.info("what torch.export printed before it failed:\n%s", chatter.getvalue())
            raise TorchImportError(
                f"torch.export cannot trace {name}: {first_line(err)}",
                "make the module traceable (no data-dependent shapes or Python control flow on tensor values), "
                "e.g. export the network without its post-processing",
            ) from None
        refuse_aliased_update(exported, held, name)
        exported.constants.update({k: v.clone() for k, v in exported.constants.items() if torch.is_tensor(v)})
        try:
            program = exported.run_decompositions()
        except Exception as err:  # torch's own failure on a graph it traced: --traceback shows where
            logger.info("what torch.export printed before it failed:\n%s", chatter.getvalue())
            raise _undecomposed(name, err) from err
    sys.stderr.write(chatter.getvalue())
    graph, signature = exported.module(), program.graph_signature
    updated = {*signature.buffers_to_mutate.values(), *signature.parameters_to_mutate.values()}
    return program, lambda arrays: _numpy(call(torch, graph, arrays, updated))


def _undecomposed(name: str, err: Exception) -> TorchImportError:
    """Why ``torch.export`` traced the module ``name`` but could not decompose its graph into ATen ops."""
    constant = re.match(r"Constant (\S+) is mutated in the forward method", str(err))
    if constant:
        return TorchImportError(
            f"{name}.forward updates self.{constant.group(1)} in place, a tensor attribute that is no buffer, and "
            "torch.export updates only buffers in place",
            f"register it as a buffer with memory of its own: self.register_buffer({constant.group(1)!r}, t.clone()), "
            "or compute a new tensor in forward instead of updating it",
        )
    return TorchImportError(
        f"torch.export traced {name}, but decomposing its graph into ATen ops failed: "
        f"{type(err).__name__}: {first_line(err)}",
        "rewrite the part of forward that torch's trace (--traceback) names, or export the network without it",
    )


def import_torch(module, example_inputs, name: str = "", mark: str = "") -> OwnModel:
    """Export ``module`` with ``torch.export`` on ``example_inputs`` and import it into Relax.

    Parameters
    ----------
    module : torch.nn.Module
        Copied first (its weights too): the workbench exports, imports and runs its copy, in eval
        mode, and the module itself is left as it was. Of an ``nn.DataParallel`` (or
        ``DistributedDataParallel``), its ``.module`` is imported, and ``mark`` says so.
    example_inputs : tensor or sequence of tensors
        The inputs the program is exported for (their shapes become static); one of
        :data:`INPUT_DTYPES` each. Every run takes copies: a ``forward`` that changes its inputs,
        buffers or parameters in place leaves them, and the workbench's inputs, as given.
    name : str
        How titles name it (default: the module's class name).
    mark : str
        Shown on every title, e.g. ``"weights as nets:small made them, after torch.manual_seed(0)"``.

    Returns
    -------
    OwnModel
        ``reference`` runs the copy's exported program eagerly, on the tensors TVM's build holds.
    """
    torch = load_torch()
    if not isinstance(module, torch.nn.Module):
        raise TorchImportError(
            f"Expected a torch.nn.Module, got {type(module).__name__}", "pass the model object itself"
        )
    one = isinstance(example_inputs, torch.Tensor) or not isinstance(example_inputs, (list, tuple))
    inputs = (example_inputs,) if one else tuple(example_inputs)
    if not inputs or not all(isinstance(x, torch.Tensor) for x in inputs):
        raise TorchImportError(
            "example_inputs must be a tensor or a sequence of tensors", "pass e.g. (torch.randn(1, 3, 224, 224),)"
        )
    if isinstance(module, (torch.nn.DataParallel, torch.nn.parallel.DistributedDataParallel)):
        wrapper, module = type(module).__name__, module.module  # it only spreads .module's runs over GPUs
        mark = "; ".join(filter(None, (mark, f"{type(module).__name__} imported from {wrapper}'s .module")))
    kind = type(module).__name__
    check_importable(torch, module, inputs, kind)
    held = held_tensors(torch, module)
    module = private_copy(torch, module, kind)
    run_eagerly(torch, module, inputs, kind)
    t0 = time.perf_counter()
    program, reference = _export(torch, module, inputs, kind, held)
    _check_outputs(program, kind)
    importer = _importer_class()()
    mod = importer.from_exported_program(program, False, False, False, None)
    main = mod["main"]
    mod[mod.get_global_var("main")] = rename_vars(main, binding_names(main, importer.converted))
    mod, on_uint8 = bool_ops_on_uint8(relax.transform.Normalize()(mod))
    import_s = time.perf_counter() - t0
    calls = sum(n.op == "call_function" for n in program.graph.nodes)
    notes = [f"torch.export: {calls} aten calls after decomposition"]
    if on_uint8:
        notes.append(f"{on_uint8} op(s) on bool tensors computed on uint8: TVM cannot build them on bool")
    return OwnModel(
        name=name or kind,
        kind="pytorch",
        mod=mod,
        inputs=[np.array(x.detach().cpu().numpy()) for x in inputs],  # a copy: the caller's tensors may change
        reference=reference,
        reference_name="eager PyTorch",
        import_s=import_s,
        source_ops=calls,
        notes=notes,
        mark=mark,
    )


def seeded_factory(spec: str, seed: int = 0):
    """``(module, mark)`` from ``"package.module:factory"``, built under ``torch.manual_seed(seed)``.

    The factory may be a dotted path in the module, e.g. ``mods:ns.tiny`` or ``mods:Factories.tiny`` (a namespace's,
    or a class's static or class method); modules go before the colon.
    A factory that takes ``weights`` (torchvision's) is called with ``weights=None`` (and
    ``weights_backbone=None``): torchvision's then download nothing. The mark says only what the workbench knows,
    the factory's call after the seed: the factory may still load a checkpoint or download.
    A module instance in place of the factory is taken as it is, weights and all.
    """
    torch = load_torch()
    where, _, attr = spec.partition(":")
    names = attr.split(".")
    # a dotted path is followed only in a module that exists: else "m:Net.forward" is told as a method's name
    dotted = len(names) > 1 and all(n.isidentifier() for n in names) and _findable(where)
    if not where or not (attr.isidentifier() or dotted):  # "m::f" and "m:json:loads" name no function of m
        raise _not_a_factory(spec, _spec_meant(where, attr))
    module, taken, factory = _reach(where, names)
    if attr.isidentifier() and module == where and not taken:
        raise TorchImportError(f"{where} has no {attr}", f"name a function of {where}")
    if module != where or len(taken) < len(names):
        raise _not_a_factory(spec, _meant(module, taken, factory))
    if isinstance(factory, torch.nn.Module):  # the model itself, built when its file was imported
        return factory, f"{spec}'s own weights"
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}
    kwargs = {k: None for k in ("weights", "weights_backbone") if k in params}
    torch.manual_seed(checked_seed(seed))
    try:
        module = factory(**kwargs)
    except SystemExit as err:
        raise exited(f"{spec}()", err, "make the factory return the model instead of exiting") from None
    except Exception as err:  # the user's factory can raise anything
        raise TorchImportError(
            f"{spec}() raised {type(err).__name__}: {first_line(err)}", "check the factory"
        ) from None
    if not isinstance(module, torch.nn.Module):
        raise TorchImportError(f"{spec}() returned {_what(module)}", "name a factory of nn.Module")
    call = f"{spec}({', '.join(f'{k}=None' for k in kwargs)})" if kwargs else spec
    return module, f"weights as {call} made them, after torch.manual_seed({seed})"


def _not_a_factory(spec: str, meant: str) -> TorchImportError:
    return TorchImportError(
        f"--torch takes module:factory, one colon and a function's name, got {spec!r}", f"pass e.g. --torch {meant}"
    )


def _spec_meant(where: str, attr: str) -> str:
    """The ``module:factory`` a malformed ``--torch where:attr`` likely meant: ``m:Net`` for ``m.py:Net.forward``
    or ``m:Net()``, ``m:f`` for ``m:json:f``, ``m:ns.f`` for ``m:ns..f`` or ``m:ns.`` (``f`` the first factory of
    namespace ``ns``), ``m:FACTORY`` for ``m:``, or for a name module ``m`` does not have."""
    module = where.removesuffix(".py") or "MODULE"
    words = (re.match(r"\w*", s).group() for s in attr.rpartition(":")[2].split("."))  # "Net()" -> "Net"
    names = list(itertools.takewhile(str.isidentifier, (w for w in words if w)))  # an empty part is a typo
    try:
        module, taken, obj = _reach(module, names)
        inner = _factory_in(obj) if taken and not _makes(obj) else None
        return _meant(module, [*taken, inner], getattr(obj, inner)) if inner else _meant(module, taken, obj)
    except (Exception, SystemExit):  # the module cannot be imported, so nobody knows what it has
        return f"{module}:{names[0] if names else 'FACTORY'}"


def _meant(module: str, taken: list, obj) -> str:
    """``module:a.b``, where the path ``taken`` reaches ``obj``, a factory; ``module:FACTORY`` where it does not."""
    return f"{module}:{'.'.join(taken) if taken and _makes(obj) else 'FACTORY'}"


def _makes(obj) -> bool:
    """Whether ``obj`` may be a factory: a callable, but no class other than one of nn.Module (it makes no module)."""
    return callable(obj) and not (inspect.isclass(obj) and not issubclass(obj, load_torch().nn.Module))


def _factory_in(obj) -> str | None:
    """The first public name of namespace ``obj`` (a class that makes no module, say) whose value may be a factory,
    as a path follows it: a static or class method, not a class's plain method (that needs an instance)."""
    for name, value in inspect.getmembers_static(obj):
        plain = inspect.isfunction(value) and inspect.isclass(obj)
        if not name.startswith("_") and not plain and (isinstance(value, classmethod) or _makes(value)):
            return name
    return None


def _reach(where: str, names: list) -> tuple:
    """``(module, taken, obj)``: module ``where`` imported and the submodules that ``names`` starts with moved into its
    name (``mpkg:sub.deep.f`` is ``mpkg.sub.deep:f``), then the rest followed attribute by attribute (``m:ns.f``,
    ``m:Factories.f``) up to a name the object has not, an attribute of a function, or a class's plain method (it
    needs an instance). ``taken`` is the path followed, which reaches ``obj``."""
    module, names = _import_module(where), list(names)
    while names and (sub := _submodule(module, names[0])) is not None:
        module, where, names = sub, sub.__name__, names[1:]
    obj, taken = module, []
    for name in names:
        plain = inspect.isfunction(inspect.getattr_static(obj, name, None)) and inspect.isclass(obj)
        if inspect.isroutine(obj) or plain or not hasattr(obj, name):
            break
        obj, taken = getattr(obj, name), [*taken, name]
    return where, taken, obj


def _submodule(module, name: str):
    """The module that ``module``'s ``name`` is: an attribute that is a module, or a submodule not imported yet."""
    found = getattr(module, name, None)
    if isinstance(found, types.ModuleType):
        return found
    if found is None and hasattr(module, "__path__") and importlib.util.find_spec(f"{module.__name__}.{name}"):
        return _import_module(f"{module.__name__}.{name}")
    return None


def _findable(module: str) -> bool:
    """Whether Python finds module ``module`` (without running it, a package's parents aside)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (Exception, SystemExit):  # a parent that is no package, a relative name, a parent failing as it loads
        return False


def _no_file(name: str) -> str:
    """``"; ./net.py is a FIFO, not a regular file"``, where a module's file on ``sys.path`` is no file Python reads."""
    for entry in sys.path:
        path = Path(entry or ".") / (name.replace(".", "/") + ".py")
        if path.exists() and not path.is_file():
            return f"; {path} {not_a_file(path)}"
    return ""


def _import_module(where: str):
    """The module ``where`` names, or a one-line error saying why it cannot be imported."""
    try:
        return importlib.import_module(where)
    except ModuleNotFoundError as err:
        if err.name and (where == err.name or where.startswith(err.name + ".")):  # the module named itself
            odd = _no_file(err.name)
            if odd:
                fix = "put the module's code in a regular file"
            elif where.endswith(".py"):
                fix = (
                    f"name the module, not its file: --torch {where.removesuffix('.py')}:... (its folder on PYTHONPATH)"
                )
            else:
                fix = "check the spelling; for a module of your own, put its folder on PYTHONPATH (PYTHONPATH=. ...)"
            raise TorchImportError(f"No module named {err.name!r} (from --torch {where}:...){odd}", fix) from None

        fix = INSTALL_FIX if (err.name or "").split(".")[0] in ("torch", "torchvision") else f"pip install {err.name}"
        raise TorchImportError(f"Cannot import {where}: it needs {err.name}, which is not installed", fix) from None
    except SystemExit as err:
        fix = "put the exit under if __name__ == '__main__': the workbench imports the module"
        raise exited(f"Importing {where}", err, fix) from None
    except Exception as err:  # the user's module can fail in any way while it loads, SyntaxError included
        raise user_error(f"module {where}", err, f"fix {where} (--traceback shows the whole trace)") from err


def import_spec(spec: str, shape=DEFAULT_DIMS, seed: int = 0) -> OwnModel:
    """:func:`import_torch` of ``"module:factory"`` (see :func:`seeded_factory`) on seeded inputs
    (:func:`~byoc_workbench.frontends.own.seeded_inputs`: normal floats, small integers, random bools).

    ``shape`` is the first input's entry, or ``{name: entry}`` naming ``forward``'s inputs. An entry is
    the input's dims (a float32 input), or ``{"shape": dims, "dtype": "int64"}`` (``--input-dtype``;
    without ``"shape"``, :data:`DEFAULT_DIMS`).
    """
    torch = load_torch()
    module, mark = seeded_factory(spec, seed)
    named = forward_inputs(module.forward, shape, type(module).__name__)
    arrays = seeded_inputs({n: d for n, d, _ in named}, {n: t for n, _, t in named}, seed)
    return import_torch(module, tuple(torch.from_numpy(a) for a in arrays), name=spec, mark=mark)
