"""crc(A||B) from the parts: identities, a big-int reference, and the bulk form."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import merkle

from reference import MASK, combine as reference_combine

FUNCS = {
    "crc32c": (merkle.crc32c, merkle.crc32c_combine),
    "crc32": (merkle.crc32, merkle.crc32_combine),
    "crc64nvme": (merkle.crc64nvme, merkle.crc64nvme_combine),
}
DTYPE = {"crc32c": np.uint32, "crc32": np.uint32, "crc64nvme": np.uint64}
crc_values = st.integers(0, 2**64 - 1)  # masked to the algorithm's width


@pytest.mark.parametrize("algorithm", sorted(FUNCS))
@settings(max_examples=200, deadline=None)
@given(a=st.binary(max_size=2000), b=st.binary(max_size=2000))
def test_combine_equals_concatenation(algorithm: str, a: bytes, b: bytes) -> None:
    crc, combine = FUNCS[algorithm]
    assert combine(crc(a), crc(b), len(b)) == crc(a + b)


@pytest.mark.parametrize("algorithm", sorted(FUNCS))
@settings(max_examples=200, deadline=None)
@given(c1=crc_values, c2=crc_values, len2=st.integers(0, 2**63))
def test_combine_matches_reference_for_any_length(
    algorithm: str, c1: int, c2: int, len2: int
) -> None:
    _, combine = FUNCS[algorithm]
    c1, c2 = c1 & MASK[algorithm], c2 & MASK[algorithm]
    assert combine(c1, c2, len2) == reference_combine(algorithm, c1, c2, len2)


@pytest.mark.parametrize("algorithm", sorted(FUNCS))
@settings(max_examples=100, deadline=None)
@given(
    c1=crc_values, c2=crc_values, c3=crc_values, l2=st.integers(0, 2**62), l3=st.integers(0, 2**62)
)
def test_combine_is_associative(
    algorithm: str, c1: int, c2: int, c3: int, l2: int, l3: int
) -> None:
    _, combine = FUNCS[algorithm]
    c1, c2, c3 = (c & MASK[algorithm] for c in (c1, c2, c3))
    left = combine(combine(c1, c2, l2), c3, l3)
    right = combine(c1, combine(c2, c3, l3), l2 + l3)
    assert left == right


def test_combine_identities(each_backend: str) -> None:
    for algorithm, (crc, combine) in FUNCS.items():
        a, b = b"hello ", b"world"
        assert combine(crc(a), crc(b), len(b)) == crc(a + b)
        assert combine(crc(a), 0, 0) == crc(a)  # appending nothing
        assert combine(0, crc(b), len(b)) == crc(b)  # crc of empty A is 0
        assert combine(crc(a), crc(b), len(b)) == reference_combine(
            algorithm, crc(a), crc(b), len(b)
        )


def test_combine_argument_errors() -> None:
    # OverflowError as zlib raises for a length that does not fit; still a ValueError too
    for combine in (merkle.crc32c_combine, merkle.crc32_combine, merkle.crc64nvme_combine):
        for bad in (-1, -(2**70), 2**64, 2**100):
            with pytest.raises(OverflowError, match="len2"):
                combine(1, 2, bad)
            with pytest.raises(ValueError, match="len2"):
                combine(1, 2, bad)
    for bad in (-1, 2**64):
        with pytest.raises(OverflowError, match="len2"):
            merkle.combine_many([1], [2], bad, algorithm="crc64nvme")
    for bad in (-1, 2**64):
        with pytest.raises(OverflowError, match="len2"):
            merkle.combine_many([1], [2], bad)
    assert merkle.crc32c_combine(1, 2, 2**64 - 1) == reference_combine("crc32c", 1, 2, 2**64 - 1)
    with pytest.raises(TypeError):
        merkle.crc32c_combine(1, 2, 3.0)
    with pytest.raises(TypeError):
        merkle.crc32_combine("1", 2, 3)


@pytest.mark.parametrize("algorithm", sorted(FUNCS))
@pytest.mark.parametrize("n", [0, 1, 255, 256, 5000])
def test_combine_many_matches_scalar(each_backend: str, algorithm: str, n: int) -> None:
    _, combine = FUNCS[algorithm]
    rng = np.random.default_rng(n)
    c1 = rng.integers(0, MASK[algorithm], n, dtype=DTYPE[algorithm], endpoint=True)
    c2 = rng.integers(0, MASK[algorithm], n, dtype=DTYPE[algorithm], endpoint=True)
    for len2 in (0, 1, 16384, 2**40 + 3):
        got = merkle.combine_many(c1, c2, len2, algorithm=algorithm)
        assert got.dtype == DTYPE[algorithm] and got.shape == (n,)
        assert got.tolist() == [combine(int(a), int(b), len2) for a, b in zip(c1, c2)]


def test_combine_many_joins_windows_into_the_whole() -> None:
    """Window checksums of equal size combine back into the buffer's checksum."""
    data = random.Random(1).randbytes(64 * 1024)
    windows = merkle.checksum_windows(data, 4096)
    acc = np.array([windows[0]], dtype=np.uint32)
    for w in windows[1:]:
        acc = merkle.combine_many(acc, np.array([w], dtype=np.uint32), 4096)
    assert int(acc[0]) == merkle.crc32c(data)


def test_combine_many_errors() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        merkle.combine_many([1, 2], [1], 4)
    with pytest.raises(ValueError, match="0..2\\*\\*32-1"):
        merkle.combine_many([-1], [1], 4)
    with pytest.raises(TypeError):
        merkle.combine_many([1.5], [1.0], 4)
    with pytest.raises(ValueError, match="one-dimensional"):
        merkle.combine_many([[1]], [[1]], 4)


def _zlib_peers():
    """crc32_combine of the zlib-shaped peers present: CPython's zlib (3.14+) and isal."""
    import zlib

    peers = []
    if hasattr(zlib, "crc32_combine"):
        peers.append(("zlib", zlib.crc32_combine))
    try:
        from isal import isal_zlib
    except ImportError:
        pass
    else:
        peers.append(("isal", isal_zlib.crc32_combine))
    return peers


@pytest.mark.parametrize("bad", [2**64, 2**100, -(2**70)])
def test_out_of_range_length_raises_what_zlib_raises(bad: int) -> None:
    """Side by side with zlib's crc32_combine (CPython 3.14+) and isal's: lengths no 64-bit
    integer holds raise OverflowError in each (zlib-ng's binding is left out: it raises
    SystemError for these and loops forever on -1)."""
    peers = _zlib_peers()
    if not peers:
        pytest.skip("no zlib-shaped crc32_combine installed (CPython < 3.14, no isal)")
    for _, peer in peers:
        with pytest.raises(OverflowError):
            peer(1, 2, bad)
        with pytest.raises(OverflowError):
            merkle.crc32_combine(1, 2, bad)
    for name, peer in peers:  # and in range, the same values
        for n in (0, 1, 5, 2**31, 2**32 + 3, 2**63 - 1):
            assert merkle.crc32_combine(0x12345678, 0x9ABCDEF0, n) == peer(
                0x12345678, 0x9ABCDEF0, n
            ), (name, n)


@pytest.mark.parametrize("algorithm", sorted(FUNCS))
def test_combine_refuses_crc_out_of_range(algorithm: str) -> None:
    """A negative or too large CRC raises ValueError, as awscrt's combine does ("not a valid
    unsigned"): taken modulo 2**width it gave a silent wrong answer."""
    crc, combine = FUNCS[algorithm]
    top = MASK[algorithm]
    good = crc(b"abc")
    for bad in (-1, -good, top + 1, 2**64, 2**200, np.int64(-1)):
        with pytest.raises(ValueError):
            combine(bad, good, 3)
        with pytest.raises(ValueError):
            combine(good, bad, 3)
    assert combine(top, 0, 0) == top and combine(0, top, 0) == top  # the bounds themselves


def test_combine_out_of_range_like_awscrt() -> None:
    checksums = pytest.importorskip("awscrt.checksums")
    with pytest.raises(ValueError):
        checksums.combine_crc64nvme(-1, 0, 4)
    with pytest.raises(ValueError):
        merkle.crc64nvme_combine(-1, 0, 4)
    with pytest.raises(ValueError):
        checksums.combine_crc32c(-1, 0, 4)
    with pytest.raises(ValueError):
        merkle.crc32c_combine(-1, 0, 4)
