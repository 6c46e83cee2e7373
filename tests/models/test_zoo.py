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

from byoc_workbench import files
from byoc_workbench.errors import WorkbenchError
from byoc_workbench.models import weights, zoo


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
    with pytest.raises(zoo.MissingDependencyError, match=r"Python 3\.11.*make setup.*mxnet==1\.9\.1") as info:
        zoo.build_block("resnet50_v1")
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
    pytest.importorskip("mxnet")  # not importorskip("gluoncv"): beside torch 2 only the guard imports it
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


# --- with mxnet -----------------------------------------------------------------------


def _params(block):
    # Gluon numbers each new instance's prefix (resnetv10_, resnetv11_...), so key by
    # the name without its first component.
    return {n.split("_", 1)[1]: p.data().asnumpy() for n, p in block.collect_params().items()}


@pytest.mark.mxnet
def test_seeded_weights_are_deterministic_and_marked():
    pytest.importorskip("mxnet")
    a = zoo.load_model("resnet50_v1", "untrained", seed=3)
    b = zoo.load_model("resnet50_v1", "untrained", seed=3)
    c = zoo.load_model("resnet50_v1", "untrained", seed=4)
    pa, pb, pc = _params(a.block), _params(b.block), _params(c.block)
    assert all(np.array_equal(pa[n], pb[n]) for n in pa)
    assert any(not np.array_equal(pa[n], pc[n]) for n in pa)
    assert not a.is_trained and a.weights == "untrained"
    assert "untrained weights" in a.weights_label


@pytest.mark.mxnet
def test_seeded_ssd_keeps_anchors_and_spreads_scores():
    mx = pytest.importorskip("mxnet")
    model = zoo.load_model("ssd_512_mobilenet1.0_coco", "untrained")
    fresh = zoo.build_block("ssd_512_mobilenet1.0_coco")
    fresh.initialize()
    fresh(mx.nd.zeros((1, 3, 512, 512)))
    anchors = [n for n in _params(model.block) if "anchor" in n]
    assert len(anchors) == 6
    ours, theirs = _params(model.block), _params(fresh)
    for name in anchors:
        np.testing.assert_array_equal(ours[name], theirs[name])
    x = mx.nd.array(np.random.RandomState(0).uniform(-2, 2, (1, 3, 512, 512)))
    scores = model.block(x)[1].asnumpy()[0, :, 0]
    kept = scores[scores > 0]
    assert len(kept) >= 20 and np.isfinite(model.block(x)[2].asnumpy()).all()
    assert np.min(-np.diff(kept)) > 1e-6, "no near-ties among the detections"


@pytest.mark.mxnet
def test_local_params_file_round_trip(tmp_path):
    mx = pytest.importorskip("mxnet")
    model = zoo.load_model("resnet50_v1", "untrained", seed=1)
    path = tmp_path / "resnet50_v1.params"
    model.block.save_parameters(str(path))
    again = zoo.load_model("resnet50_v1", path)
    assert again.weights == str(path) and again.is_trained
    assert str(path) in again.weights_label
    x = mx.nd.array(np.random.RandomState(0).randn(1, 3, 224, 224))
    np.testing.assert_allclose(again.block(x).asnumpy(), model.block(x).asnumpy(), rtol=1e-6)


@pytest.mark.mxnet
def test_corrupt_params_file_is_one_line_error(tmp_path):
    pytest.importorskip("mxnet")
    path = tmp_path / "broken.params"
    path.write_bytes(b"\x00garbage" * 100)
    with pytest.raises(zoo.WeightsError) as info:
        zoo.load_model("resnet50_v1", path)
    assert str(path) in one_line(info)


@pytest.mark.mxnet
def test_mismatched_params_file_is_one_line_error(tmp_path):
    pytest.importorskip("mxnet")
    model = zoo.load_model("resnet50_v1", "untrained")
    path = tmp_path / "resnet.params"
    model.block.save_parameters(str(path))
    with pytest.raises(zoo.WeightsError) as info:
        zoo.load_model("ssd_512_mobilenet1.0_coco", path)
    assert "ssd_512_mobilenet1.0_coco" in one_line(info)


def test_missing_params_file(tmp_path):
    pytest.importorskip("mxnet")
    with pytest.raises(zoo.WeightsError, match="does not exist"):
        zoo.load_model("resnet50_v1", tmp_path / "nope.params")


@pytest.mark.mxnet
def test_trained_weights_offline_fail_clearly(tmp_path, monkeypatch):
    pytest.importorskip("mxnet")
    monkeypatch.setenv(weights.REPO_ENV, f"http://127.0.0.1:{_closed_port()}/")
    monkeypatch.setenv(weights.CACHE_ENV, str(tmp_path))
    with pytest.raises(weights.DownloadError, match="--weights"):
        zoo.load_model("resnet50_v1", "trained")
    # weights=None falls back to the seeded weights, and says so.
    assert zoo.load_model("resnet50_v1").weights == "untrained"


def test_seeded_weights_are_seeded_once_then_read_and_a_damaged_file_is_seeded_again(monkeypatch, tmp_path):
    """Calibrating seeded weights takes tens of seconds on the SSD; the same seed and size give the same
    weights, so they are kept, sealed, and read back exactly."""
    monkeypatch.setenv(weights.CACHE_ENV, str(tmp_path))
    first = zoo.load_model("resnet18_v1", "untrained", seed=3)
    kept = zoo.seeded_file("resnet18_v1", 3, first.input_shape)
    assert kept.parent == tmp_path / "seeded" and kept.is_file() and files.intact(kept)

    def values(model):
        return {k: v.data().asnumpy() for k, v in model.block.collect_params().items()}

    want = values(first)
    again = values(zoo.load_model("resnet18_v1", "untrained", seed=3))
    assert want.keys() == again.keys() and all(np.array_equal(want[k], again[k]) for k in want)
    assert zoo.seeded_file("resnet18_v1", 4, first.input_shape) != kept  # another seed, another file
    kept.write_bytes(kept.read_bytes()[:1000])  # truncated: not trusted, seeded again and repaired
    repaired = values(zoo.load_model("resnet18_v1", "untrained", seed=3))
    assert all(np.array_equal(want[k], repaired[k]) for k in want) and files.intact(kept)


def test_a_model_unlike_its_family_has_its_own_note():
    """MobilePose is listed under Simple Pose, but it is no ResNet: the chooser must not say it is."""
    from byoc_workbench import workflow

    for name, note in workflow.MODEL_NOTES.items():
        family = zoo.model_spec(name).family
        assert name in weights.MODELS and note != workflow.FAMILY_NOTES.get(family), name
    assert "ResNet" in workflow.FAMILY_NOTES["Simple Pose"]
    assert "ResNet" not in workflow.MODEL_NOTES["mobile_pose_mobilenetv3_small"]
