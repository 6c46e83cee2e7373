"""Set-up only adds: an extra once installed stays, and a later plain `make lab` or `make test` reinstalls nothing.

Checked on the Makefile itself with ``make -n`` (what make would run) in a copy of the project whose
``.venv`` holds the stamps a finished set-up leaves.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")


@pytest.fixture
def project(tmp_path):
    for name in ("Makefile", "requirements.txt", "pyproject.toml", "tools/lab-overrides.json"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    return tmp_path


def would_run(project, *args) -> str:
    """What ``make -n ARGS`` would run in ``project``, as a user's own shell asks it: not with the
    variables of a make that runs this test (``make test EXTRAS=...`` passes them down in MAKEFLAGS)."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "EXTRAS", "MAKEOVERRIDES")
    }
    proc = subprocess.run(["make", "-n", *args], cwd=project, capture_output=True, text=True, check=True, env=env)
    return proc.stdout


def stamp(project, extras=()) -> None:
    """The stamps `make setup EXTRAS=...` leaves when it finishes."""
    plan = would_run(project, "setup", f"EXTRAS={','.join(extras)}")
    for line in plan.splitlines():
        if line.startswith("touch .venv/."):
            (project / line.split()[1]).touch()
        elif line.startswith("install -D"):
            (project / line.split()[-1]).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(project / line.split()[-2], project / line.split()[-1])


def test_a_fresh_set_up_installs_the_pins_the_extra_and_labs_defaults(project):
    plan = would_run(project, "setup", "EXTRAS=pytorch")
    assert "pip install --quiet -r requirements.txt" in plan and "tools/extras.py pytorch" in plan
    assert "tools/lab-overrides.json .venv/share/jupyter/lab/settings/overrides.json" in plan  # no news pop-up


def test_after_the_extra_a_plain_set_up_keeps_it_and_installs_nothing(project):
    stamp(project, ["pytorch"])
    for args in (["setup"], ["setup", "EXTRAS=pytorch"]):
        plan = would_run(project, *args)
        assert "pip install" not in plan and "rm -rf" not in plan and "install -D" not in plan, (args, plan)


def test_an_extra_added_later_is_only_added(project):
    stamp(project)
    plan = would_run(project, "setup", "EXTRAS=pytorch")
    assert "tools/extras.py pytorch" in plan
    assert "-r requirements.txt" not in plan and "rm -rf" not in plan and "venv" not in plan.replace(".venv", "")
