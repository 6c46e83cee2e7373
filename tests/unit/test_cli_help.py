"""``byoc-workbench --help`` and ``byoc-workbench <command> --help`` load no command's code: the parsers
name each command's runner (:mod:`byoc_workbench.cli.parsers`), imported only when the command runs."""

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What a command's code brings, and --help must not: the floors above the parser, and the heavy packages.
NOT_FOR_HELP = (
    "byoc_workbench.measure",
    "byoc_workbench.widgets",
    "byoc_workbench.workflow",
    "onnxruntime",
    "matplotlib",
)
HELP_MODULES = {"byoc_workbench.cli.args", "byoc_workbench.cli.parsers"}  # of the cli, all --help loads
SCRIPT = """
import sys
from byoc_workbench.cli import main
try:
    main(sys.argv[1:])
except SystemExit as done:
    assert done.code == 0, done.code
print("IMPORTED", *sorted(sys.modules))
"""


def _help(*argv: str) -> tuple[str, set]:
    done = subprocess.run([sys.executable, "-c", SCRIPT, *argv], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    text, _, imported = done.stdout.rpartition("IMPORTED ")
    return text, set(imported.split())


@pytest.mark.parametrize("argv", [["--help"], ["bench", "--help"], ["run", "--help"]], ids=" ".join)
def test_help_loads_no_commands_code(argv):
    text, imported = _help(*argv)
    assert text.startswith("usage: byoc-workbench") and "--traceback" in text
    if argv == ["--help"]:
        assert all(c in text for c in ("stages", "import", "run", "profile", "compare", "bench", "search", "doctor"))
    else:
        assert f"byoc-workbench {argv[0]}" in text
    loaded = sorted(m for m in imported if any(m == n or m.startswith(n + ".") for n in NOT_FOR_HELP))
    assert not loaded, f"--help imported {loaded}"
    assert not any(m.startswith("byoc_workbench.cli.") and m not in HELP_MODULES for m in imported)


def test_every_command_names_a_runner_that_exists():
    from byoc_workbench import cli

    parser = cli.parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    for name, sub in commands.items():
        runner = sub.get_default("runner")
        module, _, function = runner.partition(":")
        assert module.startswith("byoc_workbench.cli.") and function == f"cmd_{name}"
        assert callable(getattr(importlib.import_module(module), function))
