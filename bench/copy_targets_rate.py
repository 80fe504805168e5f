"""Rates of the copy check's targets: S3 describe() against moto's server on 127.0.0.1
(objects per second, requests per object) and a local directory's read rate (GB/s).

    python bench/copy_targets_rate.py [--objects 2000] [--concurrency 1 16] [--gib 1]

S3: uploads N small single-part objects with CRC32C checksums (boto3, over HTTP), lists
them, then describes them (one GetObjectAttributes each) at each concurrency, counting the
server's requests. moto is Python in this process, so the figure is the server's rate more
than ours: against S3 (tens of ms per request) the rate is concurrency / latency.

Local: writes one file of --gib GiB (random data), then reads it through describe() (hot
page cache, the three CRCs per 8 MiB buffer), best of three.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def bench_s3(objects: int, concurrencies: list) -> None:
    from merkle.copies.targets import open_target

    from loopback_s3 import LoopbackS3

    with LoopbackS3() as s3:
        target = open_target(s3.uri("bench"))
        client = target.client()  # type: ignore[attr-defined]
        body = os.urandom(1024)
        t = time.perf_counter()
        for i in range(objects):
            client.put_object(
                Bucket=s3.bucket, Key=f"bench/o{i:07d}", Body=body, ChecksumAlgorithm="CRC32C"
            )
        print(f"uploaded {objects} objects in {time.perf_counter() - t:.1f} s")
        for conc in concurrencies:
            target = open_target(s3.uri("bench") + f"&concurrency={conc}")
            before = s3.requests
            t = time.perf_counter()
            batches = list(target.list())
            t_list = time.perf_counter() - t
            t = time.perf_counter()
            rows = sum(target.describe(b).num_rows for b in batches)
            t_desc = time.perf_counter() - t
            served = s3.requests - before
            print(
                f"concurrency {conc:3d}: list {rows} in {t_list:.2f} s "
                f"({target.list_requests} pages); describe {rows / t_desc:,.0f} objects/s, "
                f"{(served - target.list_requests) / rows:.2f} requests/object"
            )


def bench_local(gib: float) -> None:
    from merkle.copies.targets import open_target

    with tempfile.TemporaryDirectory(prefix="targets_bench_") as tmp:
        size = int(gib * (1 << 30))
        with open(os.path.join(tmp, "big"), "wb") as f:
            block = os.urandom(8 << 20)
            for _ in range(size // len(block)):
                f.write(block)
        target = open_target(tmp)
        batch = next(iter(target.list()))
        best = None
        for _ in range(3):
            t = time.perf_counter()
            row = target.describe(batch).to_pylist()[0]
            dt = time.perf_counter() - t
            best = dt if best is None else min(best, dt)
        assert row["bytes_read"] == size and row["error"] is None
        print(
            f"local: {size / best / 1e9:.2f} GB/s reading and checksumming "
            f"(crc32c, crc32, crc64nvme) a {gib:g} GiB file, hot cache, best of 3"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--objects", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--gib", type=float, default=1.0)
    args = ap.parse_args()
    bench_s3(args.objects, args.concurrency)
    bench_local(args.gib)


if __name__ == "__main__":
    main()
