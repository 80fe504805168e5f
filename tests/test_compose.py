"""merkle.full_object_crc and merkle.copies.key_crc against the reference CRC of the bytes,
and their refusals of hostile metadata (one-line ValueErrors, nothing sized from a claim)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import merkle
from merkle.copies import BlockChecksums, ChunkChecksums, key_crc, ozone_composite_crc

from reference import crc as reference_crc

ALGORITHMS = ("crc32c", "crc32", "crc64nvme")
ONE_SHOT = {"crc32c": merkle.crc32c, "crc32": merkle.crc32, "crc64nvme": merkle.crc64nvme}


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(0, 700), max_size=40), seed=st.integers(0, 2**32))
def test_full_object_crc_equals_reference(algorithm: str, sizes: list[int], seed: int) -> None:
    rng = random.Random(seed)
    parts = [rng.randbytes(n) for n in sizes]
    got = merkle.full_object_crc([reference_crc(algorithm, p) for p in parts], sizes, algorithm)
    assert got == reference_crc(algorithm, b"".join(parts))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize(
    "count,size,last", [(1, 8, 3), (255, 64, 64), (256, 64, 1), (1000, 16, 5), (4097, 3, 0)]
)
def test_full_object_crc_multipart_layout(algorithm: str, count: int, size: int, last: int) -> None:
    """S3's layout: equal parts and a shorter last one (numpy columns, the fast path)."""
    data = random.Random(count).randbytes(count * size + last)
    sizes = [size] * count + ([last] if last else [])
    offsets = np.cumsum([0] + sizes)
    crcs = [ONE_SHOT[algorithm](data[a:b]) for a, b in zip(offsets[:-1], offsets[1:])]
    dtype = np.uint64 if algorithm == "crc64nvme" else np.uint32
    got = merkle.full_object_crc(np.array(crcs, dtype=dtype), np.array(sizes), algorithm.upper())
    assert got == ONE_SHOT[algorithm](data)


def test_full_object_crc_empty_and_zero_sizes() -> None:
    assert merkle.full_object_crc([], [], "crc32c") == 0
    assert merkle.full_object_crc([0, 0], [0, 0], "crc64nvme") == 0
    c = merkle.crc32(b"abc")
    assert merkle.full_object_crc([0, c, 0], [0, 3, 0], "crc32") == c


@pytest.mark.parametrize(
    "crcs,sizes,algorithm,message",
    [
        ([1, 2], [1], "crc32c", "2 part CRCs but 1 part sizes"),
        ([1], [-1], "crc32c", "sizes must be in 0..2\\*\\*63-1"),
        ([1], [2**63], "crc32c", "sizes must be in 0..2\\*\\*63-1"),
        ([1, 2], [2**62, 2**62], "crc32c", "more than 2\\*\\*63-1 bytes"),
        ([2**32], [1], "crc32", "values must be in 0..2\\*\\*32-1"),
        ([2**64], [1], "crc64nvme", "values must be in 0..2\\*\\*64-1"),
        ([-1], [1], "crc32c", "values must be in"),
        ([1.5], [1], "crc32c", "must be integers"),
        (["a"], [1], "crc32c", "must be integers"),
        ([1], ["1"], "crc32c", "sizes must be integers"),
        ([[1]], [[1]], "crc32c", "one-dimensional"),
        ([1], [1], "md5", "unknown algorithm"),
        ([5, 0, 7], [3, 0, 0], "crc32c", "part 2 has 0 bytes but CRC 0x7"),
    ],
)
def test_full_object_crc_refuses(crcs: list, sizes: list, algorithm: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        merkle.full_object_crc(crcs, sizes, algorithm)
    assert "\n" not in str(info.value)


# ---- keys ------------------------------------------------------------------------------------


def _windows(algorithm: str, data: bytes, bpc: int) -> list[int]:
    return [ONE_SHOT[algorithm](data[i : i + bpc]) for i in range(0, len(data), bpc)]


@st.composite
def _keys(draw: st.DrawFn) -> tuple[str, bytes, list[BlockChecksums], bool]:
    """A random key: blocks of chunks, each block's chunks with one bpc (blocks may differ)."""
    algorithm = draw(st.sampled_from(ALGORITHMS))
    blocks, pieces, ozone_consistent = [], [], True
    for _ in range(draw(st.integers(1, 4))):
        bpc = draw(st.sampled_from([1, 7, 16, 100, 512]))
        chunks, offset = [], 0
        lengths = draw(st.lists(st.integers(1, 1500), min_size=1, max_size=4))
        for n in lengths:
            data = random.Random(draw(st.integers(0, 2**32))).randbytes(n)
            pieces.append(data)
            chunks.append(
                ChunkChecksums(n, algorithm.upper(), bpc, _windows(algorithm, data, bpc), offset)
            )
            offset += n
            # Ozone's precondition: every chunk's length <= its window count * the first's length
            ozone_consistent &= n <= -(-n // bpc) * lengths[0]
        blocks.append(BlockChecksums(offset, chunks))
    return algorithm, b"".join(pieces), blocks, ozone_consistent


@settings(max_examples=150, deadline=None)
@given(key=_keys())
def test_key_crc_is_crc_of_bytes(key: tuple[str, bytes, list[BlockChecksums], bool]) -> None:
    algorithm, data, blocks, ozone_consistent = key
    got = key_crc(blocks)
    assert got.algorithm == algorithm and got.length == got.om_length == len(data)
    assert got.crc == reference_crc(algorithm, data)
    if algorithm == "crc64nvme":
        assert got.ozone_differs and got.ozone_value is None
        return
    # key_crc skips the step-by-step emulation on consistent input: check it against it
    emulated = ozone_composite_crc(blocks)
    assert (got.ozone_algorithm, got.ozone_value, got.ozone_error) == emulated
    if ozone_consistent:
        assert not got.ozone_differs and got.reasons == ()
        assert got.ozone_value == got.crc.to_bytes(4, "big")
    else:
        assert got.ozone_differs and got.ozone_error is not None


def _block(*chunks: ChunkChecksums, length: int | None = None) -> BlockChecksums:
    return BlockChecksums(sum(int(c.length) for c in chunks) if length is None else length, chunks)


GOOD = ChunkChecksums(20, "CRC32C", 16, [merkle.crc32c(bytes(16)), merkle.crc32c(bytes(4))])


@pytest.mark.parametrize(
    "blocks,message",
    [
        ([_block(ChunkChecksums(-1, "CRC32C", 16, []))], "length -1 is out of range"),
        ([_block(GOOD, length=-5)], "block 0: length -5 is out of range"),
        ([_block(ChunkChecksums(20, "CRC32C", 16, [1]))], "1 window checksums for 20 bytes"),
        ([_block(ChunkChecksums(20, "CRC32C", 16, [1, 2, 3]))], "3 window checksums for 20 bytes"),
        (
            [_block(ChunkChecksums(2**62, "CRC32C", 16384, [1, 2]))],
            "2 window checksums for 4611686018427387904",
        ),
        ([_block(ChunkChecksums(2**63, "CRC32C", 2**63, [1]))], "out of range"),
        ([_block(ChunkChecksums(5, "CRC32C", 0, [1]))], "bytes_per_checksum is 0 for 5 bytes"),
        ([_block(ChunkChecksums(5, "CRC32C", 16, [2**32]))], "values must be in 0..2\\*\\*32-1"),
        ([_block(ChunkChecksums(5, "CRC32C", 16, ["x"]))], "must be integers"),
        ([_block(ChunkChecksums(5, "CRC32C", 16, [1], offset=3))], "offset 3, expected 0"),
        ([_block(GOOD, ChunkChecksums(5, "CRC32C", 16, [1], offset=0))], "offset 0, expected 20"),
        ([_block(ChunkChecksums(5, "ADLER", 16, [1]))], "unknown checksum type"),
        ([_block(ChunkChecksums(5, "NONE", 16, [1]))], "NONE with 1 checksums"),
        ([_block(ChunkChecksums(5, "SHA256", 16, [2**256]))], "SHA256 checksum must be"),
        ([_block(ChunkChecksums(5.0, "CRC32C", 16, [1]))], "must be an integer"),  # type: ignore[arg-type]
        ([_block(GOOD, length=2**62), _block(GOOD, length=2**62)], "more than 2\\*\\*63-1"),
        ([GOOD], "not a BlockChecksums"),
        ([BlockChecksums(20, [GOOD], ec_stripes=[[GOOD]])], "both chunks and EC stripes"),
        ("abc", "sequence of BlockChecksums"),
    ],
)
def test_key_crc_refuses(blocks: list, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        key_crc(blocks)
    assert "\n" not in str(info.value)


def test_from_ozone_checks_entry_width() -> None:
    with pytest.raises(ValueError, match="checksum 1 of the chunk has 3 bytes, not 4"):
        ChunkChecksums.from_ozone(20, "CRC32C", 16, [b"\0" * 4, b"\0" * 3])
    c = ChunkChecksums.from_ozone(20, "CRC32C", 16, [v.to_bytes(4, "big") for v in GOOD.checksums])
    assert key_crc([_block(c)]).crc == merkle.crc32c(bytes(20))


def test_non_crc_types_are_not_composed() -> None:
    sha = ChunkChecksums(20, "SHA256", 16, [1 << 255, 5])
    got = key_crc([_block(sha)])
    assert got.crc is None and got.algorithm is None and got.ozone_differs
    assert "checksum type SHA256 is not a CRC" in got.reasons
    assert got.ozone_error == "IllegalArgumentException: unsupported checksum type: SHA256"


def test_ozone_ec_windows_beyond_group_refused() -> None:
    """More EC windows than the group's length: Ozone's loop would never end; said, not hung."""
    cell = ChunkChecksums(20, "CRC32C", 16, GOOD.checksums)
    got = key_crc([BlockChecksums(10, ec_stripes=[[cell], [cell]])])
    assert got.crc == merkle.crc32c(bytes(20) + bytes(20))
    assert got.ozone_error is not None and "loop forever" in got.ozone_error
    assert any("OM length 10" in r for r in got.reasons)


def test_ozone_block_without_chunks() -> None:
    got = key_crc([_block(GOOD), BlockChecksums(0, [])])
    assert got.crc == merkle.crc32c(bytes(20))
    assert got.ozone_error is not None and got.ozone_error.startswith("PathIOException")


def test_ozone_request_length_validated() -> None:
    with pytest.raises(ValueError, match="request_length -1"):
        ozone_composite_crc([_block(GOOD)], -1)


@st.composite
def _ec_keys(draw: st.DrawFn) -> tuple[str, bytes, list[BlockChecksums]]:
    """A random EC key: groups of stripes of `data` cells of `cell` bytes, the last stripe
    partial (cells clipped to the group's length, empty cells absent, as on the datanodes)."""
    algorithm = draw(st.sampled_from(("crc32c", "crc32")))
    data_cells, cell = draw(st.integers(1, 6)), draw(st.sampled_from([16, 48, 100]))
    bpc = draw(st.sampled_from([1, 16, 7, 100]))
    groups, pieces = [], []
    for _ in range(draw(st.integers(1, 2))):
        length = draw(st.integers(1, 3 * data_cells * cell))
        data = random.Random(draw(st.integers(0, 2**32))).randbytes(length)
        pieces.append(data)
        stripes = []
        for s in range(0, length, data_cells * cell):
            cells = []
            for j in range(data_cells):
                part = data[s + j * cell : min(s + (j + 1) * cell, length)]
                if part:
                    cells.append(
                        ChunkChecksums(
                            len(part), algorithm.upper(), bpc, _windows(algorithm, part, bpc)
                        )
                    )
            stripes.append(cells)
        groups.append(BlockChecksums(length, ec_stripes=stripes))
    return algorithm, b"".join(pieces), groups


@settings(max_examples=100, deadline=None)
@given(key=_ec_keys())
def test_ec_key_crc_is_crc_of_bytes(key: tuple[str, bytes, list[BlockChecksums]]) -> None:
    algorithm, data, groups = key
    got = key_crc(groups)
    assert got.crc == reference_crc(algorithm, data) and got.length == len(data)
    assert not got.ozone_differs and got.reasons == ()
    assert ozone_composite_crc(groups) == (
        f"COMPOSITE-{algorithm.upper()}",
        got.crc.to_bytes(4, "big"),
        None,
    )


def test_checksum_type_by_protobuf_number_and_sha_entries() -> None:
    by_number = ChunkChecksums(20, 3, 16, GOOD.checksums)  # ChecksumType.CRC32C = 3
    assert key_crc([_block(by_number)]).crc == merkle.crc32c(bytes(20))
    sha = ChunkChecksums.from_ozone(20, "SHA256", 16, [b"\1" * 32, b"\2" * 32])
    assert key_crc([_block(sha)]).crc is None
    with pytest.raises(ValueError, match="unknown checksum type 'type number 9'"):
        ChunkChecksums.from_ozone(20, 9, 16, [])
    with pytest.raises(ValueError, match="unknown checksum type 'type number 9'"):
        key_crc([_block(ChunkChecksums(20, 9, 16, []))])


def test_mixed_crc64nvme_and_ozone_types() -> None:
    """A CRC64NVME chunk beside Ozone's CRC32C ones: no CRC of the bytes; Ozone's walk reads
    the first 4 bytes of each 8-byte entry, as its getInt does."""
    wide = ChunkChecksums(20, "CRC64NVME", 16, [(7 << 32) | 5, (9 << 32) | 1], 20)
    got = key_crc([BlockChecksums(40, [GOOD, wide])])
    assert got.crc is None and got.ozone_differs
    narrow = ChunkChecksums(20, "CRC32C", 16, [7, 9], 20)
    assert got.ozone_value == key_crc([BlockChecksums(40, [GOOD, narrow])]).ozone_value


def _java_walk(blocks: list[BlockChecksums]) -> tuple[str | None, bytes | None, str | None]:
    """ReplicatedBlockChecksumComputer + makeCompositeCrcResult, one window at a time, written
    straight from Ozone's Java (replicated keys only): the check of the vectorised walk."""
    combine = {"CRC32": merkle.crc32_combine, "CRC32C": merkle.crc32c_combine}

    def compose(pairs: list[tuple[int, int]], typ: str) -> int:
        acc, pos = 0, 0
        for crc, n in pairs:
            if n < 0:
                raise RuntimeError(f"lengthBytes must be positive, got {n}")
            acc = crc if acc == 0 else combine[typ](acc, crc, n)
            pos += n
        if pos <= 0:
            raise RuntimeError("empty digest")
        return acc

    if sum(b.length for b in blocks) == 0:  # length 0: no blocks fetched, the MD5 magic
        md5_of_nothing = bytes.fromhex("70bc8f4b72a86921468bf8e8441dce51")
        return "MD5-of-0MD5-of-0CRC32", bytes(12) + md5_of_nothing, None
    try:
        block_crcs, typ = [], ""
        for block in blocks:
            first = block.chunks[0]
            typ, chunk_size, bpc = str(first.checksum_type), first.length, first.bytes_per_checksum
            pairs = []
            for chunk in block.chunks:
                remaining = chunk.length
                if remaining > len(chunk.checksums) * chunk_size:
                    raise RuntimeError("Preconditions")
                windows = []
                for w in chunk.checksums:
                    windows.append((int(w), min(bpc, remaining)))
                    remaining -= bpc
                pairs.append((compose(windows, typ), chunk.length))
            block_crcs.append((compose(pairs, typ), block.length))
        return f"COMPOSITE-{typ}", compose(block_crcs, typ).to_bytes(4, "big"), None
    except RuntimeError as exc:
        return None, None, str(exc)


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    typ=st.sampled_from(["CRC32", "CRC32C"]),
    layout=st.lists(
        st.lists(
            st.tuples(st.integers(0, 300), st.sampled_from([1, 5, 16, 64])), min_size=1, max_size=4
        ),
        min_size=1,
        max_size=3,
    ),
)
def test_ozone_walk_matches_java_semantics(seed: int, typ: str, layout: list) -> None:
    """Inconsistent replicated layouts (bpc mixed inside a block, short first chunks, empty
    chunks): the vectorised walk gives what the Java does, value or exception."""
    rng = random.Random(seed)
    blocks = []
    for chunks in layout:
        made = []
        for length, bpc in chunks:
            data = rng.randbytes(length)
            made.append(ChunkChecksums(length, typ, bpc, _windows(typ.lower(), data, bpc)))
        blocks.append(_block(*made))
    want = _java_walk(blocks)
    got = ozone_composite_crc(blocks)
    assert got[:2] == want[:2]
    assert (got[2] is None) == (want[2] is None)
    if want[2] is not None and "lengthBytes" in want[2]:
        assert got[2] is not None and want[2] in got[2]
