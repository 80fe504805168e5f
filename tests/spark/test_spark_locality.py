"""spark_udfs.cluster.locality on local[2] (fast): located_rdd's partitions and preferred locations,
executor_hosts without the driver, this_executor_host under a local driver, the
ancestor walk on a made-up process tree, task_localities. The same functions on a real
multi-host cluster: test_simhosts_smoke.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from spark_udfs.cluster import locality
from spark_udfs.cluster.locality import (
    TaskPlacement,
    executor_hosts,
    located_rdd,
    placed_on_host,
    task_localities,
    this_executor_host,
    wait_for_executors,
)


def test_located_rdd_one_partition_per_item_with_its_hosts(spark):
    sc = spark.sparkContext
    items = [
        (f"item-{i} é\n", [f"10.0.0.{i % 7}", "h-b"] if i % 2 else [f"10.0.0.{i % 7}"])
        for i in range(300)
    ]
    rdd = located_rdd(sc, items)
    assert rdd.getNumPartitions() == len(items)
    # every partition holds its one item, in order, and keeps it through a Python map
    got = rdd.mapPartitionsWithIndex(lambda i, it: [(i, list(it))]).collect()
    assert got == [(i, [item]) for i, (item, _) in enumerate(items)]
    # the preferred locations, as the scheduler sees them (the JVM RDD behind the Python one)
    jrdd = rdd._jrdd.rdd()
    parts = jrdd.partitions()
    for i in (0, 1, 2, 299):
        prefs = sc._jvm.scala.collection.JavaConverters.seqAsJavaListConverter(
            jrdd.preferredLocations(parts[i])
        ).asJava()
        assert list(prefs) == list(items[i][1])


def test_located_rdd_thousands_of_items(spark):
    sc = spark.sparkContext
    n = 3000
    t0 = time.monotonic()
    rdd = located_rdd(sc, [(str(i), [f"dn{i % 200}.example"]) for i in range(n)])
    built = time.monotonic() - t0
    assert rdd.getNumPartitions() == n
    print(f"located_rdd: {n} items built in {built:.2f} s")


@pytest.mark.parametrize("bad", [("a\0b", ["h"]), ("a", [""]), (b"a", ["h"])])
def test_located_rdd_refuses_bad_items(spark, bad):
    with pytest.raises(ValueError):
        located_rdd(spark.sparkContext, [bad])


def test_executor_hosts_leaves_the_driver_out(spark):
    sc = spark.sparkContext
    assert executor_hosts(sc) == {}  # local[2]: the driver is the only executor
    assert wait_for_executors(sc, ["127.0.0.9"], timeout_s=1.0, poll_s=0.2) == {}
    assert wait_for_executors(sc, [], timeout_s=30) == {}  # nothing to wait for: at once


def test_this_executor_host_is_none_under_a_local_driver(spark):
    sc = spark.sparkContext
    # (only hosts the local executor has: local[*] has no periodic offer round, so a task
    # set mixing a live host with one that has no executor can stall on its locality wait)
    hosts = (
        located_rdd(sc, [("x", ["localhost"]), ("y", ["localhost"])])
        .map(lambda _: this_executor_host())
        .collect()
    )
    # the Python workers' ancestor is the driver's JVM (SparkSubmit): nothing to prove,
    # even though SPARK_LOCAL_IP is set in their environment
    assert hosts == [None, None]


def test_this_executor_host_walks_up_to_the_executor_jvm(tmp_path):
    # a stand-in tree: sh (argv holds the backend and --hostname) -> python -> python
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess,sys,time; p=subprocess.Popen([sys.executable,'-c',"
            "'import time; time.sleep(60)']); print(p.pid, flush=True); time.sleep(60)",
            "org.apache.spark.executor.CoarseGrainedExecutorBackend",
            "--driver-url",
            "x",
            "--hostname",
            "127.0.0.3",
            "--cores",
            "1",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        child = int(parent.stdout.readline())
        try:
            assert this_executor_host(_start_pid=child) == "127.0.0.3"
            assert this_executor_host(_start_pid=parent.pid) == "127.0.0.3"
        finally:
            os.kill(child, 9)
    finally:
        parent.kill()
        parent.wait()


def test_this_executor_host_falls_back_to_the_environment(monkeypatch):
    monkeypatch.setattr(locality, "_read_proc", lambda pid: None)  # /proc unreadable
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.4")
    monkeypatch.delenv("SPARK_LOCAL_HOSTNAME", raising=False)
    assert this_executor_host() == "127.0.0.4"
    monkeypatch.setenv("SPARK_LOCAL_HOSTNAME", "dn4.example")
    assert this_executor_host() == "dn4.example"
    monkeypatch.delenv("SPARK_LOCAL_HOSTNAME")
    monkeypatch.delenv("SPARK_LOCAL_IP")
    assert this_executor_host() is None


def test_this_executor_host_none_without_an_executor_ancestor():
    # pytest itself: no Spark JVM among its ancestors, but /proc is readable: the walk ends
    # at the bound or at init, then the environment decides
    env = {
        k: v for k, v in os.environ.items() if k not in ("SPARK_LOCAL_IP", "SPARK_LOCAL_HOSTNAME")
    }
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            "from spark_udfs.cluster.locality import this_executor_host as f; print(f())",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert r.stdout.strip() == "None"


def test_task_localities_of_a_job_group(spark):
    sc = spark.sparkContext
    sc.setJobGroup("locality-test", "task_localities")
    try:
        located_rdd(sc, [(str(i), ["localhost"]) for i in range(4)]).map(len).collect()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    placed = task_localities(sc, job_group="locality-test")
    assert sorted(p.partition for p in placed) == [0, 1, 2, 3]
    assert all(
        isinstance(p, TaskPlacement) and p.status == "SUCCESS" and p.executor == "driver"
        for p in placed
    ), placed
    # the local executor registers as 'localhost': the preference is met
    assert {p.locality for p in placed} <= {"PROCESS_LOCAL", "NODE_LOCAL"}, placed
    wanted = {p.partition: p.host for p in placed}
    assert placed_on_host(placed, wanted) == (4, 4)
    assert placed_on_host(placed, {**wanted, 0: "elsewhere"}) == (3, 4)
    assert task_localities(sc, job_group="no-such-group") == []
