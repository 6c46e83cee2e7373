"""Importing gluoncv beside torch.

gluoncv 0.10's ``__init__`` refuses to load when torch is importable and not
older than 2.0 ("Legacy torch==2.x detected", a RuntimeError), although its
MXNet half never uses torch. With the ``[pytorch]`` extra installed next to
Part 2's mxnet and gluoncv, the first import of gluoncv therefore runs with
torch hidden from it, as on a machine without the extra; torch itself is put
back at once, and later imports find gluoncv loaded.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

from byoc_workbench.core.errors import import_optional

_ABSENT = object()


def import_gluoncv(name: str, fix: str):
    """``import_optional(name, fix)`` for a gluoncv module, with torch hidden during gluoncv's first import."""
    if "gluoncv" not in sys.modules and importlib.util.find_spec("torch") is not None:
        saved = sys.modules.get("torch", _ABSENT)
        sys.modules["torch"] = None  # `import torch` raises ImportError: gluoncv's check passes
        try:
            import_optional("gluoncv", fix)
        finally:
            if saved is _ABSENT:
                sys.modules.pop("torch", None)
            else:
                sys.modules["torch"] = saved
    return import_optional(name, fix)
