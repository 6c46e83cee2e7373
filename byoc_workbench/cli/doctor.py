"""``doctor``: this machine checked for the workshop, saying what is missing and how to get it."""

from __future__ import annotations

from byoc_workbench import doctor


def cmd_doctor(args) -> int:
    return doctor.main(as_json=args.json)


def add_doctor(command) -> None:
    d = command("doctor", "check this machine for the workshop: what is missing, and how to get it", cmd_doctor)
    d.add_argument("--json", action="store_true", help="print the report as JSON")
