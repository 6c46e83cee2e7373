"""Build a stage's module with TVM and run it in the Relax VM."""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax

from byoc_workbench import ir
from byoc_workbench.errors import WorkbenchError
from byoc_workbench.measure import compiled


def has_recursion(mod: tvm.IRModule) -> bool:
    """Whether some function reaches itself through calls."""
    graph = ir.calls_between_functions(mod)
    for start in graph:
        seen, todo = set(), list(graph[start])
        while todo:
            f = todo.pop()
            if f == start:
                return True
            if f not in seen:
                seen.add(f)
                todo.extend(graph.get(f, ()))
    return False


def has_branches(mod: tvm.IRModule) -> bool:
    """Whether some Relax function holds an If."""
    return any(
        isinstance(s.value, relax.If)
        for f in mod.functions.values()
        if isinstance(f, relax.Function)
        for s in ir.walk(f, descend=False)
    )


def compile(mod: tvm.IRModule, target: str = "llvm") -> relax.VMExecutable:
    """``tvm.compile`` the module for ``target``.

    TVM 0.27's StaticPlanBlockMemory makes the VM segfault at run time on a
    recursive function (it reuses storage across recursive calls) and on some
    If branches (a reshape in one branch, then a split after the If, for
    one); that pass is only an optimisation, so such modules go without it.
    A module compiled before on this machine is loaded from the build cache
    (:mod:`byoc_workbench.measure.compiled`).
    """
    _check_ranks(mod)
    disabled = ["StaticPlanBlockMemory"] if has_recursion(mod) or has_branches(mod) else []

    def build():
        with tvm.transform.PassContext(opt_level=3, disabled_pass=disabled):
            return tvm.compile(mod, target=target)

    return compiled.load_or_build(mod, target, disabled, build)[0]


def _check_ranks(mod: tvm.IRModule) -> None:
    """Refuse, in one line, an op call on a tensor of unknown rank: TVM cannot lower it.

    Such a call survives every stage (it can be drawn and partitioned), but
    ``tvm.compile`` stops in VM codegen with an internal error and a C++ trace.
    """
    for fname, func in ((gv.name_hint, f) for gv, f in mod.functions.items()):
        if not isinstance(func, relax.Function):
            continue
        for step in ir.walk(func, mod, descend=False, name=fname):
            if not step.op:
                continue
            unknown = [a for a in step.value.args if isinstance(a.ty, relax.TensorType) and a.ty.ndim == -1]
            if unknown:
                arg = unknown[0]
                name = arg.name if ir.is_var(arg) else type(arg).__name__
                raise WorkbenchError(
                    f"TVM cannot build {step.value.op.name} in {fname}: its input {name} has unknown rank",
                    "give the model's inputs a rank, e.g. R.Tensor((n, 3, h, w), 'float32') "
                    "or R.Tensor(ndim=4, dtype='float32')",
                )


def device(target: str = "llvm") -> tvm.runtime.Device:
    """The device a VM built for ``target`` runs on: the first GPU for ``cuda``, else the CPU."""
    kind = target.split()[0] if isinstance(target, str) else tvm.target.Target(target).kind.name
    return tvm.cuda(0) if kind == "cuda" else tvm.cpu()


def build(mod: tvm.IRModule, target: str = "llvm") -> relax.VirtualMachine:
    """:func:`compile` the module and load it in a VM on ``target``'s device."""
    return relax.VirtualMachine(compile(mod, target), device(target))


def to_numpy(value):
    """VM results as NumPy: a tensor becomes an array, a tuple a list."""
    if isinstance(value, (list, tuple)) or type(value).__name__ in ("Array", "Tuple"):
        return [to_numpy(v) for v in value]
    return value.numpy()


def run(mod: tvm.IRModule, inputs, entry: str = "main", vm: relax.VirtualMachine | None = None):
    """Build (unless ``vm`` is given) and run ``entry`` on NumPy inputs."""
    vm = vm or build(mod)
    args = [tvm.runtime.tensor(np.asarray(a)) for a in inputs]
    return to_numpy(vm[entry](*args))
