"""The ``byoc-workbench`` command's entry point, outside the package: importing the workbench loads TVM (a
few seconds), and a Ctrl-C or a SIGTERM then ends in the same one line and exit status (130, 143) as one
later does."""

import importlib
import signal
import sys

SIGNALS = (signal.SIGINT, signal.SIGTERM)


def main() -> int:
    stopped = 0

    def on_signal(signum, frame):
        nonlocal stopped
        stopped = signum
        for sig in SIGNALS:  # the process is ending: a second signal must not break the exit
            signal.signal(sig, signal.SIG_IGN)
        raise KeyboardInterrupt

    for sig in SIGNALS:
        signal.signal(sig, on_signal)
    try:
        run = importlib.import_module("byoc_workbench.cli").main  # after the handlers are set
    except BaseException:
        if not stopped:  # a real failure to import keeps its traceback
            raise
    # A library's import may catch the KeyboardInterrupt and carry on: the signal still ends the command.
    if stopped:
        word = "terminated" if stopped == signal.SIGTERM else "interrupted"
        print(f"{word}; nothing was written.", file=sys.stderr)
        return 128 + int(stopped)
    # The command's own handlers take over, and put this back as it returns: a signal after its last line, while
    # the interpreter tears TVM down, must not turn a command that wrote and said its results into 130 or 143.
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    return run()


if __name__ == "__main__":
    sys.exit(main())
