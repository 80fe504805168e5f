"""The simulated hosts work as real ones would (tests/spark/simhosts.py): one task per
(host, volume) placed by spark_udfs.cluster.locality.located_rdd runs on its host and reads the
VERSION of the datanode it was meant for; the driver sees no volume; a host without an
executor does not hold its task (it runs elsewhere at once and knows it); a worker killed
during a task loses it to another host, which knows it; a worker started on a fresh
address with another datanode's disks reads that datanode. Skipped in one line where the
kernel refuses mount namespaces. Figures (start-up, wall time, memory) printed with -s."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from spark_udfs.cluster.locality import (
    executor_hosts,
    located_rdd,
    placed_on_host,
    task_localities,
    wait_for_executors,
)

import simhosts
from simhosts import (  # noqa: F401
    ABSENT_HOST,
    SimCluster,
    SimHostsUnavailable,
    driver_mounts,
    driver_rss_mib,
    host_of,
    sim_cluster,
    sim_spark,
)

#: a task that finds itself on its host waits this long for its executor to be killed
_HOLD_S = 90.0
_JOB_TIMEOUT_S = 120.0


def _probe(item: str) -> Tuple[str, str, str]:
    """In a task: (the item, the executor's host, the datanodeUuid in the VERSION of the
    item's volume as this host sees it, or 'ERR: ...'); with "hold": true, a task on its
    own host sleeps (to be killed) before answering."""
    import json as _json
    import time as _time

    from spark_udfs.cluster.locality import this_executor_host

    want = _json.loads(item)
    here = this_executor_host() or ""
    if want.get("hold") and here == want["host"]:
        _time.sleep(want["hold"])
    try:
        with open(want["volume"] + "/hdds/VERSION", encoding="latin-1") as f:
            props = dict(
                line.strip().split("=", 1) for line in f if "=" in line and not line.startswith("#")
            )
        uuid = props.get("datanodeUuid", "")
    except OSError as exc:
        uuid = f"ERR: {exc.__class__.__name__}"
    return item, here, uuid


def _run_per_host(sc: Any, by_host: Dict[str, List[str]], group: str) -> List[Tuple[str, str, str]]:
    """One job per host (one task set each, the module docstring of spark_udfs.cluster.locality
    says why), from driver threads, all in job group `group`; fails after _JOB_TIMEOUT_S
    (cancelling the group) instead of hanging."""
    results: List[Tuple[str, str, str]] = []
    errors: List[BaseException] = []
    lock = threading.Lock()

    def run(host: str, items: List[str]) -> None:
        try:
            sc.setJobGroup(group, f"smoke {host}")
            got = located_rdd(sc, [(it, [host]) for it in items]).map(_probe).collect()
            with lock:
                results.extend(got)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [
        threading.Thread(target=run, args=(h, its), daemon=True) for h, its in by_host.items()
    ]
    for t in threads:
        t.start()
    deadline = time.monotonic() + _JOB_TIMEOUT_S
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    if any(t.is_alive() for t in threads):
        sc.cancelJobGroup(group)
        pytest.fail(
            f"jobs of {group} still running after {_JOB_TIMEOUT_S:.0f} s: a task "
            f"waited for a host instead of running elsewhere"
        )
    assert not errors, [str(e)[-2000:] for e in errors]
    return results


def _items(sim: SimCluster, hosts: List[str], **extra: Any) -> Dict[str, List[str]]:
    """{host: [item per volume]}: each item names its host, volume and expected UUID."""
    uuid = {w.host: w.datanode.uuid for w in sim.workers.values()}
    return {
        h: [
            json.dumps({"host": h, "volume": v, "uuid": uuid.get(h, ""), **extra}, sort_keys=True)
            for v in sim.mount_paths
        ]
        for h in hosts
    }


def test_every_task_runs_on_its_host_and_reads_its_datanode(sim_cluster, sim_spark):
    sim, sc = sim_cluster, sim_spark.sparkContext
    t0 = time.monotonic()
    hosts = sorted(sim.workers)
    assert executor_hosts(sc) == {h: 1 for h in hosts}  # the driver is not counted
    by_host = _items(sim, hosts)
    got = _run_per_host(sc, by_host, "smoke-placement")
    assert len(got) == len(hosts) * len(sim.mount_paths) == 6
    for item, here, uuid in got:
        want = json.loads(item)
        assert here == want["host"], (item, here)
        assert uuid == want["uuid"], (item, uuid)  # the disks of the datanode meant
    # the three datanodes are three UUIDs: nobody read another host's disks
    assert len({uuid for _, _, uuid in got}) == 3

    placed = task_localities(sc, job_group="smoke-placement")
    assert len([p for p in placed if p.status == "SUCCESS"]) == 6, placed
    assert all(p.locality in ("PROCESS_LOCAL", "NODE_LOCAL") for p in placed), placed
    # each job's partitions 0 and 1 are its host's two volumes
    stages = {}
    for p in placed:
        stages.setdefault(p.stage, []).append(p)
    ok = total = 0
    for stage_tasks in stages.values():
        host = {p.host for p in stage_tasks}
        assert len(host) == 1, stage_tasks
        o, t = placed_on_host(stage_tasks, {0: next(iter(host)), 1: next(iter(host))})
        ok, total = ok + o, total + t
    assert (ok, total) == (6, 6)

    # the driver's namespace: empty mount points, no mount under /srv/ozone
    assert driver_mounts() == []
    assert all(os.listdir(p) == [] for p in sim.mount_paths)
    print(
        f"\nsimhosts: cluster generated and master + {len(hosts)} workers ALIVE in "
        f"{sim.start_seconds:.1f} s; driver + executors registered in "
        f"{sim_spark.executors_seconds:.1f} s; placement test {time.monotonic() - t0:.1f} s; "
        f"RSS MiB {json.dumps({k: round(v) for k, v in sim.rss_mib().items()})}, "
        f"driver (pytest + its JVM) {driver_rss_mib():.0f}"
    )


def test_a_host_without_an_executor_does_not_hold_its_task(sim_cluster, sim_spark):
    """STRICT_LOCALITY_CONF waits 30 days for a host; in a task set of its own, a host with
    no executor is no valid NODE_LOCAL level, so its task runs elsewhere at once (ANY), and
    the task knows it is not on its host."""
    sc = sim_spark.sparkContext
    got = _run_per_host(
        sc,
        {ABSENT_HOST: [json.dumps({"host": ABSENT_HOST, "volume": sim_cluster.mount_paths[0]})]},
        "smoke-absent",
    )
    [(_, here, _)] = got
    assert here in sim_cluster.workers and here != ABSENT_HOST
    [placed] = task_localities(sc, job_group="smoke-absent")
    assert placed.locality == "ANY" and placed.host == here, placed


def test_killed_worker_then_a_worker_with_another_datanodes_disks(sim_cluster, sim_spark):
    sim, sc = sim_cluster, sim_spark.sparkContext
    victim = host_of(2)
    item = json.dumps({"host": victim, "volume": sim.mount_paths[0], "hold": _HOLD_S})
    done: List[Tuple[str, str, str]] = []
    job = threading.Thread(
        target=lambda: done.extend(_run_per_host(sc, {victim: [item]}, "smoke-kill")), daemon=True
    )
    job.start()
    # kill the worker (and its executor) while its task holds
    deadline = time.monotonic() + 60
    while not any(
        s.numActiveTasks
        for s in (
            sc.statusTracker().getStageInfo(i) for i in sc.statusTracker().getActiveStageIds()
        )
        if s is not None
    ):
        assert time.monotonic() < deadline, "the task never started"
        time.sleep(0.2)
    sim.kill_worker(victim)
    job.join(_JOB_TIMEOUT_S + 10)
    assert not job.is_alive()
    [(_, here, _)] = done
    assert here != victim and here in sim.workers  # re-run on another host, which knows it
    attempts = task_localities(sc, job_group="smoke-kill")
    assert [p.host for p in attempts if p.status != "SUCCESS"] == [victim], attempts
    assert [p.locality for p in attempts if p.status == "SUCCESS"] == ["ANY"], attempts
    assert victim not in wait_for_executors(sc, [], 0)

    # a fresh address with datanode 0's disks (127.0.0.2 has them too)
    fresh = "127.0.0.6"
    sim.start_worker(fresh, 0)
    sim.wait_workers([fresh])
    assert fresh in wait_for_executors(sc, [fresh], 120)
    got = _run_per_host(
        sc,
        {fresh: [json.dumps({"host": fresh, "volume": v}) for v in sim.mount_paths]},
        "smoke-fresh",
    )
    assert sorted((here, uuid) for _, here, uuid in got) == [(fresh, sim.datanodes[0].uuid)] * 2


def test_mount_points_in_use_are_refused(tmp_path, monkeypatch):
    """A /srv/ozone/diskN holding anything is someone's: the harness refuses to mount there
    (and creates, then leaves to be removed, only what was missing)."""
    monkeypatch.setattr(simhosts, "MOUNT_ROOT", tmp_path / "ozone")
    disks = [str(tmp_path / "ozone" / f"disk{v}") for v in range(2)]
    created = simhosts._prepare_mount_points(disks)
    assert created == [tmp_path / "ozone", *map(Path, disks)]
    (Path(disks[1]) / "data").write_text("x")
    with pytest.raises(SimHostsUnavailable, match="not empty"):
        simhosts._prepare_mount_points(disks)
    simhosts._remove_created(created)  # disk1 is not empty: it and ozone/ stay
    assert not Path(disks[0]).exists() and Path(disks[1], "data").exists()


def test_not_root_is_a_one_line_skip_reason(monkeypatch):
    monkeypatch.setattr(simhosts.os, "geteuid", lambda: 1000)
    with pytest.raises(SimHostsUnavailable, match="need root"):
        simhosts.check_can_simulate()


def test_daemons_die_with_the_test_process():
    """A test run killed without its finalizers leaves no daemon behind: what mount-exec
    starts gets SIGKILL when the process that started it dies (PR_SET_PDEATHSIG)."""
    import subprocess
    import sys

    mid = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os,subprocess,sys,time; p=subprocess.Popen([sys.executable,sys.argv[1],"
            "'mount-exec','--','sleep','120'], env={**os.environ, sys.argv[2]: str(os.getpid())});"
            " print(p.pid, flush=True); time.sleep(120)",
            simhosts.__file__,
            simhosts._PARENT_ENV,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    pid = int(mid.stdout.readline())
    deadline = time.monotonic() + 30
    while not Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sleep\0"):  # exec'd
        assert time.monotonic() < deadline
        time.sleep(0.1)
    mid.kill()
    mid.wait()
    deadline = time.monotonic() + 30
    while simhosts._alive(pid):
        assert time.monotonic() < deadline, "the daemon outlived its parent"
        time.sleep(0.1)
