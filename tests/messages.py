"""The one message style that every test of an error checks."""

import re

#: ``error: <cause>. Fix: <fix>.`` on one line, as the CLI, the widget and notebooks show it.
LINE = re.compile(r"error: [^\n]+\. Fix: [^\n]+\.")


def one_line(err) -> str:
    """The message of ``err`` (an exception, a ``pytest.raises`` result or printed text), checked for the style."""
    err = getattr(err, "value", err)
    text = err if isinstance(err, str) else str(err)
    assert LINE.fullmatch(text), f"not one 'error: cause. Fix: fix.' line: {text!r}"
    return text
