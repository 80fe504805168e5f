"""hashlib-shaped CRC32C / CRC32 objects, including use from many threads at once."""

from __future__ import annotations

import hashlib
import io
import random
import sys
import threading
import zlib

import pytest

import merkle

CLASSES = {
    "crc32c": (merkle.CRC32C, merkle.crc32c),
    "crc32": (merkle.CRC32, merkle.crc32),
    "crc64nvme": (merkle.CRC64NVME, merkle.crc64nvme),
}


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_hash_object_api(name: str) -> None:
    cls, fn = CLASSES[name]
    size = 8 if name == "crc64nvme" else 4
    h = cls(b"1234")
    h.update(b"56789")
    value = fn(b"123456789")
    assert h.intdigest() == value
    assert h.digest() == value.to_bytes(size, "big")
    assert h.hexdigest() == f"{value:0{2 * size}x}" and isinstance(h.hexdigest(), str)
    assert (h.name, h.digest_size, h.block_size) == (name, size, 1)
    assert cls().intdigest() == 0 and cls().hexdigest() == "0" * (2 * size)
    twin = h.copy()
    twin.update(b"more")
    assert h.intdigest() == value and twin.intdigest() == fn(b"123456789more")
    assert type(twin) is cls
    h.reset()
    assert h.intdigest() == 0
    assert name in repr(cls).lower() or cls.__name__ in repr(h)


def test_known_digests() -> None:
    assert merkle.CRC32C(b"123456789").hexdigest() == "e3069283"
    assert merkle.CRC32(b"123456789").digest() == zlib.crc32(b"123456789").to_bytes(4, "big")


@pytest.mark.skipif(sys.version_info < (3, 11), reason="hashlib.file_digest is new in 3.11")
def test_file_digest() -> None:
    data = random.Random(2).randbytes(1_000_003)
    assert hashlib.file_digest(io.BytesIO(data), merkle.CRC32C).intdigest() == merkle.crc32c(data)
    assert (
        hashlib.file_digest(io.BytesIO(data), merkle.CRC32).hexdigest() == f"{zlib.crc32(data):08x}"
    )


@pytest.mark.parametrize("chunk_size", [100, 200_000])  # below and above the GIL threshold
def test_threads_hammering_one_object(chunk_size: int) -> None:
    """Every thread feeds the same chunk, so any interleaving gives one right answer; a lost or
    torn update would not."""
    chunk = random.Random(chunk_size).randbytes(chunk_size)
    threads, rounds = 4, 300 if chunk_size < 1000 else 40
    h = merkle.CRC32C()
    copies: list[int] = []
    barrier = threading.Barrier(threads)

    def work() -> None:
        barrier.wait()
        for i in range(rounds):
            h.update(chunk)
            if i % 10 == 0:
                copies.append(h.copy().intdigest())
                h.hexdigest()

    pool = [threading.Thread(target=work) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert h.intdigest() == merkle.crc32c(chunk * (threads * rounds))
    # Every snapshot is the CRC of a whole number of chunks, never a torn state.
    valid = set()
    value = 0
    for _ in range(threads * rounds):
        value = merkle.crc32c(chunk, value)
        valid.add(value)
    assert set(copies) <= valid


def test_threads_sharing_a_buffer() -> None:
    data = random.Random(9).randbytes(3_000_000)
    expected = merkle.crc32c(data), merkle.checksum_windows(data, 16384).tolist()
    results: list[tuple[int, list[int]]] = []

    def work() -> None:
        for _ in range(10):
            results.append((merkle.crc32c(data), merkle.checksum_windows(data, 16384).tolist()))

    pool = [threading.Thread(target=work) for _ in range(4)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert len(results) == 40 and all(r == expected for r in results)


@pytest.mark.parametrize(
    "cls", [merkle.CRC32C, merkle.CRC32, merkle.CRC64NVME, type(merkle.CRC32C()).__mro__[1]]
)
@pytest.mark.skipif(
    sys.version_info < (3, 10),
    reason="a heap type can be made immutable only from CPython 3.10 (Py_TPFLAGS_IMMUTABLETYPE)",
)
def test_hash_classes_are_immutable_as_hashlibs(cls) -> None:
    """Setting or deleting a class attribute raises TypeError, as on hashlib's types (the heap
    types the module state needs were mutable: a peer's test suite caught it)."""
    hashlib_type = type(hashlib.sha256())
    with pytest.raises(TypeError):
        hashlib_type.foo = 1  # the behaviour to match
    with pytest.raises(TypeError):
        cls.foo = 1
    with pytest.raises(TypeError):
        cls.name = "x"
    with pytest.raises(TypeError):
        del cls.update
    assert not hasattr(cls, "foo")
    assert cls.__flags__ & (1 << 8)  # Py_TPFLAGS_IMMUTABLETYPE
    h = cls(b"abc")  # instances and subclasses still work
    assert h.intdigest() == cls(b"abc").intdigest()

    class Sub(cls):  # type: ignore[misc, valid-type]
        pass

    Sub.extra = 1  # a Python subclass is an ordinary, mutable class
    assert Sub(b"abc").intdigest() == h.intdigest()
