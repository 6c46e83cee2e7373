"""MXNet's ``.params`` files (what ``mx.nd.save`` and ``Block.save_parameters`` write), read with numpy alone.

A file is a list of NDArrays and then their names, all little-endian::

    uint64 0x112, uint64 reserved, uint64 count, count arrays, uint64 count, count x (uint64 length, bytes)

and each array is::

    uint32 magic   0xF993FAC9 (V2) or 0xF993FACA (V3, saved under numpy shape semantics)
    int32 storage  0 dense (1 row_sparse and 2 csr are refused here)
    int32 ndim, ndim x int64 dims
    int32 dev_type, int32 dev_id   (ignored: the arrays come back on the host)
    int32 type flag, then the raw data in C order

Older files hold V1 arrays (magic 0xF993FAC8: no storage type) or V0 ones (no magic:
the first uint32 is ndim, then uint32 dims); both are read, and in both ndim 0 is an
empty NDArray handle with nothing after it, refused here. A file saved from a list has
no names: its arrays come back keyed ``"0"``, ``"1"``...

Arrays come back as ``mx.nd.load`` gives them under MXNet's global numpy shape semantics
(``mx.util.set_np_shape(2)``), bfloat16 as MXNet's own structured dtype
``[('bfloat16', '<u2')]`` (``.view(np.uint16)`` shows its bits). Under MXNet's default
semantics ``mx.nd.load`` refuses V3 files, and misreads a V2 file holding a 0-d array
(``mx.nd.array(5.0)`` saved), which it writes all the same: here that array is a scalar.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from byoc_workbench.core.errors import WorkbenchError

LIST_MAGIC = 0x112
V1_MAGIC, V2_MAGIC, V3_MAGIC = 0xF993FAC8, 0xF993FAC9, 0xF993FACA
#: MXNet's dtype for bfloat16 (``mx.nd.NDArray.dtype`` and ``asnumpy()`` give it): numpy has none.
BFLOAT16 = np.dtype([("bfloat16", "<u2")])
#: MXNet's type flags (mshadow's ``kFloat32``...), those MXNet 1.9 saves and reads back, as stored.
DTYPES: dict[int, np.dtype] = {
    0: np.dtype("<f4"),
    1: np.dtype("<f8"),
    2: np.dtype("<f2"),
    3: np.dtype("u1"),
    4: np.dtype("<i4"),
    5: np.dtype("i1"),
    6: np.dtype("<i8"),
    7: np.dtype("?"),
    12: BFLOAT16,
}
_SPARSE = {1: "row_sparse", 2: "csr"}
_V0_MAX_NDIM = 32  # a V0 array's first word is its ndim: a larger one is a damaged magic, not a shape
_DAMAGED = "the file is damaged or cut short: download it or save it again"


class ParamsFileError(WorkbenchError):
    """An MXNet ``.params`` file that cannot be read: missing, damaged, or holding arrays numpy cannot take."""


def read_params(path) -> dict[str, np.ndarray]:
    """The arrays of an MXNet ``.params`` file, as ``mx.nd.load(path)`` gives them, without mxnet.

    Parameters
    ----------
    path : str or os.PathLike
        A file written by ``mx.nd.save``, ``Block.save_parameters`` or :func:`write_params`.

    Returns
    -------
    dict of str to numpy.ndarray
        Name to a C-contiguous array the caller owns, in file order; a file saved from a
        list has keys ``"0"``, ``"1"``... A name saved twice keeps its last array, as in MXNet.

    Raises
    ------
    ParamsFileError
        The file is missing, empty, damaged, sparse, or of a dtype MXNet 1.9 does not save.
    """
    path = Path(path)
    if path.is_dir():
        raise ParamsFileError(f"{path} is a directory, not an MXNet .params file", "pass the .params file itself")
    try:
        size = path.stat().st_size
        # Mapped, not read: each array is copied once, from the page cache, and a 250 MB file is not held twice.
        buf = np.memmap(path, dtype=np.uint8, mode="r") if size else None
    except FileNotFoundError:
        raise ParamsFileError(f"No MXNet .params file at {path}", "check the path") from None
    except OSError as err:
        raise ParamsFileError(
            f"Cannot read {path}: {err.strerror or err}", "check the path and its permissions"
        ) from None
    if buf is None:
        raise ParamsFileError(f"{path} is empty (0 bytes), not an MXNet .params file", "download it or save it again")
    try:
        return _Reader(buf, path)._read_all()
    except ParamsFileError as err:
        cause, fix = err.cause, err.fix
    # Raised afresh, once the first error and its frames (which hold the mapping) are gone: the file is closed
    # now, so Windows lets it be replaced or deleted while the error is still shown.
    del buf
    raise ParamsFileError(cause, fix)


class _Reader:
    """A cursor over a mapped file; every read checks that the bytes are there."""

    def __init__(self, buf: np.ndarray, path: Path):
        self.buf, self.path, self.pos = buf, path, 0

    def _need(self, nbytes: int, what: str) -> None:
        if nbytes > len(self.buf) - self.pos:
            raise ParamsFileError(
                f"{self.path} ends at byte {len(self.buf)}, inside {what} (at byte {self.pos}, {nbytes} bytes)",
                _DAMAGED,
            )

    def _unpack(self, fmt: str, what: str) -> tuple[int, ...]:
        self._need(struct.calcsize(fmt), what)
        values = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return values

    def _read_all(self) -> dict[str, np.ndarray]:
        (magic,) = self._unpack("<Q", "the list header")
        if magic != LIST_MAGIC:
            raise ParamsFileError(
                f"{self.path} is not an MXNet .params file: it starts with {magic:#x}, not {LIST_MAGIC:#x}",
                "pass a file written by mx.nd.save or Block.save_parameters (a failed download may be an HTML page)",
            )
        _, count = self._unpack("<QQ", "the list header")
        self._need(4 * count, f"the {count} arrays the header announces")  # each takes 4 bytes at least
        values = [self._read_array(i, count) for i in range(count)]
        (named,) = self._unpack("<Q", "the names' count")
        if named not in (0, count):
            raise ParamsFileError(f"{self.path} holds {count} arrays but {named} names", _DAMAGED)
        names = [self._read_name(i) for i in range(named)] or [str(i) for i in range(count)]
        # Bytes after the names are ignored, as MXNet ignores them.
        return dict(zip(names, values))

    def _read_name(self, i: int) -> str:
        (length,) = self._unpack("<Q", f"the length of name {i}")
        self._need(length, f"name {i}")
        raw = bytes(self.buf[self.pos : self.pos + length])
        self.pos += length
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ParamsFileError(f"Name {i} of {self.path} is not UTF-8 text ({raw[:20]!r})", _DAMAGED) from None

    def _read_array(self, i: int, count: int) -> np.ndarray:
        what = f"array {i} of {count}"
        (magic,) = self._unpack("<I", what)
        if magic in (V2_MAGIC, V3_MAGIC):
            (storage,) = self._unpack("<i", what)
            if storage == -1:  # MXNet's undefined storage: an NDArray handle without an array
                raise _no_data(i, self.path)
            if storage in _SPARSE:
                raise ParamsFileError(
                    f"Array {i} of {self.path} is stored as {_SPARSE[storage]}; only dense arrays are read",
                    "save it dense in MXNet: mx.nd.save(path, {name: array.tostype('default')})",
                )
            if storage != 0:
                raise ParamsFileError(
                    f"Array {i} of {self.path} has storage type {storage}, which MXNet lacks", _DAMAGED
                )
        if magic in (V1_MAGIC, V2_MAGIC, V3_MAGIC):
            (ndim,) = self._unpack("<i", what)
            shape = self._unpack(f"<{max(ndim, 0)}q", what)
        elif magic <= _V0_MAX_NDIM:
            ndim = magic
            shape = self._unpack(f"<{ndim}I", what)
        else:
            raise ParamsFileError(f"Array {i} of {self.path} starts with {magic:#x}, no MXNet array format", _DAMAGED)
        # Before storage types (V1, V0) ndim 0 was an empty handle; after, a scalar. An unknown ndim or dim (-1)
        # is an empty handle too.
        if ndim < 0 or (ndim == 0 and magic not in (V2_MAGIC, V3_MAGIC)) or min(shape, default=0) < 0:
            raise _no_data(i, self.path)
        _, _, flag = self._unpack("<iii", what)  # the device it was saved from, then its type
        if flag not in DTYPES:
            known = ", ".join(str(d) if d != BFLOAT16 else "bfloat16" for d in DTYPES.values())
            raise ParamsFileError(
                f"Array {i} of {self.path} has MXNet type flag {flag}, not one of {known}",
                "cast it to one of those in MXNet and save it again",
            )
        dtype = DTYPES[flag]
        n = math.prod(shape)  # Python ints: damaged dims cannot overflow
        self._need(n * dtype.itemsize, f"the data of {what}")
        data = np.frombuffer(self.buf, dtype=dtype, count=n, offset=self.pos)
        self.pos += n * dtype.itemsize
        return data.reshape(shape).astype(dtype.newbyteorder("="), copy=True)


def _no_data(i: int, path: Path) -> ParamsFileError:
    return ParamsFileError(
        f"Array {i} of {path} has no shape (an empty MXNet NDArray), so no data", "save the file again without it"
    )


def write_params(path, arrays: Mapping[str, np.ndarray]) -> None:
    """Write ``arrays`` as ``mx.nd.save(path, arrays)`` would, for ``mx.nd.load`` and :func:`read_params`.

    The arrays get V2 records, which ``mx.nd.load`` reads by default, unless one is 0-d: then all get
    V3 records, as MXNet writes under numpy shape semantics, and MXNet reads them only under those
    (``mx.npx.set_np()``).

    Parameters
    ----------
    path : str or os.PathLike
        The file to write (replaced if it exists).
    arrays : mapping of str to array_like
        Name to array, of a dtype in :data:`DTYPES` (native or little-endian) or :data:`BFLOAT16`.
    """
    arrays = {name: np.asarray(value) for name, value in arrays.items()}
    magic = V3_MAGIC if any(value.ndim == 0 for value in arrays.values()) else V2_MAGIC
    records = []
    for name, value in arrays.items():
        flag = next((f for f, dtype in DTYPES.items() if dtype == value.dtype.newbyteorder("<")), None)
        if flag is None:
            raise ParamsFileError(
                f"Array {name!r} has dtype {value.dtype}, which MXNet 1.9 does not save",
                "cast it to float32, float64, float16, uint8, int32, int8, int64, bool or mxnet_params.BFLOAT16",
            )
        head = struct.pack(f"<Iii{value.ndim}qiii", magic, 0, value.ndim, *value.shape, 1, 0, flag)
        records.append((name, head, value.astype(DTYPES[flag], copy=False)))
    with open(path, "wb") as out:
        out.write(struct.pack("<QQQ", LIST_MAGIC, 0, len(records)))
        for _, head, data in records:
            out.write(head)
            out.write(data.tobytes())
        out.write(struct.pack("<Q", len(records)))
        for name, _, _ in records:
            encoded = name.encode("utf-8")
            out.write(struct.pack("<Q", len(encoded)) + encoded)
