"""The data-local scan: every datanode host reads its own disks, on a cluster whose Spark
executors run on the datanode hosts (standalone workers or YARN NodeManagers there).

A real Ozone cluster keeps each datanode's volumes on that host's local disks, at the same
paths on every host (`hdds.datanode.dir=/data/disk1,...`): nothing is shared, the driver
sees none of it. So the unit of work is one (host, volume) of the inventory
(merkle.replica.inventory), and:

- the driver never lists replicas. It compares the inventory with the executors that
  registered (spark_udfs.cluster.locality): a host without one gets NO_EXECUTOR for each of its
  volumes and no task at all, so nothing waits for it. Every other (host, volume) is one
  task whose preferred location is the host, as its executor registered (located_rdd);
- a host whose executors all leave while its job runs (a killed worker) has its job
  cancelled and its volumes reported NO_EXECUTOR: nothing of it is counted, nothing waits;
- the task reads nothing before it has checked that it runs on that host
  (this_executor_host; else WRONG_HOST) and that the volume's recorded identity (Ozone's
  hdds/VERSION datanodeUuid) is the datanode the inventory puts there (else
  WRONG_DATANODE). Only then does it list the volume's replicas and scan them through their
  layout, at the per-volume byte rate, in the idle I/O class, dropping what it read from the
  page cache (merkle.replica.politeio): polite on a live datanode;
- the driver then checks what only the whole cluster shows (one small row per volume,
  spark_udfs.cluster.vouch, the checks the readers of `crcmerkle scan --emit` tables apply too): a
  datanode identity claimed on two hosts (DUPLICATE_DATANODE), a host whose volumes name
  different datanodes, or a volume of another cluster (WRONG_DATANODE: that volume alone),
  and a container twice on one datanode (DUPLICATE_REPLICA): their rows are taken out of
  the tables that compare replicas, so that no replica is counted as another datanode's.

Driver time and memory grow with the number of volumes, never with the number of replicas.
The tables are those of spark_udfs.jobs.scan (plus `host` columns and the volumes table), so
diff, report and plan read them alike.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
from collections import defaultdict
from typing import Any, Dict, Iterator, List, Optional, Sequence, Set, Tuple

import pyarrow as pa

from merkle.replica.also import check_algorithms
from merkle.replica.errors import ReplicaError
from merkle.replica.incremental import tracked_scan
from merkle.replica.inventory import Host, Inventory
from merkle.replica.levels import severity_of
from merkle.replica.uri import redact
from spark_udfs.cluster.locality import DEFAULT_EXECUTOR_WAIT, STRICT_LOCALITY_CONF
from spark_udfs.cluster.vouch import check_volumes
from spark_udfs.jobs.scan import (
    _OUT_SCHEMA,
    DUPLICATE_REPLICA,
    ERROR_SCHEMA,
    NO_EXECUTOR,
    SCANNED,
    VOLUME_FAILED,
    WRONG_DATANODE,
    WRONG_HOST,
    ScanTables,
    _counting,
    _names,
    _result_rows,
    _rows,
    _select_blocks,
    volume_figures,
    volume_frame,
)
from spark_udfs.tables import CHUNK_TABLE_COLUMNS

__all__ = [
    "DEFAULT_EXECUTOR_WAIT",
    "JOB_GROUP",
    "LOCALITY_CONF",
    "executor_of",
    "local_names",
    "registered_hosts",
    "run_per_host",
    "scan_datanodes",
    "wanted_hosts",
]


#: what a data-local session needs (spark_udfs.cluster.locality.STRICT_LOCALITY_CONF: the scheduler
#: waits for a task's host however long that host's executor is busy; it cannot forbid
#: running elsewhere once the host has no live executor, and such a task reads nothing:
#: WRONG_HOST), and no executor added or removed under the job
LOCALITY_CONF = {**STRICT_LOCALITY_CONF, "spark.dynamicAllocation.enabled": "false"}


def executor_of(host: Host, registered: Sequence[str]) -> Optional[str]:
    """The name under which `host`'s executor registered, if one did: its host name or
    address as the inventory gives them (case-insensitive), else an address its name
    resolves to (DNS on the driver)."""
    by_lower = {r.lower().rstrip("."): r for r in registered}
    for name in host.names():
        found = by_lower.get(name.lower().rstrip("."))
        if found is not None:
            return found
    try:
        addresses = {ai[4][0] for ai in socket.getaddrinfo(host.host, None)}
    except (OSError, UnicodeError):
        return None
    return next((by_lower[a] for a in sorted(addresses) if a in by_lower), None)


def _volume_row(
    item: Dict[str, Any],
    status: str,
    detail: Optional[str],
    *,
    datanode: Optional[str] = None,
    cluster_id: Optional[str] = None,
    replicas: int = 0,
    bytes_read: int = 0,
    seconds: Optional[float] = None,
    ran_on: Optional[str] = None,
    figures: Optional[Dict[str, Any]] = None,
) -> pa.Table:
    """One volumes-table row (VOLUME_SCHEMA) as an output row of the stage; `figures`: the
    periodic validator's (replicas_read, bytes_total, oldest_verified_at, read_seconds)."""
    return _rows(
        "VOLUME",
        1,
        {
            "datanode": [datanode or item["datanode"]],
            "host": [item["host"]],
            "volume": [item["volume"]],
            "cluster_id": [cluster_id],
            "status": [status],
            # the stage's rows have no `replicas` column: a volume's count rides in `blocks`
            "detail": [detail],
            "blocks": [replicas],
            "bytes_read": [bytes_read],
            "seconds": [seconds],
            "ran_on": [ran_on],
            **{k: [v] for k, v in (figures or {}).items()},
        },
    )


def _scan_volume(item: Dict[str, Any], options: Dict[str, Any]) -> Iterator[pa.Table]:
    """The rows of one (host, volume) task (see the module docstring)."""
    from merkle.replica.layouts import layout_of
    from merkle.replica.results import RateLimiter
    from spark_udfs.cluster.locality import this_executor_host

    t0 = time.monotonic()
    ran_on = this_executor_host()
    # on local[*] the driver is the only executor (ran_on None): its own host's volumes only
    here = item["local"] if ran_on is None else ran_on.lower() in item["names"]
    if not here:
        yield _volume_row(
            item,
            WRONG_HOST,
            f"the task ran on {ran_on or 'the driver'}, not on "
            f"{item['host']} ({item['at']}): nothing read",
            ran_on=ran_on,
        )
        return
    volume = item["volume"]
    try:
        layout = layout_of(volume)
        volumes = layout.volumes(volume)
    except (OSError, ValueError, ReplicaError) as exc:  # missing, not a volume, unreadable
        detail = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        yield _volume_row(
            item, VOLUME_FAILED, f"{volume} on {item['host']}: {redact(detail)}", ran_on=ran_on
        )
        return
    if len(volumes) != 1 or os.path.normpath(volumes[0].root) != os.path.normpath(volume):
        yield _volume_row(
            item,
            VOLUME_FAILED,
            f"{volume} on {item['host']} is not one volume ({len(volumes)} found at or under it)",
            ran_on=ran_on,
        )
        return
    v = volumes[0]
    if v.problem is not None:
        yield _volume_row(
            item,
            VOLUME_FAILED,
            redact(v.problem),
            datanode=v.datanode,
            cluster_id=v.cluster_id,
            ran_on=ran_on,
        )
        return
    want = item.get("uuid")
    if want and v.datanode_uuid is not None and v.datanode != want:
        yield _volume_row(
            item,
            WRONG_DATANODE,
            f"{volume} on {item['host']} belongs to "
            f"datanode {v.datanode}; the inventory puts {want} there: not "
            f"scanned",
            datanode=want,
            cluster_id=v.cluster_id,
            ran_on=ran_on,
        )
        return
    try:
        refs = sorted(layout.replicas(v), key=lambda r: r.container)
    except (OSError, ValueError, ReplicaError) as exc:  # the listing failed under us
        detail = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        yield _volume_row(
            item,
            VOLUME_FAILED,
            f"{volume} on {item['host']}: {redact(detail)}",
            datanode=v.datanode,
            cluster_id=v.cluster_id,
            ran_on=ran_on,
        )
        return
    rate = options.get("bytes_per_second")
    kwargs: Dict[str, Any] = {"drop_cache": options["drop_cache"]}
    if rate and not (options["trees_only"] or options["metadata_only"]):
        kwargs["limiter"] = RateLimiter(rate)  # per volume, as Ozone's scanner
    if options.get("also") and not (options["trees_only"] or options["metadata_only"]):
        kwargs["also"] = tuple(options["also"])  # the --also CRCs, from the data read
    read = 0
    scanned, read_seconds, started = 0, 0.0, time.time()
    tracker, warning = None, None
    if options.get("state"):
        try:
            tracker, warning = _volume_tracker(options["state"], volume)
        except (ReplicaError, OSError, sqlite3.Error) as exc:
            yield _volume_row(
                item,
                VOLUME_FAILED,
                f"{volume} on {item['host']}: {redact(str(exc))}",
                datanode=v.datanode,
                cluster_id=v.cluster_id,
                ran_on=ran_on,
            )
            return
    try:
        for rep, r, err in tracked_scan(
            tracker,
            layout,
            v,
            refs,
            trees_only=options["trees_only"],
            metadata_only=options["metadata_only"],
            **kwargs,
        ):
            read += 0 if r is None else int(r.bytes_read)
            if tracker is None and r is not None and r.verified:  # read by this task
                scanned += 1
                read_seconds += float(r.seconds or 0.0)
            for t in _result_rows(
                rep,
                r,
                err,
                options["trees_only"],
                item["host"],
                metadata_only=options["metadata_only"],
            ):
                yield _of_volume(t, item["host"], volume)
        if tracker is not None:  # every replica visited: the volume's next run starts a pass
            tracker.state.complete_pass()
    except (OSError, ReplicaError) as exc:  # the volume failed under the scan (a dead disk)
        yield _volume_row(
            item,
            VOLUME_FAILED,
            f"{volume} on {item['host']}: {redact(getattr(exc, 'strerror', None) or str(exc))}",
            datanode=v.datanode,
            cluster_id=v.cluster_id,
            replicas=len(refs),
            bytes_read=read,
            seconds=time.monotonic() - t0,
            ran_on=ran_on,
        )
        return
    finally:
        if tracker is not None:
            tracker.state.close()
    yield _volume_row(
        item,
        SCANNED,
        warning,
        datanode=v.datanode,
        cluster_id=v.cluster_id,
        replicas=len(refs),
        bytes_read=read,
        seconds=time.monotonic() - t0,
        ran_on=ran_on,
        figures=volume_figures(tracker, v.root, scanned, read, read_seconds, started),
    )


def _volume_tracker(state: Dict[str, Any], volume: str) -> Tuple[Any, Optional[str]]:
    """(the StateTracker of `volume`'s own database under the state directory on this host,
    the warning of a database moved aside or None); StateError (one line) when it cannot be
    trusted."""
    from merkle.replica.incremental import StateTracker
    from merkle.replica.scanstate import ScanState, volume_state_dir

    warnings: List[str] = []
    db = ScanState(volume_state_dir(state["dir"], volume), [volume], warnings.append)
    tracker = StateTracker(
        db, state.get("max_age"), checkpoint_seconds=state["checkpoint_seconds"], replay=True
    )
    return tracker, (redact(" ".join(warnings)) if warnings else None)


def _of_volume(t: pa.Table, host: str, volume: str) -> pa.Table:
    """A task's output rows with their host and volume, every kind (a chunk row has no host
    of its own): the driver takes a volume's rows out by them."""
    for name, value in (("host", host), ("volume", volume)):
        i = t.schema.get_field_index(name)
        t = t.set_column(i, name, pa.array([value] * t.num_rows, pa.string()))
    return t


def _task_fn(options: Dict[str, Any]) -> Any:
    """The stage: each task's items (one (host, volume) each, as JSON) scanned in turn."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        if options["idle_io"]:
            from merkle.replica.politeio import set_idle_io_priority

            set_idle_io_priority()  # where the kernel offers it; the scan goes on either way
        for b in batches:
            for text in b.column(0).to_pylist():
                for t in _scan_volume(json.loads(text), options):
                    yield from t.to_batches()

    return run


def local_names(sc: Any) -> List[str]:
    """On local[*] (the driver is the only executor): the names this machine answers to."""
    names = {"localhost", "127.0.0.1", "::1", socket.gethostname(), socket.getfqdn()}
    driver = sc.getConf().get("spark.driver.host")
    if driver:
        names.add(driver)
    return sorted(n for n in names if n)


def _items(
    inventory: Inventory, registered: Sequence[str], local: bool
) -> Tuple[Dict[str, List[Tuple[str, List[str]]]], List[Tuple]]:
    """({executor host: its task items with their preferred host}, NO_EXECUTOR volume rows
    of the hosts without an executor). `local`: a local[*] session, whose driver is the
    only executor (then `registered` are this machine's names)."""
    items: Dict[str, List[Tuple[str, List[str]]]] = defaultdict(list)
    missing: List[Tuple] = []
    for h in inventory.hosts:
        at = executor_of(h, registered)
        datanode = h.uuid or h.host
        if at is None:
            state = ", ".join(s for s in (h.op_state, h.health) if s)
            detail = (
                f"no Spark executor on {h.host}"
                + (f" ({state})" if state else "")
                + ": nothing of it was read"
            )
            missing += [
                (datanode, h.host, v, None, NO_EXECUTOR, detail, None, None, None, None)
                for v in h.volumes
            ]
            continue
        names = sorted({n.lower().rstrip(".") for n in (*h.names(), at)})
        for v in h.volumes:
            items[at].append(
                (
                    json.dumps(
                        {
                            "host": h.host,
                            "at": at,
                            "names": names,
                            "uuid": h.uuid,
                            "datanode": datanode,
                            "volume": v,
                            "local": local,
                        }
                    ),
                    [at],
                )
            )
    return items, missing


def _cluster_checks(
    volumes: List[Any], inventory: Optional[Inventory] = None
) -> Tuple[Dict[Tuple[str, str], Tuple[str, str]], Set[Tuple[str, str]]]:
    """What only the whole cluster shows, from the volume rows (spark_udfs.cluster.vouch, as the
    readers of emitted tables check them): {(host, volume): (new status, detail)}, and the
    (host, volume) pairs whose rows leave the comparison (those volumes alone: a host's
    other volumes stay counted)."""
    rows = [r if isinstance(r, dict) else r.asDict() for r in volumes]
    verdicts = check_volumes(rows, inventory)
    return {k: (v.status, v.detail) for k, v in verdicts.items()}, set(verdicts)


def scan_datanodes(
    spark: Any,
    inventory: Inventory,
    *,
    trees_only: bool = False,
    metadata_only: bool = False,
    bytes_per_second: Optional[float] = None,
    idle_io: bool = True,
    drop_cache: bool = True,
    executor_wait: float = DEFAULT_EXECUTOR_WAIT,
    also: Sequence[str] = (),
    state: Optional[Dict[str, Any]] = None,
) -> ScanTables:
    """Scan every volume of `inventory` on its own host (see the module docstring); the
    stage runs here (the driver's checks need its volume rows). `bytes_per_second`: per
    volume (None: unlimited). `also`: as spark_udfs.jobs.scan.scan_replicas's. `state`
    (`--state`): {"dir": the state directory on every host, "max_age": seconds or None,
    "checkpoint_seconds": ...}: each volume's progress in its own database there
    (merkle.replica.scanstate.volume_state_dir), so that a rerun after a lost executor or a
    driver restart reads only what the volume's pass has not verified, and with `max_age`
    only what is due; a replica not read is tabled from its record (findings and trees)."""
    from pyspark.sql import functions as F

    from spark_udfs.cluster.progress import bytes_accumulator

    also = check_algorithms(also)
    if also and (trees_only or metadata_only):
        raise ValueError(
            "--also computes its CRCs from the data read: not with --trees-only or --metadata-only"
        )
    sc = spark.sparkContext
    local, registered = registered_hosts(sc, inventory, executor_wait)
    per_host, missing = _items(inventory, registered, local)
    options = {
        "trees_only": trees_only,
        "metadata_only": metadata_only,
        "bytes_per_second": bytes_per_second,
        "idle_io": idle_io,
        "drop_cache": drop_cache,
        "also": list(also),
        "state": state,
    }
    if state and (trees_only or metadata_only or also):
        raise ValueError(
            "--state records verified data: not with --trees-only, --metadata-only or --also"
        )
    acc = bytes_accumulator(sc)
    fn = _counting(_task_fn(options), acc)
    lost: Set[str] = set()
    if per_host:
        out, lost = run_per_host(spark, per_host, fn, local)
    else:  # every host lacks an executor: nothing to run, the volumes say why
        out = spark.createDataFrame([], _OUT_SCHEMA)
    for at in sorted(lost):  # their results dropped: the volumes say why
        for text, _ in per_host[at]:
            item = json.loads(text)
            missing.append(
                (
                    item["datanode"],
                    item["host"],
                    item["volume"],
                    None,
                    NO_EXECUTOR,
                    f"the executor on {item['host']} was lost during the scan: "
                    f"nothing of it is counted",
                    None,
                    None,
                    None,
                    None,
                )
            )
    kind = F.col("kind")
    volumes = (
        out.filter(kind == "VOLUME")
        .select(
            "datanode",
            "host",
            "volume",
            "cluster_id",
            "status",
            "detail",
            F.col("blocks").alias("replicas"),
            "bytes_read",
            "seconds",
            "ran_on",
            "replicas_read",
            "bytes_total",
            "oldest_verified_at",
            "read_seconds",
        )
        .collect()
    )
    changed, excluded = _cluster_checks(volumes, inventory)
    rows = [
        (
            r["datanode"],
            r["host"],
            r["volume"],
            r["cluster_id"],
            *changed.get((r["host"], r["volume"]), (r["status"], r["detail"])),
            r["replicas"],
            r["bytes_read"],
            r["seconds"],
            r["ran_on"],
            r["replicas_read"],
            r["bytes_total"],
            r["oldest_verified_at"],
            r["read_seconds"],
        )
        for r in volumes
    ]
    volume_df = volume_frame(spark, rows + missing)

    # every row of a task carries its (host, volume): a volume taken out takes its rows along
    where = F.concat_ws("\0", F.col("host"), F.col("volume"))
    keep = ~where.isin(sorted("\0".join(k) for k in excluded)) if excluded else F.lit(True)
    summary = out.filter((kind == "REPLICA") & keep).select(
        *_names(
            "datanode string, replica string, container long, data_checksum long, ok boolean, "
            "errors long, blocks long, chunks long, bytes_read long, tombstones long, "
            "unhealthy_chunks long, verified boolean, warnings long, host string"
        )
    )
    dup_rows, dup_keys = _duplicate_replicas(summary)
    if dup_keys:
        key = F.concat_ws("\0", F.col("datanode"), F.col("replica"))
        keep = keep & ~key.isin(sorted("\0".join(k) for k in dup_keys))
        summary = summary.filter(~key.isin(sorted("\0".join(k) for k in dup_keys)))
    chunks = out.filter((kind == "CHUNK") & keep).select(*CHUNK_TABLE_COLUMNS)
    errors = out.filter((kind == "ERROR") & keep).select(*_names(ERROR_SCHEMA))
    if dup_rows:
        errors = errors.unionByName(spark.createDataFrame(dup_rows, ERROR_SCHEMA))
    blocks = _select_blocks(out.filter((kind == "BLOCK") & keep))
    return ScanTables(
        chunks=chunks,
        blocks=blocks,
        containers=summary,
        errors=errors,
        stage=out,
        bytes_scanned=acc,
        volumes=volume_df,
    )


def registered_hosts(sc: Any, inventory: Inventory, executor_wait: float) -> Tuple[bool, List[str]]:
    """(a local[*] session, the executor host names to place tasks by): on local[*] this
    machine's names (the driver is the only executor), else the executors registered once
    every inventory host has one or `executor_wait` passed."""
    from spark_udfs.cluster.locality import wait_for_executors

    if sc.master.startswith("local"):
        return True, local_names(sc)
    return False, list(wait_for_executors(sc, wanted_hosts(inventory), executor_wait))


def wanted_hosts(inventory: Inventory) -> List[str]:
    """The executor host names the driver waits for: each host's first name (what a worker
    of it registers unless told otherwise) is enough for the wait to end."""
    return sorted({h.names()[0] for h in inventory.hosts})


#: the job group of host H's scan job (spark_udfs.cluster.locality.task_localities reads it back)
JOB_GROUP = "crcmerkle-scan-host:{}"


def run_per_host(
    spark: Any,
    per_host: Dict[str, List[Tuple[str, List[str]]]],
    fn: Any,
    local: bool,
    schema: str = _OUT_SCHEMA,
) -> Tuple[Any, Set[str]]:
    """Run each host's tasks as its own job, all at once from driver threads, each output
    cached where it was computed; return their union and the hosts whose executors were
    lost while their job ran (their jobs cancelled, their results dropped).

    One job (one task set) per host: the scheduler keeps a host's tasks for it while it has
    a live executor (the locality wait is days), and a task placed elsewhere reads nothing
    (WRONG_HOST). A host whose executors all vanish mid-job (a killed worker, a lost
    NodeManager) is not waited for: a watcher sees it leave the registered executors and
    cancels its job, whatever Spark's scheduler would have done with its pending tasks
    (measured: with a task set half done, the lost host's last task was neither run
    elsewhere nor failed)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor
    from functools import reduce

    import pyspark
    from pyspark import inheritable_thread_target

    from spark_udfs.cluster.locality import executor_hosts, located_rdd

    sc = spark.sparkContext
    running: Set[str] = set(per_host)
    lost: Set[str] = set()
    lock = threading.Lock()

    def one(host: str) -> Any:
        sc.setJobGroup(JOB_GROUP.format(host), f"crcmerkle scan of {host}'s volumes")
        rdd = located_rdd(sc, per_host[host])
        work = spark.createDataFrame(rdd.map(lambda s: (s,)), "item string")
        df = work.mapInArrow(fn, schema).persist()
        try:
            df.count()  # computes and caches it, on its host
        except Exception:
            with lock:
                if host not in lost:
                    raise
            df.unpersist()
            return None
        finally:
            with lock:
                running.discard(host)
        return df

    def watch(stop: threading.Event) -> None:
        while not stop.wait(1.0):
            alive = executor_hosts(sc)
            with lock:
                gone = [h for h in running if h not in alive]
                lost.update(gone)
            for h in gone:
                sc.cancelJobGroup(JOB_GROUP.format(h))

    def target() -> Any:
        """`one` carrying the caller's local properties (scheduler pool...) into its
        thread; wrapped once per host: the wrapper clones the properties when it is made,
        and one clone shared by all threads would share their job groups too. PySpark 4
        also wants the session (its tags)."""
        if int(pyspark.__version__.split(".")[0]) >= 4:
            return inheritable_thread_target(spark)(one)
        return inheritable_thread_target(one)

    stop = threading.Event()
    watcher = None if local else threading.Thread(target=watch, args=(stop,), daemon=True)
    if watcher is not None:  # local[*]: the driver is the executor, nothing to lose
        watcher.start()
    try:
        # one thread per host: a host's job blocks its thread until the host is done, and
        # py4j gives each thread its own connection (more hosts: they run as threads free)
        with ThreadPoolExecutor(max_workers=min(len(per_host), 512)) as pool:
            futures = [pool.submit(target(), host) for host in sorted(per_host)]
            parts = [f.result() for f in futures]
    finally:
        stop.set()
    parts = [p for p in parts if p is not None]
    out = reduce(lambda a, b: a.union(b), parts) if parts else spark.createDataFrame([], schema)
    return out, lost


def _duplicate_replicas(summary: Any) -> Tuple[List[Tuple], Set[Tuple[str, str]]]:
    """A container found twice on one datanode (in two of its volumes): the first replica
    by path is kept, each further one is a DUPLICATE_REPLICA error row and leaves the
    tables. Found after the scan, from the (small) per-replica rows."""
    from pyspark.sql import functions as F

    twice = (
        summary.groupBy("datanode", "container")
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.sort_array(F.collect_list("replica")).alias("paths"),
            F.first("host").alias("host"),
        )
        .filter(F.col("n") > 1)
        .collect()
    )
    rows: List[Tuple] = []
    keys: Set[Tuple[str, str]] = set()
    for r in twice:
        first, *others = r["paths"]
        for p in others:
            keys.add((r["datanode"], p))
            detail = (
                f"a second replica of container {r['container']} on datanode "
                f"{r['datanode']} (the one kept: {redact(first)}); not compared: a "
                f"datanode holds one replica per container"
            )
            rows.append(
                (
                    r["datanode"],
                    redact(p),
                    int(r["container"]),
                    DUPLICATE_REPLICA,
                    None,
                    None,
                    detail,
                    severity_of(DUPLICATE_REPLICA),
                    r["host"],
                )
            )
    return rows, keys
