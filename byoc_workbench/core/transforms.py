"""Low-level IR transforms the flows need before their patterns can match.

Upstream's TensorRT pattern table has no batch_norm, so an imported graph is
first put in the form its patterns expect: each inference batch norm with
constant statistics becomes a multiply and an add by constants, and the
tuple plumbing batch norm leaves behind is removed. :func:`prepare_step`
does this as a named step that says how the op count changed, so a reader
sees why the 654 ops of an import become more on screen.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import NamedTuple

import numpy as np
import tvm
from tvm import relax

from byoc_workbench.core import ir, ir_edit

PREPARED = "byoc_workbench.prepare"  # the module attribute holding what prepare did

# MXNet's fix_gamma=True multiplies by 1, which the importer writes as ones_like(gamma).
_FILLS = {"relax.ones_like": np.ones_like, "relax.zeros_like": np.zeros_like}


def _const(expr, bound: dict):
    """The NumPy value of a constant, or of a variable bound to ``ones_like``/``zeros_like`` of one."""
    if isinstance(expr, tvm.ir.expr.Constant) and hasattr(expr.value, "numpy"):
        return expr.value.numpy()
    value = bound.get(expr) if ir.is_var(expr) else None
    if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op) and value.op.name in _FILLS:
        inner = _const(value.args[0], bound)
        return None if inner is None else _FILLS[value.op.name](inner)
    return None


def _fold_one(binding, is_df, bound):
    """``[bindings]`` computing a batch norm with constant statistics as ``x * scale + shift``."""
    call = binding.value
    x, gamma, beta, mean, var = call.args
    values = [_const(a, bound) for a in (gamma, beta, mean, var)]
    if any(v is None for v in values):
        return None
    g, b, m, v = (a.astype("float64") for a in values)
    attrs = call.attrs
    g = g if attrs.scale else np.ones_like(g)
    b = b if attrs.center else np.zeros_like(b)
    scale = g / np.sqrt(v + float(attrs.epsilon))
    shift = b - m * scale
    ndim = len(x.ty.shape.values)
    axis = int(attrs.axis) % ndim
    shape = [1] * ndim
    shape[axis] = -1
    dtype = str(x.ty.dtype)
    var_cls = relax.DataflowVar if is_df else relax.Var
    mul_var = var_cls(f"{binding.var.name}_scaled", x.ty)
    out_var = var_cls(f"{binding.var.name}_bn", x.ty)
    return [
        relax.VarBinding(mul_var, relax.op.multiply(x, relax.const(scale.reshape(shape).astype(dtype)))),
        relax.VarBinding(out_var, relax.op.add(mul_var, relax.const(shift.reshape(shape).astype(dtype)))),
        relax.VarBinding(binding.var, relax.Tuple([out_var, mean, var])),
    ]


def fold_batch_norm(mod: tvm.IRModule) -> tvm.IRModule:
    """Each ``nn.batch_norm`` with constant statistics as a multiply and an add.

    The same algebra as ``DecomposeOpsForInference`` + ``FoldConstant``, done in
    NumPy: FoldConstant compiles every constant sub-expression with TVM and
    takes 14 s on SSD-ResNet50, this takes milliseconds. A gamma written as
    ``ones_like`` of a constant (MXNet's ``fix_gamma``) counts as constant.
    """
    bound = {s.var: s.value for name in ir.host_functions(mod) for s in ir.walk(mod[name], mod, descend=False)}

    def fold(binding, is_df):
        v = binding.value
        if isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.Op) and v.op.name == "relax.nn.batch_norm":
            return _fold_one(binding, is_df, bound)
        return None

    return ir_edit.map_bindings(mod, fold)


def _cleanup(mod: tvm.IRModule) -> tvm.IRModule:
    return tvm.transform.Sequential(
        [
            relax.transform.DecomposeOpsForInference(),
            relax.transform.CanonicalizeBindings(),
            relax.transform.DeadCodeElimination(),
        ]
    )(mod)


def prepare(mod: tvm.IRModule) -> tvm.IRModule:
    """Fold batch norm, decompose what is left of it, and drop tuple plumbing."""
    return prepare_step(mod).mod


def op_counts(mod: tvm.IRModule) -> collections.Counter:
    """How many calls to each Relax op the host functions make (composites included)."""
    return collections.Counter(op for name in ir.host_functions(mod) for op in ir.ops_in(mod[name], mod))


@dataclasses.dataclass
class PrepareStep:
    """What :func:`prepare` did: the step before the BYOC stages, with its op counts."""

    before: collections.Counter  # op -> count in the imported module
    folded: collections.Counter  # after batch-norm folding
    after: collections.Counter  # after decomposing and removing dead code
    name: str = "prepare"

    @property
    def op_count_before(self) -> int:
        return sum(self.before.values())

    @property
    def op_count(self) -> int:
        return sum(self.after.values())

    @property
    def notes(self) -> list:
        """One line per change, then the count: ``fold batch norm: 61 nn.batch_norm -> ...``.

        ASCII only: the lines also travel in the module's attributes, which TVMScript prints.
        """
        lines = []
        fold = _delta(self.before, self.folded)
        if fold:
            lines.append(f"fold batch norm (x * scale + shift): {fold}")
        rest = _delta(self.folded, self.after)
        if rest:
            what = "decompose what is left" if _changed(self.folded, self.after, 1) else "drop dead code"
            lines.append(f"{what}: {rest}")
        lines.append(f"{self.op_count_before} Relax ops from the importer -> {self.op_count} at the source stage")
        return [f"{self.name}: {line}" for line in lines]

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "op_count_before": self.op_count_before,
            "op_count": self.op_count,
            "ops_removed": _changed(self.before, self.after, -1),
            "ops_added": _changed(self.before, self.after, 1),
            "notes": self.notes,
        }


def _changed(a: collections.Counter, b: collections.Counter, sign: int) -> dict:
    return {op: sign * (b[op] - a[op]) for op in sorted(set(a) | set(b)) if sign * (b[op] - a[op]) > 0}


def _delta(a: collections.Counter, b: collections.Counter) -> str:
    """``61 nn.batch_norm -> 61 add + 61 multiply``: what left and what came."""

    def text(counts):
        return " + ".join(f"{n} {op.replace('relax.', '', 1)}" for op, n in counts.items())

    gone, came = _changed(a, b, -1), _changed(a, b, 1)
    if not came:
        return text(gone)
    return f"{text(gone) or 'nothing'} -> {text(came)}"


class Prepared(NamedTuple):
    """The prepared module and the :class:`PrepareStep` saying what preparing it changed."""

    mod: tvm.IRModule
    step: PrepareStep


def prepare_step(mod: tvm.IRModule) -> Prepared:
    """``(prepared module, PrepareStep)``: :func:`prepare`, and what it changed.

    The prepared module carries the step's record as the module attribute
    :data:`PREPARED`, so whatever draws its stages can say where its op count came from.
    """
    folded = fold_batch_norm(mod)
    out = _cleanup(folded)
    step = PrepareStep(op_counts(mod), op_counts(folded), op_counts(out))
    return Prepared(out.with_attr(PREPARED, step.to_json()), step)


def prepared(mod: tvm.IRModule) -> dict | None:
    """The record :func:`prepare_step` left on ``mod`` (plain Python values), or None."""
    if mod.attrs is None or PREPARED not in mod.attrs:
        return None
    return _plain(mod.attrs[PREPARED])


def _plain(value):
    if isinstance(value, (str, int, float)):
        return value
    if hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in value.items()}
    return [_plain(v) for v in value]
