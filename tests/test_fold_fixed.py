"""merkle._native.fold_fixed: the CRC of equal pieces from their CRCs (Horner's rule in C, four
runs side by side), against the big-int reference at sizes around every internal boundary."""

from __future__ import annotations

import random

import numpy as np
import pytest

from merkle import _native

from reference import MASK, combine as reference_combine, crc as reference_crc

ALGORITHMS = ("crc32c", "crc32", "crc64nvme")
DTYPE = {"crc32c": np.uint32, "crc32": np.uint32, "crc64nvme": np.uint64}


def _reference_fold(algorithm: str, values: list[int], stride: int) -> int:
    acc = 0
    for v in values:
        acc = reference_combine(algorithm, acc, v, stride)
    return acc


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 7, 255, 256, 257, 258, 259, 260, 1000, 1023, 4099])
def test_fold_matches_reference(algorithm: str, n: int) -> None:
    rng = random.Random(n * 31 + len(algorithm))
    values = [rng.getrandbits(64) & MASK[algorithm] for _ in range(n)]
    for stride in (1, 7, 16384, 1 << 40):
        got = _native.fold_fixed(
            np.array(values, dtype=DTYPE[algorithm]), stride, algorithm=algorithm
        )
        assert got == _reference_fold(algorithm, values, stride), (n, stride)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("n,stride", [(1, 5), (3, 1), (260, 3), (513, 2)])
def test_fold_is_crc_of_concatenation(algorithm: str, n: int, stride: int) -> None:
    data = random.Random(n).randbytes(n * stride)
    pieces = [reference_crc(algorithm, data[i * stride : (i + 1) * stride]) for i in range(n)]
    got = _native.fold_fixed(np.array(pieces, dtype=DTYPE[algorithm]), stride, algorithm=algorithm)
    assert got == reference_crc(algorithm, data)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_fold_every_backend(each_backend: str, algorithm: str) -> None:
    """The multiply is the backend's (carry-less or tables): both paths, short and tabled."""
    rng = random.Random(each_backend)
    for n in (5, 300, 1031):
        values = [rng.getrandbits(64) & MASK[algorithm] for _ in range(n)]
        got = _native.fold_fixed(
            np.array(values, dtype=DTYPE[algorithm]), 16384, algorithm=algorithm
        )
        assert got == _reference_fold(algorithm, values, 16384), (each_backend, n)


def test_fold_zero_stride_is_xor() -> None:
    values = np.arange(1, 600, dtype=np.uint32)
    assert _native.fold_fixed(values, 0, algorithm="crc32c") == int(np.bitwise_xor.reduce(values))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_fold_refuses_bad_input(algorithm: str) -> None:
    with pytest.raises(ValueError, match="exceed 2\\*\\*63"):
        _native.fold_fixed(np.zeros(4, dtype=DTYPE[algorithm]), 1 << 62, algorithm=algorithm)
    with pytest.raises(ValueError):
        _native.fold_fixed(np.zeros(4, dtype=DTYPE[algorithm]), -1, algorithm=algorithm)
    with pytest.raises(ValueError):
        _native.fold_fixed(np.zeros((2, 2), dtype=DTYPE[algorithm]), 1, algorithm=algorithm)
    with pytest.raises(ValueError):
        _native.fold_fixed([-1], 1, algorithm=algorithm)


# --- fold_segments_be: many segments of big-endian window CRCs in one call -----------------


def _segments(algorithm: str, stride: int, sizes: list[int], seed: int):
    """Random data per segment, its windows' CRCs packed big-endian, bounds and last lengths."""
    rng = random.Random(seed)
    width = 8 if algorithm == "crc64nvme" else 4
    be, bounds, last, datas = b"", [0], [], []
    for n in sizes:
        tail = rng.randint(1, stride) if n else 0
        data = rng.randbytes(stride * (n - 1) + tail) if n else b""
        be += b"".join(
            reference_crc(algorithm, data[i * stride : (i + 1) * stride]).to_bytes(width, "big")
            for i in range(n)
        )
        bounds.append(bounds[-1] + n)
        last.append(tail)
        datas.append(data)
    return np.frombuffer(be, np.uint8), np.array(bounds), np.array(last), datas


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("stride", [1, 7, 64, 4096])
def test_fold_segments_is_crc_of_each_segment(algorithm: str, stride: int) -> None:
    sizes = [0, 1, 2, 3, 4, 255, 256, 257, 258, 259, 260, 1031, 0, 5]
    be, bounds, last, datas = _segments(algorithm, stride, sizes, stride)
    got = _native.fold_segments_be(be, bounds, last, stride, algorithm=algorithm)
    assert got.dtype == DTYPE[algorithm]
    assert [int(x) for x in got] == [reference_crc(algorithm, d) for d in datas]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_fold_segments_every_backend(each_backend: str, algorithm: str) -> None:
    be, bounds, last, datas = _segments(algorithm, 16, [1, 300, 1031, 2], len(each_backend))
    got = _native.fold_segments_be(be, bounds, last, 16, algorithm=algorithm)
    assert [int(x) for x in got] == [reference_crc(algorithm, d) for d in datas], each_backend


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_fold_segments_refuses_bad_input(algorithm: str) -> None:
    be, bounds, last, _ = _segments(algorithm, 8, [3, 2], 1)
    for args, words in [
        ((be[:-1], bounds, last, 8), "whole number"),
        ((be, np.array([0, 3, 6]), last, 8), "indexes must be in"),
        ((be, np.array([0, 4, 3]), last, 8), "ascending"),
        ((be, np.array([-1, 3, 5]), last, 8), "indexes must be in"),
        ((be, bounds, np.array([9, 1]), 8), "last_len"),
        ((be, bounds, np.array([1]), 8), "one integer per segment"),
        ((be, np.array([[0, 3, 5]]), last, 8), "bounds"),
    ]:
        with pytest.raises(ValueError, match=words):
            _native.fold_segments_be(*args, algorithm=algorithm)
    assert _native.fold_segments_be(
        be[:0], np.array([0]), np.array([], np.int64), 8, algorithm=algorithm
    ).shape == (0,)
