"""The seed's Part 1 graph, written in Relax, and loading a user's own graph.

The seed builds a Relay ``while_loop`` with a ``Let``-bound recursive function.
Relax spells the same loop as a recursive global function with ``R.If``: the
true branch runs conv2d + bias + relu and recurses with the counter plus one,
the false branch runs conv2d + bias + relu once more and reshapes to NHWC.
With the counter starting at 0 that makes three convolutions, as in the seed.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import tvm
from tvm.script import ir as I
from tvm.script import relax as R

from ..errors import UserCodeError, WorkbenchError, user_error, user_frame


@I.ir_module
class DemoModule:
    @R.function
    def while_loop(
        iter1: R.Tensor((), "int32"),
        d1: R.Tensor((1, 32, 56, 56), "float32"),
        w1: R.Tensor((32, 32, 3, 3), "float32"),
        b1: R.Tensor((32,), "float32"),
    ) -> R.Tensor((1, 56, 56, 32), "float32"):
        with R.dataflow():
            cond = R.less(iter1, R.const(2, "int32"))
            R.output(cond)
        if cond:
            with R.dataflow():
                inc = R.add(iter1, R.const(1, "int32"))
                conv = R.nn.conv2d(d1, w1, strides=(1, 1), padding=(1, 1))
                b = R.expand_dims(b1, axis=[1, 2])
                biased = R.add(conv, b)
                relu = R.nn.relu(biased)
                R.output(inc, relu)
            loop_out = DemoModule.while_loop(inc, relu, w1, b1)
            result = loop_out
        else:
            with R.dataflow():
                conv_x = R.nn.conv2d(d1, w1, strides=(1, 1), padding=(1, 1))
                b_x = R.expand_dims(b1, axis=[1, 2])
                biased_x = R.add(conv_x, b_x)
                relu_x = R.nn.relu(biased_x)
                break_out = R.reshape(relu_x, (1, 56, 56, 32))
                R.output(break_out)
            result = break_out
        return result

    @R.function
    def main(
        data: R.Tensor((1, 32, 56, 56), "float32"),
        weight: R.Tensor((32, 32, 3, 3), "float32"),
        bias: R.Tensor((32,), "float32"),
    ) -> R.Tensor((1, 56, 56, 32), "float32"):
        out = DemoModule.while_loop(R.const(0, "int32"), data, weight, bias)
        return out


def demo_module() -> tvm.IRModule:
    """The seed's loop graph as a Relax IRModule."""
    return DemoModule


def demo_inputs(seed: int = 0) -> list:
    """Inputs for ``main``: data, weight and bias, scaled so activations stay O(1)."""
    rng = np.random.RandomState(seed)
    return [
        rng.uniform(-1, 1, (1, 32, 56, 56)).astype("float32"),
        rng.uniform(-1, 1, (32, 32, 3, 3)).astype("float32") / np.sqrt(32 * 9),
        rng.uniform(-0.1, 0.1, (32,)).astype("float32"),
    ]


def load_model_file(path: str | Path):
    """Load ``mod`` (and optional ``rules``) from a user's Python file.

    Returns ``(mod, rules_or_None)``. The file is imported as a module that is
    put in ``sys.modules`` first, because TVMScript reads the source of the
    classes it parses through their module. Whatever the file does wrong (it
    raises, calls ``sys.exit``, defines no ``mod`` or ``rules`` of the wrong
    kind) is one :class:`WorkbenchError` naming the file and its line.
    """
    from ..flow.rules import check_rules

    path = Path(path)
    if path.is_dir():
        raise WorkbenchError(
            f"Model file {path} is a directory", "pass 'demo' or the path of a .py file that defines mod."
        )
    if not path.is_file():
        raise WorkbenchError(
            f"Model file {path} does not exist.", "pass 'demo' or the path of a .py file that defines mod."
        )
    name = f"byoc_workbench_user_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except WorkbenchError as err:  # e.g. op_rule(...) with an unknown op: its own line, with where it was called
        del sys.modules[name]
        where = user_frame(err.__traceback__)
        at = f" at line {where[1]}" if where and Path(where[0]).resolve() == path.resolve() else ""
        raise WorkbenchError(f"Model file {path}{at}: {err.cause}", err.fix) from err
    except (Exception, SystemExit) as err:  # the user's code can raise anything, or exit
        del sys.modules[name]
        if isinstance(err, SystemExit):
            where = user_frame(err.__traceback__)
            code = "" if err.code is None else repr(err.code)
            raise UserCodeError(
                f"Model file {path} called sys.exit({code}){f' at line {where[1]}' if where else ''} while being loaded",
                "remove the exit, or put it under if __name__ == '__main__': the workbench imports the file",
            ) from err
        raise user_error(f"Model file {path}", err, "run the file with python to see the full traceback, and fix it.") from err
    mod = getattr(module, "mod", None)
    if not isinstance(mod, tvm.IRModule):
        raise WorkbenchError(
            f"Model file {path} does not define mod as a tvm.IRModule (got {type(mod).__name__}).",
            "assign your module to a top-level variable named mod, e.g. mod = MyModule.",
        )
    rules = getattr(module, "rules", None)
    return mod, None if rules is None else check_rules(rules, f"rules in {path}")
