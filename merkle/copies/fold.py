"""The CRC of a concatenation from its pieces' CRCs and sizes, without reading data (issue 27):
`full_object_crc` (an S3 composite `-N` value's parts -> the full-object value; a key's window
checksums -> the key's CRC), with the column checks every caller shares. Every size may come
from metadata an attacker wrote: nothing is allocated from one.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from merkle import _native
from merkle._crc import crc32_combine, crc32c_combine, crc64nvme_combine

ALGORITHMS = ("crc32", "crc32c", "crc64nvme")
WIDTH = {"crc32": 32, "crc32c": 32, "crc64nvme": 64}
DTYPE = {"crc32": np.uint32, "crc32c": np.uint32, "crc64nvme": np.uint64}
COMBINE: dict[str, Callable[[int, int, int], int]] = {
    "crc32": crc32_combine,
    "crc32c": crc32c_combine,
    "crc64nvme": crc64nvme_combine,
}
#: the largest key, in bytes, that anything here accepts (Java's long)
MAX_BYTES = (1 << 63) - 1


def algorithm_name(algorithm: str) -> str:
    """The algorithm's name here (CRC32C, CRC-32C and crc32c are all crc32c); a one-line
    ValueError for anything else."""
    name = str(algorithm).lower().replace("-", "").replace("/", "").replace("_", "")
    if name not in WIDTH:
        raise ValueError(f"unknown algorithm {algorithm!r} (crc32, crc32c or crc64nvme)")
    return name


def _int_column(values: object, name: str, what: str, top: int, dtype: type) -> np.ndarray:
    """A 1-D column of integers in 0..top as `dtype`, or a one-line ValueError. A list goes
    element by element (numpy would turn a list mixing small ints and ints beyond 2**63 into
    floats, losing bits); an array is checked by dtype and range."""
    if isinstance(values, np.ndarray):
        arr = values
    elif isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        raise ValueError(f"{name}: not a column of integers")
    else:
        items = list(values)  # type: ignore[call-overload]
        for v in items:
            if isinstance(v, (list, tuple, np.ndarray)):
                raise ValueError(f"{name}: must be one-dimensional")
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise ValueError(f"{name}: {what} must be integers, not {type(v).__name__}")
            if not 0 <= int(v) <= top:
                raise ValueError(f"{name}: {what} must be in 0..{_bound(top)}")
        return np.array([int(v) for v in items], dtype=dtype)
    if arr.ndim != 1:
        raise ValueError(f"{name}: must be one-dimensional, not {arr.ndim}-D")
    if arr.size == 0:
        return np.empty(0, dtype=dtype)
    if arr.dtype.kind not in "ui":
        raise ValueError(f"{name}: {what} must be integers, not {arr.dtype}")
    # one pass each, and only where the dtype does not already bound the values
    if arr.dtype.kind == "i" and int(arr.min()) < 0:
        raise ValueError(f"{name}: {what} must be in 0..{_bound(top)}")
    if int(np.iinfo(arr.dtype).max) > top and int(arr.max()) > top:
        raise ValueError(f"{name}: {what} must be in 0..{_bound(top)}")
    return np.ascontiguousarray(arr, dtype=dtype)


def _bound(top: int) -> str:
    return f"2**{top.bit_length()}-1"


def crc_column(values: object, algorithm: str, name: str) -> np.ndarray:
    return _int_column(values, name, "values", (1 << WIDTH[algorithm]) - 1, DTYPE[algorithm])


def _size_column(values: object, name: str) -> np.ndarray:
    return _int_column(values, name, "sizes", MAX_BYTES, np.int64)


def full_object_crc(part_crcs: object, part_sizes: object, algorithm: str) -> int:
    """The CRC of the concatenation of parts from each part's CRC and size (S3's composite
    `-N` value's parts -> its full-object value; crc32, crc32c or crc64nvme).

    Runs of equal sizes (a multipart upload's parts, a chunk's windows) are folded natively,
    one multiply per part; runs are joined with one combine each. 0 for no parts (the CRC of
    nothing). One-line ValueError on mismatched lengths, negative sizes, values out of range,
    a part of 0 bytes whose CRC is not 0, or a total beyond 2**63-1 bytes."""
    alg = algorithm_name(algorithm)
    crcs = crc_column(part_crcs, alg, "part_crcs")
    sizes = _size_column(part_sizes, "part_sizes")
    if crcs.shape[0] != sizes.shape[0]:
        raise ValueError(f"{crcs.shape[0]} part CRCs but {sizes.shape[0]} part sizes")
    return compose_columns(alg, crcs, sizes)[0]


def compose_columns(
    alg: str, crcs: np.ndarray, sizes: np.ndarray, strict: bool = True
) -> tuple[int, int]:
    """(CRC, total bytes) of validated columns. `strict=False` (Ozone's walk) lets a 0-byte
    piece with a CRC other than 0 through, as Ozone's composer does (it XORs it in)."""
    n = int(crcs.shape[0])
    if n == 0:
        return 0, 0
    starts = np.concatenate(([0], np.flatnonzero(sizes[1:] != sizes[:-1]) + 1, [n])).tolist()
    combine = COMBINE[alg]
    acc, total = 0, 0
    for begin, end in zip(starts[:-1], starts[1:]):
        size = int(sizes[begin])
        if strict and size == 0 and crcs[begin:end].any():
            # the CRC of no bytes is 0: anything else is a claim no data can back
            bad = begin + int(np.flatnonzero(crcs[begin:end])[0])
            raise ValueError(f"part {bad} has 0 bytes but CRC {int(crcs[bad]):#x}")
        run_bytes = size * (end - begin)
        total += run_bytes
        if total > MAX_BYTES:
            raise ValueError("the parts add up to more than 2**63-1 bytes")
        run_crc = int(_native.fold_fixed(crcs[begin:end], size, algorithm=alg))
        acc = combine(acc, run_crc, run_bytes)
    return acc, total
