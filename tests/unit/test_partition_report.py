"""The partitioning report names, beside each op the host keeps, the other targets that could take it."""

import pytest

from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.flow import rules
from byoc_workbench.models import demo
from byoc_workbench.session import Workbench


def test_each_host_op_names_the_targets_that_could_take_it():
    report = Workbench(demo.demo_module(), "tensorrt").report()
    rows = {r["op"]: r for r in report.ops}
    assert rows["relax.less"]["why"] == {"no rule": 1}  # TensorRT's table has no comparison
    assert rows["relax.less"]["others"] == ["onnxruntime", "openvino", "torch"]  # the runtimes take it
    assert all(r["others"] == [] for r in report.ops if not r["host"])  # nothing to say where nothing is left
    assert "less" in report.text() and "onnxruntime, openvino, torch could take it" in report.text()
    assert report.to_json()["ops"] == report.ops


def test_the_targets_it_names_are_the_ones_given():
    only = rules.Targets()
    only.add(rules.get_target("tensorrt"))
    only.add(rules.get_target("byoc-target"))
    report = Workbench(demo.demo_module(), "tensorrt").report(targets=only)
    less = next(r for r in report.ops if r["op"] == "relax.less")
    assert less["others"] == [] and "no other target could" in report.text()


def test_targets_that_are_not_a_table_are_one_line():
    wb = Workbench(demo.demo_module(), "byoc-target")
    for bad in ("x", ["tensorrt"], 5):
        with pytest.raises(WorkbenchError, match="targets must be a rules.Targets table") as err:
            wb.report(targets=bad)
        assert "\n" not in str(err.value) and type(bad).__name__ in str(err.value)
