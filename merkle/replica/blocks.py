"""The block metadata of a replica, independent of where a layout keeps it: blocks of chunks,
each chunk with its window checksums as Ozone stores them (its ChecksumData).

crcmerkle's layout keeps it in a `.blocks` file (merkle.replica.replicadir.blockmeta, which
reads into and writes from these classes), Ozone's in the volume's RocksDB as BlockData rows
(merkle.replica.ozone.blockdata); the scanner, the reconciler and the generator work on this
model alone. Fields a layout's format holds but this version does not understand (a record's
reserved bytes and flags, a longer header) are carried here so that a rewrite keeps them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Tuple

import numpy as np

from merkle import _native

__all__ = [
    "ALGORITHM_TYPES",
    "BlockMeta",
    "CHECKSUM_SIZES",
    "CRC32",
    "CRC32C",
    "ChunkMeta",
    "ContainerMeta",
    "MD5",
    "NONE",
    "SHA256",
    "TYPE_NAMES",
]

#: Ozone's ChecksumType values
NONE, CRC32, CRC32C, SHA256, MD5 = 1, 2, 3, 4, 5
#: bytes of one window checksum of each type
CHECKSUM_SIZES = {NONE: 0, CRC32: 4, CRC32C: 4, SHA256: 32, MD5: 16}
TYPE_NAMES = {NONE: "NONE", CRC32: "CRC32", CRC32C: "CRC32C", SHA256: "SHA256", MD5: "MD5"}
#: checksum_windows algorithm names of the CRC types
ALGORITHM_TYPES = {"crc32": CRC32, "crc32c": CRC32C}

#: a chunk record's reserved bytes when none were read (the `.blocks` format has three)
_NO_RESERVED = b"\0\0\0"
_U63 = 1 << 63


@dataclass(frozen=True)
class ChunkMeta:
    """One chunk as the client wrote it: where it is and its window checksums (raw bytes)."""

    offset: int
    length: int
    checksum_type: int
    bytes_per_checksum: int
    checksums: bytes
    #: the record's reserved bytes as read (written back unchanged)
    reserved: bytes = _NO_RESERVED

    @property
    def end(self) -> int:
        return self.offset + self.length

    @property
    def n_windows(self) -> int:
        size = CHECKSUM_SIZES[self.checksum_type]
        return len(self.checksums) // size if size else 0

    @property
    def algorithm(self) -> Optional[str]:
        """The checksum_windows algorithm of a CRC chunk, else None."""
        return {CRC32: "crc32", CRC32C: "crc32c"}.get(self.checksum_type)

    def window_values(self) -> np.ndarray:
        """CRC window checksums as uint32 (stored big-endian)."""
        return np.frombuffer(self.checksums, dtype=">u4").astype(np.uint32)

    @property
    def leaf(self) -> int:
        """The chunk's tree value (CRC-32C of the stored checksum bytes, Ozone's leaf)."""
        return _native.crc32c(self.checksums)

    @classmethod
    def from_data(
        cls,
        offset: int,
        data: object,
        *,
        algorithm: str = "crc32",
        bytes_per_checksum: int = 16 * 1024,
    ) -> ChunkMeta:
        """The metadata a client write of `data` at `offset` records (CRC32/CRC32C/NONE)."""
        view = memoryview(data).cast("B")  # type: ignore[arg-type]
        alg = algorithm.lower()
        if alg == "none":
            return cls(int(offset), len(view), NONE, int(bytes_per_checksum), b"")
        if alg not in ALGORITHM_TYPES:
            raise ValueError(f"algorithm must be crc32, crc32c or none, not {algorithm!r}")
        w = _native.checksum_windows(view, bytes_per_checksum, algorithm=alg)
        return cls(
            int(offset),
            len(view),
            ALGORITHM_TYPES[alg],
            int(bytes_per_checksum),
            w.astype(">u4").tobytes(),
        )

    def validate(self) -> Optional[str]:
        """What is wrong with this record, or None."""
        if self.checksum_type not in CHECKSUM_SIZES:
            return f"unknown checksum type {self.checksum_type}"
        if not (
            0 <= self.offset < _U63 and 0 <= self.length < _U63 and self.offset + self.length < _U63
        ):
            return "offset/length out of range"
        size = CHECKSUM_SIZES[self.checksum_type]
        if size == 0:
            return None if not self.checksums else "checksums given for type NONE"
        if self.bytes_per_checksum <= 0:
            return "bytes_per_checksum must be > 0"
        want = -(-self.length // self.bytes_per_checksum)
        if len(self.checksums) != want * size:
            return (
                f"{len(self.checksums) // size} window checksums for {self.length} bytes "
                f"at {self.bytes_per_checksum} bytes per checksum ({want} expected)"
            )
        return None


@dataclass(frozen=True)
class BlockMeta:
    """One block: its chunks sorted by offset."""

    block_id: int
    chunks: Tuple[ChunkMeta, ...] = ()
    #: the record's reserved flags as read (written back unchanged)
    flags: int = 0

    @property
    def length(self) -> int:
        return self.chunks[-1].end if self.chunks else 0

    def chunk_at(self, offset: int) -> Optional[ChunkMeta]:
        for c in self.chunks:
            if c.offset == offset:
                return c
        return None

    def with_chunks(self, chunks: Iterable[ChunkMeta]) -> BlockMeta:
        """A copy with `chunks` added. A new chunk replaces every recorded chunk whose range
        it overlaps (its bytes were overwritten), and one at the same offset."""
        current = list(self.chunks)
        for c in chunks:
            current = [
                o
                for o in current
                if not (o.offset == c.offset or (o.offset < c.end and c.offset < o.end))
            ]
            current.append(c)
        current.sort(key=lambda c: c.offset)
        return BlockMeta(self.block_id, tuple(current), self.flags)


@dataclass(eq=False)
class ContainerMeta:
    """All blocks of one replica, by ID. (A layout's format may subclass it to add its
    encoding, as replicadir.blockmeta does; instances of the model and of such a subclass
    with the same contents are equal.)"""

    container_id: int
    blocks: Dict[int, BlockMeta] = field(default_factory=dict)
    #: header bytes a layout's format holds beyond what this version defines (kept)
    header_extra: bytes = b""

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, ContainerMeta):
            return NotImplemented
        return (self.container_id, self.blocks, self.header_extra) == (
            other.container_id,
            other.blocks,
            other.header_extra,
        )

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclass default

    @property
    def n_chunks(self) -> int:
        return sum(len(b.chunks) for b in self.blocks.values())

    @property
    def data_bytes(self) -> int:
        return sum(c.length for b in self.blocks.values() for c in b.chunks)

    def sorted_blocks(self) -> List[BlockMeta]:
        return [self.blocks[b] for b in sorted(self.blocks)]

    def copy(self) -> ContainerMeta:
        return type(self)(self.container_id, dict(self.blocks), self.header_extra)

    def put_chunks(self, block_id: int, chunks: Iterable[ChunkMeta]) -> None:
        """Add (or replace, at the same offset) chunks of a block, creating the block."""
        block = self.blocks.get(int(block_id), BlockMeta(int(block_id)))
        self.blocks[int(block_id)] = block.with_chunks(chunks)
