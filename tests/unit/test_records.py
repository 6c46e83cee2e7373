"""Records between modules, words at the edge: with every prune note, refusal, unmatched-rule note and
missing backend said otherwise, what read them still works (the partition report's why, the search's
refusals, the offload choice line, the grouped notes, where a build ran)."""

import itertools

import pytest

from byoc_workbench import stages
from byoc_workbench.backends import registry, tensorrt
from byoc_workbench.backends.base import Compiled
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.flow import rules, summary
from byoc_workbench.flow.report import partition_report
from byoc_workbench.measure import search
from byoc_workbench.measure.time import runner


@pytest.fixture
def reworded(monkeypatch):
    """Every message a module once parsed back from another, in other words."""
    monkeypatch.setattr(stages, "returned_notes", lambda returned: [f"PRUNED {len(returned)}"])
    monkeypatch.setattr(stages, "describe", lambda generated, skipped: ["THE CODEGEN SAID SOMETHING"])
    monkeypatch.setattr(registry, "refusal", lambda tried: "REFUSED BY " + "/".join(b for b, _ in tried))
    for module in (stages, summary):  # the note's one renderer, under both names it is imported by

        def idle(matches):
            return [f"<{q}> IDLE" for q, n in matches.items() if n == 0]

        monkeypatch.setattr(module, "unmatched_notes", idle)


def test_the_partition_report_reads_why_each_subgraph_was_pruned(reworded, demo_mod, byoc):
    found = stages.run_stages(demo_mod, byoc.rules, stages.no_mac())
    prune = summary.stage(found, "prune")
    assert prune.notes == ["PRUNED 1"] and prune.returned == {"byoc_target_0": "0 MAC ops (needs 1)"}
    report = partition_report(found, byoc.rules, byoc.rules, byoc.name)
    assert report.pruned_why == {"byoc_target_0": "0 MAC ops (needs 1)"}
    assert "pruned: 0 MAC ops (needs 1)" in report.text() and report.to_json()["pruned"] == report.pruned_why


def test_the_stages_group_the_rules_that_matched_nothing(reworded, demo_mod):
    annotate = list(itertools.islice(stages.iter_stages(demo_mod, rules.get_target("tensorrt").rules), 3))[-1]
    idle = [q for q, n in annotate.rule_matches.items() if n == 0]
    assert len(idle) >= 2 and annotate.notes[0] == f"<{idle[0]}> IDLE"
    out = summary.stages_text([annotate])
    assert f"{len(idle)} rules matched nothing: {idle[0]}" in out and "IDLE" not in out


def test_the_search_reads_each_refusal(reworded, tmp_path, monkeypatch):
    """Without a C compiler the c backend refuses every unit it is given: each cost says so, as the
    codegen stage kept it, whatever its notes say."""
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    monkeypatch.setenv("BYOC_WORKBENCH_CACHE", str(tmp_path / "cache"))
    units = search.plan_for(search.load({"kind": "demo"}), ("c", "tvm")).units
    assign = {u: "c" for u in units}
    out = search.measure_candidate({"model": {"kind": "demo"}, "backends": ["c", "tvm"], "assign": assign, "runs": 1})
    assert {u: c["refused"] for u, c in out["costs"].items()} == {u: "REFUSED BY c" for u in units}


def test_the_offload_choice_line_says_the_missing_backends_cause(monkeypatch):
    def check():
        raise WorkbenchError("The GPU went fishing", "call it back")

    monkeypatch.setattr(tensorrt, "tensorrt_and_gpu", check)
    why = tensorrt.missing()
    assert (why.cause, why.fix) == ("The GPU went fishing", "call it back")
    choice = runner.offload_choice()
    assert choice.backend != "tensorrt"
    assert " ".join(choice.line.split()).startswith("No TensorRT here: The GPU went fishing. The offloaded subgraphs")


def test_where_a_build_ran_is_a_record_the_printouts_say():
    teaching = Compiled("byoc_target_1", "sym", "", 1, "teaching", tried=[("tensorrt", "no GPU"), ("c", "no cc")])
    ran = runner.RanOn.of({"byoc_target_1": teaching}, {"byoc_target_0": "anything"})
    assert (ran.backends, ran.tvm_target, ran.back_on_tvm) == (("teaching",), "llvm", 1)
    assert ran.refused == {"tensorrt": "no GPU", "c": "no cc"}
    assert ran.ran() == "teaching + tvm (llvm) for the rest; 1 subgraph(s) back on tvm"
    assert ran.why() == ["TensorRT not available: no GPU", "c not available: no cc"]
    assert str(ran) == " — ".join([ran.ran(), *ran.why()])
    assert str(runner.RanOn.of({}, tvm_target="cuda")) == "tvm alone (cuda)"


def test_a_placement_label_is_read_back_by_the_record_that_writes_it():
    from byoc_workbench.measure.search.placement import Segment

    sizes = {"tensorrt_0": 120, "onnx.main_1": 3}
    for seg in (
        Segment("tensorrt_0", 0, 120, 120),
        Segment("tensorrt_0", 40, 80, 120),
        Segment("onnx.main_1", 0, 1, 3),
    ):
        assert Segment.from_label(seg.label, sizes) == seg
    assert Segment("tensorrt_0", 0, 120, 120).label == "tensorrt_0"  # the whole unit: its name alone
    for bad, said in [("tensorrt_1", "Unknown unit"), ("tensorrt_0[80:40]", "within 0..120"), (7, "Unknown unit")]:
        with pytest.raises(WorkbenchError, match=said):
            Segment.from_label(bad, sizes)
