"""Integer-like arguments (__index__), empty combine_many, hash objects from a stored value and
reading a stream: the API gaps other CRC libraries' test suites probe."""

from __future__ import annotations

import io
import zlib
from collections import deque
from fractions import Fraction

import numpy as np
import pytest

import merkle

INT_TYPES = [np.uint32, np.int64, np.uint64, np.int32, np.uint8]


@pytest.mark.parametrize("typ", INT_TYPES)
def test_start_value_accepts_numpy_integers(typ) -> None:
    a = merkle.crc32c(b"hello ")
    assert merkle.crc32c(b"abc", typ(5)) == merkle.crc32c(b"abc", 5)
    assert merkle.crc32(b"abc", typ(5)) == zlib.crc32(b"abc", 5)
    if np.iinfo(typ).max >= a:  # the type holds the value
        assert merkle.crc32c(b"world", typ(a)) == merkle.crc32c(b"hello world")


class Indexable:
    def __init__(self, v: int) -> None:
        self.v = v

    def __index__(self) -> int:
        return self.v


def test_any_index_type_and_zlib_parity() -> None:
    assert merkle.crc32(b"abc", Indexable(7)) == zlib.crc32(b"abc", Indexable(7))
    assert merkle.crc32c_combine(Indexable(1), Indexable(2), Indexable(3)) == \
        merkle.crc32c_combine(1, 2, 3)


def test_combine_on_checksum_windows_output() -> None:
    data = bytes(range(256)) * 10 + b"abcdefghij"   # 2570 bytes: windows of 2560 + 10
    w = merkle.checksum_windows(data, 2560)
    assert isinstance(w[0], np.uint32)
    assert merkle.crc32c_combine(w[0], w[1], 10) == merkle.crc32c(data)
    assert merkle.crc32c_combine(w[0], w[1], np.int64(10)) == merkle.crc32c(data)
    wc = merkle.checksum_windows(data, 2560, algorithm="crc32")
    assert merkle.crc32_combine(wc[0], wc[1], np.uint64(10)) == zlib.crc32(data)
    assert merkle.combine_many(w[:1], w[1:], np.uint16(10))[0] == merkle.crc32c(data)


@pytest.mark.parametrize("bad", [1.0, "5", b"5", Fraction(1, 1), np.float32(1), None])
def test_non_integers_still_refused(bad) -> None:
    for call in (lambda: merkle.crc32c(b"abc", bad), lambda: merkle.crc32(b"abc", bad),
                 lambda: merkle.crc32c_combine(bad, 0, 1),
                 lambda: merkle.crc32c_combine(0, bad, 1),
                 lambda: merkle.crc32_combine(0, 0, bad),
                 lambda: merkle.combine_many([1], [2], bad),
                 lambda: merkle.CRC32C(value=bad)):
        with pytest.raises(TypeError):
            call()


def test_negative_or_huge_length_still_refused() -> None:
    with pytest.raises(ValueError):
        merkle.crc32c_combine(0, 0, np.int64(-1))
    with pytest.raises(ValueError):
        merkle.crc32c_combine(0, 0, 2**64)


def test_combine_many_empty() -> None:
    for a, b in (([], []), ((), ()), (np.empty(0, np.uint32), np.empty(0, np.uint32)),
                 (np.empty(0), np.empty(0))):
        out = merkle.combine_many(a, b, 16384)
        assert out.dtype == np.uint32 and out.shape == (0,)
    with pytest.raises(TypeError):  # a non-empty float column is still refused
        merkle.combine_many([1.0], [2.0], 3)
    with pytest.raises(ValueError):
        merkle.combine_many([], [1], 3)


@pytest.mark.parametrize("cls,fn", [(merkle.CRC32C, merkle.crc32c), (merkle.CRC32, merkle.crc32)])
def test_hash_starts_from_stored_value(cls, fn) -> None:
    stored = fn(b"hello ")
    h = cls(value=stored)
    h.update(b"world")
    assert h.intdigest() == fn(b"hello world")
    assert cls(b"world", value=np.uint32(stored)).intdigest() == fn(b"hello world")
    assert cls(data=b"world", value=stored).intdigest() == fn(b"hello world")
    assert cls(value=stored).copy().intdigest() == stored
    assert cls(value=-1).intdigest() == 0xFFFFFFFF  # zlib's modulo-2**32 rule
    with pytest.raises(TypeError):
        cls(b"x", stored)  # value is keyword-only: a second positional is a mistake


@pytest.mark.parametrize("cls,fn", [(merkle.CRC32C, merkle.crc32c), (merkle.CRC32, merkle.crc32)])
@pytest.mark.parametrize("size", [0, 1, 7, 4096, 100_003])
def test_consume_stream(cls, fn, size) -> None:
    data = np.random.default_rng(size).bytes(size)
    h = cls()
    chunks = list(h.consume(io.BytesIO(data), 4096))
    assert b"".join(chunks) == data
    assert all(0 < len(c) <= 4096 for c in chunks)
    assert len(chunks) == -(-size // 4096)
    assert h.intdigest() == fn(data)
    h2 = cls(value=fn(b"prefix"))
    deque(h2.consume(io.BytesIO(data), np.int64(1000)), maxlen=0)
    assert h2.intdigest() == fn(b"prefix" + data)


def test_consume_is_lazy_and_checks_chunk_size() -> None:
    h = merkle.CRC32C()
    gen = h.consume(io.BytesIO(b"abcdef"), 2)
    assert h.intdigest() == 0  # nothing read before iteration
    assert next(gen) == b"ab" and h.intdigest() == merkle.crc32c(b"ab")
    for bad in (0, -1):
        with pytest.raises(ValueError):
            next(merkle.CRC32C().consume(io.BytesIO(b"x"), bad))
    with pytest.raises(TypeError):
        next(merkle.CRC32C().consume(io.BytesIO(b"x"), 2.0))
