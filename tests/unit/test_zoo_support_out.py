"""tools/zoo_support.py --out replaces only a file an earlier --out wrote, as its folder's record proves: never a
JSON of yours, even one of ``name``/``task`` objects like its records."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

#: A fresh process (or several) per case, signals and tools: make test runs them, make test-fast does not.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
MODEL = "simple_pose_resnet18_v1b"  # converts in about a second


def _zoo_support(out: Path):
    cmd = [sys.executable, str(ROOT / "tools" / "zoo_support.py"), "--models", MODEL, "--out", str(out)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def test_out_never_replaces_a_json_of_yours(tmp_path):
    """A to-do list of name/task objects was replaced by the zoo's records, exit 0."""
    todo = tmp_path / "todo.json"
    todo.write_text('[{"name": "buy milk", "task": "shopping", "done": false}]')
    done = _zoo_support(todo)
    [line] = done.stderr.splitlines()
    assert done.returncode == 2 and done.stdout == ""
    assert line == (
        f"error: --out {todo} holds something else than a result --out wrote: writing it would destroy it. "
        "Fix: pass --out another path, or move todo.json away first."
    )
    assert todo.read_text() == '[{"name": "buy milk", "task": "shopping", "done": false}]'


def test_out_replaces_the_records_an_earlier_out_wrote_until_they_are_changed(tmp_path):
    out = tmp_path / "zoo.json"
    for _ in range(2):  # the second run replaces what the first wrote: the record proves it
        done = _zoo_support(out)
        assert done.returncode == 0, done.stderr
        assert MODEL in {r["name"] for r in json.loads(out.read_text())}
    records = json.loads(out.read_text())
    records[0]["status"] = "edited by hand"  # changed since: no longer what the record proves
    out.write_text(json.dumps(records))
    done = _zoo_support(out)
    assert done.returncode == 2 and done.stderr.startswith(f"error: --out {out} holds something else")
    assert json.loads(out.read_text())[0]["status"] == "edited by hand"
