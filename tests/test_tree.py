"""ContainerTree: builders (columns, raw data, incremental), ordering, tombstones, views."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import merkle
from merkle import ozone
from merkle.trees.model import ContainerTree, TreeBuilder


def test_from_columns_sorts_stably_and_last_row_wins():
    # rows out of order; (1, 0) given twice: the later row replaces the earlier one
    tree = ContainerTree.from_columns(
        3,
        [2, 1, 1, 1],
        [0, 10, 0, 0],
        [5, 5, 5, 6],
        leaf=[20, 11, 10, 12],
        checksum_matches=[True, True, True, False],
    )
    assert tree.block_id.tolist() == [1, 2]
    assert tree.block_chunk_start.tolist() == [0, 2, 3]
    assert tree.chunk_offset.tolist() == [0, 10, 0]
    assert tree.chunk_value.tolist() == [12, 11, 20]
    assert tree.chunk_length.tolist() == [6, 5, 5]
    assert tree.chunk_matches.tolist() == [False, True, True]
    assert tree.block_value.tolist() == [
        ozone.block_checksum(1, [12, 11]),
        ozone.block_checksum(2, [20]),
    ]
    assert tree.data_checksum == ozone.container_checksum(tree.block_value)


def test_sorted_input_is_not_copied_through_a_permutation():
    t1 = ContainerTree.from_columns(1, [1, 1, 2], [0, 5, 0], [5, 5, 5], leaf=[1, 2, 3])
    t2 = ContainerTree.from_columns(1, [2, 1, 1], [0, 5, 0], [5, 5, 5], leaf=[3, 2, 1])
    assert t1 == t2


def test_negative_block_ids_sort_signed():
    tree = ContainerTree.from_columns(1, [5, -3, 0], [0, 0, 0], [1, 1, 1], leaf=[1, 2, 3])
    assert tree.block_id.tolist() == [-3, 0, 5]


def test_window_bytes_input():
    raw = bytes(range(64)) + bytes(range(32))
    tree = ContainerTree.from_columns(
        1, [1, 1], [0, 100], [100, 50], window_bytes=raw, window_byte_counts=[64, 32]
    )
    assert tree.chunk_value.tolist() == [merkle.crc32c(raw[:64]), merkle.crc32c(raw[64:])]


def test_from_chunk_data_default_is_ozone_default_crc32():
    data = bytes(range(256)) * 200
    t = ContainerTree.from_chunk_data(1, [(1, 0, data)])
    w = merkle.checksum_windows(data, 16384, algorithm="crc32")
    assert t.chunk_value[0] == ozone.leaf_checksum(w)
    assert t.chunk_length[0] == len(data)


def test_builder_tombstones_and_empty_blocks():
    b = TreeBuilder(7)
    b.add_chunk(1, 0, 10, windows=[1, 2, 3])
    b.add_chunk(1, 10, 10, leaf=99, checksum_matches=False)
    b.add_chunk(4, 0, 10, data=b"hello")
    b.add_block(2)
    b.mark_deleted(4)  # value from its chunks, chunks dropped
    b.mark_deleted(8, value=0x42)  # never seen: explicit value
    tree = b.build()
    blocks = {blk.block_id: blk for blk in tree.blocks()}
    assert sorted(blocks) == [1, 2, 4, 8]
    leaf4 = ozone.leaf_checksum(merkle.checksum_windows(b"hello", 16384, algorithm="crc32"))
    assert blocks[4].deleted and blocks[4].chunks == ()
    assert blocks[4].value == ozone.block_checksum(4, [leaf4])
    assert blocks[8].deleted and blocks[8].value == 0x42
    assert blocks[2].value == ozone.block_checksum(2, []) and not blocks[2].deleted
    assert [c.checksum_matches for c in blocks[1].chunks] == [True, False]
    # tombstones are part of the container value
    assert tree.data_checksum == ozone.container_checksum([blocks[i].value for i in (1, 2, 4, 8)])
    assert tree.inconsistencies() == []


def test_tree_not_generated():
    tree = TreeBuilder(1).build(data_checksum=False)
    assert tree.data_checksum is None
    assert ContainerTree.empty(3).data_checksum == 0


def test_arrays_are_read_only_and_validated():
    tree = ContainerTree.from_columns(1, [1], [0], [1], leaf=[5])
    with pytest.raises(ValueError):
        tree.chunk_value[0] = 1
    with pytest.raises(ValueError, match="strictly increasing"):
        ContainerTree(1, block_id=[2, 1], block_value=[0, 0])
    with pytest.raises(ValueError, match="offsets"):
        ContainerTree(
            1,
            block_id=[1],
            block_value=[0],
            block_chunk_start=[0, 2],
            chunk_offset=[5, 5],
            chunk_length=[1, 1],
            chunk_value=[0, 0],
        )
    with pytest.raises(ValueError):
        ContainerTree.from_columns(1, [1], [0], [1])  # no values given
    with pytest.raises(ValueError):
        ContainerTree.from_columns(
            1, [1, 2], [0, 0], [1, 1], window_checksums=[1], window_counts=[1, 1]
        )


def test_views_and_dict():
    tree = ContainerTree.from_columns(
        1, [1, 1], [0, 4], [4, 4], leaf=[0xA, 0xB], checksum_matches=[True, False]
    )
    assert 1 in tree and 2 not in tree
    blk = tree.block(1)
    assert [c.offset for c in blk.chunks] == [0, 4]
    assert "UNHEALTHY" in repr(blk.chunks[1])
    d = tree.to_dict()
    assert d["block_list"][0]["chunks"][0]["data_checksum"] == "a"
    assert d["unhealthy_chunks"] == 1 and d["bytes"] == 8
    with pytest.raises(KeyError):
        tree.block(99)
    assert tree.chunk_block_id.tolist() == [1, 1]


def test_inconsistencies_reported():
    tree = ContainerTree.from_columns(1, [1], [0], [1], leaf=[5])
    bad = tree.replace(block_value=[123], data_checksum=7)
    problems = bad.inconsistencies()
    assert any("block 1" in p for p in problems)
    assert any("container value" in p for p in problems)


rows = st.lists(
    st.tuples(st.integers(-5, 5), st.integers(0, 6), st.integers(0, 2**32 - 1), st.booleans()),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(rows)
def test_bulk_build_matches_a_dict_model(rs):
    model = {}
    for b, o, v, m in rs:
        model.setdefault(b, {})[o] = (v, m)  # later replaces earlier, as Ozone's maps
    tree = ContainerTree.from_columns(
        1,
        [r[0] for r in rs],
        [r[1] for r in rs],
        [1] * len(rs),
        leaf=np.array([r[2] for r in rs], dtype=np.int64),
        checksum_matches=[r[3] for r in rs],
    )
    got = {
        blk.block_id: {c.offset: (c.value, c.checksum_matches) for c in blk.chunks}
        for blk in tree.blocks()
    }
    assert got == model
    values = [
        ozone.block_checksum(b, [model[b][o][0] for o in sorted(model[b])]) for b in sorted(model)
    ]
    assert tree.block_value.tolist() == values
    assert tree.data_checksum == ozone.container_checksum(values)
