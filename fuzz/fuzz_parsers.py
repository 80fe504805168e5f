"""Fuzz targets of the two on-disk parsers: `.tree` files and `.blocks` block metadata.

Contract checked on every input: the parser returns a valid object or raises its documented
error (TreeFileError / BlockMetaError); any other exception, a crash of the native decoder,
a hang (the engine's per-input timeout) or an allocation out of proportion to the input
is a bug. A parsed object must also survive a round trip: encode -> parse gives the same
object and a canonical encoding is a fixed point.

The `.blocks` file carries a CRC-32C trailer, so random mutations almost never get past it.
The first input byte is therefore a flag: bit 0 set means "repair the header's body length
and the trailer after mutating", which lets the fuzzer reach the structural checks behind
the CRC (what a buggy writer, not bit rot, would produce).
"""

from __future__ import annotations

import struct
from typing import List

import numpy as np

from merkle import _native
from merkle.replica.errors import BlockMetaError
from merkle.replica.replicadir.blockmeta import ContainerMeta
from merkle.trees.diff import diff
from merkle.trees.merge import merge
from merkle.trees.treefile import TreeFileError, tree_from_bytes, tree_to_bytes

#: The decoders may allocate at most this many bytes of columns per input byte (+ a constant):
#: a block needs >= 2 input bytes (tag + empty length) and costs 3 int64 + 2 bytes of
#: columns, a chunk likewise 3 int64 + 2 bytes: ~13x. Anything above 16x means an allocation
#: is driven by a declared count, not by what the input holds.
TREE_BYTES_PER_INPUT_BYTE = 16
TREE_COLUMNS = (
    "block_id",
    "block_value",
    "block_deleted",
    "block_chunk_start",
    "chunk_offset",
    "chunk_length",
    "chunk_value",
    "chunk_matches",
)


def _tree_nbytes(tree) -> int:  # type: ignore[no-untyped-def]
    return sum(getattr(tree, c).nbytes for c in TREE_COLUMNS)


def target_tree(data: bytes) -> None:
    try:
        tree = tree_from_bytes(data)
    except TreeFileError as exc:
        assert exc.reason, "TreeFileError without a reason"
        return
    size = _tree_nbytes(tree)
    assert size <= TREE_BYTES_PER_INPUT_BYTE * len(data) + 64, (
        f"{size} bytes of columns from a {len(data)}-byte input"
    )
    encoded = tree_to_bytes(tree)
    again = tree_from_bytes(encoded)
    assert again == tree, "encode -> decode changed the tree"
    assert tree_to_bytes(again) == encoded, "re-encoding is not a fixed point"
    plain = again.replace()  # the same tree as Ozone would write it
    ozone_form = tree_to_bytes(plain)
    assert tree_from_bytes(ozone_form) == tree
    # Ozone's form: every block carries `deleted` (false included); unknown top-level fields
    # are kept and written after field 2, byte for byte
    assert tree_from_bytes(ozone_form)._wire is None, "not written in Ozone's form"
    assert ozone_form.endswith(tree.unknown_fields) and again.unknown_fields == tree.unknown_fields
    report = diff(tree, again)
    assert report.roots_equal or not report.needs_repair, "a tree needs repair from itself"
    merged = merge(tree, again)
    assert merged.n_blocks == tree.n_blocks


_HEADER = struct.Struct(">4sHHqIIQ")


def repair_framing(body: bytes) -> bytes:
    """Make the header's body length and the CRC-32C trailer consistent with the bytes."""
    if len(body) < _HEADER.size + 4:
        return body
    buf = bytearray(body)
    header_size = struct.unpack_from(">H", buf, 6)[0]
    if _HEADER.size <= header_size <= len(buf) - 4:
        struct.pack_into(">Q", buf, 24, len(buf) - header_size - 4)
    struct.pack_into(">I", buf, len(buf) - 4, _native.crc32c(bytes(buf[:-4])))
    return bytes(buf)


def target_blockmeta(data: bytes) -> None:
    flag, body = data[:1], data[1:]
    if flag and flag[0] & 1:
        body = repair_framing(body)
    try:
        meta = ContainerMeta.from_bytes(body)
    except BlockMetaError as exc:
        assert "not a valid block-metadata file" in str(exc) or (
            exc.unsupported and "unsupported version" in str(exc)
        ), str(exc)
        return
    # Every chunk holds its checksum bytes; the objects are bounded by the input size.
    assert sum(len(c.checksums) for b in meta.blocks.values() for c in b.chunks) <= len(body)
    # records are 28 bytes per chunk and 16 per block: no object without its bytes
    assert meta.n_chunks <= len(body) // 28 and len(meta.blocks) <= len(body) // 16 + 1
    encoded = meta.to_bytes()
    again = ContainerMeta.from_bytes(encoded)
    assert again == meta, "encode -> decode changed the metadata"
    assert again.to_bytes() == encoded, "re-encoding is not a fixed point"
    from merkle.replica.replicadir.writer import tree_from_meta

    tree = tree_from_meta(meta)  # what the writer stores from it: must be a valid tree
    assert tree.n_chunks == meta.n_chunks
    assert bool(np.all(tree.chunk_matches))


def seeds_tree() -> List[bytes]:
    """Golden files are added by the runner (fuzz/seeds/tree); these cover the shapes the
    goldens lack: many blocks, unknown fields, negative values, unsorted blocks."""
    from merkle.trees.model import ContainerTree

    out = []
    rng = np.random.default_rng(6)
    n = 40
    bids = np.repeat(np.arange(1, 9, dtype=np.int64), 5)
    offs = np.tile(np.arange(5, dtype=np.int64) * 4096, 8)
    t = ContainerTree.from_columns(
        7,
        bids,
        offs,
        np.full(n, 4096),
        leaf=rng.integers(0, 1 << 32, n),
        checksum_matches=rng.random(n) > 0.2,
        deleted_blocks={100: 5, -3: 1 << 31},
    )
    out.append(tree_to_bytes(t))
    out.append(b"\x08\x07\x12\x00")  # containerID 7, empty tree
    out.append(
        b"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x12\x06\x12\x04\x08\x05\x10\x01"
        b"\x18\x2a\x39" + bytes(8)
    )  # negative id, a block, an unknown fixed64 field
    out.append(b"\x08\x01\x12\x0c\x12\x04\x08\x09\x10\x01\x12\x04\x08\x02\x10\x01")  # unsorted
    return out


def seeds_blockmeta() -> List[bytes]:
    """Valid metadata of each checksum type, empty blocks and chunk-less files, flagged
    for framing repair (0x01) and raw (0x00)."""
    import hashlib

    from merkle.replica.replicadir.blockmeta import MD5, NONE, SHA256, ChunkMeta

    meta = ContainerMeta(9)
    data = bytes(range(256)) * 40
    meta.put_chunks(
        1,
        [
            ChunkMeta.from_data(0, data[:5000], algorithm="crc32", bytes_per_checksum=1024),
            ChunkMeta.from_data(5000, data[:100], algorithm="crc32c", bytes_per_checksum=64),
        ],
    )
    meta.put_chunks(2, [])
    meta.put_chunks(-5, [ChunkMeta(0, 300, NONE, 0, b"")])
    meta.put_chunks(
        3,
        [
            ChunkMeta(0, 2048, SHA256, 1024, hashlib.sha256(data[:1024]).digest() * 2),
            ChunkMeta(2048, 10, MD5, 1024, hashlib.md5(data[:10]).digest()),
        ],
    )
    raw = [meta.to_bytes(), ContainerMeta(1).to_bytes()]
    return [flag + r for r in raw for flag in (b"\x01", b"\x00")]
