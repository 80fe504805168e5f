from collections.abc import Iterable
from typing import Any, SupportsIndex, Union, overload

import numpy as np
import numpy.typing as npt

from merkle._crc import (
    CRC32 as CRC32,
    CRC32C as CRC32C,
    CRC64NVME as CRC64NVME,
    GIL_RELEASE_THRESHOLD as GIL_RELEASE_THRESHOLD,
    BackendUnavailableError as BackendUnavailableError,
    LengthOverflowError as LengthOverflowError,
    _CRCHash as _CRCHash,
    available_backends as available_backends,
    backend as backend,
    compiled_backends as compiled_backends,
    crc32 as crc32,
    crc32_combine as crc32_combine,
    crc32c as crc32c,
    crc32c_combine as crc32c_combine,
    crc64nvme as crc64nvme,
    crc64nvme_combine as crc64nvme_combine,
    read_probe as read_probe,
    set_backend as set_backend,
)

_Buffer = Union[bytes, bytearray, memoryview, "np.ndarray", object]
# "crc32c", "crc32" or "crc64nvme" in any case; another name raises ValueError at run time. A
# plain str: the callers pass names read from trees, metadata and listings.
_Algorithm = str

_Sums = Union[npt.NDArray[np.uint32], npt.NDArray[np.uint64]]  # uint64 for crc64nvme

def combine_many(
    crc1: npt.ArrayLike,
    crc2: npt.ArrayLike,
    len2: SupportsIndex,
    *,
    algorithm: _Algorithm = "crc32c",
) -> _Sums: ...
def fold_segments_be(
    be: npt.ArrayLike,
    bounds: npt.ArrayLike,
    last_len: npt.ArrayLike,
    stride: SupportsIndex,
    *,
    algorithm: _Algorithm = "crc32c",
) -> _Sums: ...
def fold_fixed(
    crcs: npt.ArrayLike, stride: SupportsIndex, *, algorithm: _Algorithm = "crc32c"
) -> int: ...
@overload
def checksum_windows(
    data: _Buffer,
    bytes_per_checksum: int,
    *,
    algorithm: _Algorithm = "crc32c",
    out: _Sums | None = None,
) -> _Sums: ...
@overload
def checksum_windows(
    data: _Buffer,
    bytes_per_checksum: int,
    *,
    algorithm: tuple[_Algorithm, _Algorithm] | list[_Algorithm],
    out: tuple[_Sums, _Sums] | list[_Sums] | None = None,
) -> tuple[_Sums, _Sums]: ...
def checksum_each(
    values: Iterable[_Buffer | None] | object,
    *,
    algorithm: _Algorithm = "crc32c",
    out: _Sums | None = None,
) -> _Sums: ...

# BookKeeper digest types: "crc32c", "crc32", "hmac-sha1" or "dummy" (any case)
_BookKeeperDigest = str

def bookkeeper_entries(
    data: _Buffer,
    offsets: npt.ArrayLike,
    sizes: npt.ArrayLike,
    digest: _BookKeeperDigest,
    *,
    also: Iterable[_Algorithm] | _Algorithm = (),
) -> dict[str, npt.NDArray[Any]]: ...

BK_OK: int
BK_SHORT: int
BK_OUT_OF_BOUNDS: int
BK_MISMATCH: int
BK_UNVERIFIED: int

# Ozone tree kernels (merkle/_ozone.pxi): private, called by merkle.trees only
_Column = npt.NDArray[Any]

class _OzoneDecodeError(ValueError): ...

def _ozt_leaves_u32(windows: npt.ArrayLike, starts: npt.ArrayLike) -> _Column: ...
def _ozt_leaves_bytes(data: npt.ArrayLike, starts: npt.ArrayLike) -> _Column: ...
def _ozt_block_values(
    block_ids: npt.ArrayLike, chunk_start: npt.ArrayLike, leaves: npt.ArrayLike
) -> _Column: ...
def _ozt_container_value(block_values: npt.ArrayLike) -> int: ...
def _ozt_sort_rows(keys: npt.ArrayLike, offsets: npt.ArrayLike | None = None) -> _Column | None: ...
def _ozt_is_sorted(values: npt.ArrayLike) -> bool: ...
def _ozt_group(chunk_block: npt.ArrayLike) -> tuple[_Column, _Column]: ...
def _ozt_encode(
    has_container_id: bool,
    container_id: int,
    has_tree: bool,
    has_data_checksum: bool,
    data_checksum: int,
    block_id: npt.ArrayLike,
    block_value: npt.ArrayLike,
    block_deleted: npt.ArrayLike,
    block_present: npt.ArrayLike | None,
    chunk_start: npt.ArrayLike,
    chunk_offset: npt.ArrayLike,
    chunk_length: npt.ArrayLike,
    chunk_value: npt.ArrayLike,
    chunk_matches: npt.ArrayLike,
    chunk_present: npt.ArrayLike | None,
    tail: bytes = b"",
) -> bytes: ...
def _ozt_decode(data: _Buffer) -> dict[str, Any]: ...
def _ozt_diff(ours: tuple[Any, ...], peer: tuple[Any, ...]) -> dict[str, Any]: ...
