"""What tests of two tiers share: Python or the CLI run in a process of its own, a small detector tail (the GPU
placement's and the torch backend's), the signature two modules are compared by (the fusion's and the SSD's
stages), and the ranks of a drawn box's rows."""

import collections
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import tvm_ffi
from tvm.script import ir as I
from tvm.script import relax as R

from byoc_workbench.core import ir
from byoc_workbench.draw.graph import Graph

#: The non-maximum suppression of the detector tails here and in test_devices_placement.py.
NMS = dict(
    max_output_size=-1,
    iou_threshold=0.5,
    force_suppress=False,
    top_k=20,
    coord_start=2,
    score_index=1,
    id_index=0,
    return_indices=False,
    invalid_to_bottom=True,
)


@I.ir_module
class Tail:
    @R.function
    def main(boxes: R.Tensor((1, 64, 6), "float32"), bias: R.Tensor((1, 10, 6), "float32")):
        with R.dataflow():
            scaled = R.multiply(boxes, R.const(1.5, "float32"))
            counted = R.vision.get_valid_counts(scaled, score_threshold=0.2, id_index=0, score_index=1)
            count = counted[0]
            valid = counted[1]
            order = counted[2]
            kept = R.vision.non_max_suppression(valid, count, order, **NMS)
            top = R.strided_slice(kept, axes=[1], begin=[0], end=[10])
            shifted = R.add(top, bias)
            R.output(top, shifted)
        return (top, shifted)


def tail_inputs(seed=0):
    rng = np.random.RandomState(seed)
    b = rng.uniform(0, 1, (1, 64, 6)).astype("float32")
    b[..., 0] = rng.randint(0, 3, 64)  # class ids
    b[..., 4:] += b[..., 2:4]  # x2, y2 past x1, y1
    return [b, rng.uniform(-1, 1, (1, 10, 6)).astype("float32")]


def signature(mod):
    """Per binding of main: its name, what it calls (op or Composite name), its arguments and type;
    and each called composite's body, so two modules compare whatever their functions are named."""
    rows = []
    for s in ir.walk(mod["main"], mod, descend=False):
        what = s.op or ir.func_attr(s.callee, ir.COMPOSITE) or type(s.value).__name__
        args = tuple(a.name if ir.is_var(a) else "const" for a in getattr(s.value, "args", ()))
        rows.append((s.var.name, what, args, str(s.var.ty), s.callee))
    return rows


def same(a, b) -> bool:
    sa, sb = signature(a), signature(b)
    return len(sa) == len(sb) and all(
        x[:4] == y[:4] and (x[4] is None) == (y[4] is None) and (x[4] is None or tvm_ffi.structural_equal(x[4], y[4]))
        for x, y in zip(sa, sb)
    )


def ranks_with_rows(g: Graph, cluster: str) -> collections.Counter:
    """How many of ``cluster``'s nodes share each rank, counting the rows ``below`` asks for."""
    nodes = [nid for nid, n in g.nodes.items() if n.cluster == cluster]
    inside = set(nodes)
    preds = collections.defaultdict(list)
    for a, b in [(e.src, e.dst) for e in g.edges] + list(g.below):
        if a in inside and b in inside:
            preds[b].append(a)
    rank: dict = {}

    def r(n):
        if n not in rank:
            rank[n] = 1 + max((r(p) for p in preds[n]), default=-1)
        return rank[n]

    return collections.Counter(r(n) for n in nodes)


def python_output(code: str) -> str:
    """What ``python -c code`` prints, run in a process of its own (what it imported is its own)."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


ROOT = Path(__file__).resolve().parents[1]


def run_cli(argv, cwd, **streams) -> subprocess.CompletedProcess:
    """``byoc-workbench argv`` run in a process of its own, in ``cwd``, stdin empty unless ``streams`` (as for
    :func:`subprocess.run`) say otherwise."""
    return subprocess.run(
        [sys.executable, str(ROOT / "byoc_workbench_cli.py"), *map(str, argv)],
        **{"stdin": subprocess.DEVNULL, **streams},
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )


def run_cli_closed(fd: int, argv, cwd) -> subprocess.CompletedProcess:
    """:func:`run_cli` with stdout (``fd`` 1, ``>&-``) or stderr (2, ``2>&-``) closed; the other one captured, as
    text."""
    other = {1: "stderr", 2: "stdout"}[fd]
    return run_cli(argv, cwd, text=True, preexec_fn=lambda: os.close(fd), **{other: subprocess.PIPE})


def relu_onnx(path):
    """``path`` written as an ONNX file of one Relu on a 1x4 input (no rule of the teaching target claims it).
    onnx is imported here: make test-oldest runs Part 1's tests, which import this file, without it."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path
