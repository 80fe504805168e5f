"""The copy check's rates (issue 27), on this machine, one core each:

- compose: windows per second from a batch of keys' recorded window checksums to their
  full-object CRCs (merkle.copies.keycrcs.compose_keys: the columns as Spark hands them),
  against the native fold alone (`_native.fold_fixed`, the bound);
- compose + decide: keys per minute through compose_keys and verdicts.decide (the executors'
  whole work per key besides Spark's own), for keys of one 4 MiB chunk;
- the OM DB read: keys per second through merkle.copies.omdb (the driver's share), on an OM DB
  of generated keys.

    python bench/copycheck_rates.py [--keys N] [--rounds R]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Callable, List

import numpy as np
import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from merkle import _native  # noqa: E402
from merkle.copies.keycrcs import COMPOSE_SCHEMA, compose_keys  # noqa: E402
from merkle.copies.verdicts import SOURCE_COLUMNS, TARGET_COLUMNS, decide  # noqa: E402


def compose_table(
    nkeys: int, chunks_per_key: int, windows_per_chunk: int, bpc: int = 16384, seed: int = 1
) -> pa.Table:
    """COMPOSE_SCHEMA rows: nkeys keys of one block of chunks_per_key full chunks, CRC32C
    windows (random values: the fold's cost does not depend on them)."""
    n = nkeys * chunks_per_key
    rng = np.random.default_rng(seed)
    w = rng.integers(0, 2**32, n * windows_per_chunk, dtype=np.uint32).astype(">u4").tobytes()
    per = windows_per_chunk * 4
    offsets = pa.array(np.arange(0, n * per + 1, per, dtype=np.int32), pa.int32())
    checks = pa.Array.from_buffers(pa.binary(), n, [None, offsets.buffers()[1], pa.py_buffer(w)])
    key = np.repeat(np.arange(nkeys), chunks_per_key)
    clen = bpc * windows_per_chunk
    return pa.table(
        {
            "key_id": key,
            "seq": np.zeros(n, np.int32),
            "container": key,
            "block": key,
            "block_length": np.full(n, clen * chunks_per_key),
            "block_status": pa.nulls(n, pa.string()),
            "offset": np.tile(np.arange(chunks_per_key) * clen, nkeys),
            "length": np.full(n, clen),
            "checksum_type": pa.array(["CRC32C"] * n),
            "bytes_per_checksum": np.full(n, bpc),
            "checksums": checks,
            "crc64nvme": pa.nulls(n, pa.binary()),
            "crc32c": pa.nulls(n, pa.binary()),
            "crc32": pa.nulls(n, pa.binary()),
            "composite_algorithm": pa.nulls(n, pa.string()),
            "part_sizes": pa.nulls(n, pa.list_(pa.int64())),
        },
        schema=COMPOSE_SCHEMA,
    )


def joined_table(crcs: pa.Table) -> pa.Table:
    """Source side from compose_keys' output, the target the same CRC32C values (MATCH)."""
    n = crcs.num_rows
    names = pa.array([f"vol/bucket/key-{i}" for i in range(n)])
    size = pa.array(np.full(n, 1 << 22), pa.int64())
    cols = {c: pa.nulls(n) for c in SOURCE_COLUMNS + TARGET_COLUMNS}
    cols.update(
        {
            "key_id": crcs["key_id"],
            "name": names,
            "ozone_name": names,
            "size": size,
            "blocks": pa.array(np.ones(n, np.int32)),
            "crc32c": crcs["crc32c"],
            "crc32": crcs["crc32"],
            "crc64nvme": crcs["crc64nvme"],
            "recorded_type": crcs["recorded_type"],
            "unverified": crcs["unverified"],
            "ozone_note": crcs["ozone_note"],
            "composed": pa.array(np.ones(n, bool)),
            "t_name": names,
            "t_size": size,
            "t_crc32c": crcs["crc32c"],
            "t_requests": pa.array(np.ones(n, np.int32)),
            "t_bytes_read": pa.array(np.zeros(n, np.int64)),
        }
    )
    types = {
        "t_crc32": pa.binary(),
        "t_crc64nvme": pa.binary(),
        "t_composite_crc": pa.binary(),
        "t_parts": pa.int32(),
        "reason": pa.string(),
        "t_composite_algorithm": pa.string(),
        "t_part_sizes": pa.list_(pa.int64()),
        "composite": pa.binary(),
        "composite_note": pa.string(),
        "t_other": pa.string(),
        "t_error": pa.string(),
    }
    for c, ty in types.items():
        cols[c] = pa.nulls(n, ty)
    return pa.table(cols)


def best(fn: Callable[[], object], rounds: int) -> float:
    times: List[float] = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=200_000, help="small keys for keys/min")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")

    # compose: 1,000 keys of 64 chunks of 256 windows (256 MiB blocks of 4 MiB chunks)
    big = compose_table(1000, 64, 256)
    windows = 1000 * 64 * 256
    t = best(lambda: compose_keys(big), args.rounds)
    flat = np.random.default_rng(2).integers(0, 2**32, windows, dtype=np.uint32)
    tf = best(lambda: _native.fold_fixed(flat, 16384, algorithm="crc32c"), args.rounds)
    print(
        f"compose_keys, 256 MiB keys: {windows / t / 1e6:,.0f} M windows/s per core "
        f"(fold_fixed alone {windows / tf / 1e6:,.0f} M; 1 PB of 16 KiB windows = 61 G: "
        f"{61e9 / (windows / t) / 60:.1f} core-minutes)"
    )

    # compose + decide: small keys of one 4 MiB chunk
    small = compose_table(args.keys, 1, 256)
    tc = best(lambda: compose_keys(small), args.rounds)
    crcs = compose_keys(small)
    joined = joined_table(crcs)
    td = best(lambda: decide(joined), args.rounds)
    per_min = args.keys / (tc + td) * 60
    print(
        f"compose + decide, {args.keys:,} keys of 4 MiB: {per_min / 1e6:.2f} M keys/min per "
        f"core (compose {args.keys / tc / 1e3:,.0f} k keys/s, decide "
        f"{args.keys / td / 1e3:,.0f} k keys/s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
