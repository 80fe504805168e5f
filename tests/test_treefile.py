"""The `.tree` format: byte-identical to the protobuf runtime (the oracle) for Ozone's
ContainerChecksumInfo, golden files, atomic writes, corrupt/truncated/empty/foreign files."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from merkle.trees import treefile
from merkle.trees.model import ContainerTree
from merkle.trees.treefile import TreeFileError, read_tree, tree_path, write_tree

import ozone_proto

DATA = Path(__file__).parent / "data"
GOLDEN = {
    "check_crc32.tree": (1, 0x1833A6A1, 2, 3),
    "check_crc32c.tree": (1, 0x6B62B968, 2, 3),
    "tombstones.tree": (1 << 40, None, 4, 3),
    "tombstone_only.tree": (5, None, 2, 0),
}


def _from_message(msg) -> ContainerTree:
    """Our tree built column by column from a protobuf-runtime message (not our decoder)."""
    ids, values, deleted, starts = [], [], [], [0]
    offs, lens, vals, matches = [], [], [], []
    for blk in msg.containerMerkleTree.blockMerkleTree:
        ids.append(blk.blockID)
        values.append(blk.dataChecksum)
        deleted.append(blk.deleted)
        for c in blk.chunkMerkleTree:
            offs.append(c.offset)
            lens.append(c.length)
            vals.append(c.dataChecksum)
            matches.append(c.checksumMatches)
        starts.append(len(offs))
    tree_msg = msg.containerMerkleTree
    return ContainerTree(
        msg.containerID,
        data_checksum=tree_msg.dataChecksum if tree_msg.HasField("dataChecksum") else None,
        block_id=ids,
        block_value=values,
        block_deleted=deleted,
        block_chunk_start=starts,
        chunk_offset=offs,
        chunk_length=lens,
        chunk_value=vals,
        chunk_matches=matches,
    )


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_files(name):
    raw = (DATA / name).read_bytes()
    tree = read_tree(DATA / name)
    cid, value, nb, nc = GOLDEN[name]
    assert (tree.container_id, tree.n_blocks, tree.n_chunks) == (cid, nb, nc)
    if value is not None:
        assert tree.data_checksum == value
    assert tree.to_bytes() == raw
    msg = ozone_proto.ContainerChecksumInfo.FromString(raw)
    assert ozone_proto.to_message(tree).SerializeToString() == raw
    assert msg.containerMerkleTree.HasField("dataChecksum") == (tree.data_checksum is not None)


def test_golden_files_are_what_the_generator_makes():
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_golden", DATA / "make_golden.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for name, tree in mod.golden_trees().items():
        assert tree.to_bytes() == (DATA / name).read_bytes(), name


def test_tombstone_only_tree_has_no_container_value():
    tree = read_tree(DATA / "tombstone_only.tree")
    assert tree.data_checksum is None
    assert tree.block_deleted.all()


# --- cross-check against the protobuf runtime -------------------------------------------

i64 = st.integers(-(2**63), 2**63 - 1)
u32 = st.integers(0, 2**32 - 1)
# lengths are >= 0 (a negative one is refused); offsets are any long, as Ozone writes them
chunk_st = st.tuples(st.integers(0, 2**40), st.integers(0, 2**33), u32, st.booleans())
block_st = st.tuples(
    i64,
    st.booleans(),
    st.one_of(u32, i64),
    st.dictionaries(st.integers(-10, 2**62), chunk_st, max_size=4),
)


@settings(max_examples=300, deadline=None)
@given(i64, st.one_of(st.none(), u32, i64), st.dictionaries(i64, block_st, max_size=6))
def test_encoder_matches_protobuf_runtime(cid, value, blocks):
    msg = ozone_proto.ContainerChecksumInfo()
    msg.containerID = cid
    msg.containerMerkleTree.SetInParent()
    if value is not None:
        msg.containerMerkleTree.dataChecksum = value
    for bid in sorted(blocks):
        _, deleted, bval, chunks = blocks[bid]
        bm = msg.containerMerkleTree.blockMerkleTree.add(blockID=bid, dataChecksum=bval)
        if not deleted:
            for off in sorted(chunks):
                _, ln, v, m = chunks[off]
                bm.chunkMerkleTree.add(offset=off, length=ln, dataChecksum=v, checksumMatches=m)
        bm.deleted = deleted  # always set, false included, as Ozone writes it
    raw = msg.SerializeToString()
    tree = ContainerTree.from_bytes(raw)
    assert tree.to_bytes() == raw
    assert tree.container_id == cid and tree.data_checksum == value
    rebuilt = _from_message(msg)
    assert rebuilt == tree
    assert rebuilt.to_bytes() == raw
    assert ozone_proto.ContainerChecksumInfo.FromString(tree.to_bytes()) == msg


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_decoder_reads_any_presence_the_runtime_writes(data):
    """Optional fields present or absent in any combination: we read what the runtime reads
    and write back the same bytes."""
    msg = ozone_proto.ContainerChecksumInfo()
    if data.draw(st.booleans()):
        msg.containerID = data.draw(i64)
    if data.draw(st.booleans()):
        msg.containerMerkleTree.SetInParent()
        if data.draw(st.booleans()):
            msg.containerMerkleTree.dataChecksum = data.draw(u32)
        for bid in range(data.draw(st.integers(0, 3))):
            bm = msg.containerMerkleTree.blockMerkleTree.add()
            if data.draw(st.booleans()) or True:
                bm.blockID = bid * 10
            if data.draw(st.booleans()):
                bm.dataChecksum = data.draw(u32)
            if data.draw(st.booleans()):
                bm.deleted = data.draw(st.booleans())
            for k in range(data.draw(st.integers(0, 3))):
                c = bm.chunkMerkleTree.add()
                c.offset = k * 7
                for fname, strat in (
                    ("length", st.integers(0, 2**63 - 1)),
                    ("dataChecksum", u32),
                    ("checksumMatches", st.booleans()),
                ):
                    if data.draw(st.booleans()):
                        setattr(c, fname, data.draw(strat))
    raw = msg.SerializeToString()
    if not raw:
        with pytest.raises(TreeFileError, match="empty"):
            ContainerTree.from_bytes(raw)
        return
    if not msg.HasField("containerID") and not msg.HasField("containerMerkleTree"):
        return
    tree = ContainerTree.from_bytes(raw)
    assert tree.to_bytes() == raw
    assert ozone_proto.ContainerChecksumInfo.FromString(tree.to_bytes()) == msg
    for blk, bm in zip(tree.blocks(), msg.containerMerkleTree.blockMerkleTree):
        assert (blk.block_id, blk.value, blk.deleted) == (bm.blockID, bm.dataChecksum, bm.deleted)
        for c, cm in zip(blk.chunks, bm.chunkMerkleTree):
            assert (c.offset, c.length, c.value, c.checksum_matches) == (
                cm.offset,
                cm.length,
                cm.dataChecksum,
                cm.checksumMatches,
            )


# field 3 (retired) as a length-delimited field, field 15 fixed64, field 16 fixed32, field 20
# varint: what an older Ozone's file or a newer one may carry at the top level
EXTRA = (
    bytes([0x1A, 2, 0xAA, 0xBB, 0x79])
    + bytes(8)
    + bytes([0x85, 0x01])
    + bytes(4)
    + bytes([0xA0, 0x01, 0x96, 0x01])
)


def test_unknown_top_level_fields_survive_rewrites_after_field_2():
    raw = (DATA / "check_crc32.tree").read_bytes()
    tree = ContainerTree.from_bytes(raw + EXTRA)
    assert tree == ContainerTree.from_bytes(raw) and tree.unknown_fields == EXTRA
    assert tree.to_bytes() == raw + EXTRA
    assert tree.replace().to_bytes() == raw + EXTRA
    # wherever they stood, protobuf-java (Ozone) writes them after the known fields, in order
    cid_end = 2  # 08 01
    moved = raw[:cid_end] + EXTRA[:4] + raw[cid_end:] + EXTRA[4:]
    assert ContainerTree.from_bytes(moved).to_bytes() == raw + EXTRA
    msg = ozone_proto.ContainerChecksumInfo.FromString(moved)
    assert msg.SerializeToString() == raw + EXTRA  # the protobuf runtime agrees
    # merging a scan into the stored tree keeps them (Ozone rewrites from the stored message)
    from merkle.trees.merge import merge

    assert merge(tree, ContainerTree.from_bytes(raw)).to_bytes() == raw + EXTRA
    # unknown fields inside the tree message are skipped (Ozone rebuilds that message)
    inner = ContainerTree.from_bytes(b"\x08\x01\x12\x04\x08\x00\x28\x07")
    assert inner.unknown_fields == b"" and inner.data_checksum == 0


def test_unsorted_foreign_order_is_normalised():
    msg = ozone_proto.ContainerChecksumInfo(containerID=1)
    t = msg.containerMerkleTree
    b2 = t.blockMerkleTree.add(blockID=2, dataChecksum=5)
    b2.chunkMerkleTree.add(offset=10, length=1, dataChecksum=1, checksumMatches=True)
    b2.chunkMerkleTree.add(offset=0, length=1, dataChecksum=2, checksumMatches=True)
    t.blockMerkleTree.add(blockID=1, dataChecksum=6)
    tree = ContainerTree.from_bytes(msg.SerializeToString())
    assert tree.block_id.tolist() == [1, 2]
    assert tree.chunk_offset.tolist() == [0, 10]
    assert tree.chunk_value.tolist() == [2, 1]


def test_repeated_embedded_message_merges_like_protobuf():
    raw = (DATA / "check_crc32.tree").read_bytes()
    msg = ozone_proto.ContainerChecksumInfo.FromString(raw + raw)
    tree = ContainerTree.from_bytes(raw + raw)  # blocks appear twice -> duplicates collapse
    assert tree.n_blocks == 2
    assert len(msg.containerMerkleTree.blockMerkleTree) == 4


# --- bad files ----------------------------------------------------------------------------

GOOD = (DATA / "tombstones.tree").read_bytes()


@pytest.mark.parametrize("cut", range(1, len(GOOD)))
def test_every_truncation_is_an_error_or_a_valid_prefix(cut):
    raw = GOOD[:cut]
    try:
        ozone_proto.ContainerChecksumInfo.FromString(raw)
        runtime_ok = True
    except Exception:
        runtime_ok = False
    if runtime_ok:
        ContainerTree.from_bytes(raw)  # a valid prefix (e.g. only the containerID)
    else:
        with pytest.raises(TreeFileError):
            ContainerTree.from_bytes(raw)


@pytest.mark.parametrize(
    "raw,what",
    [
        (b"", "empty"),
        (b"\x08", "truncated varint"),
        (b"\x12\x05\x08", "runs past"),
        (b"\x08" + b"\xff" * 11, "longer than 10 bytes"),
        (b"\x00\x01", "field number 0"),
        (b"\x0b\x0c", "group"),
        (b"\x0f", "invalid wire type"),
        (b"\x0a\x01x", "containerID is not a varint"),
        (b"\x12\x03\x12\x05\x00", "runs past"),
        (b"\x12\x03\x12\x01\x00", "field number 0"),
        (b"\x89PNG\r\n\x1a\n", "not a valid"),
        (b"\x28\x01", "foreign"),
    ],
)
def test_bad_bytes(raw, what):
    with pytest.raises(TreeFileError, match=what):
        ContainerTree.from_bytes(raw)


def test_read_errors_name_the_file(tmp_path):
    p = tmp_path / "17.tree"
    p.write_bytes(GOOD[:-3])
    with pytest.raises(TreeFileError) as info:
        read_tree(p)
    assert str(p) in str(info.value) and info.value.path == str(p)
    assert isinstance(info.value, ValueError)
    assert read_tree(p, corrupt_ok=True) is None
    p.write_bytes(b"")
    with pytest.raises(TreeFileError, match="empty"):
        read_tree(p)
    assert read_tree(p, corrupt_ok=True) is None
    with pytest.raises(FileNotFoundError):
        read_tree(tmp_path / "missing.tree")
    assert read_tree(tmp_path / "missing.tree", missing_ok=True) is None


def test_write_is_atomic_and_leaves_no_temp(tmp_path, monkeypatch):
    tree = read_tree(DATA / "check_crc32.tree")
    path = tree_path(tmp_path, tree.container_id)
    assert path == tmp_path / "metadata" / "1.tree"
    path.parent.mkdir()
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    write_tree(tree, path)
    assert len(synced) == 2  # the file, then the directory
    assert read_tree(path) == tree
    assert os.listdir(path.parent) == ["1.tree"]
    # a failing write keeps the old file and removes the temp file
    monkeypatch.setattr(treefile, "tree_to_bytes", lambda t: b"x" * 10)
    monkeypatch.setattr(os, "replace", lambda *a: (_ for _ in ()).throw(OSError("boom")))
    with pytest.raises(OSError, match="boom"):
        write_tree(tree, path)
    assert os.listdir(path.parent) == ["1.tree"]
    assert read_tree(path) == tree


def test_large_round_trip_matches_runtime():
    rng = np.random.default_rng(5)
    n = 20000
    tree = ContainerTree.from_columns(
        99,
        rng.integers(-50, 200, n),
        rng.integers(0, 2**35, n),
        rng.integers(0, 2**22, n),
        leaf=rng.integers(0, 2**32, n),
        checksum_matches=rng.random(n) > 0.01,
        deleted_blocks=[-50, 7, 199, 1000],
    )
    raw = tree.to_bytes()
    msg = ozone_proto.ContainerChecksumInfo.FromString(raw)
    assert msg.SerializeToString() == raw
    assert ContainerTree.from_bytes(raw) == tree


@settings(max_examples=1500, deadline=None)
@given(
    st.sampled_from(sorted(GOLDEN)),
    st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), min_size=1, max_size=4),
    st.integers(0, 200),
)
def test_mutated_files_never_crash_and_agree_with_runtime(name, edits, cut):
    """Fuzz: flip bytes and truncate golden files. We either raise TreeFileError or read what
    the protobuf runtime reads; we never accept what the runtime rejects."""
    raw = bytearray((DATA / name).read_bytes())
    for pos, val in edits:
        raw[pos % len(raw)] = val
    raw = bytes(raw[: max(1, len(raw) - cut % 8)])
    try:
        msg = ozone_proto.ContainerChecksumInfo.FromString(raw)
    except Exception:
        msg = None
    try:
        tree = ContainerTree.from_bytes(raw)
    except TreeFileError:
        return
    assert msg is not None, "accepted bytes the protobuf runtime rejects"
    assert tree.container_id == msg.containerID
    if msg.containerMerkleTree.HasField("dataChecksum"):
        assert tree.data_checksum == msg.containerMerkleTree.dataChecksum
    blocks = msg.containerMerkleTree.blockMerkleTree
    if tree.n_blocks == len(blocks) and all(
        blocks[i].blockID < blocks[i + 1].blockID for i in range(len(blocks) - 1)
    ):
        for blk, bm in zip(tree.blocks(), blocks):
            assert (blk.block_id, blk.value, blk.deleted) == (
                bm.blockID,
                bm.dataChecksum,
                bm.deleted,
            )
