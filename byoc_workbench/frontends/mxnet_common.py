"""Small helpers shared by the MXNet converter modules."""

from __future__ import annotations

from tvm import relax

from byoc_workbench.core.errors import WorkbenchError

EXTEND_FIX = "extend the converter in byoc_workbench.frontends, or change the model"


class MXNetImportError(WorkbenchError):
    """The symbol, its params or the input shapes cannot be imported."""


class MXNetConversionError(MXNetImportError):
    """An op's attributes ask for something the converter does not implement."""


def shape_of(expr) -> tuple[int, ...]:
    """Static shape of a normalized Relax expression, as ints."""
    return tuple(int(d) for d in expr.ty.shape)


def dtype_of(expr) -> str:
    """Dtype of a normalized Relax expression, as a string such as ``"float32"``."""
    dtype = expr.ty.dtype
    # TVM 0.27 gives a PrimType here; numpy would misread it.
    return str(getattr(dtype, "dtype", dtype))


def scalar_like(value, like) -> relax.Constant:
    """A 0-d constant of ``like``'s dtype; MXNet casts scalars to the tensor's type."""
    return relax.const(value, dtype_of(like))


def unsupported(attrs, what: str, fix: str = EXTEND_FIX):
    """Raise the error for an attribute value the converter does not cover."""
    raise MXNetConversionError(f"Node {attrs.node!r}: {what} is not supported", fix)


def spatial(attrs, key: str, rank: int, default: int) -> tuple[int, ...]:
    """A per-axis attribute (``stride``, ``pad``, ``dilate``) with one entry per spatial axis.

    MXNet writes ``()`` or leaves the attribute out for its default; any other length
    would reach TVM as a padding or stride of the wrong rank.
    """
    value = attrs.tuple(key) or (default,) * rank
    if len(value) != rank:
        unsupported(attrs, f"{key}={value} with a {rank}-d kernel")
    return tuple(int(v) for v in value)


def norm_axis(axis: int, ndim: int) -> int:
    """A non-negative axis index."""
    return axis + ndim if axis < 0 else axis
