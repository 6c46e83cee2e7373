"""tvm_private: each use of TVM's private API against the public API it stands in for.

A TVM upgrade that renames or changes one of them fails here, not somewhere in a stage.
"""

import pytest
import tvm
import tvm_ffi
from tvm import relax

from byoc_workbench.core import tvm_private
from byoc_workbench.core.ir_edit import typed


def first_call(mod):
    func = mod["main"]
    return next(b.value for b in tvm_private.items(func.body.blocks[0].bindings) if isinstance(b.value, relax.Call))


def test_items_lists_an_ffi_array_as_iterating_it_does(demo_mod):
    func = demo_mod["main"]
    assert [p.same_as(q) for p, q in zip(tvm_private.items(func.params), list(func.params))] == [True] * len(
        func.params
    )
    call = first_call(demo_mod)
    for seq in (call.args, func.body.blocks, relax.Tuple([]).fields, [1, 2]):
        assert len(tvm_private.items(seq)) == len(seq) and all(
            (a.same_as(b) if hasattr(a, "same_as") else a == b) for a, b in zip(tvm_private.items(seq), seq)
        )


def test_new_call_builds_what_relax_call_builds_with_its_type_kept(demo_mod):
    call = first_call(demo_mod)
    built = tvm_private.new_call(call.op, list(call.args), call.ty, call.attrs, call.ty_args)
    assert built.ty.same_as(call.ty) and built.op.same_as(call.op)
    wrapped = typed(relax.Call(call.op, list(call.args), call.attrs, call.ty_args), call.ty)
    assert tvm_ffi.structural_equal(built, wrapped) and tvm_ffi.structural_equal(built, call)
    public = relax.Call(call.op, list(call.args), call.attrs, call.ty_args, ret_ty=call.ty)
    assert type(built) is type(public) and tvm_ffi.structural_equal(built, public)
    assert tvm_ffi.structural_equal(built.ty, public.ty)


def test_new_var_builds_what_relax_var_and_dataflow_var_build():
    ty = relax.TensorType((1, 2), "float32")
    x, y = tvm_private.new_var("x", ty, dataflow=False), tvm_private.new_var("y", ty)
    assert type(x) is relax.Var and type(y) is relax.DataflowVar and x.name == "x" and x.ty.same_as(ty)
    for ours, public in ((x, relax.Var("x", ty)), (y, relax.DataflowVar("y", ty))):
        assert type(ours) is type(public) and ours.name == public.name
        assert tvm_ffi.structural_equal(ours, public, map_free_vars=True)
        assert tvm_ffi.structural_equal(ours.ty, public.ty)


def test_set_type_gives_the_type_normalize_infers(demo_mod):
    call = first_call(demo_mod)
    bare = relax.Call(call.op, list(call.args), call.attrs, call.ty_args)
    assert type(bare.ty) is tvm.ir.Type  # not inferred yet
    inferred = relax.BlockBuilder().normalize(relax.Call(call.op, list(call.args), call.attrs, call.ty_args))
    tvm_private.set_type(bare, inferred.ty)
    assert tvm_ffi.structural_equal(bare.ty, inferred.ty) and tvm_ffi.structural_equal(bare, inferred)
    # A GlobalVar gets its function's type, as BlockBuilder.add_func gives it.
    func = demo_mod["main"]
    gv = tvm.ir.GlobalVar("main")
    tvm_private.set_type(gv, func.ty)
    assert tvm_ffi.structural_equal(gv.ty, relax.BlockBuilder().add_func(func, "main").ty)


def _failed_build(close: bool):
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((2,), "float32"))
    with pytest.raises(ValueError):
        with bb.function("main", [x]):
            with bb.dataflow():
                bb.emit(relax.op.add(x, x))
                raise ValueError("a converter refused a node")
    if close:
        tvm_private.end_block(bb)


def test_end_block_closes_what_a_failed_build_left_open(capfd):
    """What emit_func_output does on success: without it TVM warns when the builder goes."""
    _failed_build(close=False)
    assert "remaining blocks" in capfd.readouterr().err  # the warning this stands in to prevent
    _failed_build(close=True)
    assert "remaining blocks" not in capfd.readouterr().err


def tiny_onnx():
    """``relu(x + x)`` as ONNX, nodes named ``twice`` and ``positive``."""
    onnx = pytest.importorskip("onnx")
    h = onnx.helper
    x = h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4])
    y = h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4])
    nodes = [h.make_node("Add", ["x", "x"], ["s"], name="twice"), h.make_node("Relu", ["s"], ["y"], name="positive")]
    return h.make_model(h.make_graph(nodes, "tiny", [x], [y]), opset_imports=[h.make_opsetid("", 17)])


def test_the_onnx_importer_base_imports_as_from_onnx_does_through_its_hooks():
    from tvm.relax.frontend.onnx import from_onnx

    model = tiny_onnx()
    seen = []

    class Recording(tvm_private.onnx_importer_base()):
        def check_ops(self, graph):
            seen.append(("check", len(graph.node)))
            super().check_ops(graph)

        def convert(self, op_name, inputs, attrs, opset):
            seen.append(("convert", op_name))
            return super().convert(op_name, inputs, attrs, opset)

    ours = Recording({"x": [1, 4]}, {"x": "float32"}).from_onnx(model.graph, 17)
    assert seen == [("check", 2), ("convert", "Add"), ("convert", "Relu")]
    assert tvm_ffi.structural_equal(ours, from_onnx(model, {"x": [1, 4]}, {"x": "float32"}))
    refused = tiny_onnx()
    refused.graph.node[1].op_type = "NoSuchOp"
    with pytest.raises(tvm.error.OpNotImplemented, match="NoSuchOp"):  # upstream's check, through the hook
        tvm_private.onnx_importer_base()({"x": [1, 4]}, {"x": "float32"}).from_onnx(refused.graph, 17)


@pytest.mark.filterwarnings("ignore:No Op registered")  # onnx.checker on the refused op, which from_onnx warns of
def test_onnx_converters_are_the_ops_from_onnx_takes():
    from tvm.relax.frontend.onnx import from_onnx

    known = tvm_private.onnx_converters()
    assert {"Add", "Relu", "Conv", "If", "Constant"} <= known and "NoSuchOp" not in known
    model = tiny_onnx()
    from_onnx(model, {"x": [1, 4]})  # every op of the model is known: it imports
    model.graph.node[1].op_type = "NoSuchOp"
    with pytest.raises(tvm.error.OpNotImplemented, match="NoSuchOp"):
        from_onnx(model, {"x": [1, 4]})


def test_onnx_node_name_is_the_name_of_the_node_converted():
    names = []

    class Naming(tvm_private.onnx_importer_base()):
        def convert(self, op_name, inputs, attrs, opset):
            names.append(tvm_private.onnx_node_name(attrs))
            return super().convert(op_name, inputs, attrs, opset)

    Naming({"x": [1, 4]}, {"x": "float32"}).from_onnx(tiny_onnx().graph, 17)
    assert names == ["twice", "positive"]
    assert tvm_private.onnx_node_name({}) == ""


def test_the_torch_importer_base_imports_as_from_exported_program_does():
    torch = pytest.importorskip("torch")
    from tvm.relax.frontend.torch import from_exported_program

    class Tiny(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x + x)

    program = torch.export.export(Tiny().eval(), (torch.ones(1, 4),)).run_decompositions()
    checked = []

    class Recording(tvm_private.torch_importer_base()):
        def check_ops(self, nodes):
            checked.append(len(list(nodes)))
            super().check_ops(nodes)

    ours = Recording().from_exported_program(program, False, False, False, None)
    assert checked and checked[0] > 0
    assert tvm_ffi.structural_equal(ours, from_exported_program(program, run_ep_decomposition=False))
