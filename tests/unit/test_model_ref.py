"""Which model? Every form a command takes resolves through one function, ``ModelRef.parse``, to a
:class:`~byoc_workbench.subjects.ModelRef` whose dict round-trips (STYLE.md, habit 13)."""

import json

import pytest

from byoc_workbench import cli
from byoc_workbench.cli.refs import model_ref
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.models import zoo
from byoc_workbench.subjects import ModelRef

POSE = "simple_pose_resnet18_v1b"

FORMS = [
    (["search", "demo"], ModelRef(kind="demo")),
    (["search", "ssd"], ModelRef(kind="zoo", name=zoo.DEFAULT_MODEL)),
    (
        ["search", "ssd", "--model", POSE, "--weights", "untrained", "--image", "dog.jpg"],
        ModelRef(kind="zoo", name=POSE, weights="untrained", image="dog.jpg"),
    ),
    (["search", POSE, "--target", "tensorrt"], ModelRef(kind="zoo", name=POSE, target="tensorrt")),
    (
        ["search", "m.onnx", "--input-shape", "data=1,3,8,8"],
        ModelRef(kind="onnx", path="m.onnx", shapes={"data": [1, 3, 8, 8]}),
    ),
    (["search", "M.ONNX"], ModelRef(kind="onnx", path="M.ONNX")),
    (["search", "mine.py", "--target", "mychip"], ModelRef(kind="file", path="mine.py", target="mychip")),
    (
        ["search", "--torch", "torchvision.models:resnet18", "--input-shape", "1,3,32,32"],
        ModelRef(kind="torch", spec="torchvision.models:resnet18", shapes=[1, 3, 32, 32]),
    ),
]


@pytest.mark.parametrize(("argv", "expected"), FORMS, ids=[" ".join(a[1:]) for a, _ in FORMS])
def test_every_cli_model_form_resolves_to_a_model_ref_that_round_trips(argv, expected):
    args = cli.parser().parse_args(argv)
    ref = model_ref(args, args.model)
    assert ref == expected
    assert ModelRef.from_json(json.loads(json.dumps(ref.to_json()))) == ref


def test_the_rules_switched_on_travel_with_the_reference():
    ref = ModelRef.parse("demo", rules=["byoc-target.add"])
    assert ref.to_json() == {"kind": "demo", "rules": ["byoc-target.add"]}
    assert ModelRef.from_json(ref.to_json()) == ref


def test_a_saved_ssd_description_reads_as_a_zoo_model():
    assert ModelRef.from_json({"kind": "ssd"}) == ModelRef(kind="zoo", name=zoo.DEFAULT_MODEL)
    assert ModelRef.from_json({"kind": "ssd", "model": POSE, "weights": "untrained"}).to_json() == {
        "kind": "zoo",
        "model": POSE,
        "weights": "untrained",
        "image": None,
    }


@pytest.mark.parametrize("bad", [{"kind": "workbench"}, {"path": "m.onnx"}, "demo", None])
def test_what_names_no_model_is_one_line(bad):
    with pytest.raises(WorkbenchError, match="Not a model description"):
        ModelRef.from_json(bad)


def test_a_command_that_takes_fewer_kinds_says_which_it_takes():
    """``bench mine.py`` and ``import demo`` said "Unknown model" (``import demo``: "did you mean demo?")."""
    takes = "the Relax demo, a GluonCV zoo model, an ONNX file or a PyTorch program"
    with pytest.raises(WorkbenchError, match=f"mine.py is a Python file; this command takes {takes}"):
        ModelRef.parse("mine.py", kinds=("demo", "zoo", "onnx", "torch"))
    with pytest.raises(WorkbenchError, match=f"demo is the Relax demo; this command takes a GluonCV zoo model.*{POSE}"):
        ModelRef.parse("demo", kinds=("zoo",))
    with pytest.raises(WorkbenchError, match=f"Unknown model 'nope'.*{POSE}"):  # no file taken: a zoo name misspelt
        ModelRef.parse("nope", kinds=("zoo",))


@pytest.mark.parametrize(
    ("bad", "says"),
    [(5, "named by a string, got int"), ("", "name is empty"), (" \t", "name is empty"), (None, "A model is required")],
)
def test_what_names_no_model_at_all_is_refused_at_parse(bad, says):
    with pytest.raises(WorkbenchError, match=says) as err:
        ModelRef.parse(bad)
    assert "\n" not in str(err.value) and "Fix: name one: demo, ssd" in str(err.value)


def test_a_directory_is_said_to_be_one_whatever_kinds_the_command_takes(tmp_path):
    for kinds in (("zoo",), ("zoo", "onnx", "torch"), ("demo", "zoo", "onnx", "torch", "file")):
        with pytest.raises(WorkbenchError, match=f"{tmp_path} is a directory, not a model. Fix: name one"):
            ModelRef.parse(str(tmp_path), kinds=kinds)


def test_a_path_object_names_a_file_as_its_string_does(tmp_path):
    assert ModelRef.parse(tmp_path / "m.onnx") == ModelRef(kind="onnx", path=str(tmp_path / "m.onnx"))
