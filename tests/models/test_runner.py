"""build_and_run as in the seed, on the demo loop: outputs, latency, the runtime's structure, the artifacts;
the detections' slider (its pure twin); the bench's parsing and comparisons."""

import dataclasses

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from byoc_workbench import stages  # noqa: E402
from byoc_workbench.core.errors import WorkbenchError  # noqa: E402
from byoc_workbench.draw import counts  # noqa: E402
from byoc_workbench.draw import detections as viz  # noqa: E402
from byoc_workbench.measure.bench import bench
from byoc_workbench.measure.time import clock, runner
from byoc_workbench.models import demo  # noqa: E402


@pytest.fixture(scope="module")
def found(demo_mod, byoc):
    return stages.run_stages(demo_mod, byoc.rules, stages.no_mac())


def test_tvm_alone_has_no_external_functions(demo_mod, reference_output):
    run = runner.build_and_run(demo_mod, demo.demo_inputs(), repeat=3, warmup=1, label="tvm", progress=False)
    np.testing.assert_allclose(run.outputs, reference_output, rtol=1e-5, atol=1e-5)
    assert run.latency.runs == 3 and run.latency.warmup == 1
    assert run.latency.min_s <= run.latency.median_s <= run.latency.max_s
    assert run.backend == "tvm alone (llvm)"
    s = run.structure
    assert s.executable == "relax.VMExecutable" and s.libraries == ("llvm",)
    assert s.functions == ("main", "while_loop") and s.externals == ()
    assert {"add", "less"} <= set(s.kernels) and all(b.startswith("vm.builtin.") for b in s.builtins)
    assert run.artifact() == "nothing was offloaded: TVM compiled the whole module"


def test_partitioned_module_compiled_by_the_backend_named(found, reference_output):
    pytest.importorskip("onnxruntime", reason="the onnxruntime backend needs onnxruntime")
    run = runner.build_and_run(found[-2].mod, demo.demo_inputs(), repeat=2, backend="onnxruntime", progress=False)
    np.testing.assert_allclose(run.outputs, reference_output, rtol=1e-4, atol=1e-4)
    assert [(e.subgraph, e.backend) for e in run.structure.externals] == [
        ("byoc_target_1", "onnxruntime (CPU)"),
        ("byoc_target_2", "onnxruntime (CPU)"),
    ]
    assert all(e.symbol.startswith(f"byoc_workbench.onnxruntime.{e.subgraph}.") for e in run.structure.externals)
    assert "conv2d" not in run.structure.kernels, "the convolutions left the host"
    assert run.backend == "onnxruntime (CPU) + tvm (llvm) for the rest"
    art = run.artifact("byoc_target_1", lines=3)
    assert art.splitlines()[0] == "# byoc_target_1, compiled by onnxruntime (CPU)"
    assert art.splitlines()[1].endswith("on CPUExecutionProvider") and "# ONNX model byoc_target_1" in art
    assert art.endswith("more lines") and len(art.splitlines()) == 5
    text = str(run)
    assert "external functions (2):" in text and "held by onnxruntime (CPU)" in text


def test_codegen_stage_keeps_its_compiled_subgraphs(found, reference_output):
    run = runner.build_and_run(found[-1], demo.demo_inputs(), repeat=1, progress=False)  # the teaching codegen
    np.testing.assert_allclose(run.outputs, reference_output, rtol=1e-4, atol=1e-4)
    assert {e.backend for e in run.structure.externals} == {"teaching"}
    assert "def " in run.artifact()  # readable NumPy source


def test_printouts_fit_a_notebook_line_and_nest_no_parentheses(demo_mod):
    from byoc_workbench.core import text

    line = runner.offload_choice().line
    assert all(len(ln) <= text.WIDTH for ln in line.splitlines()), line
    depth, deepest = 0, 0
    for ch in line:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        deepest = max(deepest, depth)
    assert deepest <= 1 and depth == 0, line
    run = runner.build_and_run(demo_mod, demo.demo_inputs(), repeat=1, label="x" * 40, progress=False)
    run.ran = dataclasses.replace(run.ran, refused={"tensorrt": "a long reason " * 12})
    for printout in (run.line(), runner.speedup_table([run, run])):
        assert all(len(ln) <= text.WIDTH for ln in printout.splitlines()), printout
    table = runner.speedup_table([run, run])
    assert table.count("note: TensorRT not available:") == 1  # why TensorRT did not run, said once under the rows
    assert "depends on the machine" in table and " cores" in table


def test_a_bar_draws_on_a_terminal_and_nothing_into_a_pipe(capsys):
    import fcntl
    import os
    import pty
    import select
    import struct
    import subprocess
    import sys
    import termios

    from byoc_workbench.core import progress

    code = "from byoc_workbench.core import progress\nwith progress.bar(3, 'work') as b:\n    b.update(3)\n"
    main, tty = pty.openpty()
    fcntl.ioctl(tty, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))  # a new terminal is 0 columns wide
    subprocess.run([sys.executable, "-c", code], stdin=subprocess.DEVNULL, stderr=tty, check=True, timeout=60)
    drawn = os.read(main, 4096) if select.select([main], [], [], 10)[0] else b""  # while the terminal is open
    os.close(tty)
    os.close(main)
    assert b"work" in drawn and b"\r" in drawn  # a terminal sees the bar, redrawn in place

    assert not progress.in_notebook()
    with progress.bar(3, "work", enabled=True) as bar:  # pytest's stderr is no terminal: a log, a pipe
        bar.update()
        bar.phase("more work", 2, "call")
        bar.update(2)
        bar.done = "work: done"
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""  # no "\r" redraws left in a log; the done line is a notebook's


def test_auto_says_what_ran_and_what_refused(found):
    from byoc_workbench.backends import tensorrt

    why = tensorrt.missing()
    if why is None:
        pytest.skip("TensorRT runs here: auto takes it")
    pytest.importorskip("onnxruntime", reason="auto falls to onnxruntime")
    run = runner.build_and_run(found[-2].mod, demo.demo_inputs(), repeat=1, backend="auto", progress=False)
    assert run.backend.startswith("onnxruntime (CPU) + tvm (llvm) for the rest — TensorRT not available: ")
    assert runner.offload_choice().backend == "onnxruntime" and "ONNX Runtime (CPU)" in runner.offload_choice().line


def test_measure_and_the_slow_baseline_bar(demo_mod):
    calls = []
    lat = clock.measure(lambda: calls.append(1), repeat=4, warmup=2, progress=False)
    assert len(calls) == 6 and lat.runs == 4
    with pytest.raises(WorkbenchError, match="repeat must be 1 or more"):
        clock.measure(lambda: None, repeat=0)
    # warmup=0: the first run is watched call by call (a bar), and its outputs are kept all the same.
    run = runner.build_and_run(demo_mod, demo.demo_inputs(), repeat=1, warmup=0, progress=True)
    assert run.latency.runs == 1 and "(1 run, after 0 warm-up)" in run.line()


def test_a_race_times_two_builds_in_turn_on_their_own_inputs(found, demo_mod):
    """runner.race: the verdict notebook 02 prints comes from rounds that take each build once, in turn."""
    alone = runner.build_and_run(demo_mod, demo.demo_inputs(), repeat=1, progress=False, label="alone")
    offloaded = runner.build_and_run(found[-1], demo.demo_inputs(), repeat=1, progress=False, label="offloaded")
    np.testing.assert_allclose(offloaded.call().numpy(), offloaded.outputs, rtol=1e-6)  # on the same inputs
    order = []
    for run in (alone, offloaded):
        run.call = (lambda call, label: lambda: order.append(label) or call())(run.call, run.label)
    line = runner.race(alone, offloaded, rounds=3)
    assert order == ["alone", "offloaded"] * 4  # a warm-up each, then three rounds
    assert line.startswith("3 rounds, each build once a round: '") and "half the wider spread" in line


def test_speedup_table_names_backends_and_mark(found, demo_mod):
    a = runner.build_and_run(
        demo_mod, demo.demo_inputs(), repeat=1, label="tvm", mark="untrained weights", progress=False
    )
    b = runner.build_and_run(found[-1], demo.demo_inputs(), repeat=1, label="teaching", progress=False)
    text = runner.speedup_table([a, b])
    rows = text.splitlines()
    assert rows[1].startswith("tvm") and rows[1].rstrip().endswith("1.0x  tvm alone (llvm)")
    assert rows[2].endswith("teaching + tvm (llvm) for the rest")
    assert rows[-1] == "[untrained weights]"


def test_profile_of_one_function(found):
    part = found[4].mod
    whole = counts.profile_graph(part)
    one = counts.profile_graph(part, function="byoc_target_1")
    assert one.subgraphs == {"byoc-target": 1} and 0 < one.total < whole.total
    assert one.by_op["relax.nn.conv2d"] == 1


def test_threshold_view_is_the_sliders_pure_twin():
    ids = np.array([[[0], [1], [-1], [1]]], "float32")
    scores = np.array([[[0.9], [0.4], [0.99], [0.55]]], "float32")
    boxes = np.arange(16, dtype="float32").reshape(1, 4, 4)
    view = viz.at_threshold(ids, scores, boxes, ["person", "bicycle"], 0.5, mark="untrained weights")
    assert [(n, round(s, 2)) for n, s, _ in view.shown] == [("person", 0.9), ("bicycle", 0.55)]
    assert view.caption == "showing all 2 detections with score ≥ 0.50 — untrained weights"
    low = viz.at_threshold(ids, scores, boxes, ["person"], 0.3, top=1)
    assert low.found == 3 and [n for n, _, _ in low.shown] == ["person"]
    assert low.caption == "showing 1 of 3 detections with score ≥ 0.30"
    assert viz.at_threshold(ids, scores, boxes, (), 0.95).caption == "showing 0 detections with score ≥ 0.95"
    assert viz.at_threshold(ids, scores, boxes, (), 0.5).shown[1][0] == "class 1"


def test_slider_redraws_on_a_new_threshold():
    pytest.importorskip("ipywidgets")
    from byoc_workbench.widgets.detection_view import detections_slider

    picture = np.zeros((40, 40, 3), "uint8")
    dets = {"ids": np.zeros((1, 3, 1)), "scores": np.array([[[0.9], [0.6], [0.3]]]), "boxes": np.ones((1, 3, 4))}
    w = detections_slider(picture, dets, ["person"], thresh=0.5, mark="untrained weights")
    slider, caption, body = w.children
    image, table = body.children
    assert caption.value == "showing all 2 detections with score ≥ 0.50 — untrained weights"
    first = image.value
    assert first[:8] == b"\x89PNG\r\n\x1a\n"
    assert table.value.count("<tr>") == 3  # the head and both boxes, by the rank drawn on each
    slider.value = 0.2
    assert caption.value.startswith("showing all 3 detections with score ≥ 0.20") and image.value != first
    assert table.value.count("<tr>") == 4


def test_bench_parses_backends_in_one_line():
    assert bench.parse_backends("tvm, onnxruntime,tvm") == ("tvm", "onnxruntime")
    with pytest.raises(WorkbenchError) as err:
        bench.parse_backends("tvm,tensorRT")
    assert "tensorRT" in err.value.line and "\n" not in err.value.line


def test_bench_speedups_checks_and_targets():
    """The comparisons behind the JSON, on made-up latencies and real detection arrays."""
    arrays = [np.array([[[1.0], [2.0]]]), np.array([[[0.9], [0.8]]]), np.array([[[0, 0, 5, 5], [1, 1, 9, 9]]], "f")]
    dets = dict(zip(("ids", "scores", "boxes"), arrays))  # as outputs.prediction gives them
    moved = {k: a.copy() for k, a in dets.items()}
    moved["boxes"][0, 1, 0] += 1.0
    result = {
        "backends": {
            "tvm": {"median_s": 30.0},
            "onnxruntime": {"median_s": 0.3},
            "onnxruntime_unpruned": {"median_s": 0.6},
        },
        "anchors": {"mxnet": {"median_s": 0.31}, "onnxruntime_whole_model": {"median_s": 0.2}},
        "speedup_vs_tvm": {},
        "outputs_match": {},
        "differences": {},
        "detections": {},
    }
    bench._compare(
        result,
        {
            "tvm": dets,
            "onnxruntime": dets,
            "onnxruntime_unpruned": moved,
            "mxnet": dets,
            "onnxruntime_whole_model": moved,
        },
    )
    assert result["speedup_vs_tvm"]["onnxruntime"] == pytest.approx(100.0)
    assert result["outputs_match"] == {
        "onnxruntime": True,
        "onnxruntime_unpruned": False,
        "mxnet": True,
        "onnxruntime_whole_model": False,
    }
    assert result["detections"]["onnxruntime_unpruned"] == {"found": 1, "of": 2}
    assert result["differences"]["onnxruntime"] == [] and result["differences"]["onnxruntime_unpruned"]
    t = result["targets"]
    assert t["backend"] == "onnxruntime" and t["at_least_50x_faster_than_tvm"] and t["faster_than_mxnet"]
    assert t["vs_onnxruntime_whole_model"] == pytest.approx(1.5) and not t["within_1.3x_of_onnxruntime_whole_model"]


def test_a_subgraphs_bill_offloaded_and_on_the_host():
    """The demo's lone add (byoc_target_0): offloaded in the unpruned build, a host kernel once pruned."""
    pytest.importorskip("onnxruntime", reason="the onnxruntime backend needs onnxruntime")
    from byoc_workbench.measure.bench import builds as ready
    from byoc_workbench.measure.time import timing
    from byoc_workbench.subjects import ModelRef

    builds = {k: ready.ready(ModelRef(kind="demo"), "onnxruntime", prune=k == "pruned") for k in ("pruned", "unpruned")}
    profiles = {k: timing.profile(built, inputs, runs=2) for k, (built, inputs) in builds.items()}
    partitioned = builds["unpruned"][0].partitioned
    cost = runner.subgraph_cost(profiles["unpruned"], profiles["pruned"], "byoc_target_0", partitioned)
    assert cost.host_kernels == 1 and cost.host_s > 0  # while_loop/inc, on TVM after pruning
    assert cost.compute_s > 0 and cost.boundary_s > 0
    line = runner.subgraph_cost_line(cost, "onnxruntime (CPU)")
    assert line.startswith("byoc_target_0: offloaded to onnxruntime (CPU) ") and "(1 kernels)" in line
    # byoc_target_1 stays offloaded in both builds: nothing of it runs on the host.
    assert (
        runner.subgraph_cost(profiles["unpruned"], profiles["pruned"], "byoc_target_1", partitioned).host_kernels == 0
    )
