"""bench, search and the zoo walk on a two-node Ray cluster (``ray.cluster_utils.Cluster``), against a run here.

Each node offers one ``timing`` resource and one CPU. What is checked, whatever
the timings: the bench's verdicts (what ran, which outputs match, what differs),
the search's units, placements and choice, and the walk's records are those of a
run on one machine; no two timing tasks overlapped on a node (from the intervals
each task recorded); a task that raises is one line while the others finish; and
Ctrl-C ends a cluster bench in one line, exit status 130, with nothing half-written.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from messages import one_line

ray = pytest.importorskip("ray", reason="the Ray tests need the [cluster] extra: pip install 'byoc-workbench[cluster]'")
pytest.importorskip("onnxruntime", reason="bench and search offload to onnxruntime")

from byoc_workbench import cli  # noqa: E402
from byoc_workbench.measure import search  # noqa: E402
from byoc_workbench.measure.bench import bench  # noqa: E402

POSE, CLASSIFIER = "simple_pose_resnet18_v1b", "mobilenetv3_small"  # the cheapest zoo models to build
BACKENDS = ("onnxruntime", "openvino", "tvm") if importlib.util.find_spec("openvino") else ("onnxruntime", "tvm")
PRECISION = "f16" if "openvino" in BACKENDS else "f32"  # f16: the reduced-precision variants are tasks too
# What a bench decides, as against what it timed: equal on any machine.
VERDICTS = ("model", "task", "family", "input_shape", "reference", "outputs_match", "differences")
VERDICTS += ("detections", "skipped", "weights", "weights_label", "warnings")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Two nodes, each with one CPU and one ``timing``; the nodes' workers and this process share one cache."""
    from ray.cluster_utils import Cluster

    cache = tmp_path_factory.mktemp("cache")
    patch = pytest.MonkeyPatch()
    patch.setenv("BYOC_WORKBENCH_CACHE", str(cache))  # before the nodes start: their workers inherit it
    nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": {"timing": 1}})
    nodes.add_node(num_cpus=1, resources={"timing": 1})
    nodes.wait_for_nodes()
    ray.init(address=nodes.address, logging_level=logging.ERROR, log_to_driver=False)
    yield nodes.address, cache
    ray.shutdown()
    nodes.shutdown()
    patch.undo()


def no_overlap(intervals: list) -> None:
    """``intervals`` (``{"node", "start", "end"}``) are, node by node, one after another."""
    by_node: dict = {}
    for i in intervals:
        by_node.setdefault(i["node"], []).append((i["start"], i["end"]))
    for node, runs in by_node.items():
        runs.sort()
        for (_, end), (start, _) in zip(runs, runs[1:]):
            assert start >= end, f"two timing tasks overlapped on node {node}"


def verdicts(result: dict) -> dict:
    ran = {label: e["ran_on"] for label, e in result["backends"].items()}
    return {k: result[k] for k in VERDICTS} | {"ran_on": ran}


def test_bench_on_two_nodes_gives_the_serial_verdicts(cluster, tmp_path):
    address, _ = cluster
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not an onnx model\x00\x01")
    models = [{"kind": "demo"}, {"kind": "onnx", "path": str(broken)}]
    models += [{"kind": "ssd", "model": m, "weights": "untrained"} for m in (POSE, CLASSIFIER)]
    options = {"repeat": 2, "anchors": False, "progress": False}
    spread = bench.bench_models(models, ray_address=address, **options)
    here = bench.bench_models(models, **options)
    assert [r["model"] for r in spread] == [r["model"] for r in here]
    # The file the importer refuses is one line in its place; the others finished.
    assert "broken.onnx" in one_line(spread[1]["error"]) and spread[1] == here[1]
    done = [r for r in spread if "error" not in r]
    assert len(done) == len(models) - 1
    assert [verdicts(r) for r in done] == [verdicts(r) for r in here if "error" not in r]
    assert all(all(r["outputs_match"].values()) and r["outputs_match"] for r in done)
    assert {k for r in done for k in r} == set(bench.LAYOUT)
    intervals = [r["machine"]["task"] for r in done]
    no_overlap(intervals)
    assert len({i["node"] for i in intervals}) == 2  # four tasks, one timing at a time per node: both nodes worked


def test_search_on_two_nodes_chooses_what_a_search_here_chooses(cluster):
    address, _ = cluster
    subject = search.load({"kind": "demo"})
    # Measured on the nodes, into the cache they share with this process (a fresh one: nothing is cached)...
    spread = search.search(subject, BACKENDS, runs=3, precision=PRECISION, ray_address=address)
    tasks = spread.measurements["tasks"]
    # Every build but TVM alone's (the reference, built here) was a task: also those after learning, at f16.
    assert tasks and all(t["error"] == "" for t in tasks) and len(tasks) == spread.measurements["builds"] - 1
    assert PRECISION == "f32" or any("f16 asked" in t["what"] for t in tasks)
    no_overlap(tasks)
    # ...then the search here, on the measurements the nodes made: it measures nothing and chooses the same.
    here = search.search(subject, BACKENDS, runs=3, precision=PRECISION, only_cached=True)
    assert here.measurements["builds"] == 0
    assert [u["seams"] for u in spread.units] == [u["seams"] for u in here.units] == [[], [], [1]]
    rows = [[(r.what, r.assign, r.equal, r.rejected, r.predicted_s) for r in x.placements] for x in (spread, here)]
    assert rows[0] == rows[1]
    assert spread.chosen is not None and spread.chosen.assign == here.chosen.assign
    assert spread.to_json()["baseline"].keys() == here.to_json()["baseline"].keys()


def test_the_walk_on_two_nodes_gives_the_committed_records(cluster):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
    import zoo_support

    from byoc_workbench.models import support

    committed = {r["name"]: r for r in support.records()}
    names = ["yolo3_mobilenet0.25_custom", "not_a_zoo_model"]  # the second: not shipped, so not built
    found = zoo_support.walk({n: ("detection", "YOLOv3") for n in names}, 600.0, cluster[0])
    assert [r["name"] for r in found] == names
    drop = ("seconds",)
    assert {k: v for k, v in found[0].items() if k not in drop} == {
        k: v for k, v in committed[names[0]].items() if k not in drop
    }
    assert found[1]["status"] == "not built" and "not_a_zoo_model" in found[1]["error"]


def test_ctrl_c_stops_the_cluster_bench_in_one_line(cluster, tmp_path):
    address, cache = cluster
    out = tmp_path / "bench.json"
    models = ["demo", CLASSIFIER]
    cmd = [sys.executable, "-m", "byoc_workbench", "bench", *models, "--weights", "untrained", "--no-anchors"]
    cmd += ["--repeat", "50", "--ray", address, "--out", str(out)]
    env = dict(os.environ, BYOC_WORKBENCH_CACHE=str(cache), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = proc.stderr.readline()  # connected: the tasks are submitted
    assert first.startswith("ray: "), first
    time.sleep(3.0)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    if proc.returncode == 0:
        pytest.skip("the bench finished within 3 s of starting its tasks")
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "interrupted; nothing was written.", err
    assert "Traceback" not in err
    assert not out.exists(), "no half-written result"
    leftovers = [p for p in cache.rglob("*") if p.is_file() and p.name.startswith(".")]
    assert leftovers == [], "no half-written cache entry"


def test_a_model_taken_for_the_address_is_one_line(capsys):
    assert cli.main(["bench", "--ray", "demo"]) == 2
    assert "put --ray after the models" in one_line(capsys.readouterr().err.strip())


@pytest.mark.parametrize(
    "address, said",
    [
        ("ray://127.0.0.1:9", "No Ray cluster answers at ray://127.0.0.1:9"),  # nothing listens: said in seconds
        ("ray://head-without-port", "is not a Ray address"),
        ("127.0.0.1:9", "No Ray cluster answers at 127.0.0.1:9"),  # a head's address: no C++ log, no 35 s wait
    ],
)
def test_a_ray_address_that_does_not_answer_is_one_line(address, said):
    """The address forms the docs give, in a fresh process (this one is connected to the test's cluster)."""
    cmd = [sys.executable, "-m", "byoc_workbench", "search", "demo", "--backends", "onnxruntime,tvm", "--ray", address]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert said in one_line(done.stderr.strip()), done.stderr
    assert time.perf_counter() - t0 < 30
