"""Batch kernels behind every Spark UDF form: one native call per Arrow batch, no Spark import.

Each kernel takes a whole column batch (a pyarrow Array/ChunkedArray, or a pandas Series as the
pandas_udf forms receive) and checksums every value in ONE call to `merkle.checksum_each`, which
reads the Arrow offsets and data buffers in place. Window checksums of every value are one call
too: the window boundaries of all values are computed with numpy and handed to the same native
call as a zero-copy LargeBinary view over the original data buffer. No Python code runs per row.

Null and empty rules (the same in every UDF form):
  - a null value gives a null result (never 0, so a missing value is not mistaken for a CRC);
  - an empty value gives CRC 0 (as CRC of b"" is 0), an empty window list, and leaf 0
    (Ozone's leaf of checksum type NONE);
  - a null *element* inside a window list, or a window value outside 0..2**32-1, raises
    ValueError (a corrupt input must not produce a plausible checksum).
Results are unsigned 32-bit values carried as int64 (Spark LongType), like Spark's crc32().
"""

from __future__ import annotations

from typing import Any, Optional, Tuple, Union

import numpy as np
import pyarrow as pa

import merkle
from merkle import ozone

__all__ = [
    "ALGORITHMS",
    "block_value",
    "check_algorithm",
    "check_bytes_per_checksum",
    "container_value",
    "crc_each",
    "leaf_each",
    "to_arrow_binary",
    "windows_each",
]

ALGORITHMS = ("crc32c", "crc32")

ArrayLike = Union[pa.Array, pa.ChunkedArray, Any]


def check_algorithm(algorithm: str) -> str:
    """Normalise an algorithm name; ValueError for anything but crc32c / crc32."""
    alg = str(algorithm).lower()
    if alg not in ALGORITHMS:
        raise ValueError(f"algorithm must be 'crc32c' or 'crc32', not {algorithm!r}")
    return alg


def check_bytes_per_checksum(bytes_per_checksum: int) -> int:
    """Window size must be a positive int (checked when the UDF is built, not per batch)."""
    if isinstance(bytes_per_checksum, bool) or not isinstance(bytes_per_checksum, int):
        raise TypeError("bytes_per_checksum must be an int")
    if bytes_per_checksum <= 0:
        raise ValueError("bytes_per_checksum must be > 0")
    return bytes_per_checksum


def _combine(arr: ArrayLike) -> pa.Array:
    if isinstance(arr, pa.ChunkedArray):
        return arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    return arr


def to_arrow_binary(values: ArrayLike) -> pa.Array:
    """A Binary/LargeBinary Arrow array from what a UDF receives (Arrow, pandas, list).

    pandas Series of bytes are copied once into an Arrow buffer by pyarrow (C loop); Arrow
    input is used as is. Strings are refused, as by merkle.crc32c.
    """
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        arr = _combine(values)
    else:
        arr = pa.array(values, type=pa.binary(), from_pandas=True)
    t = arr.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        raise TypeError("Strings must be encoded before hashing (cast the column to binary)")
    if pa.types.is_fixed_size_binary(t):
        arr = arr.cast(pa.binary())
    elif not (pa.types.is_binary(t) or pa.types.is_large_binary(t)):
        raise TypeError(f"expected a binary column, got {t}")
    return arr


def _null_mask(arr: pa.Array) -> Optional[np.ndarray]:
    if arr.null_count == 0:
        return None
    return arr.is_null().to_numpy(zero_copy_only=False)


def _int64_with_nulls(values: np.ndarray, nulls: Optional[np.ndarray]) -> pa.Array:
    out = values.astype(np.int64, copy=False)
    return pa.array(out, type=pa.int64(), mask=nulls)


def crc_each(values: ArrayLike, algorithm: str = "crc32c") -> pa.Array:
    """CRC of every value of a binary batch as an int64 Arrow array (null in, null out)."""
    alg = check_algorithm(algorithm)
    if not isinstance(values, (pa.Array, pa.ChunkedArray)):
        # pandas / list input: checksum the Python buffers in place (no copy into Arrow);
        # checksum_each gives 0 for None, the mask restores the null.
        obj = (
            values.to_numpy(dtype=object)
            if hasattr(values, "to_numpy")
            else np.asarray(values, dtype=object)
        )
        if obj.size and isinstance(obj[0], str):
            raise TypeError("Strings must be encoded before hashing (cast the column to binary)")
        crcs = merkle.checksum_each(obj, algorithm=alg)
        nulls = (
            values.isna().to_numpy()
            if hasattr(values, "isna")
            else np.array([v is None for v in obj], dtype=bool)
        )
        return _int64_with_nulls(crcs, nulls if nulls.any() else None)
    arr = to_arrow_binary(values)
    crcs = merkle.checksum_each(arr, algorithm=alg)
    return _int64_with_nulls(crcs, _null_mask(arr))


def _offsets(arr: pa.Array) -> np.ndarray:
    """The value offsets of a (possibly sliced) Binary/LargeBinary array, as int64."""
    dtype = np.int64 if pa.types.is_large_binary(arr.type) else np.int32
    buf = arr.buffers()[1]
    offs = (
        np.frombuffer(buf, dtype=dtype, count=arr.offset + len(arr) + 1)
        if buf is not None
        else np.zeros(arr.offset + len(arr) + 1, dtype=dtype)
    )
    return offs[arr.offset :].astype(np.int64)


def _window_bounds(
    arr: pa.Array, bpc: int
) -> Tuple[np.ndarray, np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """(window starts, window ends, windows per value, nulls) in data-buffer coordinates."""
    offs = _offsets(arr)
    starts, ends = offs[:-1], offs[1:]
    nulls = _null_mask(arr)
    lens = ends - starts
    if nulls is not None:
        lens = np.where(nulls, 0, lens)
    nw = -(-lens // bpc)
    total = int(nw.sum())
    first = np.zeros(len(nw), dtype=np.int64)
    if len(nw) > 1:
        np.cumsum(nw[:-1], out=first[1:])
    k = np.arange(total, dtype=np.int64) - np.repeat(first, nw)
    wstart = np.repeat(starts, nw) + k * bpc
    wend = np.minimum(wstart + bpc, np.repeat(starts + lens, nw))
    return wstart, wend, nw, nulls


def _windows_flat(
    arr: pa.Array, bpc: int, alg: str
) -> Tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """uint32 window checksums of every value, concatenated; windows per value; nulls."""
    wstart, wend, nw, nulls = _window_bounds(arr, bpc)
    if wstart.size == 0:
        return np.zeros(0, dtype=np.uint32), nw, nulls
    # One LargeBinary view whose segments are the windows (plus any gaps, e.g. bytes behind
    # a null value), sharing the original data buffer: one native call for all windows.
    points = np.unique(np.concatenate((wstart, wend)))
    data = arr.buffers()[2]
    segs = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), points.size - 1, [None, pa.py_buffer(points), data]
    )
    seg_crc = merkle.checksum_each(segs, algorithm=alg)
    return seg_crc[np.searchsorted(points, wstart)], nw, nulls


def windows_each(
    values: ArrayLike,
    bytes_per_checksum: int = ozone.DEFAULT_BYTES_PER_CHECKSUM,
    algorithm: str = "crc32c",
    packed: bool = False,
) -> pa.Array:
    """Window checksums of every value: list<int64> (packed=False) or binary holding them as
    4-byte big-endian words, Ozone's stored form (packed=True). The last window may be short;
    an empty value gives an empty list / empty binary; a null value gives null."""
    alg = check_algorithm(algorithm)
    bpc = check_bytes_per_checksum(bytes_per_checksum)
    arr = to_arrow_binary(values)
    flat, nw, nulls = _windows_flat(arr, bpc, alg)
    list_offsets = np.zeros(len(nw) + 1, dtype=np.int32)
    np.cumsum(nw, out=list_offsets[1:])
    validity = None if nulls is None else pa.array(~nulls).buffers()[1]
    if packed:
        data = pa.py_buffer(flat.astype(">u4").tobytes())
        return pa.BinaryArray.from_buffers(
            pa.binary(),
            len(nw),
            [validity, pa.py_buffer(list_offsets * 4), data],
            null_count=-1 if nulls is not None else 0,
        )
    vals = pa.array(flat.astype(np.int64), type=pa.int64())
    return pa.ListArray.from_buffers(
        pa.list_(pa.int64()),
        len(nw),
        [validity, pa.py_buffer(list_offsets)],
        children=[vals],
        null_count=-1 if nulls is not None else 0,
    )


def _list_flat(arr: pa.Array) -> Tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """(window values as uint32, per-row offsets from 0, nulls) of a list<int> batch."""
    offs = arr.offsets.to_numpy().astype(np.int64)
    nulls = _null_mask(arr)
    child = arr.values.slice(int(offs[0]), int(offs[-1] - offs[0]))
    if child.null_count:
        raise ValueError("a window checksum list holds a null element")
    raw = child.to_numpy(zero_copy_only=False)
    if raw.dtype.kind not in "iu":
        raise TypeError(f"window checksums must be integers, not {child.type}")
    if raw.size and (int(raw.min()) < 0 or int(raw.max()) > 0xFFFFFFFF):
        raise ValueError("window checksums must be unsigned 32-bit values (0..2**32-1)")
    rel = offs - offs[0]  # a null list spanning elements is hashed, then masked
    return raw.astype(np.uint32), rel, nulls


def leaf_each(windows: ArrayLike) -> pa.Array:
    """Ozone leaf of every row: CRC-32C over the row's window checksums as 4-byte big-endian
    words. Input: list<int> of window values, or binary holding the stored bytes (packed)."""
    if not isinstance(windows, (pa.Array, pa.ChunkedArray)):
        first = next((v for v in windows if v is not None), None) if len(windows) else None
        if isinstance(first, (bytes, bytearray, memoryview)):
            windows = pa.array(windows, type=pa.binary(), from_pandas=True)
        else:
            windows = pa.array(windows, type=pa.list_(pa.int64()), from_pandas=True)
    arr = _combine(windows)
    t = arr.type
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return crc_each(arr, "crc32c")
    if pa.types.is_large_list(t):
        arr = arr.cast(pa.list_(t.value_type))
    if not pa.types.is_list(arr.type):
        raise TypeError(f"expected list<bigint> or binary window checksums, got {t}")
    flat, rel, nulls = _list_flat(arr)
    data = pa.py_buffer(flat.astype(">u4").tobytes())
    packed = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(arr), [None, pa.py_buffer(rel * 4), data]
    )
    return _int64_with_nulls(merkle.checksum_each(packed, algorithm="crc32c"), nulls)


def _ints(values: Any, name: str) -> Tuple[np.ndarray, np.ndarray]:
    """int64 values and a null mask of a column given as Arrow or pandas."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        arr = _combine(values)
        nulls = arr.is_null().to_numpy(zero_copy_only=False)
        return arr.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64), nulls
    import pandas as pd  # pandas forms only: Spark hands int columns with nulls as float64

    s = values if isinstance(values, pd.Series) else pd.Series(values)
    nulls = s.isna().to_numpy()
    if nulls.any():
        return s.to_numpy(dtype=object, na_value=0).astype(np.int64), nulls
    return s.to_numpy().astype(np.int64), nulls


def block_value(block_id: Any, offset: Any, leaf: Any) -> int:
    """Ozone block value of ONE block's chunk rows, in any row order (sorted by offset here).

    Rows with a null leaf are skipped (a chunk the scan found missing has no leaf, as in
    Ozone's tree); a null or non-constant block ID or a null offset raises ValueError.
    """
    ids, id_nulls = _ints(block_id, "block_id")
    offs, off_nulls = _ints(offset, "offset")
    leaves, leaf_nulls = _ints(leaf, "leaf")
    if ids.size == 0:
        raise ValueError("block_value needs at least one row (the block ID)")
    if id_nulls.any() or (ids != ids[0]).any():
        raise ValueError("block_value rows must share one non-null block ID")
    keep = ~leaf_nulls
    if (off_nulls & keep).any():
        raise ValueError("a chunk with a leaf needs an offset")
    offs, leaves = offs[keep], leaves[keep]
    order = np.argsort(offs, kind="stable")
    return ozone.block_checksum(int(ids[0]), leaves[order])


def container_value(block_id: Any, block_value_: Any) -> int:
    """Ozone container value of ONE container's block rows (any order; sorted by block ID).

    Tombstones are ordinary rows here (their value is hashed, as in Ozone). Null IDs or values
    raise ValueError; duplicate block IDs too (a container lists each block once).
    """
    ids, id_nulls = _ints(block_id, "block_id")
    vals, val_nulls = _ints(block_value_, "block_value")
    if id_nulls.any() or val_nulls.any():
        raise ValueError("container_value rows need non-null block IDs and values")
    order = np.argsort(ids, kind="stable")
    ids = ids[order]
    if ids.size > 1 and bool(np.any(ids[1:] == ids[:-1])):
        raise ValueError("container_value got the same block ID twice")
    return ozone.container_checksum(vals[order])
