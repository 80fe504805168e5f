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
    assert merkle.crc32c_combine(Indexable(1), Indexable(2), Indexable(3)) == merkle.crc32c_combine(
        1, 2, 3
    )


def test_combine_on_checksum_windows_output() -> None:
    data = bytes(range(256)) * 10 + b"abcdefghij"  # 2570 bytes: windows of 2560 + 10
    w = merkle.checksum_windows(data, 2560)
    assert isinstance(w[0], np.uint32)
    assert merkle.crc32c_combine(w[0], w[1], 10) == merkle.crc32c(data)
    assert merkle.crc32c_combine(w[0], w[1], np.int64(10)) == merkle.crc32c(data)
    wc = merkle.checksum_windows(data, 2560, algorithm="crc32")
    assert merkle.crc32_combine(wc[0], wc[1], np.uint64(10)) == zlib.crc32(data)
    assert merkle.combine_many(w[:1], w[1:], np.uint16(10))[0] == merkle.crc32c(data)


@pytest.mark.parametrize("bad", [1.0, "5", b"5", Fraction(1, 1), np.float32(1), None])
def test_non_integers_still_refused(bad) -> None:
    for call in (
        lambda: merkle.crc32c(b"abc", bad),
        lambda: merkle.crc32(b"abc", bad),
        lambda: merkle.crc32c_combine(bad, 0, 1),
        lambda: merkle.crc32c_combine(0, bad, 1),
        lambda: merkle.crc32_combine(0, 0, bad),
        lambda: merkle.combine_many([1], [2], bad),
        lambda: merkle.CRC32C(value=bad),
    ):
        with pytest.raises(TypeError):
            call()


def test_negative_or_huge_length_still_refused() -> None:
    with pytest.raises(ValueError):
        merkle.crc32c_combine(0, 0, np.int64(-1))
    with pytest.raises(ValueError):
        merkle.crc32c_combine(0, 0, 2**64)


def test_combine_many_empty() -> None:
    for a, b in (
        ([], []),
        ((), ()),
        (np.empty(0, np.uint32), np.empty(0, np.uint32)),
        (np.empty(0), np.empty(0)),
    ):
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


def test_consume_is_lazy_and_checks_chunksize() -> None:
    h = merkle.CRC32C()
    gen = h.consume(io.BytesIO(b"abcdef"), 2)
    assert h.intdigest() == 0  # nothing read before iteration
    assert next(gen) == b"ab" and h.intdigest() == merkle.crc32c(b"ab")
    with pytest.raises(TypeError):
        merkle.CRC32C().consume(io.BytesIO(b"x"), 2.0)  # checked when called
    with pytest.raises(TypeError, match="chunksize"):
        merkle.CRC32C().consume(io.BytesIO(b"x"))
    with pytest.raises(TypeError, match="both"):
        merkle.CRC32C().consume(io.BytesIO(b"x"), 2, chunk_size=2)


@pytest.mark.parametrize("spelling", ["positional", "chunksize", "chunk_size"])
def test_consume_spellings(spelling: str) -> None:
    args, kwargs = {
        "positional": ((3,), {}),
        "chunksize": ((), {"chunksize": 3}),
        "chunk_size": ((), {"chunk_size": 3}),
    }[spelling]
    h = merkle.CRC32()
    assert list(h.consume(io.BytesIO(b"abcdefg"), *args, **kwargs)) == [b"abc", b"def", b"g"]
    assert h.intdigest() == zlib.crc32(b"abcdefg")


class ShortReads(io.RawIOBase):
    """A raw stream that returns at most 5 bytes per read, as a pipe or socket may, and
    records the sizes asked for."""

    def __init__(self, data: bytes) -> None:
        self.data, self.asked = data, []

    def readable(self) -> bool:
        return True

    def read(self, size=-1):  # type: ignore[override]
        self.asked.append(size)
        take = 5 if size is None or size < 0 else min(5, size)
        chunk, self.data = self.data[:take], self.data[take:]
        return chunk


@pytest.mark.parametrize("chunksize", [0, -1, -7, None, 1, 4, 4096, np.int64(3)])
@pytest.mark.parametrize("size", [0, 1, 9, 10_000])
def test_consume_matches_google_crc32c(chunksize, size: int) -> None:
    """Side by side with google-crc32c's Checksum.consume on the same streams: the same chunks
    (0 yields nothing; -1, any negative and None read the rest), the same reads asked of the
    stream, the same digest."""
    google_crc32c = pytest.importorskip("google_crc32c")
    data = np.random.default_rng(size).bytes(size)
    for make in (io.BytesIO, ShortReads):
        ours_stream, theirs_stream = make(data), make(data)
        ours, theirs = merkle.CRC32C(), google_crc32c.Checksum()
        ours_chunks = list(ours.consume(ours_stream, chunksize))
        theirs_chunks = list(theirs.consume(theirs_stream, chunksize))
        assert ours_chunks == theirs_chunks
        assert ours.digest() == theirs.digest()
        if make is ShortReads:
            assert ours_stream.asked == theirs_stream.asked
        if chunksize == 0:
            assert ours_chunks == [] and ours.intdigest() == 0
        elif chunksize is None or chunksize < 0:
            if make is io.BytesIO:
                assert ours_chunks == ([data] if data else [])
        else:
            assert b"".join(ours_chunks) == data


@pytest.mark.parametrize(
    "fn,name", [(merkle.crc32c, "crc32c"), (merkle.crc32, "crc32"), (merkle.crc64nvme, "crc64nvme")]
)
def test_value_by_keyword(fn, name: str) -> None:
    """value= by keyword on the functions too, as the crc32c package allows; positional still
    works, and data= as crc32c 2.x accepts it."""
    start = fn(b"hello ")
    assert fn(b"world", value=start) == fn(b"world", start) == fn(b"hello world")
    assert fn(data=b"world", value=start) == fn(b"hello world")
    assert fn(b"abc", value=np.uint32(7)) == fn(b"abc", 7)
    with pytest.raises(TypeError):
        fn(b"abc", 1, value=1)  # value given twice
    with pytest.raises(TypeError):
        fn(b"abc", crc=1)
    if name == "crc32":
        assert fn(b"world", value=start) == zlib.crc32(b"world", start)


def test_value_by_keyword_matches_crc32c_package() -> None:
    crc32c = pytest.importorskip("crc32c")
    google_crc32c = pytest.importorskip("google_crc32c")
    for data in (b"", b"a", b"123456789", bytes(range(256)) * 100):
        for value in (0, 1, 0xFFFFFFFF, crc32c.crc32c(b"prefix")):
            expected = crc32c.crc32c(data, value=value)
            assert merkle.crc32c(data, value=value) == expected
            assert merkle.crc32c(data=data, value=value) == crc32c.crc32c(data=data, value=value)
            assert google_crc32c.extend(value, data) == expected  # google: extend(crc, chunk)
        assert merkle.crc32c(data) == google_crc32c.value(data)


def test_crc64nvme_value_by_keyword_matches_awscrt() -> None:
    checksums = pytest.importorskip("awscrt.checksums")
    for data in (b"", b"a", b"123456789", bytes(range(256)) * 100):
        for value in (0, 1, 2**64 - 1, checksums.crc64nvme(b"prefix")):
            expected = checksums.crc64nvme(data, previous_crc64nvme=value)
            assert merkle.crc64nvme(data, value=value) == merkle.crc64nvme(data, value) == expected
    assert merkle.crc64nvme(b"abc", value=-1) == merkle.crc64nvme(b"abc", 2**64 - 1)  # mod 2**64


@pytest.mark.parametrize("chunksize", [0, -1, 4])
def test_crc64nvme_consume_spellings(chunksize: int) -> None:
    data = bytes(range(10))
    a, b = merkle.CRC64NVME(), merkle.CRC64NVME()
    chunks = list(a.consume(io.BytesIO(data), chunksize))
    assert chunks == list(b.consume(io.BytesIO(data), chunk_size=chunksize))
    assert a.intdigest() == b.intdigest() == merkle.crc64nvme(b"".join(chunks))
    assert chunks == {0: [], -1: [data], 4: [data[:4], data[4:8], data[8:]]}[chunksize]


@pytest.mark.parametrize("fn", [merkle.crc32c, merkle.crc32, merkle.crc64nvme])
def test_gil_release_mode_accepted(fn) -> None:
    """The crc32c package's gil_release_mode (-1 release for large buffers, 0 never, 1 always),
    by keyword or as the third positional argument, on every one-shot; the value is the same."""
    for data in (b"", b"123456789", bytes(range(256)) * 1024):  # 256 KiB: over the threshold
        expected = fn(data, 5)
        for mode in (-1, 0, 1, -7, 2, True, np.int8(1)):
            assert fn(data, 5, gil_release_mode=mode) == expected
            assert fn(data, 5, mode) == expected
            assert fn(data=data, value=5, gil_release_mode=mode) == expected
        assert fn(memoryview(data), gil_release_mode=1) == fn(data)
    for bad in (1.0, "1", None):
        with pytest.raises(TypeError):
            fn(b"abc", gil_release_mode=bad)
    with pytest.raises(OverflowError):
        fn(b"abc", gil_release_mode=2**80)
    with pytest.raises(TypeError):
        fn(b"abc", 0, 1, gil_release_mode=1)  # given twice
    with pytest.raises(TypeError):
        fn(b"abc", 0, 1, 2)  # at most 3 positional


def test_gil_release_mode_matches_crc32c_package() -> None:
    crc32c = pytest.importorskip("crc32c")
    for data in (b"", b"abc", bytes(range(256)) * 1024):
        for mode in (-1, 0, 1):
            assert merkle.crc32c(data, 7, gil_release_mode=mode) == crc32c.crc32c(
                data, 7, gil_release_mode=mode
            )
            assert merkle.crc32c(data, 7, mode) == crc32c.crc32c(data, 7, mode)
