"""Small helpers over Relax IR: substitution, walking blocks, listing ops.

Stage functions build new functions out of the bindings of old ones. All
bindings they move are in A-normal form (a call, tuple or tuple item whose
leaves are variables, constants or shapes), so a substitution over those few
expression kinds is all they need.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import tvm
from tvm import relax

COMPOSITE = "Composite"
CODEGEN = "Codegen"
GLOBAL_SYMBOL = "global_symbol"

# Ops whose cost is dominated by multiply-accumulates; prune keeps subgraphs that hold one.
MAC_OPS = frozenset(
    {
        "relax.nn.conv1d",
        "relax.nn.conv2d",
        "relax.nn.conv3d",
        "relax.nn.conv1d_transpose",
        "relax.nn.conv2d_transpose",
        "relax.nn.conv3d_transpose",
        "relax.matmul",
        "relax.linear",
        "relax.nn.attention",
    }
)


def is_var(expr) -> bool:
    return isinstance(expr, (relax.Var, relax.DataflowVar))


def substitute(expr, mapping: dict):
    """``expr`` with every variable in ``mapping`` replaced (ANF expressions only)."""
    if is_var(expr) or isinstance(expr, tvm.ir.GlobalVar):
        return mapping.get(expr, expr)
    if isinstance(expr, relax.Call):
        op = substitute(expr.op, mapping) if isinstance(expr.op, tvm.ir.GlobalVar) else expr.op
        return relax.Call(op, [substitute(a, mapping) for a in expr.args], expr.attrs, expr.ty_args)
    if isinstance(expr, relax.Tuple):
        return relax.Tuple([substitute(f, mapping) for f in expr.fields])
    if isinstance(expr, relax.TupleGetItem):
        return relax.TupleGetItem(substitute(expr.tuple_value, mapping), expr.index)
    return expr


def free_vars(expr) -> list:
    """Variables that ``expr`` reads, in first-use order (ANF expressions only)."""
    out: list = []

    def visit(e):
        if is_var(e):
            if not any(e.same_as(v) for v in out):
                out.append(e)
        elif isinstance(e, relax.Call):
            for a in e.args:
                visit(a)
        elif isinstance(e, relax.Tuple):
            for f in e.fields:
                visit(f)
        elif isinstance(e, relax.TupleGetItem):
            visit(e.tuple_value)
        elif isinstance(e, relax.Function):
            pass  # a local composite function is closed

    visit(expr)
    return out


def fresh_var(like, name: str | None = None, dataflow: bool = True):
    """A new variable with the type of ``like``."""
    cls = relax.DataflowVar if dataflow else relax.Var
    return cls(name or like.name, like.ty)


def func_attr(func, key: str):
    """A function attribute as a Python string, or None."""
    if not isinstance(func, relax.Function) or func.attrs is None or key not in func.attrs:
        return None
    return str(func.attrs[key])


def callee(mod: tvm.IRModule, call):
    """The relax.Function a call reaches (global or local), or None for ops and externs."""
    op = call.op
    if isinstance(op, tvm.ir.GlobalVar):
        func = mod[op]
        return func if isinstance(func, relax.Function) else None
    if isinstance(op, relax.Function):
        return op
    return None


def callee_name(call) -> str:
    op = call.op
    if isinstance(op, tvm.ir.Op):
        return op.name
    if isinstance(op, tvm.ir.GlobalVar):
        return op.name_hint
    if isinstance(op, relax.ExternFunc):
        return str(op.global_symbol)
    if is_var(op):
        return op.name
    return type(op).__name__


def blocks_of(body) -> Iterator[tuple]:
    """``(scope, block)`` for every binding block in a function body, through If branches.

    ``scope`` is a tuple such as ``("then",)`` or ``("else", "then")``.
    """

    def visit(seq, scope):
        for block in seq.blocks:
            yield scope, block
            for binding in block.bindings:
                if isinstance(binding.value, relax.If):
                    yield from visit(binding.value.true_branch, scope + ("then",))
                    yield from visit(binding.value.false_branch, scope + ("else",))

    if isinstance(body, relax.SeqExpr):
        yield from visit(body, ())


def ops_in(func: relax.Function, mod: tvm.IRModule | None = None) -> list:
    """Every Relax op called in ``func``, in order, looking inside composite and local functions."""
    ops: list = []
    local: dict = {}
    for _, block in blocks_of(func.body):
        for binding in block.bindings:
            value = binding.value
            if isinstance(value, relax.Function):
                local[binding.var] = value
            elif isinstance(value, relax.Call):
                inner = called_function(mod, value, local)
                if isinstance(value.op, tvm.ir.Op):
                    ops.append(value.op.name)
                elif inner is not None and (func_attr(inner, COMPOSITE) or inner is local.get(value.op)):
                    ops.extend(ops_in(inner, mod))
    return ops


def called_function(mod, call, local: dict):
    """The function a call reaches: a global, a local function bound to a variable, or inline."""
    op = call.op
    if is_var(op):
        return local.get(op)
    if isinstance(op, tvm.ir.GlobalVar) and mod is None:
        return None
    return callee(mod, call)


def calls_between_functions(mod: tvm.IRModule) -> dict:
    """``{function: {functions it calls}}`` over the module's Relax functions."""
    graph = {}
    for gv, func in mod.functions.items():
        if not isinstance(func, relax.Function):
            continue
        called = set()
        for _, block in blocks_of(func.body):
            for b in block.bindings:
                if isinstance(b.value, relax.Call) and isinstance(b.value.op, tvm.ir.GlobalVar):
                    called.add(b.value.op.name_hint)
        graph[gv.name_hint] = called
    return graph


def host_functions(mod: tvm.IRModule) -> list:
    """Names of the Relax functions that are not composites or offloaded subgraphs, main first."""
    names = [
        gv.name_hint
        for gv, f in mod.functions.items()
        if isinstance(f, relax.Function) and not func_attr(f, COMPOSITE) and not func_attr(f, CODEGEN)
    ]
    return sorted(names, key=lambda n: (n != "main", n))


def subgraph_functions(mod: tvm.IRModule) -> list:
    """Names of the functions with a ``Codegen`` attribute, in numeric order."""
    names = [gv.name_hint for gv, f in mod.functions.items() if func_attr(f, CODEGEN)]
    return sorted(names, key=_natural)


def subgraph_target(mod, name) -> str:
    """The target of a subgraph: the prefix of its composites, else its codegen name."""
    func = mod[name]
    for _, block in blocks_of(func.body):
        for b in block.bindings:
            comp = func_attr(b.value, COMPOSITE)
            if comp:
                return comp.split(".", 1)[0]
    return func_attr(func, CODEGEN)


def _natural(name: str):
    head = name.rstrip("0123456789")
    tail = name[len(head) :]
    return (head, int(tail) if tail else -1)


def type_str(ty) -> str:
    """``float32[1, 32, 56, 56]`` for a tensor type; a short text otherwise."""
    if isinstance(ty, relax.TensorType):
        shape = "?" if ty.shape is None else ", ".join(_dim(d) for d in ty.shape.values)
        return f"{ty.dtype}[{shape}]"
    if isinstance(ty, relax.TupleType):
        return "(" + ", ".join(type_str(f) for f in ty.fields) + ")"
    return str(ty)


def _dim(d) -> str:
    return str(d.value) if hasattr(d, "value") and isinstance(d.value, int) else str(d)


class ModuleEditor:
    """Adds, replaces and removes functions of a copy of a module.

    New functions are added through a BlockBuilder so that their GlobalVars
    carry a type, which the calls built to them need.
    """

    def __init__(self, mod: tvm.IRModule):
        self._bb = relax.BlockBuilder(mod.clone())

    def global_var(self, name: str) -> tvm.ir.GlobalVar:
        return self._bb.get().get_global_var(name)

    def add(self, name: str, func: relax.Function) -> tvm.ir.GlobalVar:
        return self._bb.add_func(func, name)

    def update(self, name: str, func: relax.Function) -> None:
        self._bb.update_func(self.global_var(name), func)

    def finish(self, remove=()) -> tvm.IRModule:
        mod = self._bb.get()
        for name in remove:
            del mod[mod.get_global_var(name)]
        return relax.transform.Normalize()(mod)


def map_blocks(body: relax.SeqExpr, fn: Callable, counter: list) -> relax.SeqExpr:
    """Rebuild ``body``; ``fn(block_index, is_dataflow, bindings)`` returns new bindings.

    Blocks are numbered as :func:`ir.blocks_of` numbers them.
    """
    new_blocks = []
    for block in body.blocks:
        index = counter[0]
        counter[0] += 1
        bindings = []
        for binding in block.bindings:
            value = binding.value
            if isinstance(value, relax.If):
                value = relax.If(
                    value.cond,
                    map_blocks(value.true_branch, fn, counter),
                    map_blocks(value.false_branch, fn, counter),
                )
                binding = relax.VarBinding(binding.var, value)
            bindings.append(binding)
        is_df = isinstance(block, relax.DataflowBlock)
        bindings = fn(index, is_df, bindings)
        new_blocks.append(relax.DataflowBlock(bindings) if is_df else relax.BindingBlock(bindings))
    return relax.SeqExpr(new_blocks, body.body)


def rebuild(func: relax.Function, fn: Callable) -> relax.Function:
    """``func`` with each block's bindings replaced by ``fn`` (see :func:`map_blocks`)."""
    body = map_blocks(func.body, fn, [0])
    return relax.Function(func.params, body, func.ret_ty, func.is_pure, func.attrs)


def map_bindings(mod: tvm.IRModule, fn: Callable, remove=()) -> tvm.IRModule:
    """Rewrite every binding of every host function, through If branches.

    ``fn(binding, is_dataflow)`` returns the bindings to put in its place, or
    None to keep it. Functions named in ``remove`` are dropped afterwards.
    """
    editor = ModuleEditor(mod)
    for name in host_functions(mod):

        def per_block(block_index, is_df, bindings):
            out = []
            for b in bindings:
                new = fn(b, is_df)
                out.extend([b] if new is None else new)
            return out

        editor.update(name, rebuild(mod[name], per_block))
    return editor.finish(remove=remove)
