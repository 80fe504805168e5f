"""merkle.bookkeeper_entries: BookKeeper stored entries verified in bulk, on every backend, against
plain Python references (bytewise CRCs, zlib, hashlib/hmac), BookKeeper's own golden bookie
directories, and hostile offsets/sizes."""

from __future__ import annotations

import ctypes
import hashlib
import hmac
import json
import mmap
import random
import struct
import zlib
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

import merkle
from merkle import _native

from reference import crc, crc_at_lengths, crc_prefixes

#: BookKeeper's own golden bookie directories (ledgers.json, fault.json and the entry logs,
#: copied unchanged from the shared golden set: README.md there says how they were made)
GOLDEN = Path(__file__).resolve().parent / "data" / "bookkeeper-golden"
DIGESTS = ("crc32c", "crc32", "hmac-sha1", "dummy")
DIGEST_SIZE = {"crc32c": 4, "crc32": 8, "hmac-sha1": 20, "dummy": 0}
OK, SHORT, BOUNDS, MISMATCH, UNVERIFIED = 0, 1, 2, 3, 4
MAX_LEN = 4160
HMAC_KEY = hashlib.sha1(b"mac" + b"pw").digest()  # MacDigestManager: SHA-1("mac" || password)


def _header(ledger: int, entry: int, lac: int, length: int) -> bytes:
    return struct.pack(">qqqq", ledger, entry, lac, length)


def _digest_field(digest: str, value: int) -> bytes:
    """A digest as BookKeeper stores it, from its value (hmac: the 20 bytes themselves)."""
    if digest == "crc32c":
        return value.to_bytes(4, "big")
    if digest == "crc32":
        return value.to_bytes(8, "big")  # writeLong(CRC32.getValue()): 4 zero bytes first
    return b""


def _entry(digest: str, header: bytes, payload: bytes) -> bytes:
    """A stored entry with its right digest, computed by the references (never by merkle)."""
    if digest == "crc32c":
        field = _digest_field(digest, crc("crc32c", header + payload))
    elif digest == "crc32":
        field = _digest_field(digest, zlib.crc32(header + payload))
    elif digest == "hmac-sha1":
        field = hmac.new(HMAC_KEY, header + payload, hashlib.sha1).digest()
    else:
        field = b""
    return header + field + payload


def _place(entries: List[bytes], alignment: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One buffer holding every entry, each starting `alignment` bytes past a 64-byte boundary
    (the 4-byte size word before it, as in an entry log), and their offsets and sizes."""
    offsets, pos, parts = [], 0, []
    for e in entries:
        start = -(-(pos + 4 - alignment) // 64) * 64 + alignment  # first such start with room
        parts.append(bytes(start - 4 - pos) + struct.pack(">i", len(e)) + e)
        offsets.append(start)
        pos = start + len(e)
    raw = np.frombuffer(b"".join(parts) + bytes(128), dtype=np.uint8)
    aligned = np.empty(raw.size + 64, dtype=np.uint8)
    skip = (-aligned.ctypes.data) % 64
    aligned[skip : skip + raw.size] = raw  # buffer offset 0 is 64-byte aligned
    return (
        aligned[skip : skip + raw.size],
        np.array(offsets, np.int64),
        np.array([len(e) for e in entries], np.int64),
    )


def _check(result: Dict[str, np.ndarray], expected: Dict[str, List[int]], where: str) -> None:
    for column, want in expected.items():
        got = result[column].tolist()
        if got != want:
            bad = next(i for i in range(len(want)) if got[i] != want[i])
            pytest.fail(f"{column} wrong {where}, entry {bad}: {got[bad]:#x} != {want[bad]:#x}")


def _assert_native_backend(name: str) -> None:
    # the bulk kernel lives in _native's copy of the C core: it must follow the switch too
    assert _native._core_backend() == name


# --- every length and alignment, every digest type, every backend ---------------------------

SWEEP_ALIGNMENTS = (0, 1, 13, 63)
SWEEP_LENGTHS = (0, 1, 15, 16, 100, 1023, 1024, 4160)


@pytest.mark.parametrize("digest", DIGESTS)
def test_every_length(each_backend: str, digest: str) -> None:
    """Payloads of 0..4160 bytes (one call each alignment) with the same header, so one bytewise
    pass over header || payload gives every digest; payload CRC-32C, CRC-32 and CRC-64/NVME
    columns against bytewise CRCs as well."""
    _assert_native_backend(each_backend)
    rng = random.Random(f"bk-{digest}-lengths")
    header = _header(7, 3, 2, 9000)
    source = rng.randbytes(MAX_LEN)
    entries = [_entry(digest, header, source[:n]) for n in range(MAX_LEN + 1)]
    digests = (
        [int.from_bytes(e[32 : 32 + DIGEST_SIZE[digest]], "big") for e in entries]
        if digest in ("crc32c", "crc32")
        else [0] * (MAX_LEN + 1)
    )
    expected = {
        "status": [UNVERIFIED if digest == "hmac-sha1" else OK] * (MAX_LEN + 1),
        "ledger_id": [7] * (MAX_LEN + 1),
        "entry_id": [3] * (MAX_LEN + 1),
        "last_add_confirmed": [2] * (MAX_LEN + 1),
        "length": [9000] * (MAX_LEN + 1),
        "stored_digest": digests,
        "computed_digest": digests,
        "payload_crc32c": crc_prefixes("crc32c", source),
        "payload_crc32": crc_prefixes("crc32", source),
        "payload_crc64nvme": crc_prefixes("crc64nvme", source),
    }
    for alignment in SWEEP_ALIGNMENTS:
        data, offsets, sizes = _place(entries, alignment)
        result = merkle.bookkeeper_entries(
            data, offsets, sizes, digest, also=("crc32", "crc64nvme")
        )
        _check(result, expected, f"at alignment {alignment}")
        # without extra columns the payload takes the CRC-32C-only path
        plain = merkle.bookkeeper_entries(data, offsets, sizes, digest)
        assert "payload_crc32" not in plain and "payload_crc64nvme" not in plain
        _check(
            plain,
            {k: expected[k] for k in ("status", "computed_digest", "payload_crc32c")},
            f"without also, at alignment {alignment}",
        )


@pytest.mark.parametrize("digest", DIGESTS)
def test_every_alignment(each_backend: str, digest: str) -> None:
    """Entries starting at every alignment 0..63 for a few payload lengths, with random
    headers, against bytewise references."""
    _assert_native_backend(each_backend)
    rng = random.Random(f"bk-{digest}-alignments")
    for n in SWEEP_LENGTHS:
        for alignment in range(64):
            hdr = [rng.getrandbits(63) - (1 << 62) for _ in range(4)]
            payload = rng.randbytes(n)
            entry = _entry(digest, _header(*hdr), payload)
            data, offsets, sizes = _place([entry], alignment)
            r = merkle.bookkeeper_entries(data, offsets, sizes, digest, also=["crc32"])
            where = f"{digest} length {n} alignment {alignment}"
            assert [
                int(r[k][0]) for k in ("ledger_id", "entry_id", "last_add_confirmed", "length")
            ] == hdr, where
            assert int(r["payload_crc32c"][0]) == crc("crc32c", payload), where
            assert int(r["payload_crc32"][0]) == zlib.crc32(payload), where
            if digest in ("crc32c", "crc32"):
                stored = int.from_bytes(entry[32 : 32 + DIGEST_SIZE[digest]], "big")
                assert int(r["stored_digest"][0]) == stored, where
                assert int(r["computed_digest"][0]) == stored, where
            assert int(r["status"][0]) == (UNVERIFIED if digest == "hmac-sha1" else OK), where


LARGE_LENGTHS = (16383, 16384, 16385, 3 * 16384 + 5, 200_000)
LARGE_SOURCE = random.Random(11).randbytes(max(LARGE_LENGTHS))


@pytest.mark.parametrize("digest", ("crc32c", "crc32"))
def test_large_payloads(each_backend: str, digest: str) -> None:
    """Payloads past the 16 KiB chunk the extra CRCs are interleaved in."""
    _assert_native_backend(each_backend)
    header = _header(1, 2, 1, 300_000)
    entries = [_entry(digest, header, LARGE_SOURCE[:n]) for n in LARGE_LENGTHS]
    data, offsets, sizes = _place(entries, 5)
    r = merkle.bookkeeper_entries(data, offsets, sizes, digest, also=("crc64nvme", "crc32"))
    assert r["status"].tolist() == [OK] * len(LARGE_LENGTHS)
    for alg in ("crc32c", "crc32", "crc64nvme"):
        want = crc_at_lengths(alg, LARGE_SOURCE, LARGE_LENGTHS)
        assert r[f"payload_{alg}"].tolist() == [want[n] for n in LARGE_LENGTHS], alg


HUGE = (1 << 24) + 4099  # past the x^(8n) tables (n < 2**24): the digest's combine loop


@pytest.mark.parametrize("digest", ("crc32c", "crc32"))
def test_payload_past_the_power_tables(each_backend: str, digest: str) -> None:
    """A 16 MiB + 4099 B payload: the digest is combined the long way, still right (zlib for
    CRC-32; the one-shot CRC-32C, a different kernel path, for CRC-32C)."""
    _assert_native_backend(each_backend)
    payload = random.Random(23).randbytes(HUGE)
    header = _header(6, 1, 0, HUGE)
    value = (
        zlib.crc32(header + payload)
        if digest == "crc32"
        else merkle.crc32c(payload, merkle.crc32c(header))
    )
    entry = header + _digest_field(digest, value) + payload
    r = merkle.bookkeeper_entries(entry, [0, 0], [len(entry), len(entry) - 1], digest)
    assert r["status"].tolist() == [OK, MISMATCH]
    assert int(r["computed_digest"][0]) == value


@pytest.mark.parametrize("digest", ("crc32c", "crc32"))
def test_every_corrupted_byte_is_a_mismatch(each_backend: str, digest: str) -> None:
    """One bit flipped anywhere in header, digest or payload: status 3 (a CRC catches every
    single-bit error), while the untouched copy next to it stays 0."""
    _assert_native_backend(each_backend)
    entry = _entry(digest, _header(4, 5, 3, 777), random.Random(3).randbytes(200))
    bad = []
    for i in range(len(entry)):
        flipped = bytearray(entry)
        flipped[i] ^= 1 << (i % 8)
        bad.append(bytes(flipped))
    data, offsets, sizes = _place([entry, *bad], 0)
    status = merkle.bookkeeper_entries(data, offsets, sizes, digest)["status"].tolist()
    assert status == [OK] + [MISMATCH] * len(bad)


def test_crc32_digest_upper_bytes_must_be_zero() -> None:
    """BookKeeper compares the whole 8-byte CRC32 field: a right CRC-32 behind non-zero upper
    bytes is a mismatch, and stored_digest shows all 8 bytes."""
    entry = bytearray(_entry("crc32", _header(1, 1, 0, 10), b"0123456789"))
    entry[32] = 0x80
    data, offsets, sizes = _place([bytes(entry)], 0)
    r = merkle.bookkeeper_entries(data, offsets, sizes, "crc32")
    assert int(r["status"][0]) == MISMATCH
    assert int(r["stored_digest"][0]) >> 56 == 0x80
    assert int(r["computed_digest"][0]) == zlib.crc32(bytes(entry[:32]) + b"0123456789")


@pytest.mark.parametrize("digest", DIGESTS)
def test_too_short_for_header_and_digest(digest: str) -> None:
    """Sizes below 32 + n: status 1, no digest; the header still read once there are 32 bytes."""
    full = _entry(digest, _header(9, 8, 7, 6), b"payload")
    sizes = list(range(0, 32 + DIGEST_SIZE[digest]))
    data = np.frombuffer(full, np.uint8)
    r = merkle.bookkeeper_entries(data, [0] * len(sizes), sizes, digest)
    assert r["status"].tolist() == [SHORT] * len(sizes)
    assert r["stored_digest"].tolist() == [0] * len(sizes)
    assert r["payload_crc32c"].tolist() == [0] * len(sizes)
    assert r["ledger_id"].tolist() == [0 if s < 32 else 9 for s in sizes]
    # exactly 32 + n: an empty payload, verified
    exact = merkle.bookkeeper_entries(data, [0], [32 + DIGEST_SIZE[digest]], digest)
    assert int(exact["status"][0]) != SHORT


# --- hostile offsets and sizes ----------------------------------------------------------------

I64_MAX = (1 << 63) - 1


def _guarded(size: int) -> Tuple[Any, np.ndarray]:
    """`size` bytes that end right before an inaccessible page: a read past them would fault."""
    page = mmap.PAGESIZE
    region = mmap.mmap(-1, -(-size // page) * page + page)
    base = ctypes.addressof(ctypes.c_char.from_buffer(region))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    end = base + len(region) - page
    if libc.mprotect(ctypes.c_void_p(end), page, 0) != 0:  # PROT_NONE
        pytest.skip("mprotect failed")
    view = np.frombuffer(region, np.uint8)[end - base - size : end - base]
    return region, view


def test_hostile_offsets_and_sizes_are_status_2(each_backend: str) -> None:
    """Negative, past-the-end and overflowing offsets/sizes: status 2, all else 0, nothing read
    (the buffer ends at an inaccessible page); entries that end exactly at the end verify."""
    _assert_native_backend(each_backend)
    entry = _entry("crc32c", _header(1, 2, 1, 50), random.Random(5).randbytes(50))
    region, data = _guarded(len(entry) + 100)
    start = 100
    data[start:] = np.frombuffer(entry, np.uint8)
    n = data.size
    hostile = [
        (-1, 10),
        (0, -1),
        (-4, 8),
        (n + 1, 0),
        (n, 1),
        (start, len(entry) + 1),
        (1, n),
        (I64_MAX, 1),
        (1, I64_MAX),
        (I64_MAX, I64_MAX),
        (-(1 << 63), 5),
        (start, -(1 << 63)),
        (n - 1, I64_MAX - n + 3),  # off + size wraps past 2**63
        (start, -start),
        (n, -1),
        (10, -5),  # off + size in bounds, size negative
    ]
    offsets = [o for o, _ in hostile] + [start, n, n - 10]
    sizes = [s for _, s in hostile] + [len(entry), 0, 10]
    r = merkle.bookkeeper_entries(data, offsets, sizes, "crc32c", also=("crc32", "crc64nvme"))
    assert r["status"].tolist() == [BOUNDS] * len(hostile) + [OK, SHORT, SHORT]
    for column, values in r.items():
        assert values[: len(hostile)].tolist() == [0] * len(hostile) or column == "status"
    # uint64 columns: values above 2**63 - 1 are out of any buffer too
    big = np.array([(1 << 64) - 1, 1 << 63, start], np.uint64)
    r = merkle.bookkeeper_entries(data, big, np.array([8, 8, len(entry)], np.uint64), "crc32c")
    assert r["status"].tolist() == [BOUNDS, BOUNDS, OK]
    del data
    region.close()


def test_empty_buffer_and_empty_batch() -> None:
    r = merkle.bookkeeper_entries(b"", [0, 0, -1], [0, 1, 0], "crc32")
    assert r["status"].tolist() == [SHORT, BOUNDS, BOUNDS]
    empty = merkle.bookkeeper_entries(b"abc", [], [], "dummy", also="crc64nvme")
    assert {k: (v.dtype.name, v.size) for k, v in empty.items()} == {
        "status": ("uint8", 0),
        "ledger_id": ("int64", 0),
        "entry_id": ("int64", 0),
        "last_add_confirmed": ("int64", 0),
        "length": ("int64", 0),
        "stored_digest": ("uint64", 0),
        "computed_digest": ("uint64", 0),
        "payload_crc32c": ("uint32", 0),
        "payload_crc64nvme": ("uint64", 0),
    }


def test_any_contiguous_buffer() -> None:
    """bytes, bytearray, memoryview, mmap, numpy of a wider dtype: the same answers."""
    entry = _entry("crc32c", _header(3, 1, 0, 40), bytes(range(40)) + bytes(4))
    with mmap.mmap(-1, len(entry)) as m:
        m[:] = entry
        for data in (
            entry,
            bytearray(entry),
            memoryview(entry),
            m,
            np.frombuffer(entry, np.uint32),
        ):
            r = merkle.bookkeeper_entries(data, [0], [len(entry)], "crc32c")
            assert int(r["status"][0]) == OK, type(data).__name__
        del data, r


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"digest": "md5"}, ValueError, "unknown digest 'md5'"),
        ({"digest": 4}, TypeError, "digest must be a str"),
        ({"also": ("crc16",)}, ValueError, "also 'crc16'"),
        ({"also": (1,)}, TypeError, "also must name algorithms"),
        ({"offsets": [0, 1]}, ValueError, "differ in length"),
        ({"offsets": [0.5]}, TypeError, "offsets must hold integers"),
        ({"sizes": [[1]]}, ValueError, "sizes must be one-dimensional"),
        ({"data": "text"}, TypeError, "Strings must be encoded"),
        ({"data": np.zeros((4, 4), np.uint8)[:, 1]}, ValueError, "C-contiguous"),
    ],
)
def test_bad_arguments(kwargs: Dict[str, Any], error: type, message: str) -> None:
    args: Dict[str, Any] = {"data": bytes(64), "offsets": [0], "sizes": [40], "digest": "crc32c"}
    args.update(kwargs)
    with pytest.raises(error, match=message):
        merkle.bookkeeper_entries(
            args.pop("data"), args.pop("offsets"), args.pop("sizes"), args.pop("digest"), **args
        )


def test_digest_names_are_case_insensitive() -> None:
    entry = _entry("crc32", _header(1, 1, 0, 3), b"abc")
    for name in ("CRC32", "Crc32"):
        assert merkle.bookkeeper_entries(entry, [0], [len(entry)], name)["status"][0] == OK


# --- BookKeeper's own golden bookie directories ------------------------------------------------

GOLDEN_DIGEST = {
    "CRC32C": "crc32c",
    "CRC32": "crc32",
    "MAC": "hmac-sha1",
    "HMAC": "hmac-sha1",
    "DUMMY": "dummy",
}


def _golden_copies() -> List[Dict[str, Any]]:
    ledgers = json.loads((GOLDEN / "ledgers.json").read_text())["ledgers"]
    copies = []
    for ledger in ledgers:
        for e in ledger["entries"]:
            for c in e["copies"]:
                copies.append({**c, "ledger": ledger, "entry": e})
    return copies


def test_golden_entries(each_backend: str) -> None:
    """Every stored entry copy BookKeeper wrote, read where ledgers.json says, one call per entry
    log file: the digests ledgers.json expects, status 0, but 3 for the one copy fault.json
    flipped a bit in; HMAC copies come out 4 and verify in Python with the documented recipe."""
    _assert_native_backend(each_backend)
    fault = json.loads((GOLDEN / "fault.json").read_text())
    by_file: Dict[Tuple[str, str], List[Dict[str, Any]]] = {}
    for c in _golden_copies():
        by_file.setdefault((c["file"], c["ledger"]["digestType"]), []).append(c)
    seen = {OK: 0, MISMATCH: 0, UNVERIFIED: 0}
    for (name, digest_type), copies in sorted(by_file.items()):
        digest = GOLDEN_DIGEST[digest_type]
        data = (GOLDEN / name).read_bytes()
        offsets = [c["entryOffset"] for c in copies]
        r = merkle.bookkeeper_entries(data, offsets, [c["entrySize"] for c in copies], digest)
        for i, c in enumerate(copies):
            e, off, size = c["entry"], c["entryOffset"], c["entrySize"]
            where = f"{name}@{off}"
            assert struct.unpack(">i", data[off - 4 : off])[0] == size, where
            assert int(r["ledger_id"][i]) == c["ledger"]["ledgerId"], where
            assert int(r["entry_id"][i]) == e["entryId"], where
            assert int(r["last_add_confirmed"][i]) == e["hdrLastAddConfirmed"], where
            assert int(r["length"][i]) == e["hdrLength"], where
            n = len(e["expectedDigestHex"]) // 2
            payload = data[off + 32 + n : off + size]
            assert len(payload) == e["payloadLength"], where
            assert int(r["payload_crc32c"][i]) == crc("crc32c", payload), where
            flipped = c["file"] == fault["file"] and off == fault["entryOffset_location"]
            status = int(r["status"][i])
            if digest == "hmac-sha1":
                key = hashlib.sha1(b"mac" + c["ledger"]["passwordUtf8"].encode()).digest()
                mac = hmac.new(key, data[off : off + 32] + data[off + 52 : off + size], "sha1")
                assert mac.hexdigest() == e["expectedDigestHex"] == data[off + 32 : off + 52].hex()
                assert status == UNVERIFIED, where
            else:
                assert f"{int(r['stored_digest'][i]):0{2 * n}x}" == e["expectedDigestHex"], where
                assert status == (MISMATCH if flipped else OK), where
            seen[status] += 1
    assert seen == {OK: 138, MISMATCH: 1, UNVERIFIED: 12}


def test_threads_share_one_buffer() -> None:
    """The loop runs without the GIL: threads verifying one shared buffer at once get exactly
    the single-threaded columns."""
    from concurrent.futures import ThreadPoolExecutor

    rng = random.Random(17)
    entries = [
        _entry("crc32c", _header(2, e, e - 1, 0), rng.randbytes(rng.randrange(3000)))
        for e in range(300)
    ]
    data, offsets, sizes = _place(entries, 3)
    want = merkle.bookkeeper_entries(data, offsets, sizes, "crc32c", also=("crc64nvme",))
    assert want["status"].tolist() == [OK] * len(entries)

    def work(_: int) -> bool:
        got = merkle.bookkeeper_entries(data, offsets, sizes, "crc32c", also=("crc64nvme",))
        return all(np.array_equal(got[k], want[k]) for k in want)

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(work, range(16)))
