"""A search asked for bf16 says the precision OpenVINO ran at (round 14, F1: on a CPU without bf16 its rows,
JSON and table said "openvino at bf16" where OpenVINO ran f32, as ``profile`` and ``compare`` already said)."""

import json

import pytest

pytest.importorskip("openvino", reason="the openvino backend needs openvino (requirements.txt)")

import openvino as ov  # noqa: E402

from byoc_workbench import cli  # noqa: E402

# What profile's test asks too: OpenVINO runs bf16 only where the CPU has it, f32 elsewhere.
BF16 = "BF16" in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
RAN = "openvino at bf16" if BF16 else "openvino at f32 (bf16 asked: not on this CPU)"


@pytest.mark.slow  # over 10 s: `make test` and `make test-slow` run it, not test-fast
def test_a_bf16_search_says_what_openvino_ran(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BYOC_WORKBENCH_CACHE", str(tmp_path / "cache"))
    args = ["search", "demo", "--backends", "openvino,tvm", "--precision", "bf16", "--runs", "2", "--no-anchors"]
    assert cli.main([*args, "--out", str(tmp_path / "out")]) == 0
    data = json.loads((tmp_path / "out" / "search.json").read_text())
    assert data["precision"] == "bf16" and data["precision_ran"] == {"openvino": "bf16" if BF16 else "f32"}
    variants = [r for r in data["placements"] if r["precision"] == "bf16"]
    assert variants and all(r["precision_ran"] == data["precision_ran"] for r in variants), variants
    assert all(r["what"].endswith(f", {RAN}") for r in variants), [r["what"] for r in variants]
    f32 = [r for r in data["placements"] if r["precision"] == "f32" and r["measured_s"]]
    f32 = [r for r in f32 if "openvino" in r["assign"].values()]
    assert f32 and all(r["precision_ran"] == {"openvino": "f32"} for r in f32)
    said = capsys.readouterr().out
    if not BF16:  # nowhere a bare "at bf16": not in a row, the steps, the notes or the header
        assert "at bf16" not in said and "bf16 asked" in said.splitlines()[0], said
        assert "at bf16" not in json.dumps(data) and "at bf16" not in (tmp_path / "out" / "search.svg").read_text()
        assert any("ran f32" in n and "not on this CPU" in n for n in data["notes"]), data["notes"]
