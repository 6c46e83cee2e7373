"""Each binding of an imported function named after the source node it came from.

Every importer (the MXNet one, ONNX, PyTorch) converts a graph node by node,
and each node's bindings are emitted while it is converted. So, walking the
nodes in order, a node owns the bindings after the previous node's, up to its
last output. Its output takes the node's own name, output k > 0
``<name>__out<k>`` and the inner bindings ``<name>__<k>``. The scopes in these
names (Gluon's block prefixes, ONNX's and PyTorch's module paths) are what
:mod:`byoc_workbench.draw.blocks` groups a diagram by.
"""

from __future__ import annotations

from tvm import relax


def binding_names(func: relax.Function, converted: list) -> dict[relax.Var, str]:
    """``{variable: name}`` for ``converted``, a list of ``(node name, [output expressions])`` in order."""
    bindings = [b for block in func.body.blocks for b in block.bindings]
    position = {b.var: i for i, b in enumerate(bindings)}
    names, start = {}, 0
    for name, outputs in converted:
        outs = [o for o in outputs if isinstance(o, relax.Var) and position.get(o, -1) >= start]
        if not outs:
            continue  # the node passed an earlier value on
        end = max(position[o] for o in outs)
        inner = 0
        for b in bindings[start : end + 1]:
            k = next((k for k, o in enumerate(outputs) if o.same_as(b.var)), None)
            if k is None:
                inner += 1
            names[b.var] = name if k == 0 else f"{name}__out{k}" if k is not None else f"{name}__{inner}"
        start = end + 1
    return names
