"""F3 and F4 of round 14 (tester c): what sits at a trained-weights path and is not GluonCV's file.

A 30 GB sparse file there was hashed whole by ``prefetch --list`` (over a minute) and ``doctor`` (52 s); it is
now told by its size, unread. A FIFO, a folder or a link there made the Fix say "put X.params in cache/models",
which ``cp`` then blocks on (the FIFO) or follows into the folder; the Fix now says to remove it first."""

import os

import pytest

from byoc_workbench import doctor
from byoc_workbench.models import weights

NAME = "resnet18_v1"


@pytest.fixture
def target(tmp_path, monkeypatch):
    """The trained-weights path of NAME in an empty cache; no download can reach a network."""
    monkeypatch.setenv(weights.CACHE_ENV, str(tmp_path))
    monkeypatch.setenv(weights.REPO_ENV, "http://127.0.0.1:9/")
    (tmp_path / "models").mkdir()
    return tmp_path / "models" / weights.params_file_name(NAME)


def test_a_huge_sparse_file_is_the_wrong_size_at_once(target, caplog, monkeypatch):
    with open(target, "wb") as f:
        f.truncate(20 << 30)  # hashing it whole takes tens of seconds
    monkeypatch.setattr(weights, "sha1_of", lambda path: pytest.fail(f"{path} was hashed whole"))
    assert weights.cached_weights(NAME) is None
    assert doctor.check_weights().info["models"][NAME]["state"] == "wrong size, ignored"
    assert "is larger than any GluonCV weights file" in caplog.text


def _fifo(path):
    os.mkfifo(path)
    return "FIFO"


def _folder(path):
    path.mkdir()
    return "folder"


def _nowhere(path):
    path.symlink_to(path.parent / "gone.params")
    return "link"


def _loop(path):
    path.symlink_to(path.name)
    return "link"


def _wrong_file_behind_a_link(path):
    (path.parent / "mine.params").write_bytes(b"a user's own file, which cp would overwrite through the link")
    path.symlink_to(path.parent / "mine.params")
    return "link"


IN_THE_WAY = [_fifo, _folder, _nowhere, _loop, _wrong_file_behind_a_link]


@pytest.mark.parametrize("put", IN_THE_WAY, ids=lambda f: f.__name__.strip("_"))
def test_every_fix_says_to_remove_what_is_in_the_way_first(target, put):
    thing = put(target)
    first = f"remove the {thing} at {target}, then put {target.name} there"
    with pytest.raises(weights.DownloadError) as err:
        weights.download_weights(NAME)
    assert err.value.fix.startswith(first), err.value.fix
    [fetched] = weights.prefetch([NAME]).values()
    assert not fetched["ok"] and f"unzip it and {first}" in fetched["how_to_fix"], fetched
    check = doctor.check_weights()
    assert not check.ok and check.fix.startswith(f"{first}; byoc-workbench prefetch"), check.fix
    assert not (target / target.name).exists()  # nothing was put inside a folder


def test_a_plain_wrong_file_is_simply_replaced(target):
    target.write_bytes(b"not the weights")
    with pytest.raises(weights.DownloadError) as err:
        weights.download_weights(NAME)
    assert err.value.fix == f"put {target.name} at {target} or pass --weights PATH"
    assert doctor.check_weights().info["models"][NAME]["state"] == "wrong sha1, ignored"
