"""Walk GluonCV's detection, segmentation and pose zoo through the importer; write what converts.

    python tools/zoo_support.py                # every model (about 20 minutes on 2 cores)
    python tools/zoo_support.py --ray auto     # one Ray task per model, side by side (the [cluster] extra)
    python tools/zoo_support.py --readme-only  # regenerate the tables from the JSON

Writes ``byoc_workbench/data/zoo-support.json`` (one record per model: its status, the ops that stop it,
its one-line error) and regenerates the support table of ``docs/zoo.md`` and the README's
line between their markers; ``--out FILE`` writes the records there instead and regenerates nothing (it replaces
only a file an earlier ``--out`` wrote, as the ``.byoc-workbench-wrote`` beside it proves, or an empty one).
``make test`` rechecks a sample of the records (tests/models/test_zoo_support.py). Ctrl-C or SIGTERM stops it in
one line, exit 130 or 143, until the records are written.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from byoc_workbench_cli import exit_on_signals, ignore_signals  # noqa: E402

if __name__ == "__main__":  # before the package's imports, which load TVM; the records are written with signals ignored
    exit_on_signals("nothing was written.")

from byoc_workbench.cli import earlier  # noqa: E402
from byoc_workbench.core import files, output_paths  # noqa: E402
from byoc_workbench.core.errors import WorkbenchError  # noqa: E402
from byoc_workbench.models import support  # noqa: E402

RECORDS = Path(str(support.RECORDS))
README = ROOT / "README.md"
ZOO_DOC = ROOT / "docs" / "zoo.md"


def walk(names: dict, timeout: float, ray_address: str | None) -> list:
    """The records of ``names``: one after another here, or one Ray task per model on a cluster.

    Each check runs in a process of its own either way (a crash is a record); imports time nothing,
    so the tasks ask for no timing resource and run side by side, one per CPU.
    """
    if ray_address is None:
        return support.check_all(names, timeout)
    from byoc_workbench.measure import cluster

    print(cluster.connect(ray_address, timing=False), file=sys.stderr)
    units = {name: (name, task, family, timeout) for name, (task, family) in names.items()}
    done = cluster.map_tasks(support.check_apart, units, timing=False, state=support.said)
    # A task that died (not the check: its process) is a crashed record, as in the serial walk.
    return [
        support.crashed(d.unit, *names[d.unit], f"the check's task failed ({d.error})") if d.error else d.value
        for d in done
    ]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--readme-only", action="store_true", help="only regenerate the tables from the JSON")
    p.add_argument("--models", help="comma-separated names to recheck; the other records are kept")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds one model may take (default 900)")
    p.add_argument("--out", help="write the records to this file instead, and regenerate no table")
    p.add_argument(
        "--ray",
        nargs="?",
        const="auto",
        metavar="ADDRESS",
        help="one Ray task per model: auto (this machine's cluster, else this machine alone) or a cluster's address",
    )
    args = p.parse_args(argv)
    if not (args.timeout > 0 and math.isfinite(args.timeout)):  # nan, 0 or -5: every model a "crashed" record
        fix = "pass --timeout the seconds one model may take (by default 900)"
        raise WorkbenchError(f"--timeout {args.timeout:g} is not a positive number of seconds", fix)
    if args.models is not None and not any(args.models.split(",")):  # "" is not every model
        raise WorkbenchError(
            "--models names no model", "name models of get_model_list(), or leave --models out for all"
        )
    records = earlier.proven(earlier.json_result(lambda r: "name" in r and "task" in r))  # an earlier --out's
    out = output_paths.check_file(args.out, "--out", ours=records) if args.out else RECORDS
    if not args.readme_only:
        names = support.zoo_names()
        unknown = sorted(set(args.models.split(",")) - set(names)) if args.models else []
        if unknown:
            raise WorkbenchError(f"Not in GluonCV's zoo: {', '.join(unknown)}", "name models of get_model_list()")
        old = {r["name"]: r for r in json.loads(RECORDS.read_text())} if RECORDS.exists() and args.models else {}
        wanted = {n: names[n] for n in args.models.split(",")} if args.models else names
        t0 = time.perf_counter()
        fresh = {r["name"]: r for r in walk(wanted, args.timeout, args.ray)}
        records = [fresh.get(n) or old[n] for n in names if n in fresh or n in old]
        if __name__ == "__main__":  # from here on, a signal must not make a written record a failure
            ignore_signals()
        # Through a link, into a FIFO or device: never replaced. An --out is recorded, so the next run may replace it.
        files.put(out, json.dumps(records, indent=1) + "\n", record=bool(args.out))
        print(f"wrote {len(records)} records to {out} ({len(fresh)} walked in {time.perf_counter() - t0:.1f} s)")
    if args.out:
        return 0
    records = json.loads(RECORDS.read_text())
    files.write_atomic(README, support.replace_table(README.read_text(), records, full=False))
    files.write_atomic(ZOO_DOC, support.replace_table(ZOO_DOC.read_text(), records))
    print(f"regenerated the support line in {README.relative_to(ROOT)} and the table in {ZOO_DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except WorkbenchError as err:
        print(err.line, file=sys.stderr)
        sys.exit(2)
