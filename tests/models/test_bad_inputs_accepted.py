"""Bad inputs that are accepted, as the issue asks: pictures of any shape, a target by name, outputs
that are not finite, models in capitals (the rows of test_bad_inputs.py, bad_rows.py)."""

from __future__ import annotations

import numpy as np
import pytest
from bad_rows import FILES, picture, rows_dir
from messages import LINE

from byoc_workbench import cli, subjects
from byoc_workbench.core.errors import WorkbenchError, first_line, shorten
from byoc_workbench.models import demo, images
from byoc_workbench.session import Workbench


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    """One directory holding every row's files (bad_rows.rows_dir)."""
    yield from rows_dir(tmp_path_factory)


def test_pictures_of_any_shape_are_accepted(d):
    """3000x1 crashed OpenCV's resize; now it resizes as GluonCV's rules say, and bench pads it to 512x512."""
    picture(d / "wide.png", 1, 3000)
    picture(d / "tall.png", 3000, 1)
    picture(d / "dot.png", 1, 1)
    x, resized = images.load_test(d / "wide.png")
    assert x.shape == (1, 3, 1, 1024) and resized.shape == (1, 1024, 3)
    assert images.load_test(d / "tall.png")[0].shape == (1, 3, 1024, 1)
    assert images.load_test(d / "dot.png")[0].shape == (1, 3, 512, 512)
    cut, shown = images.model_input(d / "wide.png", (1, 3, 512, 512))
    assert shown.shape == (512, 512, 3) and not shown[1:].any()
    assert cut.shape == (1, 3, 512, 512) and np.all(cut[:, :, 1:] == 0) and np.any(cut[:, :, 0] != 0)


def test_a_target_given_by_name(d):
    wb = Workbench(demo.demo_module(), "byoc-target", enabled="byoc-target.add,byoc-target.conv2d_bias_relu")
    assert {r.qualified for r in wb.rules} == {"byoc-target.add", "byoc-target.conv2d_bias_relu"}
    assert len(wb.stage("partition").subgraphs) == 3


def test_the_widget_shows_a_bad_target_in_one_line():
    from byoc_workbench.widgets import workbench_widget

    for target in (5, "byoc"):
        w = workbench_widget(target=target)
        assert w.workbench is None and "error:" in w.status.value and "Fix:" in w.status.value


def test_the_widget_refuses_an_unknown_rule_in_one_line():
    from byoc_workbench.widgets import workbench_widget

    w = workbench_widget()
    before = w.workbench
    assert w.set_rule("byoc-target.nope", False) is False
    assert "byoc-target.nope" in w.status.value and "Fix:" in w.status.value
    assert w.workbench is before, "the previous state is kept"


def test_causes_are_cut_at_a_word_and_nested_errors_not_repeated():
    long = ValueError("word " * 200)
    text = first_line(long)
    assert len(text) <= 300 and text.endswith("word […]")
    assert shorten("x" * 400, 300).endswith("[…]") and len(shorten("x" * 400, 300)) <= 300
    nested = WorkbenchError("Inner cause", "inner fix")
    outer = WorkbenchError(f"Outer failed ({first_line(nested)})", "outer fix")
    assert LINE.fullmatch(outer.line) and outer.line.count("Fix:") == 1 and "error:" not in outer.cause


def test_nonfinite_outputs_give_one_warning_and_the_run_finishes(d):
    from byoc_workbench.models import meaning, zoo

    name = "ssd_512_resnet50_v1_coco"
    loaded = zoo.LoadedModel(name, {}, {}, str(d / "flipped.params"), zoo.model_spec(name))
    ids, scores = np.zeros((1, 4, 1), "float32"), np.ones((1, 4, 1), "float32")
    boxes = np.ones((1, 4, 4), "float32")
    boxes[0, 2, 1] = np.inf
    result = meaning.prediction("detection", [ids, scores, boxes], loaded)
    assert len(result.warnings) == 1
    (line,) = result.warnings
    assert "output boxes holds 1 non-finite values (first inf at [0, 2, 1])" in line
    assert "flipped.params" in line and "corrupted" in line and "\n" not in line
    assert meaning.prediction("detection", [ids, scores, np.ones((1, 4, 4), "float32")], loaded).warnings == ()


def test_saved_outputs_are_whole_and_counted(d, capsys):
    """Each output is saved whole (batch axis and scalars too) and the line counts outputs, not rows."""
    for model, shape, saved, expect in [
        ("relu.onnx", [], "1 output", {"output0": (1, 4, 16, 16)}),
        ("batch.onnx", ["--input-shape", "4,4,16,16"], "1 output", {"output0": (4, 4, 16, 16)}),
        ("scalar.onnx", [], "2 outputs", {"output0": (), "output1": (1, 4, 16, 16)}),
    ]:
        path = d / "saved" / f"{model}.npz"
        assert cli.main(["run", str(d / model), *shape, "--save-outputs", str(path)]) == 0
        assert f"saved {saved} to" in capsys.readouterr().out
        with np.load(path) as z:
            assert {k: z[k].shape for k in z} == expect


def test_named_input_shapes_reach_pytorch(d, capsys):
    """--input-shape NAME=... names forward's input; it was ignored for 1,3,224,224."""
    pytest.importorskip("torch", reason="needs the [pytorch] extra: make test EXTRAS=pytorch")
    save = d / "saved" / "torch.npz"
    assert (
        cli.main(["run", "--torch", "bad_torch_tiny:net", "--input-shape", "input=2,5", "--save-outputs", str(save)])
        == 0
    )
    with np.load(save) as z:
        assert z["output0"].shape == (2, 5)
    model = subjects.load(subjects.ModelRef.parse(None, torch="bad_torch_tiny:net", shapes={"input": [2, 5]}))
    assert [x.shape for x in model.workbench.model.inputs] == [(2, 5)]
    described = subjects.ModelRef.parse(None, torch="bad_torch_tiny:net", shapes={"input": [3, 2]}).to_json()
    assert subjects.load(described).inputs[0].shape == (3, 2)  # the search's path


def test_a_model_file_in_capitals_is_accepted(d, capsys):
    (d / "upper").mkdir()
    (d / "upper" / "RELU.ONNX").write_bytes((d / "relu.onnx").read_bytes())
    (d / "upper" / "MINE.PY").write_text(FILES["mine.py"])
    assert cli.main(["report", str(d / "upper" / "RELU.ONNX"), "--json"]) == 0
    assert cli.main(["report", str(d / "upper" / "MINE.PY"), "--target", "mychip", "--json"]) == 0
    capsys.readouterr()


def test_compare_with_nothing_offloaded_says_so(capsys):
    """``compare demo --backend tvm`` offloads nothing: a line says so, where an empty table stood."""
    assert cli.main(["compare", "demo", "--backend", "tvm"]) == 0
    out = capsys.readouterr().out
    assert "no subgraph was offloaded, so nothing differs from TVM alone" in out and "max rel err" not in out
