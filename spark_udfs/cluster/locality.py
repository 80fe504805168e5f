"""Placing tasks on given hosts, and proving where they ran (PySpark 3.5 and 4.x).

A data-local scan reads a datanode's disks on the datanode itself: one task per (host,
volume), placed by Spark's preferred locations. This module is the plumbing:

  - `located_rdd(sc, [(item, [host, ...]), ...])`: an RDD of str with one partition per item,
    each preferring its hosts (PySpark's `parallelize` takes no locations; the JVM's
    `SparkContext.makeRDD(Seq[(T, Seq[String])])` does; narrow transformations such as
    map/mapPartitions keep the preference, so the Python work placed on it runs there too);
  - `executor_hosts(sc)`, `wait_for_executors(sc, hosts, timeout_s)`: which hosts have an
    executor (what the driver compares with the inventory);
  - `this_executor_host()`: inside a task, the host its executor registered with;
  - `task_localities(sc, ...)`: where each task of some jobs or stages ran, at which level.

Host names. A preferred location is matched against the host an executor registered with:
on standalone the worker's `--host` (ExecutorRunner substitutes it for `{{HOSTNAME}}` in the
executor's `--hostname` argument); on YARN the NodeManager's host name
(YarnCoarseGrainedExecutorBackend `--hostname`). So the inventory must name hosts exactly as
the workers/NodeManagers registered (`executor_hosts` shows those names): a worker known by
its IP address is not matched by its DNS name.

What Spark guarantees, and what it does not (read in TaskSetManager, Spark 3.1-4.x):
  1. Preferred locations only DELAY a task: `spark.locality.wait[.node|.rack]` bounds how
     long a task set declines other executors for a task whose host is busy; then it runs the
     task at level ANY on any free executor. Nothing forbids that, so every data-local task
     must check where it is (`this_executor_host()` against the host it was meant for) before
     it reads anything, and report WRONG_HOST otherwise.
  2. A task set only waits at NODE_LOCAL while at least one of ITS pending tasks' hosts has a
     live executor (computeValidLocalityLevels: `pendingTasks.forHost.keySet.exists(
     sched.hasExecutorsAliveOnHost)`, recomputed on every executor added or lost). Tasks for a
     host without an executor, in a task set whose other tasks' hosts are alive, wait the whole
     NODE_LOCAL wait and then run anywhere; in a task set where no pending task's host has an
     executor, NODE_LOCAL is not a valid level at all and they run elsewhere AT ONCE.
  3. Since Spark 3.1 (SPARK-18886, spark.locality.wait.legacyResetOnTaskLaunch=false) the
     wait restarts only when an offer round rejected nothing; an executor idle beside a busy
     host's queue therefore steals that host's queued tasks once the wait expires.

Hence the setting the data-local job uses (STRICT_LOCALITY_CONF, given when the session is
built: the scheduler reads it from the SparkContext's conf, `spark.conf.set` later has no
effect): `spark.locality.wait` longer than any scan (a host with more volumes than executor
cores keeps its own queue, point 3), `spark.locality.wait.rack=0s` (YARN resolves racks: a
dead host's tasks must not wait at RACK_LOCAL either), speculation off. And the job submits
ONE JOB PER HOST (one task set each, from driver threads): while its host has an executor
the task set waits for it as long as the wait says; the moment the host's last executor is
lost (or if it never had one), point 2 drops NODE_LOCAL and its remaining tasks run at once
elsewhere, where the task's own check reports WRONG_HOST in milliseconds: no task waits
forever. (A single task set over all hosts would instead hold a dead host's tasks for the
whole wait, point 2.) Hosts of the inventory without an executor when the job starts are
best left out of the task sets and reported by name (`wait_for_executors`).

local[*]: the driver is the only executor. `executor_hosts` returns {} (the driver is never
counted: on a cluster it runs no tasks, and on local[*] nothing proves it is a datanode
host), and `this_executor_host()` returns None in a Python worker of a local driver: a data-
local task run on local[*] reads nothing (WRONG_HOST), which is the safe answer. Beware:
local[*] has no periodic offer round (a cluster backend revives offers every second), so on
local[*] a task set mixing the driver's host ('localhost') with a host without an executor
can stall for good once its tasks are rejected at NODE_LOCAL (seen on Spark 4.3).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

__all__ = [
    "DEFAULT_EXECUTOR_WAIT",
    "STRICT_LOCALITY_CONF",
    "TaskPlacement",
    "executor_hosts",
    "located_rdd",
    "placed_on_host",
    "task_localities",
    "this_executor_host",
    "wait_for_executors",
]

#: seconds a data-local job waits for every inventory host's executor before it starts
#: without the missing ones (spark_udfs.jobs.hostscan reports them NO_EXECUTOR)
DEFAULT_EXECUTOR_WAIT = 120.0

#: Spark settings for data-local tasks (see the module docstring): the wait is far longer than
#: any scan (30 days), racks are not waited for, no speculative second copy of a task.
STRICT_LOCALITY_CONF: Dict[str, str] = {
    "spark.locality.wait": "30d",
    "spark.locality.wait.node": "30d",
    "spark.locality.wait.process": "30d",
    "spark.locality.wait.rack": "0s",
    "spark.speculation": "false",
}

#: how many ancestors of a Python worker are looked at for its executor's JVM: worker ->
#: daemon -> executor JVM on a default set-up (spark.python.use.daemon=false: worker -> JVM)
_MAX_ANCESTORS = 6
#: the executor backends whose command line carries `--hostname H` (standalone, YARN; both
#: run CoarseGrainedExecutorBackend's argument parser)
_BACKENDS = (
    "org.apache.spark.executor.CoarseGrainedExecutorBackend",
    "org.apache.spark.executor.YarnCoarseGrainedExecutorBackend",
)
#: a driver JVM: a Python worker below it belongs to a local[*] driver-executor
_DRIVERS = ("org.apache.spark.deploy.SparkSubmit",)


def located_rdd(sc: Any, items: Sequence[Tuple[str, Sequence[str]]]) -> Any:
    """An RDD of str with one partition per item (partition i holds items[i][0]), each
    preferring the hosts items[i][1] (names as the executors registered). Narrow
    transformations keep the preference. Items must not contain NUL (ValueError)."""
    from pyspark.rdd import RDD
    from pyspark.serializers import UTF8Deserializer

    jvm = sc._jvm
    converters = jvm.scala.collection.JavaConverters
    pairs = jvm.java.util.ArrayList()
    # one Scala Seq per distinct host list: thousands of volumes share a few hundred hosts,
    # and every py4j call is a round trip (~0.2-0.5 ms)
    host_seqs: Dict[Tuple[str, ...], Any] = {}
    tuple2 = jvm.scala.Tuple2
    for item, hosts in items:
        if not isinstance(item, str) or "\0" in item:
            raise ValueError(f"located_rdd: an item must be a str without NUL: {item!r:.80}")
        key = tuple(hosts)
        if any(not isinstance(h, str) or not h for h in key):
            raise ValueError(f"located_rdd: host names must be non-empty str: {key!r:.200}")
        seq = host_seqs.get(key)
        if seq is None:
            jhosts = jvm.java.util.ArrayList()
            for h in key:
                jhosts.add(h)
            seq = host_seqs[key] = converters.asScalaBufferConverter(jhosts).asScala().toSeq()
        pairs.add(tuple2(item, seq))
    scala_seq = converters.asScalaBufferConverter(pairs).asScala().toSeq()
    # makeRDD[T: ClassTag](seq: Seq[(T, Seq[String])]): the implicit ClassTag is the second
    # argument in the bytecode (the other overload, (Seq[T], Int, ClassTag), has three)
    tag = jvm.scala.reflect.ClassTag.apply(jvm.java.lang.Class.forName("java.lang.String"))
    jrdd = sc._jsc.sc().makeRDD(scala_seq, tag)
    # a JavaRDD[String] reaches Python as UTF-8 strings, as sc.textFile's does
    return RDD(jrdd.toJavaRDD(), sc, UTF8Deserializer())


def _java_list(sc: Any, seq: Any) -> Any:
    """A Scala Seq seen through py4j as a java.util.List (py4j iterates only Java types)."""
    return sc._jvm.scala.collection.JavaConverters.seqAsJavaListConverter(seq).asJava()


def _host_of(host_port: str) -> str:
    host, sep, port = host_port.rpartition(":")
    return host if sep and port.isdigit() else host_port


def executor_hosts(sc: Any) -> Dict[str, int]:
    """{host: number of live executors} of the executors registered with the driver, as the
    scheduler names them; the driver itself is never counted ({} on local[*]). From Spark's
    status store, fed by the listener bus: an executor appears there within milliseconds of
    registering."""
    out: Dict[str, int] = {}
    for summary in _java_list(sc, sc._jsc.sc().statusStore().executorList(True)):
        if summary.id() == "driver":
            continue
        host = _host_of(summary.hostPort())
        out[host] = out.get(host, 0) + 1
    return out


def wait_for_executors(
    sc: Any, hosts: Iterable[str], timeout_s: float, poll_s: float = 0.5
) -> Dict[str, int]:
    """Wait until every host in `hosts` has an executor, or `timeout_s` passed; return
    executor_hosts() as it then is (the caller reports the hosts missing from it by name)."""
    wanted = set(hosts)
    deadline = time.monotonic() + max(0.0, timeout_s)
    while True:
        found = executor_hosts(sc)
        if wanted <= set(found) or time.monotonic() >= deadline:
            return found
        time.sleep(max(0.0, min(poll_s, deadline - time.monotonic())))


def _read_proc(pid: int) -> Optional[Tuple[int, List[str]]]:
    """(parent pid, command line) of a process, None if it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
    except OSError:
        return None
    # the command name in parentheses may hold spaces and ')': the fields follow the last ')'
    rest = stat[stat.rfind(b")") + 1 :].split()
    try:
        ppid = int(rest[1])
    except (IndexError, ValueError):
        return None
    args = [a.decode("utf-8", "replace") for a in cmdline.split(b"\0")]
    if args and args[-1] == "":
        args.pop()
    return ppid, args


def _hostname_arg(args: Sequence[str]) -> Optional[str]:
    for i, a in enumerate(args):
        if a == "--hostname" and i + 1 < len(args) and args[i + 1]:
            return args[i + 1]
        if a.startswith("--hostname=") and len(a) > len("--hostname="):
            return a[len("--hostname=") :]
    return None


def this_executor_host(_start_pid: Optional[int] = None) -> Optional[str]:
    """Inside a task's Python worker: the host its executor registered with (what preferred
    locations are matched against), read from the executor JVM's `--hostname` among this
    process's few nearest ancestors. None under a local[*] driver (the worker's ancestor is
    the driver's JVM: no executor host to prove). Only when no JVM ancestor can be read at all
    (e.g. /proc mounted with hidepid): SPARK_LOCAL_HOSTNAME, else SPARK_LOCAL_IP, else None."""
    pid = os.getpid() if _start_pid is None else _start_pid
    for _ in range(_MAX_ANCESTORS):
        got = _read_proc(pid)
        if got is None:
            break
        ppid, args = got
        if any(a in _BACKENDS for a in args):
            return _hostname_arg(args)
        if any(a in _DRIVERS for a in args):
            return None
        if ppid <= 1:
            break
        pid = ppid
    return os.environ.get("SPARK_LOCAL_HOSTNAME") or os.environ.get("SPARK_LOCAL_IP") or None


class TaskPlacement(NamedTuple):
    """One task attempt as Spark's status store recorded it."""

    stage: int
    stage_attempt: int
    partition: int
    attempt: int
    host: str
    executor: str
    locality: str  # PROCESS_LOCAL, NODE_LOCAL, NO_PREF, RACK_LOCAL, ANY
    status: str  # SUCCESS, FAILED, KILLED, RUNNING, ...


_LISTENER_WAIT_MS = 10_000
_bus_lock = threading.Lock()


def _drain_listener_bus(sc: Any) -> None:
    """Tasks end in the status store after the job returns (listener bus): wait for it."""
    with _bus_lock:
        try:
            sc._jsc.sc().listenerBus().waitUntilEmpty(_LISTENER_WAIT_MS)
        except Exception:  # py4j: a Spark without this private method; poll result is late
            time.sleep(1.0)


def task_localities(
    sc: Any, job_group: Optional[str] = None, stage_ids: Optional[Iterable[int]] = None
) -> List[TaskPlacement]:
    """Every task attempt of the jobs of `job_group` (sc.setJobGroup) and/or of `stage_ids`
    (all attempts of each stage), with the host and executor it ran on and its locality
    level, sorted by (stage, partition, attempt). Call it after the jobs returned."""
    _drain_listener_bus(sc)
    stages = set(stage_ids or ())
    tracker = sc.statusTracker()
    if job_group is not None:
        for job in tracker.getJobIdsForGroup(job_group):
            info = tracker.getJobInfo(job)
            if info is not None:
                stages.update(info.stageIds)
    store = sc._jsc.sc().statusStore()
    out: List[TaskPlacement] = []
    for stage in sorted(stages):
        info = tracker.getStageInfo(stage)
        if info is None:
            continue
        for attempt in range(info.currentAttemptId + 1):
            for t in _java_list(sc, store.taskList(stage, attempt, (1 << 31) - 1)):
                out.append(
                    TaskPlacement(
                        stage,
                        attempt,
                        _partition(t),
                        t.attempt(),
                        t.host(),
                        t.executorId(),
                        t.taskLocality(),
                        t.status(),
                    )
                )
    out.sort(key=lambda p: (p.stage, p.partition, p.attempt, p.stage_attempt))
    return out


def _partition(task: Any) -> int:
    try:  # TaskData.partitionId: Spark 3.3+; older ones have the index only
        return int(task.partitionId())
    except Exception:
        return int(task.index())


def placed_on_host(placements: Iterable[TaskPlacement], wanted: Dict[int, str]) -> Tuple[int, int]:
    """(successful tasks that ran on the host wanted for their partition, successful tasks
    counted): the locality figure "tasks placed on their host / all"."""
    ok = total = 0
    for p in placements:
        if p.status != "SUCCESS" or p.partition not in wanted:
            continue
        total += 1
        ok += p.host == wanted[p.partition]
    return ok, total
