"""Apache Ozone's container checksum values (HDDS-10239): chunk leaf, block, container.

All three levels use CRC-32C, whatever the data checksum type:

- leaf:      CRC32C(stored window-checksum bytes of the chunk, in order)
             (4 big-endian bytes per CRC32/CRC32C window; SHA256/MD5 windows as stored)
- block:     CRC32C(BE64(block_id) || BE64(leaf) for each chunk by offset)
- container: CRC32C(BE64(block value) for each block by ID, tombstones included); 0 if none

Values are unsigned 32-bit ints (Ozone carries them in int64 fields and prints them with
`format_checksum`: lowercase hex, no leading zeros).
"""

from __future__ import annotations

from typing import Iterable, Sequence, Union

import numpy as np

from merkle import _native

__all__ = [
    "DEFAULT_ALGORITHM",
    "DEFAULT_BYTES_PER_CHECKSUM",
    "block_checksum",
    "container_checksum",
    "format_checksum",
    "leaf_checksum",
    "parse_checksum",
]

#: Ozone's default data checksum type (ozone.client.checksum.type) is CRC32 (IEEE).
DEFAULT_ALGORITHM = "crc32"
#: Ozone's default window (ozone.client.bytes.per.checksum): 16 KiB.
DEFAULT_BYTES_PER_CHECKSUM = 16 * 1024

_Windows = Union[bytes, bytearray, memoryview, np.ndarray, Sequence[int], Sequence[bytes]]


def _i64(values: object, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        arr = arr.reshape(-1) if arr.size else np.zeros(0, dtype=np.int64)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.dtype.kind not in "ui":
        raise TypeError(f"{name} must hold integers, not {arr.dtype}")
    if arr.dtype == np.uint64 and arr.size and int(arr.max()) >= 2**63:
        raise ValueError(f"{name} values must fit in a signed 64-bit integer")
    return np.ascontiguousarray(arr, dtype=np.int64)


def window_values(window_checksums: _Windows) -> np.ndarray:
    """Window checksums given as ints, as a contiguous uint32 array (range-checked)."""
    arr = np.asarray(window_checksums)
    if arr.size == 0:
        return np.zeros(0, dtype=np.uint32)
    if arr.dtype.kind not in "ui":
        raise TypeError(f"window checksums must be integers or bytes, not {arr.dtype}")
    if arr.dtype != np.uint32:
        if int(arr.min()) < 0 or int(arr.max()) > 0xFFFFFFFF:
            raise ValueError("uint32 window checksums must be in 0..2**32-1")
    return np.ascontiguousarray(arr.reshape(-1), dtype=np.uint32)


def _is_bytes_like(obj: object) -> bool:
    return isinstance(obj, (bytes, bytearray, memoryview))


def leaf_checksum(window_checksums: _Windows) -> int:
    """Leaf (chunk) value: CRC-32C over the chunk's stored window checksums, in order.

    `window_checksums` is either the uint32 values of CRC32/CRC32C windows (numpy array or
    sequence of ints; each is hashed as 4 big-endian bytes), or the raw stored bytes: one
    bytes-like object holding them all concatenated, or a sequence of bytes-like objects (one
    per window, e.g. 32-byte SHA256 windows). No windows (checksum type NONE) gives 0.
    """
    if isinstance(window_checksums, str):
        raise TypeError("window checksums must be ints or bytes, not str")
    if _is_bytes_like(window_checksums):
        return _native.crc32c(window_checksums)
    if (
        isinstance(window_checksums, (list, tuple))
        and window_checksums
        and all(_is_bytes_like(w) for w in window_checksums)
    ):
        return _native.crc32c(b"".join(bytes(w) for w in window_checksums))
    values = window_values(window_checksums)
    starts = np.array([0, values.shape[0]], dtype=np.int64)
    return int(_native._ozt_leaves_u32(values, starts)[0])


def block_checksum(block_id: int, leaf_checksums: Union[np.ndarray, Iterable[int]]) -> int:
    """Block value: CRC-32C over BE64(block_id) then BE64(leaf) for each chunk by offset."""
    leaves = _i64(
        list(leaf_checksums) if not isinstance(leaf_checksums, np.ndarray) else leaf_checksums,
        "leaf checksums",
    )
    ids = _i64([int(block_id)], "block_id")
    starts = np.array([0, leaves.shape[0]], dtype=np.int64)
    return int(_native._ozt_block_values(ids, starts, leaves)[0])


def container_checksum(block_checksums: Union[np.ndarray, Iterable[int]]) -> int:
    """Container value: CRC-32C over BE64(value) of every block by ID (tombstones included).

    An empty container gives 0. The container ID is not hashed.
    """
    values = _i64(
        list(block_checksums) if not isinstance(block_checksums, np.ndarray) else block_checksums,
        "block checksums",
    )
    return int(_native._ozt_container_value(values))


def format_checksum(value: int) -> str:
    """As Ozone prints a tree value: lowercase hex without leading zeros (Long.toHexString)."""
    return format(int(value) & 0xFFFFFFFFFFFFFFFF, "x")


def parse_checksum(text: str) -> int:
    """Inverse of format_checksum (accepts an optional 0x prefix)."""
    value = int(text, 16)
    return value - (1 << 64) if value >= (1 << 63) else value
