"""``doctor``: this machine checked for the workshop, saying what is missing and how to get it."""

from __future__ import annotations

from byoc_workbench import doctor


def cmd_doctor(args) -> int:
    return doctor.main(as_json=args.json)
