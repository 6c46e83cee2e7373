"""Write tests/data/params/: small MXNet ``.params`` files, and beside each what ``mx.nd.load`` reads (a ``.npz``).

    .venv-mxnet/bin/python tools/make_params_fixture.py

Needs mxnet 1.9 (Python 3.11). Run once: the files are committed, and tests/unit/test_mxnet_params.py
reads them without mxnet. Each ``.npz`` holds ``mx.nd.load(file)`` under MXNet's global numpy shape
semantics, the only ones under which it reads every file here (see byoc_workbench/frontends/mxnet_params.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "params"
BFLOAT16 = np.dtype([("bfloat16", np.uint16)])


def _default_semantics(rng) -> dict:
    """V2 records, as ``mx.nd.save`` writes by default (the zoo's files): MXNet's names and dtypes."""
    import mxnet as mx

    with mx.util.np_shape(True):  # MXNet makes a zero-size array only under numpy shape semantics
        empty = mx.nd.zeros((0, 3))
    return {
        "arg:conv0_weight": mx.nd.array(rng.standard_normal((4, 3, 3, 3)), dtype="float32"),
        "arg:conv0_bias": mx.nd.array(rng.standard_normal(4), dtype="float16"),
        "aux:bn_running_mean": mx.nd.array(rng.standard_normal(4), dtype="float32"),
        "aux:bn_running_var": mx.nd.array(rng.uniform(0.5, 2, 4), dtype="float32"),
        "arg:index": mx.nd.array(rng.integers(-1000, 1000, (2, 3, 4)), dtype="int32"),
        "arg:pixels": mx.nd.array(rng.integers(0, 256, (2, 8)), dtype="uint8"),
        "arg:bf16": mx.nd.amp_cast(mx.nd.array([1.5, -2.25, 1e30, 3.3]), dtype=BFLOAT16),
        "scale": mx.nd.array(2.5),  # 0-d: a V2 record of ndim 0 that mx.nd.load misreads by default
        "empty": empty,
    }


def _numpy_semantics(rng) -> dict:
    """V3 records, as MXNet writes under numpy shape semantics (its caller turns them on): the other dtypes,
    scalars and empty arrays."""
    import mxnet as mx

    return {
        "f64": mx.nd.array(rng.standard_normal((3, 2)), dtype="float64"),
        "i64": mx.nd.array([-(2**40), 7, 2**40], dtype="int64"),
        "i8": mx.nd.array([-128, 0, 127], dtype="int8"),
        "flags": mx.nd.array([1, 0, 1]).astype("bool"),
        "scalar": mx.nd.array(3.0, dtype="float16"),
        "int_scalar": mx.nd.array(-5, dtype="int32"),
        "nothing": mx.nd.ones((2, 0, 1), dtype="int32"),
    }


def _save(name: str, save) -> None:
    """Save with ``save(path)`` and write what MXNet reads back beside it."""
    import mxnet as mx

    path = OUT / f"{name}.params"
    save(path)
    previous = mx.util.set_np_shape(2)  # global numpy shape semantics: reads V2 scalars and V3 records
    try:
        loaded = mx.nd.load(str(path))
    finally:
        mx.util.set_np_shape(previous)
    items = loaded.items() if isinstance(loaded, dict) else enumerate(loaded)
    np.savez(OUT / f"{name}.npz", **{str(key): value.asnumpy() for key, value in items})


def _block_save(path: Path) -> None:
    import mxnet as mx
    from mxnet.gluon import nn

    mx.random.seed(0)
    block = nn.HybridSequential()
    block.add(nn.Conv2D(4, 3, in_channels=3), nn.BatchNorm(in_channels=4), nn.Dense(5, in_units=16))
    block.initialize(mx.init.Xavier())
    block.hybridize()
    block(mx.nd.ones((1, 3, 4, 4)))  # a forward pass, so that BatchNorm's running stats are arrays
    block.save_parameters(str(path))


def main() -> None:
    import mxnet as mx

    OUT.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    arrays = _default_semantics(rng)
    _save("small", lambda path: mx.nd.save(str(path), arrays))
    with mx.util.np_shape(True):
        numpy_arrays = _numpy_semantics(rng)
        _save("small_np", lambda path: mx.nd.save(str(path), numpy_arrays))
    listed = [mx.nd.array(rng.standard_normal(3)), mx.nd.array([[1, 2]], dtype="int32")]
    _save("small_list", lambda path: mx.nd.save(str(path), listed))
    _save("block", _block_save)
    sizes = {p.name: p.stat().st_size for p in sorted(OUT.iterdir())}
    print(f"wrote {sum(sizes.values())} bytes: {sizes}")


if __name__ == "__main__":
    main()
