"""The search's diagram of the chosen placement says the precision it runs at (round 9: an f16 choice and an f32
one drew alike, titled "the chosen placement")."""

import dataclasses

import pytest

from byoc_workbench.measure import search

pytest.importorskip("torch", reason="needs the [pytorch] extra: torch takes a precision on any CPU")


@pytest.mark.slow  # over 10 s: `make test` and `make test-slow` run it, not test-fast
def test_the_chosen_placements_title_names_its_reduced_precision(tmp_path):
    subject = search.load({"kind": "demo"})
    result = search.search(subject, ("torch", "tvm"), precision="f16", runs=2, cache=search.Cache(tmp_path))
    at_f16 = next(r for r in result.placements if r.precision == "f16")
    at_f32 = next(r for r in result.placements if r.precision == "f32" and "torch" in r.assign.values())
    for chosen, says in (
        (at_f16, "the chosen placement, torch at f16, coloured"),
        (at_f32, "the chosen placement, coloured"),
    ):
        source = dataclasses.replace(result, chosen=chosen).dot().source
        assert f"demo: {says} by backend" in source
    assert "f16" not in result.dot(at_f16.assign).source  # a placement shown by its assignment alone: no row to tell
