"""Block metadata of a replica: the per-chunk checksums Ozone keeps in RocksDB, as one file.

File: `<container>/metadata/<containerID>.blocks`, replaced atomically (temp file, fsync,
rename, fsync dir) on every change, so it is always the old or the new version. It detects
its own corruption (a CRC-32C trailer over everything else, plus the lengths in the header),
so a flipped bit, a truncation or a foreign file is reported (BlockMetaError) and never
trusted. All integers are big-endian.

Format version 1:

    header (32 bytes)
      magic         4s   b"CMBD"  ("crcmerkle block data")
      version       u16  1        (a reader refuses newer major versions)
      header_size   u16  32       (room for a longer header in later versions: kept as is)
      container_id  i64
      n_blocks      u32
      n_chunks      u32  (all blocks together)
      body_length   u64  bytes between the header and the trailer
    body: n_blocks block records, block IDs strictly increasing
      block_id      i64
      n_chunks      u32
      flags         u32  0 (reserved; kept as read)
      then n_chunks chunk records, offsets strictly increasing, chunks not overlapping:
        offset              u64  file offset of the chunk in chunks/<blockID>.block
        length              u64
        checksum_type       u8   Ozone's ChecksumType: NONE=1 CRC32=2 CRC32C=3 SHA256=4 MD5=5
        reserved            3 bytes, 0 (kept as read)
        bytes_per_checksum  u32  window size (> 0 unless NONE)
        n_checksums         u32  = ceil(length / bytes_per_checksum); 0 for NONE
        checksums           n_checksums x size(type) bytes, as Ozone stores them
                            (CRC32/CRC32C: 4 bytes big-endian; SHA256 32; MD5 16)
    trailer (4 bytes)
      crc32c        u32  CRC-32C of header + body

What this reader does not understand is kept: a longer header's extra bytes, block flags and
chunk reserved bytes are written back as read. A file of a newer major version is refused
(BlockMetaError with unsupported=True, "unsupported version") and must never be rewritten.

The classes are the layout-neutral model (merkle.replica.blocks), re-exported here;
ContainerMeta adds the encoding (to_bytes, from_bytes).

Deleted blocks are not in this file (Ozone drops them from RocksDB); their tombstones live in
the `.tree`.
"""

from __future__ import annotations

import os
import struct
from typing import Dict, List, Optional, Union

from merkle import _native
from merkle.replica import blocks as _model
from merkle.replica.blocks import (  # noqa: F401
    ALGORITHM_TYPES,
    CHECKSUM_SIZES,
    CRC32,
    CRC32C,
    MD5,
    NONE,
    SHA256,
    TYPE_NAMES,
    BlockMeta,
    ChunkMeta,
)
from merkle.replica.errors import BlockMetaError
from merkle.replica.safeopen import open_dir, read_regular, replace_atomic

__all__ = [
    "ALGORITHM_TYPES",
    "BlockMeta",
    "CHECKSUM_SIZES",
    "CRC32",
    "CRC32C",
    "ChunkMeta",
    "ContainerMeta",
    "FORMAT_VERSION",
    "MAGIC",
    "MD5",
    "NONE",
    "SHA256",
    "TYPE_NAMES",
    "decode_blockmeta",
    "encode_blockmeta",
    "read_blockmeta",
    "write_blockmeta",
]

MAGIC = b"CMBD"
FORMAT_VERSION = 1

_HEADER = struct.Struct(">4sHHqIIQ")
_BLOCK = struct.Struct(">qII")
_CHUNK = struct.Struct(">QQB3sII")
_TRAILER = struct.Struct(">I")

PathLike = Union[str, "os.PathLike[str]"]


class ContainerMeta(_model.ContainerMeta):
    """All blocks of one replica, by ID (merkle.replica.blocks.ContainerMeta), with the
    `.blocks` encoding."""

    # ---- encoding ------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        return encode_blockmeta(self)

    @classmethod
    def from_bytes(
        cls, data: Union[bytes, bytearray, memoryview], source: Optional[str] = None
    ) -> ContainerMeta:
        """Parse a `.blocks` file; raises BlockMetaError for anything but a valid version-1
        (or compatible) file."""
        mv = memoryview(data).cast("B")

        def bad(reason: str) -> BlockMetaError:
            return BlockMetaError(f"not a valid block-metadata file: {reason}", source)

        if len(mv) >= 6 and bytes(mv[:4]) == MAGIC:
            (version,) = struct.unpack_from(">H", mv, 4)
            if version > FORMAT_VERSION:
                raise BlockMetaError(
                    f"unsupported version: format version {version} is newer "
                    f"than this crcmerkle reads ({FORMAT_VERSION}); not "
                    f"rewritten",
                    source,
                    unsupported=True,
                )

        if len(mv) < _HEADER.size + _TRAILER.size:
            raise bad(f"{len(mv)} bytes is shorter than header and trailer")
        magic, version, header_size, cid, n_blocks, n_chunks, body_len = _HEADER.unpack_from(mv)
        if magic != MAGIC:
            raise bad(f"bad magic {bytes(magic)!r}")
        if version < 1 or header_size < _HEADER.size:
            raise bad(f"bad version {version} / header size {header_size}")
        if header_size + body_len + _TRAILER.size != len(mv):
            raise bad(
                f"length {len(mv)} != header {header_size} + body {body_len} + trailer "
                f"(truncated or extended)"
            )
        end = header_size + body_len
        (crc,) = _TRAILER.unpack_from(mv, end)
        if _native.crc32c(mv[:end]) != crc:
            raise bad("CRC-32C trailer mismatch (corrupt)")
        pos = header_size
        blocks: Dict[int, BlockMeta] = {}
        seen_chunks = 0
        prev_id: Optional[int] = None
        try:
            for _ in range(n_blocks):
                block_id, nc, flags = _BLOCK.unpack_from(mv, pos)
                pos += _BLOCK.size
                if prev_id is not None and block_id <= prev_id:
                    raise bad(f"block IDs not increasing at {block_id}")
                prev_id = block_id
                chunks: List[ChunkMeta] = []
                prev_end = -1
                for _c in range(nc):
                    off, ln, ctype, reserved, bpc, nw = _CHUNK.unpack_from(mv, pos)
                    pos += _CHUNK.size
                    size = CHECKSUM_SIZES.get(ctype)
                    if size is None:
                        raise bad(f"block {block_id}: unknown checksum type {ctype}")
                    if size == 0 and nw:
                        raise bad(f"block {block_id}: type NONE chunk declares {nw} checksums")
                    nbytes = nw * size
                    if pos + nbytes > end:
                        raise bad(f"block {block_id}: chunk record runs past the body")
                    chunk = ChunkMeta(
                        off, ln, ctype, bpc, bytes(mv[pos : pos + nbytes]), bytes(reserved)
                    )
                    pos += nbytes
                    problem = chunk.validate()
                    if problem:
                        raise bad(f"block {block_id} chunk @{off}: {problem}")
                    if off < prev_end:
                        raise bad(f"block {block_id}: chunk @{off} overlaps the previous one")
                    prev_end = chunk.end
                    chunks.append(chunk)
                blocks[block_id] = BlockMeta(block_id, tuple(chunks), flags)
                seen_chunks += nc
        except struct.error:
            raise bad("record runs past the body") from None
        if pos != end:
            raise bad(f"{end - pos} unparsed bytes after the last block")
        if seen_chunks != n_chunks:
            raise bad(f"header says {n_chunks} chunks, body holds {seen_chunks}")
        return cls(cid, blocks, bytes(mv[_HEADER.size : header_size]))


def encode_blockmeta(meta: _model.ContainerMeta) -> bytes:
    """The `.blocks` bytes of any block-metadata model (merkle.replica.blocks.ContainerMeta,
    whichever layout read it)."""
    parts: List[bytes] = []
    n_chunks = 0
    for block in meta.sorted_blocks():
        parts.append(_BLOCK.pack(block.block_id, len(block.chunks), block.flags))
        for c in block.chunks:
            problem = c.validate()
            if problem:
                raise ValueError(f"block {block.block_id} chunk @{c.offset}: {problem}")
            n = c.n_windows
            parts.append(
                _CHUNK.pack(
                    c.offset, c.length, c.checksum_type, c.reserved, c.bytes_per_checksum, n
                )
            )
            parts.append(bytes(c.checksums))
            n_chunks += 1
    body = b"".join(parts)
    head = _HEADER.pack(
        MAGIC,
        FORMAT_VERSION,
        _HEADER.size + len(meta.header_extra),
        meta.container_id,
        len(meta.blocks),
        n_chunks,
        len(body),
    ) + bytes(meta.header_extra)
    crc = _native.crc32c(body, _native.crc32c(head))
    return head + body + _TRAILER.pack(crc)


def read_blockmeta(path: PathLike, container_id: Optional[int] = None) -> ContainerMeta:
    """Read and verify a `.blocks` file (BlockMetaError with missing=True if absent)."""
    name = os.fspath(path)
    try:
        dfd = open_dir(os.path.dirname(os.path.abspath(name)), follow=True)
        try:
            data = read_regular(dfd, os.path.basename(name), display=name)
        finally:
            os.close(dfd)
    except FileNotFoundError:
        raise BlockMetaError("block-metadata file is missing", name, missing=True) from None
    return decode_blockmeta(data, name, container_id)


def decode_blockmeta(
    data: Union[bytes, bytearray, memoryview],
    source: Optional[str] = None,
    container_id: Optional[int] = None,
) -> ContainerMeta:
    """Parse `.blocks` bytes read from `source`, checking they belong to `container_id`."""
    meta = ContainerMeta.from_bytes(data, source)
    if container_id is not None and meta.container_id != int(container_id):
        raise BlockMetaError(
            f"records container {meta.container_id}, expected {container_id}", source
        )
    return meta


def write_blockmeta(meta: _model.ContainerMeta, path: PathLike) -> None:
    """Write `meta` atomically (a crash leaves the old file or the new one), keeping the old
    file's owner and mode; never through a link."""
    name = os.fspath(path)
    data = encode_blockmeta(meta)
    dfd = open_dir(os.path.dirname(os.path.abspath(name)), follow=True)
    try:
        replace_atomic(dfd, os.path.basename(name), data, display=name)
    finally:
        os.close(dfd)
