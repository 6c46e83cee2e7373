"""The seed's walkthrough on the demo graph: what each stage must produce."""

import collections

import pytest

from byoc_workbench import stages
from byoc_workbench.core import ir
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.flow import prune, summary
from byoc_workbench.flow.rules import select
from byoc_workbench.session import Workbench

CONV_BIAS_RELU = ["relax.nn.conv2d", "relax.expand_dims", "relax.add", "relax.nn.relu"]


def by_name(all_stages):
    return {s.name: s for s in all_stages}


def test_all_rules_give_the_seeds_three_subgraphs(demo_mod, byoc):
    s = by_name(stages.run_stages(demo_mod, byoc.rules))
    part = s["partition"]
    assert [sg.target for sg in part.subgraphs] == ["byoc-target"] * 3
    assert [sg.ops for sg in part.subgraphs] == [["relax.add"], CONV_BIAS_RELU, CONV_BIAS_RELU + ["relax.reshape"]]
    for sg in part.subgraphs:
        func = part.mod[sg.name]
        assert ir.func_attr(func, "Codegen") == "byoc_target"
        assert ir.func_attr(func, "global_symbol") == sg.name


def test_stage_names_and_order(demo_mod, byoc):
    assert [s.name for s in stages.run_stages(demo_mod, byoc.rules)] == list(stages.STAGES)


def test_reshape_off_keeps_reshape_on_host(demo_mod, byoc):
    rules = [r for r in byoc.rules if r.name != "reshape"]
    part = by_name(stages.run_stages(demo_mod, rules))["partition"]
    assert all("relax.reshape" not in sg.ops for sg in part.subgraphs)
    assert part.owners[("relax.reshape", summary.Owner("while_loop"), "host")] == 1
    assert [sg.ops for sg in part.subgraphs] == [["relax.add"], CONV_BIAS_RELU, CONV_BIAS_RELU]


def test_no_rules_no_subgraphs(demo_mod):
    for s in stages.run_stages(demo_mod, ()):
        assert s.subgraphs == []
        assert s.ops_per_target == {"host": 11}


def test_annotate_marks_targets_and_unmatched_rules(demo_mod, byoc):
    s = by_name(stages.run_stages(demo_mod, byoc.rules))
    ann = s["annotate"]
    assert ann.ops_per_target == {"byoc-target": 10, "host": 1}  # only the loop's `less` stays
    assert ann.rule_matches == {
        "byoc-target.conv2d_bias_relu": 2,
        "byoc-target.conv2d_relu": 0,
        "byoc-target.reshape": 1,
        "byoc-target.add": 1,
    }
    assert "rule byoc-target.conv2d_relu matched nothing" in ann.notes


def test_merge_regions_and_ir_unchanged(demo_mod, byoc):
    s = by_name(stages.run_stages(demo_mod, byoc.rules))
    regions = s["merge"].regions
    assert [(r.scope, r.composites) for r in regions] == [
        (("then",), ("byoc-target.add",)),
        (("then",), ("byoc-target.conv2d_bias_relu",)),
        (("else",), ("byoc-target.conv2d_bias_relu", "byoc-target.reshape")),
    ]
    assert s["merge"].mod.script() == s["annotate"].mod.script()


def test_prune_returns_no_mac_subgraphs(demo_mod, byoc):
    s = by_name(stages.run_stages(demo_mod, byoc.rules))
    assert [sg.name for sg in s["prune"].subgraphs] == ["byoc_target_1", "byoc_target_2"]
    assert s["prune"].notes == ["byoc_target_0 returned to host: 0 MAC ops (needs 1)"]
    assert {
        "kind": "moved",
        "op": "relax.add",
        "count": 1,
        "from": summary.Owner("byoc_target_0", ("byoc-target.add",)),
        "to": summary.Owner("while_loop"),
    } in s["prune"].changes


@pytest.mark.parametrize("rule,kept", [(stages.keep_all, 3), (stages.no_mac(1), 2), (stages.no_mac(2), 0)])
def test_prune_rule_and_threshold_are_parameters(demo_mod, byoc, rule, kept):
    s = by_name(stages.run_stages(demo_mod, byoc.rules, rule))
    assert len(s["prune"].subgraphs) == kept


def test_each_stage_runs_on_its_own(demo_mod, byoc):
    m = stages.composite(demo_mod, byoc.rules)
    composites = [ir.func_attr(f, "Composite") for f in m.functions.values()]
    assert sorted(c for c in composites if c) == ["byoc-target.conv2d_bias_relu"]
    m = stages.annotate(m, byoc.rules)
    m, regions = stages.merge(m)
    assert len(regions) == 3
    m = stages.partition(m, regions)
    assert ir.subgraph_functions(m) == ["byoc_target_0", "byoc_target_1", "byoc_target_2"]
    m, reasons = stages.prune(m)
    assert list(reasons) == ["byoc_target_0"]
    m, generated, skipped = stages.codegen(m)
    assert sorted(generated) == ["byoc_target_1", "byoc_target_2"] and not skipped
    calls = collections.Counter(s.op for s in ir.walk(m["while_loop"], m) if s.op)
    assert calls["relax.call_dps_packed"] == 2


def test_partition_diff_names_the_destination(demo_mod, byoc):
    part = by_name(stages.run_stages(demo_mod, byoc.rules))["partition"]
    lines = [summary.describe_change(c) for c in part.changes]
    assert "relax.reshape ×1 moved: while_loop ▸ byoc-target.reshape → byoc_target_2 ▸ byoc-target.reshape" in lines


def test_select_by_qualified_name(byoc):
    chosen = select(byoc.rules, ["byoc-target.add", "byoc-target.reshape"])
    assert [r.name for r in chosen] == ["reshape", "add"]  # table order, not request order
    assert select(byoc.rules, []) == ()


@pytest.mark.parametrize("bad", [-1, 1.5, True, "2"])
def test_no_mac_refuses_a_count_that_is_not_a_whole_number(bad):
    with pytest.raises(WorkbenchError, match="min_mac_ops must be a whole number"):
        stages.no_mac(bad)


def test_the_stage_printout_shows_every_note_broken_between_words(demo_mod, byoc):
    from byoc_workbench.core import text

    found = stages.run_stages(demo_mod, byoc.rules, stages.no_mac())
    found[5].notes.append("tensorrt_3 returned to host: " + "no multiply-accumulate op among its slices " * 4)
    printed = summary.stages_text(found)
    lines = printed.splitlines()
    assert [ln.split()[0] for ln in lines if not ln.startswith(" ")] == list(stages.STAGES)
    assert all(len(ln) <= text.WIDTH for ln in lines), printed
    words = " ".join(ln.strip(" -") for ln in lines if ln.startswith(" "))
    for note in (n for s in found for n in s.notes):
        assert " ".join(note.split()) in words, note  # every note, whole: no word cut in two
    found[5].notes[:] = [f"note {k}" for k in range(12)]
    assert "… and 4 more notes" in summary.stages_text(found)
    assert "note" not in summary.stages_text(found, notes=False).replace("notes", "")


def test_a_prune_rule_factory_not_called_is_told_to_call_it(demo_mod):
    with pytest.raises(WorkbenchError, match=r"Fix: call it: prune_rule=no_mac\(\)") as err:
        Workbench(demo_mod, "byoc-target", prune_rule=stages.no_mac)
    assert "\n" not in str(err.value) and "``" not in str(err.value) and "default prune rule" not in str(err.value)
    with pytest.raises(WorkbenchError, match=r"<lambda> cannot take \(name, ops\)"):
        Workbench(demo_mod, "byoc-target", prune_rule=lambda ops: None)


def test_prune_rules_are_named_by_their_names():
    assert prune.rule_name(stages.no_mac(2)) == "no_mac(min_mac_ops=2)"
    assert prune.rule_name(stages.keep_all) == "keep_all"
    assert prune.rule_name(stages.no_mac) == "no_mac"
