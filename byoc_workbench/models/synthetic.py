"""A synthetic residual network of any size, for measuring the workbench at scale.

Each block is ``conv2d -> add (bias) -> relu -> add (the block's input)``, four
Relax ops, and blocks are grouped into stages of :data:`BLOCKS_PER_STAGE`. Every
binding is named with dotted scopes (``stage2.block17.relu``), as the ONNX and
PyTorch importers name theirs, so the diagrams group it into stages and blocks
the way they group a real model (:mod:`byoc_workbench.draw.blocks`);
:func:`flat_model` is the same chain with no names, as a model built by hand
has it, which the diagrams fold by structure instead
(:mod:`byoc_workbench.draw.structure`). Tensors
are small (1x4x8x8), so the time and memory measured are the workbench's own,
not TVM's kernels'.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax

from byoc_workbench.core import ir_edit

OPS_PER_BLOCK = 4
BLOCKS_PER_STAGE = 250  # a stage of 1,000 ops
CHANNELS = 4
SHAPE = (1, CHANNELS, 8, 8)


def residual_model(
    ops: int, blocks_per_stage: int = BLOCKS_PER_STAGE, seed: int = 0, named: bool = True
) -> tvm.IRModule:
    """A chain of ``ops // 4`` residual blocks (conv2d, bias add, relu, residual add) in one dataflow block.

    Parameters
    ----------
    ops : int
        How many Relax ops ``main`` calls (rounded down to a multiple of four; at least one block).
    blocks_per_stage : int
        Blocks per ``stage<k>`` scope.
    seed : int
        Seeds the weights (constants), so two calls give the same module.
    named : bool
        False: the bindings keep BlockBuilder's names (``lv12``), as a model built by hand
        has them: the diagrams find no blocks and fold by structure instead.
    """
    rng = np.random.RandomState(seed)
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(SHAPE, "float32"))
    names = {}  # BlockBuilder turns dots into underscores: the scopes are set afterwards
    with bb.function("main", [x]):
        with bb.dataflow():
            y = x
            for k in range(max(1, ops // OPS_PER_BLOCK)):
                scope = f"stage{k // blocks_per_stage}.block{k % blocks_per_stage}"
                w = relax.const(rng.randn(CHANNELS, CHANNELS, 3, 3).astype("float32") * 0.1)
                b = relax.const(rng.randn(1, CHANNELS, 1, 1).astype("float32") * 0.1)
                conv = bb.emit(relax.op.nn.conv2d(y, w, padding=1))
                biased = bb.emit(relax.op.add(conv, b))
                act = bb.emit(relax.op.nn.relu(biased))
                y = bb.emit(relax.op.add(y, act))
                names.update({conv: f"{scope}.conv", biased: f"{scope}.bias", act: f"{scope}.relu", y: f"{scope}.add"})
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    mod = bb.get()
    if not named:
        return mod
    names[out] = "out"
    mod["main"] = ir_edit.rename_vars(mod["main"], names)
    return mod


def flat_model(ops: int, seed: int = 0) -> tvm.IRModule:
    """:func:`residual_model` with no names: the same chain, its bindings ``lv``, ``lv1``, ..."""
    return residual_model(ops, seed=seed, named=False)


def model_source(ops: int) -> str:
    """A model file (for ``byoc-workbench stages FILE.py``) that defines ``mod`` as ``residual_model(ops)``."""
    return (
        f'"""A synthetic residual network of {ops} ops (byoc_workbench.models.synthetic)."""\n\n'
        "from byoc_workbench.models.synthetic import residual_model\n\n"
        f"mod = residual_model({ops})\n"
    )
