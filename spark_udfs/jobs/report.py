"""The report job: what an operator reads after scan and diff, as text and as JSON.

Modelled on Ozone's `ozone admin container report` (replication manager health summary: a
count per state, then "First 100 <STATE> containers: #1, #2") and `ozone admin container
reconcile --status` (per mismatched container, each replica's datanode and data checksum).
States (a container may be in several):
  MATCH             all replicas have equal container values
  MISMATCHED        replicas disagree (diff pulls repair them)
  UNDER_REPLICATED  fewer replicas than `replication` (default 3)
  OVER_REPLICATED   more replicas than `replication`
  MISSING           no replica has usable block metadata (every replica failed METADATA_*,
                    or on Ozone volumes CONTAINER_FILE_*: such a replica is not loaded)
  UNHEALTHY         some replica has scan errors or unhealthy chunks (findings of level
                    warning count only with strict=True / --strict)
  UNRECOVERABLE     some chunk has no healthy copy, or healthy copies that differ
  PENDING_DELETION  a block deleted on some replicas is still live on others (the values
                    agree, as Ozone keeps a tombstone's value: nothing to pull; the
                    block deletion service finishes it)
  UNVERIFIED        none of its replicas could be read (metadata or block files out of
                    the executors' reach, or missing): never counted as MATCH; and, when
                    some volume or host was not verified (the volumes table: WRONG_HOST,
                    NO_EXECUTOR, ..., or an inventory host with no volume there), a
                    container with fewer verified replicas than `replication`: its
                    replicas there are unknown, so it is neither MATCH nor UNDER_REPLICATED
  WARNINGS          some replica has scan findings of level warning (merkle.replica.levels:
                    a derived `.tree` missing or corrupt, a file no block_data row names,
                    a container state Ozone never data-scans): reported, not counted as
                    UNHEALTHY unless strict
Levels (merkle.replica.levels) decide the judgement as they do for `crcmerkle scan`: a
container whose replicas have only warnings is neither UNHEALTHY nor, for a replica whose data
was not scanned (CONTAINER_NOT_SCANNED of an OPEN, CLOSING, ... container: its tree is no
observation of its data), MISMATCHED: such a replica is left out of the comparison, of the
mismatched list and of the repair plan. A value mismatch between replicas whose data was read
stays MISMATCHED whatever their findings' levels (e.g. a tombstone lost with a `.tree`).
A scan written before findings had levels (no `severity` column) is judged as it was then:
every finding counts.
The report also says how many replicas were read ("read": replicas, read, fraction);
`check_read` turns a run that read nothing, or less than a stated fraction, into an error.
Every datanode the report names carries its identity (`datanode`) and its host name (`host`:
the scan tables' host column, else the inventory's, else null; spark_udfs.cluster.hosts). The
`volumes` section lists the volumes that were not verified (status other than SCANNED, each a
finding: exit 1), `hosts_unverified` the hosts none of whose volumes was, and `verification`
counts them.
Counts are computed in Spark (only the first `first` IDs per state are collected), so the
report costs the same for 200,000 containers as for 20.

The repair plan is computed and written by the executors (spark_udfs.jobs.diff.plan_commands and
reconcile_commands): a widespread fault makes hundreds of thousands of pulls, which must not
pass through the driver (its result size limit, its memory). Only counts and the first
`first` commands come back. The JSON's "reconcile" list holds those first commands, each the
replica to repair, the peers to pull from and the argv of `crcmerkle reconcile TARGET
PEER...`; "reconcile_commands" says how many there are in all and where the executors wrote
the full list (`commands_to`: JSON lines, one command per line, in part files of a
directory that the standard library can read on a datanode without pyarrow).
`crcmerkle reconcile --report REPORT.json` runs them all (merkle.replica.reconcile
.load_report_jobs: the inline list when it is complete, else the full list).

Root runs those commands, so the report carries what lets them be checked first
(merkle.replica.commandlist): "reconcile_commands"."parts" lists every part file the
executors wrote with its size and SHA-256, each digested by an executor (part_digests: one
small row per part reaches the driver), "sha256" is the digest over that ordered part list
(or, without a written list, over the inline commands in canonical form), and
"scanned_roots" the directories the scan's replicas lie in: a command naming a replica
elsewhere is refused.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import shlex
import time
from typing import Any, Dict, List, Optional, Tuple

from merkle.messages import one_line
from merkle.replica.layouts import owner_repairing
from merkle.replica.levels import ERROR, NOT_SCANNED_KINDS, WARNING, warning_kinds
from merkle.trees.ozone import format_checksum
from spark_udfs.cluster.hosts import HostIndex, host_index, unscanned_hosts
from spark_udfs.jobs.diff import DEFAULT_DATANODE_LIMIT, DiffResult

__all__ = [
    "COMMANDS_FORMAT",
    "FINDING_STATES",
    "STATES",
    "NothingVerifiedError",
    "build_report",
    "check_read",
    "format_text",
    "judged_containers",
    "part_digests",
    "planned_pulls",
    "read_summary",
    "report_has_findings",
    "scanned_roots",
    "unscanned_hosts",
    "verification",
    "volume_lines",
]

STATES = (
    "MATCH",
    "MISMATCHED",
    "UNDER_REPLICATED",
    "OVER_REPLICATED",
    "MISSING",
    "UNHEALTHY",
    "UNRECOVERABLE",
    "PENDING_DELETION",
    "UNVERIFIED",
    "WARNINGS",
)
#: the states that make `spark report` / `spark run` exit 1 (report_has_findings)
FINDING_STATES = ("MISMATCHED", "UNRECOVERABLE", "UNVERIFIED", "UNHEALTHY")
#: errors that leave a replica without usable block metadata (Ozone does not load a replica
#: whose .container file is missing or fails its checksum) when they are of the replica, not
#: of one block (one bad Ozone block_data row costs only its block: the rest is verified)
_METADATA_ERRORS = (
    "METADATA_MISSING",
    "METADATA_CORRUPT",
    "METADATA_UNSUPPORTED",
    "METADATA_UNREADABLE",
    "CONTAINER_FILE_MISSING",
    "CONTAINER_FILE_CORRUPT",
)


def _replica_findings(errors: Any, strict: bool) -> Any:
    """Per (container, datanode) of the errors table: meta_bad (no usable block metadata),
    fails (a finding that counts: an error, or any finding when strict), warns (a finding
    of level warning), unscanned (a warning after which the replica's data was not read)."""
    from pyspark.sql import functions as F

    # scans written before findings had levels: every finding is judged an error, as then
    sev = (
        F.coalesce(F.col("severity"), F.lit(ERROR))
        if "severity" in errors.columns
        else F.lit(ERROR)
    )
    # a warning only where the table allows one: a scan output edited to call a
    # CORRUPT_CHUNK a warning (or naming an unknown severity) still counts
    warn = (sev == F.lit(WARNING)) & F.col("error").isin(*sorted(warning_kinds()))
    fails = F.lit(True) if strict else ~warn
    return errors.groupBy("container", "datanode").agg(
        # of the replica, not of one block: one bad Ozone block_data row costs its block
        F.max((F.col("error").isin(*_METADATA_ERRORS) & F.col("block").isNull()).cast("int")).alias(
            "meta_bad"
        ),
        F.max(fails.cast("int")).alias("fails"),
        F.max(warn.cast("int")).alias("warns"),
        F.max((warn & F.col("error").isin(*sorted(NOT_SCANNED_KINDS))).cast("int")).alias(
            "unscanned"
        ),
    )


def judged_containers(diff: DiffResult, errors: Any = None, strict: bool = False) -> Any:
    """The diff's container table with the columns the report judges by: with_errors
    (replicas with a finding that counts), with_warnings, meta_bad, unscanned (datanodes
    whose data was not scanned, by a warning: left out of the comparison) and mismatched
    (state MISMATCH, and still more than one group of equal values without those)."""
    from pyspark.sql import functions as F

    c = diff.containers
    if errors is not None:
        per_c = (
            _replica_findings(errors, strict)
            .groupBy("container")
            .agg(
                F.sum("fails").alias("with_errors"),
                F.sum("warns").alias("with_warnings"),
                F.sum("meta_bad").alias("meta_bad"),
                F.collect_list(F.when(F.col("unscanned") == 1, F.col("datanode"))).alias(
                    "unscanned"
                ),
            )
        )
        c = c.join(per_c, "container", "left")
    else:
        c = (
            c.withColumn("with_errors", F.lit(0))
            .withColumn("with_warnings", F.lit(0))
            .withColumn("meta_bad", F.lit(0))
            .withColumn("unscanned", F.lit(None).cast("array<string>"))
        )
    compared = (
        "filter(transform(groups, g -> array_except(g, coalesce(unscanned, "
        "cast(array() AS array<string>)))), g -> size(g) > 0)"
    )
    return c.withColumn(
        "mismatched", (F.col("state") == "MISMATCH") & (F.size(F.expr(compared)) > 1)
    )


def planned_pulls(diff: DiffResult, judged: Any) -> Any:
    """The diff's pulls the report plans: none into a replica whose data was not scanned
    (judged_containers' `unscanned`: its empty tree is no observation of its data)."""
    from pyspark.sql import functions as F

    unscanned = judged.select("container", F.explode("unscanned").alias("datanode"))
    return diff.pulls.join(unscanned, ["container", "datanode"], "left_anti")


def report_has_findings(report: Dict[str, Any]) -> bool:
    """Does the report hold findings (exit 1): a mismatched, unrecoverable, unverified or
    unhealthy container (warnings count as unhealthy only in a strict report), or a volume
    that was not verified."""
    return any(report["summary"].get(s) for s in FINDING_STATES) or bool(
        (report.get("verification") or {}).get("volumes_unverified")
    )


def verification(idx: HostIndex, short: int = 0) -> Dict[str, Any]:
    """The report's (and plan's) "verification" entry: volumes per status, how many were
    not verified, on how many hosts, and `containers_short`: containers UNVERIFIED because
    fewer than `replication` of their replicas were verified while some were not."""
    return {
        "volumes": sum(idx.counts.values()),
        "by_status": dict(sorted(idx.counts.items())),
        "volumes_unverified": idx.volumes_unverified,
        "hosts_unverified": len(idx.hosts_unverified),
        "containers_short": short,
    }


def build_report(
    diff: DiffResult,
    *,
    replicas: Any = None,
    errors: Any = None,
    replication: int = 3,
    first: int = 100,
    limit: int = DEFAULT_DATANODE_LIMIT,
    commands_to: Optional[str] = None,
    commands_ref: Optional[str] = None,
    strict: bool = False,
    volumes: Any = None,
    inventory: Any = None,
) -> Dict[str, Any]:
    """The report as a JSON-ready dict. `replicas` / `errors`: the scan job's tables (give
    them for data checksums, UNHEALTHY from scan errors, and MISSING). `strict`: findings
    of level warning count as errors (UNHEALTHY), as `--strict` asks. `volumes`: the scan's
    volumes table; `inventory` (merkle.replica.inventory.Inventory): names the hosts the
    tables do not, and its hosts without a volume in the table are NOT_SCANNED.

    `commands_to`: a directory (local path or URI) where the executors write every repair
    command as JSON lines; the report names it as `commands_ref` (default `commands_to`;
    give a path relative to the report file's directory so that the two can be moved
    together). Without it only the first `first` commands exist: enough when there are no
    more, else `crcmerkle reconcile --report` refuses the report rather than run a part."""
    idx = host_index(
        diff.containers.sparkSession,
        replicas=replicas,
        volumes=volumes,
        inventory=inventory,
        first=first,
    )
    # read twice: by the states' counts and by the plan's pulls (each would redo its joins)
    judged = judged_containers(diff, errors, strict).persist()
    try:
        report = _report(
            diff,
            judged,
            idx,
            replicas=replicas,
            replication=replication,
            first=first,
            limit=limit,
            commands_to=commands_to,
            commands_ref=commands_ref,
            strict=strict,
        )
    finally:
        judged.unpersist()
    report["verification_age"] = verification_age(volumes, first)
    return report


def verification_age(volumes: Any, first: int = 100, now: Optional[float] = None) -> Dict[str, Any]:
    """The periodic validator's figures per volume, from the volumes table (those
    `crcmerkle scan --state --metrics-file` gives a host's node_exporter): of every volume a
    task read, the replicas it read of those it holds (with --state the others were verified
    within --max-age, or earlier in the pass), the rate it read at, the age of its oldest
    verification now, and the time a full pass over its data takes at that rate. `volumes`:
    the first `first` by the age of their oldest verification, oldest first; `oldest_*` and
    `longest_*` the worst of all. Empty where the table has no such figures (a scan of
    listed paths, or one written before they existed)."""
    from pyspark.sql import functions as F

    empty: Dict[str, Any] = {"volumes_with_figures": 0, "volumes": []}
    if volumes is None or "oldest_verified_at" not in volumes.columns:
        return empty
    now = time.time() if now is None else now
    cols = (
        "datanode",
        "host",
        "volume",
        "replicas",
        "replicas_read",
        "bytes_read",
        "bytes_total",
        "oldest_verified_at",
        "read_seconds",
    )
    rows = (
        volumes.filter((F.col("status") == "SCANNED") & F.col("replicas_read").isNotNull())
        .select(*cols)
        .collect()
    )
    out = []
    for r in rows:
        read, secs = r["bytes_read"], r["read_seconds"]
        rate = read / secs if read and secs else None
        at = r["oldest_verified_at"]
        out.append(
            {
                "datanode": r["datanode"],
                "host": r["host"],
                "volume": r["volume"],
                "replicas": r["replicas"],
                "replicas_read": r["replicas_read"],
                "bytes_read": r["bytes_read"],
                "bytes_total": r["bytes_total"],
                "bytes_per_second": rate,
                "oldest_verification_age_seconds": None if at is None else max(0.0, now - at),
                "full_pass_seconds": (r["bytes_total"] or 0) / rate if rate else None,
            }
        )
    if not out:
        return empty
    ages = [x for x in out if x["oldest_verification_age_seconds"] is not None]
    passes = [x for x in out if x["full_pass_seconds"] is not None]
    out.sort(key=lambda x: -(x["oldest_verification_age_seconds"] or 0.0))
    oldest = max(ages, key=lambda x: x["oldest_verification_age_seconds"]) if ages else None
    longest = max(passes, key=lambda x: x["full_pass_seconds"]) if passes else None
    return {
        "volumes_with_figures": len(out),
        "replicas": sum(int(x["replicas"] or 0) for x in out),
        "replicas_read": sum(int(x["replicas_read"] or 0) for x in out),
        "oldest_verification_age_seconds": (
            None if oldest is None else oldest["oldest_verification_age_seconds"]
        ),
        "oldest_verification_volume": None if oldest is None else _where(oldest),
        "longest_full_pass_seconds": None if longest is None else longest["full_pass_seconds"],
        "longest_full_pass_volume": None if longest is None else _where(longest),
        "volumes": out[:first],
    }


def _where(x: Dict[str, Any]) -> Dict[str, Any]:
    return {k: x[k] for k in ("datanode", "host", "volume")}


def _duration(seconds: float) -> str:
    """A duration for a person: 45 s, 12.5 min, 3.2 h, 11.0 d."""
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def verification_age_lines(report: Dict[str, Any]) -> List[str]:
    """The text of the report's verification_age: [] when the table had no figures."""
    va = report.get("verification_age") or {}
    if not va.get("volumes_with_figures"):
        return []
    lines = [
        "",
        f"Verification age: {va['replicas_read']} of {va['replicas']} replica(s) of "
        f"{va['volumes_with_figures']} volume(s) read by this scan (the others verified "
        f"earlier, unchanged since)",
    ]
    if va.get("oldest_verification_age_seconds") is not None:
        w = va["oldest_verification_volume"]
        lines.append(
            f"  oldest verification: {_duration(va['oldest_verification_age_seconds'])} ago, "
            f"{w['volume'] or '-'} of {_who(w['datanode'], w['host'], True)}"
        )
    if va.get("longest_full_pass_seconds") is not None:
        w = va["longest_full_pass_volume"]
        lines.append(
            f"  longest full pass at the rates read: {_duration(va['longest_full_pass_seconds'])}, "
            f"{w['volume'] or '-'} of {_who(w['datanode'], w['host'], True)}"
        )
    return lines


def _report(
    diff: DiffResult,
    judged: Any,
    idx: HostIndex,
    *,
    replicas: Any,
    replication: int,
    first: int,
    limit: int,
    commands_to: Optional[str],
    commands_ref: Optional[str],
    strict: bool,
) -> Dict[str, Any]:
    """build_report's body, on the judged containers and the host index."""
    from pyspark.sql import functions as F

    c = diff.containers
    if "data_replicas" not in judged.columns:  # a diff of tables without the column
        judged = judged.withColumn("data_replicas", F.col("read_replicas"))
    flags = (
        judged.select(
            "container",
            "n_replicas",
            "unhealthy_chunks",
            "state",
            "read_replicas",
            "data_replicas",
            "with_errors",
            "with_warnings",
            "meta_bad",
            "mismatched",
        )
        .join(
            diff.unrecoverable.select("container")
            .distinct()
            .withColumn("unrecoverable", F.lit(True)),
            "container",
            "left",
        )
        .join(
            diff.pending_deletions.select("container")
            .distinct()
            .withColumn("pending_deletion", F.lit(True)),
            "container",
            "left",
        )
    )
    # some volume or host not verified: a container with fewer verified replicas than
    # `replication` may have others there, unread: UNVERIFIED, not MATCH, not under-replicated
    short = F.lit(idx.degraded) & (F.coalesce(F.col("read_replicas"), F.lit(0)) < replication)
    cond = {
        # a mismatch only with replicas whose data was not scanned is no mismatch
        "MATCH": (
            (F.col("state") == "MATCH") | ((F.col("state") == "MISMATCH") & ~F.col("mismatched"))
        )
        & ~short,
        "MISMATCHED": F.col("mismatched"),
        "UNDER_REPLICATED": (F.col("n_replicas") < replication) & ~short,
        "OVER_REPLICATED": F.col("n_replicas") > replication,
        "MISSING": F.coalesce(F.col("meta_bad"), F.lit(0)) >= F.col("n_replicas"),
        "UNHEALTHY": (F.col("unhealthy_chunks") > 0)
        | (F.coalesce(F.col("with_errors"), F.lit(0)) > 0),
        "UNRECOVERABLE": F.coalesce(F.col("unrecoverable"), F.lit(False)),
        "PENDING_DELETION": F.coalesce(F.col("pending_deletion"), F.lit(False)),
        "UNVERIFIED": (F.col("state") == "UNVERIFIED") | short,
        "WARNINGS": F.coalesce(F.col("with_warnings"), F.lit(0)) > 0,
    }
    # one job for every state: counts and the first IDs (sorted) per state
    aggs = [
        F.sum("n_replicas").alias("__replicas"),
        F.sum("read_replicas").alias("__read"),
        F.sum("data_replicas").alias("__data"),
        F.sum(F.when(short, 1).otherwise(0)).alias("__short"),
    ]
    for s in STATES:
        aggs.append(F.sum(F.when(cond[s], 1).otherwise(0)).alias(f"n_{s}"))
        aggs.append(
            F.slice(
                F.sort_array(F.collect_list(F.when(cond[s], F.col("container")))), 1, max(first, 1)
            ).alias(f"ids_{s}")
        )
    row = flags.agg(*aggs).collect()[0]
    summary: Dict[str, int] = {s: int(row[f"n_{s}"] or 0) for s in STATES}
    lists: Dict[str, List[int]] = {
        s: [int(i) for i in (row[f"ids_{s}"] or [])][:first] for s in STATES
    }
    read = read_summary(
        int(row["__replicas"] or 0), int(row["__read"] or 0), int(row["__data"] or 0)
    )
    recorded = _recorded_only(read, summary, lists)
    mismatched: List[Dict[str, Any]] = []
    values: Dict[Any, Optional[int]] = {}
    paths: Dict[Any, Optional[str]] = {}
    where: Dict[Any, Optional[str]] = {}
    ids = lists["MISMATCHED"]
    if replicas is not None and ids:
        for r in replicas.filter(F.col("container").isin(ids)).collect():
            values[(r["container"], r["datanode"])] = r["data_checksum"]
            paths[(r["container"], r["datanode"])] = r["replica"]
            if "host" in r.asDict():  # where this replica was scanned
                where[(r["container"], r["datanode"])] = r["host"]
    for r in c.filter(F.col("container").isin(ids)).orderBy("container").collect() if ids else []:
        reps = []
        for g in r["groups"]:
            for dn in g:
                v = values.get((r["container"], dn))
                reps.append(
                    {
                        "datanode": dn,
                        "host": where.get((r["container"], dn)) or idx.host_of(dn),
                        "replica": paths.get((r["container"], dn)),
                        "dataChecksum": None if v is None else format_checksum(v),
                    }
                )
        mismatched.append(
            {
                "containerID": int(r["container"]),
                "replicas": reps,
                "groups": [list(g) for g in r["groups"]],
                "group_hosts": [idx.hosts_of(g) for g in r["groups"]],
            }
        )
    # replicas of a layout whose owner repairs them (Ozone's datanodes reconcile themselves,
    # asked per container; crcmerkle's own reconciler refuses them)
    owner = owner_repairing(r["replica"] for m in mismatched for r in m["replicas"])
    to_plan = dataclasses.replace(diff, pulls=planned_pulls(diff, judged))
    repair_plan, reconcile, total, parts = _plan_on_executors(
        to_plan, limit, first, None if owner is not None else commands_to, idx
    )
    if owner is not None:
        reconcile, total, parts = [], 0, None
    unrec = [
        {
            "container": int(u["container"]),
            "block": int(u["block"]),
            "offset": int(u["offset"]),
            "datanodes": list(u["datanodes"]),
            "hosts": idx.hosts_of(u["datanodes"]),
            "reason": u["reason"],
        }
        for u in diff.unrecoverable.orderBy("container", "block", "offset").limit(first).collect()
    ]
    pending = [
        {
            "container": int(p["container"]),
            "datanode": p["datanode"],
            "host": idx.host_of(p["datanode"]),
            "replica": p["replica"],
            "block": int(p["block"]),
            "deleted_on": list(p["deleted_on"]),
            "deleted_on_hosts": idx.hosts_of(p["deleted_on"]),
        }
        for p in diff.pending_deletions.orderBy("container", "block", "datanode")
        .limit(first)
        .collect()
    ]
    holders = {
        m["containerID"]: [{"datanode": x["datanode"], "host": x["host"]} for x in m["replicas"]]
        for m in mismatched
    }
    ozone_reconcile = (
        [
            {
                "containerID": cid,
                "argv": owner.owner_repair_argv(cid),
                "datanodes": holders.get(cid, []),
            }
            for cid in ids
        ]
        if owner is not None
        else []
    )
    written = commands_to is not None and owner is None
    # the digest `crcmerkle reconcile --report` checks before it runs anything: over the
    # executors' part digests when they wrote the list, else over the inline list (when it
    # is the whole list; else the list exists nowhere and reconcile refuses the report)
    from merkle.replica.commandlist import lines_digest, parts_digest

    digest = (
        parts_digest(parts)
        if written and parts is not None
        else lines_digest(reconcile)
        if total == len(reconcile)
        else None
    )
    return {
        "format": "crcmerkle-spark-report",
        "version": 1,
        "generated": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "replication": replication,
        "strict": strict,
        "summary": summary,
        "read": read,
        # a census or trees-only pass: no data read, values compared from recorded checksums
        "data_read": bool(read.get("data_read", read["read"])),
        **({"compared_from_recorded_checksums": recorded} if recorded is not None else {}),
        "first": first,
        "containers": lists,
        "mismatched": mismatched,
        "unrecoverable": unrec,
        "pending_deletions": pending,
        "repair_plan": repair_plan,
        "reconcile": reconcile,
        "reconcile_commands": {
            "total": total,
            "listed": len(reconcile),
            "path": (commands_ref or commands_to) if written else None,
            "format": COMMANDS_FORMAT if written else None,
            "parts": parts if written else None,
            "sha256": digest,
        },
        "ozone_reconcile": ozone_reconcile,
        "scanned_roots": scanned_roots(replicas if replicas is not None else diff.replicas),
        "verification": verification(idx, int(row["__short"] or 0)),
        "volumes": idx.unverified,
        "hosts_unverified": idx.hosts_unverified,
        "knows_hosts": idx.knows_hosts,
    }


#: how the full command list is written: a directory of JSON-lines part files (df.write.json)
COMMANDS_FORMAT = "json-lines"


def _plan_on_executors(
    diff: DiffResult,
    limit: int,
    first: int,
    commands_to: Optional[str],
    idx: Optional[HostIndex] = None,
) -> Tuple[Dict[str, Any], List[Dict[str, Any]], int, Optional[List[Dict[str, Any]]]]:
    """(the report's "repair_plan", its first `first` reconcile commands, how many there are
    in all, the parts of the full list: name, bytes, SHA-256 each). The plan is built by the
    executors; the full command list is written by them to `commands_to` (if given) and each
    part is digested by an executor (part_digests); only counts, the first entries and one
    row per part are collected."""
    from pyspark.sql import functions as F

    from spark_udfs.jobs.diff import plan_commands, reconcile_commands

    cmds = plan_commands(diff.pulls, limit).persist()  # read by the counts, the list, the file
    try:
        row = cmds.agg(
            F.count(F.lit(1)).alias("n"),
            F.max("round").alias("last"),
            F.sum("bytes").alias("bytes"),
        ).collect()[0]
        firsts = [
            _plain(r.asDict(recursive=True))
            for r in cmds.orderBy("round", "container", "target", "source").limit(first).collect()
        ]
        for f in firsts:
            f["target_host"] = idx.host_of(f["target"]) if idx else None
            f["source_host"] = idx.host_of(f["source"]) if idx else None
        entries = _with_hosts(reconcile_commands(cmds), idx)
        if commands_to is not None:
            # sorted, so the part files hold the commands in round order; uncompressed JSON
            # lines: `crcmerkle reconcile` reads them with the standard library
            entries.orderBy("round", "container_id", "datanode").write.mode("overwrite").option(
                "compression", "none"
            ).json(commands_to)
        parts = part_digests(cmds.sparkSession, commands_to) if commands_to is not None else None
        total = entries.count()
        listed = [
            _plain(r.asDict(recursive=True))
            for r in entries.orderBy("round", "container_id", "datanode").limit(first).collect()
        ]
    finally:
        cmds.unpersist()
    for e in listed:
        for k in ("argv", "host", "peer_hosts"):
            if k in e and e[k] is None:
                del e[k]  # as in the file, whose writer leaves null fields out
    plan = {
        "datanode_limit": limit,
        "rounds": 0 if row["last"] is None else int(row["last"]) + 1,
        "total": int(row["n"]),
        "bytes": int(row["bytes"] or 0),
        "commands": firsts,
    }
    return plan, listed, total, parts


def _with_hosts(entries: Any, idx: Optional[HostIndex]) -> Any:
    """The reconcile commands with the target's `host` and the peers' `peer_hosts`, joined
    on the executors with the (small, broadcast) host of each datanode; unchanged when no
    host is known (a scan of one directory tree without an inventory)."""
    if idx is None or not idx.knows_hosts:
        return entries
    from pyspark.sql import functions as F

    spark = entries.sparkSession
    m = spark.createDataFrame(
        sorted((d, h) for d, h in idx.hosts.items() if h is not None),
        "datanode string, host string",
    )
    hosts = F.broadcast(
        m.select(F.map_from_entries(F.collect_list(F.struct("datanode", "host"))).alias("hm"))
    )
    cols = entries.columns
    out = (
        entries.crossJoin(hosts)
        .withColumn("host", F.expr("try_element_at(hm, datanode)"))
        .withColumn("peer_hosts", F.expr("transform(peer_datanodes, d -> try_element_at(hm, d))"))
    )
    return out.select(*cols[: cols.index("argv")], "host", "peer_hosts", "argv")


def part_digests(spark: Any, directory: str) -> List[Dict[str, Any]]:
    """Name, bytes and SHA-256 of every non-empty part file Spark wrote to `directory`
    (names starting with '_' or '.' skipped, as Hadoop's input formats and the reader do),
    sorted by name:
    each part is read and digested by an executor, one small row per part comes back."""
    import hashlib

    def digest(item: Tuple[str, bytes]) -> Tuple[str, int, str]:
        path, data = item
        return path.rstrip("/").rsplit("/", 1)[-1], len(data), hashlib.sha256(data).hexdigest()

    rows = spark.sparkContext.binaryFiles(directory).map(digest).collect()
    return [
        {"name": n, "bytes": b, "sha256": h}
        for n, b, h in sorted(rows)
        if b and not n.startswith(("_", "."))
    ]  # an empty part holds no command


def scanned_roots(replicas: Any) -> Optional[List[str]]:
    """The directories the scan's replicas lie in, three levels up (a crcmerkle-layout
    cluster directory <root>/<datanode>/<volume>/<ID>; on Ozone a volume's
    <volume>/hdds/<clusterID> of <...>/current/containerDir<N>/<ID>): `reconcile --report`
    and `replicate --report` run a command only on replicas under one of them. Distinct
    values only reach the driver (one per cluster, or per Ozone volume)."""
    if replicas is None or "replica" not in replicas.columns:
        return None
    from pyspark.sql import functions as F

    rows = (
        replicas.filter(F.col("replica").isNotNull())
        .select(F.regexp_replace(F.col("replica"), "/+[^/]+/+[^/]+/+[^/]+/*$", "").alias("root"))
        .distinct()
        .collect()
    )
    return sorted(r["root"] for r in rows if r["root"]) or None


def _plain(d: Dict[str, Any]) -> Dict[str, Any]:
    """A collected row as JSON-ready values (Rows nested in arrays become dicts)."""
    return {
        k: [_plain(x) if isinstance(x, dict) else x for x in v] if isinstance(v, list) else v
        for k, v in d.items()
    }


def read_summary(replicas: int, read: int, data: Optional[int] = None) -> Dict[str, Any]:
    """How much of the cluster a run actually read (the report's "read" entry): `read`
    replicas verified by the pass, `data` (when known) of them by reading their data (a
    census or a trees-only pass reads recorded checksums alone: 0)."""
    out: Dict[str, Any] = {
        "replicas": replicas,
        "read": read,
        "fraction": round(read / replicas, 6) if replicas else 0.0,
    }
    if data is not None:
        out["data_read"] = data
    return out


#: What a report over a pass that read no data says instead of MATCH.
RECORDED_NOTE = (
    "compared from recorded checksums: no data was read (a census, "
    "--metadata-only, or --trees-only), so no replica's data was verified"
)


def _recorded_only(
    read: Dict[str, Any], summary: Dict[str, int], lists: Dict[str, List[int]]
) -> Optional[Dict[str, Any]]:
    """For a pass that verified replicas without reading any data: the containers whose
    recorded values agree, taken out of MATCH (which says the data was compared), as the
    report's "compared_from_recorded_checksums"; None after a scan that read data."""
    if not read["read"] or read.get("data_read", read["read"]):
        return None
    out = {"containers": summary["MATCH"], "first": lists["MATCH"], "note": RECORDED_NOTE}
    summary["MATCH"], lists["MATCH"] = 0, []
    return out


class NothingVerifiedError(RuntimeError):
    """A run read none of the replicas, or less than the fraction asked for: its findings
    (every container "matching", say) cannot be trusted."""


def check_read(read: Dict[str, Any], min_fraction: float = 0.0) -> None:
    """NothingVerifiedError unless some replica was read and at least `min_fraction` of them
    (0..1). The usual causes: the paths exist only on the driver, the executors cannot reach
    the store (endpoint, credentials), or every replica lacks its block metadata."""
    n, k = read["replicas"], read["read"]
    if n and k and k / n >= min_fraction:
        return
    why = (
        "the executors could not read the replicas: are the paths visible on every node "
        "(not only on the driver), and the store's endpoint and credentials set for the "
        "executors? see the errors table"
    )
    if not n:
        raise NothingVerifiedError("no replica was scanned")
    if not k:
        raise NothingVerifiedError(f"none of the {n} replica(s) could be read; {why}")
    raise NothingVerifiedError(
        f"only {k} of {n} replica(s) were read ({k / n:.1%} < "
        f"--min-read-fraction {min_fraction:g}); {why}"
    )


def _who(datanode: Any, host: Any, knows_hosts: bool) -> str:
    """A datanode as the text names it: `UUID on HOST`, `UUID on unknown host` when the
    report knows hosts but not this one's, the identity alone when it knows none."""
    if host is None and not knows_hosts:
        return str(datanode)
    return f"{datanode} on {host or 'unknown host'}"


def _whos(datanodes: List[Any], hosts: Optional[List[Any]], knows_hosts: bool) -> str:
    hosts = hosts or [None] * len(datanodes)
    return ", ".join(_who(d, h, knows_hosts) for d, h in zip(datanodes, hosts))


def volume_lines(report: Dict[str, Any]) -> List[str]:
    """The text of the report's (or plan's) unverified volumes and hosts: [] when every
    volume was verified."""
    v = report.get("verification") or {}
    if not v.get("volumes_unverified"):
        return []
    by = ", ".join(f"{s} {n}" for s, n in v["by_status"].items() if s != "SCANNED")
    lines = [
        "",
        f"Volumes not verified: {v['volumes_unverified']} of {v['volumes']} ({by})"
        + (
            f"; the first {len(report['volumes'])}:"
            if len(report["volumes"]) < v["volumes_unverified"]
            else ":"
        ),
    ]
    for x in report["volumes"]:
        lines.append(
            f"  {x['status']}: {x['volume'] or '-'} of "
            f"{_who(x['datanode'], x['host'], True)}"
            + (f": {x['detail']}" if x.get("detail") else "")
        )
    if report.get("hosts_unverified"):
        lines.append(
            "Hosts with no verified volume: "
            + ", ".join(
                (h["host"] or "unknown host")
                + (f" ({', '.join(h['datanodes'])})" if h["datanodes"] else "")
                for h in report["hosts_unverified"]
            )
        )
    return lines


def format_text(report: Dict[str, Any]) -> str:
    """The human form, in the shape of Ozone's container report."""
    knows = bool(report.get("knows_hosts"))
    lines = [f"Container Summary Report generated at {report['generated']}", "=" * 58]
    if report.get("compared_from_recorded_checksums") is not None:
        lines.append(f"NO DATA READ: {RECORDED_NOTE}")
    lines += ["", "Container Health Summary", "=" * 24]
    for s in STATES:
        lines.append(f"{s}: {report['summary'][s]}")
    if report.get("strict"):
        lines.append("(strict: findings of level warning count as UNHEALTHY)")
    rd = report.get("read")
    rec = report.get("compared_from_recorded_checksums")
    if rec is not None:
        lines.append(
            f"Compared from recorded checksums (no data read): "
            f"{rec['containers']} container(s) whose replicas' recorded values "
            f"agree; NOT verified against their data"
        )
        if rd is not None:
            lines.append(
                f"Replicas read: none (no data read); recorded checksums of "
                f"{rd['read']} of {rd['replicas']} compared"
            )
    elif rd is not None:
        lines.append(f"Replicas read: {rd['read']} of {rd['replicas']} ({rd['fraction']:.1%})")
    v = report.get("verification") or {}
    if v.get("volumes_unverified"):
        lines.append(
            f"Not verified: {v['volumes_unverified']} volume(s), "
            f"{v['hosts_unverified']} host(s) with no verified volume: their "
            f"replicas were not read. {v['containers_short']} container(s) with "
            f"fewer than {report['replication']} verified replicas are UNVERIFIED, "
            f"never MATCH nor UNDER_REPLICATED (their replicas there are unknown)"
        )
    lines += volume_lines(report)
    lines += verification_age_lines(report)
    for s in STATES:
        ids = report["containers"][s]
        if s == "MATCH" or not ids:
            continue
        lines += ["", f"First {report['first']} {s} containers:", ", ".join(f"#{i}" for i in ids)]
    if report["mismatched"]:
        lines += ["", "Reconcile status of mismatched containers", "=" * 42]
        for m in report["mismatched"]:
            lines.append(f"Container {m['containerID']}:")
            for r in m["replicas"]:
                lines.append(
                    f"  {_who(r['datanode'], r.get('host'), knows)}: dataChecksum="
                    f"{r['dataChecksum'] if r['dataChecksum'] is not None else '-'}"
                    f"{'  ' + r['replica'] if r['replica'] else ''}"
                )
    if report["unrecoverable"]:
        lines += ["", "Unrecoverable chunks (no healthy copy, or healthy copies differ)"]
        for u in report["unrecoverable"]:
            lines.append(
                f"  container {u['container']} block {u['block']} chunk "
                f"@{u['offset']}: {u['reason']} "
                f"({_whos(u['datanodes'], u.get('hosts'), knows)})"
            )
    if report["pending_deletions"]:
        lines += ["", "Pending deletions (live here, deleted on other replicas; values agree)"]
        for p in report["pending_deletions"]:
            lines.append(
                f"  container {p['container']} block {p['block']}: live on "
                f"{_who(p['datanode'], p.get('host'), knows)}, deleted on "
                f"{_whos(p['deleted_on'], p.get('deleted_on_hosts'), knows)}"
            )
    ozone = bool(report.get("ozone_reconcile"))
    if ozone:
        # two lists follow (these commands and the repair plan): say which one is the action
        lines += [
            "",
            "Ozone reconciliation: ACT ON THIS LIST (run each command; the datanodes "
            "repair their own replicas):",
        ]
        for o in report["ozone_reconcile"]:
            held = [x for x in o.get("datanodes") or []]
            lines.append(
                "  "
                + shlex.join(o["argv"])
                + (
                    "   # " + _whos([x["datanode"] for x in held], [x["host"] for x in held], knows)
                    if held and knows
                    else ""
                )
            )
    plan = report["repair_plan"]
    total = plan.get("total", len(plan["commands"]))
    lines += [
        "",
        f"Repair plan: {total} command(s) in {plan['rounds']} round(s), at most "
        f"{plan['datanode_limit']} container(s) per datanode per round"
        + (
            f" (the first {len(plan['commands'])} below)"
            if total > len(plan["commands"][: report["first"]])
            else ""
        ),
    ]
    if ozone and plan["commands"]:
        lines.append(
            "  (for information only: what differs between the replicas; do not run "
            "it, 'crcmerkle reconcile' does not repair Ozone replicas: act on the "
            "Ozone reconciliation list above)"
        )
    for p in plan["commands"][: report["first"]]:
        kinds: Dict[str, int] = {}
        for it in p["items"]:
            kinds[it["kind"]] = kinds.get(it["kind"], 0) + 1
        what = ", ".join(f"{n} {k.lower().replace('_', ' ')}" for k, n in sorted(kinds.items()))
        lines.append(
            f"  round {p['round']}: container {p['container']} "
            f"{_who(p['target'], p.get('target_host'), knows)} <- "
            f"{_who(p['source'], p.get('source_host'), knows)}: {what}, "
            f"{p['bytes']} bytes"
        )
    rc = report.get("reconcile_commands")
    if rc and rc["total"]:
        where = (
            f"all in {rc['path']}"
            if rc["path"]
            else "the full list is not written (give --report FILE)"
            if rc["total"] > rc["listed"]
            else "all listed in the JSON"
        )
        lines.append(
            f"Reconcile commands: {rc['total']} ({where}); run them with "
            "'crcmerkle reconcile --report REPORT.json'"
        )
    # a datanode or replica directory may be named with a newline: one line stays one line
    return "\n".join(one_line(line) for line in lines) + "\n"


def to_json(report: Dict[str, Any]) -> str:
    return json.dumps(report, indent=1, sort_keys=False, default=str) + "\n"
