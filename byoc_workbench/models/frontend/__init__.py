"""Frontends that turn models from other frameworks into Relax IRModules."""

from .mxnet import (
    CONVERTERS,
    MXNetImportError,
    UnsupportedOperatorError,
    check_supported,
    find_unsupported,
    from_gluon,
    from_mxnet,
    op_inventory,
)

__all__ = [
    "CONVERTERS",
    "MXNetImportError",
    "UnsupportedOperatorError",
    "check_supported",
    "find_unsupported",
    "from_gluon",
    "from_mxnet",
    "op_inventory",
]
