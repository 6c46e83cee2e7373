"""The ``byoc-workbench`` command's entry point, outside the package: importing the workbench loads TVM (a
few seconds), and a Ctrl-C then ends in the same one line and exit status 130 as a Ctrl-C later does."""

import sys


def main() -> int:
    try:
        from byoc_workbench.cli import main as run
    except KeyboardInterrupt:
        print("interrupted; nothing was written.", file=sys.stderr)
        return 130
    return run()
