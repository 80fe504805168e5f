"""The diff job: compare every replica of every container, top-down, shuffling only what diverges.

Three levels, each touching only what the level above flagged:

1. container: one key per replica. From a scan's tables (the usual input) the key is the
   replica's Ozone container value, already in its `containers` row: nothing is aggregated.
   A container goes down a level when its replicas' keys differ, or when a replica holds
   tombstones or unhealthy chunks (the values cannot show a tombstone, whose block keeps its
   value, nor a chunk corrupted alike on every replica).
2. block: the `blocks` rows (Ozone block value, deleted flag, health) of those containers
   only (a broadcast semi-join on their IDs). A block goes down when its replicas' keys
   differ, some replica of the container lacks it, or a replica holds it unhealthy. This is
   what keeps "0.1% of chunks diverged, spread over every container" cheap: only the blocks
   that hold a difference go further.
3. chunk: the chunk rows of those blocks (the chunk table joined with the broadcast list of
   diverged blocks: the only pass over it, and only those rows are shuffled), plus one
   marker row per replica of the containers concerned, are grouped by container and
   compared exactly with merkle.diff (Ozone's one-sided rules: missing block / missing chunk
   / corrupt chunk / diverged deleted block), so the job and the local library cannot
   disagree. Comparing only the diverged blocks is exact: blocks equal everywhere contribute
   equally to every replica's value. Chunks no healthy replica holds, or that healthy
   replicas hold with different values, are unrecoverable. A block that some replicas have
   deleted while others still hold it live is a *pending deletion*: Ozone keeps a
   tombstone's value, so the container values agree and nothing is pulled (Ozone's rule; the
   block deletion service, not reconciliation, finishes it), but it is reported.

Given only a chunk table (no scan tables), levels 1 and 2 use keys computed from the chunk
rows in one partially aggregated pass instead: per (replica, block) a commutative digest
(count, bit_xor and a 32-bit masked sum of xxhash64(block, offset, leaf, deleted)); the
replica keys follow from the block digests. Ozone's values are order-dependent (CRC over
sorted children), so computing them from unsorted rows would need a sort per group
(`collect_list` + sort measured 4-8x slower); digests need no order. ANSI mode (Spark 4's
default) fails `sum()` on 64-bit hashes: only 32-bit halves are summed.

Outputs (DiffResult): `replicas` (one row per replica with its key), `containers` (replica
count, MATCH/MISMATCH/UNVERIFIED (no replica could be read), groups of datanodes with equal
values, replicas read, and `unhealthy_chunks_filtered`: Ozone's numUnhealthyChunksFiltered
summed over every replica's diff with every other one, the peer chunks no pull can take because
the peer holds them unhealthy; > 0 means a reconciliation round cannot make the container
whole), `pulls` (per target replica:
what to fetch, candidate sources), `unrecoverable`, `pending_deletions` (per replica still
holding a block live: the datanodes that deleted it), `diverged_blocks`, and `plan`
(repair_plan: one command per (container, target, source), spread over sources, at most
`limit` commands per datanode per round, like Ozone's replication manager queue limit of 20).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

import numpy as np
import pyarrow as pa

import merkle
from spark_udfs.jobs.passes import whole_groups
from spark_udfs.tables import CHUNK_COLUMNS, RowColumns, column_values

__all__ = [
    "DEFAULT_DATANODE_LIMIT",
    "DiffResult",
    "PULL_KINDS",
    "PULL_SCHEMA",
    "diff_chunks",
    "diff_scan",
    "plan_commands",
    "reconcile_commands",
    "repair_plan",
]

#: Ozone's replication manager default: 20 queued commands per datanode.
DEFAULT_DATANODE_LIMIT = 20

MISSING_BLOCK = "MISSING_BLOCK"
MISSING_CHUNK = "MISSING_CHUNK"
CORRUPT_CHUNK = "CORRUPT_CHUNK"
DIVERGED_DELETED_BLOCK = "DIVERGED_DELETED_BLOCK"
UNRECOVERABLE_CHUNK = "UNRECOVERABLE_CHUNK"
PENDING_DELETION = "PENDING_DELETION"
#: container state: none of its replicas could be read (see spark_udfs.jobs.scan._verified)
UNVERIFIED = "UNVERIFIED"
PULL_KINDS = (MISSING_BLOCK, MISSING_CHUNK, CORRUPT_CHUNK, DIVERGED_DELETED_BLOCK)

PULL_SCHEMA = (
    "container long, datanode string, replica string, kind string, block long, "
    "offset long, length long, sources array<string>, source_replicas array<string>,"
    " reason string, value long"
)
#: kind of the per-replica rows carrying the Ozone value of its diverged blocks (internal)
_VALUE = "VALUE"
#: kind of the per-replica rows carrying its diffs' unhealthy-chunks-filtered count (internal)
_FILTERED = "FILTERED"

#: the columns level 3 reads from the chunk table (`replica` comes from the marker rows)
_ROW_COLUMNS = [c for c in CHUNK_COLUMNS if c != "replica"]


@dataclass
class DiffResult:
    """DataFrames of one diff run (see the module docstring); plan is a list of dicts."""

    replicas: Any
    containers: Any
    pulls: Any
    unrecoverable: Any
    diverged_blocks: Any
    pending_deletions: Any

    def plan(self, limit: int = DEFAULT_DATANODE_LIMIT) -> List[Dict[str, Any]]:
        """The repair plan computed on the driver (collects every pull row, which scale with
        the divergence: for small diffs and tests; the report and `spark diff` plan on the
        executors, plan_commands)."""
        return repair_plan([r.asDict() for r in self.pulls.collect()], limit)


def _require_columns(df: Any, columns: List[str], what: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(
            f"{what} lacks column(s) {', '.join(missing)}; expected {', '.join(columns)}"
        )


def _keys_from_scan(containers: Any, blocks: Any) -> Tuple[Any, Any]:
    """Level-1 and level-2 keys straight from a scan's `containers` and `blocks` tables."""
    _require_columns(
        containers,
        ["container", "datanode", "replica", "data_checksum", "tombstones", "unhealthy_chunks"],
        "the containers table",
    )
    _require_columns(
        blocks,
        ["container", "datanode", "block", "block_value", "deleted", "checksum_matches"],
        "the blocks table",
    )
    # scans older than the `verified` column: a replica with a value counts as read
    verified = (
        "coalesce(verified, data_checksum IS NOT NULL)"
        if "verified" in containers.columns
        else "data_checksum IS NOT NULL"
    )
    # a census or a trees-only pass verifies a replica from its recorded checksums and reads
    # none of its data (bytes_read 0 for a replica that lists chunks): the report says so
    data_read = (
        f"{verified} AND (bytes_read > 0 OR chunks = 0)"
        if {"bytes_read", "chunks"} <= set(containers.columns)
        else verified
    )
    replica_keys = containers.selectExpr(
        "container",
        "datanode",
        "replica",
        "coalesce(data_checksum, -1L) AS k1",
        "0L AS k2",
        "0L AS n",
        "tombstones > 0 OR unhealthy_chunks > 0 OR data_checksum IS NULL AS suspect",
        "unhealthy_chunks",
        "data_checksum",
        f"{verified} AS verified",
        f"coalesce({data_read}, false) AS data_read",
    )
    block_keys = blocks.selectExpr(
        "container",
        "datanode",
        "block",
        "block_value AS k1",
        "CAST(deleted AS long) AS k2",
        "0L AS n",
        "CAST(NOT checksum_matches AS long) AS unhealthy",
    )
    return replica_keys, block_keys


def _keys_from_chunks(chunks: Any) -> Tuple[Any, Any]:
    """Level-1 and level-2 keys from chunk rows alone: commutative digests, one pass."""
    from pyspark.sql import functions as F

    h = F.when(
        F.col("block").isNotNull(),
        F.xxhash64(
            F.col("block"),
            F.coalesce(F.col("offset"), F.lit(-1)),
            F.coalesce(F.col("leaf"), F.lit(-1)),
            F.col("deleted"),
        ),
    )
    # Only fixed-width aggregation buffers (no max/first of a string): Spark keeps them in
    # its hash aggregate; a string buffer would make it sort all the rows. The replica path
    # is functionally dependent on (container, datanode), so it rides in the key instead.
    per_block = (
        chunks.withColumn("__h", h)
        .groupBy("container", "datanode", "replica", "block")
        .agg(
            F.count("__h").alias("n"),
            F.coalesce(F.expr("bit_xor(__h)"), F.lit(0).cast("long")).alias("k1"),
            F.coalesce(
                F.sum(F.col("__h").bitwiseAND(F.lit(0xFFFFFFFF))), F.lit(0).cast("long")
            ).alias("k2"),
            F.sum(F.when(F.col("checksum_matches") == F.lit(False), 1).otherwise(0)).alias(
                "unhealthy"
            ),
        )
        .cache()
    )  # read by both levels: one pass over the chunk rows
    replica_keys = (
        per_block.groupBy("container", "datanode", "replica")
        .agg(
            F.sum("n").alias("n"),
            F.expr("bit_xor(k1)").alias("k1"),
            F.sum("k2").alias("k2"),
            F.sum("unhealthy").alias("unhealthy_chunks"),
        )
        .withColumn("suspect", F.col("unhealthy_chunks") > 0)
        .withColumn("data_checksum", F.lit(None).cast("long"))
        .withColumn("verified", F.lit(True))
        .withColumn("data_read", F.lit(True))
    )
    block_keys = per_block.filter(F.col("block").isNotNull()).select(
        "container", "datanode", "block", "k1", "k2", "n", "unhealthy"
    )
    return replica_keys, block_keys


def _same(*cols: str) -> Any:
    """All rows of a group agree on every column (min == max): a cheap stand-in for
    countDistinct(...) == 1, which Spark plans as an Expand over every input row."""
    from pyspark.sql import functions as F

    cond = F.lit(True)
    for c in cols:
        cond = cond & (F.min(c) == F.max(c))
    return cond


#: what level 3 hands to Python, one schema for its three kinds of rows: chunk-table rows
#: (digest path), a scan's block rows with their chunks as arrays (scan path), and per
#: replica a marker row (block null) carrying its path and container value
_L3_COLUMNS = [
    ("datanode", "string"),
    ("container", "long"),
    ("block", "long"),
    ("offset", "long"),
    ("length", "long"),
    ("leaf", "long"),
    ("checksum_matches", "boolean"),
    ("deleted", "boolean"),
    ("replica", "string"),
    ("block_value", "long"),
    ("data_checksum", "long"),
    ("chunk_offsets", "array<bigint>"),
    ("chunk_lengths", "array<bigint>"),
    ("chunk_leaves", "array<bigint>"),
    ("chunk_matches", "array<boolean>"),
]
_BLOCK_ARRAYS = ["chunk_offsets", "chunk_lengths", "chunk_leaves", "chunk_matches"]


def _level3(chunks: Any, blocks: Any, replica_keys: Any, diverged_blocks: Any) -> Any:
    """The exact comparison of the diverged blocks (see the module docstring), lazily."""
    from pyspark.sql import functions as F

    def pick(df: Any, present: List[str]) -> Any:
        """df's rows in the level-3 schema (absent columns null). One SQL select string per
        column: building Columns one py4j call at a time cost ~0.5 ms each here."""
        return df.selectExpr(
            *[c if c in present else f"CAST(NULL AS {t}) AS {c}" for c, t in _L3_COLUMNS]
        )

    # Broadcast: the diverged-block list scales with the divergence, and a shuffle join would
    # move every row of the table (AQE only switches after the shuffle is written).
    # On one 64-bit key (a hash of container and block, checked exactly after the join):
    # Spark then probes a LongHashedRelation, measured 1.8x faster than two key columns over
    # 60 M rows.
    pair = F.xxhash64(F.col("container"), F.col("block"))
    wanted = F.broadcast(
        diverged_blocks.select(
            pair.alias("__k"), F.col("container").alias("__c"), F.col("block").alias("__b")
        )
    )

    def of_diverged_blocks(df: Any) -> Any:
        return (
            df.withColumn("__k", pair)
            .join(wanted, "__k")
            .filter((F.col("container") == F.col("__c")) & (F.col("block") == F.col("__b")))
        )

    if blocks is not None:
        # A scan's block rows hold each block's chunks as arrays: 1 row per block and
        # replica instead of ~50 chunk rows, and the chunk table is not read at all
        # (measured: 2.5x less time than joining the chunk rows of the same blocks).
        cols = ["datanode", "container", "block", "block_value", "deleted", *_BLOCK_ARRAYS]
    else:
        cols = _ROW_COLUMNS
    rows = of_diverged_blocks(blocks.select(*cols) if blocks is not None else chunks.select(*cols))
    touched = F.broadcast(diverged_blocks.select("container").distinct())
    marker_cols = ["datanode", "container", "replica", "data_checksum"]
    markers = replica_keys.join(touched, "container").select(*marker_cols)
    # Level 3 runs per partition (mapInArrow over rows clustered and sorted by container),
    # not per group (applyInPandas): per-group pandas frames cost more than the comparison,
    # and Arrow keeps nullable 64-bit IDs exact where pandas would make them float64.
    # Parallelism follows the data: repartitioning by column alone (no count) lets adaptive
    # execution coalesce the session's shuffle partitions (which scale with the cluster,
    # spark_udfs.cluster.session) to what the diverged rows need.
    return (
        pick(rows, cols)
        .unionByName(pick(markers, marker_cols))
        .repartition("container")
        .sortWithinPartitions("container")
        .mapInArrow(_compare_batches, PULL_SCHEMA)
    )


def _largest_first() -> Any:
    """Aggregate expression over rows holding `dns` (the datanodes of one group of equal
    values): the groups of a container as an array, largest group first."""
    from pyspark.sql import functions as F

    return F.expr(
        "transform(sort_array(collect_list(struct(-size(dns) AS k, dns AS d))), e -> e.d)"
    )


def diff_scan(scan: Any) -> DiffResult:
    """Diff the tables of a scan (spark_udfs.jobs.scan.ScanTables, or a dict of its DataFrames
    read back from Parquet: chunks, blocks, containers)."""
    get = scan.get if isinstance(scan, dict) else (lambda k: getattr(scan, k))
    return diff_chunks(get("chunks"), blocks=get("blocks"), containers=get("containers"))


def diff_chunks(chunks: Any, blocks: Any = None, containers: Any = None) -> DiffResult:
    """Run the hierarchical diff (see the module docstring). `blocks` and `containers` are a
    scan's tables of the same replicas (give both, or neither to derive keys from the chunk
    rows). Levels 1 and 2 run here on small tables; level 3 (the pulls) is planned lazily
    and runs on the first read of an output, reading the chunk table once."""
    from pyspark.sql import functions as F

    _require_columns(chunks, _ROW_COLUMNS, "the chunk table")
    if (blocks is None) != (containers is None):
        raise ValueError("give both the blocks and the containers table of a scan, or neither")
    if "replica" not in chunks.columns:
        chunks = chunks.withColumn("replica", F.lit(None).cast("string"))
    if blocks is not None:
        replica_keys, block_keys = _keys_from_scan(containers, blocks)
    else:
        replica_keys, block_keys = _keys_from_chunks(chunks)

    # -- level 1: one row per container ----------------------------------------------------
    per_container = replica_keys.groupBy("container").agg(
        F.count(F.lit(1)).alias("n_replicas"),
        F.size(F.array_distinct(F.collect_list(F.struct("k1", "k2", "n")))).alias("n_keys"),
        F.max(F.col("suspect").cast("int")).alias("suspect"),
        F.sum("unhealthy_chunks").alias("unhealthy_chunks"),
        F.sum(F.col("verified").cast("int")).alias("read_replicas"),
        F.sum(F.col("data_read").cast("int")).alias("data_replicas"),
    )
    diverged = per_container.filter((F.col("n_keys") > 1) | (F.col("suspect") > 0)).select(
        "container", "n_replicas"
    )

    # -- level 2: blocks of diverged containers ----------------------------------------------
    diverged_blocks = (
        block_keys.join(F.broadcast(diverged), "container")
        .groupBy("container", "block", "n_replicas")
        .agg(
            F.count(F.lit(1)).alias("have"),
            _same("k1", "k2", "n").alias("same"),
            F.max("unhealthy").alias("unhealthy"),
        )
        .filter(~F.col("same") | (F.col("have") < F.col("n_replicas")) | (F.col("unhealthy") > 0))
        .select("container", "block")
        .cache()
    )

    # -- level 3: rows of diverged blocks, compared exactly ----------------------------------
    found = _level3(chunks, blocks, replica_keys, diverged_blocks)
    found = found.cache()  # small (scales with the divergence), read several times below
    pulls = found.filter(F.col("kind").isin(*PULL_KINDS)).drop("value")
    unrecoverable = found.filter(F.col("kind") == F.lit(UNRECOVERABLE_CHUNK)).select(
        "container", "block", "offset", F.col("sources").alias("datanodes"), "reason"
    )
    pending = found.filter(F.col("kind") == F.lit(PENDING_DELETION)).select(
        "container", "datanode", "replica", "block", F.col("sources").alias("deleted_on")
    )

    # -- the container table: groups of datanodes with equal values --------------------------
    # Level 3 reports each replica's value over the diverged blocks (equal iff the full
    # container values are); those groups decide for every container that went down, the
    # level-1 keys for the others.
    key_groups = (
        replica_keys.groupBy("container", "k1", "k2", "n")
        .agg(F.sort_array(F.collect_list("datanode")).alias("dns"))
        .groupBy("container")
        .agg(F.count(F.lit(1)).alias("n_key_groups"), _largest_first().alias("key_groups"))
    )
    exact = (
        found.filter(F.col("kind") == F.lit(_VALUE))
        .groupBy("container", "value")
        .agg(F.sort_array(F.collect_list("datanode")).alias("dns"))
        .groupBy("container")
        .agg(F.count(F.lit(1)).alias("n_exact"), _largest_first().alias("groups_exact"))
    )
    filtered = (
        found.filter(F.col("kind") == F.lit(_FILTERED))
        .groupBy("container")
        .agg(F.sum("value").alias("filtered"))
    )
    table = (
        per_container.join(key_groups, "container")
        .join(exact, "container", "left")
        .join(filtered, "container", "left")
    )
    n_groups = F.coalesce(F.col("n_exact"), F.col("n_key_groups"))
    # A container none of whose replicas was read is UNVERIFIED, never MATCH: equal "values"
    # of replicas nobody could read say nothing.
    table = table.select(
        "container",
        "n_replicas",
        "unhealthy_chunks",
        F.when(F.col("read_replicas") == 0, F.lit(UNVERIFIED))
        .when(n_groups == 1, F.lit("MATCH"))
        .otherwise(F.lit("MISMATCH"))
        .alias("state"),
        F.coalesce(F.col("groups_exact"), F.col("key_groups")).alias("groups"),
        "read_replicas",
        "data_replicas",
        F.coalesce(F.col("filtered"), F.lit(0)).cast("long").alias("unhealthy_chunks_filtered"),
    )
    return DiffResult(
        replicas=replica_keys,
        containers=table.cache(),
        pulls=pulls,
        unrecoverable=unrecoverable,
        diverged_blocks=diverged_blocks,
        pending_deletions=pending,
    )


_PULL_ARROW = pa.schema(
    [
        ("container", pa.int64()),
        ("datanode", pa.string()),
        ("replica", pa.string()),
        ("kind", pa.string()),
        ("block", pa.int64()),
        ("offset", pa.int64()),
        ("length", pa.int64()),
        ("sources", pa.list_(pa.string())),
        ("source_replicas", pa.list_(pa.string())),
        ("reason", pa.string()),
        ("value", pa.int64()),
    ]
)


def _compare_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Level 3 over one partition: rows arrive sorted by container and a container's rows
    may span batches; every complete container of a pass (spark_udfs.jobs.passes) is compared
    once (_compare_table)."""
    for t in whole_groups(batches, "container"):
        out = _compare_table(t)
        if out:
            yield pa.RecordBatch.from_pylist(out, schema=_PULL_ARROW)


class _BlockArrays:
    """The block rows of a level-3 pass (scan path): IDs, values, flags and the chunks of
    every block as flat numpy arrays with per-row list offsets."""

    def __init__(self, table: pa.Table) -> None:
        self.value, self.no_value = column_values(table, "block_value")
        lists = [table.column(c).combine_chunks() for c in _BLOCK_ARRAYS]
        self.start = lists[0].offsets.to_numpy().astype(np.int64)
        for other in lists[1:]:
            if not np.array_equal(other.offsets.to_numpy(), lists[0].offsets.to_numpy()):
                raise ValueError("a block's chunk arrays differ in length")
        vals = [a.values.to_numpy(zero_copy_only=False) for a in lists]
        self.offset, self.length, self.leaf = (np.asarray(v, dtype=np.int64) for v in vals[:3])
        self.matches = np.asarray(vals[3], dtype=bool)

    def tree(
        self,
        container: int,
        data_checksum: Optional[int],
        rows: np.ndarray,
        block: np.ndarray,
        deleted: np.ndarray,
    ) -> merkle.ContainerTree:
        """The tree of one replica's block rows `rows` (indices), sorted by block ID."""
        rows = rows[np.argsort(block[rows], kind="stable")]
        counts = self.start[rows + 1] - self.start[rows]
        starts = np.concatenate(([0], np.cumsum(counts)))
        # the chunk positions of those rows, in row order, without a Python loop
        take = np.repeat(self.start[rows] - starts[:-1], counts) + np.arange(starts[-1])
        return merkle.ContainerTree(
            container,
            data_checksum=data_checksum,
            block_id=block[rows],
            block_value=self.value[rows],
            block_deleted=deleted[rows],
            block_chunk_start=starts,
            chunk_offset=self.offset[take],
            chunk_length=self.length[take],
            chunk_value=self.leaf[take],
            chunk_matches=self.matches[take],
        )


def _compare_table(table: pa.Table) -> List[Dict[str, Any]]:
    """Compare every container of `table` (rows sorted by container)."""
    cols = RowColumns(table)
    cid = table.column("container").to_numpy()
    names = table.column("datanode").combine_chunks().dictionary_encode()
    codes = names.indices.to_numpy(zero_copy_only=False)
    dns = names.dictionary.to_pylist()
    marker = cols.no_block
    rep = table.column("replica").to_pylist()
    value, no_value = column_values(table, "data_checksum")
    arrays = _BlockArrays(table)
    scan_path = not bool(arrays.no_value.all())  # block rows with arrays, not chunk rows
    starts = np.concatenate(([0], np.flatnonzero(cid[1:] != cid[:-1]) + 1, [cid.size]))
    out: List[Dict[str, Any]] = []
    for s, e in zip(starts[:-1].tolist(), starts[1:].tolist()):
        container = int(cid[s])
        c = codes[s:e]
        trees: Dict[str, merkle.ContainerTree] = {}
        replica_of: Dict[str, Optional[str]] = {}
        for code in np.unique(c).tolist():
            mask = c == code
            name = dns[code]
            rows = s + np.flatnonzero(mask)
            mrows = rows[marker[rows]].tolist()
            replica_of[name] = next((rep[i] for i in mrows if rep[i] is not None), None)
            if scan_path:  # the replica's block rows, and its container value (marker)
                data_checksum = next((int(value[i]) for i in mrows if not no_value[i]), None)
                trees[name] = arrays.tree(
                    container, data_checksum, rows[~arrays.no_value[rows]], cols.block, cols.deleted
                )
            else:  # digest path: trees of the diverged blocks from their chunk rows
                trees[name] = cols.slice(s, e).tree(container, mask)
        out.extend(_compare_container(container, trees, replica_of))
    return out


def _compare_container(
    container: int, trees: Dict[str, merkle.ContainerTree], replica_of: Dict[str, Optional[str]]
) -> List[Dict[str, Any]]:
    """Exact comparison of the diverged blocks of ONE container (all its replicas)."""
    dns = sorted(trees)
    out: List[Dict[str, Any]] = []
    reports: List[merkle.DiffReport] = []
    any_tombstone = any(bool(t.block_deleted.any()) for t in trees.values())
    for t in dns:
        items: Dict[Tuple[str, int, Optional[int]], Dict[str, Any]] = {}
        filtered = 0
        for p in dns:
            if p == t:
                continue
            r = merkle.diff(trees[t], trees[p])
            reports.append(r)
            filtered += r.unhealthy_chunks_filtered
            if r.needs_repair:
                _collect(items, r, p)
        if filtered:
            out.append(
                dict(
                    container=container,
                    datanode=t,
                    replica=replica_of[t],
                    kind=_FILTERED,
                    block=None,
                    offset=None,
                    length=None,
                    sources=[],
                    source_replicas=[],
                    reason=None,
                    value=filtered,
                )
            )
        for (kind, block, offset), it in sorted(
            items.items(), key=lambda kv: (kv[0][1], -1 if kv[0][2] is None else kv[0][2], kv[0][0])
        ):
            out.append(
                dict(
                    container=container,
                    datanode=t,
                    replica=replica_of[t],
                    kind=kind,
                    block=block,
                    offset=offset,
                    length=it["length"],
                    sources=it["sources"],
                    source_replicas=[replica_of[s] or "" for s in it["sources"]],
                    reason=None,
                    value=None,
                )
            )
        adopted = {b for (kind, b, _) in items if kind == DIVERGED_DELETED_BLOCK}
        for block, deleted_on in _pending_deletions(t, trees) if any_tombstone else ():
            if block not in adopted:
                out.append(
                    dict(
                        container=container,
                        datanode=t,
                        replica=replica_of[t],
                        kind=PENDING_DELETION,
                        block=block,
                        offset=None,
                        length=None,
                        sources=deleted_on,
                        source_replicas=[],
                        reason=None,
                        value=None,
                    )
                )
        v = trees[t].data_checksum
        out.append(
            dict(
                container=container,
                datanode=t,
                replica=replica_of[t],
                kind=_VALUE,
                block=None,
                offset=None,
                length=None,
                sources=[],
                source_replicas=[],
                reason=None,
                value=None if v is None else int(v),
            )
        )
    out.extend(_unrecoverable(container, trees, reports))
    return out


def _pending_deletions(
    target: str, trees: Dict[str, merkle.ContainerTree]
) -> List[Tuple[int, List[str]]]:
    """(block, datanodes holding its tombstone) for each block `target` holds live that some
    other replica has deleted."""
    t = trees[target]
    live = t.block_id[~t.block_deleted]
    if live.size == 0:
        return []
    on: Dict[int, List[str]] = {}
    for d in sorted(trees):
        if d == target:
            continue
        p = trees[d]
        for b in np.intersect1d(live, p.block_id[p.block_deleted]).tolist():
            on.setdefault(int(b), []).append(d)
    return sorted(on.items())


def _collect(
    items: Dict[Tuple[str, int, Optional[int]], Dict[str, Any]], r: merkle.DiffReport, peer: str
) -> None:
    """Add what `r` says the target must pull from `peer` to `items` (sources merged)."""
    pt = r.peer

    def add(kind: str, block: int, offset: Optional[int], length: int) -> None:
        it = items.setdefault((kind, int(block), offset), {"length": int(length), "sources": []})
        it["sources"].append(peer)

    counts = np.diff(pt.block_chunk_start)
    for row in r.missing_block_rows.tolist():
        s, e = int(pt.block_chunk_start[row]), int(pt.block_chunk_start[row + 1])
        add(MISSING_BLOCK, int(pt.block_id[row]), None, int(pt.chunk_length[s:e].sum()))
    for row in r.deleted_block_rows.tolist():
        add(DIVERGED_DELETED_BLOCK, int(pt.block_id[row]), None, 0)
    if r.missing_chunk_rows.size or r.corrupt_chunk_rows.size:
        cblock = np.repeat(pt.block_id, counts)
        for kind, rows in (
            (MISSING_CHUNK, r.missing_chunk_rows),
            (CORRUPT_CHUNK, r.corrupt_chunk_rows),
        ):
            for row in rows.tolist():
                add(kind, int(cblock[row]), int(pt.chunk_offset[row]), int(pt.chunk_length[row]))


def _chunk_blocks(t: merkle.ContainerTree) -> np.ndarray:
    """The block ID of every chunk row of a tree."""
    return np.repeat(t.block_id, np.diff(t.block_chunk_start))


def _find_chunk(t: merkle.ContainerTree, blocks: np.ndarray, block: int, offset: int) -> int:
    """Row of chunk (block, offset) in a tree (rows sorted by block, then offset), or -1."""
    lo, hi = np.searchsorted(blocks, block, "left"), np.searchsorted(blocks, block, "right")
    i = lo + int(np.searchsorted(t.chunk_offset[lo:hi], offset))
    return i if i < hi and t.chunk_offset[i] == offset else -1


def _unrecoverable(
    container: int, trees: Dict[str, merkle.ContainerTree], reports: List[merkle.DiffReport]
) -> List[Dict[str, Any]]:
    """Chunks of live blocks that no healthy replica holds, or that healthy replicas hold
    with different values (a write-path divergence no repair can settle). Only candidates
    are examined: chunks some replica holds unhealthy, and those the pairwise diffs found
    healthy on both sides with different values; Python runs per candidate."""
    dns = sorted(trees)
    blocks = {d: _chunk_blocks(trees[d]) for d in dns}
    deleted = set(np.concatenate([t.block_id[t.block_deleted] for t in trees.values()]).tolist())
    cands: Set[Tuple[int, int]] = set()
    for d in dns:
        bad = np.flatnonzero(~trees[d].chunk_matches)
        cands.update(zip(blocks[d][bad].tolist(), trees[d].chunk_offset[bad].tolist()))
    for r in reports:
        rows = r.unrecoverable_chunk_rows
        if rows.size:
            pb = _chunk_blocks(r.peer)
            cands.update(zip(pb[rows].tolist(), r.peer.chunk_offset[rows].tolist()))
    out: List[Dict[str, Any]] = []
    for block, offset in sorted(cands):
        if block in deleted:
            continue
        holders, healthy_values = [], set()
        for d in dns:
            i = _find_chunk(trees[d], blocks[d], block, offset)
            if i < 0:
                continue
            holders.append(d)
            if trees[d].chunk_matches[i]:
                healthy_values.add(int(trees[d].chunk_value[i]))
        if len(healthy_values) == 1:
            continue
        out.append(
            dict(
                container=container,
                datanode=None,
                replica=None,
                kind=UNRECOVERABLE_CHUNK,
                block=block,
                offset=offset,
                length=None,
                sources=holders,
                source_replicas=[],
                reason="no healthy replica" if not healthy_values else "healthy replicas differ",
                value=None,
            )
        )
    return out


def plan_commands(pulls: Any, limit: int = DEFAULT_DATANODE_LIMIT) -> Any:
    """The repair plan as a DataFrame built by the executors (`crcmerkle spark diff` writes
    it as OUT/plan): one row per (container, target, source) with its items, bytes and
    round, for plans too large for the driver (770 k pulls made a 98 MB plan there).

    The source of a pull is the candidate with the least xxhash64(container, target,
    candidate): the items of one (container, target) with the same candidates go to one
    source, and containers spread evenly over the healthy replicas without a global
    counter. Rounds: a target datanode repairs at most `limit` containers per round (Ozone's
    per-datanode command queue), in container order, and every command of one (container,
    target) is in the same round, so that reconcile_commands can give the target all its
    peers at once; unlike repair_plan, sources are not counted against the limit (that needs
    one sequential pass over every command)."""
    from pyspark.sql import Window, functions as F

    if limit < 1:
        raise ValueError("limit must be >= 1")
    picked = pulls.withColumn(
        "source",
        F.expr(
            "array_min(transform(sources, s -> named_struct('h', xxhash64(container, datanode, s),"
            " 's', s))).s"
        ),
    ).withColumn(
        "source_replica",
        F.expr(
            "CASE WHEN size(source_replicas) = size(sources) "
            "THEN element_at(source_replicas, CAST(array_position(sources, source) AS INT)) END"
        ),
    )
    cmds = picked.groupBy("container", F.col("datanode").alias("target"), "source").agg(
        F.first("replica", ignorenulls=True).alias("target_replica"),
        F.first("source_replica", ignorenulls=True).alias("source_replica"),
        F.sort_array(F.collect_list(F.struct("block", "offset", "kind", "length"))).alias("items"),
        F.sum(F.coalesce(F.col("length"), F.lit(0))).alias("bytes"),
    )
    order = Window.partitionBy("target").orderBy("container")
    return cmds.withColumn(
        "round", F.floor((F.dense_rank().over(order) - 1) / F.lit(limit)).cast("int")
    )


#: the fields of a reconcile command, in the report's order (spark_udfs.jobs.report)
RECONCILE_FIELDS = (
    "round",
    "container_id",
    "datanode",
    "replica",
    "peers",
    "peer_datanodes",
    "argv",
)


def reconcile_commands(commands: Any) -> Any:
    """The report's repair commands, built by the executors from plan_commands' rows: one
    `crcmerkle reconcile TARGET PEER...` per (container, target), with every source of that
    pair as a peer (sorted by datanode) and the round of its commands. `argv` is null when a
    replica path is unknown (tables without the Spark scan's paths): such a command cannot
    run, and `crcmerkle reconcile --report` says so."""
    from pyspark.sql import functions as F

    grouped = commands.groupBy("container", "target").agg(
        F.min("round").alias("round"),
        F.first("target_replica", ignorenulls=True).alias("replica"),
        F.sort_array(
            F.collect_list(
                F.struct(F.col("source").alias("dn"), F.col("source_replica").alias("path"))
            )
        ).alias("p"),
    )
    return (
        grouped.selectExpr(
            "round",
            "container AS container_id",
            "target AS datanode",
            "replica",
            "transform(p, x -> x.path) AS peers",
            "transform(p, x -> x.dn) AS peer_datanodes",
        )
        .withColumn(
            "argv",
            F.expr(
                "CASE WHEN replica IS NOT NULL AND replica != '' AND size(peers) > 0 AND "
                "NOT exists(peers, x -> x IS NULL OR x = '') "
                "THEN concat(array('crcmerkle', 'reconcile', replica), peers) END"
            ),
        )
        .select(*RECONCILE_FIELDS)
    )


def repair_plan(
    pulls: List[Dict[str, Any]], limit: int = DEFAULT_DATANODE_LIMIT
) -> List[Dict[str, Any]]:
    """Turn pull rows into commands, one per (container, target, source), spreading work.

    Each item goes to a source already serving this (container, target) if it can, else to
    the candidate with the fewest commands so far (ties by name), so load spreads over the
    healthy replicas. Commands are then placed in rounds: a datanode takes part (as target or
    source) in at most `limit` commands per round, like Ozone's per-datanode queue limit;
    later rounds run after earlier ones complete.
    """
    if limit < 1:
        raise ValueError("limit must be >= 1")
    by_target: Dict[Tuple[int, str], List[Dict[str, Any]]] = {}
    for p in pulls:
        by_target.setdefault((int(p["container"]), p["datanode"]), []).append(p)
    load: Dict[str, int] = {}
    commands: List[Dict[str, Any]] = []
    for (container, target), items in sorted(by_target.items()):
        chosen: Dict[str, Dict[str, Any]] = {}
        for it in sorted(
            items,
            key=lambda i: (
                len(i["sources"]),
                i["block"],
                i["offset"] if i["offset"] is not None else -1,
            ),
        ):
            cands = list(it["sources"])
            reuse = [s for s in cands if s in chosen]
            src = reuse[0] if reuse else min(cands, key=lambda s: (load.get(s, 0), s))
            if src not in chosen:
                load[src] = load.get(src, 0) + 1
                reps = dict(zip(it["sources"], it.get("source_replicas") or []))
                chosen[src] = dict(
                    container=container,
                    target=target,
                    source=src,
                    target_replica=it.get("replica"),
                    source_replica=reps.get(src) or None,
                    items=[],
                    bytes=0,
                )
            c = chosen[src]
            c["items"].append(
                {
                    "kind": it["kind"],
                    "block": it["block"],
                    "offset": it["offset"],
                    "length": it["length"],
                }
            )
            c["bytes"] += int(it["length"] or 0)
        commands.extend(chosen[s] for s in sorted(chosen))
    rounds: List[Dict[str, int]] = []
    for c in commands:
        r = 0
        while True:
            if r == len(rounds):
                rounds.append({})
            used = rounds[r]
            if used.get(c["target"], 0) < limit and used.get(c["source"], 0) < limit:
                used[c["target"]] = used.get(c["target"], 0) + 1
                used[c["source"]] = used.get(c["source"], 0) + 1
                c["round"] = r
                break
            r += 1
    return commands
