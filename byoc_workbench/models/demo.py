"""The seed's Part 1 graph, written in Relax, and loading a user's own graph.

The seed builds a Relay ``while_loop`` with a ``Let``-bound recursive function.
Relax spells the same loop as a recursive global function with ``R.If``: the
true branch runs conv2d + bias + relu and recurses with the counter plus one,
the false branch runs conv2d + bias + relu once more and reshapes to NHWC.
With the counter starting at 0 that makes three convolutions, as in the seed.
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import os
import sys
import tempfile
import traceback
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

    Returns ``(mod, rules_or_None)``. Whatever the file does wrong (it raises,
    calls ``sys.exit``, defines no ``mod`` or ``rules`` of the wrong kind) is
    one :class:`WorkbenchError` naming the file and its line (see :func:`import_user_file`).
    """
    from ..flow.rules import check_rules

    path = Path(path)
    module = import_user_file(path, "Model file", "pass 'demo' or the path of a .py file that defines mod.")
    mod = getattr(module, "mod", None)
    if not isinstance(mod, tvm.IRModule):
        raise WorkbenchError(
            f"Model file {path} does not define mod as a tvm.IRModule (got {type(mod).__name__}).",
            "assign your module to a top-level variable named mod, e.g. mod = MyModule.",
        )
    rules = getattr(module, "rules", None)
    return mod, None if rules is None else check_rules(rules, f"rules in {path}")


def import_user_file(path: str | Path, what: str, fix: str):
    """Import a user's Python file as a module (a model file, a codegen file).

    The module is put in ``sys.modules`` first, because TVMScript reads the
    source of the classes it parses through their module. A file that raises
    or calls ``sys.exit`` is one :class:`WorkbenchError` naming ``what``, the
    file and its line; ``fix`` is the fix for a path that is not a file.
    """
    path = Path(path)
    if path.is_dir():
        raise WorkbenchError(f"{what} {path} is a directory", fix)
    if not path.is_file():
        raise WorkbenchError(f"{what} {path} does not exist.", fix)
    name = f"byoc_workbench_user_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    failure = None
    with _native_stderr_held() as held:
        try:
            spec.loader.exec_module(module)
        except (Exception, SystemExit) as err:  # the user's code can raise anything, or exit
            del sys.modules[name]
            failure = _load_failure(path, err, what)
            # TVMScript's half-built objects warn from C++ when freed: free them now, and drop those warnings.
            traceback.clear_frames(err.__traceback__)
            gc.collect()
            held.dropped = True
    if failure is not None:
        raise failure from failure.__cause__
    return module


def _load_failure(path: Path, err: BaseException, what: str) -> WorkbenchError:
    """The one line for a user's file that raised or exited while being imported (``err`` as its cause)."""
    where = user_frame(err.__traceback__)
    if isinstance(err, WorkbenchError):  # e.g. op_rule(...) with an unknown op: its own line, and where
        at = f" at line {where[1]}" if where and Path(where[0]).resolve() == path.resolve() else ""
        failure = WorkbenchError(f"{what} {path}{at}: {err.cause}", err.fix)
    elif isinstance(err, SystemExit):
        code = "" if err.code is None else repr(err.code)
        failure = UserCodeError(
            f"{what} {path} called sys.exit({code}){f' at line {where[1]}' if where else ''} while being loaded",
            "remove the exit, or put it under if __name__ == '__main__': the workbench imports the file",
        )
    else:
        failure = user_error(f"{what} {path}", err, "fix the file (--traceback shows the whole trace)")
    failure.__cause__ = err
    return failure


class _Held:
    dropped = False  # set when the import failed: its native warnings are noise beside the one-line error


@contextlib.contextmanager
def _native_stderr_held():
    """Hold back what C++ writes to stderr (file descriptor 2) inside the block, and write it out after,
    unless the block set ``dropped``."""
    held = _Held()
    with tempfile.TemporaryFile() as file:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(file.fileno(), 2)
        try:
            yield held
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            file.seek(0)
            text = file.read()
            if text and not held.dropped:
                sys.stderr.write(text.decode(errors="replace"))
