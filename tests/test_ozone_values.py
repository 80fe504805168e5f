"""OZONE.md's check values, for both CRC32 and CRC32C window checksums, and the three
formulas against a from-scratch reference (struct + the bytewise CRC reference)."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import merkle
from merkle import ozone
from merkle.trees.model import ContainerTree

from reference import crc_prefixes


def ref_crc32c(data: bytes) -> int:
    return crc_prefixes("crc32c", data)[-1]


def window_data(n: int, seed: int) -> bytes:
    return bytes((i * 31 + seed) % 251 for i in range(n))


CHUNKS = [
    (1, 0, window_data(40000, 1)),
    (1, 40000, window_data(40000, 2)),
    (2, 0, window_data(12345, 3)),
]

EXPECTED = {
    "crc32": {
        "leaves": [0x1CA55F45, 0x7D6DD059, 0x42B3AA6A],
        "blocks": [0x90044150, 0x7FF25CB4],
        "container": 0x1833A6A1,
    },
    "crc32c": {"container": 0x6B62B968},
}


def test_basic_check_values():
    assert merkle.crc32c(b"123456789") == 0xE3069283
    assert ozone.container_checksum([]) == 0
    assert ozone.block_checksum(5, []) == 0xB9D9A696
    assert ozone.leaf_checksum([]) == 0  # checksum type NONE: no windows


@pytest.mark.parametrize("algorithm", ["crc32", "crc32c"])
def test_check_values_one_by_one(algorithm, each_backend):
    windows = [merkle.checksum_windows(d, 16384, algorithm=algorithm) for _, _, d in CHUNKS]
    assert [len(w) for w in windows] == [3, 3, 1]
    leaves = [ozone.leaf_checksum(w) for w in windows]
    blocks = [ozone.block_checksum(1, leaves[:2]), ozone.block_checksum(2, leaves[2:])]
    container = ozone.container_checksum(blocks)
    exp = EXPECTED[algorithm]
    if "leaves" in exp:
        assert leaves == exp["leaves"]
        assert blocks == exp["blocks"]
    assert container == exp["container"]


@pytest.mark.parametrize("algorithm", ["crc32", "crc32c"])
def test_check_values_through_tree(algorithm):
    tree = ContainerTree.from_chunk_data(1, CHUNKS, bytes_per_checksum=16384, algorithm=algorithm)
    assert tree.data_checksum == EXPECTED[algorithm]["container"]
    if algorithm == "crc32":
        assert tree.chunk_value.tolist() == EXPECTED["crc32"]["leaves"]
        assert tree.block_value.tolist() == EXPECTED["crc32"]["blocks"]
    assert ozone.format_checksum(tree.data_checksum) == format(
        EXPECTED[algorithm]["container"], "x"
    )


def test_leaf_input_forms_agree():
    w = merkle.checksum_windows(CHUNKS[0][2], 16384, algorithm="crc32")
    raw = b"".join(struct.pack(">I", int(x)) for x in w)
    expected = 0x1CA55F45
    assert ozone.leaf_checksum(w) == expected
    assert ozone.leaf_checksum([int(x) for x in w]) == expected
    assert ozone.leaf_checksum(w.astype(np.int64)) == expected
    assert ozone.leaf_checksum(raw) == expected
    assert ozone.leaf_checksum(bytearray(raw)) == expected
    assert ozone.leaf_checksum([raw[i : i + 4] for i in range(0, len(raw), 4)]) == expected


def test_leaf_of_long_windows_sha256_style():
    windows = [bytes(range(i, i + 32)) for i in range(5)]
    assert ozone.leaf_checksum(windows) == ref_crc32c(b"".join(windows))


def test_bad_inputs():
    with pytest.raises(TypeError):
        ozone.leaf_checksum("abc")
    with pytest.raises(ValueError):
        ozone.leaf_checksum([-1])
    with pytest.raises(ValueError):
        ozone.leaf_checksum([2**32])
    with pytest.raises(TypeError):
        ozone.block_checksum(1, [1.5])


def test_format_checksum():
    assert ozone.format_checksum(0) == "0"
    assert ozone.format_checksum(0x0ABC) == "abc"
    assert ozone.format_checksum(-1) == "ffffffffffffffff"
    assert ozone.parse_checksum("ffffffffffffffff") == -1
    assert ozone.parse_checksum("1833a6a1") == 0x1833A6A1


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1), max_size=3000))
def test_leaf_matches_reference(values):
    raw = b"".join(struct.pack(">I", v) for v in values)
    assert ozone.leaf_checksum(np.array(values, dtype=np.uint32)) == ref_crc32c(raw)


@settings(max_examples=100, deadline=None)
@given(st.integers(-(2**63), 2**63 - 1), st.lists(st.integers(0, 2**32 - 1), max_size=2000))
def test_block_and_container_match_reference(block_id, leaves):
    raw = struct.pack(">q", block_id) + b"".join(struct.pack(">Q", v) for v in leaves)
    assert ozone.block_checksum(block_id, leaves) == ref_crc32c(raw)
    assert ozone.container_checksum(leaves) == ref_crc32c(raw[8:])


def test_bulk_leaves_many_chunks_match_one_by_one():
    rng = np.random.default_rng(1)
    counts = rng.integers(0, 3000, size=50)
    windows = rng.integers(0, 2**32, size=int(counts.sum()), dtype=np.uint32)
    n = len(counts)
    tree = ContainerTree.from_columns(
        9,
        np.arange(n) // 7,
        np.arange(n) % 7 * 100,
        None,
        window_checksums=windows,
        window_counts=counts,
    )
    starts = np.concatenate(([0], np.cumsum(counts)))
    expect = [ozone.leaf_checksum(windows[starts[i] : starts[i + 1]]) for i in range(n)]
    assert tree.chunk_value.tolist() == expect
    for b in tree.blocks():
        assert b.value == ozone.block_checksum(b.block_id, [c.value for c in b.chunks])
    assert tree.data_checksum == ozone.container_checksum(tree.block_value)
