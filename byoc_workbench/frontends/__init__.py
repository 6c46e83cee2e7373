"""Frontends that turn models from other frameworks into Relax IRModules."""

from byoc_workbench.frontends.mxnet import (
    CONVERTERS,
    MXNetImportError,
    UnsupportedOperatorError,
    check_supported,
    find_unsupported,
    from_gluon,
    from_mxnet,
    op_inventory,
)
from byoc_workbench.frontends.mxnet_attrs import MXNetAttributeError
from byoc_workbench.frontends.mxnet_common import MXNetConversionError

__all__ = [
    "CONVERTERS",
    "MXNetAttributeError",
    "MXNetConversionError",
    "MXNetImportError",
    "UnsupportedOperatorError",
    "check_supported",
    "find_unsupported",
    "from_gluon",
    "from_mxnet",
    "op_inventory",
]
