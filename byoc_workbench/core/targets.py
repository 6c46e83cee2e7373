"""What TVM compiles for (a ``tvm_target``): read, checked before TVM 0.27 builds with it, and named.

Targets are as TVM 0.27 takes them: ``"llvm"``, ``"cuda"`` (the GPU here, its arch) or a dict (``{"kind": "cuda",
"arch": "sm_90"}``, which compiles without a GPU); text with options (``"cuda -arch=sm_90"``) is read into that dict,
and a ``tvm.target.Target`` back into the dict it was made from, so all three are checked alike. Text is split as a
shell splits it: quotes group a host with its options (``"cuda -arch=sm_90 -host='llvm -mcpu=znver3'"``).

For CUDA, TVM takes an arch that is no arch, keys and numbers outside what NVIDIA's GPUs have, and
fails on them in the build: minutes later, deep in its code generation, or dying of a division by zero (a warp of 0).
For the CPU, LLVM builds for a generic CPU in place of a ``mcpu`` it does not know, and without a ``mattr`` feature
it does not know (a log line, then a build that is not the one asked for); a ``mtriple`` of no architecture it has
makes the process die of a segfault, and a ``mattr`` item without its sign fails its verifier in C++.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex

import tvm
from tvm.target import codegen

from byoc_workbench.core.errors import WorkbenchError, first_line
from byoc_workbench.core.user_file import native_stderr_held

GPU_KINDS = ("cuda",)
# The keys each kind sets itself: a Target holds them though they were never given.
_KIND_KEYS = {"llvm": ["cpu"], "cuda": ["cuda", "gpu"]}
# Read from the GPU when there is one; written for a CUDA build made without one (CI compiles for sm_90).
_LIMITS = {"max_shared_memory_per_block": 49152, "max_threads_per_block": 1024}
# What a CUDA target's numbers may be (NVIDIA's limits from Turing on).
_RANGES = {
    "max_shared_memory_per_block": (1, 232448),
    "max_threads_per_block": (1, 1024),
    "max_num_threads": (1, 1024),
    "thread_warp_size": (32, 32),
    "registers_per_block": (1, 65536),
}


def cuda(tvm_target, spec: dict, host_kind: str) -> None:
    """Fill in what ``spec`` (``tvm_target`` as TVM 0.27's dict) leaves out (this machine's GPU's arch, the limits),
    then refuse in one line what TVM would fail on: an arch that is not ``sm_`` and two digits or more (``sm_90``,
    ``sm_90a``), keys, a limit that is not a whole number in its range, a host (of ``host_kind``) not the CPU."""
    if host_kind != "llvm":
        raise WorkbenchError(
            f"The target {tvm_target!r} has the host {spec['host']!r}", "leave the host out (the CPU, llvm)"
        )
    if "arch" not in spec:
        dev = tvm.cuda(0)
        if not dev.exist:
            raise WorkbenchError(
                "A CUDA build needs the GPU's arch, and no NVIDIA GPU is visible here",
                "run on a machine with an NVIDIA GPU and its driver, or name the arch: "
                "{'kind': 'cuda', 'arch': 'sm_90'} (compiles without running)",
            )
        spec["arch"] = "sm_" + dev.compute_version.replace(".", "")
    spec.update(_LIMITS | spec)
    arch = spec["arch"]
    if isinstance(arch, str) and not re.fullmatch(r"sm_\d{2,}[a-z]?", arch):  # not text: TVM says so itself
        raise WorkbenchError(
            f"{arch!r} in the target {tvm_target!r} is not a CUDA arch", "name one such as sm_90 or sm_75"
        )
    if "keys" in spec:  # keys choose the schedules: ["cpu"] built a CUDA target's module for the CPU alone
        raise WorkbenchError(f"The target {tvm_target!r} sets keys", "leave keys out: the kind (cuda) sets them")
    if "mcpu" in spec:  # CUDA reads arch; a host's mcpu given after an unquoted -host= lands here, and is lost
        raise WorkbenchError(
            f"The target {tvm_target!r} gives CUDA a mcpu, which it does not read",
            "leave mcpu out (arch names the GPU), or give it to the host, in quotes with the host: "
            "-host='llvm -mcpu=znver3'",
        )
    for key, (low, high) in _RANGES.items():
        value = spec.get(key, low)
        if type(value) is not int or not low <= value <= high:
            said = f"{low}" if low == high else f"a whole number from {low} to {high}"
            raise WorkbenchError(f"{key}={value!r} in the target {tvm_target!r}", f"leave {key} out, or give it {said}")


# What LLVM also reads as an architecture it has, besides the names of its targets (llvm::Triple::parseArch).
_ARCH_ALIASES = r"i[3-6]86|amd64|x86-64|arm64(e|_32)?|(arm|thumb)(eb)?v[0-9][0-9a-z.]*|riscv(32|64)[a-z0-9_]*"


def llvm(tvm_target, spec: dict) -> None:
    """Refuse in one line a ``mtriple`` whose architecture LLVM does not have, a ``mcpu`` that is not one of that
    architecture's CPUs (LLVM's own list: ``llc -mcpu=help``), a ``mattr`` item that is not ``+`` or ``-`` and one of
    its features, and a ``jit``, ``mfloat-abi``, number or ``cl-opt`` TVM stops on in C++ or reads as another;
    ``spec`` is ``tvm_target`` as TVM 0.27's dict."""
    if "host" in spec:  # TVM takes it, then builds the CPU's code with the host's code generator (CUDA's: it fails)
        raise WorkbenchError(
            f"The target {tvm_target!r} has a host", "leave the host out: a CPU target is its own host"
        )
    triple = spec.get("mtriple")
    if triple is not None:
        arch = triple.split("-")[0]
        if triple.endswith("x32"):  # LLVM aborts the process as it selects instructions for the x32 ABI
            raise WorkbenchError(f"TVM cannot build for {triple!r} (the x32 ABI)", "leave mtriple out (this CPU)")
        if arch not in codegen.llvm_get_targets() and not re.fullmatch(_ARCH_ALIASES, arch):
            raise WorkbenchError(
                f"{triple!r} in the target {tvm_target!r} names no architecture LLVM builds for",
                "leave mtriple out (this CPU), or name one such as x86_64-linux-gnu or aarch64-linux-gnu",
            )
    cpu = spec.get("mcpu")
    if cpu is not None:
        known = codegen.llvm_get_cpu_archlist(
            tvm.target.Target({"kind": "llvm", "mtriple": triple} if triple else "llvm")
        )
        if cpu not in known:
            where = f"-mtriple={triple} " if triple else ""
            example = "" if triple else f" such as {codegen.llvm_get_system_cpu()} (this machine's)"
            raise WorkbenchError(
                f"{cpu!r} in the target {tvm_target!r} is not a CPU LLVM knows for "
                f"{triple or 'this machine'} (it would build for a generic CPU instead)",
                f"leave mcpu out (any CPU of this kind), or name one of `llc {where}-mcpu=help`{example}",
            )
    _check_mattr(tvm_target, spec.get("mattr"), triple)
    _check_options(tvm_target, spec)


def _check_mattr(tvm_target, mattr, triple) -> None:
    """An item without its sign fails LLVM's verifier in C++; a feature LLVM does not know (``+AVX2``, ``++avx2``)
    it skips with a log line, and builds without what was asked."""
    if not mattr:
        return
    for item in mattr:
        if item[:1] not in ("+", "-") or len(item) == 1:
            raise WorkbenchError(
                f"{item!r} in the mattr of the target {tvm_target!r} is not +feature or -feature",
                "write each as +feature to add it or -feature to take it away, with no spaces or empty items: "
                "-mattr=+avx2,+fma or {'mattr': ['+avx2', '+fma']}",
            )
    probe = {"kind": "llvm", "mattr": [f"+{item[1:]}" for item in mattr]} | ({"mtriple": triple} if triple else {})
    known = _features(probe)  # a feature LLVM knows is on once asked for
    unknown = [item for item in mattr if item[1:] not in known]
    if unknown:
        where = f"-mtriple={triple} " if triple else ""
        raise WorkbenchError(
            f"{unknown[0]!r} in the target {tvm_target!r} is not a feature LLVM knows for {triple or 'this machine'} "
            "(it would build without it)",
            f"leave it out, or name one of `llc {where}-mattr=help` as LLVM spells it (lower case: +avx2)",
        )
    removed = [item for item in mattr if item[0] == "-" and not re.fullmatch(_HARMLESS, item[1:])]
    base = _features({"kind": "llvm"} | ({"mtriple": triple} if triple else {})) if removed else set()
    taken = [item for item in removed if item[1:] in base]  # what every such CPU has
    if taken:  # -sse2 on x86-64: "SSE register return with SSE disabled", and the process is gone
        raise WorkbenchError(
            f"{taken[0]!r} in the target {tvm_target!r} takes away {taken[0][1:]}, which every CPU of "
            f"{triple or 'this machine'}'s kind has and LLVM builds on (it can stop the process)",
            f"leave {taken[0]} out: take away only a feature some CPUs of the kind lack",
        )


# LLVM's command-line options as TVM reads them: -name or --name, then :type and =value (no type: a bool).
_CL_OPT = r"--?[^-:=][^:=]*((:bool)?(=(?i:true|false|0|1))?|:(?P<type>u?int)=(?P<number>-?[0-9]+)|:string=.*)"
# What an int and a uint option hold: TVM stops on a number past 64 bits, and wraps one past these with a log line.
_CL_RANGES = {"int": range(-(2**31), 2**31), "uint": range(2**32)}
# The numbers an llvm target takes: (lowest, highest, what it is, the fix). TVM stops in C++ on a vector width out
# of its range, and reads an opt-level past 0-3 and a num-cores below 1 as something else without a word; a count of
# cores no CPU has it takes as it is (the build may be for another machine: more than this one's are fine).
_NUMBERS = {
    "vector-width": (1, 65536, "a number of bits", "leave vector-width out (the CPU's own), or give it 1 to 65536"),
    "opt-level": (0, 3, "an LLVM opt-level", "leave opt-level out (3, LLVM's highest), or give it 0, 1, 2 or 3"),
    "num-cores": (1, 4096, "a number of cores", f"leave num-cores out, or give it 1 to 4096 ({os.cpu_count()} here)"),
}
# What LLVM reads mfloat-abi for: 32-bit ARM (arm64, aarch64 have no soft-float ABI); other CPUs build without it.
_ARM32 = r"(arm|thumb)(?!64)"


def _check_options(tvm_target, spec: dict) -> None:
    """What TVM checks only as it builds, in C++, or reads as something else: the JIT's name, the float ABI (and
    that the CPU is one that has it), the numbers, LLVM's options."""
    jit = spec.get("jit")
    if jit is not None and jit not in ("orcjit", "mcjit"):
        raise WorkbenchError(
            f"jit={jit!r} in the target {tvm_target!r} is not a JIT of TVM's",
            "leave jit out, or give jit=orcjit or mcjit",
        )
    abi = spec.get("mfloat-abi")
    if abi is not None and abi not in ("hard", "soft"):
        raise WorkbenchError(
            f"mfloat-abi={abi!r} in the target {tvm_target!r} is not a float ABI of TVM's",
            "leave mfloat-abi out (the triple's own), or give mfloat-abi=hard or soft",
        )
    triple = spec.get("mtriple") or str(tvm.target.Target("llvm").attrs["mtriple"])
    if abi is not None and not re.match(_ARM32, triple):
        raise WorkbenchError(
            f"mfloat-abi={abi} in the target {tvm_target!r} is for 32-bit ARM CPUs, and {triple} is none "
            "(LLVM would build without it)",
            "leave mfloat-abi out, or build for such a CPU: -mtriple=armv7a-linux-gnueabihf",
        )
    for key, (low, high, what, fix) in _NUMBERS.items():
        value = spec.get(key)
        if value is not None and not low <= value <= high:
            raise WorkbenchError(f"{key}={value} in the target {tvm_target!r} is not {what}", fix)
    for option in spec.get("cl-opt", []):
        found = re.fullmatch(_CL_OPT, option)
        if not found:
            raise WorkbenchError(
                f"{option!r} in the cl-opt of the target {tvm_target!r} is not an LLVM option",
                "write each as -name, -name=true or -name:type=value (type bool, int, uint or string), "
                "such as -unroll-threshold:int=100",
            )
        held = _CL_RANGES.get(found["type"])
        if held and int(found["number"]) not in held:
            raise WorkbenchError(
                f"{option!r} in the cl-opt of the target {tvm_target!r} is past what an LLVM {found['type']} holds",
                f"give it a number from {held.start} to {held.stop - 1}",
            )


# LLVM's features that tune the code for a CPU, or name system instructions that only an intrinsic emits: a CPU
# without them runs TVM's code all the same.
_HARMLESS = (
    r"(fast|faster|slow|false-deps|no-bypass|prefer|tuning|idiv[lq]|lea|macrofusion|branchfusion)(-.*)?|vzeroupper"
    r"|ermsb|fsrm|pconfig|ptwrite|serialize|waitpkg|enqcmd|uintr|cldemote|movdiri|movdir64b|(wide)?kl|hreset|tsxldtrk"
)


def _platform(triple: str) -> tuple:
    """``(arch, os, environment)``: a triple less its vendor (``pc``, ``unknown``, ``conda``), which changes no code."""
    parts = triple.split("-")
    return (parts[0], *parts[-2:]) if len(parts) >= 3 else tuple(parts)


def _features(spec) -> set:
    """The features LLVM turns on for ``spec``; its line for each one it does not know ("'+x' is not a recognized
    feature") is dropped: the caller says it, in one line."""
    with native_stderr_held() as held:
        held.dropped = True
        return set(codegen.llvm_get_cpu_features(tvm.target.Target(spec)))


def check_cpu_runs_here(resolved: tvm.target.Target) -> None:
    """Refuse, in one line, a CPU build this machine cannot run: another architecture, system or ABI (TVM says so
    when it calls it, or the process dies loading it: a Windows triple on Linux), or a ``mcpu``/``mattr`` with
    instructions this CPU lacks (the process dies of an illegal instruction)."""
    own = str(tvm.target.Target("llvm").attrs["mtriple"])
    asked = str(resolved.attrs.get("mtriple", own))
    if _platform(asked) != _platform(own):
        raise WorkbenchError(
            f"The build is for {asked}, a device this machine ({own}) is not",
            "run it on such a machine, or leave mtriple out (this machine's) to run it here",
        )
    if "mcpu" not in resolved.attrs and "mattr" not in resolved.attrs:
        return
    here = codegen.llvm_get_system_cpu()
    lacking = sorted(
        f for f in _features(resolved) - _features({"kind": "llvm", "mcpu": here}) if not re.fullmatch(_HARMLESS, f)
    )
    if lacking:
        more = f" and {len(lacking) - 4} more" if len(lacking) > 4 else ""
        drop = [item for item in resolved.attrs.get("mattr", []) if item[0] == "+" and item[1:] in lacking]
        other_cpu = str(resolved.attrs.get("mcpu", here)) != here
        ways = ([f"name this one: mcpu={here}"] if other_cpu else []) + (
            [f"drop {', '.join(drop)} from mattr"] if drop else []
        )
        raise WorkbenchError(
            f"The build is for a CPU with {', '.join(lacking[:4])}{more}, which this one ({here}) has not: it would "
            "stop on an illegal instruction",
            "leave mcpu and mattr out (code for any CPU of this kind)" + (", or " + " and ".join(ways) if ways else ""),
        )


def kind(tvm_target) -> str:
    """``"llvm"``, ``"cuda"``...: the kind of a target given as text, a dict or a Target ("" for anything else)."""
    if isinstance(tvm_target, str):
        return next(iter(_words(tvm_target)), "")
    if isinstance(tvm_target, dict):
        return str(tvm_target.get("kind", ""))
    return tvm_target.kind.name if isinstance(tvm_target, tvm.target.Target) else ""


def is_gpu(tvm_target) -> bool:
    return kind(tvm_target) in GPU_KINDS


_NAME_TARGET = (
    "name 'llvm' (the CPU) or 'cuda' (an NVIDIA GPU), as text ('cuda -arch=sm_90') or a dict "
    "({'kind': 'cuda', 'arch': 'sm_90'})"
)


def resolve(tvm_target) -> tvm.target.Target:
    """A TVM target; ``"cuda"`` becomes this machine's GPU (its arch), with the CPU (``llvm``) as host.

    A GPU build made without a GPU names its arch: ``{"kind": "cuda", "arch": "sm_90"}`` or
    ``"cuda -arch=sm_90"`` (TVM 0.27 reads dicts only; the text's options become the dict's).
    """
    if isinstance(tvm_target, tvm.target.Target):
        tvm_target = _given(tvm_target)  # checked as the dict it stands for
    if kind(tvm_target) not in ("llvm", *GPU_KINDS):
        raise WorkbenchError(f"Unknown TVM target {tvm_target!r}", _NAME_TARGET)
    spec = _spec(tvm_target)
    if kind(tvm_target) == "llvm":
        _check_types(tvm_target, spec)
        llvm(tvm_target, spec)
    else:  # its numbers first: cuda says their range
        cuda(tvm_target, spec, host_kind=kind(spec.setdefault("host", "llvm")))
        _check_types(tvm_target, spec)
        if isinstance(spec["host"], dict):  # its CPU, checked as a CPU target is
            _check_types(spec["host"], spec["host"])
            llvm(spec["host"], spec["host"])
    try:
        return tvm.target.Target(spec, host=spec.pop("host", None))
    except ValueError as err:  # what TVM itself refuses: an unknown option, a value of the wrong type
        raise WorkbenchError(f"TVM refuses the target {tvm_target!r}: {first_line(err)}", _NAME_TARGET) from None


# TVM's types of options (TargetKind.options_from_name) in words, and whether a value is one: TVM reads True as 1 for
# an int and 2 as True for a bool without a word.
_TYPES = {
    "str": ("text", lambda v: isinstance(v, str)),
    "int": ("a whole number", lambda v: isinstance(v, int) and not isinstance(v, bool)),
    "bool": ("True or False", lambda v: isinstance(v, bool) or v in (0, 1)),
    "Array<str>": ("a list of text", lambda v: isinstance(v, (list, tuple)) and all(isinstance(i, str) for i in v)),
}


def _check_types(tvm_target, spec: dict) -> None:
    """Refuse in one line an option ``spec``'s kind does not have, or a value not of the option's type, naming the
    option and its form: TVM's own line names the type as C++ does ("expected type 'Array<str>' but got
    'ffi.SmallStr'")."""
    name = spec["kind"]
    types = tvm.target.TargetKind.options_from_name(name)
    for key, value in spec.items():
        if key == "host" or str(key).startswith("feature."):  # a host is a target; TVM's parsers write feature.*
            continue
        if key not in types:
            near = "".join(f" (did you mean {k}?)" for k in difflib.get_close_matches(str(key), types, n=1))
            raise WorkbenchError(
                f"TVM refuses the target {tvm_target!r}: {name} targets have no option {key!r}",
                f"leave {key} out{near}; {name} targets take {', '.join(k for k in types if k != 'kind')}",
            )
        form, fits = _TYPES.get(types[key], ("", lambda v: True))
        if not fits(value):
            example = _example(key, types[key], value)
            raise WorkbenchError(
                f"TVM refuses the target {tvm_target!r}: its {key} is {value!r}, not {form}",
                f"give {key} as {form}"
                + (f": {{{key!r}: {example!r}}}" if example is not None else "")
                + ", or leave it out",
            )


def _example(key, tvm_type: str, value):
    """``value`` in the form of ``tvm_type``, where it reads as one ('+avx2' as ['+avx2'], '4' as 4, 90 as 'sm_90');
    None where it does not."""
    text = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
    if value is None or not text:
        return None
    if tvm_type == "Array<str>":
        return text.split(",")
    if tvm_type == "int":
        return int(text) if re.fullmatch(r"-?[0-9]+", text) else None
    if tvm_type == "bool":
        return {"true": True, "false": False, "1": True, "0": False}.get(text.lower())
    return f"sm_{text}" if key == "arch" and text.isdigit() else text


def _given(tvm_target: tvm.target.Target) -> dict:
    """A Target as the dict it was made from: less what its kind sets (keys, an empty tag) and an arch TVM wrote in."""
    spec = {str(k): _plain(v) for k, v in tvm_target.export().items() if k != "host"}
    if spec.get("tag") == "":
        del spec["tag"]
    if spec.get("keys") == _KIND_KEYS.get(spec["kind"]):
        del spec["keys"]
    resolved = _LIMITS.keys() <= spec.keys()  # resolve writes them in: the arch it holds, sm_50 too, was named
    if is_gpu(tvm_target) and not resolved and spec.get("arch") == tvm.target.Target({"kind": "cuda"}).attrs["arch"]:
        del spec["arch"]  # what TVM writes in when none is given (sm_50 without a GPU): filled in as "cuda" is
    if tvm_target.host is not None:
        spec["host"] = _given(tvm_target.host)
    return spec


def _plain(value):  # a value of a Target's export as Python's: text, a number, a list
    return value if isinstance(value, (str, int, float)) else [_plain(v) for v in value]


def _spec(tvm_target) -> dict:
    """A target as TVM 0.27's dict: text's ``-key=value`` options become keys, typed as the kind takes them (numbers,
    lists of comma-separated text: ``-mattr=+avx2,+fma``); a host given as text is read the same way."""
    if isinstance(tvm_target, dict):
        spec = dict(tvm_target)
    else:
        name, *options = _words(tvm_target)
        spec = {"kind": name}
        types = tvm.target.TargetKind.options_from_name(name)
        for option in options:
            key, eq, value = option.removeprefix("-").partition("=")
            if not (option.startswith("-") and key and eq and value) or key.startswith("-"):
                raise WorkbenchError(f"Cannot read the option {option!r} of the target {tvm_target!r}", _NAME_TARGET)
            if key in spec:
                raise WorkbenchError(f"The target {tvm_target!r} gives -{key} twice", f"give -{key} once")
            if types.get(key) == "Array<str>":
                spec[key] = value.split(",")
            elif types.get(key) == "bool" and value.lower() in ("true", "false"):
                spec[key] = value.lower() == "true"
            else:  # ASCII digits: "²" is no number
                spec[key] = int(value) if re.fullmatch(r"-?[0-9]+", value) else value
    if isinstance(spec.get("host"), str) and kind(spec["host"]) == "llvm":
        spec["host"] = _spec(spec["host"])
    return spec


def _words(text: str) -> list:
    """Text as a shell splits it: quotes group words (``-host='llvm -mcpu=znver3'``, TVM's own
    ``-cl-opt='-a,-b'``); text quoted as a whole (``"'llvm -mcpu=znver3'"``) is what its quotes hold."""
    try:
        words = shlex.split(text)
    except ValueError as err:  # "No closing quotation", "No escaped character"
        raise WorkbenchError(
            f"Cannot read the target {text!r}: {str(err).lower()}", "close each quote, or leave quotes and \\ out"
        ) from None
    return _words(words[0]) if len(words) == 1 and len(words[0].split()) > 1 else words


def label(tvm_target) -> str:
    """``llvm``, ``cuda sm_90``: a target in a few words, for printouts and keys."""
    t = resolve(tvm_target)
    arch = t.attrs.get("arch") if is_gpu(t) else None
    return f"{t.kind.name} {arch}" if arch else t.kind.name
