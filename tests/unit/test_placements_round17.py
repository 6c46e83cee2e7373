"""The search's summary says which way each baseline leans (round 16, A8: 'faster than ... 0.47x')."""

from byoc_workbench.draw.placements import against


def test_a_baseline_faster_than_the_choice_is_said_to_be_slower_by_its_own_ratio():
    said = against({"vs_tvm": 3.2, "vs_onnxruntime": 0.47})
    assert said == "tvm 3.20x faster, onnxruntime 2.13x slower"
    assert "0.47" not in said
