"""Small helpers shared by the MXNet converter modules."""

from __future__ import annotations

from tvm import relax


class MXNetConversionError(ValueError):
    """An op's attributes ask for something the converter does not implement."""


def shape_of(expr) -> tuple[int, ...]:
    """Static shape of a normalized Relax expression, as ints."""
    return tuple(int(d) for d in expr.ty.shape)


def dtype_of(expr) -> str:
    """Dtype of a normalized Relax expression, as a string such as ``"float32"``."""
    dtype = expr.ty.dtype
    # TVM 0.27 gives a PrimType here; numpy would misread it.
    return str(getattr(dtype, "dtype", dtype))


def scalar(value, like) -> relax.Constant:
    """A 0-d constant of ``like``'s dtype; MXNet casts scalars to the tensor's type."""
    return relax.const(value, dtype_of(like))


def unsupported(attrs, what: str):
    """Raise the error for an attribute value the converter does not cover."""
    raise MXNetConversionError(
        f"node {attrs.node!r}: {what} is not supported — extend the converter in byoc_workbench.models.frontend"
    )


def norm_axis(axis: int, ndim: int) -> int:
    """A non-negative axis index."""
    return axis + ndim if axis < 0 else axis
