"""Profile and compare: the measured latency map and the per-subgraph numerics check.

Every test runs a real build; none asserts a speed. Times are checked for
consistency only: entries add up to the end-to-end time within 15% (each timed
run against the plain run beside it, the median over runs), the map's nodes
hold exactly the entries' time.
"""

import html
import json
import re

import numpy as np
import pytest
import tvm
from tvm.script import ir as I
from tvm.script import relax as R

from byoc_workbench import cli, stages
from byoc_workbench.core import ir
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.draw import latency
from byoc_workbench.flow import rules
from byoc_workbench.measure.bench import builds
from byoc_workbench.measure.check import compare as matching
from byoc_workbench.measure.check import lessons
from byoc_workbench.measure.check import numerics as checks
from byoc_workbench.measure.time import timing
from byoc_workbench.models.demo import demo_inputs
from byoc_workbench.subjects import ModelRef

RATIO = 0.15  # entries vs end-to-end, run by run


def check_ratio(p: timing.Profile):
    assert abs(p.paired - 1) <= RATIO, (
        f"entries {p.paired:.0%} of end-to-end (medians {p.total_s:.4f} s vs {p.end_to_end_s:.4f} s)"
    )


def steady_profile(built, inputs, runs: int, tries: int = 3) -> timing.Profile:
    """A profile whose entries agree with its end-to-end median, in up to ``tries`` sessions.

    Other processes on a shared 2-core machine can slow a whole session; a
    bias of the method itself would miss the 15% in every session.
    """
    seen = []
    for _ in range(tries):
        p = timing.profile(built, inputs, runs=runs)
        if abs(p.paired - 1) <= RATIO:
            return p
        seen.append(p)
    return min(seen, key=lambda p: abs(p.paired - 1))


@pytest.fixture(scope="module", params=["pruned", "unpruned"])
def demo(request):
    """The demo loop through the teaching codegen: built, profiled over 30 runs, and compared."""
    built, inputs = builds.ready(ModelRef(kind="demo"), prune=request.param == "pruned")
    return built, steady_profile(built, inputs, runs=30), checks.compare(built, inputs), inputs


def test_demo_entries_add_up_to_the_end_to_end_median(demo):
    _, p, _, _ = demo
    check_ratio(p)
    assert p.entries == sorted(p.entries, key=lambda e: -e.time_s)
    assert sum(p.by_target.values()) == pytest.approx(p.total_s)
    assert all(e.time_s >= 0 and e.calls >= 1 for e in p.entries)


def test_demo_every_subgraph_call_splits_into_boundary_and_compute(demo):
    built, p, n, _ = demo
    by_name = {e.name: e for e in p.entries}
    assert set(p.backends) == set(built.subgraphs) and set(p.backends.values()) == {"teaching"}
    for name in built.subgraphs:
        compute = by_name[name]
        assert (compute.kind, compute.target) == ("subgraph", "byoc-target")
        for phase in ("in", "out"):
            boundary = by_name[f"{name} ▸ {phase}"]
            assert (boundary.kind, boundary.target, boundary.calls) == ("boundary", "boundary", compute.calls)
    # The recursive loop calls its first subgraph once per turn: compare saw the same calls.
    assert {r.name: r.calls for r in n.rows} == {name: by_name[name].calls for name in built.subgraphs}
    assert by_name["byoc_target_1"].calls == 2


def test_demo_host_kernels_are_attributed_to_their_bindings(demo):
    built, p, _, _ = demo
    kernels = [e for e in p.entries if e.kind == "kernel"]
    assert {e.name: e.site.op for e in kernels}.get("while_loop/cond") == "less"
    g = latency.stage_graph(built)
    for e in kernels:  # each kernel's time lands on the node of the op it was legalized from
        node = g.nodes[g.sites[(e.site.function, e.site.var)]]
        assert (node.id, node.op) == (e.name, f"relax.{e.site.op}")
    # Pruned, the loop counter's add stays on the host; unpruned, it is a subgraph of its own.
    assert ("while_loop/inc" in {e.name for e in kernels}) == ("byoc_target_0" not in built.subgraphs)


def test_demo_compare_has_a_row_per_offloaded_subgraph_and_tiny_errors(demo):
    built, _, n, _ = demo
    assert [r.name for r in n.rows] == list(built.subgraphs)
    for r in n.rows:
        assert r.calls >= 1 and r.outputs
        assert r.max_rel < 1e-5 and r.max_abs < 1e-5 and not r.over
    data = json.loads(json.dumps(n.to_json()))
    assert data["over_tolerance"] == [] and len(data["subgraphs"]) == len(built.subgraphs)


def test_demo_tolerance_marks_subgraphs_in_table_and_map(demo):
    built, p, _, inputs = demo
    strict = checks.compare(built, inputs, tolerance=0.0)
    over = {r.name for r in strict.rows if r.max_rel > 0}
    assert over and {r.name for r in strict.over} == over  # conv subgraphs differ by float rounding
    text = latency.numerics_text(strict)
    assert all(f"{name}" in text for name in built.subgraphs) and text.count("OVER") == len(over)
    shaded = latency.shade(built, p, strict)
    assert {c.name for c in shaded.checks.values()} == set(built.subgraphs)
    dot = latency.to_dot(shaded, p, strict).source
    assert dot.count("✗ rel err") == len(over) and "penwidth=4" in dot


def test_demo_map_holds_exactly_the_entries_time(demo):
    built, p, _, _ = demo
    shaded = latency.shade(built, p)
    placed = sum(shaded.times.values())
    assert placed + sum(e.time_s for e in shaded.unplaced) == pytest.approx(p.total_s)
    assert {e.kind for e in shaded.unplaced} <= {"builtin", "extern"}
    for site in built.subgraphs.values():
        nid = shaded.graph.sites[(site.function, site.var)]
        assert shaded.graph.nodes[nid].kind == "packed"
        for phase in ("in", "out"):
            assert shaded.graph.nodes[f"{nid}.{phase}"].kind == "boundary"
        # Data reaches the subgraph only through its boundary node.
        assert {e.src for e in shaded.graph.edges if e.dst == nid} == {f"{nid}.in"}
    dot = latency.to_dot(shaded, p).source
    assert "time per run" in dot and " ms" in dot
    assert all(f"{target}: " in dot for target in p.by_target)


def test_demo_report_tables(demo):
    _, p, n, _ = demo
    built = demo[0]
    r = latency.report(built, p, n)
    assert r.text.splitlines()[0].startswith("entries sum")
    assert r.tables_html.count("<table") == 2 and "vs TVM alone" in r.tables_html
    # Every column is explained under its table; times never wrap ("694 / ms"); names wrap, whole in a tooltip.
    assert latency.TOP_KEY in html.unescape(r.tables_html) and latency.CHECK_KEY in html.unescape(r.tables_html)
    assert re.search(r'<td style="white-space:nowrap;text-align:right">[\d.]+ ms</td>', r.tables_html)
    assert f'title="{p.entries[0].name}"' in html.unescape(r.tables_html)
    top = latency.top_text(p, 3).splitlines()
    assert len(top) == 2 + 1 + 3 and p.entries[0].name in top[3]
    rows = latency.builds_rows({"this": p})
    assert rows[0]["subgraphs"] == len(built.subgraphs)
    assert rows[0]["boundary_s"] == pytest.approx(p.by_kind["boundary"])


@I.ir_module
class TwoAdds:
    @R.function
    def main(x: R.Tensor((4,), "float32"), y: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        with R.dataflow():
            a = R.add(x, y)
            b = R.add(x, y)
            c = R.multiply(a, b)
            R.output(c)
        return c


def test_each_call_site_is_an_entry_of_its_own():
    """LegalizeOps shares one kernel between the two identical adds; without branches the build keeps
    it shared (each call is its site by order), and the profile still gives each site its entry."""
    found = stages.run_stages(TwoAdds, [], stages.keep_all)
    built = timing.build(found)
    assert not [s for s in built.sites.values() if s.kind == "kernel"], "no kernel copied: main has no branch"
    kernels = {s.name: s.op for sites in built.in_order.values() for s in sites}
    assert kernels == {"main/a": "add", "main/b": "add", "main/c": "multiply"}
    assert sorted(len(sites) for sites in built.in_order.values()) == [1, 2]  # the adds share one kernel
    x, y = np.arange(4, dtype="float32"), np.ones(4, dtype="float32")
    p = timing.profile(built, [x, y], runs=3)
    assert {e.name for e in p.entries if e.kind == "kernel"} == set(kernels)
    assert checks.compare(built, [x, y]).rows == []  # nothing offloaded, nothing to compare
    out = built.vm["main"](*[tvm.runtime.tensor(v) for v in (x, y)]).numpy()
    np.testing.assert_array_equal(out, (x + y) ** 2)


def test_build_refuses_subgraphs_no_backend_compiled(demo_mod):
    found = stages.run_stages(demo_mod, rules.get_target("tensorrt").rules, stages.no_mac())
    assert ir.subgraph_functions(found[-1].mod)  # tensorrt has no codegen of its own here
    with pytest.raises(WorkbenchError, match="not compiled"):
        timing.build(found)


@pytest.mark.parametrize(
    "got, ref, expected",
    [
        ([1.0, 2.0], [1.0, 2.0], (0.0, 0.0)),
        ([1.0, 2.5], [1.0, 2.0], (0.5, 0.25)),
        ([1e-9, 4.0], [0.0, 4.0], (1e-9, 2.5e-10)),  # near zero: relative to the output's scale
        ([np.nan, 1.0], [1.0, 1.0], (np.inf, np.inf)),
        ([1.0], [1.0, 1.0], (np.inf, np.inf)),
    ],
)
def test_output_error(got, ref, expected):
    assert matching.output_error(np.array(got), np.array(ref)) == pytest.approx(expected)


def test_cli_profile_and_compare_demo(tmp_path, capsys):
    assert cli.main(["profile", "demo", "--runs", "5", "--json", "--out", str(tmp_path)]) == 0
    printed = json.loads(capsys.readouterr().out)
    saved = json.loads((tmp_path / "profile.json").read_text())
    assert printed.keys() == saved.keys() >= {"total_s", "by_target", "entries", "end_to_end_s"}
    assert set(saved["entries"][0]) >= {"name", "target", "kind", "time_s", "calls"}
    assert (tmp_path / "profile.svg").read_text().lstrip().startswith("<?xml")
    assert cli.main(["compare", "demo", "--no-prune", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "byoc_target_0" in out and "OVER" not in out
    assert cli.main(["compare", "demo", "--tolerance", "0"]) == 1  # float rounding is over a zero tolerance
    assert cli.main(["profile", "demo", "--runs", "0"]) == 2


def test_ssd_onnxruntime_profile_and_compare():
    """An SSD with onnxruntime, seeded weights, float32: pruned and unpruned maps; errors under 1e-3. The
    MobileNet SSD: the same heads, anchors and NMS as the ResNet-50 one, whose backbone TVM alone would rerun
    for the numerics for a minute on two cores."""
    pytest.importorskip("onnxruntime", reason="the onnxruntime backend needs onnxruntime")
    from byoc_workbench import workflow

    wb, _ = workflow.model_workbench("ssd_512_mobilenet1.0_coco", weights="untrained")
    profiles = {}
    for label in ("pruned", "unpruned"):
        built, inputs = builds.model_build("onnxruntime", prune=label == "pruned", workbench=wb)
        p = steady_profile(built, inputs, runs=5)  # three sessions: the other test worker shares the cores
        check_ratio(p)
        assert all(e.calls == 1 for e in p.entries if e.kind == "kernel")  # one kernel per call site
        assert set(p.backends.values()) == {"onnxruntime (CPU)"} and p.mark
        shaded = latency.shade(built, p, collapse=True)
        dot = latency.to_dot(shaded, p).source
        assert sum(n.kind == "boundary" for n in shaded.graph.nodes.values()) == 2 * len(built.subgraphs)
        for site in built.subgraphs.values():
            nid = shaded.graph.sites[(site.function, site.var)]
            assert f"{nid}.in" in dot and f"{nid}.out" in dot and f"into {site.name}" in dot
        profiles[label] = p
        if label == "pruned":
            n = checks.compare(built, inputs)
            assert [r.name for r in n.rows] == list(built.subgraphs)
            assert n.worst.max_rel < 1e-3, latency.numerics_text(n)
    assert len(profiles["unpruned"].backends) > len(profiles["pruned"].backends)


def test_time_view_of_a_workbench_is_its_codegen_diagram_shaded(demo_mod, byoc):
    from byoc_workbench.session import Workbench

    wb = Workbench(demo_mod, byoc)
    built = timing.build(wb.stages)
    p = timing.profile(built, demo_inputs(), runs=3)
    svg = latency.time_view(wb.stage("codegen"), wb.graph("codegen"), wb.title("codegen"), built, p)
    assert "time per run" in svg and "into byoc_target_1" in svg and "— measured" in svg
    other = wb.with_rule("byoc-target.add", False)
    with pytest.raises(WorkbenchError, match="another build"):
        latency.time_view(other.stage("codegen"), other.graph("codegen"), other.title("codegen"), built, p)


def test_lesson_stacks_the_builds_and_shows_each_table_once():
    found = {
        "pruned": builds.ready(ModelRef(kind="demo")),
        "unpruned": builds.ready(ModelRef(kind="demo"), prune=False),
    }
    lesson = lessons.timed_and_checked(found, runs=3, compare=["unpruned"])
    assert list(lesson.profiles) == ["pruned", "unpruned"] and list(lesson.numerics) == ["unpruned"]
    page = lesson._repr_html_()
    assert page.count("<svg") == 2 and "pruned: measured" in page and "calls crossing" in page
    assert "display:flex" not in page, "one map under the other: side by side they are too small to read"
    assert page.index("pruned: measured") < page.index("unpruned: measured")
    assert page.count("Offloaded subgraphs vs TVM alone") == 1, "the numerics table comes once"
    assert "byoc_target_0" in page.split("unpruned: measured")[1]  # the unpruned build's tiny subgraph is checked
    assert latency.BUILDS_KEY in html.unescape(page), "the builds table says what entries are"
