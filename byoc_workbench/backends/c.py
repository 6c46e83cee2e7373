"""The ``c`` codegen: each offloaded subgraph becomes plain C loops, compiled by the system's C compiler.

Upstream's own example of a source codegen (``CodegenC``, ``example_npu``)
emits C for each subgraph and compiles it into a library the host calls; this
is the same on Relax, written as a table of emitters (:mod:`.codegen`), one
function per Relax op, each returning the C statements for one call. No
library is used: conv2d is a loop nest, elementwise ops are one loop with
NumPy broadcasting (:meth:`Op.index`), reshapes are copies.

The emitters are public, so an attendee's own C codegen can take some of them
(``emit={"conv2d": c.conv2d, "relu": my_relu}``).
"""

from __future__ import annotations

import dataclasses

from byoc_workbench.backends.emit import make_codegen
from byoc_workbench.backends.planner import Op
from byoc_workbench.core.errors import WorkbenchError

_BINARY = {
    "relax.add": "{a} + {b}",
    "relax.subtract": "{a} - {b}",
    "relax.multiply": "{a} * {b}",
    "relax.divide": "{a} / {b}",
    "relax.maximum": "{a} > {b} ? {a} : {b}",
    "relax.minimum": "{a} < {b} ? {a} : {b}",
}
# {x} is the input element, {t} the C type, {f} "f" for float (expf) or "" for double (exp).
_UNARY = {
    "relax.nn.relu": "{x} > ({t})0 ? {x} : ({t})0",
    "relax.negative": "-{x}",
    "relax.exp": "exp{f}({x})",
    "relax.tanh": "tanh{f}({x})",
    "relax.sigmoid": "({t})1 / (({t})1 + exp{f}(-{x}))",
}


def binary(op: Op) -> str:
    """An elementwise op on two inputs, broadcast as NumPy does: one loop over the output."""
    a, b = op.args
    expr = _BINARY[op.op].format(a=f"{a}[{op.index(0)}]", b=f"{b}[{op.index(1)}]")
    return f"for (long i = 0; i < {op.size}; ++i) {op.out}[i] = {expr};"


def unary(op: Op) -> str:
    """An elementwise op on one input."""
    if op.op in ("relax.exp", "relax.tanh", "relax.sigmoid") and op.dtype not in ("float32", "float64"):
        raise WorkbenchError(
            f"The c codegen computes {op.op} in floating point only, got {op.dtype}", "keep it on the host"
        )
    expr = _UNARY[op.op].format(x=f"{op.args[0]}[i]", t=op.ctype, f="f" if op.dtype == "float32" else "")
    return f"for (long i = 0; i < {op.size}; ++i) {op.out}[i] = {expr};"


def copy(op: Op) -> str:
    """reshape, expand_dims, squeeze, flatten: the same elements in the same order."""
    return f"memcpy({op.out}, {op.args[0]}, sizeof({op.ctype}) * {op.size});"


def permute_dims(op: Op) -> str:
    """A transpose: each output element reads the input at its permuted coordinates."""
    shape = op.shapes[0]
    axes = op.attrs.get("axes") or tuple(reversed(range(len(shape))))
    in_strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        in_strides[d] = in_strides[d + 1] * shape[d + 1]
    terms, out_stride = [], 1
    for d in range(len(op.shape) - 1, -1, -1):
        pos = "i" if out_stride == 1 else f"i / {out_stride}"
        terms.append(f"({pos} % {op.shape[d]}) * {in_strides[axes[d]]}")
        out_stride *= op.shape[d]
    return f"for (long i = 0; i < {op.size}; ++i) {op.out}[i] = {op.args[0]}[{' + '.join(reversed(terms))}];"


def _affine(out: str, stride: int, pad: int, tap: str, dilation: int) -> str:
    """``out * stride - pad + tap * dilation``, without the factors of 1 and the zero pad."""
    text = (out if stride == 1 else f"{out} * {stride}") + (f" - {pad}" if pad else "")
    return f"{text} + {tap if dilation == 1 else f'{tap} * {dilation}'}"


def conv2d(op: Op, relu: bool = False) -> str:
    """NCHW data, OIHW weights, any strides, padding, dilation and groups: a plain loop nest.

    The innermost loop runs along an output row, over the columns whose input
    column lies inside the picture (no test per element), so the compiler can
    vectorise it. ``relu=True`` applies relu to the result (a fused emitter).
    """
    a = op.attrs
    if a["data_layout"] != "NCHW" or a["kernel_layout"] != "OIHW" or a.get("out_layout", "NCHW") != "NCHW":
        raise WorkbenchError(
            f"The c codegen only supports NCHW/OIHW conv2d, got {a['data_layout']}/{a['kernel_layout']}",
            "convert the layout first (relax.transform.ConvertLayout) or switch the conv2d rules off",
        )
    (n, cin, h, w), (cout, cg, kh, kw) = op.shapes
    _, _, oh, ow = op.shape
    (sh, sw), (dh, dw), (pt, pl) = a["strides"], a["dilation"], a["padding"][:2]
    t, x, wt, out, groups = op.ctype, op.args[0], op.args[1], op.out, a["groups"]
    row, col = _affine("oh", sh, pt, "kh", dh), _affine("ow", sw, pl, "kw", dw)
    first, last = _affine("ow0", sw, pl, "kw", dw), _affine("(ow1 - 1)", sw, pl, "kw", dw)
    # the first input channel the output channel's group reads
    first_channel = f"(b * {cin} + oc / {cout // groups} * {cg}) * {h * w}" if groups > 1 else f"b * {cin * h * w}"
    finish = f"\nfor (long k = 0; k < {n * cout * oh * ow}; ++k) {out}[k] = {out}[k] > 0 ? {out}[k] : 0;"
    return f"""\
/* out[b][oc][oh][ow] = sum over ic < {cg}, kh < {kh}, kw < {kw} of
     w[oc][ic][kh][kw] * x[b][{"the group's " if groups > 1 else ""}ic][{row}][{col}] */
for (long b = 0; b < {n}; ++b)
  for (long oc = 0; oc < {cout}; ++oc) {{
    {t}* o = {out} + (b * {cout} + oc) * {oh * ow};
    const {t}* xg = {x} + {first_channel};
    for (long k = 0; k < {oh * ow}; ++k) o[k] = 0;
    for (long ic = 0; ic < {cg}; ++ic)
      for (long kh = 0; kh < {kh}; ++kh)
        for (long kw = 0; kw < {kw}; ++kw) {{
          const {t} wv = {wt}[((oc * {cg} + ic) * {kh} + kh) * {kw} + kw];
          const {t}* xc = xg + ic * {h * w};
          long ow0 = 0, ow1 = {ow};  /* the output columns whose input column is inside the row */
          while (ow0 < ow1 && {first} < 0) ++ow0;
          while (ow1 > ow0 && {last} >= {w}) --ow1;
          for (long oh = 0; oh < {oh}; ++oh) {{
            const long ih = {row};
            if (ih < 0 || ih >= {h}) continue;
            for (long ow = ow0; ow < ow1; ++ow) o[oh * {ow} + ow] += wv * xc[ih * {w} + {col}];
          }}
        }}
  }}""" + (finish if relu else "")


def conv2d_bias_relu(op: Op) -> str:
    """A fused emitter for the ``conv2d_bias_relu`` composite: the convolution, then bias and relu in
    one pass over the output, where op by op would take two passes and two intermediates."""
    conv = op.ops[0]
    body = conv2d(dataclasses.replace(conv, out=op.out, args=op.args[:2], shape=op.shape))
    _, cout, oh, ow = op.shape
    out, b = op.out, op.args[2]
    bias = f"for (long i = 0; i < {op.size}; ++i) {{ {op.ctype} v = {out}[i] + {b}[i / {oh * ow} % {cout}]; "
    return body + "\n" + bias + f"{out}[i] = v > 0 ? v : 0; }}"


EMITTERS = {
    **{name: binary for name in _BINARY},
    **{name: unary for name in _UNARY},
    "relax.reshape": copy,
    "relax.expand_dims": copy,
    "relax.squeeze": copy,
    "relax.flatten": copy,
    "relax.permute_dims": permute_dims,
    "relax.nn.conv2d": conv2d,
}

C = make_codegen("c", EMITTERS, "c", "plain C loops, compiled by the system's C compiler (no library)")
BACKEND = C.backend()
