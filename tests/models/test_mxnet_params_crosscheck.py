"""read_params and write_params against MXNet itself: what mx.nd.save and Block.save_parameters write reads as
mx.nd.load reads it, bit for bit, and what write_params writes, mx.nd.load reads and mx.nd.save would write."""

import contextlib
import struct

import numpy as np
import pytest
from mxnet_check import mxnet_or_skip

from byoc_workbench.frontends.mxnet_params import BFLOAT16, V1_MAGIC, ParamsFileError, read_params, write_params

pytestmark = pytest.mark.mxnet

DTYPES = ["float32", "float64", "float16", "uint8", "int32", "int8", "int64", "bool", "bfloat16"]
SHAPES = [(1,), (7,), (2, 3), (2, 3, 4, 5), (1, 1, 1, 1, 1, 1)]


@contextlib.contextmanager
def _np_shape(mode: int):
    """MXNet's shape semantics: 0 its default, 1 numpy's, 2 numpy's for every thread (which also reads V2 scalars)."""
    mx = mxnet_or_skip()
    previous = mx.util.set_np_shape(mode)
    try:
        yield
    finally:
        mx.util.set_np_shape(previous)


def _random(mx, rng, dtype: str, shape: tuple):
    if dtype == "bfloat16":  # cast in one dimension: MXNet's (MKLDNN's) cast takes neither 0-d nor empty arrays
        flat = mx.nd.array(rng.standard_normal(int(np.prod(shape))) * 100)
        return mx.nd.amp_cast(flat, dtype=BFLOAT16).reshape(shape) if flat.size else mx.nd.zeros(shape, dtype=BFLOAT16)
    if dtype == "bool":
        return mx.nd.array(rng.integers(0, 2, shape)).astype("bool")
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return mx.nd.array(rng.integers(info.min, info.max, shape, endpoint=True, dtype=dtype), dtype=dtype)
    return mx.nd.array(rng.standard_normal(shape) * 1000, dtype=dtype)


def _assert_reads_as_mxnet(path, mode: int = 0) -> dict:
    mx = mxnet_or_skip()
    with _np_shape(mode):
        loaded = mx.nd.load(str(path))
    expected = {str(k): v.asnumpy() for k, v in (loaded.items() if isinstance(loaded, dict) else enumerate(loaded))}
    got = read_params(path)
    assert list(got) == list(expected)
    for name, value in got.items():
        assert (value.dtype, value.shape) == (expected[name].dtype, expected[name].shape), name
        assert np.array_equal(value, expected[name]), name
    return got


@pytest.mark.parametrize("seed", [0, 1])
def test_mx_nd_save_of_every_dtype_and_shape_reads_bit_equal(tmp_path, seed):
    mx = mxnet_or_skip()
    rng = np.random.default_rng(seed)
    arrays = {f"arg:{dtype}_{i}": _random(mx, rng, dtype, shape) for dtype in DTYPES for i, shape in enumerate(SHAPES)}
    mx.nd.save(str(tmp_path / "named.params"), arrays)
    _assert_reads_as_mxnet(tmp_path / "named.params")
    mx.nd.save(str(tmp_path / "listed.params"), list(arrays.values()))
    assert list(_assert_reads_as_mxnet(tmp_path / "listed.params")) == [str(i) for i in range(len(arrays))]


def test_numpy_semantics_scalars_and_empty_arrays_read_bit_equal(tmp_path):
    mx = mxnet_or_skip()
    rng = np.random.default_rng(2)
    with _np_shape(1):  # V3 records; scalars and zero-size arrays exist only here
        shapes = [(), (0,), (3, 0), (2, 0, 5), *SHAPES[:3]]
        arrays = {f"{d}{s}": _random(mx, rng, d, s) for d in DTYPES for s in shapes}
        mx.nd.save(str(tmp_path / "np.params"), arrays)
    _assert_reads_as_mxnet(tmp_path / "np.params", mode=1)
    # A 0-d array saved under the default semantics: a V2 scalar, which MXNet reads back only globally in numpy's.
    mx.nd.save(str(tmp_path / "scalar.params"), {"s": mx.nd.array(4.5), "w": mx.nd.array([1, 2])})
    assert _assert_reads_as_mxnet(tmp_path / "scalar.params", mode=2)["s"].shape == ()


def test_gluon_save_parameters_reads_bit_equal(tmp_path):
    mx = mxnet_or_skip()
    model_zoo = pytest.importorskip("gluoncv.model_zoo")
    mx.random.seed(0)
    net = model_zoo.get_model("resnet18_v1", pretrained=False)
    net.initialize(mx.init.Xavier())
    net(mx.nd.zeros((1, 3, 32, 32)))  # shapes are inferred on the first call
    net.save_parameters(str(tmp_path / "resnet18.params"))
    got = _assert_reads_as_mxnet(tmp_path / "resnet18.params")
    assert len(got) == len(net.collect_params().keys())


def test_write_params_is_what_mx_nd_save_writes(tmp_path):
    mx = mxnet_or_skip()
    rng = np.random.default_rng(3)
    arrays = {f"aux:{dtype}": _random(mx, rng, dtype, (2, 3)) for dtype in DTYPES}
    mx.nd.save(str(tmp_path / "mx.params"), arrays)
    write_params(tmp_path / "ours.params", {k: v.asnumpy() for k, v in arrays.items()})
    assert (tmp_path / "ours.params").read_bytes() == (tmp_path / "mx.params").read_bytes()
    _assert_reads_as_mxnet(tmp_path / "ours.params")
    # With a 0-d array every record is V3, which MXNet reads under numpy semantics.
    write_params(tmp_path / "np.params", {"s": np.float16(2), "e": np.zeros((0, 2), np.int64), "w": np.ones(3)})
    _assert_reads_as_mxnet(tmp_path / "np.params", mode=1)


def test_legacy_records_read_as_mxnet_reads_them(tmp_path):
    # MXNet 1.9 writes neither, but reads both: V1 (a magic, no storage type) and V0 (no magic, uint32 dims).
    tail = struct.pack("<iii", 1, 0, 4) + np.arange(6, dtype="<i4").tobytes()
    v1 = struct.pack("<Iiqq", V1_MAGIC, 2, 2, 3) + tail
    v0 = struct.pack("<III", 2, 3, 2) + tail
    names = struct.pack("<QQ", 2, 2) + b"v1" + struct.pack("<Q", 2) + b"v0"
    (tmp_path / "old.params").write_bytes(struct.pack("<QQQ", 0x112, 0, 2) + v1 + v0 + names)
    _assert_reads_as_mxnet(tmp_path / "old.params")


def test_sparse_arrays_are_refused_in_one_line(tmp_path):
    mx = mxnet_or_skip()
    mx.nd.save(str(tmp_path / "sparse.params"), {"w": mx.nd.ones((4, 2)).tostype("row_sparse")})
    with pytest.raises(ParamsFileError, match="row_sparse") as info:
        read_params(tmp_path / "sparse.params")
    assert "\n" not in str(info.value)
