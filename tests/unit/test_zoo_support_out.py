"""tools/zoo_support.py --out replaces only a file an earlier --out wrote, as its folder's record proves: never a
JSON of yours, even one of ``name``/``task`` objects like its records."""

import json
import os
import signal
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


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--timeout", "nan"], "error: --timeout nan is not a positive number of seconds."),
        (["--timeout", "-5"], "error: --timeout -5 is not a positive number of seconds."),
        (["--timeout", "0"], "error: --timeout 0 is not a positive number of seconds."),
        (["--models", ""], "error: --models names no model. Fix: name models of get_model_list(), or leave --models"),
    ],
)
def test_a_timeout_or_a_model_list_it_cannot_use_is_one_line_before_any_walk(tmp_path, args, said):
    """nan was a ValueError traceback; -5 and 0 wrote a "crashed" record per model, exit 0; "" walked every model."""
    cmd = [
        sys.executable,
        str(ROOT / "tools" / "zoo_support.py"),
        "--models",
        MODEL,
        *args,
        "--out",
        str(tmp_path / "z"),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    [line] = done.stderr.splitlines()
    assert done.returncode == 2 and done.stdout == "" and line.startswith(said) and ". Fix: " in line
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(("signum", "word"), [(signal.SIGTERM, "terminated"), (signal.SIGINT, "interrupted")])
def test_a_signal_during_the_walk_is_one_line_and_writes_nothing(tmp_path, signum, word):
    """SIGTERM ended it with 143 and not a word (Ctrl-C said its line)."""
    cmd = [sys.executable, str(ROOT / "tools" / "zoo_support.py"), "--models", f"{MODEL},ssd_512_resnet50_v1_coco"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with subprocess.Popen(
        [*cmd, "--out", str(tmp_path / "z.json")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    ) as walk:
        assert walk.stdout.readline().startswith(f"[1/2] {MODEL}: ")  # the second model is being walked
        walk.send_signal(signum)
        _, stderr = walk.communicate(timeout=60)
    assert walk.returncode == 128 + signum and stderr.splitlines() == [f"{word}; nothing was written."]
    assert os.listdir(tmp_path) == []
