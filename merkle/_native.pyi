from collections.abc import Iterable
from typing import Literal, SupportsIndex, Union, overload

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
_Algorithm = Literal["crc32c", "crc32", "crc64nvme", "CRC32C", "CRC32", "CRC64NVME"]

_Sums = Union[npt.NDArray[np.uint32], npt.NDArray[np.uint64]]  # uint64 for crc64nvme

def combine_many(
    crc1: npt.ArrayLike, crc2: npt.ArrayLike, len2: SupportsIndex, *,
    algorithm: _Algorithm = "crc32c"
) -> _Sums: ...
def fold_segments_be(
    be: npt.ArrayLike, bounds: npt.ArrayLike, last_len: npt.ArrayLike, stride: SupportsIndex,
    *, algorithm: _Algorithm = "crc32c"
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
    algorithm: tuple[_Algorithm, _Algorithm],
    out: tuple[_Sums, _Sums] | None = None,
) -> tuple[_Sums, _Sums]: ...
def checksum_each(
    values: Iterable[_Buffer | None] | object,
    *,
    algorithm: _Algorithm = "crc32c",
    out: _Sums | None = None,
) -> _Sums: ...
