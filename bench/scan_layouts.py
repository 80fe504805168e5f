"""Scan throughput of the two replica layouts on the same data (local scanner, hot cache).

    python bench/scan_layouts.py [--gib 1] [--rounds 5] [--spark]

Generates one cluster per layout with the same seed (so the same block files and checksums),
then scans both in turn, round after round (interleaved: the VM's speed drifts), best and
median of the rounds. `crcmerkle` reads `.blocks` files; `ozone` opens each volume's RocksDB
once (a hard-link snapshot), parses every `.container` and decodes `block_data` rows. With
--spark also the Spark scan job (local[*]) on both.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from merkle.replica.generate import GeneratorConfig, generate_cluster
from merkle.replica.scan import scan_paths

MiB = 1024 * 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--spark", action="store_true")
    args = ap.parse_args()
    block = 16 * MiB
    containers = max(1, int(args.gib * 1024 * MiB / (4 * block)))
    with tempfile.TemporaryDirectory(prefix="scan-layouts-") as tmp:
        roots = {}
        for layout in ("crcmerkle", "ozone"):
            roots[layout] = Path(tmp) / layout
            generate_cluster(
                roots[layout],
                GeneratorConfig(
                    datanodes=1,
                    volumes=2,
                    replicas=1,
                    containers=containers,
                    min_blocks=4,
                    max_blocks=4,
                    block_size=block,
                    chunk_size=4 * MiB,
                    bytes_per_checksum=16 * 1024,
                    seed=1,
                    layout=layout,
                ),
            )
        rates = {k: [] for k in roots}
        nbytes = {}
        for _ in range(args.rounds):
            for layout, root in roots.items():
                t0 = time.perf_counter()
                results = scan_paths([root], write_tree=False)
                dt = time.perf_counter() - t0
                assert all(r.ok for r in results), layout
                nbytes[layout] = sum(r.bytes_read for r in results)
                rates[layout].append(nbytes[layout] / dt / 1e9)
        print(
            f"local scan, {nbytes['ozone'] / 1e9:.2f} GB in {containers} containers x 4 "
            f"blocks of 16 MiB (4 MiB chunks, 16 KiB CRC32 windows), {args.rounds} rounds"
        )
        print(f"{'layout':<11}{'best GB/s':>10}{'median':>8}")
        for layout, r in rates.items():
            print(f"{layout:<11}{max(r):>10.2f}{statistics.median(r):>8.2f}")
        ratio = statistics.median(a / b for a, b in zip(rates["ozone"], rates["crcmerkle"]))
        print(f"ozone / crcmerkle, median of per-round ratios: {ratio:.2f}")
        if args.spark:
            from spark_udfs.cluster.session import get_session
            from spark_udfs.jobs.scan import scan_replicas

            spark = get_session(None, app_name="scan-layouts")
            srates = {k: [] for k in roots}
            for i in range(args.rounds + 1):
                for layout, root in roots.items():
                    spark.catalog.clearCache()
                    t0 = time.perf_counter()
                    rows = scan_replicas(spark, [str(root)]).containers.collect()
                    dt = time.perf_counter() - t0
                    assert all(r["ok"] for r in rows)
                    if i:  # the first round warms the JVM and the Python workers
                        srates[layout].append(sum(r["bytes_read"] for r in rows) / dt / 1e9)
            print(f"Spark scan job ({spark.sparkContext.master})")
            for layout, r in srates.items():
                print(f"{layout:<11}{max(r):>10.2f}{statistics.median(r):>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
