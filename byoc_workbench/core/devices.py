"""Where each op runs when TVM builds a model for a GPU: what TVM 0.27 has no GPU kernel for stays on the CPU.

A model built for ``cuda`` runs on the GPU, except the ops of :data:`CPU_ONLY` (classic NMS and the box filter before
it). Those, and the ops that only read what they made (the slices of the detections, say), run on the CPU; a copy
(``R.to_vdevice``) carries a tensor across wherever one side reads what the other made. The placement uses Relax's
virtual devices: the module gets two (``I.vdevice``), the GPU first, so that everything not placed runs there.

As the stages do, placing is two steps: :func:`propose` says where each binding runs and which tensors cross, as data
that the diagrams and the report read; :func:`place` rewrites the module. :func:`crossings` checks a placed module on
its own: every binding (an op, an alias, a tuple, a branch, a call) reads its tensors on the device they live on.
A module legalized before (LegalizeOps) hides its CPU-only ops in kernel calls, which
:func:`~byoc_workbench.core.devices_kernels.check_not_legalized` refuses; a kernel bound by hand to the other device,
:func:`~byoc_workbench.core.devices_kernels.check_kernels_bound`.

Targets (what TVM compiles for) are read and checked by :mod:`byoc_workbench.core.targets`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import tvm
from tvm import relax
from tvm.relax.global_info import VDevice

from byoc_workbench.core import ir, ir_edit, ir_types
from byoc_workbench.core.devices_kernels import check_not_legalized
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.core.targets import is_gpu, resolve
from byoc_workbench.core.tvm_private import items

# Ops TVM 0.27 builds for the CPU only, and why. tests/models/test_cuda_build.py legalizes every op of the
# suite's models for CUDA and fails on a packed call outside this table.
CPU_ONLY = {
    "relax.vision.non_max_suppression": "its kernel calls a packed sort (tvm.contrib.sort), which device code cannot",
    "relax.vision.get_valid_counts": "its kernel is one serial loop over every box, and NMS reads what it writes",
    "relax.vision.all_class_non_max_suppression": "its kernel calls a packed sort (tvm.contrib.sort), as NMS's does",
}
# Arguments a legalization reads as numbers (ONNX NMS's boxes per class): no kernel reads them, a copy hides them.
_READ_WHEN_BUILT = {"relax.vision.all_class_non_max_suppression": (2,)}
# Ops TVM 0.27 cannot build for CUDA even on the CPU beside the GPU, as a user knows them: their legalized kernels are
# compiled for the GPU whatever the placement says, and TVM stops on "Buffer T_gather is used before its definition".
NO_GPU_BUILD = {"relax.vision.all_class_non_max_suppression": "NonMaxSuppression (as ONNX files hold it)"}
# --- where each binding runs ---------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Crossing:
    """A tensor copied between the GPU and the CPU: made by ``var`` in ``function``, read on ``to``."""

    function: str
    var: str
    to: str  # "cpu" or "gpu"
    shape: tuple | None  # None where it is not static
    dtype: str

    @property
    def bytes(self) -> int:
        """Bytes per copy (0 for a shape known only at run time)."""
        size = 0 if self.shape is None else math.prod(int(d) for d in self.shape)
        return size * tvm.runtime.DataType(self.dtype).bits // 8


@dataclasses.dataclass(frozen=True)
class Placement:
    """What runs on the CPU in a GPU build, as names: ``{function: (var, ...)}``, the ops among them that have
    no GPU kernel (with why), the copies between the two, what TVM cannot build for a GPU at all (as a user knows it),
    and for :func:`place` the same by variable (``plans``) and every function of the module it was proposed for."""

    on_cpu: dict
    cpu_only: dict  # op -> why (CPU_ONLY's entries the module calls)
    crossings: tuple  # of Crossing
    no_gpu_build: tuple = ()  # NO_GPU_BUILD's entries the module calls: a GPU build is refused
    plans: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)  # name -> _Plan
    functions: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)  # the module's, by name

    def __bool__(self) -> bool:
        return bool(self.crossings or self.no_gpu_build) or any(self.on_cpu.values())

    def runs_on_cpu(self, function: str, var: str) -> bool:
        return var in self.on_cpu.get(function, ())

    @property
    def copied_bytes(self) -> int:
        return sum(c.bytes for c in self.crossings)

    def lines(self) -> list:
        """The placement in words, for the stage report."""
        if not self:
            return []
        if self.no_gpu_build:
            return [f"no GPU build: TVM 0.27 cannot build {self.no_gpu_build[0]} for CUDA, not even on the CPU"]
        n = sum(len(v) for v in self.on_cpu.values())
        out = [f"on the CPU in a GPU build: {n} binding(s); TVM 0.27 has no GPU kernel for"]
        out += [f"  {op.removeprefix('relax.')}: {why}" for op, why in self.cpu_only.items()]
        size = self.copied_bytes
        said = f"{size / 1e6:.2f} MB" if size >= 1e5 else f"{size / 1e3:.1f} kB"
        out.append(f"  {len(self.crossings)} copies between GPU and CPU, {said} per run")
        return out


def _holds_tensor(ty) -> bool:
    """Whether a value of type ``ty`` lives on a device: a tensor, or a tuple holding one."""
    return isinstance(ty, relax.TensorType) or (isinstance(ty, relax.TupleType) and any(map(_holds_tensor, ty.fields)))


def _tensor_reads(value) -> list:
    """The variables holding tensors that ``value`` reads, looking into inline tuples (``R.concat((a, b))``)."""
    return [v for v in ir.reads(value) if _holds_tensor(v.ty)]


def _constants(value) -> list:
    """The constants ``value``'s kernel reads when it runs (in inline tuples too): the VM loads them on the GPU."""
    if isinstance(value, tvm.ir.GenericConst):
        return [value]
    parts = items(value.fields if type(value) is relax.Tuple else value.args if type(value) is relax.Call else [])
    built = _READ_WHEN_BUILT.get(ir.op_name(value.op), ()) if isinstance(getattr(value, "op", None), tvm.ir.Op) else ()
    return [c for i, a in enumerate(parts) if i not in built for c in _constants(a)]


def _with_copies(value, copies: dict):
    """``value`` reading each constant that ``copies`` holds (by handle) through its copy."""
    if isinstance(value, tvm.ir.GenericConst):
        return copies.get(value.__chandle__(), value)
    if type(value) is relax.Tuple:
        return relax.Tuple([_with_copies(f, copies) for f in value.fields])
    if type(value) is relax.Call:
        return relax.Call(value.op, [_with_copies(a, copies) for a in value.args], value.attrs, value.ty_args)
    return value


def _on_cpu(step, cpu: set) -> bool:
    """Whether ``step``'s binding runs on the CPU, given the variables (handles) already placed there: a
    CPU-only op, or an op, tuple or alias that reads only what the CPU made, bound by a VarBinding or by a match_cast
    alike. A match_cast of a variable or a tuple keeps its type, so it stays on the GPU, as do calls of functions,
    subgraphs and kernels, Ifs and constants; an op that calls a kernel or a packed function (``call_tir``,
    ``call_tir_inplace``, ``call_builtin_with_ctx``...) names it first."""
    if step.op in CPU_ONLY:
        return True
    value, kinds = step.value, (relax.TupleGetItem, relax.Tuple)
    if step.op is None and (type(step.binding) is relax.MatchCast or not (type(value) in kinds or ir.is_var(value))):
        return False
    if step.op is not None and isinstance(next(iter(value.args), None), (tvm.ir.GlobalVar, relax.ExternFunc)):
        return False
    reads = _tensor_reads(value) if step.op is not None else ir.reads(value)
    return bool(reads) and all(v.__chandle__() in cpu for v in reads)


class _Plan(NamedTuple):
    """One function's placement by variable (names repeat), by handle: of the function :attr:`Placement.functions`
    holds (:func:`place` rewrites only that one)."""

    cpu: set  # the handles of the bindings on the CPU
    needed: dict  # handle -> (variable, {"cpu" | "gpu"}): where it is read but not made
    steps: list


def _propose_function(func, fname: str, mod) -> _Plan:
    """One function's :class:`_Plan`: what it reads on a device other than its own, where it reads it.

    Every variable lives on one device, its tensors with it: a binding reads what it reads on its own device (a call of
    a function on the GPU, where its parameters are). An If's value, and so each branch's result, lives on the GPU, as
    does a result handed to a caller (any function but main). Whatever is read on another device than its own is copied
    there, whatever binds it; a constant lives on the GPU.
    """
    cpu: set = set()
    needed: dict = {}
    steps = list(ir.walk(func, mod, descend=False, name=fname))
    on_gpu = [] if fname == "main" else _tensor_reads(func.body.body)  # main's results are read where made
    for step in steps:
        if type(step.value) is relax.If:
            # The VM reads the condition wherever it is, and a branch's bindings follow the If in the walk:
            # its results are known to be on the CPU only once the walk is through.
            on_gpu += _tensor_reads(step.value.true_branch.body) + _tensor_reads(step.value.false_branch.body)
            continue
        wants = "cpu" if _on_cpu(step, cpu) else "gpu"
        if wants == "cpu":
            cpu.add(step.var.__chandle__())
            for c in _constants(step.value):
                needed.setdefault(c.__chandle__(), (c, set()))[1].add("cpu")
        for v in _tensor_reads(step.value):
            if ("cpu" if v.__chandle__() in cpu else "gpu") != wants:
                needed.setdefault(v.__chandle__(), (v, set()))[1].add(wants)
    for v in on_gpu:
        if v.__chandle__() in cpu:
            needed.setdefault(v.__chandle__(), (v, set()))[1].add("gpu")
    return _Plan(cpu, needed, steps)


def _moved(ty, vdevice):
    """``ty`` with each tensor it holds on ``vdevice``."""
    if isinstance(ty, relax.TupleType):
        return relax.TupleType([_moved(field, vdevice) for field in ty.fields])
    tensor = isinstance(ty, relax.TensorType)
    return relax.TensorType(ty.shape, ty.dtype, vdevice, ty.ndim if ty.shape is None else -1) if tensor else ty


def _tensors(name: str, ty):
    """``(name, tensor type)`` for each tensor a value of type ``ty`` holds: a tuple's as ``t[0]``, ``t[1]``..."""
    if isinstance(ty, relax.TensorType):
        yield name, ty
    elif isinstance(ty, relax.TupleType):
        for i, field in enumerate(ty.fields):
            yield from _tensors(f"{name}[{i}]", field)


def propose(mod: tvm.IRModule) -> Placement:
    """Where each binding of ``mod`` runs in a GPU build, and the tensors that cross (nothing rewritten)."""
    ir.check_no_local_calls(ir.module_given(mod, "propose"))
    on_cpu, crossings, used, plans = {}, [], {}, {}
    for fname in ir.host_functions(mod):
        plan = _propose_function(mod[fname], fname, mod)
        if plan.cpu or plan.needed:
            plans[fname] = plan
        on_cpu[fname] = tuple(s.var.name for s in plan.steps if s.var.__chandle__() in plan.cpu)
        used.update((s.op, CPU_ONLY[s.op]) for s in plan.steps if s.op in CPU_ONLY)  # each on the CPU
        for v, wants in plan.needed.values():
            for to in sorted(wants):
                for name, ty in _tensors(getattr(v, "name", "constant"), v.ty):
                    shape = tuple(ir_types.dims(ty)) if ir_types.is_static(ty) else None
                    crossings.append(Crossing(fname, name, to, shape, str(ty.dtype)))
    on_cpu = {f: names for f, names in on_cpu.items() if names}
    return Placement(on_cpu, used, tuple(crossings), tuple(no_gpu_build(mod)), plans, _functions(mod))


def _functions(mod: tvm.IRModule) -> dict:
    return {gv.name_hint: f for gv, f in mod.functions.items()}


def no_gpu_build(mod: tvm.IRModule) -> list:
    """What ``mod`` calls that TVM 0.27 cannot build for a GPU (:data:`NO_GPU_BUILD`), as a user knows it; look before
    legalizing, which leaves no trace of the op."""
    functions = [f for f in ir.module_given(mod, "no_gpu_build").functions.values() if isinstance(f, relax.Function)]
    return sorted({NO_GPU_BUILD[op] for f in functions for op in ir.ops_in(f, mod) if op in NO_GPU_BUILD})


def place(mod: tvm.IRModule, placement: Placement, gpu, cpu="llvm") -> tvm.IRModule:
    """``mod`` with two virtual devices, ``gpu`` first, and ``placement`` (:func:`propose`'s of ``mod``) written in.

    Bindings that run on the CPU read CPU copies of what the GPU made, and the other way round; each copy is made once,
    right after the tensor it copies (a constant's first). A module with nothing to place is returned as it is; one that
    names devices is refused.
    """
    if not isinstance(placement, Placement):
        raise WorkbenchError(f"place takes a Placement, got {type(placement).__name__}", "pass devices.propose(mod)")
    if ir.module_given(mod, "place").global_infos and "vdevice" in mod.global_infos:
        raise WorkbenchError("The module names its devices already (I.vdevice)", "pass it with no vdevice in its types")
    if is_gpu(cpu):  # swapped, the CPU-only ops were typed on the GPU and nothing noticed
        raise WorkbenchError(
            f"place takes the GPU's target, then the CPU's: got {gpu!r}, then {cpu!r}",
            "pass place(mod, placement, 'cuda'), the CPU (llvm) second; 'llvm' first places a CPU twin",
        )
    devices = [VDevice(resolve(gpu), 0, "global"), VDevice(resolve(cpu), 0, "global")]
    functions, seen = _functions(mod), placement.functions  # every function: a changed helper may call a CPU-only op
    if functions.keys() != seen.keys() or not all(f.same_as(seen[name]) for name, f in functions.items()):
        raise WorkbenchError("The placement was proposed for another module", "pass what devices.propose(mod) gave")
    if is_gpu(gpu):
        check_not_legalized(mod)
    if not placement:
        return mod
    editor = ir_edit.ModuleEditor(mod)
    for fname, plan in placement.plans.items():
        rewrite = _Rewrite(plan.cpu, plan.needed, {"gpu": devices[0], "cpu": devices[1]})
        editor.update(fname, rewrite.function(seen[fname], returns_to_gpu=fname != "main"))
    out = editor.finish()
    out.update_global_info("vdevice", devices)
    try:
        check_cpu_only_on_cpu(out)
    except WorkbenchError as err:  # the placement's own slip, not the user's (whom its Fix sends here): a bug
        raise RuntimeError(f"devices.place left an op on the GPU: {err.cause}") from None
    return out


def placed(mod: tvm.IRModule) -> bool:
    """Whether :func:`place` wrote two devices into ``mod``."""
    mod = ir.module_given(mod, "devices.placed")
    return len(mod.global_infos.get("vdevice", []) if mod.global_infos else []) > 1


def check_cpu_only_on_cpu(mod: tvm.IRModule) -> None:
    """Refuse, in one line, a :func:`placed` module that leaves an op of :data:`CPU_ONLY` on the GPU, in any function:
    TVM builds its kernel as device code without a word (a module placed by hand, or for another)."""
    if not placed(ir.module_given(mod, "devices.check_cpu_only_on_cpu")):
        raise WorkbenchError(
            "devices.check_cpu_only_on_cpu takes a placed module, and this one names no devices",
            "pass what devices.place(mod, devices.propose(mod), tvm_target) gives",
        )
    check = _Check(mod.global_infos["vdevice"][0].target.kind.name)
    for fname in ir.host_functions(mod):
        for step in ir.walk(mod[fname], mod, descend=False, name=fname):
            on_gpu = [d for d in check.where(step.var.ty) if is_gpu(d)] if step.op in CPU_ONLY else []
            if on_gpu:
                raise WorkbenchError(
                    f"The placed module runs {step.op.removeprefix('relax.')} in {fname} ({fname}/{step.var.name}) "
                    f"on {on_gpu[0]}, for which TVM 0.27 has no GPU kernel",
                    "pass the module as it was before placing, to be placed (devices.propose, then devices.place)",
                )


class _Rewrite:
    """One function's placement written in: CPU bindings retyped, copies made after what they copy."""

    def __init__(self, cpu: set, needed: dict, to: dict):
        self.cpu, self.needed, self.to = cpu, needed, to
        self.bb = relax.BlockBuilder()
        self.now: dict = {}  # handle -> the variable standing for it now (a CPU binding's, retyped)
        self.copies: dict = {}  # (handle, "cpu" | "gpu") -> its copy

    def function(self, func, returns_to_gpu: bool) -> relax.Function:
        params = items(func.params)
        constants = [v for v, _ in self.needed.values() if isinstance(v, tvm.ir.GenericConst)]  # read on the CPU
        head = [c for v in params + constants for c in self._copies_of(v, v.__chandle__())]
        body = self._seq(func.body, returns_to_gpu)
        if head:
            body = relax.SeqExpr([relax.BindingBlock(head), *items(body.blocks)], body.body)
        return relax.Function(params, body, self.bb.normalize(body.body).ty, func.is_pure, func.attrs)

    def _seq(self, seq: relax.SeqExpr, to_gpu: bool) -> relax.SeqExpr:
        """``seq`` rewritten in order, each If's branches where the If stands (they read what came before)."""
        blocks = []
        for block in items(seq.blocks):
            blocks.append(type(block)(self._block(items(block.bindings))))  # a dataflow block stays one
        gpu = {h: c for (h, dest), c in self.copies.items() if dest == "gpu"} if to_gpu else {}
        return relax.SeqExpr(blocks, ir_edit.substitute(seq.body, {**self.now, **gpu}))

    def _copies_of(self, var, handle) -> list:
        out = []
        for dest in sorted(self.needed.get(handle, (None, ()))[1]):
            self.copies[(handle, dest)] = self._copy(var, dest, out)
        return out

    def _copy(self, var, dest: str, out: list):
        """``var`` on ``dest``, by bindings appended to ``out``: a tuple is copied item by item (to_vdevice
        takes a tensor), what holds no tensor is left where it is."""
        if not _holds_tensor(var.ty):
            return var
        if isinstance(var.ty, relax.TensorType):
            value = self.bb.normalize(relax.op.to_vdevice(var, self.to[dest]))
        else:
            fields = []
            for i in range(len(var.ty.fields)):
                value = self.bb.normalize(relax.TupleGetItem(var, i))
                item = type(var)(f"{var.name}_{i}", value.ty)
                out.append(relax.VarBinding(item, value))
                fields.append(self._copy(item, dest, out))
            value = self.bb.normalize(relax.Tuple(fields))
        made = type(var) if ir.is_var(var) else relax.Var  # an output of its block stays one
        copy = made(f"{getattr(var, 'name', 'constant')}_to_{dest}", value.ty)
        out.append(relax.VarBinding(copy, value))
        return copy

    def _retyped(self, b, value) -> relax.Binding:
        """``b`` binding ``value``, typed on the CPU: a match_cast's type moved there too."""
        if type(b) is not relax.MatchCast:
            return relax.VarBinding(type(b.var)(b.var.name, value.ty), value)
        cast = _moved(b.ty, self.to["cpu"])
        return relax.MatchCast(type(b.var)(b.var.name, cast), value, cast)

    def _block(self, bindings: list) -> list:
        out = []
        for b in bindings:
            h = b.var.__chandle__()
            wants = "cpu" if (on_cpu := h in self.cpu) else "gpu"
            mapping = dict(self.now)
            for v in _tensor_reads(b.value) if type(b.value) is not relax.If else ():
                copy = self.copies.get((v.__chandle__(), wants))
                if copy is not None:
                    mapping[v.__chandle__()] = copy
            if type(b.value) is relax.If:
                v = b.value  # a branch's result is read on the GPU, as the If's own is
                branches = self._seq(v.true_branch, True), self._seq(v.false_branch, True)
                b = relax.VarBinding(b.var, relax.If(ir_edit.substitute(v.cond, mapping), *branches))
            elif on_cpu:
                constants = {k: c for (k, dest), c in self.copies.items() if dest == "cpu"}
                value = self.bb.normalize(_with_copies(ir_edit.substitute(b.value, mapping), constants))  # typed there
                b = self._retyped(b, value)
                self.now[h] = b.var
            elif isinstance(b, relax.MatchCast):
                b = relax.MatchCast(b.var, ir_edit.substitute(b.value, mapping), b.ty)
            else:
                b = relax.VarBinding(b.var, ir_edit.substitute(b.value, mapping, same_types=True))
            out.append(b)
            out.extend(self._copies_of(b.var, h))
        return out


def crossings(mod: tvm.IRModule) -> list:
    """Values read on another device than the one they live on, without a copy (empty for a sound placement),
    as ``"function/var: op reads x (llvm) on cuda"``.

    Every binding is checked, not only op calls: an op reads its tensors on the device of its result; an alias, a tuple,
    a tuple's item and a match_cast hold what they read where their type says; a function (a helper, a subgraph) reads
    its arguments where its parameters are and hands back its result where its return type says; an If holds its
    branches' results where its variable's type says.
    """
    if not placed(ir.module_given(mod, "crossings")):
        return []
    check = _Check(mod.global_infos["vdevice"][0].target.kind.name)
    for fname in ir.host_functions(mod):
        func = mod[fname]
        if fname != "main":  # main's results are read where they are made
            check.held(fname, "return", func.body.body, func.ret_ty)
        for step in ir.walk(func, mod, descend=False, name=fname):
            check.binding(f"{fname}/{step.var.name}", step)
    return check.found


class _Check:
    """:func:`crossings`'s findings, binding by binding; ``default`` is the device of a type that names none."""

    def __init__(self, default: str):
        self.default = default
        self.found: list = []

    def where(self, ty) -> list:
        """The device of each tensor a value of type ``ty`` holds, in order."""
        return [t.vdevice.target.kind.name if t.vdevice is not None else self.default for _, t in _tensors("", ty)]

    def held(self, at: str, what: str, expr, ty) -> None:
        """``expr`` (a variable or a tuple of them, as a binding reads it) held where ``ty`` says."""
        if isinstance(expr, relax.Tuple) and isinstance(ty, relax.TupleType):
            for field, field_ty in zip(expr.fields, ty.fields):
                self.held(at, what, field, field_ty)
        elif ir.is_var(expr) or isinstance(expr, tvm.ir.GenericConst):  # a constant: on the GPU, its type says
            self.same(at, what, getattr(expr, "name", "constant"), expr.ty, ty)

    def same(self, at: str, what: str, name: str, got_ty, ty) -> None:
        wrong = [(got, wants) for got, wants in zip(self.where(got_ty), self.where(ty)) if got != wants]
        if wrong:
            self.found.append(f"{at}: {what} reads {name} ({wrong[0][0]}) on {wrong[0][1]}")

    def binding(self, at: str, step) -> None:
        value, ty = step.value, step.var.ty
        if type(value) is relax.If:  # the VM reads its condition wherever it is
            for branch in (value.true_branch, value.false_branch):
                self.held(at, "if", branch.body, ty)
        elif step.op is not None:
            self.op(at, step)
        elif type(value) is relax.Call and isinstance(step.callee, relax.Function):
            for arg, param in zip(value.args, step.callee.params):
                self.held(at, ir.callee_name(value), arg, param.ty)
        elif type(value) is relax.TupleGetItem:
            tup = value.tuple_value
            self.same(at, "item", f"{tup.name}[{value.index}]", tup.ty.fields[value.index], ty)
        elif type(step.binding) is relax.MatchCast:
            self.held(at, "match_cast", value, ty)
        else:
            self.held(at, "alias" if ir.is_var(value) else "tuple", value, ty)

    def op(self, at: str, step) -> None:
        """An op reads its tensors on the device of its result (a copy, to_vdevice, is what may cross)."""
        own = set(self.where(step.var.ty))
        if step.op == "relax.to_vdevice" or len(own) != 1:
            return
        [device] = own
        for v in _tensor_reads(step.value) + _constants(step.value):
            for got in sorted(set(self.where(v.ty)) - own):
                self.found.append(f"{at}: {step.op} reads {getattr(v, 'name', 'constant')} ({got}) on {device}")
