"""merkle._native.fold_fixed: the CRC of equal pieces from their CRCs (Horner's rule in C, four
runs side by side), against the big-int reference at sizes around every internal boundary."""

from __future__ import annotations

import random

import numpy as np
import pytest

from merkle import _native
from reference import MASK
from reference import combine as reference_combine
from reference import crc as reference_crc

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
        got = _native.fold_fixed(np.array(values, dtype=DTYPE[algorithm]), stride, algorithm=algorithm)
        assert got == _reference_fold(algorithm, values, stride), (n, stride)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("n,stride", [(1, 5), (3, 1), (260, 3), (513, 2)])
def test_fold_is_crc_of_concatenation(algorithm: str, n: int, stride: int) -> None:
    data = random.Random(n).randbytes(n * stride)
    pieces = [reference_crc(algorithm, data[i * stride:(i + 1) * stride]) for i in range(n)]
    got = _native.fold_fixed(np.array(pieces, dtype=DTYPE[algorithm]), stride, algorithm=algorithm)
    assert got == reference_crc(algorithm, data)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_fold_every_backend(each_backend: str, algorithm: str) -> None:
    """The multiply is the backend's (carry-less or tables): both paths, short and tabled."""
    rng = random.Random(each_backend)
    for n in (5, 300, 1031):
        values = [rng.getrandbits(64) & MASK[algorithm] for _ in range(n)]
        got = _native.fold_fixed(np.array(values, dtype=DTYPE[algorithm]), 16384, algorithm=algorithm)
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
