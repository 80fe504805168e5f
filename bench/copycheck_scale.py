"""The copy check at scale, on Spark (local[*]): N keys in an OM DB, a scan output holding
their chunks (one 1 MiB chunk of 64 CRC32C windows per key, one verified replica), and a
target listing with every key's crc32c (a saved GCS listing, `gcloud storage ls --json`'s
shape: the target costs no request, so the time is the compose-and-compare side's). 1% of the
copies carry another value (MISMATCH expected), so the verdicts are checked too.

    python bench/copycheck_scale.py [--keys N] [--dir DIR]

Prints the time of each part and keys per minute (end to end, and without the driver's OM DB
read), with the machine's load average (2 shared vCPUs: figures move with it).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from merkle.copies.keycrcs import COMPOSE_SCHEMA, compose_keys  # noqa: E402

CHUNK = 1 << 20
BPC = 16384
WINDOWS = CHUNK // BPC
BLOCKS_PER_CONTAINER = 1000


def build(root: Path, n: int) -> None:
    from merkle.copies.omdb import write_om_db
    from merkle.replica.ozone.omkeys import _OmBuilder
    from spark_udfs.jobs.scan import TABLE_SCHEMAS
    from spark_udfs.tables import CHUNK_TABLE_SCHEMA

    t0 = time.perf_counter()
    om = _OmBuilder()
    om.volume("vol")
    om.bucket("vol", "bucket", "OBJECT_STORE")
    cid = 1 + np.arange(n) // BLOCKS_PER_CONTAINER
    lid = 1 + np.arange(n) % BLOCKS_PER_CONTAINER
    for i in range(n):
        om.key("vol", "bucket", f"data/part-{i:08d}.bin", [(int(cid[i]), int(lid[i]), CHUNK, 1)])
    write_om_db(root / "om.db", om.finish())
    t1 = time.perf_counter()

    rng = np.random.default_rng(7)
    windows = rng.integers(0, 2**32, n * WINDOWS, dtype=np.uint32).astype(">u4").tobytes()
    per = WINDOWS * 4
    offsets = pa.array(np.arange(0, n * per + 1, per, dtype=np.int32), pa.int32())
    checks = pa.Array.from_buffers(
        pa.binary(), n, [None, offsets.buffers()[1], pa.py_buffer(windows)]
    )
    nulls = pa.nulls(n, pa.binary())
    chunks = pa.table(
        {
            "datanode": pa.array(["dn0"] * n),
            "container": cid,
            "block": lid,
            "offset": np.zeros(n, np.int64),
            "length": np.full(n, CHUNK, np.int64),
            "leaf": np.zeros(n, np.int64),
            "checksum_matches": np.ones(n, bool),
            "deleted": np.zeros(n, bool),
            "replica": pa.nulls(n, pa.string()),
            "crc64nvme": nulls,
            "crc32c": nulls,
            "crc32": nulls,
            "checksum_type": pa.array(["CRC32C"] * n),
            "bytes_per_checksum": np.full(n, BPC),
            "checksums": checks,
        }
    )
    assert chunks.column_names == [c.split()[0] for c in CHUNK_TABLE_SCHEMA.split(", ")]
    (root / "scan" / "chunks").mkdir(parents=True)
    pq.write_table(chunks, root / "scan" / "chunks" / "part-0.parquet")
    blocks = {
        "datanode": pa.array(["dn0"] * n),
        "replica": pa.nulls(n, pa.string()),
        "container": cid,
        "block": lid,
        "block_value": lid,
        "deleted": np.zeros(n, bool),
        "chunks": np.ones(n, np.int64),
        "bytes": np.full(n, CHUNK, np.int64),
        "checksum_matches": np.ones(n, bool),
    }
    (root / "scan" / "blocks").mkdir()
    pq.write_table(pa.table(blocks), root / "scan" / "blocks" / "part-0.parquet")
    containers = np.unique(cid)
    m = containers.shape[0]
    reps = {
        "datanode": pa.array(["dn0"] * m),
        "replica": pa.nulls(m, pa.string()),
        "container": containers,
        "ok": np.ones(m, bool),
        "verified": np.ones(m, bool),
        "bytes_read": np.full(m, CHUNK * BLOCKS_PER_CONTAINER, np.int64),
    }
    (root / "scan" / "containers").mkdir()
    pq.write_table(pa.table(reps), root / "scan" / "containers" / "part-0.parquet")
    assert set(TABLE_SCHEMAS) >= {"chunks", "blocks", "containers"}
    t2 = time.perf_counter()

    # the target's values: the keys' CRC-32C (made the way the job makes them), 1% changed
    compose_in = pa.table(
        {
            "key_id": np.arange(n),
            "seq": np.zeros(n, np.int32),
            "container": cid,
            "block": lid,
            "block_length": np.full(n, CHUNK, np.int64),
            "block_status": pa.nulls(n, pa.string()),
            "offset": np.zeros(n, np.int64),
            "length": np.full(n, CHUNK, np.int64),
            "checksum_type": chunks["checksum_type"],
            "bytes_per_checksum": np.full(n, BPC),
            "checksums": checks,
            "crc64nvme": nulls,
            "crc32c": nulls,
            "crc32": nulls,
            "composite_algorithm": pa.nulls(n, pa.string()),
            "part_sizes": pa.nulls(n, pa.list_(pa.int64())),
        },
        schema=COMPOSE_SCHEMA,
    )
    values = compose_keys(compose_in)["crc32c"].to_pylist()
    with open(root / "listing.json", "w") as f:
        f.write("[")
        for i, v in enumerate(values):
            if i % 100 == 99:
                v = bytes(b ^ 0xFF for b in v)
            item = {
                "url": f"gs://copies/vol/bucket/data/part-{i:08d}.bin",
                "type": "cloud_object",
                "metadata": {
                    "bucket": "copies",
                    "name": f"vol/bucket/data/part-{i:08d}.bin",
                    "size": str(CHUNK),
                    "crc32c": base64.b64encode(v).decode(),
                },
            }
            f.write(("," if i else "") + json.dumps(item))
        f.write("]")
    t3 = time.perf_counter()
    print(
        f"built {n:,} keys: OM DB {t1 - t0:.1f} s, scan tables {t2 - t1:.1f} s, "
        f"listing {t3 - t2:.1f} s"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--dir", help="work directory (default: a private temporary one)")
    args = ap.parse_args()
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="crcmerkle-ccscale-"))
    try:
        if not (root / "om.db").exists():
            build(root, args.keys)
        from merkle.copies.omdb import open_om_db

        t0 = time.perf_counter()
        with open_om_db(root / "om.db") as db:
            nkeys = sum(1 for _ in db.keys())
        om_read = time.perf_counter() - t0
        print(
            f"OM DB read alone: {nkeys:,} keys in {om_read:.1f} s "
            f"({nkeys / om_read / 1e3:.0f} k keys/s on the driver)"
        )

        from spark_udfs.cluster.session import get_session
        from spark_udfs.jobs.copycheck import copycheck
        from spark_udfs.jobs.scan import TABLE_SCHEMAS

        spark = get_session(app_name="crcmerkle-copycheck-scale")
        tables = {
            name: spark.read.schema(TABLE_SCHEMAS[name]).parquet(str(root / "scan" / name))
            for name in ("chunks", "blocks", "containers")
        }
        out = root / f"check-{int(time.time())}"
        load0 = os.getloadavg()[0]
        t0 = time.perf_counter()
        res = copycheck(
            spark,
            str(root / "om.db"),
            tables,
            f"gs://copies/?listing={root / 'listing.json'}",
            str(out),
        )
        total = time.perf_counter() - t0
        print(
            f"copycheck: {res.keys:,} keys, {res.objects:,} objects in {total:.1f} s "
            f"(load average {load0:.1f} -> {os.getloadavg()[0]:.1f}): "
            f"{res.keys / total * 60 / 1e6:.2f} M keys/min end to end; "
            f"{res.keys / (total - om_read) * 60 / 1e6:.2f} M keys/min without the OM DB read; "
            f"counts {{{', '.join(f'{k}: {v}' for k, v in res.counts.items() if v)}}}; "
            f"requests {res.object_requests + res.list_requests}, bytes read {res.bytes_read}"
        )
        assert res.counts["MISMATCH"] == nkeys // 100
        assert res.counts["MATCH"] == nkeys - nkeys // 100
        spark.stop()
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
