"""Declared sizes never drive allocation (issue 6, parser fuzzing): the densest `.tree` input
allocates a bounded multiple of its own size, and `.blocks` headers or records that declare
huge counts fail fast without allocating what they declare.

The `.tree` decoder counts blocks and chunks in a first pass over the bytes actually present
(protobuf has no declared counts; every length prefix is checked against the bytes left),
so the worst input is the densest one: 2-byte empty blocks or chunks. Measured with
tracemalloc, which sees numpy's allocations."""

from __future__ import annotations

import struct
import time
import tracemalloc

import pytest

from merkle import _native
from merkle.replica.errors import BlockMetaError
from merkle.replica.replicadir.blockmeta import ContainerMeta
from merkle.trees.treefile import TreeFileError, tree_from_bytes

#: bytes allocated per input byte, at most, when decoding a `.tree` (columns + transient
#: copies made while validating; measured 25x for blocks, 37.5x for chunks); the final
#: columns alone are checked at 16x by fuzz/fuzz_parsers.py
TREE_PEAK_PER_BYTE = 48


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _peak(fn):
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _tree_bytes(inner: bytes) -> bytes:
    return b"\x08\x07\x12" + _varint(len(inner)) + inner


@pytest.mark.parametrize("shape", ["blocks", "chunks"])
def test_densest_tree_input_allocates_a_bounded_multiple(shape):
    n = 200_000
    if shape == "blocks":  # n empty BlockMerkleTree messages (IDs all 0: unsorted -> normalised)
        data = _tree_bytes(b"\x12\x00" * n)
    else:  # one block holding n empty ChunkMerkleTree messages
        block = b"\x08\x01" + b"\x1a\x00" * n
        data = _tree_bytes(b"\x12" + _varint(len(block)) + block)
    tree, peak = _peak(lambda: tree_from_bytes(data))
    assert (tree.n_blocks if shape == "blocks" else tree.n_chunks) in (1, n)
    assert peak <= TREE_PEAK_PER_BYTE * len(data), (peak, len(data), peak / len(data))


def test_tree_length_prefixes_beyond_the_input_fail_without_allocating():
    # a containerMerkleTree claiming 2**62 bytes, and one block claiming 2**40
    for data in (
        b"\x08\x07\x12" + _varint(1 << 62) + b"\x12\x00",
        _tree_bytes(b"\x12" + _varint(1 << 40) + b"\x08\x01"),
    ):
        t0 = time.perf_counter()
        tracemalloc.start()
        try:
            with pytest.raises(TreeFileError, match="runs past the end"):
                tree_from_bytes(data)
            assert tracemalloc.get_traced_memory()[1] < 64 * 1024
        finally:
            tracemalloc.stop()
        assert time.perf_counter() - t0 < 1.0


_HEADER = struct.Struct(">4sHHqIIQ")


def _framed(n_blocks: int, n_chunks: int, body: bytes) -> bytes:
    head = _HEADER.pack(b"CMBD", 1, _HEADER.size, 9, n_blocks, n_chunks, len(body))
    return head + body + struct.pack(">I", _native.crc32c(head + body))


@pytest.mark.parametrize(
    "case", ["huge-counts", "huge-windows", "huge-window-count-none", "huge-chunk-count"]
)
def test_blockmeta_declared_counts_are_capped_by_the_bytes(case):
    """Valid CRC, lying counts: an error, fast, with a few KiB allocated at most."""
    if case == "huge-counts":  # header: 4 billion blocks and chunks, empty body
        data = _framed(0xFFFFFFFF, 0xFFFFFFFF, b"")
    elif case == "huge-windows":  # one SHA256 chunk declaring 4 billion 32-byte checksums
        body = struct.pack(">qII", 1, 1, 0) + struct.pack(">QQB3xII", 0, 1 << 50, 4, 1, 0xFFFFFFFF)
        data = _framed(1, 1, body)
    elif case == "huge-window-count-none":  # type NONE claiming checksums
        body = struct.pack(">qII", 1, 1, 0) + struct.pack(">QQB3xII", 0, 10, 1, 0, 0xFFFFFFFF)
        data = _framed(1, 1, body)
    else:  # a block declaring 4 billion chunks, holding none
        data = _framed(1, 0xFFFFFFFF, struct.pack(">qII", 1, 0xFFFFFFFF, 0))
    t0 = time.perf_counter()
    tracemalloc.start()
    try:
        with pytest.raises(BlockMetaError):
            ContainerMeta.from_bytes(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024, peak
    assert time.perf_counter() - t0 < 1.0


def test_blockmeta_many_real_records_cost_proportional_memory():
    """The densest valid file: 28-byte NONE chunk records. Python objects per chunk are the
    cost (~10x the bytes); bounded by the file size, not by a declared number."""
    n = 20_000
    recs = b"".join(struct.pack(">QQB3xII", i * 10, 10, 1, 0, 0) for i in range(n))
    data = _framed(1, n, struct.pack(">qII", 1, n, 0) + recs)
    meta, peak = _peak(lambda: ContainerMeta.from_bytes(data))
    assert meta.n_chunks == n
    assert peak <= 40 * len(data), peak / len(data)
