"""What an earlier result of a command looks like, for :func:`byoc_workbench.core.output_paths.check_file`: a result
replaces an earlier one of its kind that the workbench wrote, never a file that holds something else (a notebook,
your own JSON or ``.npz``, a model), even one that looks like a result."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from pathlib import Path

from byoc_workbench.core import output_paths
from byoc_workbench.models.meaning import PREDICTION_ARRAYS


def json_result(item: Callable[[dict], bool]) -> Callable[[Path], bool]:
    """Whether a file is an earlier JSON result: an object (or a list of them) that ``item`` accepts."""

    def ours(path: Path) -> bool:
        try:
            data = json.loads(path.read_bytes())
        except (OSError, ValueError):
            return False
        items = data if isinstance(data, list) else [data]
        return bool(items) and all(isinstance(i, dict) and item(i) for i in items)

    return ours


def npz_result(names: Callable[[str], bool]) -> Callable[[Path], bool]:
    """Whether a file is an earlier ``.npz`` result: every array of it one that ``names`` accepts."""

    def ours(path: Path) -> bool:
        try:
            with zipfile.ZipFile(path) as z:
                members = z.namelist()
        except (OSError, zipfile.BadZipFile):
            return False
        return bool(members) and all(m.endswith(".npy") and names(m.removesuffix(".npy")) for m in members)

    return ours


def proven(ours: Callable[[Path], bool]) -> Callable[[Path], bool]:
    """Whether a file is a result ``ours`` accepts that the workbench wrote, as it is now (its folder's record
    proves it: :func:`byoc_workbench.core.output_paths.wrote`); names and shapes alone prove nothing."""
    return lambda path: output_paths.wrote(path) and ours(path)


#: ``bench --out``'s JSON: one model's result (its backends, what it skipped, its notes) or its error line, or a
#: list of them. A JSON of your own with a ``model`` and an ``error`` or ``backends`` key is not one.
BENCH = proven(
    json_result(
        lambda r: (
            "model" in r and ({"backends", "skipped", "notes"} <= r.keys() or str(r.get("error")).startswith("error: "))
        )
    )
)
#: ``run --save-outputs``'s arrays: ``output<k>``, or a zoo model's prediction's.
SAVED_OUTPUTS = proven(npz_result(lambda name: name.removeprefix("output").isdigit() or name in PREDICTION_ARRAYS))
