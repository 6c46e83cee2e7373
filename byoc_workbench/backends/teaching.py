"""The teaching codegen: each offloaded subgraph becomes readable NumPy source.

It plays the part of a vendor codegen, and it is written the way an attendee
writes one (:mod:`.codegen`): a table of emitters, one NumPy expression per
Relax op. The workbench walks each subgraph, assembles the function, executes
it and registers it as a packed function, which is what a C++ BYOC runtime
module would provide. The host module then calls it with ``R.call_dps_packed``;
the output buffers come last in the argument list.

It is the ``byoc-target``'s own codegen (``Codegen="byoc_target"``), and
``registry.register_ext("teaching", "byoc_target")`` registers it as
``relax.ext.byoc_target``, so upstream ``relax.transform.RunCodegen`` can drive
it on graphs without control flow.
"""

from __future__ import annotations

from byoc_workbench.backends.emit import make_codegen
from byoc_workbench.backends.planner import Op
from byoc_workbench.core.errors import WorkbenchError

_BINARY = {
    "relax.add": "np.add",
    "relax.subtract": "np.subtract",
    "relax.multiply": "np.multiply",
    "relax.divide": "np.divide",
    "relax.maximum": "np.maximum",
    "relax.minimum": "np.minimum",
    "relax.matmul": "np.matmul",
}
_UNARY = {
    "relax.nn.relu": "np.maximum({0}, 0)",
    "relax.exp": "np.exp({0})",
    "relax.tanh": "np.tanh({0})",
    "relax.negative": "np.negative({0})",
    "relax.sigmoid": "1 / (1 + np.exp(-{0}))",
}


def _binary(fn: str):
    return lambda op: f"{fn}({op.args[0]}, {op.args[1]})"


def _unary(template: str):
    return lambda op: template.format(op.args[0])


def reshape(op: Op) -> str:
    return f"np.reshape({op.args[0]}, {op.attrs['shape']})"


def expand_dims(op: Op) -> str:
    return f"np.expand_dims({op.args[0]}, axis={op.attrs['axis']})"


def permute_dims(op: Op) -> str:
    return f"np.transpose({op.args[0]}, {op.attrs['axes']})"


def split(op: Op) -> str:
    sections = op.attrs["indices_or_sections"]
    sections = list(sections) if isinstance(sections, tuple) else sections
    return f"tuple(np.split({op.args[0]}, {sections!r}, axis={op.attrs['axis']}))"


def conv2d(op: Op) -> str:
    a = op.attrs
    if a["data_layout"] != "NCHW" or a["kernel_layout"] != "OIHW":
        raise WorkbenchError(
            f"The teaching codegen only supports NCHW/OIHW conv2d, got {a['data_layout']}/{a['kernel_layout']}.",
            "convert the layout first (relax.transform.ConvertLayout) or switch the conv2d rules off.",
        )
    return (
        f"kernels.conv2d({op.args[0]}, {op.args[1]}, strides={a['strides']}, "
        f"padding={a['padding']}, dilation={a['dilation']}, groups={a['groups']})"
    )


EMITTERS = {
    **{op: _binary(fn) for op, fn in _BINARY.items()},
    **{op: _unary(t) for op, t in _UNARY.items()},
    "relax.reshape": reshape,
    "relax.expand_dims": expand_dims,
    "relax.permute_dims": permute_dims,
    "relax.split": split,
    "relax.nn.conv2d": conv2d,
}
SUPPORTED_OPS = frozenset(EMITTERS)

TEACHING = make_codegen("teaching", EMITTERS, "numpy", "readable NumPy source, run in Python (the seed's demo codegen)")
BACKEND = TEACHING.backend(native="byoc_target")  # the seed's demo target has a codegen of its own
