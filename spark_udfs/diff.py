"""The diff job: compare every replica of every container, top-down, shuffling only what diverges.

Input: the chunk table (spark_udfs.tables, one row per chunk of each replica, any number of
replicas per container). Three levels, each touching only what the level above flagged:

1. container: per replica one commutative digest of its rows (count, bit_xor and a 32-bit
   masked sum of xxhash64(block, offset, leaf, deleted)). It is computed from per-(replica,
   block) digests made in ONE partially aggregated pass over the chunk rows, so the shuffle is
   one small row per replica and block (SPARK.md: container roots alone shuffle ~0.2 MB for
   30 M chunk rows). A container whose replicas have more than one distinct digest diverges.
   The Ozone container value itself is order-dependent (CRC over sorted blocks), so hashing
   it would need the rows sorted per container (`collect_list` + sort measured 4-8x slower);
   digests need no order. ANSI mode (Spark 4 default) fails `sum()` on 64-bit hashes: only
   32-bit halves are summed (<= 2**32 * rows, far from 2**63) and bit_xor cannot overflow.
2. block: the cached per-block digests of diverged containers only (broadcast semi-join on
   their IDs; no second pass over the chunk table). A block diverges when its replicas
   disagree or some replica of the container lacks it. This level is what keeps "0.1% of
   chunks diverged, spread over every container" cheap: only blocks holding a difference go
   further.
3. chunk: rows of diverged blocks (plus one marker per replica of each diverged container)
   are grouped per container and compared exactly with merkle.diff (Ozone's one-sided rules:
   missing block / missing chunk / corrupt chunk / diverged deleted block), so the job and the
   local library cannot disagree. Chunks no healthy replica holds, or that healthy replicas
   hold with different values, are unrecoverable. A block that some replicas have deleted
   while others still hold it live is a *pending deletion*: Ozone keeps a tombstone's value,
   so the container values agree and nothing is pulled (Ozone's rule; the block deletion
   service, not reconciliation, finishes it), but the digests see it and it is reported.

Outputs (DiffResult): `replicas` (one row per replica with its digest), `containers`
(replica count, MATCH/MISMATCH, groups of datanodes with equal digests), `pulls` (per target
replica: what to fetch, candidate sources), `unrecoverable`, `pending_deletions` (per replica
still holding a block live: the datanodes that deleted it), and `plan` (repair_plan: one
command per (container, target, source), spread over sources, at most `limit` commands per
datanode per round, like Ozone's replication manager queue limit of 20).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np
import pyarrow as pa

import merkle
from spark_udfs.tables import CHUNK_COLUMNS, tree_from_rows

__all__ = ["DEFAULT_DATANODE_LIMIT", "DiffResult", "PULL_KINDS", "PULL_SCHEMA", "diff_chunks",
           "repair_plan"]

#: Ozone's replication manager default: 20 queued commands per datanode.
DEFAULT_DATANODE_LIMIT = 20

MISSING_BLOCK = "MISSING_BLOCK"
MISSING_CHUNK = "MISSING_CHUNK"
CORRUPT_CHUNK = "CORRUPT_CHUNK"
DIVERGED_DELETED_BLOCK = "DIVERGED_DELETED_BLOCK"
UNRECOVERABLE_CHUNK = "UNRECOVERABLE_CHUNK"
PENDING_DELETION = "PENDING_DELETION"
PULL_KINDS = (MISSING_BLOCK, MISSING_CHUNK, CORRUPT_CHUNK, DIVERGED_DELETED_BLOCK)

PULL_SCHEMA = ("container long, datanode string, replica string, kind string, block long, "
               "offset long, length long, sources array<string>, source_replicas array<string>,"
               " reason string, value long")
#: kind of the per-replica rows carrying the Ozone value of its diverged blocks (internal)
_VALUE = "VALUE"


def _digest_columns() -> Tuple[Any, Any]:
    """(64-bit row hash, its low 32 bits) of a row; null for the replica-marker rows."""
    from pyspark.sql import functions as F

    h = F.when(F.col("block").isNotNull(),
               F.xxhash64(F.col("block"), F.coalesce(F.col("offset"), F.lit(-1)),
                          F.coalesce(F.col("leaf"), F.lit(-1)), F.col("deleted")))
    return h, F.when(h.isNotNull(), h.bitwiseAND(F.lit(0xFFFFFFFF)))


def _digest_aggs() -> List[Any]:
    from pyspark.sql import functions as F

    h, low = _digest_columns()
    # coalesce: countDistinct skips nulls, and a replica without rows must still count
    return [F.count(h).alias("n_rows"), F.coalesce(F.expr("bit_xor(__h)"), F.lit(0))
            .alias("x"), F.coalesce(F.sum(low), F.lit(0)).alias("s")]


def _with_hash(df: Any) -> Any:
    h, _ = _digest_columns()
    return df.withColumn("__h", h)


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
        """The repair plan (collects the pull rows, which scale with the divergence)."""
        return repair_plan([r.asDict() for r in self.pulls.collect()], limit)


def _require_columns(df: Any) -> None:
    missing = [c for c in CHUNK_COLUMNS if c not in df.columns and c != "replica"]
    if missing:
        raise ValueError(f"chunk table lacks column(s) {', '.join(missing)}; expected "
                         f"{', '.join(CHUNK_COLUMNS)}")


def _same(*cols: str) -> Any:
    """All rows of a group agree on every column (min == max): a cheap stand-in for
    countDistinct(...) == 1, which Spark plans as an Expand over every input row."""
    from pyspark.sql import functions as F

    cond = F.lit(True)
    for c in cols:
        cond = cond & (F.min(c) == F.max(c))
    return cond


def diff_chunks(chunks: Any) -> DiffResult:
    """Run the hierarchical diff of a chunk table. Levels 1 and 2 run here (each stage is
    materialised once with localCheckpoint, so later stages and the report never recompute
    the pass over the chunk table); level 3 (the pulls) is planned lazily and runs on the
    first read of an output. The chunk table is read twice: once for the digests, once for
    the rows of diverged blocks only."""
    from pyspark.sql import functions as F

    _require_columns(chunks)
    if "replica" not in chunks.columns:
        chunks = chunks.withColumn("replica", F.lit(None).cast("string"))
    hashed = _with_hash(chunks)
    # ONE pass over the chunk rows: per (replica, block) digests, partially aggregated. The
    # replica digests follow from them (xor of xors, sum of sums), and level 2 reads them
    # instead of the chunk table again. ~ blocks x replicas rows (chunks / 50 or fewer).
    per_block = hashed.groupBy("container", "datanode", "block").agg(
        *_digest_aggs(),
        F.sum(F.when(F.col("checksum_matches") == F.lit(False), 1).otherwise(0))
        .alias("unhealthy_chunks"),
        F.max("replica").alias("replica")).localCheckpoint(eager=True)
    replicas = per_block.groupBy("container", "datanode").agg(
        F.sum("n_rows").alias("n_rows"), F.expr("bit_xor(x)").alias("x"),
        F.sum("s").alias("s"), F.sum("unhealthy_chunks").alias("unhealthy_chunks"),
        F.max("replica").alias("replica"))
    # one row per container; every later level and the report read it
    containers = replicas.groupBy("container").agg(
        F.count(F.lit(1)).alias("n_replicas"),
        F.size(F.array_distinct(F.collect_list(F.struct("n_rows", "x", "s"))))
        .alias("n_groups"),
        F.sum("unhealthy_chunks").alias("unhealthy_chunks"),
        F.sort_array(F.collect_list(F.struct("x", "s", "n_rows", "datanode")))
        .alias("members"),
    ).localCheckpoint(eager=True)
    replicas = replicas.localCheckpoint(eager=True)
    diverged = containers.filter(F.col("n_groups") > 1).select("container", "n_replicas")

    blocks = per_block.filter(F.col("block").isNotNull()).join(F.broadcast(diverged),
                                                               "container")
    diverged_blocks = blocks.groupBy("container", "block", "n_replicas").agg(
        F.count(F.lit(1)).alias("have"), _same("n_rows", "x", "s").alias("same"),
    ).filter(~F.col("same") | (F.col("have") < F.col("n_replicas"))).select(
        "container", "block").localCheckpoint(eager=True)

    cols = CHUNK_COLUMNS
    # broadcast: the diverged-block list scales with the divergence, and a shuffle join would
    # move every chunk row of the table (AQE only switches after the shuffle is written)
    rows = chunks.join(F.broadcast(diverged_blocks), ["container", "block"]).select(*cols)
    markers = replicas.join(F.broadcast(diverged.select("container")), "container").select(
        "datanode", "container", F.lit(None).cast("long").alias("block"),
        F.lit(None).cast("long").alias("offset"), F.lit(None).cast("long").alias("length"),
        F.lit(None).cast("long").alias("leaf"), F.lit(None).cast("boolean")
        .alias("checksum_matches"), F.lit(False).alias("deleted"), "replica").select(*cols)
    # Level 3 runs per partition (mapInArrow over rows clustered and sorted by container),
    # not per group (applyInPandas): per-group pandas frames cost more than the comparison,
    # and Arrow keeps nullable 64-bit IDs exact where pandas would make them float64.
    n_parts = int(chunks.sparkSession.conf.get("spark.sql.shuffle.partitions", "8"))
    found = rows.unionByName(markers).repartition(n_parts, "container").sortWithinPartitions(
        "container", "datanode").mapInArrow(_compare_batches, PULL_SCHEMA)
    found = found.cache()  # small (scales with the divergence), read three times below
    pulls = found.filter(F.col("kind").isin(*PULL_KINDS)).drop("value")
    unrecoverable = found.filter(F.col("kind") == F.lit(UNRECOVERABLE_CHUNK)).select(
        "container", "block", "offset", F.col("sources").alias("datanodes"), "reason")
    pending = found.filter(F.col("kind") == F.lit(PENDING_DELETION)).select(
        "container", "datanode", "replica", "block", F.col("sources").alias("deleted_on"))
    # Digests hash the `deleted` flag and chunk rows, Ozone's values do not: a tombstone that
    # kept its block's value leaves the Ozone values equal. The exact stage reports each
    # replica's value over the diverged blocks (equal iff the full container values are), and
    # those groups decide MATCH / MISMATCH for every container that went down a level.
    exact = found.filter(F.col("kind") == F.lit(_VALUE)).groupBy("container", "value").agg(
        F.sort_array(F.collect_list("datanode")).alias("dns")).groupBy("container").agg(
        F.count(F.lit(1)).alias("n_exact"),
        F.expr("transform(sort_array(collect_list(struct(-size(dns) AS k, dns AS d))), "
               "e -> e.d)").alias("groups_exact"))
    table = containers.drop("members").join(_groups(containers), "container").join(
        exact, "container", "left")
    table = table.select(
        "container", "n_replicas", "unhealthy_chunks",
        F.when((F.col("n_groups") == 1) | (F.col("n_exact") == 1), F.lit("MATCH"))
        .otherwise(F.lit("MISMATCH")).alias("state"),
        F.coalesce(F.col("groups_exact"), F.col("groups")).alias("groups"),
        F.col("n_groups").alias("digest_groups"))
    return DiffResult(replicas=replicas, containers=table.cache(), pulls=pulls,
                      unrecoverable=unrecoverable, diverged_blocks=diverged_blocks,
                      pending_deletions=pending)


def _groups(containers: Any) -> Any:
    """container -> groups: array of arrays of datanodes with equal digests (largest first)."""
    from pyspark.sql import functions as F

    exploded = containers.select("container", F.explode("members").alias("m")).select(
        "container", F.col("m.x").alias("x"), F.col("m.s").alias("s"),
        F.col("m.n_rows").alias("n"), F.col("m.datanode").alias("datanode"))
    g = exploded.groupBy("container", "x", "s", "n").agg(
        F.sort_array(F.collect_list("datanode")).alias("dns"))
    return g.groupBy("container").agg(
        F.expr("transform(sort_array(collect_list(struct(-size(dns) AS k, dns AS d))), "
               "e -> e.d)").alias("groups"))


_PULL_ARROW = pa.schema([
    ("container", pa.int64()), ("datanode", pa.string()), ("replica", pa.string()),
    ("kind", pa.string()), ("block", pa.int64()), ("offset", pa.int64()),
    ("length", pa.int64()), ("sources", pa.list_(pa.string())),
    ("source_replicas", pa.list_(pa.string())), ("reason", pa.string()),
    ("value", pa.int64())])


def _compare_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Level 3 over one partition: rows arrive sorted by container, a container's rows may
    span batches; each complete container is compared once (_compare_container)."""
    pending: Optional[pa.Table] = None
    for b in batches:
        t = pa.Table.from_batches([b])
        if pending is not None:
            t = pa.concat_tables([pending, t])
        cid = t.column("container").to_numpy()
        if cid.size == 0:
            continue
        bounds = np.flatnonzero(cid[1:] != cid[:-1]) + 1
        starts = np.concatenate(([0], bounds))
        ends = np.concatenate((bounds, [cid.size]))
        out: List[Dict[str, Any]] = []
        for s_, e_ in zip(starts[:-1].tolist(), ends[:-1].tolist()):
            out.extend(_compare_container(t.slice(s_, e_ - s_)))
        pending = t.slice(int(starts[-1]))
        if out:
            yield pa.RecordBatch.from_pylist(out, schema=_PULL_ARROW)
    if pending is not None and pending.num_rows:
        out = _compare_container(pending)
        if out:
            yield pa.RecordBatch.from_pylist(out, schema=_PULL_ARROW)


def _compare_container(table: pa.Table) -> List[Dict[str, Any]]:
    """Exact comparison of the diverged blocks of ONE container (all its replicas)."""
    container = int(table.column("container")[0].as_py())
    dn_col = np.asarray(table.column("datanode").to_numpy(zero_copy_only=False), dtype=object)
    dns = sorted(set(dn_col.tolist()))
    replica_of: Dict[str, Optional[str]] = {}
    trees: Dict[str, merkle.ContainerTree] = {}
    for d in dns:
        mask = dn_col == d
        sub = table.filter(pa.array(mask))
        reps = [r for r in sub.column("replica").to_pylist() if r is not None]
        replica_of[d] = reps[0] if reps else None
        trees[d] = tree_from_rows(container, sub)
    out: List[Dict[str, Any]] = []
    for t in dns:
        items: Dict[Tuple[str, int, Optional[int]], Dict[str, Any]] = {}
        for p in dns:
            if p == t:
                continue
            r = merkle.diff(trees[t], trees[p])
            if not r.needs_repair:
                continue
            _collect(items, r, p)
        for (kind, block, offset), it in sorted(items.items(), key=lambda kv: (
                kv[0][1], -1 if kv[0][2] is None else kv[0][2], kv[0][0])):
            out.append(dict(container=container, datanode=t, replica=replica_of[t], kind=kind,
                            block=block, offset=offset, length=it["length"],
                            sources=it["sources"],
                            source_replicas=[replica_of[s] or "" for s in it["sources"]],
                            reason=None, value=None))
        adopted = {b for (kind, b, _) in items if kind == DIVERGED_DELETED_BLOCK}
        for block, deleted_on in _pending_deletions(t, trees):
            if block not in adopted:
                out.append(dict(container=container, datanode=t, replica=replica_of[t],
                                kind=PENDING_DELETION, block=block, offset=None, length=None,
                                sources=deleted_on, source_replicas=[], reason=None,
                                value=None))
        v = trees[t].data_checksum
        out.append(dict(container=container, datanode=t, replica=replica_of[t], kind=_VALUE,
                        block=None, offset=None, length=None, sources=[], source_replicas=[],
                        reason=None, value=None if v is None else int(v)))
    out.extend(_unrecoverable(container, trees))
    return out


def _pending_deletions(target: str, trees: Dict[str, merkle.ContainerTree]
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


def _collect(items: Dict[Tuple[str, int, Optional[int]], Dict[str, Any]],
             r: merkle.DiffReport, peer: str) -> None:
    pt = r.peer

    def add(kind: str, block: int, offset: Optional[int], length: int) -> None:
        it = items.setdefault((kind, int(block), offset), {"length": int(length),
                                                           "sources": []})
        it["sources"].append(peer)

    counts = np.diff(pt.block_chunk_start)
    for row in r.missing_block_rows.tolist():
        s, e = int(pt.block_chunk_start[row]), int(pt.block_chunk_start[row + 1])
        add(MISSING_BLOCK, int(pt.block_id[row]), None, int(pt.chunk_length[s:e].sum()))
    for row in r.deleted_block_rows.tolist():
        add(DIVERGED_DELETED_BLOCK, int(pt.block_id[row]), None, 0)
    if r.missing_chunk_rows.size or r.corrupt_chunk_rows.size:
        cblock = np.repeat(pt.block_id, counts)
        for kind, rows in ((MISSING_CHUNK, r.missing_chunk_rows),
                           (CORRUPT_CHUNK, r.corrupt_chunk_rows)):
            for row in rows.tolist():
                add(kind, int(cblock[row]), int(pt.chunk_offset[row]),
                    int(pt.chunk_length[row]))


def _unrecoverable(container: int, trees: Dict[str, merkle.ContainerTree]
                   ) -> List[Dict[str, Any]]:
    """Chunks of live blocks that no healthy replica holds, or that healthy replicas hold
    with different values (a write-path divergence no repair can settle). Vectorised over
    the chunk rows of every replica; Python runs per unrecoverable chunk only."""
    dns = sorted(trees)
    parts = []
    for i, d in enumerate(dns):
        t = trees[d]
        n = t.chunk_offset.shape[0]
        parts.append((np.repeat(t.block_id, np.diff(t.block_chunk_start)), t.chunk_offset,
                      t.chunk_value, t.chunk_matches, np.full(n, i, dtype=np.int64)))
    if not parts or sum(p[0].shape[0] for p in parts) == 0:
        return []
    block, offset, value, ok, who = (np.concatenate(c) for c in zip(*parts))
    deleted = np.unique(np.concatenate([t.block_id[t.block_deleted] for t in trees.values()]))
    live = ~np.isin(block, deleted)
    block, offset, value, ok, who = block[live], offset[live], value[live], ok[live], who[live]
    order = np.lexsort((who, offset, block))
    block, offset, value, ok, who = block[order], offset[order], value[order], ok[order], \
        who[order]
    if block.size == 0:
        return []
    new = np.ones(block.size, dtype=bool)
    new[1:] = (block[1:] != block[:-1]) | (offset[1:] != offset[:-1])
    gid = np.cumsum(new) - 1
    n_groups = int(gid[-1]) + 1
    healthy = np.bincount(gid, weights=ok, minlength=n_groups) > 0
    # healthy copies that differ: min != max of the healthy values of a group
    big = np.iinfo(np.int64).max
    hv_min = np.full(n_groups, big, dtype=np.int64)
    hv_max = np.full(n_groups, -1, dtype=np.int64)
    np.minimum.at(hv_min, gid[ok], value[ok])
    np.maximum.at(hv_max, gid[ok], value[ok])
    bad = ~healthy | (healthy & (hv_min != hv_max))
    out: List[Dict[str, Any]] = []
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], block.size)
    for g in np.flatnonzero(bad).tolist():
        s_, e_ = int(starts[g]), int(ends[g])
        out.append(dict(container=container, datanode=None, replica=None,
                        kind=UNRECOVERABLE_CHUNK, block=int(block[s_]), offset=int(offset[s_]),
                        length=None, sources=[dns[i] for i in who[s_:e_].tolist()],
                        source_replicas=[],
                        reason="no healthy replica" if not healthy[g]
                        else "healthy replicas differ", value=None))
    return out


def repair_plan(pulls: List[Dict[str, Any]], limit: int = DEFAULT_DATANODE_LIMIT
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
        for it in sorted(items, key=lambda i: (len(i["sources"]), i["block"],
                                               i["offset"] if i["offset"] is not None else -1)):
            cands = list(it["sources"])
            reuse = [s for s in cands if s in chosen]
            src = reuse[0] if reuse else min(cands, key=lambda s: (load.get(s, 0), s))
            if src not in chosen:
                load[src] = load.get(src, 0) + 1
                reps = dict(zip(it["sources"], it.get("source_replicas") or []))
                chosen[src] = dict(container=container, target=target, source=src,
                                   target_replica=it.get("replica"),
                                   source_replica=reps.get(src) or None,
                                   items=[], bytes=0)
            c = chosen[src]
            c["items"].append({"kind": it["kind"], "block": it["block"],
                               "offset": it["offset"], "length": it["length"]})
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
