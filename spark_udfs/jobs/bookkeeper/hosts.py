"""The data-local BookKeeper scan: every bookie host reads its own ledger directories, on a
cluster whose Spark executors run on the bookie hosts (standalone workers or YARN there).

The same shape as the datanodes' (spark_udfs.jobs.hostscan), with a bookie's unit of work:
a bookie's directories must be listed together (its cookies are compared with each other,
DbLedgerStorage's index directories paired, one Interleaved/Sorted entry logger spans them
all), so each inventory host is one task, on that host. The driver lists nothing:

- a host without an executor gets NO_EXECUTOR (one finding per ledger directory the
  inventory gives it) and no task; a host whose executors all leave during its job has its
  job cancelled and the same finding (hostscan.run_per_host);
- the task reads nothing before it has checked that it runs on its host (else WRONG_HOST).
  It lists the host's ledger directories and checks their cookies (list_bookies, as the
  local scan does), refuses a bookie whose cookie names another bookie ID than the
  inventory's `bookie` for that host (WRONG_BOOKIE: not read), and verifies each storage
  (scan_storage), in the idle I/O class unless told otherwise. Its rows are stage 1's of
  spark_udfs.jobs.bookkeeper, each with its host, plus one LISTING row per bookie (what
  Coverage needs, and its instanceId);
- the driver then checks what only the whole cluster shows, from those rows: a bookie ID
  found on two hosts (DUPLICATE_BOOKIE on each: neither host's copies are counted as that
  bookie's, and its entries are judged as not read there), and, when the metadata gives
  no INSTANCEID, a bookie whose instanceId is not the cluster's majority (COOKIE_MISMATCH,
  as the local scan says it). Stage 2 is the local-paths scan's (judge_stage1): the
  findings and tables are the same, field for field, with `host` in the volumes table.

Driver time and memory grow with hosts and ledger directories, never with entries.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections import defaultdict
from typing import Any, Dict, Iterator, List, Optional, Sequence, Set, Tuple

import pyarrow as pa

from merkle.replica.bookkeeper.metadata import LedgerMetadata
from merkle.replica.bookkeeper.scan import COOKIE_MISMATCH, Coverage, Finding, Listing
from merkle.replica.inventory import Host, Inventory
from merkle.replica.results import volume_pace
from merkle.replica.uri import redact
from spark_udfs.cluster.locality import DEFAULT_EXECUTOR_WAIT
from spark_udfs.jobs.bookkeeper import (
    _STAGE1,
    COPIES_PER_BATCH,
    SCANNED,
    VOLUME_FAILED,
    BookieTables,
    Stage1View,
    _arrow,
    _finding_row,
    _table,
    _tally,
    judge_stage1,
    storage_batches,
)

__all__ = [
    "DUPLICATE_BOOKIE",
    "NOT_SCANNED",
    "NO_EXECUTOR",
    "WRONG_BOOKIE",
    "WRONG_HOST",
    "host_batches",
    "judge_hosts",
    "scan_bookie_hosts",
]

#: volume statuses (and finding kinds) of the data-local scan, beside SCANNED and VOLUME_FAILED
NO_EXECUTOR = "NO_EXECUTOR"
NOT_SCANNED = "NOT_SCANNED"
WRONG_HOST = "WRONG_HOST"
WRONG_BOOKIE = "WRONG_BOOKIE"
DUPLICATE_BOOKIE = "DUPLICATE_BOOKIE"


def _finding(
    kind: str, detail: str, *, bookie: Optional[str] = None, file: Optional[str] = None
) -> Finding:
    return Finding(kind, detail, bookie=bookie, file=file)


def _volume(
    host: str, directory: str, status: str, detail: Optional[str], bookie: Optional[str]
) -> Dict[str, Any]:
    """A ledger directory's volumes-table row for a directory that was not read."""
    return {
        "bookie": bookie,
        "directory": directory,
        "index_directory": None,
        "storage": None,
        "status": status,
        "detail": detail,
        "copies": 0,
        "good_copies": 0,
        "bytes_read": 0,
        "seconds": 0.0,
        "host": host,
        "cpu_seconds": 0.0,
    }


def _not_read(
    schema: pa.Schema, host: str, dirs: Sequence[str], kind: str, detail: str, bookie: Optional[str]
) -> Iterator[pa.RecordBatch]:
    """One finding of `kind` and a VOLUME row per directory of `dirs`: nothing read there."""
    found = [_finding(kind, f"{d} on {host}: {detail}", bookie=bookie, file=d) for d in dirs]
    yield from _table(schema, "FINDING", [_finding_row(f) for f in found]).to_batches()
    yield from _table(schema, "TALLY", [_tally(found, verified_copies=0)]).to_batches()
    rows = [_volume(host, d, kind, detail, bookie) for d in dirs]
    yield from _table(schema, "VOLUME", rows).to_batches()


def _scan_host(
    item: Dict[str, Any],
    metadata: Dict[int, LedgerMetadata],
    instance_id: Optional[str],
    registered: Optional[Dict[str, bytes]],
    per_batch: int = COPIES_PER_BATCH,
    also: Sequence[str] = (),
    metadata_only: bool = False,
    state: Optional[Dict[str, Any]] = None,
    bytes_per_second: Optional[float] = None,
) -> Iterator[pa.RecordBatch]:
    """The rows of one host's task (see the module docstring); `bytes_per_second`: each
    ledger directory's read rate (merkle.replica.results.volume_pace)."""
    from spark_udfs.cluster.locality import this_executor_host

    host, want = item["host"], item.get("bookie")
    ran_on = this_executor_host()
    # on local[*] the driver is the only executor (ran_on None): its own host's bookies only
    here = item["local"] if ran_on is None else ran_on.lower() in item["names"]
    if not here:
        yield from _not_read(
            _arrow(_STAGE1),
            host,
            item["volumes"],
            WRONG_HOST,
            f"the task ran on {ran_on or 'the driver'}, not on {host} ({item['at']}): nothing read",
            want,
        )
        return
    states, note = None, None
    if state:
        try:
            states, note = host_states(state, item["volumes"])
        except (ValueError, OSError, sqlite3.Error) as exc:  # StateError is a ValueError
            yield from _not_read(
                _arrow(_STAGE1), host, item["volumes"], VOLUME_FAILED,
                f"on {host}: {redact(str(exc))}", want,
            )  # fmt: skip
            return
    try:
        yield from host_batches(
            host,
            item["volumes"],
            want,
            metadata,
            instance_id,
            registered,
            per_batch,
            also,
            metadata_only,
            states=states,
            note=note,
            pace=None if metadata_only or not bytes_per_second else volume_pace(bytes_per_second),
        )
    finally:
        if states is not None:
            states.state.close()


def host_states(state: Dict[str, Any], volumes: Sequence[str]) -> Tuple[Any, Optional[str]]:
    """(the LogStates of this host's ledger directories `volumes`, in their own database
    under the state directory on this host; the warning of a database moved aside or None).
    StateError (one line) when the directory or database cannot be trusted."""
    from merkle.replica.bookkeeper.state import LogStates
    from merkle.replica.scanstate import ScanState, volume_state_dir

    warnings: List[str] = []
    named = "bookkeeper\0" + "\0".join(sorted(volumes))  # one database per set of dirs
    db = ScanState(volume_state_dir(state["dir"], named), list(volumes), warnings.append)
    return LogStates(db, state.get("max_age")), (redact(" ".join(warnings)) if warnings else None)


def host_batches(
    host: str,
    volumes: Sequence[str],
    want: Optional[str],
    metadata: Dict[int, LedgerMetadata],
    instance_id: Optional[str],
    registered: Optional[Dict[str, bytes]],
    per_batch: int = COPIES_PER_BATCH,
    also: Sequence[str] = (),
    metadata_only: bool = False,
    states: Optional[Any] = None,
    note: Optional[str] = None,
    pace: Optional[Any] = None,
    threads: int = 1,
) -> Iterator[pa.RecordBatch]:
    """Stage 1's rows of one host's ledger directories `volumes` (read here: the caller has
    checked it runs on `host`): their listing and cookie findings, each bookie whose ID is
    not `want` (the inventory's, if it names one) refused as WRONG_BOOKIE, each storage
    verified (scan_storage; its census with `metadata_only`), one LISTING row per bookie.
    The data-local task's work, and what `crcmerkle scan BOOKIE_DIR... --emit URI` writes
    (spark_udfs.jobs.bookkeeper.emit). `states` (--state): the host's entry logs' records
    (merkle.replica.bookkeeper.state), the pass complete when every storage was visited;
    `note`: a warning for the directories' rows (its database was moved aside); `threads`:
    the storages verified at once (`scan --loop --emit`: one thread per disk, each at its
    own rate), their rows yielded in the storages' order all the same."""
    from concurrent.futures import ThreadPoolExecutor

    from merkle.replica.bookkeeper.scan import coverage_of, list_bookies, scan_storage

    schema = _arrow(_STAGE1)
    listing = list_bookies(
        volumes,
        instance_id=instance_id,
        registered_cookies=registered,
        instance_vote=False,  # the driver votes over every host's bookies
    )
    failed = listing.report.failed
    found = list(listing.report.findings)
    if failed:  # a ledger directory of the inventory that is missing, or holds no bookie
        for f in failed:
            found.append(
                _finding(
                    VOLUME_FAILED, f"on {host}: {redact(f['error'])}", bookie=want, file=f["path"]
                )
            )
        rows = [_volume(host, f["path"], VOLUME_FAILED, redact(f["error"]), want) for f in failed]
        yield from _table(schema, "VOLUME", rows).to_batches()
    kept = {}
    for bookie, ds in sorted(listing.by_bookie.items()):
        if want is not None and bookie != want:
            detail = (
                f"its cookie names bookie {bookie}; the inventory puts {want} on {host}: "
                f"not scanned"
            )
            yield from _not_read(schema, host, [d.path for d in ds], WRONG_BOOKIE, detail, want)
            continue
        kept[bookie] = ds
    yield from _table(schema, "FINDING", [_finding_row(f) for f in found]).to_batches()
    yield from _table(schema, "TALLY", [_tally(found, verified_copies=0)]).to_batches()
    read: Dict[str, str] = {}
    storages = Listing(listing.report, kept).storages()

    def verify(item: Tuple[str, List[Any]]) -> Tuple[Any, float, float]:
        t0, c0 = time.perf_counter(), time.thread_time()  # this storage's thread alone
        part = scan_storage(item[1], item[0], metadata, also, metadata_only, states, pace)
        return part, time.perf_counter() - t0, time.thread_time() - c0

    def done() -> Iterator[Tuple[Any, float, float]]:
        if threads <= 1 or len(storages) <= 1:  # one at a time: one storage's copies held
            yield from map(verify, storages)
            return
        with ThreadPoolExecutor(max_workers=min(threads, len(storages))) as pool:
            yield from pool.map(verify, storages)

    for (_, storage), (part, seconds, cpu) in zip(storages, done()):
        read.update(part.read)
        yield from storage_batches(
            schema, storage, part, seconds, per_batch, host=host, cpu_seconds=cpu, note=note
        )
    if states is not None:
        states.complete()
    cov = coverage_of(kept, read)
    rows = []
    for bookie, ds in kept.items():
        cookie = ds[0].cookie
        assert cookie is not None
        num, positions, db = cov.scanned.get(bookie, (len(cookie.ledger_dirs), (), False))
        rows.append(
            {
                "bookie": bookie,
                "host": host,
                "num_dirs": num,
                "positions": list(positions),
                "db": db,
                "covered": bookie in cov.scanned,
                "instance_id": cookie.instance_id or None,
                "cookie_file": os.path.join(ds[0].current, "VERSION"),
            }
        )
    if rows:
        yield from _table(schema, "LISTING", rows).to_batches()


def _task_fn(metadata: Any, source: Dict[str, Any], idle_io: bool) -> Any:
    """The stage: each task's item (one host, as JSON) scanned."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        if idle_io:
            from merkle.replica.politeio import set_idle_io_priority

            set_idle_io_priority()  # where the kernel offers it; the scan goes on either way
        for b in batches:
            for text in b.column(0).to_pylist():
                yield from _scan_host(
                    json.loads(text),
                    metadata.value,
                    source["instance_id"],
                    source["cookies"],
                    also=source["also"],
                    metadata_only=source["metadata_only"],
                    state=source.get("state"),
                    bytes_per_second=source.get("bytes_per_second"),
                )

    return run


def _items(
    inventory: Inventory, registered: Sequence[str], local: bool
) -> Tuple[Dict[str, List[Tuple[str, List[str]]]], List[Host]]:
    """({executor host: its one task item with its preferred host}, the hosts without an
    executor)."""
    from spark_udfs.jobs.hostscan import executor_of

    items: Dict[str, List[Tuple[str, List[str]]]] = defaultdict(list)
    missing: List[Host] = []
    for h in inventory.hosts:
        at = executor_of(h, registered)
        if at is None:
            missing.append(h)
            continue
        names = sorted({n.lower().rstrip(".") for n in (*h.names(), at)})
        item = {
            "host": h.host,
            "at": at,
            "names": names,
            "bookie": h.bookie,
            "volumes": list(h.volumes),
            "local": local,
        }
        items[at].append((json.dumps(item), [at]))
    return items, missing


def _no_executor(h: Host, why: str) -> Tuple[List[Finding], List[Dict[str, Any]]]:
    detail = f"no Spark executor on {h.host}{why}: nothing of it was read"
    found = [
        _finding(NO_EXECUTOR, f"{v} on {h.host}: {detail}", bookie=h.bookie, file=v)
        for v in h.volumes
    ]
    return found, [_volume(h.host, v, NO_EXECUTOR, detail, h.bookie) for v in h.volumes]


def _across_hosts(
    listed: List[Any], instance_id: Optional[str]
) -> Tuple[Coverage, List[Finding], Set[Tuple[str, str]], Dict[str, str]]:
    """The driver's checks over the LISTING rows: (the Coverage of the bookies read on one
    host only, the findings (DUPLICATE_BOOKIE, a minority instanceId), the (host, bookie)
    pairs left out of the comparison, bookie -> host)."""
    on: Dict[str, List[Any]] = defaultdict(list)
    for r in listed:
        on[r["bookie"]].append(r)
    found: List[Finding] = []
    excluded: Set[Tuple[str, str]] = set()
    cov = Coverage()
    hosts: Dict[str, str] = {}
    for bookie, rows in sorted(on.items()):
        if len(rows) > 1:
            names = sorted(r["host"] for r in rows)
            for r in rows:
                excluded.add((r["host"], bookie))
                found.append(
                    _finding(
                        DUPLICATE_BOOKIE,
                        f"bookie {bookie}'s ledger directories are on {len(rows)} hosts "
                        f"({', '.join(names[:8])}), this one on {r['host']}: none of their "
                        f"copies is counted as its",
                        bookie=bookie,
                        file=None,
                    )
                )
            continue
        r = rows[0]
        hosts[bookie] = r["host"]
        if r["covered"]:
            cov.scanned[bookie] = (
                int(r["num_dirs"]),
                tuple(int(p) for p in r["positions"] or ()),
                bool(r["db"]),
            )
    if instance_id is None:  # no INSTANCEID from the store: the bookies' majority decides
        ids = {b: r[0]["instance_id"] for b, r in on.items() if r[0]["instance_id"]}
        counts: Dict[str, int] = defaultdict(int)
        for v in ids.values():
            counts[v] += 1
        if counts:
            expected = max(sorted(counts), key=lambda v: counts[v])
            for bookie, value in sorted(ids.items()):
                if value != expected:
                    found.append(
                        _finding(
                            COOKIE_MISMATCH,
                            f"instanceId {value[:64]} is not the cluster's {expected[:64]} "
                            f"(a bookie of another cluster; on {on[bookie][0]['host']})",
                            bookie=bookie,
                            file=on[bookie][0]["cookie_file"],
                        )
                    )
    return cov, found, excluded, hosts


def _against_inventory(
    inventory: Inventory, listed: List[Any], small: List[Any]
) -> Tuple[List[Any], Set[Tuple[str, str]], List[Finding], List[Dict[str, Any]]]:
    """Emitted rows against the inventory: (the LISTING rows kept, the (host, bookie) pairs
    refused as WRONG_BOOKIE, the findings: those and a NOT_SCANNED per ledger directory of
    each inventory host that emitted nothing, and the volume rows of the latter)."""
    emitted = {r["host"] for r in small if r["kind"] == "VOLUME"} | {r["host"] for r in listed}
    found: List[Finding] = []
    rows: List[Dict[str, Any]] = []
    refused: Set[Tuple[str, str]] = set()
    kept = []
    for r in listed:
        h = inventory.host_named(r["host"])
        want = h.bookie if h is not None else None
        if want is not None and r["bookie"] != want:
            refused.add((r["host"], r["bookie"]))
            found.append(
                _finding(
                    WRONG_BOOKIE,
                    f"on {r['host']}: its cookie names bookie {r['bookie']}; the inventory "
                    f"puts {want} there: not counted",
                    bookie=want,
                    file=r["cookie_file"],
                )
            )
            continue
        kept.append(r)
    for h in inventory.hosts:
        if any(n in emitted for n in h.names()) or any(
            inventory.host_named(e) is h for e in emitted
        ):
            continue
        detail = f"{h.host} emitted nothing: none of its ledger directories was read"
        found += [
            _finding(NOT_SCANNED, f"{v}: {detail}", bookie=h.bookie, file=v) for v in h.volumes
        ]
        rows += [_volume(h.host, v, NOT_SCANNED, detail, h.bookie) for v in h.volumes]
    return kept, refused, found, rows


def _stray_copies(
    stage1: Any, counted: List[str], excluded: Set[Tuple[str, str]], listed: List[Any]
) -> List[Finding]:
    """Copy rows whose (host, bookie) is none the hosts listed (`counted`, host NUL bookie):
    a row names any host and bookie it likes (an emitted file planted or written by a host
    that lies, or a task's bug), so a copy counts only as a copy of the bookie its own host
    listed, and only once per host. One WRONG_BOOKIE per such pair, beside those the
    listings already explain (`excluded`: duplicates, the inventory's refusals)."""
    from pyspark.sql import functions as F

    pair = F.concat_ws("\0", "host", "bookie")
    strays = (
        stage1.filter((F.col("kind") == "COPY") & ~pair.isin(counted))
        .groupBy("host", "bookie")
        .count()
        .collect()
    )
    on: Dict[str, List[str]] = defaultdict(list)
    for r in listed:
        on[r["host"]].append(r["bookie"])
    found = []
    for r in sorted(strays, key=lambda r: (str(r["host"]), str(r["bookie"]))):
        host, bookie = r["host"], r["bookie"]
        if (host, bookie) in excluded:
            continue
        listing = ", ".join(str(b)[:64] for b in sorted(on.get(host, []))) or "no bookie"
        found.append(
            _finding(
                WRONG_BOOKIE,
                f"{r['count']} copy rows of {str(host)[:64]!r} name bookie {str(bookie)[:64]!r}, "
                f"which that host did not list (its listing names {listing}): not counted",
                bookie=None if bookie is None else str(bookie)[:64],
            )
        )
    return found


def scan_bookie_hosts(
    spark: Any,
    inventory: Inventory,
    metadata: Dict[int, LedgerMetadata],
    *,
    instance_id: Optional[str] = None,
    registered_cookies: Optional[Dict[str, bytes]] = None,
    unread: Optional[Dict[int, str]] = None,
    metadata_complete: bool = True,
    idle_io: bool = True,
    executor_wait: float = DEFAULT_EXECUTOR_WAIT,
    also: Sequence[str] = (),
    metadata_only: bool = False,
    state: Optional[Dict[str, Any]] = None,
    bytes_per_second: Optional[float] = None,
) -> BookieTables:
    """Scan every bookie host of `inventory` where it is (see the module docstring): the
    tables of spark_udfs.jobs.bookkeeper.scan_bookkeeper (a census with `metadata_only`).
    `state` (`--state`: {"dir": the state directory on every host, "max_age": seconds or
    None}): each host's task keeps its entry logs' records in its own database there
    (merkle.replica.bookkeeper.state), so that a rerun after a lost executor reads only the
    logs the lost one had not recorded. `bytes_per_second`: each ledger directory's read
    rate on its host (--bytes-per-second, as each datanode volume's)."""

    from spark_udfs.jobs.hostscan import registered_hosts, run_per_host

    t0 = time.perf_counter()
    sc = spark.sparkContext
    local, registered = registered_hosts(sc, inventory, executor_wait)
    per_host, missing = _items(inventory, registered, local)
    meta_bc = sc.broadcast(metadata)
    source = {
        "instance_id": instance_id,
        "cookies": registered_cookies,
        "also": tuple(also),
        "metadata_only": metadata_only,
        "state": state,
        "bytes_per_second": bytes_per_second,
    }
    fn = _task_fn(meta_bc, source, idle_io)
    lost: Set[str] = set()
    if per_host:
        stage1, lost = run_per_host(spark, per_host, fn, local, schema=_STAGE1)
    else:  # every host lacks an executor: nothing to run, the findings say why
        stage1 = spark.createDataFrame([], _STAGE1)
    driver_found: List[Finding] = []
    volumes: List[Dict[str, Any]] = []
    by_name = {h.host: h for h in inventory.hosts}
    for h in missing:
        op_state = ", ".join(s for s in (h.op_state, h.health) if s)
        f, v = _no_executor(h, f" ({op_state})" if op_state else "")
        driver_found += f
        volumes += v
    for at in sorted(lost):  # their results dropped: the findings say why
        for text, _ in per_host[at]:
            h = by_name[json.loads(text)["host"]]
            f, v = _no_executor(h, " (its executor was lost during the scan)")
            driver_found += f
            volumes += v
    return judge_hosts(
        spark,
        stage1,
        metadata,
        meta_bc,
        instance_id=instance_id,
        driver_found=driver_found,
        volumes=volumes,
        tasks=sum(len(v) for v in per_host.values()),
        unread=unread,
        metadata_complete=metadata_complete,
        t0=t0,
        census=metadata_only,
    )


def judge_hosts(
    spark: Any,
    stage1: Any,
    metadata: Dict[int, LedgerMetadata],
    meta_bc: Any,
    *,
    instance_id: Optional[str],
    driver_found: List[Finding],
    volumes: List[Dict[str, Any]],
    tasks: int,
    unread: Optional[Dict[int, str]] = None,
    metadata_complete: bool = True,
    t0: Optional[float] = None,
    inventory: Optional[Inventory] = None,
    census: bool = False,
) -> BookieTables:
    """Stage 2 over the hosts' stage-1 rows (`stage1`: host_batches' rows of every host,
    cached or read from emitted files): the checks across hosts (_across_hosts), then
    judge_stage1. `driver_found` and `volumes`: findings and volume rows the caller made
    (hosts without an executor); `inventory` (emitted rows only: the data-local tasks
    checked it on the hosts): a host that emitted nothing is NOT_SCANNED, and a bookie on a
    host the inventory gives another bookie is WRONG_BOOKIE, its copies not counted.
    `census`: the rows are a census's (host_batches with `metadata_only`)."""
    from pyspark.sql import functions as F

    t0 = time.perf_counter() if t0 is None else t0
    driver_found, volumes = list(driver_found), list(volumes)
    small = stage1.filter(F.col("kind").isin("VOLUME", "FAILED", "TALLY", "LISTING")).collect()
    listed = [r for r in small if r["kind"] == "LISTING"]
    refused: Set[Tuple[str, str]] = set()
    if inventory is not None:
        listed, refused, found, vrows = _against_inventory(inventory, listed, small)
        driver_found += found
        volumes += vrows
    coverage, across, excluded, hosts = _across_hosts(listed, instance_id)
    driver_found += across
    counted = sorted(f"{h}\0{b}" for b, h in hosts.items())
    driver_found += _stray_copies(stage1, counted, excluded | refused, listed)
    small = [r for r in small if r["kind"] != "LISTING"]
    # a bookie claimed on two hosts: its directories' rows say so, and count no copy
    status = {pair: DUPLICATE_BOOKIE for pair in excluded}
    status.update({pair: WRONG_BOOKIE for pair in refused})
    excluded |= refused
    vols = []
    for r in small:
        if r["kind"] == "VOLUME" and (r["host"], r["bookie"]) in status:
            d = r.asDict()
            d.update(status=status[(r["host"], r["bookie"])], copies=0, good_copies=0)
            volumes.append(d)
            continue
        vols.append(r)
    bookies: Dict[str, List[str]] = defaultdict(list)
    for r in vols:
        if r["kind"] == "VOLUME" and r["status"] in (SCANNED, VOLUME_FAILED) and r["bookie"]:
            if r["bookie"] in hosts:
                bookies[r["bookie"]].append(r["directory"])
    if excluded:  # their VOLUME rows are replaced by the ones with the new status above
        pair = F.concat_ws("\0", "host", "bookie")
        gone = (F.col("kind") == "VOLUME") & pair.isin(sorted("\0".join(k) for k in excluded))
        stage1 = stage1.filter(~gone)
    tables = judge_stage1(
        spark,
        stage1,
        vols,
        metadata,
        meta_bc,
        Stage1View(
            coverage=coverage,
            findings=driver_found,
            failed=[],
            bookies={b: sorted(ds) for b, ds in sorted(bookies.items())},
            tasks=tasks,
            excluded=sorted(excluded),
            counted=counted,
            hosts=hosts,
            volumes=volumes,
        ),
        unread=unread,
        metadata_complete=metadata_complete,
        t0=t0,
        census=census,
    )
    return tables
