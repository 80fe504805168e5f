"""CRC-64/NVME beyond the shared per-algorithm loops of test_core_kernels/bulk/combine/hash:
awscrt's values on every length and alignment with each backend, S3's base64 form, the two
branches of combine_fixed64, and two CRCs per window in one pass."""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import itertools
import random
import threading

import numpy as np
import pyarrow as pa
import pytest

import merkle

from reference import combine as reference_combine, crc_prefixes

try:
    from awscrt import checksums as awscrt_checksums
except ImportError:  # pragma: no cover - awscrt is in the dev environment
    awscrt_checksums = None
needs_awscrt = pytest.mark.skipif(awscrt_checksums is None, reason="awscrt is not installed")

CHECK = 0xAE8B14860A799888  # crc64nvme(b"123456789"), the catalogue's check value
MASK64 = (1 << 64) - 1
MAX_LEN = 4160
ONE_SHOT = {"crc32c": merkle.crc32c, "crc32": merkle.crc32, "crc64nvme": merkle.crc64nvme}


def test_check_value(each_backend: str) -> None:
    assert merkle.crc64nvme(b"123456789") == CHECK
    assert merkle.crc64nvme(b"") == 0
    assert merkle.crc64nvme(b"", 0xDEADBEEFCAFEF00D) == 0xDEADBEEFCAFEF00D
    assert merkle.CRC64NVME(b"123456789").intdigest() == CHECK


def test_value_by_keyword_and_masking() -> None:
    a, b = b"hello ", b"world"
    assert merkle.crc64nvme(b, value=merkle.crc64nvme(a)) == merkle.crc64nvme(a + b)
    assert merkle.crc64nvme(b, merkle.crc64nvme(a)) == merkle.crc64nvme(a + b)
    assert merkle.crc64nvme(b"abc", 1 << 70) == merkle.crc64nvme(b"abc", 0)
    assert merkle.crc64nvme(b"abc", -1) == merkle.crc64nvme(b"abc", MASK64)
    assert merkle.crc64nvme(b"abc", np.uint64(5)) == merkle.crc64nvme(b"abc", 5)
    value = merkle.crc64nvme(b"123456789")
    assert type(value) is int and value == CHECK > (1 << 63)
    with pytest.raises(TypeError):
        merkle.crc64nvme(b"abc", 1.0)
    with pytest.raises(TypeError, match="encoded"):
        merkle.crc64nvme("abc")


@functools.lru_cache(maxsize=1)
def _awscrt_table() -> tuple[bytes, list[tuple[int, list[int]]]]:
    """A random buffer and, per alignment 0..63, a random initial value and awscrt's CRC of
    buf[alignment : alignment + n] from it for every n in 0..MAX_LEN (computed once, then
    compared with every backend)."""
    rng = random.Random("crc64nvme-awscrt")
    buf = rng.randbytes(MAX_LEN + 64)
    rows = []
    for alignment in range(64):
        value = rng.getrandbits(64)
        data = buf[alignment : alignment + MAX_LEN]
        rows.append(
            (value, [awscrt_checksums.crc64nvme(data[:n], value) for n in range(MAX_LEN + 1)])
        )
    return buf, rows


@needs_awscrt
def test_equals_awscrt_every_length_and_alignment(each_backend: str) -> None:
    """Lengths 0..4160 at alignments 0..63 (relative to a 64-byte boundary), each from a random
    initial value, against awscrt (botocore's CRC-64/NVME)."""
    buf, rows = _awscrt_table()
    raw = np.frombuffer(bytes(len(buf) + 64), dtype=np.uint8).copy()
    base = (-raw.ctypes.data) % 64
    raw[base : base + len(buf)] = np.frombuffer(buf, dtype=np.uint8)
    view = memoryview(raw)
    for alignment, (value, expected) in enumerate(rows):
        start = base + alignment
        got = [merkle.crc64nvme(view[start : start + n], value) for n in range(MAX_LEN + 1)]
        if got != expected:
            bad = next(n for n in range(MAX_LEN + 1) if got[n] != expected[n])
            pytest.fail(f"crc64nvme differs from awscrt at alignment {alignment}, length {bad}")


@needs_awscrt
def test_awscrt_and_the_reference_agree() -> None:
    """The two oracles (awscrt, the bitwise reference) agree, so neither test above is vacuous."""
    data = random.Random(8).randbytes(3000)
    prefixes = crc_prefixes("crc64nvme", data, 12345)
    for n in (0, 1, 7, 8, 15, 16, 17, 63, 64, 255, 256, 1000, 3000):
        assert awscrt_checksums.crc64nvme(data[:n], 12345) == prefixes[n]


@needs_awscrt
@pytest.mark.parametrize("size", [100_000, 1 << 20, (1 << 20) + 13])
def test_large_equals_awscrt(each_backend: str, size: int) -> None:
    data = random.Random(size).randbytes(size)
    assert merkle.crc64nvme(data) == awscrt_checksums.crc64nvme(data)


def test_combine_random_splits(each_backend: str) -> None:
    rng = random.Random(21)
    data = rng.randbytes(5000)
    whole = merkle.crc64nvme(data)
    for split in [0, len(data)] + rng.sample(range(len(data)), 40):
        a, b = data[:split], data[split:]
        got = merkle.crc64nvme_combine(merkle.crc64nvme(a), merkle.crc64nvme(b), len(b))
        assert got == whole, split
    for _ in range(20):
        c1, c2 = rng.getrandbits(64), rng.getrandbits(64)
        len2 = rng.getrandbits(rng.choice((3, 20, 64)))
        assert merkle.crc64nvme_combine(c1, c2, len2) == reference_combine(
            "crc64nvme", c1, c2, len2
        )
    assert merkle.crc64nvme_combine(whole, 0, 0) == whole  # appending nothing
    assert merkle.crc64nvme_combine(0, whole, len(data)) == whole  # crc of empty A is 0


def test_combine_argument_errors() -> None:
    # a crc outside 0..2**64-1 is refused (ValueError, as awscrt), as the 32-bit combines
    # refuse one outside 0..2**32-1: it was taken mod 2**64, a silent wrong answer
    assert merkle.crc64nvme_combine(MASK64, 0, 0) == MASK64
    with pytest.raises(ValueError, match="crc_a"):
        merkle.crc64nvme_combine(-1, 0, 0)
    with pytest.raises((ValueError, OverflowError), match="len2"):
        merkle.crc64nvme_combine(1, 2, -1)
    with pytest.raises((ValueError, OverflowError), match="len2"):
        merkle.crc64nvme_combine(1, 2, 2**64)
    with pytest.raises(TypeError):
        merkle.crc64nvme_combine(1, 2, 3.0)
    with pytest.raises(TypeError):
        merkle.crc64nvme_combine("1", 2, 3)


@pytest.mark.parametrize("n", [1, 255, 256, 1000])  # below 256: multiplies; from 256: tables
def test_combine_fixed64_both_branches(each_backend: str, n: int) -> None:
    rng = np.random.default_rng(n)
    c1 = rng.integers(0, 2**64, n, dtype=np.uint64)
    c2 = rng.integers(0, 2**64, n, dtype=np.uint64)
    for len2 in (0, 1, 16384, 2**40 + 3):
        got = merkle.combine_many(c1, c2, len2, algorithm="crc64nvme")
        assert got.dtype == np.uint64 and got.shape == (n,)
        assert got.tolist() == [
            merkle.crc64nvme_combine(int(a), int(b), len2) for a, b in zip(c1, c2)
        ]
        for i in (0, n - 1):  # the scalar path itself against the big-int reference
            assert int(got[i]) == reference_combine("crc64nvme", int(c1[i]), int(c2[i]), len2)


def test_combine_many64_columns() -> None:
    a, b = merkle.crc64nvme(b"abc"), merkle.crc64nvme(b"defg")
    for cols in ([a], np.array([a], np.uint64), [np.uint64(a)]):
        assert merkle.combine_many(cols, [b], 4, algorithm="crc64nvme").tolist() == [
            merkle.crc64nvme(b"abcdefg")
        ]
    assert merkle.combine_many(np.array([1], np.int32), [1], 0, algorithm="crc64nvme").tolist() == [
        0
    ]
    assert merkle.combine_many([], [], 4, algorithm="crc64nvme").dtype == np.uint64
    with pytest.raises(ValueError, match="differ in length"):
        merkle.combine_many([1, 2], [1], 4, algorithm="crc64nvme")
    with pytest.raises(ValueError, match="0..2\\*\\*64-1"):
        merkle.combine_many([-1], [1], 4, algorithm="crc64nvme")
    with pytest.raises(TypeError):
        merkle.combine_many([1.5], [1.0], 4, algorithm="crc64nvme")
    with pytest.raises(ValueError, match="one-dimensional"):
        merkle.combine_many([[1]], [[1]], 4, algorithm="crc64nvme")


def test_windows64_join_back_into_the_whole() -> None:
    data = random.Random(1).randbytes(64 * 1024)
    windows = merkle.checksum_windows(data, 4096, algorithm="crc64nvme")
    acc = np.array([windows[0]], dtype=np.uint64)
    for w in windows[1:]:
        acc = merkle.combine_many(acc, np.array([w], dtype=np.uint64), 4096, algorithm="crc64nvme")
    assert int(acc[0]) == merkle.crc64nvme(data)


def per_window(fn, data: bytes, bpc: int) -> list[int]:
    return [fn(data[i : i + bpc]) for i in range(0, len(data), bpc)]


PAIRS = list(itertools.permutations(sorted(ONE_SHOT), 2))
PAIR_CASES = [(length, bpc) for length in (0, 1, 100, 1000) for bpc in (1, 3, 512)] + [
    (length, bpc)
    for length in (16384 * 3 + 5, 100_000)
    # 40000 and 100_000 windows are longer than the pair's 16 KiB chunk: chained chunks
    for bpc in (3, 512, 16384, 40000, length, length + 1)
]


@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_pair_matches_each_alone(each_backend: str, a: str, b: str) -> None:
    rng = random.Random(f"{a}-{b}")
    for length, bpc in PAIR_CASES:
        data = rng.randbytes(length)
        got_a, got_b = merkle.checksum_windows(data, bpc, algorithm=(a, b))
        assert got_a.dtype == (np.uint64 if a == "crc64nvme" else np.uint32)
        assert got_b.dtype == (np.uint64 if b == "crc64nvme" else np.uint32)
        want_a = merkle.checksum_windows(data, bpc, algorithm=a).tolist()
        want_b = merkle.checksum_windows(data, bpc, algorithm=b).tolist()
        assert got_a.tolist() == want_a and got_b.tolist() == want_b, (length, bpc)
        if bpc >= 512:  # the windows themselves against one-shots (small windows: test_core_bulk)
            assert want_a == per_window(ONE_SHOT[a], data, bpc), (length, bpc)
            assert want_b == per_window(ONE_SHOT[b], data, bpc), (length, bpc)


# Rest lengths after whole blocks: 16 KiB windows are one 16 KiB block (zmm, hot) or two 8 KiB
# blocks (the other fused kernels), then every rest 0..263 (the rest's 256-byte steps and tails);
# 24 KiB and 32 KiB: three and two blocks.
PAIR_REST_LENGTHS = [
    *range(16384, 16384 + 264),
    *range(24576 - 3, 24576 + 5),
    *range(32768 - 3, 32768 + 5),
]
# crcm_windows_pair takes the hot fused kernels for buffers of at most this many bytes
PAIR_HOT_MAX = 4 << 20


def test_pair_rest_lengths_and_alignments(each_backend: str) -> None:
    """One window (a buffer within PAIR_HOT_MAX: the hot fused kernels) of whole blocks plus every
    rest length 0..263 at four alignments: the blocks, the rest's 256-byte steps and the tails
    all meet."""
    rng = random.Random("pair-rest")
    raw = rng.randbytes(32768 + 300)
    for alignment in (0, 1, 8, 63):
        for n in PAIR_REST_LENGTHS:
            data = memoryview(raw)[alignment : alignment + n]
            got_c, got_n = merkle.checksum_windows(data, n, algorithm=("crc32c", "crc64nvme"))
            assert (int(got_c[0]), int(got_n[0])) == (
                merkle.crc32c(data),
                merkle.crc64nvme(data),
            ), (alignment, n)


def test_pair_streaming_kernels_rest_lengths(each_backend: str) -> None:
    """A buffer longer than PAIR_HOT_MAX takes the streaming fused kernels: its windows of the same
    lengths as above (and the short last one) against the single CRCs' windows, at two
    alignments; and the buffers of exactly PAIR_HOT_MAX and one byte more (the two paths)."""
    rng = random.Random("pair-stream-rest")
    raw = rng.randbytes(PAIR_HOT_MAX + 16384 + 64)
    pair = ("crc32c", "crc64nvme")
    for alignment in (0, 63):
        data = memoryview(raw)[alignment : alignment + PAIR_HOT_MAX + 16384]
        for n in PAIR_REST_LENGTHS[::3] + [PAIR_REST_LENGTHS[-1]]:
            got_c, got_n = merkle.checksum_windows(data, n, algorithm=pair)
            for got, alg in ((got_c, "crc32c"), (got_n, "crc64nvme")):
                want = merkle.checksum_windows(data, n, algorithm=alg)
                assert got.tolist() == want.tolist(), (alignment, n, alg)
    for length in (PAIR_HOT_MAX, PAIR_HOT_MAX + 1):
        data = memoryview(raw)[:length]
        got_c, got_n = merkle.checksum_windows(data, 16384 + 5, algorithm=pair)
        assert (
            got_c.tolist() == merkle.checksum_windows(data, 16384 + 5, algorithm="crc32c").tolist()
        ), length
        assert (
            got_n.tolist()
            == merkle.checksum_windows(data, 16384 + 5, algorithm="crc64nvme").tolist()
        ), length


def test_pair_out_tuple_and_errors() -> None:
    data = b"x" * 33
    out = (np.zeros(3, np.uint32), np.zeros(3, np.uint64))
    got = merkle.checksum_windows(data, 16, algorithm=("crc32c", "crc64nvme"), out=out)
    assert got[0] is out[0] and got[1] is out[1]
    assert out[0].tolist() == per_window(merkle.crc32c, data, 16)
    assert out[1].tolist() == per_window(merkle.crc64nvme, data, 16)
    assert merkle.checksum_windows(b"", 16, algorithm=("crc32", "crc64nvme"))[1].shape == (0,)
    with pytest.raises(ValueError, match="twice"):
        merkle.checksum_windows(data, 16, algorithm=("crc32c", "CRC32C"))
    with pytest.raises(ValueError, match="two algorithms"):
        merkle.checksum_windows(data, 16, algorithm=("crc32c", "crc32", "crc64nvme"))
    with pytest.raises(ValueError, match="unknown algorithm"):
        merkle.checksum_windows(data, 16, algorithm=("crc32c", "md5"))
    with pytest.raises(TypeError, match="tuple of two arrays"):
        merkle.checksum_windows(data, 16, algorithm=("crc32c", "crc64nvme"), out=out[0])
    with pytest.raises(ValueError, match="uint64"):
        merkle.checksum_windows(data, 16, algorithm=("crc32c", "crc64nvme"), out=(out[0], out[0]))
    same = np.zeros(3, np.uint32)
    with pytest.raises(ValueError, match="different arrays"):
        merkle.checksum_windows(data, 16, algorithm=("crc32c", "crc32"), out=(same, same))
    with pytest.raises(ValueError, match="uint64"):
        merkle.checksum_windows(data, 16, algorithm="crc64nvme", out=np.zeros(3, np.uint32))


def test_each64_fixed_size_and_chunked_arrow() -> None:
    fixed = [bytes([i]) * 8 for i in range(10)]
    arr = pa.array(fixed, pa.binary(8))
    got = merkle.checksum_each(arr[3:7], algorithm="crc64nvme")
    assert got.dtype == np.uint64 and got.tolist() == [merkle.crc64nvme(v) for v in fixed[3:7]]
    chunked = pa.chunked_array(
        [pa.array([b"a", None], pa.binary()), pa.array([b"123456789"], pa.binary())]
    )
    assert merkle.checksum_each(chunked, algorithm="crc64nvme").tolist() == [
        merkle.crc64nvme(b"a"),
        0,
        CHECK,
    ]
    large = pa.array([b"123456789", b""], pa.large_binary())
    assert merkle.checksum_each(large, algorithm="crc64nvme").tolist() == [CHECK, 0]
    offsets = pa.py_buffer(np.array([0, 5, 2], dtype=np.int32).tobytes())
    bad = pa.Array.from_buffers(pa.binary(), 2, [None, offsets, pa.py_buffer(b"abcdef")])
    with pytest.raises(ValueError, match="malformed"):
        merkle.checksum_each(bad, algorithm="crc64nvme")


def _s3(value: int) -> str:
    """botocore's x-amz-checksum-crc64nvme: base64 of the 8-byte big-endian value."""
    return base64.b64encode(value.to_bytes(8, "big")).decode()


def test_hash_class() -> None:
    h = merkle.CRC64NVME(b"1234")
    h.update(b"56789")
    assert h.intdigest() == CHECK
    assert h.digest() == CHECK.to_bytes(8, "big") and len(h.digest()) == 8
    assert h.hexdigest() == "ae8b14860a799888"
    assert (h.name, h.digest_size, h.block_size) == ("crc64nvme", 8, 1)
    assert base64.b64encode(h.digest()).decode() == "rosUhgp5mIg="
    assert base64.b64encode(merkle.CRC64NVME().digest()).decode() == "AAAAAAAAAAA="  # empty object
    twin = h.copy()
    twin.update(b"more")
    assert type(twin) is merkle.CRC64NVME
    assert h.intdigest() == CHECK and twin.intdigest() == merkle.crc64nvme(b"123456789more")
    assert merkle.CRC64NVME(b"56789", value=merkle.crc64nvme(b"1234")).intdigest() == CHECK
    h.reset()
    assert h.intdigest() == 0 and h.hexdigest() == "0" * 16
    assert "CRC64NVME" in repr(h)
    big = random.Random(3).randbytes(200_000)  # above the GIL-release threshold
    h.update(big)
    assert h.intdigest() == merkle.crc64nvme(big)
    if hasattr(hashlib, "file_digest"):  # Python >= 3.11
        got = hashlib.file_digest(io.BytesIO(big), merkle.CRC64NVME).intdigest()
        assert got == merkle.crc64nvme(big)
    streamed = merkle.CRC64NVME()
    assert b"".join(streamed.consume(io.BytesIO(big), 7000)) == big
    assert streamed.intdigest() == merkle.crc64nvme(big)


@needs_awscrt
def test_digest_is_botocores_header_value() -> None:
    for n in (0, 1, 5000):
        data = random.Random(n).randbytes(n)
        assert base64.b64encode(merkle.CRC64NVME(data).digest()).decode() == _s3(
            awscrt_checksums.crc64nvme(data)
        )


def test_hash_threads_share_one_object() -> None:
    """Every thread feeds the same chunk: any interleaving gives one answer; a lost or torn
    update of the 64-bit state would not."""
    chunk = random.Random(4).randbytes(300)
    h = merkle.CRC64NVME()
    barrier = threading.Barrier(4)

    def work() -> None:
        barrier.wait()
        for _ in range(200):
            h.update(chunk)

    pool = [threading.Thread(target=work) for _ in range(4)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert h.intdigest() == merkle.crc64nvme(chunk * 800)


# awscrt's own suite (tests/test_checksums.py of aws-crt-python), its CRC-64/NVME cases as a
# user switching from awscrt would run them: the published values, pinned here as numbers.
AWSCRT_VECTORS = [
    (bytes(32), 0xCF3473434D4ECF3B),
    (bytes(range(32)), 0xB9D9D4A8492CBD7F),
]


@pytest.mark.parametrize(("data", "expected"), AWSCRT_VECTORS)
def test_awscrt_suite_vectors(each_backend: str, data: bytes, expected: int) -> None:
    assert merkle.crc64nvme(data) == expected
    crc = 0
    for i in range(len(data)):  # awscrt's "iterated" form: one byte at a time, chained
        crc = merkle.crc64nvme(data[i : i + 1], crc)
    assert crc == expected


def test_awscrt_suite_large_and_huge_buffers() -> None:
    import mmap

    large = bytes(25 * 2**20)
    assert merkle.crc64nvme(large) == 0x5B6F5045463CA45E
    assert merkle.crc32c(large) == 0xFB5B991D  # the suite's CRC-32C twins
    # 2**32 + 4 zero bytes: lengths past 32 bits. An anonymous mapping reads as zeros without
    # committing memory (untouched pages map the shared zero page).
    with mmap.mmap(-1, 2**32 + 4, prot=mmap.PROT_READ) as huge:
        assert merkle.crc64nvme(huge) == 0x2645C28052B1FBB0
        assert merkle.crc32c(huge) == 0x572A7C8A


@pytest.mark.parametrize(
    "parts",
    [
        (b"Hello, ", b"World!"),
        (b"Hello, World!", b""),
        (b"The quick ", b"brown fox ", b"jumps over the lazy dog"),
        (bytes(1024), bytes(range(256)) * 4),
    ],
)
def test_awscrt_suite_combine(parts) -> None:
    crc = merkle.crc64nvme(parts[0])
    for p in parts[1:]:
        crc = merkle.crc64nvme_combine(crc, merkle.crc64nvme(p), len(p))
    assert crc == merkle.crc64nvme(b"".join(parts))


def test_pair_as_a_list_is_the_pair_as_a_tuple() -> None:
    """algorithm=[a, b] (a list: what a JSON config or a caller's list gives) is accepted as the
    tuple (a, b) is, and out too (it was refused: 'algorithm must be a str, not list')."""
    data = bytes(range(256)) * 3
    want = merkle.checksum_windows(data, 100, algorithm=("crc32c", "crc64nvme"))
    got = merkle.checksum_windows(data, 100, algorithm=["crc32c", "crc64nvme"])
    assert isinstance(got, tuple) and [g.tolist() for g in got] == [w.tolist() for w in want]
    out = [np.zeros(len(want[0]), np.uint32), np.zeros(len(want[0]), np.uint64)]
    got = merkle.checksum_windows(data, 100, algorithm=["crc32c", "crc64nvme"], out=out)
    assert got[0] is out[0] and got[1] is out[1] and out[1].tolist() == want[1].tolist()
    with pytest.raises(ValueError, match="twice"):
        merkle.checksum_windows(data, 100, algorithm=["crc32", "crc32"])
    with pytest.raises(ValueError, match="two algorithms"):
        merkle.checksum_windows(data, 100, algorithm=["crc32c"])
