"""Walk GluonCV's detection, segmentation and pose zoo through the importer; write what converts.

    python tools/zoo_support.py                # every model (about 20 minutes on 2 cores)
    python tools/zoo_support.py --readme-only  # regenerate the tables from the JSON

Writes ``byoc_workbench/data/zoo-support.json`` (one record per model: its status, the ops that stop it,
its one-line error) and regenerates the support table of ``docs/zoo.md`` and the README's
line between their markers.
``make test`` rechecks a sample of the records (tests/models/test_zoo_support.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from byoc_workbench.models import support  # noqa: E402

RECORDS = Path(str(support.RECORDS))
README = ROOT / "README.md"
ZOO_DOC = ROOT / "docs" / "zoo.md"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--readme-only", action="store_true", help="only regenerate the tables from the JSON")
    p.add_argument("--models", help="comma-separated names to recheck; the other records are kept")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds one model may take (default 900)")
    args = p.parse_args(argv)
    if not args.readme_only:
        names = support.zoo_names()
        old = {r["name"]: r for r in json.loads(RECORDS.read_text())} if RECORDS.exists() and args.models else {}
        wanted = {n: names[n] for n in args.models.split(",")} if args.models else names
        fresh = {r["name"]: r for r in support.walk(wanted, args.timeout)}
        records = [fresh.get(n) or old[n] for n in names if n in fresh or n in old]
        RECORDS.write_text(json.dumps(records, indent=1) + "\n")
        print(f"wrote {len(records)} records to {RECORDS.relative_to(ROOT)}")
    records = json.loads(RECORDS.read_text())
    README.write_text(support.replace_table(README.read_text(), records, full=False))
    ZOO_DOC.write_text(support.replace_table(ZOO_DOC.read_text(), records))
    print(f"regenerated the support line in {README.relative_to(ROOT)} and the table in {ZOO_DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
