"""The window checksums a replica's metadata RECORDS for each chunk (Ozone's ChunkInfo
.checksumData in the datanode's `container.db`; the chunk records of crcmerkle's `.blocks`
file), as columns: what a scan's chunks table carries (spark_udfs.tables.RECORDED_COLUMNS)
so that a later job (`crcmerkle spark copycheck`) can compose a key's full-object CRC from
them without reading the datanodes again.

The values are those of the block metadata the scan read (merkle.replica.blocks
.ContainerMeta, after the layout's checks: a row or record crcmerkle could not decode or
that failed its checks is not in it, so its chunks have no recorded values). They come
from a file or a RocksDB row an attacker can write: nothing here is sized from a number in
them (the checksum bytes are the bytes present, concatenated; `bytes_per_checksum` and the
type are only carried), and a (block, offset) two records share is ambiguous: no values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional

import numpy as np

from merkle.replica.blocks import TYPE_NAMES, ContainerMeta

__all__ = ["RecordedChecksums", "type_name"]


def type_name(number: int) -> str:
    """Ozone's ChecksumType name of a recorded type number (CRC32, CRC32C, SHA256, MD5,
    NONE), or "type number N" for a number Ozone does not define."""
    return TYPE_NAMES.get(int(number), f"type number {int(number)}")


def _empty_i64() -> np.ndarray:
    return np.zeros(0, np.int64)


@dataclass
class RecordedChecksums:
    """The recorded ChecksumData of every chunk of one replica's block metadata, as columns
    (no object per chunk): chunk i (of block `chunk_block[i]` at `chunk_offset[i]`) was
    recorded with type `checksum_type[i]` (Ozone's number), `bytes_per_checksum[i]` and the
    window checksums `data[start[i]:start[i + 1]]`, concatenated exactly as stored (4 bytes
    big-endian per CRC32/CRC32C window, 32 per SHA256, 16 per MD5, none for NONE).
    `unique[i]` is false when another chunk has the same (block, offset): ambiguous."""

    chunk_block: np.ndarray = field(default_factory=_empty_i64)
    chunk_offset: np.ndarray = field(default_factory=_empty_i64)
    checksum_type: np.ndarray = field(default_factory=_empty_i64)
    bytes_per_checksum: np.ndarray = field(default_factory=_empty_i64)
    start: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    data: bytes = b""
    unique: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    _index: Optional[Dict[Any, int]] = field(default=None, repr=False, compare=False)

    @classmethod
    def from_meta(cls, meta: Optional[ContainerMeta]) -> RecordedChecksums:
        """The recorded values of every chunk of `meta` (none for None). One pass over the
        chunk records the layout already decoded; values that do not fit a signed 64-bit
        column (a layout's checks reject them first) leave the whole replica without
        recorded values rather than a guess."""
        if meta is None:
            return cls()
        chunks = [(b.block_id, c) for b in meta.blocks.values() for c in b.chunks]
        n = len(chunks)
        try:
            block = np.fromiter((b for b, _ in chunks), np.int64, n)
            offset = np.fromiter((c.offset for _, c in chunks), np.int64, n)
            ctype = np.fromiter((c.checksum_type for _, c in chunks), np.int64, n)
            bpc = np.fromiter((c.bytes_per_checksum for _, c in chunks), np.int64, n)
        except (OverflowError, TypeError, ValueError):
            return cls()
        sizes = np.fromiter((len(c.checksums) for _, c in chunks), np.int64, n)
        start = np.concatenate((np.zeros(1, np.int64), np.cumsum(sizes)))
        data = b"".join(c.checksums for _, c in chunks)
        return cls(block, offset, ctype, bpc, start, data, _unique_keys(block, offset))

    def __len__(self) -> int:
        return int(self.chunk_block.shape[0])

    def checksums(self, i: int) -> bytes:
        """Chunk i's recorded window checksums, as stored."""
        return self.data[int(self.start[i]) : int(self.start[i + 1])]

    def find(self, block: int, offset: int) -> Optional[int]:
        """The index of the chunk of `block` at `offset`, or None (not recorded, or
        ambiguous)."""
        if self._index is None:
            self._index = {
                k: i
                for i, k in enumerate(zip(self.chunk_block.tolist(), self.chunk_offset.tolist()))
                if self.unique[i]
            }
        return self._index.get((int(block), int(offset)))

    def fields(self, block: int, offset: int) -> Dict[str, Any]:
        """JSON-ready: the chunk's checksum_type (name), bytes_per_checksum and checksums
        (hex), each None when the chunk has no recorded values."""
        i = self.find(block, offset)
        if i is None:
            return {"checksum_type": None, "bytes_per_checksum": None, "checksums": None}
        return {
            "checksum_type": type_name(int(self.checksum_type[i])),
            "bytes_per_checksum": int(self.bytes_per_checksum[i]),
            "checksums": self.checksums(i).hex(),
        }


def _unique_keys(block: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """For each (block, offset), whether no other entry has the same pair."""
    n = block.shape[0]
    out = np.ones(n, bool)
    if n < 2:
        return out
    order = np.lexsort((offset, block))
    same = (block[order[1:]] == block[order[:-1]]) & (offset[order[1:]] == offset[order[:-1]])
    out[order[1:][same]] = False
    out[order[:-1][same]] = False
    return out
