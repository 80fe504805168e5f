"""BookKeeper stored entries verified per second: merkle.bookkeeper_entries (one call for a batch)
vs a Python DigestManager-equivalent loop (google_crc32c / zlib per entry: the floor) and vs
checksum_windows over the same bytes (one CRC-32C per entry record: the speed of the kernel
alone); hot (a buffer inside the L3, as from the page cache) and cold (a buffer of
BENCH_COLD_BYTES, past the L3), the cold cases also against a plain read of the buffer.

Each case is a buffer of back-to-back entry records (4-byte size word, then the entry) with a
right digest, verified in full; the table's ns/elem is ns per entry (entries/s = 1e9 / ns). The
issue's goals: >= 1 million 1 KiB entries/s on one core, and from 64 KiB payloads up within 1.3x
of checksum_windows over the same bytes. Each benchmark asserts its answers; none asserts speed.
"""

from __future__ import annotations

import random
import struct
import zlib
from typing import Any, Callable, Dict, Tuple

import numpy as np
import pytest

import merkle
from merkle.cli import benchmarking as bm

from conftest import SHORT, cold_bytes

KiB, MiB = bm.KiB, bm.MiB

PAYLOADS = [100, KiB, 64 * KiB, MiB]
COLD_PAYLOADS = [KiB, 64 * KiB]
READ = "plain read (limit)"
#: bytes of entries per buffer: past L2, inside a typical L3 (the way entries stream from a
#: page-cached entry log)
BUFFER_BYTES = (4 if SHORT else 16) * MiB
WINDOWS = "checksum_windows"
CRC32_PAYLOAD = KiB

try:
    import google_crc32c
except ImportError:  # pragma: no cover - the peer is optional
    google_crc32c = None


def _digest_field(digest: str, header: bytes, payload: bytes) -> bytes:
    if digest == "crc32":
        return zlib.crc32(header + payload).to_bytes(8, "big")
    return merkle.crc32c(header + payload).to_bytes(4, "big")


def _entry_log(payload: int, digest: str) -> Tuple[bytes, np.ndarray, np.ndarray, int]:
    """Back-to-back records of entries with `payload`-byte payloads: (buffer, offsets, sizes,
    record size)."""
    n = max(8, BUFFER_BYTES // (payload + 40))
    rng = random.Random(payload)
    body = rng.randbytes(payload)
    parts = []
    for e in range(n):
        header = struct.pack(">qqqq", 1, e, e - 1, (e + 1) * payload)
        entry = header + _digest_field(digest, header, body) + body
        parts.append(struct.pack(">i", len(entry)) + entry)
    record = len(parts[0])
    offsets = np.arange(n, dtype=np.int64) * record + 4
    return b"".join(parts), offsets, np.full(n, record - 4, np.int64), record


def _python_loop(
    data: bytes, offsets: np.ndarray, sizes: np.ndarray, digest: str
) -> Callable[[], int]:
    """What a Python verifier does per entry, as DigestManager.verifyDigest: the digest of
    header || payload against the stored one, one entry at a time."""
    view = memoryview(data)
    spans = list(zip(offsets.tolist(), sizes.tolist()))
    if digest == "crc32":

        def run_zlib() -> int:
            ok = 0
            for off, size in spans:
                c = zlib.crc32(view[off + 40 : off + size], zlib.crc32(view[off : off + 32]))
                ok += c == int.from_bytes(view[off + 32 : off + 40], "big")
            return ok

        return run_zlib
    extend, value = google_crc32c.extend, google_crc32c.value

    def run() -> int:
        # google_crc32c's C functions take bytes only (no memoryview): slices copy, as reading
        # each entry from a file would
        ok = 0
        for off, size in spans:
            c = extend(value(data[off : off + 32]), data[off + 36 : off + size])
            ok += c == int.from_bytes(data[off + 32 : off + 36], "big")
        return ok

    return run


def _impls(digest: str) -> Dict[str, Any]:
    impls: Dict[str, Any] = {bm.OURS: None, WINDOWS: None}
    if digest == "crc32":
        impls["python loop (zlib)"] = None
    elif google_crc32c is not None:
        impls["python loop (google_crc32c)"] = None
    return impls


def _run(
    name: str, data: bytes, offsets: np.ndarray, sizes: np.ndarray, record: int, digest: str
) -> Tuple[Callable[[], Any], Callable[[Any], bool]]:
    n = offsets.size
    if name == bm.OURS:

        def ours() -> Any:
            return merkle.bookkeeper_entries(data, offsets, sizes, digest)

        return ours, lambda r: bool((r["status"] == 0).all())
    if name == WINDOWS:

        def windows() -> Any:
            return merkle.checksum_windows(data, record)

        return windows, lambda r: r.shape[0] == n
    return _python_loop(data, offsets, sizes, digest), lambda r: r == n


def _entries_per_second(bench: Any) -> None:
    """The issue's unit next to ns/entry in the saved JSON (--benchmark-json)."""
    info = bench.benchmark.extra_info
    if info.get("ns_per_element"):
        info["entries_per_second"] = round(1e9 / info["ns_per_element"])


@pytest.fixture(
    scope="module", params=PAYLOADS, ids=[bm.format_size(p).replace(" ", "") for p in PAYLOADS]
)
def crc32c_log(request: pytest.FixtureRequest) -> Tuple[int, bytes, np.ndarray, np.ndarray, int]:
    return (request.param, *_entry_log(request.param, "crc32c"))


@pytest.mark.parametrize("impl", list(_impls("crc32c")))
def test_crc32c_entries(bench: Any, impl: str, crc32c_log: Any) -> None:
    payload, data, offsets, sizes, record = crc32c_log
    run, right = _run(impl, data, offsets, sizes, record, "crc32c")
    got = bench.measure(
        run,
        case=f"bookkeeper crc32c entries, {bm.format_size(payload)} payload, ns per entry",
        impl=impl,
        per=offsets.size,
        unit="ns/elem",
    )
    _entries_per_second(bench)
    assert right(got), impl


@pytest.fixture(scope="module")
def crc32_log() -> Tuple[bytes, np.ndarray, np.ndarray, int]:
    return _entry_log(CRC32_PAYLOAD, "crc32")


@pytest.mark.parametrize("impl", [bm.OURS, "python loop (zlib)"])
def test_crc32_entries(bench: Any, impl: str, crc32_log: Any) -> None:
    data, offsets, sizes, record = crc32_log
    run, right = _run(impl, data, offsets, sizes, record, "crc32")
    got = bench.measure(
        run,
        case=f"bookkeeper crc32 entries, {bm.format_size(CRC32_PAYLOAD)} payload, ns per entry",
        impl=impl,
        per=offsets.size,
        unit="ns/elem",
    )
    _entries_per_second(bench)
    assert right(got), impl


@pytest.fixture(
    scope="module",
    params=COLD_PAYLOADS,
    ids=[bm.format_size(p).replace(" ", "") for p in COLD_PAYLOADS],
)
def cold_log(request: pytest.FixtureRequest) -> Tuple[int, bytes, np.ndarray, np.ndarray, int]:
    """A buffer past the last-level cache: one 4 MiB block of records repeated (speed does not
    depend on the bytes; every copy still carries right digests)."""
    block, offsets, sizes, record = _entry_log(request.param, "crc32c")
    repeats = max(1, cold_bytes() // len(block))
    n = offsets.size * repeats
    all_offsets = np.arange(n, dtype=np.int64) * record + 4
    return (request.param, block * repeats, all_offsets, np.full(n, record - 4, np.int64), record)


@pytest.mark.parametrize("impl", [bm.OURS, WINDOWS, READ])
def test_crc32c_entries_cold(bench: Any, impl: str, cold_log: Any) -> None:
    payload, data, offsets, sizes, record = cold_log
    if impl == READ:
        from merkle._native import read_probe

        run, right = (lambda: read_probe(data)), (lambda r: isinstance(r, int))
    else:
        run, right = _run(impl, data, offsets, sizes, record, "crc32c")
    got = bench.measure(
        run,
        case=f"bookkeeper crc32c entries, {bm.format_size(payload)} "
        f"payload, cold {len(data) / MiB:.0f} MiB, ns per entry",
        impl=impl,
        per=offsets.size,
        unit="ns/elem",
        cold=True,
    )
    _entries_per_second(bench)
    assert right(got), impl


#: the whole scan of one bookie (scan_bookies: its index read, every entry verified, every
#: ledger judged), from the page cache, against reading the same log file (what any scan
#: must do at least); entries per second of the scan is the issue's end-to-end figure
SCAN_PAYLOADS = [KiB, 64 * KiB]
SCAN = "scan_bookies (index, verify, judge)"
LOG_READ = "read of the entry log (limit)"


@pytest.fixture(
    scope="module",
    params=SCAN_PAYLOADS,
    ids=[bm.format_size(p).replace(" ", "") for p in SCAN_PAYLOADS],
)
def rate_bookie(request: pytest.FixtureRequest, tmp_path_factory: Any) -> Tuple[int, Any, Any]:
    from merkle.replica.bookkeeper.generate import DUMPS_DIR
    from merkle.replica.bookkeeper.metadata import load_ledger_metadata
    from spark_udfs.rehearsal.bookkeeper import write_rate_bookies

    root = tmp_path_factory.mktemp(f"bookie-{request.param}")
    log_bytes = (32 if SHORT else 256) * MiB
    write_rate_bookies(root, 1, str(root / "bookie-1" / "ledgers-{volume}"), 1, log_bytes=log_bytes,
                       payload=request.param)  # fmt: skip
    bookie = root / "bookie-1"
    return request.param, bookie, load_ledger_metadata(str(root / DUMPS_DIR))


@pytest.mark.parametrize("impl", [SCAN, LOG_READ])
def test_bookie_scan_entries(bench: Any, impl: str, rate_bookie: Any) -> None:
    import os

    from merkle.replica.bookkeeper.scan import scan_bookies

    payload, bookie, metadata = rate_bookie
    (log,) = sorted(bookie.glob("*/current/*.log"))
    entries = len(scan_bookies([str(bookie)], metadata).copies)
    if impl == SCAN:

        def run() -> Any:
            return scan_bookies([str(bookie)], metadata)

        def right(r: Any) -> bool:
            return r.findings == [] and r.copies.count("good") == entries

    else:

        def run() -> Any:
            fd = os.open(log, os.O_RDONLY)
            try:
                buf = bytearray(16 * MiB)
                total = 0
                while True:
                    n = os.readv(fd, [buf])
                    if not n:
                        return total
                    total += n
            finally:
                os.close(fd)

        def right(r: Any) -> bool:
            return r == log.stat().st_size

    got = bench.measure(
        run,
        case=f"bookie scan, {bm.format_size(payload)} entries from the page cache, ns per entry",
        impl=impl,
        per=entries,
        unit="ns/elem",
        cold=True,  # whole scans of a quarter GiB: a few rounds of one call each
        warmup=1,
    )
    _entries_per_second(bench)
    assert entries > 0 and right(got), impl
