"""The ``byoc-workbench`` command's entry point, outside the package: importing the workbench loads TVM (a
few seconds), and a Ctrl-C, a SIGTERM or a SIGHUP (a closed terminal or ssh session) then ends in the same one
line and exit status (130, 143, 129) as one later does. The scripts of tools/ and benchmarks/ take their
handling of signals from here, before they load the package."""

import importlib
import signal
import sys

#: What ends a command in one line, its temporaries removed: Ctrl-C, SIGTERM (``timeout``, ``docker stop``, a
#: JupyterHub cull) and SIGHUP (a closed terminal or ssh session), each handled as Ctrl-C is.
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def ignore_signals() -> None:
    """From here on, :data:`SIGNALS` change nothing: the process is ending, or its results are in place."""
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


def stopped_word(signum: int) -> str:
    return {signal.SIGTERM: "terminated", signal.SIGHUP: "hung up"}.get(signum, "interrupted")


#: The commands that write no file: stopped, they say only that they were ("nothing was written" would suggest
#: that they write something).
WRITE_NOTHING = ("doctor",)


def writes_nothing(argv) -> bool:
    """Whether the command of ``argv`` (its first word that is no option) is one of :data:`WRITE_NOTHING`."""
    return next((a for a in argv if not a.startswith("-")), None) in WRITE_NOTHING


def exit_on_signals(said: str) -> None:
    """Until :func:`ignore_signals`, each of :data:`SIGNALS` ends the process with ``<interrupted|terminated|hung
    up>; <said>`` and the shell's status for the signal (130, 143, 129), through ``SystemExit``: ``finally``
    blocks and context managers still clean up, and later signals are ignored so that none interrupts the way out."""

    def stopped(signum, _frame):
        ignore_signals()
        print(f"{stopped_word(signum)}; {said}", file=sys.stderr)
        raise SystemExit(128 + signum)

    for sig in SIGNALS:
        signal.signal(sig, stopped)


def main() -> int:
    stopped = 0

    def on_signal(signum, frame):
        nonlocal stopped
        stopped = signum
        ignore_signals()  # the process is ending: a second signal must not break the exit
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
        said = "." if writes_nothing(sys.argv[1:]) else "; nothing was written."
        print(f"{stopped_word(stopped)}{said}", file=sys.stderr)
        return 128 + int(stopped)
    # The command's own handlers take over, and put this back as it returns: a signal after its last line, while
    # the interpreter tears TVM down, must not turn a command that wrote and said its results into 130 or 143.
    ignore_signals()
    return run()


if __name__ == "__main__":
    sys.exit(main())
