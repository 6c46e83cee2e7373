"""Typed access to MXNet node attributes.

MXNet writes every attribute as a string (``"(1, 1)"``, ``"True"``, ``"None"``),
and leaves out attributes left at their default. Converters read them through
:class:`Attrs` so that each default lives next to the converter that uses it.
"""

from __future__ import annotations

import ast

from byoc_workbench.frontends.mxnet_common import MXNetImportError

#: Default of an attribute the converter cannot do without (e.g. ``kernel``).
REQUIRED = object()


class MXNetAttributeError(MXNetImportError):
    """An MXNet attribute that is missing or cannot be read as the expected type."""


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
            f"Node {self.node!r}: attribute {key}={self.raw[key]!r} is not {kind}",
            "fix the symbol JSON or report the op's attribute format",
        )

    def _read(self, key, default):
        # (absent, value): the parsed attribute; a required one that is absent or None raises.
        value = _literal(self.raw[key]) if key in self.raw else None
        if value is None and default is REQUIRED:
            raise MXNetAttributeError(
                f"Node {self.node!r} has no value for attribute {key!r}, which its converter needs",
                "add it to the symbol JSON (MXNet itself always writes it)",
            )
        return key not in self.raw, value

    def str(self, key, default=None):
        """Attribute as a string, or ``default`` when absent; ``None`` when written as ``None``."""
        return self._typed(key, default, "a string", lambda value: self.raw[key])

    def _typed(self, key, default, kind: str, convert):
        # ``default`` when absent, None when written as None, else ``convert(value)`` or an error.
        absent, value = self._read(key, default)
        if absent:
            return default
        if value is None:
            return None
        converted = convert(value)
        if converted is None:
            self._fail(key, kind)
        return converted

    def bool(self, key, default=False):
        """Attribute as a bool; MXNet writes ``True``/``False`` or ``1``/``0``."""
        return self._typed(key, default, "a bool", lambda v: bool(v) if isinstance(v, (bool, int)) else None)

    def int(self, key, default=None):
        """Attribute as an int; ``None`` when written as ``None``."""
        return self._typed(key, default, "an int", _as_int)

    def float(self, key, default=None):
        """Attribute as a float; ``None`` when written as ``None``."""
        return self._typed(key, default, "a number", lambda v: float(v) if isinstance(v, (bool, int, float)) else None)

    def tuple(self, key, default=None):
        """Attribute as a tuple; a bare number becomes a 1-tuple, entries may be None."""
        return self._typed(key, default, "a tuple", _as_tuple)


def _as_int(value):
    if isinstance(value, (bool, int)) or (isinstance(value, float) and value.is_integer()):
        return int(value)
    return None


def _as_tuple(value):
    if isinstance(value, (int, float)):
        return (value,)
    return tuple(value) if isinstance(value, (tuple, list)) else None
