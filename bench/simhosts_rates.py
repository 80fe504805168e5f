"""The data-local scan's rates on simulated datanode hosts (tests/spark/simhosts.py: a
standalone master and one worker per datanode on 127.0.0.2-4, each in its own mount
namespace with only its datanode's volumes at /srv/ozone/disk0,1), for the scale model of
docs/operations/scale-model.md ("Scale model, data-local"):

  - the deep scan at full speed, page cache dropped before each round (cold, as a datanode's
    disks are): GB verified per executor CPU-second (the executor JVMs and their Python
    workers, from /proc), tasks placed on their host / all, driver CPU and memory;
  - the same data through the local scanner in this process (merkle.replica.scan.scan_paths,
    one thread, cold): the rate the cluster scan is held against (at least half of it);
  - the default byte rate (merkle.replica.politeio.DEFAULT_BYTES_PER_SECOND per volume):
    wall time and executor CPU of a scan held to it;
  - the census (--metadata-only) and --trees-only: replicas per executor CPU-second.

Run as root: `python bench/simhosts_rates.py [--containers 12] [--rounds 3]`. Prints one
line per measurement and a JSON summary. Needs what the simulated-hosts tests need (root,
unshare, Java); several GB of temporary space.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "spark")]

from simhosts import _tree, cpu_seconds, start_cluster, stop_cluster  # noqa: E402

MiB = 1 << 20


def drop_caches() -> None:
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def driver_cpu() -> float:
    """This process's CPU seconds plus its children's (the driver JVM is one)."""
    return cpu_seconds([os.getpid(), *_tree(os.getpid())])


def driver_rss_mib() -> float:
    total = 0
    for pid in [os.getpid(), *_tree(os.getpid())]:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def one_scan(spark: Any, sim: Any, inv: Any, **kw: Any) -> Dict[str, Any]:
    from spark_udfs.cluster.locality import placed_on_host, task_localities
    from spark_udfs.jobs.hostscan import JOB_GROUP, scan_datanodes

    sc = spark.sparkContext
    drop_caches()
    e0, d0, t0 = sim.executor_cpu_s(), driver_cpu(), time.monotonic()
    tables = scan_datanodes(spark, inv, executor_wait=60, **kw)
    wall = time.monotonic() - t0
    e1, d1 = sim.executor_cpu_s(), driver_cpu()
    vols = [r.asDict() for r in tables.volumes.collect()]
    reps = tables.containers.count()
    placed = total = 0
    for host in sim.workers:
        tasks = task_localities(sc, job_group=JOB_GROUP.format(host))
        first = min((t.stage for t in tasks), default=0)  # the scan stage, not count()'s
        tasks = [t for t in tasks if t.stage == first]
        ok, n = placed_on_host(tasks, {i: host for i in range(len(sim.mount_paths))})
        placed, total = placed + ok, total + n
    tables.stage.unpersist()
    return {
        "wall_s": wall,
        "executor_cpu_s": e1 - e0,
        "driver_cpu_s": d1 - d0,
        "bytes": sum(v["bytes_read"] or 0 for v in vols),
        "replicas": reps,
        "statuses": sorted({v["status"] for v in vols}),
        "placed": placed,
        "tasks": total,
        "driver_rss_mib": driver_rss_mib(),
    }


def local_scan(sim: Any) -> Dict[str, Any]:
    """The local scanner over the same volumes (read-only, one thread, cold)."""
    from merkle.replica.scan import scan_paths

    vols = sorted(str(p) for d in sim.datanodes for p in d.sources)
    drop_caches()
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.monotonic()
    nbytes = 0
    for res in scan_paths(vols, write_tree=False, drop_cache=True):
        nbytes += getattr(res, "bytes_read", 0) or 0
    wall = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu, "bytes": nbytes}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--containers", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--block-mib", type=int, default=16)
    args = ap.parse_args()
    gen = {
        "containers": args.containers,
        "seed": 3,
        "faults": "none",
        "block_size": args.block_mib * MiB,
        "chunk_size": 4 * MiB,
        "bytes_per_checksum": 16 * 1024,
        "min_blocks": 2,
        "max_blocks": 4,
    }
    t0 = time.monotonic()
    sim = start_cluster(gen)
    print(
        f"cluster generated, master + {len(sim.workers)} workers up in "
        f"{time.monotonic() - t0:.1f} s",
        flush=True,
    )
    out: Dict[str, Any] = {}
    try:
        from merkle.replica.inventory import parse_inventory
        from merkle.replica.politeio import DEFAULT_BYTES_PER_SECOND
        from spark_udfs.cluster.locality import wait_for_executors
        from spark_udfs.cluster.session import get_session

        spark = get_session(
            sim.master_url,
            app_name="crcmerkle-simhosts-bench",
            conf={**sim.executor_conf(), "spark.ui.enabled": "true"},
        )
        wait_for_executors(spark.sparkContext, list(sim.workers), 120)
        inv = parse_inventory(json.dumps(sim.inventory(absent=())))
        one_scan(spark, sim, inv)  # warm-up: JVM JIT, Python workers
        deep: List[Dict[str, Any]] = []
        local: List[Dict[str, Any]] = []
        for i in range(args.rounds):  # interleaved: the VM's speed drifts
            deep.append(one_scan(spark, sim, inv))
            local.append(local_scan(sim))
            d, lo = deep[-1], local[-1]
            print(
                f"round {i}: cluster {d['bytes'] / 1e9:.2f} GB in {d['wall_s']:.1f} s, "
                f"{d['bytes'] / 1e9 / d['executor_cpu_s']:.2f} GB per executor CPU-s, "
                f"{d['placed']}/{d['tasks']} tasks on their host, driver CPU "
                f"{d['driver_cpu_s']:.1f} s; local scanner "
                f"{lo['bytes'] / 1e9 / lo['cpu_s']:.2f} GB per CPU-s",
                flush=True,
            )
        rate = statistics.median(d["bytes"] / 1e9 / d["executor_cpu_s"] for d in deep)
        lrate = statistics.median(lo["bytes"] / 1e9 / lo["cpu_s"] for lo in local)
        out["deep"] = {
            "GB_per_executor_cpu_s": rate,
            "local_GB_per_cpu_s": lrate,
            "ratio": rate / lrate,
            "rounds": deep,
            "local": local,
        }
        polite = one_scan(spark, sim, inv, bytes_per_second=DEFAULT_BYTES_PER_SECOND)
        out["default_rate"] = polite
        per_vol = polite["bytes"] / max(1, polite["tasks"]) / polite["wall_s"] / MiB
        print(
            f"default rate ({DEFAULT_BYTES_PER_SECOND // MiB} MiB/s per volume): "
            f"{polite['bytes'] / 1e9:.2f} GB in {polite['wall_s']:.1f} s "
            f"(~{per_vol:.1f} MiB/s per volume), executor CPU {polite['executor_cpu_s']:.1f} s",
            flush=True,
        )
        for mode in ("metadata_only", "trees_only"):
            r = one_scan(spark, sim, inv, **{mode: True})
            out[mode] = r
            print(
                f"{mode}: {r['replicas']} replicas in {r['wall_s']:.1f} s, "
                f"{r['replicas'] / r['executor_cpu_s']:.0f} replicas per executor CPU-s",
                flush=True,
            )
        spark.stop()
    finally:
        stop_cluster(sim)
    print(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
