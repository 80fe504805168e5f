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
  UNHEALTHY         some replica has scan errors or unhealthy chunks
  UNRECOVERABLE     some chunk has no healthy copy, or healthy copies that differ
  PENDING_DELETION  a block deleted on some replicas is still live on others (the values
                    agree, as Ozone keeps a tombstone's value: nothing to pull; the
                    block deletion service finishes it)
  UNVERIFIED        none of its replicas could be read (metadata or block files out of
                    the executors' reach, or missing): never counted as MATCH
The report also says how many replicas were read ("read": replicas, read, fraction);
`check_read` turns a run that read nothing, or less than a stated fraction, into an error.
Counts are computed in Spark (only the first `first` IDs per state are collected), so the
report costs the same for 200,000 containers as for 20.

The JSON's "reconcile" list holds, per repair command round, the replica to repair and the
peers to pull from, and the argv of `crcmerkle reconcile TARGET PEER...`;
`crcmerkle reconcile --report REPORT.json` runs them (merkle.reconcile).
"""

from __future__ import annotations

import datetime as _dt
import json
from typing import Any, Dict, List, Optional

from merkle.trees.ozone import format_checksum
from spark_udfs.diff import DEFAULT_DATANODE_LIMIT, DiffResult

__all__ = ["STATES", "NothingVerifiedError", "build_report", "check_read", "format_text",
           "read_summary"]

STATES = ("MATCH", "MISMATCHED", "UNDER_REPLICATED", "OVER_REPLICATED", "MISSING",
          "UNHEALTHY", "UNRECOVERABLE", "PENDING_DELETION", "UNVERIFIED")
#: errors that leave a replica without usable block metadata (Ozone does not load a replica
#: whose .container file is missing or fails its checksum)
_METADATA_ERRORS = ("METADATA_MISSING", "METADATA_CORRUPT", "METADATA_UNSUPPORTED",
                    "METADATA_UNREADABLE", "CONTAINER_FILE_MISSING", "CONTAINER_FILE_CORRUPT")


def build_report(diff: DiffResult, *, replicas: Any = None, errors: Any = None,
                 replication: int = 3, first: int = 100,
                 limit: int = DEFAULT_DATANODE_LIMIT) -> Dict[str, Any]:
    """The report as a JSON-ready dict. `replicas` / `errors`: the scan job's tables (give
    them for data checksums, UNHEALTHY from scan errors, and MISSING)."""
    from pyspark.sql import functions as F

    c = diff.containers
    flags = c.select("container", "n_replicas", "unhealthy_chunks", "state",
                     "read_replicas").join(
        diff.unrecoverable.select("container").distinct()
        .withColumn("unrecoverable", F.lit(True)), "container", "left").join(
        diff.pending_deletions.select("container").distinct()
        .withColumn("pending_deletion", F.lit(True)), "container", "left")
    if errors is not None:
        per_rep = errors.groupBy("container", "datanode").agg(F.max(
            F.col("error").isin(*_METADATA_ERRORS).cast("int")).alias("meta_bad"))
        per_c = per_rep.groupBy("container").agg(
            F.count(F.lit(1)).alias("with_errors"), F.sum("meta_bad").alias("meta_bad"))
        flags = flags.join(per_c, "container", "left")
    else:
        flags = flags.withColumn("with_errors", F.lit(0)).withColumn("meta_bad", F.lit(0))
    cond = {
        "MATCH": F.col("state") == "MATCH",
        "MISMATCHED": F.col("state") == "MISMATCH",
        "UNDER_REPLICATED": F.col("n_replicas") < replication,
        "OVER_REPLICATED": F.col("n_replicas") > replication,
        "MISSING": F.coalesce(F.col("meta_bad"), F.lit(0)) >= F.col("n_replicas"),
        "UNHEALTHY": (F.col("unhealthy_chunks") > 0)
        | (F.coalesce(F.col("with_errors"), F.lit(0)) > 0),
        "UNRECOVERABLE": F.coalesce(F.col("unrecoverable"), F.lit(False)),
        "PENDING_DELETION": F.coalesce(F.col("pending_deletion"), F.lit(False)),
        "UNVERIFIED": F.col("state") == "UNVERIFIED",
    }
    # one job for every state: counts and the first IDs (sorted) per state
    aggs = [F.sum("n_replicas").alias("__replicas"), F.sum("read_replicas").alias("__read")]
    for s in STATES:
        aggs.append(F.sum(F.when(cond[s], 1).otherwise(0)).alias(f"n_{s}"))
        aggs.append(F.slice(F.sort_array(F.collect_list(F.when(cond[s], F.col("container")))),
                            1, max(first, 1)).alias(f"ids_{s}"))
    row = flags.agg(*aggs).collect()[0]
    summary: Dict[str, int] = {s: int(row[f"n_{s}"] or 0) for s in STATES}
    lists: Dict[str, List[int]] = {s: [int(i) for i in (row[f"ids_{s}"] or [])][:first]
                                   for s in STATES}
    read = read_summary(int(row["__replicas"] or 0), int(row["__read"] or 0))
    mismatched = []
    values: Dict[Any, Optional[int]] = {}
    paths: Dict[Any, Optional[str]] = {}
    ids = lists["MISMATCHED"]
    if replicas is not None and ids:
        for r in replicas.filter(F.col("container").isin(ids)).collect():
            values[(r["container"], r["datanode"])] = r["data_checksum"]
            paths[(r["container"], r["datanode"])] = r["replica"]
    for r in c.filter(F.col("container").isin(ids)).orderBy("container").collect() if ids \
            else []:
        reps = []
        for g in r["groups"]:
            for dn in g:
                v = values.get((r["container"], dn))
                reps.append({"datanode": dn, "replica": paths.get((r["container"], dn)),
                             "dataChecksum": None if v is None else format_checksum(v)})
        mismatched.append({"containerID": int(r["container"]), "replicas": reps,
                           "groups": [list(g) for g in r["groups"]]})
    plan = diff.plan(limit)
    unrec = [{"container": int(u["container"]), "block": int(u["block"]),
              "offset": int(u["offset"]), "datanodes": list(u["datanodes"]),
              "reason": u["reason"]}
             for u in diff.unrecoverable.orderBy("container", "block", "offset")
             .limit(first).collect()]
    pending = [{"container": int(p["container"]), "datanode": p["datanode"],
                "replica": p["replica"], "block": int(p["block"]),
                "deleted_on": list(p["deleted_on"])}
               for p in diff.pending_deletions.orderBy("container", "block", "datanode")
               .limit(first).collect()]
    reconcile = _reconcile_entries(plan)
    # replicas on Ozone datanode volumes: the datanodes reconcile themselves, asked per
    # container; crcmerkle's own reconciler refuses them
    on_ozone = any(_on_ozone(r["replica"]) for m in mismatched for r in m["replicas"])
    ozone_reconcile = [{"containerID": cid,
                        "argv": ["ozone", "admin", "container", "reconcile", str(cid)]}
                       for cid in ids] if on_ozone else []
    if on_ozone:
        reconcile = []
    return {
        "format": "crcmerkle-spark-report", "version": 1,
        "generated": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "replication": replication,
        "summary": summary,
        "read": read,
        "first": first,
        "containers": lists,
        "mismatched": mismatched,
        "unrecoverable": unrec,
        "pending_deletions": pending,
        "repair_plan": {"datanode_limit": limit,
                        "rounds": 1 + max((p["round"] for p in plan), default=-1),
                        "commands": plan},
        "reconcile": reconcile,
        "ozone_reconcile": ozone_reconcile,
    }


def _on_ozone(path: Optional[str]) -> bool:
    """Is this replica path on an Ozone datanode volume (hdds/<cluster>/current/...)?"""
    return bool(path) and "/hdds/" in str(path) and "/current/containerDir" in str(path)


def read_summary(replicas: int, read: int) -> Dict[str, Any]:
    """How much of the cluster a run actually read (the report's "read" entry)."""
    return {"replicas": replicas, "read": read,
            "fraction": round(read / replicas, 6) if replicas else 0.0}


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
    why = ("the executors could not read the replicas: are the paths visible on every node "
           "(not only on the driver), and the store's endpoint and credentials set for the "
           "executors? see the errors table")
    if not n:
        raise NothingVerifiedError("no replica was scanned")
    if not k:
        raise NothingVerifiedError(f"none of the {n} replica(s) could be read; {why}")
    raise NothingVerifiedError(f"only {k} of {n} replica(s) were read ({k / n:.1%} < "
                               f"--min-read-fraction {min_fraction:g}); {why}")


def _reconcile_entries(plan: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """One `crcmerkle reconcile TARGET PEER...` per (round, container, target)."""
    grouped: Dict[Any, Dict[str, Any]] = {}
    for p in plan:
        key = (p["round"], p["container"], p["target"])
        e = grouped.setdefault(key, {"round": p["round"], "container_id": p["container"],
                                     "datanode": p["target"], "replica": p["target_replica"],
                                     "peers": [], "peer_datanodes": []})
        e["peer_datanodes"].append(p["source"])
        e["peers"].append(p["source_replica"])
    out = []
    for key in sorted(grouped):
        e = grouped[key]
        if e["replica"] and all(e["peers"]):
            e["argv"] = ["crcmerkle", "reconcile", e["replica"], *e["peers"]]
        out.append(e)
    return out


def format_text(report: Dict[str, Any]) -> str:
    """The human form, in the shape of Ozone's container report."""
    lines = [f"Container Summary Report generated at {report['generated']}",
             "=" * 58, "", "Container Health Summary", "=" * 24]
    for s in STATES:
        lines.append(f"{s}: {report['summary'][s]}")
    rd = report.get("read")
    if rd is not None:
        lines.append(f"Replicas read: {rd['read']} of {rd['replicas']} "
                     f"({rd['fraction']:.1%})")
    for s in STATES:
        ids = report["containers"][s]
        if s == "MATCH" or not ids:
            continue
        lines += ["", f"First {report['first']} {s} containers:",
                  ", ".join(f"#{i}" for i in ids)]
    if report["mismatched"]:
        lines += ["", "Reconcile status of mismatched containers", "=" * 42]
        for m in report["mismatched"]:
            lines.append(f"Container {m['containerID']}:")
            for r in m["replicas"]:
                lines.append(f"  {r['datanode']}: dataChecksum="
                             f"{r['dataChecksum'] if r['dataChecksum'] is not None else '-'}"
                             f"{'  ' + r['replica'] if r['replica'] else ''}")
    if report["unrecoverable"]:
        lines += ["", "Unrecoverable chunks (no healthy copy, or healthy copies differ)"]
        for u in report["unrecoverable"]:
            lines.append(f"  container {u['container']} block {u['block']} chunk "
                         f"@{u['offset']}: {u['reason']} ({', '.join(u['datanodes'])})")
    if report["pending_deletions"]:
        lines += ["", "Pending deletions (live here, deleted on other replicas; values agree)"]
        for p in report["pending_deletions"]:
            lines.append(f"  container {p['container']} block {p['block']}: live on "
                         f"{p['datanode']}, deleted on {', '.join(p['deleted_on'])}")
    if report.get("ozone_reconcile"):
        lines += ["", "Ozone reconciliation (the datanodes repair their own replicas):"]
        lines += ["  " + " ".join(o["argv"]) for o in report["ozone_reconcile"]]
    plan = report["repair_plan"]
    lines += ["", f"Repair plan: {len(plan['commands'])} command(s) in {plan['rounds']} "
                  f"round(s), at most {plan['datanode_limit']} per datanode per round"]
    for p in plan["commands"][:report["first"]]:
        kinds: Dict[str, int] = {}
        for it in p["items"]:
            kinds[it["kind"]] = kinds.get(it["kind"], 0) + 1
        what = ", ".join(f"{n} {k.lower().replace('_', ' ')}" for k, n in sorted(kinds.items()))
        lines.append(f"  round {p['round']}: container {p['container']} {p['target']} <- "
                     f"{p['source']}: {what}, {p['bytes']} bytes")
    return "\n".join(lines) + "\n"


def to_json(report: Dict[str, Any]) -> str:
    return json.dumps(report, indent=1, sort_keys=False, default=str) + "\n"
