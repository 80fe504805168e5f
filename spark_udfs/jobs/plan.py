"""The plan job: can these datanodes go down? A checksum-aware decommission/maintenance plan.

Ozone (HDDS-1881) and HDFS decide when a datanode may stop by counting replicas per container:
replicas on in-service nodes are `healthy`, those on nodes entering or in maintenance are
`maintenance`, those on decommissioning nodes count for nothing, and

    missing = expected - healthy                  if expected <= healthy (<= 0: over-replicated)
            = max(0, expected - healthy - maintenance, maintenance_min - healthy)  otherwise

(the last term keeps at least `maintenance_min` in-service copies: the design's "at least one
HEALTHY replica", which later Ozone generalised). A DECOMMISSIONING node may become
DECOMMISSIONED when every container on it has `healthy >= min_healthy and healthy +
maintenance >= min_replicas`; an ENTERING_MAINTENANCE node may become IN_MAINTENANCE when
`healthy >= maintenance_min`.

Neither counts only replicas that hold the same, intact data. Here a replica is **good** when
it is clean (no unhealthy chunk, no scan error but a missing or corrupt `.tree`, which the
scan rebuilds from verified data) and belongs to the largest group of clean replicas with
equal container values. Two largest groups of equal size are a tie: nothing is guessed, the
container has no good replica. `healthy` and `maintenance` count good replicas only.

Per leaving node and container it holds, the reasons the node must not stop yet:
  LAST_GOOD_COPY       every good copy is on leaving nodes, this one among them
  UNDER_REPLICATED     the stop condition fails on good copies (copies fix it)
  ONLY_COPY            the node holds data (a block or chunk) no in-service replica holds
                       healthy: it agrees with nothing; reconcile before it goes
  UNRECOVERABLE_CHUNK  the node holds a chunk with no healthy copy, or whose healthy copies
                       differ (the diff's unrecoverable list): an operator must decide
  NO_GOOD_COPY         the container has no good replica (all unhealthy, or a tie)
Copies fix the first two. The copy plan gives each such container max(missing, what the stop
conditions need) new replicas: source = a good replica on an in-service node (on a leaving
node, still running, when no in-service node has one: that is the copy that saves the data),
target = an in-service datanode holding no replica of the container, the one with the least
bytes planned so far; commands are placed in rounds (a datanode takes part in at most `limit`
per round, as the repair plan), containers with the fewest good copies first.

Leaving datanodes are named by their identity (UUID) or their host name (case-insensitive:
the scan tables' host column or the inventory, spark_udfs.cluster.hosts); the plan names each
by both.
On Ozone volumes the plan's `ozone admin datanode decommission|maintenance HOST` commands
name the host (Ozone's commands take host names), never a UUID or a path: a datanode whose
host is unknown gets no command, and the plan says `--datanodes FILE` would name it. A
replica on a datanode none of whose volumes was verified is never a good copy.

Everything per replica and per container is computed in Spark (each stage materialised
with localCheckpoint: the tables are per replica, small, and reused by several later joins,
whose plans would otherwise repeat the whole diff lineage in every branch); the driver collects the
per-node summary, the first `first` IDs per category, and the rows of the containers that need
copies (one per command), from which it places the commands.
"""

from __future__ import annotations

import datetime as _dt
import heapq
import json
import shlex
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from merkle.messages import one_line
from merkle.replica.commandlist import lines_digest
from merkle.replica.layouts import owner_repairing
from spark_udfs.cluster.hosts import HostIndex, command_host, host_index
from spark_udfs.jobs.diff import DEFAULT_DATANODE_LIMIT, DiffResult
from spark_udfs.jobs.report import (
    RECORDED_NOTE,
    _who,
    read_summary,
    scanned_roots,
    verification,
    volume_lines,
)

__all__ = [
    "CATEGORIES",
    "DECOMMISSIONING",
    "IN_SERVICE",
    "MAINTENANCE",
    "OZONE_BY",
    "PLAN_FORMAT",
    "REASONS",
    "REPLICATE_BY",
    "build_plan",
    "copy_commands",
    "format_text",
    "may_decommission",
    "may_enter_maintenance",
    "plan_read",
    "plan_tables",
    "replica_table",
    "replicas_missing",
    "to_json",
]

#: the JSON's "format" (`crcmerkle replicate --report` reads it; the diff's repair plan,
#: diff/plan.json, is "crcmerkle-spark-repair-plan")
PLAN_FORMAT = "crcmerkle-spark-plan"
#: who carries a copy command out (the command's "by"; the copy plan's "carried_out_by")
REPLICATE_BY = "crcmerkle replicate"
OZONE_BY = "ozone"
IN_SERVICE = "IN_SERVICE"
DECOMMISSIONING = "DECOMMISSIONING"
MAINTENANCE = "ENTERING_MAINTENANCE"

REASONS = ("LAST_GOOD_COPY", "UNDER_REPLICATED", "ONLY_COPY", "UNRECOVERABLE_CHUNK", "NO_GOOD_COPY")
REASON_TEXT = {
    "LAST_GOOD_COPY": "last good copy",
    "UNDER_REPLICATED": "under-replicated (counting good copies)",
    "ONLY_COPY": "only copy of some data, agrees with nothing (reconcile first)",
    "UNRECOVERABLE_CHUNK": "holds an unrecoverable chunk",
    "NO_GOOD_COPY": "no good copy anywhere (all unhealthy, or a tie)",
}
#: reasons the copy plan removes
FIXED_BY_COPIES = ("LAST_GOOD_COPY", "UNDER_REPLICATED")

#: per-container categories over the containers with a replica on a leaving node
CATEGORIES = (
    "WOULD_LOSE",
    "NO_GOOD_COPY",
    "TIE",
    "HOLDS_BACK",
    "COPIES_NEEDED",
    "NO_TARGET",
    "ONLY_COPY",
    "UNRECOVERABLE",
    "OZONE_WOULD_ALLOW",
    "SAFE",
)
CATEGORY_TEXT = {
    "WOULD_LOSE": "good copies all on leaving nodes (lost if they stop)",
    "NO_GOOD_COPY": "no good copy anywhere",
    "TIE": "clean replicas split into equal groups (not guessed)",
    "HOLDS_BACK": "hold back a leaving node",
    "COPIES_NEEDED": "need new copies",
    "NO_TARGET": "too few in-service datanodes without a replica to copy to",
    "ONLY_COPY": "a leaving node holds data no in-service replica has",
    "UNRECOVERABLE": "hold an unrecoverable chunk on a leaving node",
    "OZONE_WOULD_ALLOW": "Ozone's count would let the nodes stop; unsafe by checksums",
    "SAFE": "safe: every leaving holder may stop",
}

#: scan errors that leave a replica clean: the scan rebuilt the tree from verified data
_TREE_ERRORS = ("TREE_MISSING", "TREE_CORRUPT")
#: pulls that move data (a tombstone is not data)
_DATA_PULLS = ("MISSING_BLOCK", "MISSING_CHUNK", "CORRUPT_CHUNK")


# ---- the model (HDDS-1881), also used by the tests as the reference ---------------------


def replicas_missing(
    expected: int, healthy: int, maintenance: int, maintenance_min: int = 1
) -> int:
    """HDDS-1881's replica count: new copies needed (negative: over-replicated)."""
    if expected <= healthy:
        return expected - healthy
    return max(0, expected - healthy - maintenance, maintenance_min - healthy)


def may_decommission(
    healthy: int, maintenance: int, min_healthy: int = 1, min_replicas: int = 3
) -> bool:
    """DECOMMISSIONING -> DECOMMISSIONED condition for one container."""
    return healthy >= min_healthy and healthy + maintenance >= min_replicas


def may_enter_maintenance(healthy: int, maintenance_min: int = 1) -> bool:
    """ENTERING_MAINTENANCE -> IN_MAINTENANCE condition for one container."""
    return healthy >= maintenance_min


def _missing_sql(h: str, m: str, expected: int, maintenance_min: int) -> str:
    return (
        f"CASE WHEN {expected} <= {h} THEN {expected} - {h} ELSE "
        f"greatest(0, {expected} - {h} - {m}, {maintenance_min} - {h}) END"
    )


def _ok_sql(
    state: str, h: str, m: str, min_healthy: int, min_replicas: int, maintenance_min: int
) -> str:
    return (
        f"CASE WHEN {state} = '{DECOMMISSIONING}' THEN {h} >= {min_healthy} AND "
        f"{h} + {m} >= {min_replicas} ELSE {h} >= {maintenance_min} END"
    )


# ---- the Spark part ---------------------------------------------------------------------


def _sql_list(names: Iterable[str]) -> str:
    return (
        "array("
        + ", ".join("'" + n.replace("\\", "\\\\").replace("'", "\\'") + "'" for n in names)
        + ")"
        if names
        else "array()"
    )


def replica_table(
    diff: DiffResult, errors: Any, leaving: Dict[str, str], unverified: Sequence[str] = ()
) -> Any:
    """One row per replica: container, datanode, replica, volume, state, clean. A replica
    that was not read (its `verified` false), or of a datanode in `unverified` (none of its
    volumes verified), is never clean: it is no healthy copy."""
    from pyspark.sql import functions as F

    spark = diff.containers.sparkSession
    read = (
        F.coalesce(F.col("verified"), F.lit(True))
        if "verified" in diff.replicas.columns
        else F.lit(True)
    )
    if unverified:
        read = read & ~F.col("datanode").isin(*sorted(unverified))
    r = diff.replicas.select(
        "container", "datanode", "replica", "unhealthy_chunks", read.alias("read")
    )
    if errors is not None:
        bad = (
            errors.filter(~F.col("error").isin(*_TREE_ERRORS))
            .select("container", "datanode")
            .distinct()
            .withColumn("scan_error", F.lit(True))
        )
        r = r.join(bad, ["container", "datanode"], "left")
    else:
        r = r.withColumn("scan_error", F.lit(None).cast("boolean"))
    states = spark.createDataFrame(
        sorted(leaving.items()) or [("", IN_SERVICE)], "datanode string, state string"
    )
    return r.join(F.broadcast(states), "datanode", "left").selectExpr(
        "container",
        "datanode",
        "replica",
        "regexp_replace(replica, '/+[^/]*/*$', '') AS volume",
        f"coalesce(state, '{IN_SERVICE}') AS state",
        "read AND coalesce(unhealthy_chunks, 0) = 0 AND NOT coalesce(scan_error, false) AS clean",
    )


def _good_replicas(diff: DiffResult, reps: Any, touched: Any) -> Any:
    """`reps` of the touched containers with `good` and the container's `tie` flag."""
    from pyspark.sql import functions as F

    groups = (
        diff.containers.join(touched, "container", "left_semi")
        .select("container", F.posexplode("groups").alias("gi", "dns"))
        .select("container", "gi", F.explode("dns").alias("datanode"))
    )
    r = reps.join(touched, "container", "left_semi").join(groups, ["container", "datanode"], "left")
    sizes = r.filter("clean").groupBy("container", "gi").agg(F.count(F.lit(1)).alias("k"))
    # per container, clean group sizes largest first: a unique largest group is the good one
    top = (
        sizes.groupBy("container")
        .agg(
            F.sort_array(
                F.collect_list(F.struct((-F.col("k")).alias("k"), F.col("gi").alias("gi")))
            ).alias("s")
        )
        .selectExpr(
            "container",
            "size(s) > 1 AND s[0].k = s[1].k AS tie",
            "CASE WHEN size(s) > 1 AND s[0].k = s[1].k THEN NULL ELSE s[0].gi END AS good_gi",
        )
    )
    return r.join(top, "container", "left").selectExpr(
        "container",
        "datanode",
        "replica",
        "volume",
        "state",
        "clean",
        "coalesce(clean AND gi = good_gi, false) AS good",
        "coalesce(tie, false) AS tie",
    )


def _holders(diff: DiffResult, touched: Any, leaving: Sequence[str], good: Any) -> Tuple[Any, Any]:
    """(container, datanode) pairs holding an unrecoverable chunk, and pairs that are among
    the sources of data that good replicas lack and only leaving nodes hold (a pull into a
    replica that is not good is repair, not a version only the leaving node has)."""
    from pyspark.sql import functions as F

    unrec = (
        diff.unrecoverable.join(touched, "container", "left_semi")
        .select("container", F.explode("datanodes").alias("datanode"))
        .distinct()
        .withColumn("unrec", F.lit(True))
    )
    only = (
        diff.pulls.join(good, ["container", "datanode"], "left_semi")
        .filter(F.col("kind").isin(*_DATA_PULLS))
        .filter(
            F.expr(
                f"size(sources) > 0 AND forall(sources, s -> array_contains("
                f"{_sql_list(leaving)}, s))"
            )
        )
        .select("container", F.explode("sources").alias("datanode"))
        .distinct()
        .withColumn("only", F.lit(True))
    )
    return unrec, only


def _replica_bytes(chunks: Any, blocks: Any, need: Any) -> Any:
    """(container, bytes): the data bytes of a good replica of each container in `need`."""
    from pyspark.sql import functions as F

    if blocks is None and chunks is None:
        return need.select("container").distinct().withColumn("bytes", F.lit(0).cast("long"))
    if blocks is not None:
        per = (
            blocks.join(need, ["container", "datanode"], "left_semi")
            .filter(~F.col("deleted"))
            .groupBy("container", "datanode")
            .agg(F.sum("bytes").alias("b"))
        )
    else:
        per = (
            chunks.join(need, ["container", "datanode"], "left_semi")
            .filter(F.col("offset").isNotNull() & ~F.col("deleted"))
            .groupBy("container", "datanode")
            .agg(F.sum("length").alias("b"))
        )
    return per.groupBy("container").agg(F.max("b").alias("bytes"))


def _first_ids(
    df: Any, conds: Dict[str, Any], first: int, extra: Sequence[Any] = ()
) -> Tuple[Dict[str, int], Dict[str, List[int]], Any]:
    """Counts and the first `first` container IDs per condition, and the `extra`
    aggregates (returned as the row), in one job."""
    from pyspark.sql import functions as F

    aggs = list(extra)
    for name, cond in conds.items():
        aggs.append(F.sum(F.when(cond, 1).otherwise(0)).alias(f"n_{name}"))
        aggs.append(
            F.slice(
                F.sort_array(F.collect_list(F.when(cond, F.col("container")))), 1, max(first, 1)
            ).alias(f"ids_{name}")
        )
    row = df.agg(*aggs).collect()[0]
    return (
        {n: int(row[f"n_{n}"] or 0) for n in conds},
        {n: [int(i) for i in (row[f"ids_{n}"] or [])][:first] for n in conds},
        row,
    )


def plan_tables(
    diff: DiffResult,
    reps: Any,
    leaving: Dict[str, str],
    n_in_service: int,
    *,
    replication: int = 3,
    min_healthy: int = 1,
    min_replicas: int = 3,
    maintenance_min: int = 1,
    every_container: bool = False,
) -> Tuple[Any, Any, Any]:
    """(replicas, containers, held) DataFrames: per replica its state and goodness; per
    container the counts, Ozone's and the checksum-aware `missing`, the copies planned; per
    (leaving node, container) the reasons it must wait. Only the containers with a replica
    on a leaving node unless `every_container` (the tests' view of the whole model)."""
    from pyspark.sql import functions as F

    touched = (
        reps.select("container").distinct()
        if every_container
        else reps.filter(F.col("state") != IN_SERVICE).select("container").distinct()
    )
    r = _good_replicas(diff, reps, touched)
    unrec, only = _holders(
        diff, touched, sorted(leaving), r.filter("good").select("container", "datanode")
    )
    r = (
        r.join(unrec, ["container", "datanode"], "left")
        .join(only, ["container", "datanode"], "left")
        .selectExpr(
            "*", "coalesce(unrec, false) AS holds_unrec", "coalesce(only, false) AS holds_only"
        )
        .drop("unrec", "only")
        .localCheckpoint()
    )

    ins, dec, mnt = (f"state = '{s}'" for s in (IN_SERVICE, DECOMMISSIONING, MAINTENANCE))

    def cnt(cond: str) -> Any:  # the rows where `cond` holds, counted by a groupBy's agg
        return F.sum(F.expr(f"CASE WHEN {cond} THEN 1 ELSE 0 END"))

    c = r.groupBy("container").agg(
        F.count(F.lit(1)).alias("n"),
        cnt(ins).alias("n_in"),
        cnt(dec).alias("n_decom"),
        cnt(mnt).alias("n_maint"),
        cnt("good").alias("g"),
        cnt(f"good AND {ins}").alias("g_in"),
        cnt(f"good AND {mnt}").alias("g_maint"),
        F.max("tie").alias("tie"),
        F.max("holds_unrec").alias("unrec"),
    )
    c = c.selectExpr(
        "*",
        f"{_missing_sql('n_in', 'n_maint', replication, maintenance_min)} AS ozone_missing",
        f"{_missing_sql('g_in', 'g_maint', replication, maintenance_min)} AS missing",
        # copies the stop conditions need (beyond `missing` only with unusual settings)
        f"greatest(CASE WHEN n_decom > 0 THEN greatest({min_healthy} - g_in, "
        f"{min_replicas} - g_in - g_maint) ELSE 0 END, CASE WHEN n_maint > 0 THEN "
        f"{maintenance_min} - g_in ELSE 0 END) AS need",
        f"{n_in_service} - n_in AS targets",
    )
    # one row per (leaving node, container it holds), with why it must wait
    ok = _ok_sql("state", "g_in", "g_maint", min_healthy, min_replicas, maintenance_min)
    ozone_ok = _ok_sql("state", "n_in", "n_maint", min_healthy, min_replicas, maintenance_min)
    held = (
        r.filter(f"NOT {ins}")
        .join(c, "container")
        .selectExpr(
            "container",
            "datanode",
            "state",
            "g",
            "g_in",
            f"{ozone_ok} AS ozone_ok",
            "filter(array("
            "CASE WHEN g > 0 AND g_in = 0 AND good THEN 'LAST_GOOD_COPY' END, "
            f"CASE WHEN g > 0 AND NOT ({ok}) AND NOT (g_in = 0 AND good) "
            "THEN 'UNDER_REPLICATED' END, "
            "CASE WHEN holds_only THEN 'ONLY_COPY' END, "
            "CASE WHEN holds_unrec THEN 'UNRECOVERABLE_CHUNK' END, "
            "CASE WHEN g = 0 THEN 'NO_GOOD_COPY' END), x -> x IS NOT NULL) AS reasons",
        )
        .localCheckpoint()
    )
    fixed = _sql_list(FIXED_BY_COPIES)
    per_c = held.groupBy("container").agg(
        F.max(F.expr("size(reasons) > 0")).alias("holds_back"),
        F.max(F.expr(f"exists(reasons, x -> array_contains({fixed}, x))")).alias("countable"),
        F.min("ozone_ok").alias("ozone_ok"),
        F.max(F.expr("array_contains(reasons, 'ONLY_COPY')")).alias("only"),
    )
    c = (
        c.join(per_c, "container", "left")
        .selectExpr(
            "container",
            "n",
            "n_in",
            "n_decom",
            "n_maint",
            "g",
            "g_in",
            "g_maint",
            "tie",
            "unrec",
            "ozone_missing",
            "missing",
            "need",
            "targets",
            "coalesce(holds_back, false) AS holds_back",
            "coalesce(ozone_ok, true) AS ozone_ok",
            "coalesce(only, false) AS only",
            "CASE WHEN countable AND g > 0 THEN greatest(missing, need, 0) ELSE 0 END AS copies",
        )
        .localCheckpoint()
    )
    return r, c, held


def build_plan(
    diff: DiffResult,
    *,
    decommission: Sequence[str] = (),
    maintenance: Sequence[str] = (),
    errors: Any = None,
    blocks: Any = None,
    chunks: Any = None,
    replication: int = 3,
    min_healthy: int = 1,
    min_replicas: Optional[int] = None,
    maintenance_min: int = 1,
    limit: int = DEFAULT_DATANODE_LIMIT,
    first: int = 100,
    read: Optional[Dict[str, Any]] = None,
    replicas: Any = None,
    volumes: Any = None,
    inventory: Any = None,
) -> Dict[str, Any]:
    """The plan as a JSON-ready dict (see the module docstring). `errors`, `blocks`: a
    scan's tables (give them when there are; `chunks` is used for byte counts otherwise);
    `read`: plan_read(diff) when the caller has it already; `replicas` (the containers
    table), `volumes` and `inventory`: who the datanodes are (spark_udfs.cluster.hosts).
    ValueError for a datanode the scan does not know, or listed twice."""
    from pyspark.sql import functions as F

    min_replicas = replication if min_replicas is None else min_replicas
    if not decommission and not maintenance:
        raise ValueError("name the leaving datanodes (--decommission and/or --maintenance)")
    idx = host_index(
        diff.containers.sparkSession,
        replicas=replicas,
        volumes=volumes,
        inventory=inventory,
        first=first,
    )
    known = [r["datanode"] for r in diff.replicas.select("datanode").distinct().collect()]
    decommission = _resolve(idx, decommission, known)
    maintenance = _resolve(idx, maintenance, known)
    dup = sorted(set(decommission) & set(maintenance))
    if dup:
        raise ValueError(
            f"datanode(s) {', '.join(dup)} listed for both decommission and maintenance"
        )
    leaving = {d: DECOMMISSIONING for d in decommission}
    leaving.update({d: MAINTENANCE for d in maintenance})
    reps = replica_table(diff, errors, leaving, sorted(idx.datanodes_unverified)).localCheckpoint()
    # the datanodes and their volumes (small: datanodes x volumes)
    dn_volumes: Dict[str, List[str]] = {}
    for row in (
        reps.groupBy("datanode").agg(F.sort_array(F.collect_set("volume")).alias("v")).collect()
    ):
        dn_volumes[row["datanode"]] = list(row["v"] or [])
    unknown = sorted(set(leaving) - set(dn_volumes))
    unread = [d for d in unknown if d in idx.datanodes_unverified]
    if unread:
        raise ValueError(
            f"datanode(s) {', '.join(idx.who(d) for d in unread)} were not "
            f"verified (none of their volumes was scanned): scan them before "
            f"planning their decommission"
        )
    if unknown:
        raise ValueError(
            f"datanode(s) {', '.join(unknown)} hold no replica in the scan "
            f"(name a datanode by its UUID or its host name; known: "
            f"{', '.join(idx.who(d) for d in sorted(dn_volumes)[:20])})"
        )
    _check_read_whole(idx, leaving)
    # a datanode none of whose volumes was verified is no target of a copy
    in_service = sorted(
        d for d in dn_volumes if d not in leaving and d not in idx.datanodes_unverified
    )
    # volumes of a layout whose owner makes the copies (Ozone's ReplicationManager)
    owner = owner_repairing(v for vs in dn_volumes.values() for v in vs)

    r, c, held = plan_tables(
        diff,
        reps,
        leaving,
        len(in_service),
        replication=replication,
        min_healthy=min_healthy,
        min_replicas=min_replicas,
        maintenance_min=maintenance_min,
    )

    # -- what the driver collects ------------------------------------------------------------
    col = F.col
    conds = {
        "WOULD_LOSE": (col("g") > 0) & (col("g_in") == 0),
        "NO_GOOD_COPY": col("g") == 0,
        "TIE": col("tie"),
        "HOLDS_BACK": col("holds_back"),
        "COPIES_NEEDED": col("copies") > 0,
        "NO_TARGET": (col("copies") > col("targets")),
        "ONLY_COPY": col("only"),
        "UNRECOVERABLE": col("unrec"),
        "OZONE_WOULD_ALLOW": col("ozone_ok") & col("holds_back"),
        "SAFE": ~col("holds_back"),
    }
    counts, ids, totals = _first_ids(
        c,
        conds,
        first,
        [
            F.count(F.lit(1)).alias("n"),
            F.sum("missing").alias("missing"),
            F.sum(F.greatest(col("ozone_missing"), F.lit(0))).alias("ozone_missing"),
        ],
    )
    nodes = _node_summary(
        held.join(c.selectExpr("container", "copies > targets AS short"), "container"),
        leaving,
        first,
    )
    for n in nodes:
        n["host"] = idx.host_of(n["datanode"])
    lose = _details(r, c.filter(conds["WOULD_LOSE"]), first)
    for x in lose:
        for h in x["holders"]:
            h["host"] = idx.host_of(h["datanode"])
    needs = _copy_needs(r, c, chunks, blocks)
    commands = copy_commands(needs, in_service, dn_volumes, limit)
    for cmd in commands:
        cmd["source_host"] = idx.host_of(cmd["source"])
        cmd["target_host"] = idx.host_of(cmd["target"])
    rounds = _rounds(commands)
    may_stop = [n["datanode"] for n in nodes if n["can_stop"]]
    summary = {
        "leaving_datanodes": len(leaving),
        "may_stop_now": len(may_stop),
        "held_back": len(leaving) - len(may_stop),
        "containers_on_leaving_nodes": int(totals["n"] or 0),
        **{k.lower(): v for k, v in counts.items()},
        "missing": int(totals["missing"] or 0),
        "ozone_missing": int(totals["ozone_missing"] or 0),
        "copies": len(commands),
        "copy_bytes": sum(cmd["bytes"] for cmd in commands),
        "copies_short": int(sum(n["need"] - n["planned"] for n in needs)),
    }
    return {
        "format": PLAN_FORMAT,
        "version": 1,
        "generated": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "parameters": {
            "decommission": list(decommission),
            "maintenance": list(maintenance),
            "hosts": {d: idx.host_of(d) for d in sorted(leaving)},
            "replication": replication,
            "min_healthy": min_healthy,
            "min_replicas": min_replicas,
            "maintenance_min": maintenance_min,
            "datanode_limit": limit,
            "first": first,
        },
        "summary": summary,
        "datanodes": nodes,
        "first": first,
        "containers": ids,
        "would_lose": lose,
        "read": plan_read(diff) if read is None else read,
        # the digest `crcmerkle replicate --report` checks before it copies anything
        "copy_plan": {
            "datanode_limit": limit,
            "rounds": rounds,
            "commands": commands,
            "carried_out_by": owner.name if owner is not None else REPLICATE_BY,
            "sha256": lines_digest(commands),
        },
        # a copy's source and target must lie under these (replicate --report checks)
        "scanned_roots": scanned_roots(reps),
        "verification": verification(idx),
        "volumes": idx.unverified,
        "hosts_unverified": idx.hosts_unverified,
        "knows_hosts": idx.knows_hosts,
        **(
            {owner.name: _owner_steps(owner, leaving, ids["OZONE_WOULD_ALLOW"], idx)}
            if owner is not None
            else {}
        ),
    }


def _check_read_whole(idx: HostIndex, leaving: Dict[str, str]) -> None:
    """ValueError when a leaving datanode has a volume of its own that was not read (failed,
    never scanned or emitted, ...): the containers there are unknown, and it may hold the
    only good copy of some; it may leave once that volume is scanned."""
    bad = [d for d in sorted(leaving) if idx.unread_volumes.get(d)]
    if bad:
        what = "; ".join(
            f"{idx.who(d)}: {', '.join(idx.unread_volumes[d][:5])}"
            + (" ..." if len(idx.unread_volumes[d]) > 5 else "")
            for d in bad
        )
        raise ValueError(
            f"datanode(s) with volumes that were not read ({one_line(what)}): "
            f"what they hold is unknown; scan them before planning their "
            f"decommission or maintenance"
        )


def _resolve(idx: HostIndex, names: Sequence[str], known: Sequence[str]) -> List[str]:
    """The datanodes `names` mean (each a UUID or a host name, spark_udfs.cluster.hosts), in order,
    each once; a name nothing knows is kept as given (build_plan then says so)."""
    out: List[str] = []
    for name in names:
        found = idx.resolve(name, known)
        if len(found) > 1:
            raise ValueError(
                f"{name} names {len(found)} datanodes ({', '.join(found)}): "
                f"give the datanode's UUID"
            )
        d = found[0] if found else name
        if d not in out:
            out.append(d)
    return out


def plan_read(diff: DiffResult) -> Dict[str, Any]:
    """How many of the scan's replicas were read (as the report's "read"): a plan over a
    scan that read nothing is no plan (the CLI exits 2, spark_udfs.jobs.report.check_read)."""
    from pyspark.sql import functions as F

    row = diff.containers.agg(
        F.sum("n_replicas").alias("n"),
        F.sum("read_replicas").alias("k"),
        F.sum("data_replicas").alias("d"),
    ).collect()[0]
    return read_summary(int(row["n"] or 0), int(row["k"] or 0), int(row["d"] or 0))


def _owner_steps(
    owner: Any, leaving: Dict[str, str], reconcile_first: List[int], idx: Optional[HostIndex] = None
) -> Dict[str, Any]:
    """On a layout whose owner makes the copies (Ozone's volumes), not crcmerkle: what to run
    there (the layout's commands: merkle.replica.layout.Layout.owner_*). The command that
    takes a datanode out of service names its host: none for a datanode whose host is
    unknown (or not a plausible host name)."""
    nodes = []
    for d, st in sorted(leaving.items()):
        host = idx.host_of(d) if idx is not None else None
        entry: Dict[str, Any] = {"datanode": d, "host": host}
        if command_host(host) is not None:
            entry["argv"] = owner.owner_leave_argv(host, maintenance=st != DECOMMISSIONING)
        nodes.append(entry)
    return {
        "note": owner.owner_copies_note,
        "reconcile_first": [
            {"containerID": c, "argv": owner.owner_repair_argv(c)} for c in reconcile_first
        ],
        "datanodes": nodes,
    }


def _node_summary(held: Any, leaving: Dict[str, str], first: int) -> List[Dict[str, Any]]:
    """Per leaving node: containers, whether it may stop, counts per reason, the first
    containers holding it back with their reasons (and whether Ozone's count would let it)."""
    from pyspark.sql import functions as F

    fixed = _sql_list(FIXED_BY_COPIES)
    aggs = [
        F.count(F.lit(1)).alias("containers"),
        F.sum(F.expr("CASE WHEN size(reasons) > 0 THEN 1 ELSE 0 END")).alias("held"),
        # held back by something copies do not fix, or by too few targets
        F.sum(
            F.expr(
                f"CASE WHEN size(reasons) > 0 AND (short OR exists(reasons, x -> "
                f"NOT array_contains({fixed}, x))) THEN 1 ELSE 0 END"
            )
        ).alias("stuck"),
        F.sum(F.expr("CASE WHEN ozone_ok THEN 0 ELSE 1 END")).alias("ozone_held"),
        F.slice(
            F.sort_array(
                F.collect_list(F.when(F.size("reasons") > 0, F.struct("container", "reasons")))
            ),
            1,
            max(first, 1),
        ).alias("firsts"),
    ]
    for reason in REASONS:
        aggs.append(
            F.sum(F.expr(f"CASE WHEN array_contains(reasons, '{reason}') THEN 1 ELSE 0 END")).alias(
                f"r_{reason}"
            )
        )
    rows = {r["datanode"]: r for r in held.groupBy("datanode").agg(*aggs).collect()}
    out = []
    for dn in sorted(leaving):
        r = rows.get(dn)
        n_held = int(r["held"] or 0) if r else 0
        out.append(
            {
                "datanode": dn,
                "operation": "decommission" if leaving[dn] == DECOMMISSIONING else "maintenance",
                "containers": int(r["containers"]) if r else 0,
                "can_stop": n_held == 0,
                "held_back_by": n_held,
                "can_stop_after_copies": (int(r["stuck"] or 0) == 0) if r else True,
                "ozone_can_stop": (int(r["ozone_held"] or 0) == 0) if r else True,
                "reasons": {x: int(r[f"r_{x}"] or 0) for x in REASONS}
                if r
                else {x: 0 for x in REASONS},
                "first_held_back_by": [
                    {"container": int(f["container"]), "reasons": list(f["reasons"])}
                    for f in (r["firsts"] or [])
                ][:first]
                if r
                else [],
            }
        )
    return out


def _details(r: Any, cs: Any, first: int) -> List[Dict[str, Any]]:
    """The first containers of `cs` with each replica's datanode, state and goodness."""
    from pyspark.sql import functions as F

    head = cs.select("container", "g", "g_in", "n", "n_in").orderBy("container").limit(first)
    rows = (
        r.join(head, "container")
        .groupBy("container", "g", "g_in", "n", "n_in")
        .agg(
            F.sort_array(
                F.collect_list(F.struct("datanode", "state", "good", "clean", "replica"))
            ).alias("reps")
        )
        .orderBy("container")
        .collect()
    )
    return [
        {
            "container": int(x["container"]),
            "good_copies": int(x["g"]),
            "good_in_service": int(x["g_in"]),
            "replicas": int(x["n"]),
            "replicas_in_service": int(x["n_in"]),
            "holders": [
                {
                    "datanode": p["datanode"],
                    "state": p["state"],
                    "good": bool(p["good"]),
                    "clean": bool(p["clean"]),
                    "replica": p["replica"],
                }
                for p in x["reps"]
            ],
        }
        for x in rows
    ]


def _copy_needs(r: Any, c: Any, chunks: Any, blocks: Any) -> List[Dict[str, Any]]:
    """The containers that need copies, with their good sources, holders and bytes (the
    only rows collected in proportion to the work: one per container to copy)."""
    from pyspark.sql import functions as F

    need = c.filter("copies > 0").select("container", "g", "copies")
    good = r.join(need.select("container"), "container", "left_semi").filter("good")
    nbytes = _replica_bytes(chunks, blocks, good.select("container", "datanode"))
    rows = (
        r.join(need, "container")
        .groupBy("container", "g", "copies")
        .agg(
            F.sort_array(
                F.collect_list(
                    F.when(
                        F.col("good"),
                        F.struct(
                            (F.col("state") != IN_SERVICE).alias("leaving"), "datanode", "replica"
                        ),
                    )
                )
            ).alias("sources"),
            F.collect_list("datanode").alias("holders"),
        )
        .join(nbytes, "container", "left")
        .orderBy("g", "container")
        .collect()
    )
    return [
        {
            "container": int(x["container"]),
            "good_copies": int(x["g"]),
            "need": int(x["copies"]),
            "planned": 0,
            "bytes": int(x["bytes"] or 0),
            "sources": [(s["datanode"], s["replica"], bool(s["leaving"])) for s in x["sources"]],
            "holders": set(x["holders"]),
        }
        for x in rows
    ]


# ---- the driver part: placing the commands ----------------------------------------------


def copy_commands(
    needs: List[Dict[str, Any]],
    in_service: Sequence[str],
    volumes: Dict[str, List[str]],
    limit: int = DEFAULT_DATANODE_LIMIT,
) -> List[Dict[str, Any]]:
    """Commands for `needs` (dicts: container, good_copies, need, bytes, sources [(datanode,
    replica, on a leaving node)], holders {datanodes}; `planned` is updated), in the order
    given (fewest good copies first). Target: the in-service datanode with the least bytes
    planned that holds no replica of the container (and on it the volume with the least
    bytes planned); source: a good in-service replica (a leaving one only when there is
    none), the least loaded. Rounds: at most `limit` commands per datanode per round.

    Commands for replicas on Ozone datanode volumes (hdds/<cluster>/current/containerDir*)
    have no target path and no argv: `crcmerkle replicate` handles the crcmerkle layout only;
    there the datanodes' ReplicationManager copies (driven by `ozone admin datanode
    decommission|maintenance`), and source/target are information."""
    if limit < 1:
        raise ValueError("limit must be >= 1")
    heap: List[Tuple[int, str]] = [(0, d) for d in sorted(in_service)]
    heapq.heapify(heap)
    vol_bytes: Dict[str, int] = {}
    src_load: Dict[str, int] = {}
    commands: List[Dict[str, Any]] = []
    for n in needs:
        srcs = [s for s in n["sources"] if not s[2]] or list(n["sources"])
        if not srcs:
            continue
        taken = set(n["holders"])
        for _ in range(n["need"]):
            skipped: List[Tuple[int, str]] = []
            pick: Optional[Tuple[int, str]] = None
            while heap:
                item = heapq.heappop(heap)
                if item[1] in taken:
                    skipped.append(item)
                    continue
                pick = item
                break
            for s in skipped:
                heapq.heappush(heap, s)
            if pick is None:
                break  # no in-service datanode left without a replica: NO_TARGET
            planned, target = pick
            heapq.heappush(heap, (planned + n["bytes"], target))
            taken.add(target)
            src = min(srcs, key=lambda s: (src_load.get(s[0], 0), s[0]))
            src_load[src[0]] = src_load.get(src[0], 0) + n["bytes"]
            vols = volumes.get(target) or []
            vol = min(vols, key=lambda v: (vol_bytes.get(v, 0), v)) if vols else None
            if vol is not None:
                vol_bytes[vol] = vol_bytes.get(vol, 0) + n["bytes"]
            owner = owner_repairing([src[1], vol])
            # on Ozone the datanodes make the copy (and place it): no path of ours
            tgt_replica = f"{vol}/{n['container']}" if vol and owner is None else None
            cmd = {
                "container": n["container"],
                "good_copies": n["good_copies"],
                "source": src[0],
                "source_replica": src[1],
                "source_leaving": src[2],
                "target": target,
                "target_replica": tgt_replica,
                "bytes": n["bytes"],
                "by": owner.name if owner is not None else REPLICATE_BY,
            }
            if src[1] and tgt_replica:
                cmd["argv"] = ["crcmerkle", "replicate", src[1], tgt_replica]
            commands.append(cmd)
            n["planned"] += 1
    used: List[Dict[str, int]] = []
    for cmd in commands:
        k = 0
        while True:
            if k == len(used):
                used.append({})
            u = used[k]
            if u.get(cmd["source"], 0) < limit and u.get(cmd["target"], 0) < limit:
                u[cmd["source"]] = u.get(cmd["source"], 0) + 1
                u[cmd["target"]] = u.get(cmd["target"], 0) + 1
                cmd["round"] = k
                break
            k += 1
    commands.sort(key=lambda c: c["round"])  # stable: fewest good copies first in a round
    return commands


def _rounds(commands: List[Dict[str, Any]]) -> List[Dict[str, int]]:
    out: Dict[int, Dict[str, int]] = {}
    for c in commands:
        r = out.setdefault(c["round"], {"round": c["round"], "commands": 0, "bytes": 0})
        r["commands"] += 1
        r["bytes"] += c["bytes"]
    return [out[k] for k in sorted(out)]


# ---- output -----------------------------------------------------------------------------


def _holder_health(holder: Dict[str, Any]) -> str:
    return "good" if holder["good"] else "unhealthy" if not holder["clean"] else "disagrees"


def format_text(plan: Dict[str, Any]) -> str:
    """The human form: data at risk first, then each node, categories, the commands."""
    p, s = plan["parameters"], plan["summary"]
    knows = bool(plan.get("knows_hosts"))
    hosts = p.get("hosts") or {}

    def who(d: Any, h: Any = None) -> str:  # a datanode shown with its host
        return _who(d, h if h is not None else hosts.get(d), knows)

    lines = [
        f"Decommission/maintenance plan generated at {plan['generated']}",
        "=" * 60,
        f"decommission: {', '.join(who(d) for d in p['decommission']) or '-'}   "
        f"maintenance: {', '.join(who(d) for d in p['maintenance']) or '-'}",
        f"model: replication {p['replication']}, min healthy {p['min_healthy']}, min "
        f"replicas {p['min_replicas']}, maintenance min {p['maintenance_min']}; only "
        f"good replicas count (clean, in the largest group of equal values)",
    ]
    rd = plan.get("read")
    if rd and rd["read"] and rd.get("data_read", rd["read"]) == 0:
        # a census or --trees-only pass: its "good" copies agree in their recorded checksums
        lines.append(
            f"NO DATA READ: {rd['read']} of {rd['replicas']} replica(s) of the scan {RECORDED_NOTE}"
        )
    elif rd:
        lines.append(f"read {rd['read']} of {rd['replicas']} replica(s) of the scan")
    v = plan.get("verification") or {}
    if v.get("volumes_unverified"):
        lines.append(
            f"not verified: {v['volumes_unverified']} volume(s), "
            f"{v['hosts_unverified']} host(s) with no verified volume: their "
            f"replicas are unknown and count as no copy"
        )
    lines += volume_lines(plan)
    lines.append("")
    lose = plan["would_lose"]
    lines.append(
        f"Containers whose good copies would ALL be gone if these nodes stop: {s['would_lose']}"
    )
    for x in lose:
        hold = ", ".join(
            f"{who(h['datanode'], h.get('host'))}({h['state'].lower()}, {_holder_health(h)})"
            for h in x["holders"]
        )
        lines.append(
            f"  container {x['container']}: {x['good_copies']} good of "
            f"{x['replicas']} replicas, none in service: {hold}"
        )
    if s["no_good_copy"]:
        lines.append(
            f"Containers with no good copy anywhere: {s['no_good_copy']} (first: "
            + ", ".join(f"#{i}" for i in plan["containers"]["NO_GOOD_COPY"])
            + ")"
        )
    lines += ["", "Datanodes", "=" * 9]
    for n in plan["datanodes"]:
        verdict = (
            "may stop now"
            if n["can_stop"]
            else (
                f"NOT yet: {n['held_back_by']} of {n['containers']} container(s) hold it back"
                + (
                    "; the copies below make it safe"
                    if n["can_stop_after_copies"]
                    else "; copies alone do not make it safe"
                )
            )
        )
        ozone = (
            ""
            if n["ozone_can_stop"] == n["can_stop"]
            else (
                "  (Ozone's replica count would let it stop)"
                if n["ozone_can_stop"]
                else "  (Ozone's replica count would hold it back)"
            )
        )
        lines.append(f"{who(n['datanode'], n.get('host'))} ({n['operation']}): {verdict}{ozone}")
        if not n["can_stop"]:
            why = ", ".join(f"{REASON_TEXT[k]}: {v}" for k, v in n["reasons"].items() if v)
            lines.append(f"  reasons: {why}")
            lines.append(
                "  first: "
                + ", ".join(
                    f"#{f['container']} ({', '.join(x.lower() for x in f['reasons'])})"
                    for f in n["first_held_back_by"][:10]
                )
                + (" ..." if len(n["first_held_back_by"]) > 10 else "")
            )
    lines += ["", f"Containers on leaving nodes: {s['containers_on_leaving_nodes']}"]
    for k in CATEGORIES:
        key = k.lower()
        lines.append(f"  {k}: {s[key]}  ({CATEGORY_TEXT[k]})")
        if s[key] and k not in ("SAFE", "WOULD_LOSE"):
            lines.append("    first: " + ", ".join(f"#{i}" for i in plan["containers"][k][:20]))
    lines.append(
        f"  missing replicas (good copies): {s['missing']}; by Ozone's count "
        f"(every replica healthy): {s['ozone_missing']}"
    )
    cp = plan["copy_plan"]
    lines += [
        "",
        f"Copy plan: {s['copies']} command(s), {s['copy_bytes']} bytes, in "
        f"{len(cp['rounds'])} round(s), at most {cp['datanode_limit']} per datanode "
        f"per round"
        + (
            f"; {s['copies_short']} copies could not be placed (no "
            f"in-service datanode without a replica)"
            if s["copies_short"]
            else ""
        ),
    ]
    for r in cp["rounds"]:
        lines.append(f"  round {r['round']}: {r['commands']} command(s), {r['bytes']} bytes")
    for cmd in cp["commands"][: plan["first"]]:
        lines.append(
            f"  round {cmd['round']}: container {cmd['container']} ({cmd['good_copies']}"
            f" good) {who(cmd['source'], cmd.get('source_host'))}"
            f"{' [leaving]' if cmd['source_leaving'] else ''}"
            f" -> {who(cmd['target'], cmd.get('target_host'))}: {cmd['bytes']} bytes"
        )
    oz = plan.get("ozone")
    if oz:
        lines += [
            "",
            "On Ozone volumes the datanodes make these copies (crcmerkle replicate "
            "handles the crcmerkle layout only): Ozone's",
            "ReplicationManager copies while the nodes leave, choosing source and "
            "target itself (those above are information).",
        ]
        if oz["reconcile_first"]:
            lines += [
                "It counts replicas, not checksums: for the containers its count would "
                f"let go ({s['ozone_would_allow']}) it copies nothing.",
                "Reconcile them first, while the leaving nodes still run, then scan "
                "and plan again:",
            ]
            lines += ["  " + shlex.join(e["argv"]) for e in oz["reconcile_first"][:20]]
            if len(oz["reconcile_first"]) > 20:
                lines.append("  ... (the JSON lists the first ones)")
        lines.append("Start the decommission / maintenance (Ozone then makes the copies):")
        lines += ["  " + shlex.join(e["argv"]) for e in oz["datanodes"] if e.get("argv")]
        unnamed = [e["datanode"] for e in oz["datanodes"] if not e.get("argv")]
        if unnamed:
            lines.append(
                f"  no command for {', '.join(unnamed)}: its host is unknown (Ozone's "
                f"commands take host names); give --datanodes FILE (e.g. the output "
                f"of 'ozone admin datanode list --json') to name it"
            )
    elif cp["commands"]:
        lines.append(
            "Run them with: crcmerkle replicate --report PLAN.json (the JSON of this plan)"
        )
    # a datanode or replica directory may be named with a newline: one line stays one line
    return "\n".join(one_line(line) for line in lines) + "\n"


def to_json(plan: Dict[str, Any]) -> str:
    return json.dumps(plan, indent=1, default=_default) + "\n"


def _default(o: Any) -> Any:
    if isinstance(o, set):
        return sorted(o)
    return str(o)
