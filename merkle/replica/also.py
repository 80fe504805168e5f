"""Checksums a scan computes besides the recorded ones (`crcmerkle scan --also ALG`): another
CRC per window of each chunk, from the bytes the scan reads anyway (one native call per read
gives both: `checksum_windows(view, bpc, algorithm=(chunk's, ALG))`), and the CRC of each
whole block, combined from the windows (no second read). What S3 keeps for an object
(full-object CRC-64/NVME, CRC-32C or CRC-32) can then be compared with a stored replica
without reading it again: a single-part object made from one block carries the block's value.

Byte order: big-endian everywhere a value is stored as bytes, as Ozone stores its window
checksums (ChecksumData) and as S3's `x-amz-checksum-*` headers carry them (base64 of the
big-endian bytes): `windows_bytes` packs a chunk's windows, `value_bytes` one value.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from merkle import _native

__all__ = [
    "ALSO_ALGORITHMS",
    "AlsoChecksums",
    "WIDTHS",
    "check_algorithms",
    "combine",
    "concat",
    "s3_base64",
    "value_bytes",
]

#: the algorithms `--also` takes, in the order their table columns are laid out
ALSO_ALGORITHMS: Tuple[str, ...] = ("crc64nvme", "crc32c", "crc32")
#: bytes of one value of each
WIDTHS = {"crc64nvme": 8, "crc32c": 4, "crc32": 4}
_DTYPES = {8: np.uint64, 4: np.uint32}


def check_algorithms(names: Optional[Iterable[str]]) -> Tuple[str, ...]:
    """The algorithms named (case-insensitive), each once, in the order given; ValueError
    for a name that is not one of ALSO_ALGORITHMS."""
    out: List[str] = []
    for n in names or ():
        a = str(n).lower()
        if a not in WIDTHS:
            raise ValueError(f"--also {n!r}: one of {', '.join(ALSO_ALGORITHMS)}")
        if a not in out:
            out.append(a)
    return tuple(out)


def dtype_of(algorithm: str) -> Any:
    return _DTYPES[WIDTHS[algorithm]]


def crc_function(algorithm: str) -> Any:
    """The chained one-shot CRC (data, value) of `algorithm` (windows larger than a read)."""
    return getattr(_native, algorithm)


def combine(algorithm: str, crc1: int, crc2: int, len2: int) -> int:
    return int(getattr(_native, f"{algorithm}_combine")(crc1, crc2, len2))


def concat(algorithm: str, values: np.ndarray, window: int, last: int) -> int:
    """The CRC of the concatenation of the pieces whose CRCs are `values`: every piece
    `window` bytes but the last, `last` bytes. The equal pieces are folded in one native call
    (fold_fixed: Horner's rule, one fixed multiply each), the last joined by one combine."""
    if values.shape[0] == 0:
        return 0
    head = int(_native.fold_fixed(values[:-1], window, algorithm=algorithm))
    return combine(algorithm, head, int(values[-1]), last)


def value_bytes(algorithm: str, value: int) -> bytes:
    """One value as stored: big-endian, WIDTHS[algorithm] bytes."""
    return int(value).to_bytes(WIDTHS[algorithm], "big")


def s3_base64(algorithm: str, value: int) -> str:
    """The value as S3's `x-amz-checksum-<algorithm>` carries it (base64, big-endian)."""
    return base64.b64encode(value_bytes(algorithm, value)).decode("ascii")


@dataclass
class AlsoChecksums:
    """One `--also` algorithm's values of one replica, as columns (no object per chunk):
    chunk i (of block `chunk_block[i]` at `chunk_offset[i]`) has the windows
    `windows[window_start[i]:window_start[i + 1]]`; block `block_id[j]` has the whole-block
    value `block_value[j]`, only for blocks read in full (every chunk CRC-checked, read to
    its recorded length, the chunks covering the block from 0 without a gap)."""

    algorithm: str
    chunk_block: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    chunk_offset: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    window_start: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    windows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    block_id: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    block_value: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))

    @classmethod
    def collect(
        cls,
        algorithm: str,
        chunks: Sequence[Tuple[int, int, np.ndarray]],
        blocks: Sequence[Tuple[int, int]],
    ) -> AlsoChecksums:
        """From (block, offset, windows) per chunk and (block, value) per block."""
        dtype = dtype_of(algorithm)
        counts = np.array([w.shape[0] for _, _, w in chunks], dtype=np.int64)
        return cls(
            algorithm,
            np.array([b for b, _, _ in chunks], dtype=np.int64),
            np.array([o for _, o, _ in chunks], dtype=np.int64),
            np.concatenate((np.zeros(1, np.int64), np.cumsum(counts))),
            (
                np.concatenate([w for _, _, w in chunks]).astype(dtype)
                if chunks
                else np.zeros(0, dtype)
            ),
            np.array([b for b, _ in blocks], dtype=np.int64),
            np.array([v for _, v in blocks], dtype=np.uint64),
        )

    def chunk_windows(self, block: int, offset: int) -> Optional[np.ndarray]:
        """The windows of one chunk, or None when the scan has none for it."""
        hit = np.flatnonzero((self.chunk_block == block) & (self.chunk_offset == offset))
        if hit.shape[0] == 0:
            return None
        i = int(hit[0])
        return self.windows[self.window_start[i] : self.window_start[i + 1]]

    def block(self, block: int) -> Optional[int]:
        """The whole-block value, or None when the block was not read in full."""
        hit = np.flatnonzero(self.block_id == block)
        return None if hit.shape[0] == 0 else int(self.block_value[hit[0]])

    def windows_bytes(self, i: int) -> bytes:
        """Chunk i's windows packed big-endian (the tables' binary column)."""
        w = self.windows[self.window_start[i] : self.window_start[i + 1]]
        return w.astype(">u8" if WIDTHS[self.algorithm] == 8 else ">u4").tobytes()

    def to_dict(self, recorded: Optional[Any] = None) -> Dict[str, Any]:
        """JSON-ready: each block's value (hex, and S3's base64 form) and each chunk's
        windows (hex of the big-endian packed values); with `recorded`
        (merkle.replica.recorded.RecordedChecksums of the replica's metadata), each chunk
        also has the checksums its metadata recorded: checksum_type, bytes_per_checksum,
        checksums (hex), as the chunks table's columns (null where none)."""
        digits = 2 * WIDTHS[self.algorithm]
        return {
            "blocks": [
                {
                    "block_id": int(b),
                    "value": f"0x{int(v):0{digits}x}",
                    "base64": s3_base64(self.algorithm, int(v)),
                }
                for b, v in zip(self.block_id.tolist(), self.block_value.tolist())
            ],
            "chunks": [
                {
                    "block_id": int(b),
                    "offset": int(o),
                    "windows": self.windows_bytes(i).hex(),
                    **({} if recorded is None else recorded.fields(b, o)),
                }
                for i, (b, o) in enumerate(
                    zip(self.chunk_block.tolist(), self.chunk_offset.tolist())
                )
            ],
        }
