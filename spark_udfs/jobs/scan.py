"""The scan job: verify the replicas of many datanodes in parallel, reading files on executors.

The driver only lists replicas, through each root's layout (merkle.replica.layouts.layout_of:
its volumes and their replicas), and hands them out as work items, one per replica (layout,
datanode, location, container ID), spread over `partitions` tasks; one job scans one layout.
Each task then, for every replica it was given, runs the layout's own scan (Layout.scan: the
local verifier, merkle.replica.verify, over the layout's ReplicaFiles): it reads the block
metadata, reads every block file front to back into one reused buffer, checksums each read's
windows in one native call, compares them with the recorded ones, builds the tree from the
observed checksums and merges it into the stored `.tree`. Block bytes never enter the JVM or
an Arrow batch; only the results travel, as Arrow batches built from numpy columns (no Python
object per chunk).

Why the replica is the unit of work: one stage, no shuffle, and a replica's blocks are read
sequentially by one reader. Splitting replicas into per-block or per-chunk items was
measured slower (bench/test_bench_spark.py: two more stages and two shuffles to regroup the
chunks for the tree merge cost more than the reading itself); on a real cluster replicas
outnumber cores by orders of magnitude, so the balance comes from their count. The job never
writes into the replicas (a scan that updates `.tree` files is the local scanner's job), so
the rules, errors and trees are the local scanner's by construction.

`trees_only=True` skips the data and reads the stored `.tree` files instead; `metadata_only=True`
is the census (merkle.replica.census): trees from the stored `.tree` or the recorded checksums,
no data read. spark_udfs.jobs.hostscan scans a cluster where its disks are (one task per host and
volume, on that host).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import pyarrow as pa

from merkle.replica.blocks import ContainerMeta
from merkle.replica.errors import ReplicaError
from merkle.replica.layout import Layout, ReplicaRef
from merkle.replica.layouts import layout_of
from merkle.replica.levels import counts_as_failure, severity_of
from merkle.replica.recorded import RecordedChecksums
from merkle.replica.scan import ScanError
from merkle.replica.uri import display, join, redact
from merkle.trees.model import ContainerTree
from spark_udfs.tables import (
    ALSO_COLUMNS,
    ALSO_SCHEMA,
    CHUNK_COLUMNS,
    CHUNK_TABLE_COLUMNS,
    CHUNK_TABLE_SCHEMA,
    RECORDED_ARROW,
    also_block_columns,
    also_chunk_columns,
    block_rows,
    recorded_chunk_columns,
    tree_to_rows,
)

__all__ = [
    "BLOCK_SCHEMA",
    "DUPLICATE_DATANODE",
    "DUPLICATE_REPLICA",
    "ERROR_SCHEMA",
    "NOT_IN_INVENTORY",
    "NOT_SCANNED",
    "NO_EXECUTOR",
    "REPLICAS_PER_TASK",
    "REPLICA_SCHEMA",
    "ROWS_PER_FILE",
    "SCANNED",
    "SCAN_FAILED",
    "ScanTables",
    "TABLE_SCHEMAS",
    "VOLUME_COLUMNS",
    "VOLUME_FAILED",
    "VOLUME_SCHEMA",
    "VOLUME_STATUSES",
    "WRONG_DATANODE",
    "WRONG_HOST",
    "scan_replicas",
    "volume_figures",
    "volume_frame",
]

#: `severity`: "error" or "warning" (merkle.replica.levels; absent from scans written before
#: findings had levels, whose findings are all judged errors)
#: `host`: the host the datanode was scanned on (the inventory's name; null for a scan of one
#: directory tree, which knows no hosts)
ERROR_SCHEMA = (
    "datanode string, replica string, container long, error string, block long, "
    "offset long, detail string, severity string, host string"
)
#: `ok`: no error-level finding (warnings leave a replica ok); `errors`: every finding of the
#: replica (its rows in the errors table), `warnings`: how many of them are warnings
REPLICA_SCHEMA = (
    "datanode string, replica string, container long, data_checksum long, "
    "ok boolean, errors long, blocks long, chunks long, bytes_read long, "
    "tombstones long, unhealthy_chunks long, verified boolean, warnings long, "
    "host string"
)
#: the --also columns (spark_udfs.tables.ALSO_SCHEMA): the whole block's value, big-endian
BLOCK_SCHEMA = (
    "datanode string, replica string, container long, block long, "
    "block_value long, deleted boolean, chunks long, bytes long, "
    "checksum_matches boolean, chunk_offsets array<bigint>, "
    "chunk_lengths array<bigint>, chunk_leaves array<bigint>, "
    "chunk_matches array<boolean>, " + ALSO_SCHEMA
)
#: the blocks table's columns as selected from the stage's BLOCK rows
_BLOCK_SELECT = (
    "datanode",
    "replica",
    "container",
    "block",
    ("data_checksum", "block_value"),
    "deleted",
    "chunks",
    ("length", "bytes"),
    "checksum_matches",
    "chunk_offsets",
    "chunk_lengths",
    "chunk_leaves",
    "chunk_matches",
    *ALSO_COLUMNS,
)

#: one row per volume the job meant to scan: who owns it (`datanode`: its recorded identity,
#: `host`: where it was meant to be read, null for one directory tree), where it is mounted,
#: what became of it (`status`, one of VOLUME_STATUSES; `detail` says why in one line), how
#: many replicas it held, the bytes read, the task's seconds on it, and the host the task
#: ran on (`ran_on`, as the executor registered; null where the job knows no hosts).
#: Then the periodic validator's figures (the data-local scan's, null where no task read the
#: volume): `replicas_read` of `replicas` (with --state the others were verified within
#: --max-age or earlier in the pass, and not read again), `bytes_total` the data bytes of
#: every replica (read now, or as last read: what a full pass reads), `oldest_verified_at`
#: the oldest verification among its replicas (Unix time), `read_seconds` the replicas' scan
#: seconds (bytes_read over read_seconds: the rate a full pass is timed at)
VOLUME_SCHEMA = (
    "datanode string, host string, volume string, cluster_id string, "
    "status string, detail string, replicas long, bytes_read long, "
    "seconds double, ran_on string, replicas_read long, bytes_total long, "
    "oldest_verified_at double, read_seconds double"
)
VOLUME_COLUMNS: Tuple[str, ...] = tuple(c.split()[0] for c in VOLUME_SCHEMA.split(", "))


def volume_figures(
    tracker: Any, root: str, scanned: int, read: int, read_seconds: float, started: float
) -> Dict[str, Any]:
    """A scanned volume's periodic-validator figures (VOLUME_SCHEMA's last four columns),
    for a task or an emit that read volume `root`: with --state (`tracker`, a
    merkle.replica.incremental.StateTracker) its count of replicas read and carried and the
    oldest verification it keeps; without, every replica verified (`scanned` of them, `read`
    bytes in `read_seconds`) was verified by this run, the oldest when it `started` (Unix
    time)."""
    fig = None if tracker is None else tracker.volumes.get(root)
    if fig is not None:
        return {
            "replicas_read": fig.read,
            "bytes_total": fig.bytes_total,
            "oldest_verified_at": fig.oldest,
            "read_seconds": fig.seconds,
        }
    return {
        "replicas_read": scanned,
        "bytes_total": read,
        "oldest_verified_at": started if scanned else None,
        "read_seconds": read_seconds,
    }


def volume_frame(spark: Any, rows: Sequence[Sequence[Any]]) -> Any:
    """The volumes table from rows in VOLUME_SCHEMA's order; a row that stops before the
    periodic validator's figures (a volume no task read: listed, failed, without an
    executor, not in the tables) has them null."""
    n = len(VOLUME_COLUMNS)
    return spark.createDataFrame([tuple(r) + (None,) * (n - len(r)) for r in rows], VOLUME_SCHEMA)


#: the volume was read (its replicas' findings are in the other tables); every other status
#: is a finding with its level (merkle.replica.levels)
SCANNED: str = "SCANNED"
#: the task ran on another host than the volume's: it read nothing (its replicas UNVERIFIED)
WRONG_HOST = "WRONG_HOST"
#: the volume's recorded identity (Ozone: VERSION's datanodeUuid or clusterID) is not the
#: datanode the inventory puts there, or disagrees with its host's other volumes: not scanned
#: as someone else's
WRONG_DATANODE = "WRONG_DATANODE"
#: two hosts' volumes claim one datanode identity: neither is counted as that datanode's
DUPLICATE_DATANODE = "DUPLICATE_DATANODE"
#: the inventory host had no executor when the job started: nothing of it was read
NO_EXECUTOR = "NO_EXECUTOR"
#: the volume could not be read at all (missing, a VERSION Ozone would refuse, I/O error)
VOLUME_FAILED = "VOLUME_FAILED"
#: a volume of the inventory for which the scan tables hold no row (the --emit route: the
#: host, or that volume of it, emitted nothing)
NOT_SCANNED = "NOT_SCANNED"
#: an emitted volume the --datanodes inventory does not give its host (or a host it does not
#: list): scanned, but none of its replicas is counted (spark_udfs.cluster.vouch)
NOT_IN_INVENTORY = "NOT_IN_INVENTORY"
VOLUME_STATUSES = (
    SCANNED,
    WRONG_HOST,
    WRONG_DATANODE,
    DUPLICATE_DATANODE,
    NO_EXECUTOR,
    VOLUME_FAILED,
    NOT_SCANNED,
    NOT_IN_INVENTORY,
)

#: a replica the scanner could not finish (an I/O error on its metadata, a vanished
#: directory): reported as an error row, the other replicas of the task go on
SCAN_FAILED = "SCAN_FAILED"
#: a second replica of one container on one datanode (listed, never scanned)
DUPLICATE_REPLICA = "DUPLICATE_REPLICA"

#: replicas per task, at most: few tasks, because each costs ~50-100 ms of Python worker
#: hand-off (measured: 8 tasks for 32 small replicas took 2x as long as 2), yet small
#: enough that a failed or slow task redoes little (32 replicas of 5 GB: ~3 minutes of
#: reading at 1 GB/s)
REPLICAS_PER_TASK = 32

#: the work items: one row per replica (merkle.replica.layout.ReplicaRef's fields)
_WORK_SCHEMA = (
    "layout string, datanode string, replica string, container long, fs_root string, fs_path string"
)

#: every output row of the stage, told apart by `kind`: CHUNK (spark_udfs.tables columns),
#: BLOCK (a block of the merged tree), ERROR, REPLICA (one summary per replica)
_OUT_ARROW = pa.schema(
    [
        ("kind", pa.string()),
        ("datanode", pa.string()),
        ("replica", pa.string()),
        ("container", pa.int64()),
        ("block", pa.int64()),
        ("offset", pa.int64()),
        ("length", pa.int64()),
        ("leaf", pa.int64()),
        ("checksum_matches", pa.bool_()),
        ("deleted", pa.bool_()),
        ("error", pa.string()),
        ("detail", pa.string()),
        ("data_checksum", pa.int64()),
        ("ok", pa.bool_()),
        ("errors", pa.int64()),
        ("blocks", pa.int64()),
        ("chunks", pa.int64()),
        ("bytes_read", pa.int64()),
        ("tombstones", pa.int64()),
        ("unhealthy_chunks", pa.int64()),
        ("verified", pa.bool_()),
        ("severity", pa.string()),
        ("warnings", pa.int64()),
        ("chunk_offsets", pa.list_(pa.int64())),
        ("chunk_lengths", pa.list_(pa.int64())),
        ("chunk_leaves", pa.list_(pa.int64())),
        ("chunk_matches", pa.list_(pa.bool_())),
        ("host", pa.string()),
        ("volume", pa.string()),
        ("cluster_id", pa.string()),
        ("status", pa.string()),
        ("seconds", pa.float64()),
        ("ran_on", pa.string()),
        ("replicas_read", pa.int64()),
        ("bytes_total", pa.int64()),
        ("oldest_verified_at", pa.float64()),
        ("read_seconds", pa.float64()),
        *((a, pa.binary()) for a in ALSO_COLUMNS),
        *RECORDED_ARROW,
    ]
)
_SPARK_TYPES = {
    pa.string(): "string",
    pa.int64(): "long",
    pa.bool_(): "boolean",
    pa.float64(): "double",
    pa.binary(): "binary",
    pa.list_(pa.int64()): "array<bigint>",
    pa.list_(pa.bool_()): "array<boolean>",
}
_OUT_SCHEMA = ", ".join(f"{f.name} {_SPARK_TYPES[f.type]}" for f in _OUT_ARROW)


def _rows(kind: str, n: int, columns: Dict[str, Any]) -> pa.Table:
    """n output rows of one kind: the given columns, nulls in the others."""
    arrays = []
    for f in _OUT_ARROW:
        if f.name == "kind":
            arrays.append(pa.array([kind] * n, type=pa.string()))
        elif f.name in columns:
            v = columns[f.name]
            arrays.append(
                v if isinstance(v, (pa.Array, pa.ChunkedArray)) else pa.array(v, type=f.type)
            )
        else:
            arrays.append(pa.nulls(n, type=f.type))
    return pa.Table.from_arrays(arrays, schema=_OUT_ARROW)


def _block_rows(
    datanode: str, replica: str, tree: ContainerTree, also: Optional[Dict[str, Any]] = None
) -> pa.Table:
    """The blocks-table rows of a tree (spark_udfs.tables.block_rows) as output rows, with
    the --also values of the blocks read in full (merkle.replica.also)."""
    t = block_rows(datanode, tree, replica)
    rename = {"block_value": "data_checksum", "bytes": "length"}
    cols = {rename.get(c, c): t.column(c) for c in t.column_names}
    if also:
        cols.update(also_block_columns(also, tree.block_id))
    return _rows("BLOCK", t.num_rows, cols)


def _select_blocks(out: Any) -> Any:
    """The blocks table from the stage's BLOCK rows (BLOCK_SCHEMA's columns)."""
    from pyspark.sql import functions as F

    return out.select(
        *(F.col(c[0]).alias(c[1]) if isinstance(c, tuple) else c for c in _BLOCK_SELECT)
    )


def _error_rows(
    datanode: str, replica: str, container: int, errors: List[ScanError], host: Optional[str] = None
) -> pa.Table:
    n = len(errors)
    return _rows(
        "ERROR",
        n,
        {
            "datanode": [datanode] * n,
            "replica": [replica] * n,
            "container": [container] * n,
            "host": [host] * n,
            "block": [e.block_id for e in errors],
            "offset": [e.offset for e in errors],
            "error": [e.kind for e in errors],
            "detail": [e.detail for e in errors],
            "severity": [e.severity for e in errors],
        },
    )


def _replica_rows(
    datanode: str,
    replica: str,
    container: int,
    tree: Optional[ContainerTree],
    errors: List[ScanError],
    blocks: int,
    chunks: int,
    bytes_read: int,
    verified: bool,
    host: Optional[str] = None,
    also: Optional[Dict[str, Any]] = None,
    meta: Optional[ContainerMeta] = None,
) -> List[pa.Table]:
    """All output rows of one replica: its chunks and blocks (if it has a tree), its errors,
    and its summary. `verified`: something of the replica was actually read (see
    _verified); a container none of whose replicas was is not reported as matching.
    `also`: the scan's --also values (ScanResult.also), in the chunk and block rows.
    `meta`: the block metadata the scan read (ScanResult.meta): each chunk row's recorded
    checksums (spark_udfs.tables.RECORDED_COLUMNS; null without it)."""
    out = []
    if tree is not None:
        chunk_rows = tree_to_rows(datanode, tree, replica)
        cols = {c: chunk_rows.column(c) for c in CHUNK_COLUMNS}
        if also:
            cols.update(
                also_chunk_columns(also, chunk_rows.column("block"), chunk_rows.column("offset"))
            )
        if meta is not None:
            cols.update(
                recorded_chunk_columns(
                    RecordedChecksums.from_meta(meta),
                    chunk_rows.column("block"),
                    chunk_rows.column("offset"),
                )
            )
        out.append(_rows("CHUNK", chunk_rows.num_rows, cols))
        out.append(_block_rows(datanode, replica, tree, also))
    if errors:
        out.append(_error_rows(datanode, replica, container, errors, host))
    out.append(
        _rows(
            "REPLICA",
            1,
            {
                "datanode": [datanode],
                "replica": [replica],
                "container": [container],
                "host": [host],
                "data_checksum": [None if tree is None else tree.data_checksum],
                "ok": [not any(counts_as_failure(e.severity) for e in errors)],
                "errors": [len(errors)],
                "warnings": [sum(1 for e in errors if e.is_warning)],
                "blocks": [blocks],
                "chunks": [chunks],
                "bytes_read": [bytes_read],
                "tombstones": [0 if tree is None else int(tree.block_deleted.sum())],
                "unhealthy_chunks": [0 if tree is None else int((~tree.chunk_matches).sum())],
                "verified": [verified],
            },
        )
    )
    return out


def _verified(r: Any) -> bool:
    """A scan verified a replica when it read its block metadata and, if that lists any
    chunk, some bytes of its block files: a replica whose metadata or files the executor
    could not reach (a path only the driver sees, a store it cannot reach) was not verified,
    whatever its stored tree says."""
    return bool(r.verified)  # merkle.replica.results.ScanResult.verified


def _work(batches: Iterator[pa.RecordBatch]) -> Iterator[ReplicaRef]:
    for b in batches:
        for r in b.to_pylist():
            yield ReplicaRef(
                r["layout"],
                r["datanode"],
                r["replica"],
                int(r["container"]),
                r["fs_root"],
                r["fs_path"],
            )


def _scan_fn(
    layouts: Dict[str, Layout],
    trees_only: bool,
    metadata_only: bool = False,
    bytes_per_second: Optional[float] = None,
    also: Sequence[str] = (),
) -> Any:
    """The stage (see the module docstring). `layouts`: the job's layouts by name, resolved
    on the driver and shipped with the function (a layout registered by a program or a test
    need not be registered on the executors: its module is imported there)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Scan every replica of this task through its layout; the items arrive in volume
        order, so that a layout shares work across a volume's replicas (Ozone: one RocksDB
        open per volume and task). trees_only: the stored `.tree` of each replica alone;
        metadata_only: the census (Layout.scan); bytes_per_second: per volume and task;
        also: the --also CRCs (merkle.replica.also), from the data read."""
        from merkle.replica.results import RateLimiter

        for (name, _), refs in groupby(_work(batches), key=lambda r: (r.layout, r.fs_root)):
            limit: Dict[str, Any] = (
                {"limiter": RateLimiter(bytes_per_second)}
                if bytes_per_second and not (trees_only or metadata_only)
                else {}
            )
            if also and not (trees_only or metadata_only):
                limit["also"] = tuple(also)
            for rep, r, exc in layouts[name].scan(
                refs, trees_only=trees_only, metadata_only=metadata_only, **limit
            ):
                yield from pa.concat_tables(
                    _result_rows(rep, r, exc, trees_only, metadata_only=metadata_only)
                ).to_batches()

    return run


def _result_rows(
    rep: ReplicaRef,
    r: Any,
    exc: Optional[Exception],
    trees_only: bool,
    host: Optional[str] = None,
    metadata_only: bool = False,
) -> List[pa.Table]:
    """The output rows of one replica's scan (or of the error that stopped it); `host`:
    the host it was scanned on, when the scan knows hosts. A census (`metadata_only`)
    replica is verified when its block metadata was read: its tree (stored, or from the
    recorded checksums) is what the comparison needs, warnings and all."""
    if exc is not None:
        # a store's message may quote the URI it was given (credentials and all)
        detail = redact(getattr(exc, "strerror", None) or str(exc))
        return _replica_rows(
            rep.datanode,
            rep.path,
            rep.container,
            None,
            [ScanError(SCAN_FAILED, detail=detail)],
            0,
            0,
            0,
            False,
            host,
        )
    if metadata_only:
        verified = r.meta is not None and r.tree is not None
        return _replica_rows(
            rep.datanode,
            rep.path,
            rep.container,
            r.tree,
            r.errors,
            r.blocks,
            r.chunks,
            r.bytes_read,
            verified,
            host,
            meta=r.meta,
        )
    # trees_only: a missing or corrupt stored tree gives no tree rows
    tree = None if trees_only and r.errors else r.tree
    return _replica_rows(
        rep.datanode,
        rep.path,
        rep.container,
        tree,
        r.errors,
        r.blocks,
        r.chunks,
        r.bytes_read,
        tree is not None if trees_only else _verified(r),
        host,
        getattr(r, "also", None),
        getattr(r, "meta", None),
    )


def _counting(fn: Any, acc: Any) -> Any:
    """`fn` (a mapInArrow function) that also adds each replica's bytes_read (its REPLICA
    row) to the accumulator `acc`, which the driver's progress line reads
    (spark_udfs.cluster.progress.bytes_accumulator); the sum equals the summary table's bytes_read
    unless Spark retries or recomputes a task."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.compute as pc

        for b in fn(batches):
            n = pc.sum(
                pc.filter(b.column("bytes_read"), pc.equal(b.column("kind"), "REPLICA"))
            ).as_py()
            if n:
                acc.add(int(n))
            yield b

    return run


def _discover(root: str) -> Tuple[Layout, List[ReplicaRef]]:
    """`root`'s layout and every replica it finds there (the volumes' replicas, in path
    order). FileNotFoundError when root does not exist; ValueError when it holds none."""
    layout, found, _ = _discover_volumes(root)
    return layout, found


def _discover_volumes(root: str) -> Tuple[Layout, List[ReplicaRef], List[Tuple]]:
    """_discover, and a volumes-table row (VOLUME_SCHEMA) per volume found: a volume that
    cannot be read at all is VOLUME_FAILED with its problem, so that it is reported once
    rather than silently holding no replica."""
    layout = layout_of(root)
    found: List[ReplicaRef] = []
    rows: List[Tuple] = []
    try:
        for v in layout.volumes(root):
            refs = [] if v.problem is not None else layout.replicas(v)
            found.extend(refs)
            rows.append(
                (
                    v.datanode,
                    None,
                    redact(v.root),
                    v.cluster_id,
                    VOLUME_FAILED if v.problem is not None else SCANNED,
                    None if v.problem is None else redact(v.problem),
                    len(refs),
                    None,
                    None,
                    None,
                )
            )
    except ReplicaError as exc:  # "no container replica here", a link named as a replica
        raise ValueError(str(exc)) from None
    if not found:
        raise ValueError(f"{display(root)}: no container replica here ({layout.name} layout)")
    return layout, found, rows


@dataclass
class ScanTables:
    """The job's outputs as DataFrames, per replica: its chunks (spark_udfs.tables schema),
    its blocks (BLOCK_SCHEMA: Ozone block value, chunk count, health), the container
    (REPLICA_SCHEMA: container value, counts, bytes read, ok, tombstones, unhealthy chunks)
    and the scan errors. The three levels of values are what the diff job compares
    (spark_udfs.jobs.diff.diff_scan), top-down."""

    chunks: Any
    blocks: Any
    containers: Any
    errors: Any
    #: the scan stage's cached output (all kinds of rows), when known: `write` sizes the
    #: output files from its row counts
    stage: Any = None
    #: the accumulator the executors add each replica's bytes_read to, as its tasks finish
    #: (the progress line's "scanned"; spark_udfs.cluster.progress.bytes_accumulator)
    bytes_scanned: Any = None
    #: one row per volume (VOLUME_SCHEMA): what became of each
    volumes: Any = None

    #: the names of the Parquet tables `write` creates under its output directory, each
    #: partitioned by datanode (datanode=<identity>/ directories, as `crcmerkle scan --emit`
    #: writes them: one host's emitted tables and a whole cluster's scan read alike)
    TABLES = ("chunks", "blocks", "containers", "errors", "volumes")

    @property
    def replicas(self) -> Any:
        """The per-replica container table (one row per replica)."""
        return self.containers

    def write(self, out: str, mode: str = "overwrite") -> Dict[str, str]:
        """Write the tables as Parquet under `out` (a local path or URI). Files are sized
        by the tables' rows (ROWS_PER_FILE), not by the scan's tasks: one file per task
        and table made ~75,000 small files for 600,000 replicas. The stage is computed
        once, with all its tasks, before the tables are coalesced (no shuffle)."""
        paths = {n: join(out, n) for n in self.TABLES}
        counts: Dict[str, int] = {}
        if self.stage is not None:
            counts = {
                r["kind"]: int(r["count"]) for r in self.stage.groupBy("kind").count().collect()
            }
        for n in self.TABLES:
            df = getattr(self, n)
            if df is None:
                continue
            if self.stage is not None:
                files = max(1, -(-counts.get(_KIND_OF[n], 0) // ROWS_PER_FILE[n]))
                if files < df.rdd.getNumPartitions():
                    df = df.coalesce(files)
            df.write.mode(mode).partitionBy("datanode").parquet(paths[n])
        return paths


#: each table `write` creates and its schema (what a reader gives Spark: never inferred)
TABLE_SCHEMAS = {
    "chunks": CHUNK_TABLE_SCHEMA,
    "blocks": BLOCK_SCHEMA,
    "containers": REPLICA_SCHEMA,
    "errors": ERROR_SCHEMA,
    "volumes": VOLUME_SCHEMA,
}

#: rows per output file, for files of roughly 64-128 MiB (Parquet, snappy): a chunk row is
#: ~20-30 bytes, a block row carries its chunks' arrays (~64 chunks of 4 MiB per 256 MiB
#: block), a replica or an error row ~100-200 bytes
ROWS_PER_FILE = {
    "chunks": 4_000_000,
    "blocks": 100_000,
    "containers": 1_000_000,
    "errors": 1_000_000,
    "volumes": 1_000_000,
}
_KIND_OF = {
    "chunks": "CHUNK",
    "blocks": "BLOCK",
    "containers": "REPLICA",
    "errors": "ERROR",
    "volumes": "VOLUME",
}


def _names(schema: str) -> List[str]:
    return [c.split()[0] for c in schema.split(", ")]


def _one_per_datanode(replicas: List[ReplicaRef]) -> Tuple[List[ReplicaRef], List[Tuple]]:
    """The replicas to scan, one per (datanode, container): the first by path; each further
    one is an error row (DUPLICATE_REPLICA, ERROR_SCHEMA) and is not scanned. A datanode holds
    one replica of a container; a second one (a copy the datanode's user left in another
    volume, or a half-finished move) must not be compared as if it were another datanode's,
    nor stop the scan of everything else."""
    kept: Dict[Tuple[str, int], ReplicaRef] = {}
    duplicates: List[Tuple] = []
    for r in sorted(replicas, key=lambda r: r.path):
        first = kept.setdefault((r.datanode, r.container), r)
        if first is not r:
            detail = (
                f"a second replica of container {r.container} on datanode "
                f"{r.datanode!r} (the one scanned: {redact(first.path)}); not scanned: "
                f"a datanode holds one replica per container"
            )
            duplicates.append(
                (
                    r.datanode,
                    redact(r.path),
                    int(r.container),
                    DUPLICATE_REPLICA,
                    None,
                    None,
                    detail,
                    severity_of(DUPLICATE_REPLICA),
                    None,
                )
            )
    return list(kept.values()), duplicates


def scan_replicas(
    spark: Any,
    roots: Sequence[str],
    trees_only: bool = False,
    partitions: Optional[int] = None,
    metadata_only: bool = False,
    bytes_per_second: Optional[float] = None,
    also: Sequence[str] = (),
) -> ScanTables:
    """Plan the scan of every replica under `roots` (see the module docstring). Lazy apart
    from discovery; FileNotFoundError / ValueError for a bad root. `partitions`: tasks
    (default: one per core, more when that would give a task more than REPLICAS_PER_TASK
    replicas, never more than one per replica). `also`: more CRCs computed from the data
    read (merkle.replica.also: crc64nvme, crc32c, crc32), in the chunks and blocks tables'
    column of that name (ValueError for another name, or with trees_only/metadata_only)."""
    from merkle.replica.also import check_algorithms

    also = check_algorithms(also)
    if also and (trees_only or metadata_only):
        raise ValueError(
            "--also computes its CRCs from the data read: not with --trees-only or --metadata-only"
        )
    from pyspark.sql import functions as F

    replicas: List[ReplicaRef] = []
    layouts: Dict[str, Layout] = {}
    volume_rows: List[Tuple] = []
    for r in roots:
        layout, found, rows = _discover_volumes(r)
        layouts[layout.name] = layout
        replicas.extend(found)
        volume_rows.extend(rows)
    if len(layouts) > 1:  # one layout per job: its tables, its rules
        raise ValueError(
            f"replicas of different layouts ({', '.join(sorted(layouts))}) "
            f"cannot be scanned in one job; scan them separately"
        )
    replicas, duplicates = _one_per_datanode(replicas)
    # by container: a task's replicas come from different datanodes and volumes (disks);
    # by fs_root first (a volume, where a layout groups work by it: Ozone's RocksDB is
    # opened once per volume and task; for a URI the discovery root; a local crcmerkle
    # replica has none), the sort being stable on the discovery order
    replicas.sort(key=lambda r: (r.fs_root or "", r.container))
    n = partitions or min(
        len(replicas),
        max(spark.sparkContext.defaultParallelism, -(-len(replicas) // REPLICAS_PER_TASK)),
    )
    rows = [(r.layout, r.datanode, r.path, r.container, r.fs_root, r.fs_path) for r in replicas]
    # parallelize slices the list as it is: no shuffle stage before the scan
    work = spark.createDataFrame(spark.sparkContext.parallelize(rows, max(1, n)), _WORK_SCHEMA)
    fn = _scan_fn(layouts, trees_only, metadata_only, bytes_per_second, also)
    from spark_udfs.cluster.progress import bytes_accumulator

    acc = bytes_accumulator(spark.sparkContext)
    out = work.mapInArrow(_counting(fn, acc), _OUT_SCHEMA).cache()
    kind = F.col("kind")
    chunks = out.filter(kind == "CHUNK").select(*CHUNK_TABLE_COLUMNS)
    errors = out.filter(kind == "ERROR").select(*_names(ERROR_SCHEMA))
    if duplicates:  # found by the driver's listing: a few rows at most, never scanned
        errors = errors.unionByName(spark.createDataFrame(duplicates, ERROR_SCHEMA))
    blocks = _select_blocks(out.filter(kind == "BLOCK"))
    summary = out.filter(kind == "REPLICA").select(*_names(REPLICA_SCHEMA))
    volumes = volume_frame(spark, volume_rows)
    return ScanTables(
        chunks=chunks,
        blocks=blocks,
        containers=summary,
        errors=errors,
        stage=out,
        bytes_scanned=acc,
        volumes=volumes,
    )
