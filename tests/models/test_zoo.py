"""Specs, the weights cache and download (models.weights); loading, local files, seeded weights (models.zoo)."""

from __future__ import annotations

import functools
import http.server
import io
import subprocess
import sys
import threading
import time
import zipfile

import numpy as np
import pytest
from messages import one_line

from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.frontends.mxnet_params import write_params
from byoc_workbench.models import shipped, weights, zoo
from byoc_workbench.models.shipped import ShippedError


def test_unknown_model_name_is_one_line():
    with pytest.raises(zoo.UnknownModelError) as info:
        zoo.load_model("ssd_9000")
    message = one_line(info)
    assert isinstance(info.value, WorkbenchError)
    assert "ssd_9000" in message and "ssd_512_resnet50_v1_coco" in message


def test_zoo_keeps_the_names_the_cli_and_notebooks_use():
    for name in ("MODELS", "DEFAULT_MODEL", "model_spec", "weights_dir", "prefetch", "DownloadError", "WeightsError"):
        assert getattr(zoo, name) is getattr(weights, name), name
    assert zoo.DEFAULT_MODEL in zoo.MODELS and callable(zoo.load_model)


def test_zoo_import_does_not_pull_mxnet():
    code = (
        "import sys, byoc_workbench.models.zoo, byoc_workbench.models.seeded, byoc_workbench.frontends; "
        "print('mxnet' in sys.modules, 'gluoncv' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_missing_mxnet_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "mxnet", None)  # makes `import mxnet` raise ImportError
    with pytest.raises(zoo.MissingDependencyError, match=r"Python 3\.11.*requirements-mxnet\.txt") as info:
        zoo.build_block("resnet50_v1")
    one_line(info)


def test_what_only_mxnet_can_build_is_one_line_without_it(monkeypatch):
    """The package ships seed 0 at each model's own size: another seed, or a segmentation model at another
    size, is built by MXNet, and without it that is said in one line before anything is read."""
    monkeypatch.setattr(zoo.gluon, "has_mxnet", lambda: False)
    with pytest.raises(ShippedError, match="not seed 3") as info:
        zoo.load_model("resnet18_v1", "untrained", seed=3)
    assert "MXNet" in one_line(info)
    with pytest.raises(ShippedError, match=r"not input \(1, 3, 96, 96\)") as info:
        zoo.load_model("fcn_resnet50_ade", "untrained", input_shape=(1, 3, 96, 96))
    one_line(info)


def test_weights_dir_default_and_override(monkeypatch, tmp_path):
    monkeypatch.delenv(weights.CACHE_ENV, raising=False)
    assert str(weights.weights_dir()).endswith(".cache/byoc-workbench/models")
    monkeypatch.setenv(weights.CACHE_ENV, str(tmp_path))
    assert weights.weights_dir() == tmp_path / "models"  # as every cache: $BYOC_WORKBENCH_CACHE/<kind>
    assert weights.weights_dir(tmp_path / "x") == tmp_path / "x"


def test_file_names_and_urls_follow_gluoncv():
    assert weights.params_file_name("resnet50_v1") == "resnet50_v1-cc729d95.params"
    url = weights.weights_url("ssd_512_resnet50_v1_coco", "http://mirror.example/")
    assert url == "http://mirror.example/gluon/models/ssd_512_resnet50_v1_coco-c4835162.zip"


@pytest.mark.mxnet
def test_the_recorded_sha1s_are_gluoncvs():
    from byoc_workbench.models.gluoncv_import import import_gluoncv

    model_store = import_gluoncv("gluoncv.model_zoo.model_store", "pip install gluoncv")  # beside torch too
    for name, spec in weights.MODELS.items():
        assert model_store._model_sha1[name] == spec.sha1


def _closed_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_download_fails_fast_and_clearly(tmp_path):
    repo = f"http://127.0.0.1:{_closed_port()}/"
    start = time.monotonic()
    with pytest.raises(weights.DownloadError) as info:
        weights.download_weights("resnet50_v1", tmp_path, repo_url=repo, timeout=2)
    assert time.monotonic() - start < 5
    message = one_line(info)
    assert "--weights" in message and "resnet50_v1-cc729d95.params" in message


def test_unwritable_cache_is_one_line(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with pytest.raises(weights.DownloadError) as info:
        weights.download_weights("resnet50_v1", blocker / "cache", repo_url="http://127.0.0.1:9/", timeout=1)
    assert weights.CACHE_ENV in one_line(info)


def test_prefetch_reports_how_to_supply_each_file(tmp_path):
    repo = f"http://127.0.0.1:{_closed_port()}/"
    report = weights.prefetch(["resnet50_v1", "ssd_512_mobilenet1.0_coco"], tmp_path, repo_url=repo, timeout=2)
    assert set(report) == {"resnet50_v1", "ssd_512_mobilenet1.0_coco"}
    for name, entry in report.items():
        assert entry["ok"] is False and entry["error"]
        assert str(tmp_path / weights.params_file_name(name)) in entry["how_to_fix"]
        assert "--weights" in entry["how_to_fix"]


@pytest.fixture
def local_repo(tmp_path):
    """A local HTTP server on 127.0.0.1 serving tmp_path/repo (never the internet)."""
    root = tmp_path / "repo"
    (root / "gluon" / "models").mkdir(parents=True)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


def _publish(root, name, payload: bytes):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr(weights.params_file_name(name), payload)
    stem = weights.params_file_name(name)[: -len(".params")]
    (root / "gluon" / "models" / f"{stem}.zip").write_bytes(buffer.getvalue())


def test_download_checks_sha1_and_caches(local_repo, tmp_path, monkeypatch):
    root, url = local_repo
    payload = b"not really weights"
    import hashlib

    # A stand-in model whose recorded sha1 is that of our payload.
    spec = weights.ModelSpec("resnet50_v1", (1, 3, 224, 224), "classification", hashlib.sha1(payload).hexdigest())
    monkeypatch.setitem(weights.MODELS, "resnet50_v1", spec)
    _publish(root, "resnet50_v1", payload)
    cache = tmp_path / "cache"
    path = weights.download_weights("resnet50_v1", cache, repo_url=url)
    assert path.read_bytes() == payload and path.parent == cache
    assert weights.cached_weights("resnet50_v1", cache) == path
    assert weights.prefetch(["resnet50_v1"], cache, repo_url=url)["resnet50_v1"]["ok"]


def test_download_with_wrong_sha1_is_rejected(local_repo, tmp_path):
    root, url = local_repo
    _publish(root, "resnet50_v1", b"tampered")
    with pytest.raises(weights.DownloadError, match="wrong sha1"):
        weights.download_weights("resnet50_v1", tmp_path / "cache", repo_url=url)
    assert weights.cached_weights("resnet50_v1", tmp_path / "cache") is None


# --- seeded weights and local files ----------------------------------------------------


def _bare(params: dict) -> dict:
    # Gluon numbers each new instance's prefix (resnetv10_, resnetv11_...), so key by
    # the name without its first component.
    return {n.split("_", 1)[1]: np.asarray(v) for n, v in params.items()}


def _saved(name: str, model, path, scale: float = 1.0):
    """``model``'s weights (times ``scale``) in a ``.params`` file as ``Block.save_parameters`` names them."""
    by_name = {p.name: p.key for p in shipped.read_shipped(name).used}
    write_params(path, {by_name[k]: v * np.float32(scale) for k, v in model.params.items()})
    return path


def test_seed_zero_is_the_shipped_graph_with_the_same_weights_every_time():
    a = zoo.load_model("resnet18_v1", "untrained")
    b = zoo.load_model("resnet18_v1", "untrained", seed=0)
    assert a.graph == b.graph and a.params.keys() == b.params.keys()
    assert all(np.array_equal(a.params[k], b.params[k]) for k in a.params)
    assert not a.is_trained and a.weights == "untrained" and a.seed == 0
    assert a.weights_label == "untrained weights (seed 0)" and a.inputs == ("data",)
    assert len(a.classes) == 1000 and a.input_shape == (1, 3, 224, 224)


def test_local_params_file_round_trip(tmp_path):
    """A file named as GluonCV's trained ones are (``Block.save_parameters``), read without MXNet."""
    model = zoo.load_model("resnet18_v1", "untrained")
    path = _saved("resnet18_v1", model, tmp_path / "resnet18_v1.params", scale=1.5)
    again = zoo.load_model("resnet18_v1", path)
    assert again.weights == str(path) and again.is_trained and again.seed is None
    assert str(path) in again.weights_label and again.graph == model.graph
    for key, value in model.params.items():
        assert np.array_equal(again.params[key], value * np.float32(1.5)), key


def test_corrupt_params_file_is_one_line_error(tmp_path):
    path = tmp_path / "broken.params"
    path.write_bytes(b"\x00garbage" * 100)
    with pytest.raises(zoo.WeightsError) as info:
        zoo.load_model("resnet50_v1", path)
    assert str(path) in one_line(info)


def test_mismatched_params_file_is_one_line_error(tmp_path):
    path = _saved("resnet18_v1", zoo.load_model("resnet18_v1", "untrained"), tmp_path / "resnet.params")
    with pytest.raises(zoo.WeightsError) as info:
        zoo.load_model("ssd_512_mobilenet1.0_coco", path)
    assert "ssd_512_mobilenet1.0_coco" in one_line(info) and str(path) in one_line(info)


def test_missing_params_file(tmp_path):
    with pytest.raises(zoo.WeightsError, match="does not exist"):
        zoo.load_model("resnet50_v1", tmp_path / "nope.params")


def test_trained_weights_offline_fail_clearly(tmp_path, monkeypatch):
    monkeypatch.setenv(weights.REPO_ENV, f"http://127.0.0.1:{_closed_port()}/")
    monkeypatch.setenv(weights.CACHE_ENV, str(tmp_path))
    with pytest.raises(weights.DownloadError, match="--weights"):
        zoo.load_model("resnet50_v1", "trained")
    # weights=None falls back to the seeded weights, and says so.
    assert zoo.load_model("resnet50_v1").weights == "untrained"


# --- against MXNet (make test-mxnet) -------------------------------------------------------


@pytest.mark.mxnet
def test_other_seeds_are_deterministic_and_marked():
    a = zoo.load_model("resnet18_v1", "untrained", seed=3)
    b = zoo.load_model("resnet18_v1", "untrained", seed=3)
    c = zoo.load_model("resnet18_v1", "untrained", seed=4)
    pa, pb, pc = _bare(a.params), _bare(b.params), _bare(c.params)
    assert pa.keys() == pb.keys() == pc.keys()
    assert all(np.array_equal(pa[n], pb[n]) for n in pa)
    assert any(not np.array_equal(pa[n], pc[n]) for n in pa)
    assert not a.is_trained and a.weights == "untrained" and a.weights_label == "untrained weights (seed 3)"


@pytest.mark.mxnet
def test_seeded_ssd_keeps_anchors_and_spreads_scores():
    import mxnet as mx

    model = zoo.load_model("ssd_512_mobilenet1.0_coco", "untrained")
    fresh = zoo.build_block("ssd_512_mobilenet1.0_coco")
    fresh.initialize()
    fresh(mx.nd.zeros((1, 3, 512, 512)))
    ours, theirs = _bare(model.params), _bare({n: p.data().asnumpy() for n, p in fresh.collect_params().items()})
    anchors = [n for n in ours if "anchor" in n]
    assert len(anchors) == 6
    for name in anchors:
        np.testing.assert_array_equal(ours[name], theirs[name])
    block = model.block()
    x = mx.nd.array(np.random.RandomState(0).uniform(-2, 2, (1, 3, 512, 512)))
    _, scores, boxes = (o.asnumpy() for o in block(x))
    kept = scores[0, :, 0][scores[0, :, 0] > 0]
    assert len(kept) >= 20 and np.isfinite(boxes).all()
    assert np.min(-np.diff(kept)) > 1e-6, "no near-ties among the detections"


@pytest.mark.mxnet
def test_the_block_of_a_loaded_model_computes_what_gluoncv_does(tmp_path):
    """``loaded.block()``, MXNet's run of the graph and weights the workbench holds, against the GluonCV block
    the same weights were loaded into."""
    import mxnet as mx

    model = zoo.load_model("resnet18_v1", "untrained")
    path = _saved("resnet18_v1", model, tmp_path / "r18.params")
    gluoncv = zoo.build_block("resnet18_v1")
    gluoncv.load_parameters(str(path))
    x = mx.nd.array(np.random.RandomState(0).randn(1, 3, 224, 224))
    np.testing.assert_allclose(model.block()(x).asnumpy(), gluoncv(x).asnumpy(), rtol=1e-5, atol=1e-5)


def test_a_model_unlike_its_family_has_its_own_note():
    """MobilePose is listed under Simple Pose, but it is no ResNet: the chooser must not say it is."""
    from byoc_workbench import workflow

    for name, note in workflow.MODEL_NOTES.items():
        family = zoo.model_spec(name).family
        assert name in weights.MODELS and note != workflow.FAMILY_NOTES.get(family), name
    assert "ResNet" in workflow.FAMILY_NOTES["Simple Pose"]
    assert "ResNet" not in workflow.MODEL_NOTES["mobile_pose_mobilenetv3_small"]
