"""Every kernel, every backend: known vectors, every length and alignment, chaining."""

from __future__ import annotations

import random
import zlib

import numpy as np
import pytest

import merkle

from reference import WIDTH, crc_at_lengths, crc_prefixes

ALGORITHMS = {"crc32c": merkle.crc32c, "crc32": merkle.crc32, "crc64nvme": merkle.crc64nvme}

# RFC 3720 appendix B.4 (values as numbers; the RFC lists the bytes little-endian first).
ISCSI_READ_PDU = bytes.fromhex(
    "01c00000000000000000000000000000"
    "14000000000004000000001400000018"
    "28000000000000000200000000000000"
)
RFC3720_VECTORS = [
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
    (ISCSI_READ_PDU, 0xD9963A56),
]


@pytest.mark.parametrize(("data", "expected"), RFC3720_VECTORS)
def test_rfc3720_vectors(each_backend: str, data: bytes, expected: int) -> None:
    assert merkle.crc32c(data) == expected


def test_check_values(each_backend: str) -> None:
    assert merkle.crc32c(b"123456789") == 0xE3069283
    assert merkle.crc32(b"123456789") == 0xCBF43926
    assert merkle.crc32c(b"") == 0 and merkle.crc32(b"") == 0
    assert merkle.crc32c(b"", 0xDEADBEEF) == 0xDEADBEEF
    assert merkle.crc64nvme(b"123456789") == 0xAE8B14860A799888 and merkle.crc64nvme(b"") == 0


def _aligned(size: int, rng: random.Random) -> tuple[np.ndarray, int]:
    """A random buffer and the index of its first 64-byte-aligned byte."""
    raw = np.frombuffer(rng.randbytes(size + 64), dtype=np.uint8)
    return raw, (-raw.ctypes.data) % 64


MAX_LEN = 4160


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_every_length_and_alignment(each_backend: str, algorithm: str) -> None:
    """Lengths 0..4160 at alignments 0..63, from a random initial value, vs a bytewise CRC."""
    fn = ALGORITHMS[algorithm]
    rng = random.Random(f"{algorithm}-lengths")
    buf, base = _aligned(MAX_LEN + 64, rng)
    view = memoryview(buf)
    for alignment in range(64):
        start = base + alignment
        value = rng.getrandbits(WIDTH[algorithm])
        expected = crc_prefixes(algorithm, bytes(view[start : start + MAX_LEN]), value)
        got = [fn(view[start : start + n], value) for n in range(MAX_LEN + 1)]
        if got != expected:
            bad = next(n for n in range(MAX_LEN + 1) if got[n] != expected[n])
            pytest.fail(f"{algorithm} wrong at alignment {alignment}, length {bad}")


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_stream_kernel_every_length_and_alignment(each_backend: str, algorithm: str) -> None:
    """The bulk paths run a backend's single-stream kernel, which differs from the one-shot
    kernel from about 1 KiB up: lengths 0..4160 at alignments 0..63 through checksum_each (one
    call per alignment), against a bytewise CRC."""
    rng = random.Random(f"{algorithm}-stream")
    buf, base = _aligned(MAX_LEN + 64, rng)
    view = memoryview(buf)
    for alignment in range(64):
        start = base + alignment
        expected = crc_prefixes(algorithm, bytes(view[start : start + MAX_LEN]))
        values = [view[start : start + n] for n in range(MAX_LEN + 1)]
        got = merkle.checksum_each(values, algorithm=algorithm).tolist()
        if got != expected:
            bad = next(n for n in range(MAX_LEN + 1) if got[n] != expected[n])
            pytest.fail(f"{algorithm} stream kernel wrong at alignment {alignment}, length {bad}")


LARGE_DATA = random.Random(7).randbytes(3 * 1024 * 1024 + 77)
LARGE_LENGTHS = (4161, 8191, 65536 + 13, 1 << 20, len(LARGE_DATA))


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_large_lengths(each_backend: str, algorithm: str) -> None:
    """Long buffers exercise the main loops of the folding kernels."""
    fn = ALGORITHMS[algorithm]
    expected = crc_at_lengths(algorithm, LARGE_DATA, LARGE_LENGTHS)
    for n in LARGE_LENGTHS:
        assert fn(memoryview(LARGE_DATA)[:n]) == expected[n], n


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_every_split_point_chains(each_backend: str, algorithm: str) -> None:
    fn = ALGORITHMS[algorithm]
    data = random.Random(3).randbytes(1100)
    whole = fn(data)
    for split in range(len(data) + 1):
        assert fn(data[split:], fn(data[:split])) == whole, split
    big = random.Random(4).randbytes(200_000)
    whole = fn(big)
    for split in random.Random(5).sample(range(len(big)), 200):
        assert fn(memoryview(big)[split:], fn(memoryview(big)[:split])) == whole


def test_crc32_equals_zlib(each_backend: str) -> None:
    rng = random.Random(11)
    for n in list(range(0, 300)) + [1000, 4096, 16384, 100_000]:
        data = rng.randbytes(n)
        value = rng.getrandbits(32)
        assert merkle.crc32(data, value) == zlib.crc32(data, value)


def test_value_is_masked_to_32_bits() -> None:
    assert merkle.crc32c(b"abc", 1 << 40) == merkle.crc32c(b"abc", 0)
    assert merkle.crc32c(b"abc", -1) == merkle.crc32c(b"abc", 0xFFFFFFFF)
    assert merkle.crc32(b"abc", -1) == zlib.crc32(b"abc", 0xFFFFFFFF)


def test_results_are_unsigned_ints() -> None:
    value = merkle.crc32c(b"123456789")
    assert type(value) is int and value == 0xE3069283 > 0x7FFFFFFF
