"""Low-level IR transforms the flows need before their patterns can match.

Upstream's TensorRT pattern table has no batch_norm, so an imported graph is
first put in the form its patterns expect: each inference batch norm with
constant statistics becomes a multiply and an add by constants, and the
tuple plumbing batch norm leaves behind is removed.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax

from . import ir


def _const(expr):
    if isinstance(expr, tvm.ir.expr.Constant) and hasattr(expr.value, "numpy"):
        return expr.value.numpy()
    return None


def _fold_one(binding, is_df):
    """``[bindings]`` computing a batch norm with constant statistics as ``x * scale + shift``."""
    call = binding.value
    x, gamma, beta, mean, var = call.args
    values = [_const(a) for a in (gamma, beta, mean, var)]
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
    takes 14 s on SSD-ResNet50, this takes milliseconds.
    """

    def fold(binding, is_df):
        v = binding.value
        if isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.Op) and v.op.name == "relax.nn.batch_norm":
            return _fold_one(binding, is_df)
        return None

    return ir.map_bindings(mod, fold)


def prepare(mod: tvm.IRModule) -> tvm.IRModule:
    """Fold batch norm, decompose what is left of it, and drop tuple plumbing."""
    return tvm.transform.Sequential(
        [
            relax.transform.DecomposeOpsForInference(),
            relax.transform.CanonicalizeBindings(),
            relax.transform.DeadCodeElimination(),
        ]
    )(fold_batch_norm(mod))
