"""Every use of TVM's private API, each a small function standing in for a public one.

Two reasons to go around TVM's public API: its Python wrappers check and convert, in
Python, what the stages hand them right already (the hot paths read and build hundreds
of thousands of nodes on a rule toggle), and its importers offer no hook for what the
frontends add (names kept, converters fixed, one error listing every op refused).
Each function says which public API it stands in for; ``tests/unit/test_tvm_private.py``
checks each against that API, so a TVM upgrade that changes one fails there.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import relax

# Bound once: the functions below run on every node of a walk or a rebuild. (Iterating an FFI array
# costs about 1 µs an element against 0.4 through the FFI; relax.Call's constructor about 10 µs against
# its FFI function's 1; a 6,000-op toggle reads a quarter of a million elements and builds tens of
# thousands of nodes.)
_array_size, _array_item = tvm_ffi._ffi_api.ArraySize, tvm_ffi._ffi_api.ArrayGetItem
_make_call = tvm.ir._ffi_api.Call
_make_var, _make_dataflow_var = tvm.ir._ffi_api.Var, relax._ffi_api.DataflowVar
_update_type = relax._ffi_api.UpdateType


def items(seq) -> list:
    """The elements of an FFI array (a block's bindings, a call's arguments...) as a list.

    Stands in for ``list(seq)``: iterating an FFI array bounds-checks each index in Python,
    at more than twice the cost of reading the element through the FFI.
    """
    if type(seq) is not tvm_ffi.Array:
        return list(seq)
    n = _array_size(seq)
    if n < 2:  # most are: a composite's one binding, a block of one
        return [_array_item(seq, 0)] if n else []
    return [_array_item(seq, i) for i in range(n)]


def new_call(op, args: list, ty, attrs=None, ty_args=()) -> relax.Call:
    """A call of the known type ``ty``, which it keeps (nothing is inferred).

    Stands in for ``relax.Call(op, args, attrs, ty_args, ret_ty=ty)``, whose Python checks
    cost an order of magnitude more than the FFI constructor it ends in.
    """
    return _make_call(ty, op, args, attrs, ty_args, None)


def new_var(name: str, ty, dataflow: bool = True):
    """A new variable of the type ``ty``.

    Stands in for ``relax.DataflowVar(name, ty)`` (or ``relax.Var(name, ty)``), whose Python
    checks and conversion of ``ty`` cost several times the FFI constructor.
    """
    return (_make_dataflow_var if dataflow else _make_var)(name, ty, None)


def set_type(expr, ty) -> None:
    """Give ``expr``, just built, the type ``ty`` in place (a GlobalVar its function's type).

    Stands in for ``relax.BlockBuilder().normalize(expr)`` (``add_func`` for a GlobalVar),
    which infers the type the caller knows already: inferring is most of ``Normalize``'s time.
    """
    _update_type(expr, ty)


def end_block(bb: relax.BlockBuilder) -> None:
    """Close the binding block a failed build left open in ``bb``.

    Stands in for what ``bb.emit_func_output`` does on the way out of ``bb.function``: an error
    raised inside ``with bb.dataflow()`` leaves a block open, and TVM prints a warning when the
    builder goes with it. No public call closes it.
    """
    bb._end_block()


def onnx_importer_base() -> type:
    """TVM's ONNX importer class with its two private hooks under public names.

    Stands in for ``relax.frontend.onnx.from_onnx``, which offers no hook. ``check_ops(graph)``
    runs before any node converts (upstream's refuses the first unknown op); ``convert(op_name,
    inputs, attrs, opset)`` converts each node (upstream's names no binding after its node).
    A subclass overrides them and calls ``super()``'s for upstream's behaviour.
    """
    from tvm.relax.frontend.onnx import onnx_frontend

    class Importer(onnx_frontend.ONNXGraphImporter):
        def check_ops(self, graph) -> None:
            super()._check_for_unsupported_ops(graph)

        def convert(self, op_name, inputs, attrs, opset):
            return super()._convert_operator(op_name, inputs, attrs, opset)

        def _check_for_unsupported_ops(self, graph):
            self.check_ops(graph)

        def _convert_operator(self, op_name, inputs, attrs, opset):
            return self.convert(op_name, inputs, attrs, opset)

    return Importer


def onnx_converters() -> set:
    """The ONNX op types TVM's ONNX frontend converts (``If`` and ``Constant`` it handles itself).

    Stands in for trying ``relax.frontend.onnx.from_onnx``, which names only the ops refused,
    and only after its own checks; no public call lists them.
    """
    from tvm.relax.frontend.onnx import onnx_frontend

    return set(onnx_frontend._get_convert_map()) | {"If", "Constant"}


def onnx_node_name(attrs: dict) -> str:
    """The name of the ONNX node whose ``attrs`` :meth:`onnx_importer_base`'s ``convert`` is given.

    Stands in for nothing public: TVM's ONNX frontend passes the node's name to converters
    only inside the attributes, under its own key.
    """
    return attrs.get("tvm_custom", {}).get("name", "")


def torch_importer_base() -> type:
    """TVM's importer of exported PyTorch programs with its op check under a public name.

    Stands in for ``relax.frontend.torch.from_exported_program``, which offers no hook.
    ``check_ops(nodes)`` runs before any node converts (upstream's asserts on the ops it
    has no converter for); a subclass overrides it. ``create_convert_map``, ``convert_map``
    and ``block_builder`` are the importer's own public names.
    """
    from tvm.relax.frontend.torch.exported_program_translator import ExportedProgramImporter

    class Importer(ExportedProgramImporter):
        def check_ops(self, nodes) -> None:
            super()._check_unsupported_func_type(nodes)

        def _check_unsupported_func_type(self, nodes):
            self.check_ops(nodes)

    return Importer
