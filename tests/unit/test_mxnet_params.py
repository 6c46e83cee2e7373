"""MXNet's .params files read without mxnet: the committed fixtures, damaged files, and write_params.

tests/data/params/ holds files MXNet 1.9 wrote (tools/make_params_fixture.py) and, beside each, what
mx.nd.load read from it; tests/models/test_mxnet_params_crosscheck.py checks the same against mxnet itself.
"""

import struct
from pathlib import Path

import numpy as np
import pytest

from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.frontends.mxnet_params import BFLOAT16, DTYPES, V1_MAGIC, ParamsFileError, read_params, write_params

DATA = Path(__file__).resolve().parents[1] / "data" / "params"
FIXTURES = ("small", "small_np", "small_list", "block")


def _raises_one_line(path) -> ParamsFileError:
    with pytest.raises(ParamsFileError) as info:
        read_params(path)
    line = str(info.value)
    assert isinstance(info.value, WorkbenchError)
    assert "\n" not in line and line.startswith("error: ") and ". Fix: " in line, line
    return info.value


def _assert_same(got: dict, expected) -> None:
    assert list(got) == list(expected)
    for name, value in got.items():
        want = expected[name]
        assert (value.dtype, value.shape) == (want.dtype, want.shape), name
        assert np.array_equal(value, want), name
        assert value.flags.c_contiguous and value.flags.owndata, name


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_reads_as_mxnet_read_it(name):
    with np.load(DATA / f"{name}.npz") as expected:
        _assert_same(read_params(DATA / f"{name}.params"), expected)


def test_fixture_covers_mxnet_names_dtypes_and_shapes():
    small = read_params(str(DATA / "small.params"))  # a str path too
    assert {"arg:conv0_weight", "aux:bn_running_mean"} <= set(small)
    assert small["scale"].shape == () and small["scale"] == np.float32(2.5)  # a V2 record of ndim 0
    assert small["empty"].shape == (0, 3)
    # MXNet rounds to nearest even: 3.3 is 0x40533333, 1e30 0x7149F2CA.
    assert small["arg:bf16"].dtype == BFLOAT16
    assert small["arg:bf16"].view(np.uint16).tolist() == [0x3FC0, 0xC010, 0x714A, 0x4053]
    assert list(read_params(DATA / "small_list.params")) == ["0", "1"]  # saved from a list: no names
    assert read_params(DATA / "block.params")["1.running_var"].dtype == np.float32  # Block.save_parameters


@pytest.mark.parametrize("name", FIXTURES)
def test_every_cut_short_file_is_one_line_error(tmp_path, name):
    whole = (DATA / f"{name}.params").read_bytes()
    path = tmp_path / "cut.params"
    for end in range(len(whole)):  # every cut, the empty file included
        path.write_bytes(whole[:end])
        _raises_one_line(path)


def _record(**change) -> bytes:
    """A file of one float32 array [1, 2], V2, with ``change`` (field=value) written over its fields."""
    fields = dict(list_magic=0x112, reserved=0, count=1, magic=0xF993FAC9, storage=0, ndim=1, dim=2)
    fields.update(dev_type=1, dev_id=0, flag=0, names=1)
    fields.update(change)
    head = struct.pack("<QQQIiiqiii", *list(fields.values())[:-1])
    return head + np.array([1, 2], "<f4").tobytes() + struct.pack("<QQ", fields["names"], 1) + b"a"


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"list_magic": 0x113}, "not an MXNet .params file"),
        ({"magic": 0xF993FACB}, "no MXNet array format"),
        ({"storage": 1}, "row_sparse"),
        ({"storage": 2}, "csr"),
        ({"storage": -1}, "empty MXNet NDArray"),
        ({"storage": 7}, "storage type 7"),
        ({"ndim": -1}, "empty MXNet NDArray"),
        ({"dim": -1}, "empty MXNet NDArray"),
        ({"dim": 2**40}, "ends at byte"),
        ({"flag": 8}, "type flag 8"),
        ({"flag": -3}, "type flag -3"),
        ({"names": 2}, "holds 1 arrays but 2 names"),
        ({"count": 2**62}, "ends at byte"),
        ({"magic": V1_MAGIC}, "empty MXNet NDArray"),  # V1 has no storage type: its storage 0 reads as ndim 0
    ],
)
def test_damaged_file_is_one_line_error(tmp_path, change, said):
    path = tmp_path / "bad.params"
    path.write_bytes(_record(**change))
    assert said in _raises_one_line(path).cause


def test_the_record_the_damage_starts_from_reads(tmp_path):
    path = tmp_path / "good.params"
    path.write_bytes(_record())
    assert read_params(path)["a"].tolist() == [1.0, 2.0]


def test_not_a_params_file_is_one_line_error(tmp_path):
    _raises_one_line(tmp_path)  # a directory
    _raises_one_line(tmp_path / "missing.params")
    (tmp_path / "empty.params").write_bytes(b"")
    assert "empty" in _raises_one_line(tmp_path / "empty.params").cause
    for seed in range(5):
        (tmp_path / "random.params").write_bytes(np.random.default_rng(seed).bytes(1024))
        _raises_one_line(tmp_path / "random.params")
    (tmp_path / "page.params").write_bytes(b"<html>Not found</html>")
    _raises_one_line(tmp_path / "page.params")


def test_legacy_records_read(tmp_path):
    # V1: a magic, then shape, device, type and data; V0: no magic, ndim and uint32 dims first.
    data = np.arange(6, dtype="<f4")
    tail = struct.pack("<iii", 1, 0, 0) + data.tobytes()
    v1 = struct.pack("<Iiqq", V1_MAGIC, 2, 2, 3) + tail
    v0 = struct.pack("<III", 2, 3, 2) + tail
    path = tmp_path / "old.params"
    path.write_bytes(struct.pack("<QQQ", 0x112, 0, 2) + v1 + v0 + struct.pack("<Q", 0))
    arrays = read_params(path)
    assert arrays["0"].shape == (2, 3) and arrays["1"].shape == (3, 2)
    assert np.array_equal(arrays["1"].ravel(), data)
    # ndim 0 was an empty handle then, with nothing after it.
    path.write_bytes(struct.pack("<QQQIi", 0x112, 0, 1, V1_MAGIC, 0) + tail + struct.pack("<Q", 0))
    assert "empty MXNet NDArray" in _raises_one_line(path).cause


def _every_dtype(rng) -> dict:
    arrays = {}
    for dtype in DTYPES.values():
        for shape in [(), (0,), (3,), (2, 0, 4), (2, 3, 4, 5)]:
            raw = rng.integers(0, 256, size=int(np.prod(shape)) * dtype.itemsize, dtype=np.uint8)
            arrays[f"arg:{dtype}{shape}"] = raw.view(dtype).reshape(shape)
    return arrays


def test_write_params_round_trips_every_dtype_and_shape(tmp_path):
    arrays = _every_dtype(np.random.default_rng(0))
    write_params(tmp_path / "all.params", arrays)
    got = read_params(tmp_path / "all.params")
    assert list(got) == list(arrays)
    for name, value in arrays.items():
        # Bytes, not values: NaN payloads and bools that are neither 0 nor 1 come back as they went.
        assert (got[name].dtype, got[name].shape, got[name].tobytes()) == (value.dtype, value.shape, value.tobytes())


@pytest.mark.parametrize("name", ["small_np", "block"])
def test_write_params_writes_the_bytes_mxnet_wrote(tmp_path, name):
    write_params(tmp_path / "again.params", read_params(DATA / f"{name}.params"))
    assert (tmp_path / "again.params").read_bytes() == (DATA / f"{name}.params").read_bytes()


def test_write_params_takes_big_endian_and_refuses_other_dtypes(tmp_path):
    write_params(tmp_path / "be.params", {"w": np.array([1.5, -2], ">f4")})
    got = read_params(tmp_path / "be.params")["w"]
    assert got.dtype == np.float32 and got.tolist() == [1.5, -2]
    with pytest.raises(ParamsFileError, match="complex64"):
        write_params(tmp_path / "c.params", {"z": np.zeros(2, np.complex64)})
