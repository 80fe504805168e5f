"""An Ozone key's checksum metadata as composition takes it: the chunks' `ChecksumData` per
block (or per EC block group), and its validation (one-line ValueErrors, nothing sized from a
length read from metadata, only from the checksums present).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

import numpy as np

from merkle.copies.fold import MAX_BYTES, crc_column

#: Ozone's ChecksumType names (and crcmerkle's CRC64NVME) -> algorithm
CRC_TYPES = {"CRC32": "crc32", "CRC32C": "crc32c", "CRC64NVME": "crc64nvme"}


@dataclass(frozen=True)
class ChunkChecksums:
    """One chunk's `ChecksumData` and length, as the datanode stores it (`ChunkInfo`):
    `checksums` are the window CRCs as integers (Ozone stores each as 4 big-endian bytes; see
    `from_ozone`), one per `bytes_per_checksum` bytes, the last window possibly short.
    `checksum_type` is Ozone's name (CRC32, CRC32C, SHA256, MD5, NONE; or its protobuf number)
    or CRC64NVME for the windows crcmerkle's scan recorded. `offset` is the chunk's offset in
    its block, when known."""

    length: int
    checksum_type: str | int
    bytes_per_checksum: int
    checksums: Sequence[int] | np.ndarray
    offset: Optional[int] = None

    @classmethod
    def from_ozone(
        cls,
        length: int,
        checksum_type: str | int,
        bytes_per_checksum: int,
        checksums: Iterable[bytes],
        offset: Optional[int] = None,
    ) -> ChunkChecksums:
        """From `ChecksumData.checksums`: each entry the checksum as big-endian bytes (4 for
        CRC32 and CRC32C, 8 for CRC64NVME, 32 for SHA256, 16 for MD5)."""
        name = checksum_type_name(checksum_type)
        if name not in _ENTRY_BYTES:
            raise ValueError(f"unknown checksum type {name[:40]!r}")
        width = _ENTRY_BYTES[name]
        values = []
        for i, entry in enumerate(checksums):
            raw = bytes(entry)
            if len(raw) != width:
                raise ValueError(f"checksum {i} of the chunk has {len(raw)} bytes, not {width}")
            values.append(int.from_bytes(raw, "big"))
        return cls(length, checksum_type, bytes_per_checksum, values, offset)


@dataclass(frozen=True)
class BlockChecksums:
    """One block of a key, in key order: `length` is the block's length as OM records it
    (`KeyLocation.length`), `chunks` its chunks in block order. For an EC key, one block group:
    `ec_stripes` holds each stripe's data cells in replica-index order (1..d; parity cells left
    out, Ozone discards them) and `chunks` is left empty."""

    length: int
    chunks: Sequence[ChunkChecksums] = ()
    ec_stripes: Optional[Sequence[Sequence[ChunkChecksums]]] = None


#: ContainerProtos.ChecksumType's numbers, as a decoded ChecksumData.type gives them
_TYPE_NUMBERS = {1: "NONE", 2: "CRC32", 3: "CRC32C", 4: "SHA256", 5: "MD5"}


def checksum_type_name(checksum_type: object) -> str:
    """Ozone's name for a checksum type given by name (any case) or protobuf number."""
    if isinstance(checksum_type, (int, np.integer)) and not isinstance(checksum_type, bool):
        return _TYPE_NUMBERS.get(int(checksum_type), f"type number {int(checksum_type)}")
    return str(checksum_type).upper()


def check_int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{what} must be an integer, not {type(value).__name__}")
    v = int(value)
    if v < 0 or v > MAX_BYTES:
        raise ValueError(f"{what} {v} is out of range 0..2**63-1")
    return v


#: bytes per stored checksum of each ChecksumType (Ozone reads the first 4 of each as an int)
_ENTRY_BYTES = {"CRC32": 4, "CRC32C": 4, "CRC64NVME": 8, "SHA256": 32, "MD5": 16, "NONE": 0}


@dataclass
class Chunk:
    """A validated chunk: its windows as a column of the algorithm's width (None when the type
    is not a CRC), and as Python ints for the step-by-step Ozone emulation."""

    length: int
    type_name: str
    bpc: int
    values: list[int] | None  # non-CRC types: the int Ozone reads from each entry
    column: Optional[np.ndarray]  # CRC types

    @property
    def count(self) -> int:
        return int(self.column.shape[0]) if self.column is not None else len(self.values or ())

    @property
    def ozone_column(self) -> np.ndarray:
        """`windows` as a uint32 column."""
        if self.column is not None and self.column.dtype == np.uint32:
            return self.column
        return np.array(self.windows, dtype=np.uint32)

    @property
    def windows(self) -> list[int]:
        """What Ozone reads from each entry (getInt: its first 4 bytes) as Python ints, for the
        step-by-step emulation only (not the fast path)."""
        if self.column is None:
            return list(self.values or ())
        if self.column.dtype == np.uint64:  # CRC64NVME entries are 8 bytes, big-endian
            return (self.column >> np.uint64(32)).tolist()
        return self.column.tolist()


def _chunk(chunk: object, where: str) -> Chunk:
    if not isinstance(chunk, ChunkChecksums):
        raise ValueError(f"{where}: not a ChunkChecksums ({type(chunk).__name__})")
    length = check_int(chunk.length, f"{where}: length")
    bpc = check_int(chunk.bytes_per_checksum, f"{where}: bytes_per_checksum")
    if chunk.offset is not None:
        check_int(chunk.offset, f"{where}: offset")
    type_name = checksum_type_name(chunk.checksum_type)
    if type_name not in _ENTRY_BYTES:
        raise ValueError(f"{where}: unknown checksum type {type_name[:40]!r}")
    alg = CRC_TYPES.get(type_name)
    if alg is None:  # SHA256, MD5, NONE: kept for Ozone's reading of them, never composed
        entry = _ENTRY_BYTES[type_name]
        values = list(chunk.checksums)
        if entry == 0 and values:
            raise ValueError(f"{where}: checksum type NONE with {len(values)} checksums")
        for v in values:
            if (
                isinstance(v, bool)
                or not isinstance(v, (int, np.integer))
                or not 0 <= int(v) < 1 << (8 * entry)
            ):
                raise ValueError(
                    f"{where}: a {type_name} checksum must be an integer of {entry} bytes"
                )
        return Chunk(length, type_name, bpc, [int(v) >> (8 * entry - 32) for v in values], None)
    column = crc_column(chunk.checksums, alg, f"{where}: checksums")
    # the window count must be exact: more or fewer CRCs than windows is corrupt metadata
    if length and bpc == 0:
        raise ValueError(f"{where}: bytes_per_checksum is 0 for {length} bytes")
    expected = -(-length // bpc) if length else 0
    if column.shape[0] != expected:
        raise ValueError(
            f"{where}: {column.shape[0]} window checksums for {length} bytes "
            f"at {bpc} bytes per checksum ({expected} expected)"
        )
    return Chunk(length, type_name, bpc, None, column)


@dataclass
class Block:
    length: int  # OM's
    chunks: list[Chunk]  # replicated: in block order; EC: every data cell in order
    stripes: Optional[list[list[Chunk]]]  # EC only


def validate(blocks: Sequence[BlockChecksums]) -> list[Block]:
    """Every block and chunk checked (one-line ValueError), nothing sized from a claim."""
    if isinstance(blocks, (str, bytes)) or not isinstance(blocks, Sequence):
        raise ValueError("blocks must be a sequence of BlockChecksums")
    out: list[Block] = []
    om_length = 0
    for b, block in enumerate(blocks):
        if not isinstance(block, BlockChecksums):
            raise ValueError(f"block {b}: not a BlockChecksums ({type(block).__name__})")
        om_len = check_int(block.length, f"block {b}: length")
        om_length += om_len
        if om_length > MAX_BYTES:
            raise ValueError("the blocks add up to more than 2**63-1 bytes")
        if block.ec_stripes is not None:
            if block.chunks:
                raise ValueError(f"block {b}: both chunks and EC stripes")
            stripes = [
                [_chunk(cell, f"block {b} stripe {s} cell {c}") for c, cell in enumerate(stripe)]
                for s, stripe in enumerate(block.ec_stripes)
            ]
            out.append(Block(om_len, [c for stripe in stripes for c in stripe], stripes))
            continue
        own: list[Chunk] = []
        position = 0
        for c, chunk in enumerate(block.chunks):
            valid = _chunk(chunk, f"block {b} chunk {c}")
            if chunk.offset is not None and int(chunk.offset) != position:
                raise ValueError(
                    f"block {b} chunk {c}: offset {int(chunk.offset)}, "
                    f"expected {position} (a gap or an overlap)"
                )
            position += valid.length
            own.append(valid)
        out.append(Block(om_len, own, None))
    if sum(c.length for blk in out for c in blk.chunks) > MAX_BYTES:
        raise ValueError("the chunks add up to more than 2**63-1 bytes")
    return out


def window_sizes(chunks: list[Chunk]) -> np.ndarray:
    """Every window's length, chunk after chunk: bytes_per_checksum, the last of a chunk what
    is left (counts were checked against the lengths: nothing here comes from a bare claim)."""
    counts = np.fromiter((c.count for c in chunks), dtype=np.int64, count=len(chunks))
    bpcs = np.fromiter((c.bpc for c in chunks), dtype=np.int64, count=len(chunks))
    lengths = np.fromiter((c.length for c in chunks), dtype=np.int64, count=len(chunks))
    sizes = np.repeat(bpcs, counts)
    some = counts > 0
    sizes[np.cumsum(counts)[some] - 1] = lengths[some] - (counts[some] - 1) * bpcs[some]
    return sizes
