"""The command line's parser: argparse with every refusal as one ``error: <cause>. Fix: <fix>.`` line,
the argument types with their documented bounds, and the options several commands share.

It imports argparse and the package's cheap floors only (:mod:`byoc_workbench.cli.parsers` with it):
``byoc-workbench --help`` loads no command's code."""

from __future__ import annotations

import argparse
from typing import NamedTuple

from byoc_workbench.backends.base import BUILTIN_NAMES
from byoc_workbench.core.errors import WorkbenchError, did_you_mean

# Documented bounds (README, "The command line"): beyond them a run takes hours.
MAX_REPEAT = 1000
MAX_TVM_REPEAT = 20
MAX_RUNS = 1000
MAX_SECONDS = 600.0
DEFAULT_SSD = "ssd_512_resnet50_v1_coco"
# What --backend takes; a .py file that registers a codegen of your own is loaded (backends.codegen).
BACKEND_HELP = f"{', '.join(('auto', 'tvm', *BUILTIN_NAMES))}, or a .py file that calls register_codegen"
ZOO_HELP = "ssd (the model of --model), a zoo model's name (byoc-workbench prefetch --list names them)"
PRECISION_CHOICES = ("f32", "bf16", "f16")  # the openvino backend's (backends/openvino.py); it imports openvino
PRECISION_HELP = (
    "with --backend openvino or torch: its inference precision (default f32; bf16 and f16 are faster, less exact)"
)
FULL_OPS = 300  # stages: a model of at most this many ops is drawn whole by default; past it, collapsed


# The options whose empty value means something: --rules '' switches every rule off.
MAY_BE_EMPTY = frozenset({"rules"})


class UsageError(WorkbenchError):
    """A command line argparse refused: the option, what was wrong, and what to type."""


# What to pass an option of a built-in type; the types below carry their own ``wants``.
WANTS = {int: "a whole number, e.g. {name} 10", float: "a number, e.g. {name} 1e-3"}


class Parser(argparse.ArgumentParser):
    """argparse, with each refusal raised as a :class:`UsageError` where argparse knows the argument.

    argparse states the cause; the fix is made from the argument at fault (its
    choices, its type's ``wants``, the value it lacks), never read back from
    argparse's wording. The hooks are Python 3.11 argparse's own methods for one
    argument (``_get_value``, ``_check_value``, ``_match_argument``,
    ``_get_option_tuples``, the same from Python 3.10 to 3.13); :meth:`error` is left with what argparse
    checks last, the required arguments.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, exit_on_error=False, **kwargs)  # its ArgumentErrors reach parse_known_args
        self._parsing = argparse.Namespace()

    @property
    def listed(self) -> str:
        return f"`{self.prog} --help` lists them"

    def parse_args(self, args=None, namespace=None):
        namespace, extra = self.parse_known_args(args, namespace)
        if extra:
            given = " ".join(extra)
            if all(e in self._option_string_actions for e in extra):  # the command line's own: -v, --traceback
                raise UsageError(f"{given} is an option of {self.prog} itself", f"put {given} before the command")
            raise UsageError(f"unrecognized arguments: {given}", f"remove {given} ({self.listed})")
        return namespace

    def parse_known_args(self, args=None, namespace=None):
        self._parsing = argparse.Namespace() if namespace is None else namespace  # what error() finds missing
        try:
            return super().parse_known_args(args, self._parsing)
        except argparse.ArgumentError as err:  # none of the hooks below: --json=1; on 3.12+ a required argument too
            self.error(str(err))

    def error(self, message: str):
        """The required arguments not given (argparse checks them after all the others)."""
        missing = [_name(a) for a in self._actions if a.required and getattr(self._parsing, a.dest, None) is a.default]
        fix = f"add {', '.join(missing)} ({self.listed})" if missing else f"see `{self.prog} --help`"
        raise UsageError(message, fix)

    def _get_value(self, action, text):
        # --out '' is never the default: an empty value is refused, but where it means something (--rules '': none)
        if action.option_strings and isinstance(text, str) and not text.strip() and action.dest not in MAY_BE_EMPTY:
            name = _name(action)
            raise UsageError(f"{name} is empty", f"give {name} a value, or leave it out for its default")
        try:
            return super()._get_value(action, text)
        except argparse.ArgumentError as err:
            name = _name(action)
            wants = getattr(action.type, "wants", None) or WANTS.get(action.type)
            fix = f"pass {name} {wants.format(name=name)}" if wants else f"see `{self.prog} --help`"
            raise UsageError(str(err), fix) from None

    def _check_value(self, action, value):
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError as err:
            choices = [str(c) for c in action.choices]
            raise UsageError(str(err), f"use one of: {', '.join(choices)}{did_you_mean(value, choices)}") from None

    def _match_argument(self, action, arg_strings_pattern):
        try:
            return super()._match_argument(action, arg_strings_pattern)
        except argparse.ArgumentError as err:  # an option that takes a value, given none
            raise UsageError(str(err), f"put a value after {_name(action)}") from None

    def _get_option_tuples(self, option_string):
        found = super()._get_option_tuples(option_string)
        if len(found) > 1:
            options = ", ".join(t[1] for t in found)  # (action, option, ...): 3 fields to 3.11, 4 from 3.12
            raise UsageError(
                f"ambiguous option: {option_string} could match {options}",
                f"spell {option_string} out in full ({self.listed})",
            )
        return found


def _name(action: argparse.Action) -> str:
    """An argument as argparse names it in its messages: ``--out``, ``model``, ``command``."""
    return "/".join(action.option_strings) or action.metavar or action.dest


# --- argument types: each says what it wants, for the fix ------------------------------------


def count(lo: int, hi: int | None = None):
    """An argparse type: a whole number from ``lo`` to ``hi`` (the documented bounds)."""
    wants = f"a whole number from {lo} to {hi}" if hi is not None else f"a whole number, {lo} or more"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < lo or (hi is not None and value > hi):
            raise argparse.ArgumentTypeError(f"{text!r} is not {wants}")
        return value

    parse.wants = wants
    return parse


def positive_seconds(text: str) -> float:
    """An argparse type: a number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not {positive_seconds.wants}")
    return value


positive_seconds.wants = "a number of seconds above 0, such as 1800"


def ray_address(text: str) -> str:
    """An argparse type: ``auto`` or a Ray cluster's address (``host:port``, ``ray://host:port``).

    Anything else is refused, so that ``--ray demo`` (a model taken for the address) is one line.
    """
    if text != "auto" and ":" not in text:
        raise argparse.ArgumentTypeError(f"{text!r} is not {ray_address.wants}")
    return text


ray_address.wants = "auto or a cluster's address such as ray://head:10001 (put --ray after the models)"
RAY_HELP = (
    "run on a Ray cluster, {unit}, each timed alone on its node: ADDRESS is a cluster's "
    "(ray://head:10001), or auto (the default): the cluster this machine runs, else this machine alone "
    "(needs the [cluster] extra)"
)


def add_ray(parser, unit: str) -> None:
    """``--ray [ADDRESS]``, for a command whose work is ``unit`` (e.g. "one task per model")."""
    parser.add_argument(
        "--ray", nargs="?", const="auto", type=ray_address, metavar="ADDRESS", help=RAY_HELP.format(unit=unit)
    )


class InputShape(NamedTuple):
    """One ``--input-shape``: the input's name (None when not given) and its dimensions."""

    name: str | None
    shape: list[int]


def named_shape(text: str) -> InputShape:
    """``data=1,3,224,224`` -> ``("data", [1, 3, 224, 224])``; ``1,3,224,224`` -> ``(None, [...])``."""
    name, _, dims = text.rpartition("=")
    sizes = [d.strip() for d in dims.split(",")]
    # plain digits only: int() would also read 8_0 as 80, +8 as 8 and other scripts' digits
    if not all(d.isascii() and d.isdigit() and int(d) > 0 for d in sizes):
        raise argparse.ArgumentTypeError(f"{text!r} is not {named_shape.wants}")
    return InputShape(name.strip() or None, [int(d) for d in sizes])


named_shape.wants = "a shape such as data=1,3,224,224 (sizes in plain digits, each 1 or more)"


class InputDtype(NamedTuple):
    """One ``--input-dtype``: the input's name (None when not given) and its dtype (checked by the importer)."""

    name: str | None
    dtype: str


def input_dtype(text: str) -> InputDtype:
    """``ids=int64`` -> ``("ids", "int64")``; ``int64`` -> ``(None, "int64")``."""
    name, _, dtype = (part.strip() for part in text.rpartition("="))
    if not dtype.isidentifier():
        raise argparse.ArgumentTypeError(f"{text!r} is not {input_dtype.wants}")
    return InputDtype(name or None, dtype)


input_dtype.wants = "a dtype such as ids=int64"


def _by_name(given, option: str, what: str, example: str):
    """Repeated ``[NAME=]VALUE`` options as ``{name: value}``, one value, or None; one line for a mix."""
    names = [g[0] for g in given if g[0] is not None]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise WorkbenchError(f"{option} was given twice for {', '.join(twice)}", f"give each input's {what} once")
    named = dict(g for g in given if g[0] is not None)
    plain = [g[1] for g in given if g[0] is None]
    if len(plain) > 1:
        raise WorkbenchError(
            f"{option} was given {len(plain)} times without a name",
            f"give one {what}, or name each input's: {option} data={example} {option} mask={example}",
        )
    if plain and named:
        raise WorkbenchError(f"{option} was given both with and without a name", f"name each: {option} data={example}")
    return plain[0] if plain else (named or None)


def shapes(args) -> list[int] | dict[str, list[int]] | None:
    """``--input-shape`` as ``{name: shape}``, one shape, or None."""
    return _by_name(getattr(args, "input_shape", None) or [], "--input-shape", "shape", "1,3,224,224")


def input_shapes(args):
    """``--input-shape``, with ``--input-dtype`` folded in as :func:`byoc_workbench.frontends.torch_import.import_spec`
    reads it: each typed input's entry ``{"shape": dims, "dtype": name}``. ``--input-dtype`` is for ``--torch``
    only (an ONNX file types its inputs), and names the inputs as ``--input-shape`` does."""
    dims = shapes(args)
    types = _by_name(getattr(args, "input_dtype", None) or [], "--input-dtype", "dtype", "int64")
    if types is None:
        return dims
    if not getattr(args, "torch", None):
        raise WorkbenchError(
            "--input-dtype applies to --torch only: an ONNX file says its inputs' types", "remove --input-dtype"
        )
    if not isinstance(types, dict):
        if isinstance(dims, dict):
            raise WorkbenchError("--input-dtype has no name but --input-shape has", "name it: --input-dtype ids=int64")
        return {"shape": dims, "dtype": types} if dims else {"dtype": types}
    missing = [n for n in types if not isinstance(dims, dict) or n not in dims]
    if missing:
        raise WorkbenchError(
            f"--input-dtype names {', '.join(missing)}, which --input-shape does not",
            f"give its shape by name too: --input-shape {missing[0]}=1,16",
        )
    return {n: {"shape": d, "dtype": types[n]} if n in types else d for n, d in dims.items()}


# --- options shared by several commands, each defined once ------------------------------------


def parents() -> dict[str, Parser]:
    """The shared options, by name: debug (every command), zoo, image, budget and own (a model of yours)."""
    debug = Parser(add_help=False)
    debug.add_argument(
        "--traceback",
        action="store_true",
        default=argparse.SUPPRESS,  # so a command's default does not hide the top-level flag
        help="on an error, print the whole Python trace too (or set BYOC_WORKBENCH_DEBUG=1)",
    )
    zoo = Parser(add_help=False)
    zoo.add_argument("--model", dest="ssd_model", help=f"with ssd: the GluonCV model (default {DEFAULT_SSD})")
    zoo.add_argument(
        "--weights",
        help="with ssd: trained, untrained, or a .params file (default: the cache, else untrained seeded weights)",
    )
    image = Parser(add_help=False)
    image.add_argument("--image", help="with ssd: a JPEG or PNG (default: the picture shipped with the package)")
    budget = Parser(add_help=False)
    budget.add_argument(
        "--max-seconds",
        type=positive_seconds,
        default=MAX_SECONDS,
        help=f"refuse a timed loop estimated, after its first run, to take longer (default {MAX_SECONDS:g})",
    )
    own = Parser(add_help=False)
    own.add_argument(
        "--torch",
        metavar="MODULE:FACTORY",
        help="a PyTorch model instead of a file, e.g. torchvision.models:resnet18 (the weights the factory makes, "
        "after torch.manual_seed(0); needs the [pytorch] extra)",
    )
    own.add_argument(
        "--input-shape",
        type=named_shape,
        action="append",
        metavar="[NAME=]N,C,H,W",
        help="with a .onnx file or --torch: an input's shape (default: the file's; 1,3,224,224 for --torch, "
        "where NAME is a parameter of forward); repeat for several inputs, once each",
    )
    own.add_argument(
        "--input-dtype",
        type=input_dtype,
        action="append",
        metavar="[NAME=]DTYPE",
        help="with --torch: an input's dtype, e.g. int64 for token ids or bool for a mask (default float32; "
        "NAME as for --input-shape, which a named input needs too); repeat for several inputs, once each",
    )
    return {"debug": debug, "zoo": zoo, "image": image, "budget": budget, "own": own}


class Commands:
    """Adds one command's subparser, with the shared options it uses: ``commands(name, help, runner, *uses)``.

    ``runner`` names the function that runs the command, ``"module:function"`` (e.g.
    ``"byoc_workbench.cli.run:cmd_run"``): its module, and the floors it imports, load only when
    the command runs (:func:`byoc_workbench.cli.runner`), never for ``--help``.
    """

    def __init__(self, subparsers, shared: dict[str, Parser]):
        self.subparsers = subparsers
        self.shared = shared

    def __call__(self, name: str, helptext: str, runner: str, *uses: str) -> Parser:
        parser = self.subparsers.add_parser(
            name, help=helptext, parents=[self.shared["debug"], *(self.shared[u] for u in uses)]
        )
        parser.set_defaults(runner=runner)
        return parser
