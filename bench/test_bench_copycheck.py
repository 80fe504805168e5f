"""The copy check's headline ratio (issue 27): proving a key's full-object CRC from its stored
window checksums (`compose_keys`, as the job runs it) against reading the key's bytes again to
checksum them (what `rclone check --download` or a client-side read does), both hot in memory
here (the most favourable case for the read: on disk or over a network it is far slower).
Interleaved round by round; the line is printed in the summary. Checks that both give the
same CRC; asserts no speed."""

from __future__ import annotations

import statistics
import time

import numpy as np
import pyarrow as pa
import pytest

import merkle

from conftest import SHORT, record_interleaved
from crc_rounds import header

MiB = 1 << 20
BPC = 16384
CHUNK = 4 * MiB


#: keys composed per call, as the job composes a pass of a partition (the call's fixed cost,
#: ~1 ms, is shared by them)
KEYS_PER_CALL = 64


def _compose_input(data: bytes, keys: int) -> pa.Table:
    """`keys` keys holding `data` each, as the compose step's rows (one per 4 MiB chunk)."""
    from merkle.copies.keycrcs import COMPOSE_SCHEMA

    windows = merkle.checksum_windows(data, BPC, algorithm="crc32c").astype(">u4")
    per_chunk = CHUNK // BPC
    n = len(data) // CHUNK
    w = windows.tobytes()
    chunks = [w[i * per_chunk * 4 : (i + 1) * per_chunk * 4] for i in range(n)]
    rows = n * keys
    return pa.table(
        {
            "key_id": [k for k in range(keys) for _ in range(n)],
            "seq": [0] * rows,
            "container": [1] * rows,
            "block": [k for k in range(keys) for _ in range(n)],
            "block_length": [len(data)] * rows,
            "block_status": [None] * rows,
            "offset": [i * CHUNK for _ in range(keys) for i in range(n)],
            "length": [CHUNK] * rows,
            "checksum_type": ["CRC32C"] * rows,
            "bytes_per_checksum": [BPC] * rows,
            "checksums": chunks * keys,
            "crc64nvme": [None] * rows,
            "crc32c": [None] * rows,
            "crc32": [None] * rows,
            "composite_algorithm": [None] * rows,
            "part_sizes": [None] * rows,
        },
        schema=COMPOSE_SCHEMA,
    )


def test_prove_from_windows_vs_read_again(request: pytest.FixtureRequest) -> None:
    from merkle.copies.keycrcs import compose_keys

    disabled = not request.config.option.benchmark_enable
    size = (16 if disabled else 256) * MiB  # one 256 MiB block: Ozone's default
    data = np.random.default_rng(27).integers(0, 256, size, dtype=np.uint8).tobytes()
    table = _compose_input(data, KEYS_PER_CALL)
    want = merkle.crc32c(data)
    got = {int.from_bytes(v, "big") for v in compose_keys(table)["crc32c"].to_pylist()}
    assert got == {want}
    if disabled:
        return
    rounds = 7 if SHORT else 15
    compose, read = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        compose_keys(table)
        t1 = time.perf_counter()
        merkle.crc32c(data)
        t2 = time.perf_counter()
        compose.append((t1 - t0) / KEYS_PER_CALL)
        read.append(t2 - t1)
    ratio = statistics.median(r / c for r, c in zip(read, compose))
    record_interleaved(
        request.config,
        header(rounds),
        f"copy check, a 256 MiB key's CRC-32C: from its 16,384 stored window "
        f"checksums {statistics.median(compose) * 1e6:.0f} us ({KEYS_PER_CALL} "
        f"keys per call), reading its bytes "
        f"again (hot, in memory) {statistics.median(read) * 1e6:.0f} us: "
        f"{ratio:.0f}x",
    )
