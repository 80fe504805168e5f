"""Replica layout, the versioned block-metadata format, the writer and the replica lock."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

import merkle
from merkle.replica.crcmerkle.layout import container_paths, find_containers
from merkle.replica.errors import BlockMetaError, NotAReplicaError, ReplicaLockedError, WriterError
from merkle.replica.lock import ReplicaLock
from merkle.replica.replicadir.blockmeta import (
    CRC32,
    CRC32C,
    FORMAT_VERSION,
    MAGIC,
    NONE,
    BlockMeta,
    ChunkMeta,
    ContainerMeta,
    read_blockmeta,
    write_blockmeta,
)
from merkle.replica.replicadir.writer import ContainerWriter
from merkle.trees.ozone import format_checksum
from merkle.trees.treefile import read_tree

GOLDEN = Path(__file__).parent / "data" / "replica_blockmeta_v1.blocks"


def pattern(n: int, seed: int) -> bytes:
    return bytes((i * 31 + seed) % 251 for i in range(n))


def golden_meta() -> ContainerMeta:
    m = ContainerMeta(42)
    m.put_chunks(
        1,
        [
            ChunkMeta.from_data(0, pattern(40000, 1), algorithm="crc32", bytes_per_checksum=16384),
            ChunkMeta.from_data(
                40000, pattern(40000, 2), algorithm="crc32", bytes_per_checksum=16384
            ),
        ],
    )
    m.put_chunks(
        2, [ChunkMeta.from_data(0, pattern(12345, 3), algorithm="crc32c", bytes_per_checksum=4096)]
    )
    m.put_chunks(3, [ChunkMeta(0, 100, NONE, 16384, b"")])
    m.put_chunks(-7, [])
    return m


def test_golden_file_is_stable():
    """The on-disk format must never change by accident (regenerate only with a version bump)."""
    data = golden_meta().to_bytes()
    if not GOLDEN.exists():  # pragma: no cover - first run writes it
        GOLDEN.write_bytes(data)
    assert GOLDEN.read_bytes() == data
    assert data[:4] == MAGIC and struct.unpack(">H", data[4:6])[0] == FORMAT_VERSION
    assert ContainerMeta.from_bytes(GOLDEN.read_bytes()) == golden_meta()


def test_roundtrip_and_fields(tmp_path):
    m = golden_meta()
    p = tmp_path / "42.blocks"
    write_blockmeta(m, p)
    back = read_blockmeta(p, 42)
    assert back == m
    c = back.blocks[1].chunks[1]
    assert (c.offset, c.length, c.checksum_type, c.bytes_per_checksum, c.n_windows) == (
        40000,
        40000,
        CRC32,
        16384,
        3,
    )
    assert back.blocks[2].chunks[0].checksum_type == CRC32C
    assert np.array_equal(
        c.window_values(), merkle.checksum_windows(pattern(40000, 2), 16384, algorithm="crc32")
    )
    assert [b.block_id for b in back.sorted_blocks()] == [-7, 1, 2, 3]
    assert not list(tmp_path.glob("*.tmp"))


def test_every_single_bit_flip_is_detected():
    data = golden_meta().to_bytes()
    for pos in range(len(data)):
        for bit in range(8):
            bad = bytearray(data)
            bad[pos] ^= 1 << bit
            with pytest.raises(BlockMetaError):
                ContainerMeta.from_bytes(bad)


@pytest.mark.parametrize("cut", [0, 1, 31, 32, 33, -5, -4, -1])
def test_truncation_and_extension_are_detected(cut):
    data = golden_meta().to_bytes()
    with pytest.raises(BlockMetaError):
        ContainerMeta.from_bytes(data[:cut] if cut else b"")
    with pytest.raises(BlockMetaError, match="length"):
        ContainerMeta.from_bytes(data + b"\0")


def test_newer_version_and_foreign_files_refused():
    data = bytearray(golden_meta().to_bytes())
    data[4:6] = struct.pack(">H", FORMAT_VERSION + 1)
    with pytest.raises(BlockMetaError, match="newer"):
        ContainerMeta.from_bytes(bytes(data))
    with pytest.raises(BlockMetaError, match="magic"):
        ContainerMeta.from_bytes(b"PK\x03\x04" + bytes(60))


def test_missing_file_and_wrong_container(tmp_path):
    with pytest.raises(BlockMetaError) as e:
        read_blockmeta(tmp_path / "nope.blocks")
    assert e.value.missing
    write_blockmeta(golden_meta(), tmp_path / "x.blocks")
    with pytest.raises(BlockMetaError, match="container 42"):
        read_blockmeta(tmp_path / "x.blocks", 43)


def test_invalid_records_refused_on_write():
    m = ContainerMeta(1)
    m.put_chunks(1, [ChunkMeta(0, 10000, CRC32, 4096, b"\0" * 4)])  # 3 windows expected
    with pytest.raises(ValueError, match="window checksums"):
        m.to_bytes()


def test_overlapping_chunk_replaces_what_it_covers():
    b = BlockMeta(1).with_chunks([ChunkMeta.from_data(o, b"x" * 100) for o in (0, 100, 200)])
    b = b.with_chunks([ChunkMeta.from_data(50, b"y" * 100)])
    assert [c.offset for c in b.chunks] == [50, 200]


@pytest.mark.parametrize("algorithm,value", [("crc32", "1833a6a1"), ("crc32c", "6b62b968")])
def test_writer_matches_ozone_check_values(tmp_path, algorithm, value):
    """OZONE.md's check values: the writer's tree is Ozone's, byte for byte in value."""
    with ContainerWriter.create(
        tmp_path / "v" / "7", algorithm=algorithm, chunk_size=40000, bytes_per_checksum=16384
    ) as w:
        w.write_block(1, pattern(40000, 1) + pattern(40000, 2))
        w.write_block(2, pattern(12345, 3))
    tree = read_tree(tmp_path / "v" / "7" / "metadata" / "7.tree")
    assert format_checksum(tree.data_checksum) == value
    if algorithm == "crc32":
        assert [format_checksum(v) for v in tree.chunk_value] == [
            "1ca55f45",
            "7d6dd059",
            "42b3aa6a",
        ]
    meta = read_blockmeta(tmp_path / "v" / "7" / "metadata" / "7.blocks", 7)
    assert (tmp_path / "v/7/chunks/1.block").read_bytes() == pattern(40000, 1) + pattern(40000, 2)
    assert [c.offset for c in meta.blocks[1].chunks] == [0, 40000]


def test_writer_refuses_holes_and_deletes_with_tombstone(tmp_path):
    root = tmp_path / "v" / "3"
    with ContainerWriter.create(root, chunk_size=1000, bytes_per_checksum=256) as w:
        w.write_block(1, b"a" * 2500)
        w.write_chunk(2, 0, b"b" * 10)
        with pytest.raises(WriterError, match="hole"):
            w.write_chunk(2, 11, b"c")
        w.write_chunk(2, 10, b"c" * 5)
        before = w.tree()
        w.delete_block(1)
        with pytest.raises(WriterError, match="deleted"):
            w.write_chunk(1, 0, b"x")
    tree = read_tree(root / "metadata" / "3.tree")
    assert tree.block(1).deleted and tree.block(1).value == before.block(1).value
    assert not (root / "chunks" / "1.block").exists()
    assert 1 not in read_blockmeta(root / "metadata" / "3.blocks").blocks
    assert tree.data_checksum == before.data_checksum  # tombstones keep their value


def test_lock_excludes_a_second_holder(tmp_path):
    root = tmp_path / "v" / "9"
    ContainerWriter.create(root).close()
    paths = container_paths(root)
    with ReplicaLock(paths):
        with pytest.raises(ReplicaLockedError, match="locked"):
            ReplicaLock(paths).acquire()
        with pytest.raises(ReplicaLockedError):
            ContainerWriter(root)
    with ReplicaLock(paths):  # released: free again
        pass


def test_discovery(tmp_path):
    for dn, vol, cid in [(0, 0, 1), (0, 1, 2), (1, 0, 1)]:
        ContainerWriter.create(tmp_path / f"dn{dn}" / f"vol{vol}" / str(cid)).close()
    (tmp_path / "dn0" / "vol0" / "notes").mkdir()
    assert [str(loc.root.relative_to(tmp_path)) for loc in find_containers(tmp_path)] == [
        "dn0/vol0/1",
        "dn0/vol1/2",
        "dn1/vol0/1",
    ]
    assert len(find_containers(tmp_path / "dn0")) == 2
    locs = find_containers(tmp_path / "dn0" / "vol1" / "2")
    assert locs[0].container_id == 2 and locs[0].volume == tmp_path / "dn0" / "vol1"
    with pytest.raises(NotAReplicaError):
        find_containers(tmp_path / "dn0" / "vol0" / "notes")
    with pytest.raises(FileNotFoundError):
        find_containers(tmp_path / "nowhere")
    with pytest.raises(NotAReplicaError):
        container_paths(tmp_path / "abc")
