"""Every kind of buffer is read in place; everything else gets a clear error."""

from __future__ import annotations

import array
import mmap
import random

import numpy as np
import pytest

import merkle

DATA = random.Random(0).randbytes(50_000)  # above the GIL-release threshold
EXPECTED = merkle.crc32c(DATA)


def _mmap() -> mmap.mmap:
    m = mmap.mmap(-1, len(DATA))
    m.write(DATA)
    return m


BUFFERS = {
    "bytes": lambda: DATA,
    "bytearray": lambda: bytearray(DATA),
    "memoryview": lambda: memoryview(DATA),
    "readonly-memoryview": lambda: memoryview(bytearray(DATA)).toreadonly(),
    "mmap": _mmap,
    "numpy-uint8": lambda: np.frombuffer(DATA, dtype=np.uint8),
    "numpy-uint32-2d": lambda: np.frombuffer(DATA, dtype=np.uint32).reshape(-1, 500),
    "array": lambda: array.array("B", DATA),
    "memoryview-cast": lambda: memoryview(DATA).cast("I"),
}


@pytest.mark.parametrize("kind", sorted(BUFFERS))
def test_buffer_kinds(kind: str) -> None:
    for small in (False, True):  # both sides of the GIL-release threshold
        buf = BUFFERS[kind]()
        data = DATA if not small else DATA[:100]
        if small:
            buf = memoryview(buf).cast("B")[:100] if kind != "bytes" else DATA[:100]
        assert merkle.crc32c(buf) == merkle.crc32c(data)
        assert merkle.crc32(buf) == merkle.crc32(data)
        assert (
            merkle.checksum_windows(buf, 4096).tolist()
            == merkle.checksum_windows(data, 4096).tolist()
        )
        h = merkle.CRC32C()
        h.update(buf)
        assert h.intdigest() == merkle.crc32c(data)


@pytest.mark.parametrize(
    "fn",
    [
        merkle.crc32c,
        merkle.crc32,
        lambda d: merkle.checksum_windows(d, 16),
        lambda d: merkle.CRC32C(d),
        lambda d: merkle.CRC32().update(d),
    ],
)
def test_bad_inputs(fn) -> None:
    with pytest.raises(TypeError, match="Strings must be encoded"):
        fn("text")
    with pytest.raises(TypeError, match="bytes-like object is required"):
        fn(12345)
    with pytest.raises(ValueError, match="C-contiguous"):
        fn(memoryview(DATA)[::2])
    with pytest.raises(ValueError, match="C-contiguous"):
        fn(np.frombuffer(DATA[:400], dtype=np.uint8).reshape(20, 20).T)


def test_bad_value_argument() -> None:
    with pytest.raises(TypeError, match="value must be an int"):
        merkle.crc32c(b"abc", 1.0)
    with pytest.raises(TypeError, match="value must be an int"):
        merkle.crc32(b"abc", "0")


def test_no_export_is_leaked() -> None:
    """A bytearray cannot be resized while a buffer export is held: every path releases it."""
    buf = bytearray(DATA)
    merkle.crc32c(buf)
    merkle.crc32(buf, 5)
    merkle.checksum_windows(buf, 100)
    merkle.CRC32C(buf).update(buf)
    merkle.checksum_each([buf, buf])
    with pytest.raises(ValueError):
        merkle.checksum_windows(buf, 100, out=np.zeros(1, np.uint32))
    with pytest.raises(TypeError):
        merkle.crc32c(buf, None)
    buf.extend(b"still resizable")
    assert len(buf) == len(DATA) + 15


def test_large_buffer_over_4_gib() -> None:
    """Lengths are size_t all the way down: a 32-bit length would drop the tail."""
    size = (4 << 30) + 4099
    # Populated up front (4 GiB of zero pages, in one call of the kernel): faulting the
    # untouched pages in one at a time on the first read took 4 s alone and 28 s beside a
    # second test worker. MAP_POPULATE is Linux's, in Python's mmap from 3.10.
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_POPULATE", 0)
    m = mmap.mmap(-1, size, flags=flags)
    try:
        m[:7] = b"leading"
        m[size - 8 :] = b"trailing"
        view = memoryview(m)
        # Chained in pieces below 4 GiB, each piece's length fits 32 bits.
        pieces = 0
        for start in range(0, size, 1 << 30):
            pieces = merkle.crc32c(view[start : start + (1 << 30)], pieces)
        assert merkle.crc32c(view) == pieces
        windows = merkle.checksum_windows(view, 1 << 30)
        assert windows.shape == (5,)
        assert int(windows[-1]) == merkle.crc32c(view[4 << 30 :])
        view.release()
    finally:
        m.close()
