"""The data-local BookKeeper scan's rates on simulated bookie hosts (tests/spark/simhosts.py
with the bookie layout: a standalone master and one worker per bookie on 127.0.0.2.., each in
its own mount namespace with only its bookie's ledger directories at /srv/ozone/ledgers-0,1):
issue 38's "a 1 GiB entry log at disk speed on the simulated hosts, at most 0.1 core per HDD".

Each bookie holds one clean ledger whose entries (--payload, 64 KiB) fill one entry log of
--log-gib GiB (spark_udfs.rehearsal.bookkeeper.write_rate_bookies). Per round, page cache
dropped first (cold, as a bookie's disks are):

  - `spark scan --datanodes` of every bookie host (spark_udfs.jobs.bookkeeper.hosts): wall
    time, bytes verified, executor CPU (the executor JVMs and their Python workers, from
    /proc) and driver CPU; per host the rate it read at, and the cores it would take to keep
    up with an HDD (executor CPU-seconds per byte x HDD_BYTES_PER_SECOND), and the same
    less what the executors cost idle over as long (heartbeats, GC: paid with or without a
    scan);
  - a plain cold read of the same entry logs in this process, one after the other, buffered
    and O_DIRECT as the scan reads them (the disk's speed here: the rate each host's scan is
    held against).

Run as root: `python bench/simhosts_bookie_rates.py [--bookies 2] [--log-gib 1] [--rounds 3]
[--payload BYTES] [--short-job-jvm]`.
Prints one line per measurement and a JSON summary. Needs what the simulated-hosts tests need
(root, unshare, Java) and --bookies x --log-gib GiB of temporary space.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "spark")]

from simhosts import start_cluster, stop_cluster  # noqa: E402
from simhosts_rates import driver_cpu, drop_caches  # noqa: E402  (the datanodes' bench)

MiB = 1 << 20
#: a 7200 rpm HDD's sequential rate, the issue's unit ("0.1 core per HDD")
HDD_BYTES_PER_SECOND = 250e6


def one_scan(spark: Any, sim: Any, inv: Any, metadata: Dict[int, Any]) -> Dict[str, Any]:
    from spark_udfs.jobs.bookkeeper.hosts import scan_bookie_hosts

    drop_caches()
    e0, d0, t0 = sim.executor_cpu_s(), driver_cpu(), time.monotonic()
    tables = scan_bookie_hosts(spark, inv, metadata, executor_wait=60)
    wall = time.monotonic() - t0
    e1, d1 = sim.executor_cpu_s(), driver_cpu()
    vols = [r.asDict() for r in tables.volumes.collect()]
    s = tables.summary
    per_host = [
        {
            "host": v["host"],
            "bytes": v["bytes_read"],
            "seconds": v["seconds"],
            "cpu_s": v["cpu_seconds"],
        }
        for v in vols
        if v["bytes_read"]
    ]
    return {
        "wall_s": wall,
        "executor_cpu_s": e1 - e0,
        "driver_cpu_s": d1 - d0,
        "bytes": int(s["bytes_read"]),
        "verified_copies": int(s["verified_copies"]),
        "findings": int(s["findings"]),
        "statuses": sorted({v["status"] for v in vols}),
        "per_host": per_host,
    }


def idle_executors(sim: Any, seconds: float) -> float:
    """The executors' CPU-seconds over `seconds` with no job (heartbeats, GC, the JVMs'
    own threads): what they cost the host whether or not a scan runs."""
    e0 = sim.executor_cpu_s()
    time.sleep(seconds)
    return float(sim.executor_cpu_s() - e0)


def plain_read(sim: Any, direct: bool = False) -> Dict[str, Any]:
    """The entry logs read cold in this process, one after the other, 8 MiB at a time
    buffered, or (`direct`) 16 MiB at a time past the page cache, as the scan reads them."""
    logs = [p / "current" / "0.log" for d in sim.datanodes for p in d.sources[:1]]
    drop_caches()
    buf = memoryview(mmap.mmap(-1, 16 * MiB))  # page-aligned, as O_DIRECT needs
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.monotonic()
    n = 0
    for log in logs:
        fd = os.open(log, os.O_RDONLY | (os.O_DIRECT if direct else 0))
        try:
            while True:
                got = os.readv(fd, [buf if direct else buf[: 8 * MiB]])
                if not got:
                    break
                n += got
        finally:
            os.close(fd)
    wall = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return {"wall_s": wall, "bytes": n, "cpu_s": cpu}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bookies", type=int, default=2)
    ap.add_argument("--log-gib", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--payload", type=int, default=64 << 10, help="each entry's payload in bytes (64 KiB)"
    )
    ap.add_argument(
        "--short-job-jvm",
        action="store_true",
        help="run the executors with the tests' JVM options (C1 JIT only: quick to start, "
        "slower per row) instead of the JVM's defaults, as a real cluster's executors run",
    )
    args = ap.parse_args()
    t0 = time.monotonic()
    sim = start_cluster(
        {
            "layout": "bookkeeper",
            "log_bytes": int(args.log_gib * (1 << 30)),
            "payload": args.payload,
        },
        datanodes=args.bookies,
    )
    print(
        f"{args.bookies} bookies of {sim.manifest['log_bytes'] / args.bookies / 2**30:.2f} GiB "
        f"written, master + {len(sim.workers)} workers up in {time.monotonic() - t0:.1f} s",
        flush=True,
    )
    out: Dict[str, Any] = {}
    try:
        from merkle.replica.bookkeeper.metadata import load_ledger_metadata
        from merkle.replica.inventory import parse_inventory
        from spark_udfs.cluster.locality import wait_for_executors
        from spark_udfs.cluster.session import get_session

        metadata = load_ledger_metadata(str(sim.cluster_dir / sim.manifest["metadata"]["dumps"]))
        spark = get_session(
            sim.master_url,
            app_name="crcmerkle-simhosts-bookie-bench",
            conf={
                **sim.executor_conf(),
                "spark.ui.enabled": "true",
                **({} if args.short_job_jvm else {"spark.executor.extraJavaOptions": ""}),
            },
        )
        wait_for_executors(spark.sparkContext, list(sim.workers), 120)
        inv = parse_inventory(json.dumps(sim.inventory(absent=())))
        one_scan(spark, sim, inv, metadata)  # warm-up: JVM JIT, Python workers
        scans: List[Dict[str, Any]] = []
        reads: List[Dict[str, Any]] = []
        directs: List[Dict[str, Any]] = []
        for i in range(args.rounds):  # interleaved: the VM's speed drifts
            scans.append(one_scan(spark, sim, inv, metadata))
            scans[-1]["idle_executor_cpu_s"] = idle_executors(sim, scans[-1]["wall_s"])
            reads.append(plain_read(sim))
            directs.append(plain_read(sim, direct=True))
            d, r = scans[-1], reads[-1]
            assert d["findings"] == 0 and d["statuses"] == ["SCANNED"], d
            host_rates = [h["bytes"] / h["seconds"] / 1e6 for h in d["per_host"]]
            print(
                f"round {i}: {d['verified_copies']} entries, {d['bytes'] / 1e9:.2f} GB in "
                f"{d['wall_s']:.1f} s; per host "
                + ", ".join(f"{x:.0f}" for x in host_rates)
                + f" MB/s; scans' CPU {sum(h['cpu_s'] for h in d['per_host']):.2f} s, "
                f"executor CPU {d['executor_cpu_s']:.2f} s "
                f"({d['executor_cpu_s'] / (d['bytes'] / 1e9):.2f} s/GB; idle executors "
                f"{d['idle_executor_cpu_s']:.2f} s in as long), driver CPU "
                f"{d['driver_cpu_s']:.1f} s; plain cold read "
                f"{r['bytes'] / r['wall_s'] / 1e6:.0f} MB/s, O_DIRECT "
                f"{directs[-1]['bytes'] / directs[-1]['wall_s'] / 1e6:.0f} MB/s",
                flush=True,
            )
        cpu_per_byte = statistics.median(d["executor_cpu_s"] / d["bytes"] for d in scans)
        # what the scan adds to executors that run anyway (their idle CPU over as long)
        added_per_byte = statistics.median(
            (d["executor_cpu_s"] - d["idle_executor_cpu_s"]) / d["bytes"] for d in scans
        )
        # the storages' own scans (the task's Python worker, from process_time): what a
        # larger disk adds, without the job's fixed cost (JVM tasks, Arrow, the ledgers stage)
        scan_per_byte = statistics.median(
            sum(h["cpu_s"] for h in d["per_host"]) / d["bytes"] for d in scans
        )
        host_rate = statistics.median(
            h["bytes"] / h["seconds"] for d in scans for h in d["per_host"]
        )
        read_rate = statistics.median(r["bytes"] / r["wall_s"] for r in reads)
        read_cpu = statistics.median(r["cpu_s"] / r["bytes"] for r in reads)
        direct_rate = statistics.median(r["bytes"] / r["wall_s"] for r in directs)
        direct_cpu = statistics.median(r["cpu_s"] / r["bytes"] for r in directs)
        out = {
            "executor_cpu_s_per_GB": cpu_per_byte * 1e9,
            "cores_per_hdd": cpu_per_byte * HDD_BYTES_PER_SECOND,
            "added_cpu_s_per_GB": added_per_byte * 1e9,
            "added_cores_per_hdd": added_per_byte * HDD_BYTES_PER_SECOND,
            "scan_cpu_s_per_GB": scan_per_byte * 1e9,
            "scan_cores_per_hdd": scan_per_byte * HDD_BYTES_PER_SECOND,
            "host_MB_per_s": host_rate / 1e6,
            "plain_read_MB_per_s": read_rate / 1e6,
            "plain_read_cpu_s_per_GB": read_cpu * 1e9,
            "host_rate_over_read": host_rate / read_rate,
            "direct_read_MB_per_s": direct_rate / 1e6,
            "direct_read_cpu_s_per_GB": direct_cpu * 1e9,
            "host_rate_over_direct_read": host_rate / direct_rate,
            "rounds": scans,
            "reads": reads,
            "direct_reads": directs,
        }
        print(
            f"median: {out['executor_cpu_s_per_GB']:.2f} executor CPU-s per GB = "
            f"{out['cores_per_hdd']:.3f} cores per HDD at {HDD_BYTES_PER_SECOND / 1e6:.0f} MB/s "
            f"(goal <= 0.1); above idle executors {out['added_cpu_s_per_GB']:.2f} CPU-s per "
            f"GB = {out['added_cores_per_hdd']:.3f}; of which the storages' scans "
            f"{out['scan_cpu_s_per_GB']:.2f} "
            f"CPU-s per GB = {out['scan_cores_per_hdd']:.3f} cores per HDD; a host read at "
            f"{out['host_MB_per_s']:.0f} MB/s, the plain cold read "
            f"at {out['plain_read_MB_per_s']:.0f} MB/s ({out['host_rate_over_read']:.2f}x) "
            f"for {out['plain_read_cpu_s_per_GB']:.2f} CPU-s per GB (the read's own cost), "
            f"O_DIRECT at {out['direct_read_MB_per_s']:.0f} MB/s "
            f"({out['host_rate_over_direct_read']:.2f}x) for "
            f"{out['direct_read_cpu_s_per_GB']:.2f} CPU-s per GB",
            flush=True,
        )
        spark.stop()
    finally:
        stop_cluster(sim)
    print(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
