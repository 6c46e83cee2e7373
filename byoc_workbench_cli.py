"""The ``byoc-workbench`` command's entry point, outside the package: importing the workbench loads TVM (a
few seconds), and a Ctrl-C then ends in the same one line and exit status 130 as a Ctrl-C later does."""

import importlib
import signal
import sys


def main() -> int:
    pressed = False

    def on_ctrl_c(signum, frame):
        nonlocal pressed
        pressed = True
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the process is ending: a second press must not break the exit
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_ctrl_c)
    try:
        run = importlib.import_module("byoc_workbench.cli").main  # after the Ctrl-C handler is set
    except BaseException:
        if not pressed:  # a real failure to import keeps its traceback
            raise
    # A library's import may catch the KeyboardInterrupt and carry on: the press still ends the command.
    if pressed:
        print("interrupted; nothing was written.", file=sys.stderr)
        return 130
    signal.signal(signal.SIGINT, signal.default_int_handler)
    return run()


if __name__ == "__main__":
    sys.exit(main())
