"""The zoo support walk: its committed records, the README line and docs/zoo.md table made from them, and a sample
of the records checked again against today's importer, on the shipped symbols (no MXNet); the records' list
against GluonCV's own (make test-mxnet)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from byoc_workbench.models import support

ROOT = Path(__file__).resolve().parents[2]
RECORDS = support.records()
# Cheap to import: one of each status, and a walk through a process of its own.
SAMPLE = ("simple_pose_resnet18_v1b", "simple_pose_resnet18_v1b_int8", "ssd_300_vgg16_atrous_voc_int8")
WALKED = "yolo3_mobilenet0.25_custom"


def test_readme_line_and_zoo_table_are_the_ones_generated_from_the_records():
    readme, doc = (ROOT / "README.md").read_text(), (ROOT / "docs" / "zoo.md").read_text()
    fix = "run: python tools/zoo_support.py --readme-only"
    assert support.replace_table(readme, RECORDS, full=False) == readme, fix
    assert support.replace_table(doc, RECORDS) == doc, fix
    assert support.zoo_summary(RECORDS) in readme and "| detection | YOLOv3 |" in doc


def test_no_model_crashed_and_each_refusal_names_the_model_and_its_ops():
    by = {r["name"]: r for r in RECORDS}
    assert len(by) == len(RECORDS) >= 100
    assert {r["status"] for r in RECORDS} <= {"converts", "refused", "not built"}
    for r in RECORDS:
        if r["status"] == "refused":
            assert r["ops"] and r["error"].startswith(f"error: {r['name']}: ")
            assert all(op in r["error"] for op in r["ops"]) and r["error"].count("\n") == 0
    families = {r["family"] for r in RECORDS if r["status"] == "converts"}
    assert {"SSD", "YOLOv3", "CenterNet", "Faster R-CNN", "FCN", "PSPNet", "DeepLabV3", "Simple Pose"} <= families


def test_table_counts_and_lists_what_stops_a_family():
    records = [
        {"name": "a", "task": "pose", "family": "P", "status": "converts", "ops": []},
        {"name": "b", "task": "pose", "family": "P", "status": "refused", "ops": ["Foo", "Bar"]},
        {"name": "c", "task": "detection", "family": "D", "status": "not built", "ops": []},
    ]
    text = support.table(records)
    assert text.startswith(
        "3 models of GluonCV's detection, segmentation and pose zoo: 1 converts, 1 refused, 1 not built"
    )
    rows = text.splitlines()[-2:]
    assert rows == ["| detection | D | 0 of 1 | not built (1) |", "| pose | P | 1 of 2 | `Bar` (1), `Foo` (1) |"]


def test_the_zoo_names_are_the_records_without_mxnet():
    names = support.zoo_names()
    assert list(names) == [r["name"] for r in RECORDS]
    assert all((r["task"], r["family"]) == names[r["name"]] for r in RECORDS)


@pytest.mark.mxnet
def test_the_records_cover_gluoncvs_own_list():
    names = support.gluoncv_names()
    assert {r["name"] for r in RECORDS} == set(names)
    assert all((r["task"], r["family"]) == names[r["name"]] for r in RECORDS)


@pytest.mark.parametrize("name", SAMPLE)
def test_a_sample_of_the_records_still_holds(name):
    committed = next(r for r in RECORDS if r["name"] == name)
    found = support.check_model(name, committed["task"], committed["family"])
    for key in ("status", "ops", "input_shape", "mxnet_ops", "relax_ops"):
        assert found[key] == committed[key], key


def test_the_walk_checks_in_a_process_of_its_own():
    committed = next(r for r in RECORDS if r["name"] == WALKED)
    (found,) = support.check_all({WALKED: (committed["task"], committed["family"])}, progress=None)
    assert {k: found[k] for k in ("status", "relax_ops")} == {k: committed[k] for k in ("status", "relax_ops")}


def test_zoo_speed_table_is_the_one_generated_from_the_committed_bench():
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_zoo

    bench = json.loads(bench_zoo.RESULTS.read_text())
    doc = bench_zoo.DOC.read_text()
    assert f"{bench_zoo.START}\n{bench_zoo.table(bench)}\n{bench_zoo.END}" in doc, (
        "run: python benchmarks/bench_zoo.py --write-only"
    )
    families = {r["family"] for r in bench["models"]}
    assert len(families) >= 6 and all(r["machine"]["cores"] for r in bench["models"])
