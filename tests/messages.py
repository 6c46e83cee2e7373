"""The one message style that every test of an error checks."""

import re

import pytest

from byoc_workbench.core.errors import WorkbenchError

#: ``error: <cause>. Fix: <fix>.`` on one line, as the CLI, the widget and notebooks show it.
LINE = re.compile(r"error: [^\n]+\. Fix: [^\n]+\.")


def one_line(err) -> str:
    """The message of ``err`` (an exception, a ``pytest.raises`` result or printed text), checked for the style."""
    err = getattr(err, "value", err)
    text = err if isinstance(err, str) else str(err)
    assert LINE.fullmatch(text), f"not one 'error: cause. Fix: fix.' line: {text!r}"
    return text


def refused(make, *says) -> str:
    """The one line of the :class:`WorkbenchError` that ``make()`` raises, checked for the style and for ``says``."""
    with pytest.raises(WorkbenchError) as err:
        make()
    line = one_line(err)
    assert all(s in line for s in says), line
    return line
