"""The data-local jobs on simulated datanode hosts (tests/spark/simhosts.py): a standalone
master and one worker per datanode on 127.0.0.2-4, each in its own mount namespace holding
only its datanode's volumes at /srv/ozone/disk0 and /srv/ozone/disk1; the driver (this
process) sees none of them.

On that cluster `crcmerkle spark run --datanodes` finds exactly what the scan of the same
generated cluster from one directory tree finds; every scan task ran on its host (Spark's
status store); an inventory host without a worker, a worker started with another datanode's
disks and a worker killed during the scan are each reported, with the exit status of the
rule. Skipped in one line where the kernel refuses mount namespaces (never passed).
Figures (locality, rate per executor CPU-second, memory) printed with -s."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from simhosts import (  # noqa: F401
    _START_TIMEOUT_S,
    ABSENT_HOST,
    DATANODES,
    VOLUMES,
    host_of,
    sim_cluster,
    sim_spark,
)

#: the demo's cluster: every fault kind the Ozone layout has
SIM_GENERATE = {"containers": 12, "seed": 7, "faults": "default"}


def _report(out: Path) -> Dict[str, Any]:
    return json.loads((out / "report.json").read_text())


def _findings(report: Dict[str, Any]) -> Dict[str, Any]:
    """What a report found, without where the replicas were mounted: containers by state,
    and each mismatched container's replicas by datanode and value."""
    return {
        "summary": report["summary"],
        "containers": report["containers"],
        "mismatched": sorted(
            (m["containerID"], sorted((r["datanode"], r["dataChecksum"]) for r in m["replicas"]))
            for m in report["mismatched"]
        ),
        # the hosts the cluster scan knows and the one-tree scan does not
        "unrecoverable": [
            {k: v for k, v in u.items() if k != "hosts"} for u in report["unrecoverable"]
        ],
    }


def _errors(spark: Any, out: Path) -> List[Tuple[Any, ...]]:
    from spark_udfs.jobs.scan import ERROR_SCHEMA

    df = spark.read.schema(ERROR_SCHEMA).parquet(os.fspath(out / "errors"))
    return sorted(
        (r["datanode"], r["container"], r["error"], r["block"] or 0) for r in df.collect()
    )


def _volumes(spark: Any, out: Path) -> List[Dict[str, Any]]:
    from spark_udfs.jobs.scan import VOLUME_SCHEMA

    df = spark.read.schema(VOLUME_SCHEMA).parquet(os.fspath(out / "volumes"))
    return sorted((r.asDict() for r in df.collect()), key=lambda r: (r["host"], r["volume"]))


def _run(args: List[str], capsys: Any) -> Tuple[int, str, str]:
    from crcmerkle_cli import main

    rc = main(args)
    out, err = capsys.readouterr()
    return rc, out, err


def test_the_cluster_scan_finds_what_the_one_tree_scan_finds(
    sim_cluster, sim_spark, tmp_path, capsys
):
    from merkle.replica.generate import generate_cluster, parse_faults
    from spark_udfs.cluster.locality import placed_on_host, task_localities
    from spark_udfs.jobs.hostscan import JOB_GROUP

    sim, sc = sim_cluster, sim_spark.sparkContext
    inv = sim.write_inventory(tmp_path / "datanodes.json", absent=())
    out = tmp_path / "out"
    cpu0 = sim.executor_cpu_s()
    t0 = time.monotonic()
    rc, text, err = _run(
        [
            "spark",
            "run",
            "--datanodes",
            os.fspath(inv),
            "-o",
            os.fspath(out),
            "--master",
            sim.master_url,
            "--bytes-per-second",
            "0",
            "--report",
            os.fspath(out / "report.json"),
        ],
        capsys,
    )
    wall = time.monotonic() - t0
    cpu = sim.executor_cpu_s() - cpu0
    assert rc == 1, (text[-2000:], err[-2000:])  # the generated faults are findings
    # every volume of every host scanned, on its host
    vols = _volumes(sim_spark, out)
    assert [(v["host"], v["volume"], v["status"]) for v in vols] == [
        (host_of(d), p, "SCANNED") for d in range(DATANODES) for p in sim.mount_paths
    ]
    assert all(v["ran_on"] == v["host"] for v in vols)
    uuid_of = {w.host: w.datanode.uuid for w in sim.workers.values()}
    assert all(v["datanode"] == uuid_of[v["host"]] for v in vols)
    placed = total = 0
    for host in sorted(sim.workers):
        tasks = task_localities(sc, job_group=JOB_GROUP.format(host))
        # the host's job: the scan stage (one task per volume), then count()'s final task
        first = min(t.stage for t in tasks)
        tasks = [t for t in tasks if t.stage == first]
        ok, n = placed_on_host(tasks, {i: host for i in range(VOLUMES)})
        placed, total = placed + ok, total + n
        assert all(
            t.locality in ("PROCESS_LOCAL", "NODE_LOCAL") for t in tasks if t.status == "SUCCESS"
        ), tasks
    assert (placed, total) == (DATANODES * VOLUMES,) * 2

    # the same cluster generated into one directory tree, scanned by the one-tree job
    local = tmp_path / "local"
    generate_cluster(
        local / "cluster",
        datanodes=DATANODES,
        volumes=VOLUMES,
        layout="ozone",
        faults=parse_faults(SIM_GENERATE["faults"], "ozone"),
        containers=SIM_GENERATE["containers"],
        seed=SIM_GENERATE["seed"],
    )
    rc1, _, _ = _run(
        [
            "spark",
            "run",
            os.fspath(local / "cluster"),
            "-o",
            os.fspath(local / "out"),
            "--master",
            sim.master_url,
            "--report",
            os.fspath(local / "out" / "report.json"),
        ],
        capsys,
    )
    assert rc1 == rc
    assert _findings(_report(out)) == _findings(_report(local / "out"))
    assert _errors(sim_spark, out) == _errors(sim_spark, local / "out")

    # plan: the same verdict and copies as on the one tree; its command names the host
    leaving = host_of(0)
    rcp, ptext, _ = _run(
        [
            "spark",
            "plan",
            os.fspath(out),
            "--json",
            "--decommission",
            leaving,
            "--master",
            sim.master_url,
        ],
        capsys,
    )
    rcl, ltext, _ = _run(
        [
            "spark",
            "plan",
            os.fspath(local / "out"),
            "--json",
            "--decommission",
            uuid_of[leaving],
            "--master",
            sim.master_url,
        ],
        capsys,
    )
    plan, lplan = json.loads(ptext), json.loads(ltext)
    assert rcp == rcl and plan["parameters"]["decommission"] == [uuid_of[leaving]]
    assert plan["summary"] == lplan["summary"] and plan["containers"] == lplan["containers"]
    assert len(plan["would_lose"]) == len(lplan["would_lose"])
    assert [e["argv"] for e in plan["ozone"]["datanodes"]] == [
        ["ozone", "admin", "datanode", "decommission", leaving]
    ]

    # no output names a datanode by a path: every datanode field is a UUID
    report = _report(out)
    uuid_re = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
    named = [r["datanode"] for m in report["mismatched"] for r in m["replicas"]]
    assert named and all(uuid_re.match(d) for d in named), named
    bytes_read = sum(v["bytes_read"] for v in vols)
    # the rate per executor CPU-second is bench/simhosts_rates.py's (this run is small and
    # its CPU is mostly the jobs' fixed costs and the diff and report)
    print(
        f"\nsimhosts run: {placed}/{total} scan tasks on their host; {bytes_read / 1e6:.1f} MB "
        f"read; scan + diff + report {wall:.1f} s wall, executors' CPU {cpu:.2f} s"
    )


def test_a_host_without_a_worker_and_a_worker_with_wrong_disks(
    sim_cluster, sim_spark, tmp_path, capsys
):
    sim = sim_cluster
    # 127.0.0.6 runs a worker with dn0's disks, but the inventory says another datanode is
    # there; 127.0.0.9 has no worker at all
    fresh = "127.0.0.6"
    sim.start_worker(fresh, 0)
    sim.wait_workers([fresh])
    # the fresh worker's executor registered first: the scan's --executor-wait then waits
    # only for the absent host, whose executor never comes (each second of it a second of
    # this test; it was 60 s)
    from spark_udfs.cluster.locality import wait_for_executors

    got = wait_for_executors(sim_spark.sparkContext, [fresh], _START_TIMEOUT_S)
    assert fresh in got, (got, sim._log_tails())
    hosts = sim.inventory(absent=(ABSENT_HOST,))
    hosts = [h for h in hosts if h["host"] != fresh] + [
        {
            "host": fresh,
            "uuid": "00000000-0000-4000-8000-000000000006",
            "volumes": list(sim.mount_paths),
        }
    ]
    inv = tmp_path / "datanodes.json"
    inv.write_text(json.dumps(hosts))
    out = tmp_path / "out"
    t0 = time.monotonic()
    rc, text, err = _run(
        [
            "spark",
            "scan",
            "--datanodes",
            os.fspath(inv),
            "-o",
            os.fspath(out),
            "--master",
            sim.master_url,
            "--executor-wait",
            "5",
            "--bytes-per-second",
            "0",
        ],
        capsys,
    )
    assert rc == 1, (text[-2000:], err[-2000:])
    assert time.monotonic() - t0 < 600  # nothing waited for the absent host
    status = {(v["host"], v["volume"]): v["status"] for v in _volumes(sim_spark, out)}
    for p in sim.mount_paths:
        assert status[(ABSENT_HOST, p)] == "NO_EXECUTOR"
        assert status[(fresh, p)] == "WRONG_DATANODE"
        for d in range(DATANODES):
            assert status[(host_of(d), p)] == "SCANNED"
    vols = {(v["host"], v["volume"]): v for v in _volumes(sim_spark, out)}
    wrong = vols[(fresh, sim.mount_paths[0])]
    assert sim.datanodes[0].uuid in wrong["detail"] and not wrong["bytes_read"]
    sim.kill_worker(fresh)


def test_a_worker_killed_during_the_scan(sim_cluster, sim_spark, tmp_path, capsys):
    """Its volumes are not counted (its job cancelled when its executor left, or a task
    re-run elsewhere reads nothing: WRONG_HOST); the other hosts' volumes are scanned; the
    job ends."""
    sim, sc = sim_cluster, sim_spark.sparkContext
    victim = host_of(2)
    inv = tmp_path / "datanodes.json"  # the three datanodes' hosts (an earlier test's extra
    inv.write_text(
        json.dumps(
            [
                h
                for h in sim.inventory(absent=())  # worker is gone)
                if h["host"] in {host_of(d) for d in range(DATANODES)}
            ]
        )
    )
    out = tmp_path / "out"
    killed: List[Any] = []

    def kill_when_busy() -> None:  # the CLI runs in this thread (it owns the signals)
        deadline = time.monotonic() + 120
        try:
            while time.monotonic() < deadline:
                if _victim_busy(sc, victim):
                    sim.kill_worker(victim)
                    killed.append(time.monotonic())
                    return
                time.sleep(0.2)
        except BaseException as exc:  # reported by the test's thread
            killed.append(exc)

    killer = threading.Thread(target=kill_when_busy, daemon=True)
    killer.start()
    # slow enough (256 KiB/s per volume) that the victim's scan is under way when it dies
    rc, text, err = _run(
        [
            "spark",
            "scan",
            "--datanodes",
            os.fspath(inv),
            "-o",
            os.fspath(out),
            "--master",
            sim.master_url,
            "--bytes-per-second",
            "256KiB",
        ],
        capsys,
    )
    killer.join(5)
    assert killed and isinstance(killed[0], float), f"the victim's task never started: {killed}"
    assert rc == 1, (text[-2000:], err[-2000:])
    status = {(v["host"], v["volume"]): v for v in _volumes(sim_spark, out)}
    for p in sim.mount_paths:
        # its job cancelled when its executor left (NO_EXECUTOR), or a task re-run
        # elsewhere first and read nothing there (WRONG_HOST): never SCANNED
        got = status[(victim, p)]
        assert got["status"] in ("NO_EXECUTOR", "WRONG_HOST"), got
        assert got["status"] == "NO_EXECUTOR" or got["ran_on"] not in (None, victim), got
        for d in range(DATANODES - 1):
            assert status[(host_of(d), p)]["status"] == "SCANNED"


def _victim_busy(sc: Any, host: str) -> bool:
    """Is a task of `host`'s scan job running on its host's executor?"""
    from spark_udfs.jobs.hostscan import JOB_GROUP

    tracker = sc.statusTracker()
    for job in tracker.getJobIdsForGroup(JOB_GROUP.format(host)):
        info = tracker.getJobInfo(job)
        for stage in info.stageIds if info else ():
            s = tracker.getStageInfo(stage)
            if s is not None and s.numActiveTasks:
                return True
    return False


def _recorded(state_dir: Path) -> Dict[str, int]:
    """{replica path: bytes its record says were read} of every volume database under a
    host's state directory, read as another process would (nothing yet: empty)."""
    import sqlite3

    from merkle.replica.scanstate import DB_NAME

    out: Dict[str, int] = {}
    for db_file in sorted(state_dir.glob(f"volume-*/{DB_NAME}")):
        try:
            db = sqlite3.connect(f"file:{db_file}?mode=ro", uri=True)
            try:
                rows = db.execute("SELECT key, record FROM replicas").fetchall()
            finally:
                db.close()
        except sqlite3.Error:
            continue
        for key, record in rows:
            out[key.split("\0", 1)[1]] = int(json.loads(record).get("bytes_read") or 0)
    return out


def test_a_worker_killed_mid_scan_resumes_from_its_hosts_state(
    sim_cluster, sim_spark, tmp_path, capsys
):
    """Issue 34 on the simulated hosts: each host keeps `--state` on its own disk
    (STATE_MOUNT: a directory only that host sees, kept across its workers' restarts). The
    victim's worker is killed (SIGKILL of the worker, its executor and Python workers) once
    its task has recorded replicas, then restarted with the same disks; the next run reads
    only what no record vouches for. The bytes of the interrupted and the resumed runs
    together, the victim's in-flight replica counted whole, are at most 1.1x one
    uninterrupted pass, and the resumed run's findings are the uninterrupted run's."""
    from spark_udfs.cluster.locality import wait_for_executors
    from spark_udfs.jobs.scan import REPLICA_SCHEMA
    from spark_udfs.rehearsal.simhosts import STATE_MOUNT

    sim, sc = sim_cluster, sim_spark.sparkContext
    victim, victim_dn = host_of(2), 2
    if victim not in sim.alive_workers():  # an earlier test killed it
        sim.start_worker(victim, victim_dn)
        sim.wait_workers([victim])
    assert victim in wait_for_executors(sc, [victim], _START_TIMEOUT_S)
    inv = tmp_path / "datanodes.json"
    inv.write_text(
        json.dumps(
            [h for h in sim.inventory(absent=()) if h["host"] in {host_of(d) for d in range(3)}]
        )
    )

    def scan(out: Path, *extra: str) -> int:
        argv = ["spark", "scan", "--datanodes", os.fspath(inv), "-o", os.fspath(out)]
        rc, _, err = _run([*argv, "--master", sim.master_url, *extra], capsys)
        assert rc in (0, 1), err[-2000:]
        return rc

    def replicas(out: Path) -> Dict[Tuple[str, str], Dict[str, Any]]:
        df = sim_spark.read.schema(REPLICA_SCHEMA).parquet(os.fspath(out / "containers"))
        return {(r["host"], r["replica"]): r.asDict() for r in df.collect()}

    whole_rc = scan(tmp_path / "whole", "--bytes-per-second", "0")
    whole = replicas(tmp_path / "whole")
    total = sum(int(r["bytes_read"] or 0) for r in whole.values())
    largest = max(int(r["bytes_read"] or 0) for (h, _), r in whole.items() if h == victim)
    assert total > 0 and largest > 0
    mine = sim.state_dir(victim)  # what the victim's namespace sees at STATE_MOUNT
    state = ["--state", STATE_MOUNT, "--max-age", "7d"]
    killed: List[Any] = []

    def kill_when_recorded() -> None:
        deadline = time.monotonic() + 180
        try:
            while time.monotonic() < deadline:
                if len(_recorded(mine)) >= 2 and _victim_busy(sc, victim):
                    sim.kill_worker(victim)
                    killed.append(_recorded(mine))
                    return
                time.sleep(0.05)
        except BaseException as exc:  # reported by the test's thread
            killed.append(exc)

    killer = threading.Thread(target=kill_when_recorded, daemon=True)
    killer.start()
    # slow enough that the victim is still reading when its second record lands
    rate = str(max(1, total // 40))
    scan(tmp_path / "cut", *state, "--bytes-per-second", rate)
    killer.join(5)
    assert killed and isinstance(killed[0], dict), f"the victim was never killed: {killed}"
    cut = replicas(tmp_path / "cut")
    assert not [k for k in cut if k[0] == victim]  # its results died with its executor
    sim.start_worker(victim, victim_dn)
    sim.wait_workers([victim])
    assert victim in wait_for_executors(sc, [victim], _START_TIMEOUT_S)
    recorded = _recorded(mine)  # what the killed task saved before it died
    assert recorded and len(recorded) < len([k for k in whole if k[0] == victim])
    resumed_rc = scan(tmp_path / "resumed", *state, "--bytes-per-second", "0")
    resumed = replicas(tmp_path / "resumed")
    assert resumed_rc == whole_rc
    for key, r in whole.items():  # the findings of every replica, the uninterrupted run's
        got = resumed[key]
        assert (got["ok"], got["errors"], got["data_checksum"]) == (
            r["ok"], r["errors"], r["data_checksum"],
        ), key  # fmt: skip
    read_cut = sum(int(v["bytes_read"] or 0) for v in _volumes(sim_spark, tmp_path / "cut"))
    read_victim = sum(recorded.values()) + largest  # its records, and the replica in flight
    read_resumed = sum(int(v["bytes_read"] or 0) for v in _volumes(sim_spark, tmp_path / "resumed"))
    print(
        f"\nkill campaign on simulated hosts: one pass {total} bytes; interrupted run "
        f"{read_cut} + victim {read_victim} (at most); resumed run {read_resumed}: "
        f"{(read_cut + read_victim + read_resumed) / total:.3f}x"
    )
    # the other hosts' pass completed in the interrupted run: the resumed run reads only the
    # victim's replicas no record vouched for (less: blocks saved of the one in flight)
    assert 0 < read_resumed <= sum(
        int(r["bytes_read"] or 0) for (h, p), r in whole.items()
        if h == victim and p not in recorded
    )  # fmt: skip
    assert read_cut + read_victim + read_resumed <= 1.1 * total


#: a long campaign: CI's campaigns step runs it, not the fast tier (.ci/lib.sh CAMPAIGNS)
pytestmark = pytest.mark.slow
