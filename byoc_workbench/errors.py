"""One error type for everything a user can get wrong.

Every message is one line that names the cause and then the fix, so a widget
or the CLI can show it as it is, without a traceback.
"""


class WorkbenchError(Exception):
    """A problem with the user's input, with a one-line message: cause, then fix."""

    def __init__(self, cause: str, fix: str):
        self.cause = cause
        self.fix = fix
        super().__init__(f"{cause} Fix: {fix}")
