"""checksum_windows and checksum_each against per-value one-shots."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

import merkle

ONE_SHOT = {"crc32c": merkle.crc32c, "crc32": merkle.crc32, "crc64nvme": merkle.crc64nvme}
DTYPE = {"crc32c": np.uint32, "crc32": np.uint32, "crc64nvme": np.uint64}


def per_window(fn, data: bytes, bpc: int) -> list[int]:
    return [fn(data[i : i + bpc]) for i in range(0, len(data), bpc)]


@pytest.mark.parametrize("algorithm", sorted(ONE_SHOT))
def test_windows_match_one_shots(each_backend: str, algorithm: str) -> None:
    fn = ONE_SHOT[algorithm]
    rng = random.Random(algorithm)
    for length in (0, 1, 511, 512, 513, 4096, 16384 * 3 + 5, 100_000):
        data = rng.randbytes(length)
        for bpc in (1, 3, 64, 512, 4096, 16384, length or 1, length + 1, 2**40):
            got = merkle.checksum_windows(data, bpc, algorithm=algorithm)
            assert got.dtype == DTYPE[algorithm]
            assert got.tolist() == per_window(fn, data, bpc), (length, bpc)


def test_windows_shapes_and_out() -> None:
    assert merkle.checksum_windows(b"", 16).shape == (0,)
    assert merkle.checksum_windows(b"x" * 33, 16).shape == (3,)  # last window short
    out = np.zeros(3, dtype=np.uint32)
    result = merkle.checksum_windows(b"x" * 33, 16, out=out)
    assert result is out and out.tolist() == per_window(merkle.crc32c, b"x" * 33, 16)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"bytes_per_checksum": 0}, ValueError, "> 0"),
        ({"bytes_per_checksum": -5}, ValueError, "> 0"),
        ({"bytes_per_checksum": 1.5}, TypeError, "int"),
        ({"bytes_per_checksum": True}, TypeError, "int"),
        ({"bytes_per_checksum": 4, "algorithm": "md5"}, ValueError, "unknown algorithm"),
        ({"bytes_per_checksum": 4, "algorithm": 3}, TypeError, "algorithm"),
        ({"bytes_per_checksum": 4, "out": np.zeros(2, np.uint32)}, ValueError, "3 are needed"),
        ({"bytes_per_checksum": 4, "out": np.zeros(3, np.int64)}, ValueError, "uint32"),
        ({"bytes_per_checksum": 4, "out": np.zeros(6, np.uint32)[::2]}, ValueError, "C-contiguous"),
        ({"bytes_per_checksum": 4, "out": [0, 0, 0]}, TypeError, "numpy"),
    ],
)
def test_windows_errors(kwargs: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        merkle.checksum_windows(b"0123456789", **kwargs)


def test_windows_algorithm_names_are_case_insensitive() -> None:
    data = b"abc" * 100
    assert merkle.checksum_windows(data, 7, algorithm="CRC32").tolist() == per_window(
        merkle.crc32, data, 7
    )
    assert merkle.checksum_windows(data, 7, algorithm="Crc32C").tolist() == per_window(
        merkle.crc32c, data, 7
    )
    assert merkle.checksum_windows(data, 7, algorithm="CRC64NVME").tolist() == per_window(
        merkle.crc64nvme, data, 7
    )


VALUES = [b"", b"a", b"123456789", bytes(range(256)) * 70, b"\x00" * 17000, b"z" * 5]


@pytest.mark.parametrize("algorithm", sorted(ONE_SHOT))
@pytest.mark.parametrize("arrow_type", [pa.binary(), pa.large_binary()])
def test_each_arrow_matches_one_shots(
    each_backend: str, algorithm: str, arrow_type: pa.DataType
) -> None:
    fn = ONE_SHOT[algorithm]
    arr = pa.array(VALUES, type=arrow_type)
    got = merkle.checksum_each(arr, algorithm=algorithm)
    assert got.dtype == DTYPE[algorithm]
    assert got.tolist() == [fn(v) for v in VALUES]
    # A slice starts at a non-zero offset into the same buffers.
    assert merkle.checksum_each(arr[2:5], algorithm=algorithm).tolist() == [
        fn(v) for v in VALUES[2:5]
    ]


def test_each_arrow_strings_fixed_size_and_chunked() -> None:
    words = ["", "héllo", "wörld" * 100]
    assert merkle.checksum_each(pa.array(words)).tolist() == [
        merkle.crc32c(w.encode()) for w in words
    ]
    assert merkle.checksum_each(pa.array(words, pa.large_string())).tolist() == [
        merkle.crc32c(w.encode()) for w in words
    ]
    fixed = [bytes([i]) * 8 for i in range(10)]
    arr = pa.array(fixed, pa.binary(8))
    assert merkle.checksum_each(arr).tolist() == [merkle.crc32c(v) for v in fixed]
    assert merkle.checksum_each(arr[3:7]).tolist() == [merkle.crc32c(v) for v in fixed[3:7]]
    chunked = pa.chunked_array(
        [pa.array(VALUES[:2], pa.binary()), pa.array(VALUES[2:], pa.binary())]
    )
    assert merkle.checksum_each(chunked).tolist() == [merkle.crc32c(v) for v in VALUES]


def test_each_arrow_nulls_are_zero() -> None:
    arr = pa.array([b"abc", None, b"", None, b"xyz"], pa.binary())
    assert merkle.checksum_each(arr).tolist() == [
        merkle.crc32c(b"abc"),
        0,
        0,
        0,
        merkle.crc32c(b"xyz"),
    ]
    fixed = pa.array([b"ab", None], pa.binary(2))
    assert merkle.checksum_each(fixed).tolist() == [merkle.crc32c(b"ab"), 0]
    assert merkle.checksum_each(pa.array([], pa.binary())).shape == (0,)
    assert merkle.checksum_each(pa.array([None, None], pa.binary())).tolist() == [0, 0]


def test_each_arrow_null_slot_with_bytes_is_still_zero() -> None:
    # Arrow allows a null slot to span bytes; build one by hand.
    offsets = pa.py_buffer(np.array([0, 3, 6], dtype=np.int32).tobytes())
    data = pa.py_buffer(b"abcdef")
    validity = pa.py_buffer(bytes([0b01]))
    arr = pa.Array.from_buffers(pa.binary(), 2, [validity, offsets, data], null_count=1)
    assert merkle.checksum_each(arr).tolist() == [merkle.crc32c(b"abc"), 0]


def test_each_arrow_rejects_malformed_offsets() -> None:
    offsets = pa.py_buffer(np.array([0, 5, 2], dtype=np.int32).tobytes())
    arr = pa.Array.from_buffers(pa.binary(), 2, [None, offsets, pa.py_buffer(b"abcdef")])
    with pytest.raises(ValueError, match="malformed"):
        merkle.checksum_each(arr)
    # (pyarrow itself refuses offsets past the data buffer, so only order is ours to check)
    offsets = pa.py_buffer(np.array([0, 6, 1], dtype=np.int64).tobytes())
    arr = pa.Array.from_buffers(pa.large_binary(), 2, [None, offsets, pa.py_buffer(b"abcdef")])
    with pytest.raises(ValueError, match="malformed"):
        merkle.checksum_each(arr)


def test_each_arrow_rejects_other_types() -> None:
    with pytest.raises(TypeError, match="binary or string"):
        merkle.checksum_each(pa.array([1, 2, 3]))


@pytest.mark.parametrize("algorithm", sorted(ONE_SHOT))
def test_each_sequence_of_buffers(each_backend: str, algorithm: str) -> None:
    fn = ONE_SHOT[algorithm]
    items = [
        b"abc",
        bytearray(b"defg"),
        memoryview(b"hij"),
        np.arange(10, dtype=np.uint8),
        None,
        b"x" * 40000,
    ]
    expected = [fn(bytes(i)) if i is not None else 0 for i in items]
    assert merkle.checksum_each(items, algorithm=algorithm).tolist() == expected
    assert merkle.checksum_each(tuple(items), algorithm=algorithm).tolist() == expected
    assert merkle.checksum_each(iter(items), algorithm=algorithm).tolist() == expected
    assert merkle.checksum_each([]).shape == (0,)


def test_each_errors_and_no_leaked_exports() -> None:
    held = bytearray(b"abc")
    with pytest.raises(TypeError, match="encoded"):
        merkle.checksum_each([held, "text"])
    held.extend(b"more")  # the export taken before the error was released
    with pytest.raises(TypeError, match="collection"):
        merkle.checksum_each(b"abc")
    with pytest.raises(TypeError):
        merkle.checksum_each([1, 2])
    with pytest.raises(ValueError, match="needed"):
        merkle.checksum_each([b"a"], out=np.zeros(2, np.uint32))
