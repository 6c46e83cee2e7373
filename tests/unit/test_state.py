"""State held by what owns it: a workbench holds its registry, each registry its own targets, the
phase marks their recording, and the cycle collector is paused only when asked."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from byoc_workbench import stages
from byoc_workbench.backends import codegen, phases, registry
from byoc_workbench.backends.teaching import TEACHING
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.flow import rules
from byoc_workbench.models import demo
from byoc_workbench.session import Workbench

ROOT = Path(__file__).resolve().parents[2]


def _register(name: str, into: registry.Registry) -> None:
    mine = [rules.op_rule(name, "add", "relax.add")]
    codegen.register_codegen(name, emit=dict(TEACHING.emit), rules=mine, registry=into)


def test_two_workbenches_see_only_their_own_registrys_targets():
    one, two = registry.Registry.builtin(), registry.Registry.builtin()
    _register("chip_one", one)
    _register("chip_two", two)
    for backend in ("chip_one", None):  # chosen by name, or the target's own codegen
        wb = Workbench(demo.demo_module(), "chip_one", registry=one, backend=backend, prune_rule=stages.keep_all)
        assert wb.registry is one and wb.target.name == "chip_one"
        assert {g.backend for g in wb.stage("codegen").generated.values()} == {"chip_one"}
    for name, other in (("chip_one", two), ("chip_two", one), ("chip_one", None)):
        with pytest.raises(WorkbenchError, match=f"Unknown target '{name}'"):
            Workbench(demo.demo_module(), name, registry=other)
    assert Workbench(demo.demo_module(), "byoc-target").registry is registry.DEFAULT
    for name in ("chip_one", "chip_two"):  # the module's table, and the notebook's registry, untouched
        assert name not in rules.TARGETS and name not in registry.DEFAULT.backends


def test_a_registry_made_from_a_table_holds_a_copy_of_it():
    table = rules.Targets.builtin()
    made = registry.Registry(targets=table)
    made.add(TEACHING.backend(), rules.Target("copied", ()))
    assert "copied" in made.targets and "copied" not in table


def test_the_notebooks_registry_is_what_get_target_reads(default_registry):
    _register("notebook_chip", registry.DEFAULT)  # as notebook 04 registers its codegen
    assert rules.get_target("notebook_chip").name == "notebook_chip"
    assert Workbench(demo.demo_module(), "notebook_chip").target.name == "notebook_chip"
    default_registry.reset()
    assert "notebook_chip" not in rules.TARGETS


def test_marks_go_to_the_recording_in_force_and_nowhere_outside_one():
    outer, inner = [], []
    phases.mark("inputs")  # no recording: nothing to append to
    with phases.recording(outer):
        phases.mark("inputs")
        with phases.recording(inner):
            phases.mark("compute")
        phases.mark("compute")
    phases.mark("inputs")
    assert [p for p, _ in outer] == ["inputs", "compute"] and [p for p, _ in inner] == ["compute"]


def test_the_cycle_collector_is_left_alone_unless_asked():
    """In a process of its own (another test's widget may have asked already): importing the package,
    a workbench's stages and diagrams and a widget's own workbench aside, the collector runs unfrozen."""
    script = textwrap.dedent(
        """
        import gc
        import byoc_workbench
        from byoc_workbench.models import demo
        from byoc_workbench.session import Workbench

        def state():
            return gc.isenabled(), gc.get_freeze_count() > 0

        seen = [state()]
        wb = Workbench(demo.demo_module(), "byoc-target")
        wb.view("partition")
        wb.with_rule("byoc-target.add", False).stage("codegen")
        seen.append(state())
        paused = []
        wb = Workbench(demo.demo_module(), "byoc-target", pause_gc=True)
        wb._build_graph = lambda *a, _build=wb._build_graph: (paused.append(gc.isenabled()), _build(*a))[1]
        wb.view("merge")
        seen.append(state())
        print(seen, paused)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == "[(True, False), (True, False), (True, True)] [False]".split()
