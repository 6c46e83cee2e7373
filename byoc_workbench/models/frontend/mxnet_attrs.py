"""Typed access to MXNet node attributes.

MXNet writes every attribute as a string (``"(1, 1)"``, ``"True"``, ``"None"``),
and leaves out attributes left at their default. Converters read them through
:class:`Attrs` so that each default lives next to the converter that uses it.
"""

from __future__ import annotations

import ast


class MXNetAttributeError(ValueError):
    """An MXNet attribute string that cannot be read as the expected type."""


def _literal(text: str):
    text = text.strip()
    if text in ("None", "none", ""):
        return None
    if text in ("True", "true"):
        return True
    if text in ("False", "false"):
        return False
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


class Attrs:
    """Read-only view of one node's attribute strings, with typed getters.

    Parameters
    ----------
    raw : dict
        The node's ``attrs`` as found in the symbol JSON.
    node : str
        Node name, quoted in error messages.
    """

    def __init__(self, raw: dict | None, node: str = "?"):
        self.raw = dict(raw or {})
        self.node = node

    def __contains__(self, key):
        return key in self.raw

    def _fail(self, key, kind):
        raise MXNetAttributeError(
            f"node {self.node!r}: attribute {key}={self.raw[key]!r} is not {kind} "
            "— fix the symbol JSON or report the op's attribute format"
        )

    def str(self, key, default=None):
        """Attribute as a string, or ``default`` when absent."""
        return self.raw.get(key, default)

    def bool(self, key, default=False):
        """Attribute as a bool; MXNet writes ``True``/``False`` or ``1``/``0``."""
        if key not in self.raw:
            return default
        value = _literal(self.raw[key])
        if isinstance(value, (bool, int)):
            return bool(value)
        self._fail(key, "a bool")

    def int(self, key, default=None):
        """Attribute as an int; ``None`` when written as ``None``."""
        if key not in self.raw:
            return default
        value = _literal(self.raw[key])
        if value is None:
            return None
        if isinstance(value, (bool, int)):
            return int(value)
        if isinstance(value, float) and value.is_integer():
            return int(value)
        self._fail(key, "an int")

    def float(self, key, default=None):
        """Attribute as a float; ``None`` when written as ``None``."""
        if key not in self.raw:
            return default
        value = _literal(self.raw[key])
        if value is None:
            return None
        if isinstance(value, (bool, int, float)):
            return float(value)
        self._fail(key, "a number")

    def tuple(self, key, default=None):
        """Attribute as a tuple; a bare number becomes a 1-tuple, entries may be None."""
        if key not in self.raw:
            return default
        value = _literal(self.raw[key])
        if value is None:
            return None
        if isinstance(value, (int, float)):
            return (value,)
        if isinstance(value, (tuple, list)):
            return tuple(value)
        self._fail(key, "a tuple")
