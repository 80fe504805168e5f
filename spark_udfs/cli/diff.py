"""`crcmerkle spark diff SCAN -o OUT`: the hierarchical diff of a scan's tables (container ->
block -> chunk), its repair plan written by the executors (OUT/plan, OUT/plan.json).
"""

from __future__ import annotations

import argparse
import json
from typing import Any, Dict

from merkle.cli import EXIT_FINDINGS, positive_int
from spark_udfs.cli import common
from spark_udfs.cli.common import (
    _LOAD_STATE,
    _check_output,
    _check_paths,
    _check_read,
    _diff_tables,
    _dir_display,
    _guarded,
    _load_chunks,
    _not_scanned,
    _progress,
    _write_file,
)
from spark_udfs.cli.options import _common, _inventory_opt, _read_opt
from spark_udfs.uri import child

DIFF_DESCRIPTION = """\
Compare the replicas of each container in a scan's tables, container -> block -> chunk
(only what diverges is shuffled). Writes Parquet tables under OUTPUT: containers (the verdict
of each), pulls (which replica takes which block from which peer), unrecoverable (chunks no
replica holds good), pending_deletions, plan; and OUTPUT/plan.json (counts, first commands)."""


#: repair commands listed in plan.json (the whole plan is the OUT/plan table)
PLAN_FIRST = 100


#: the "format" of the diff's plan.json: the repair plan (pulls between replicas), not the
#: decommission copy plan of `spark plan` ("crcmerkle-spark-plan", `replicate --report`)
REPAIR_PLAN_FORMAT = "crcmerkle-spark-repair-plan"


def add_parser(sub: Any) -> None:
    """`crcmerkle spark diff`, added to `crcmerkle spark`'s subcommands."""
    d = sub.add_parser(
        "diff", help="compare replicas; write containers/pulls/plan", description=DIFF_DESCRIPTION
    )
    d.add_argument("input", help="a scan output directory, or a chunk-table Parquet path")
    d.add_argument(
        "-o", "--output", required=True, help="output directory (Parquet tables and plan.json)"
    )
    d.add_argument(
        "--limit",
        type=positive_int,
        default=20,
        help="repair commands per datanode per round (default 20)",
    )
    _read_opt(d)
    _inventory_opt(d)
    _common(d)
    d.set_defaults(func=_guarded(_not_scanned(_diff)))


def _write_plan(res: Any, output: str, limit: int) -> Dict[str, Any]:
    """The plan written by the executors as OUT/plan (Parquet, spark_udfs.jobs.diff.plan_commands);
    only its counts and first commands come to the driver, for OUT/plan.json."""
    from pyspark.sql import functions as F

    from spark_udfs.jobs.diff import plan_commands

    cmds = plan_commands(res.pulls, limit)
    out = output.rstrip("/")
    cmds.write.mode("overwrite").parquet(out + "/plan")
    cmds = cmds.sparkSession.read.parquet(out + "/plan")
    row = cmds.agg(
        F.count(F.lit(1)).alias("n"), F.max("round").alias("last"), F.sum("bytes").alias("bytes")
    ).collect()[0]
    first = [
        r.asDict(recursive=True)
        for r in cmds.orderBy("round", "container", "target", "source").limit(PLAN_FIRST).collect()
    ]
    plan = {
        "format": REPAIR_PLAN_FORMAT,
        "version": 1,
        "datanode_limit": limit,
        "commands": int(row["n"]),
        "rounds": 0 if row["last"] is None else int(row["last"]) + 1,
        "bytes": int(row["bytes"] or 0),
        "table": "plan",
        "first": first,
    }
    _write_file(child(output, "plan.json"), (json.dumps(plan, indent=1) + "\n").encode())
    return plan


def _diff(args: argparse.Namespace) -> int:
    _check_paths([args.input])  # before the JVM starts: a missing path costs nothing
    _check_output(args.output, [args.input])
    inventory = _LOAD_STATE.get("inventory")  # --datanodes (_not_scanned loaded it)
    spark = common._session(args)
    t = _load_chunks(spark, args.input)
    out = args.output.rstrip("/")
    from pyspark.sql import functions as F

    from spark_udfs.jobs.report import read_summary

    with _progress(args, spark, "diff"):
        res = _diff_tables(t)
        res.containers.write.mode("overwrite").parquet(out + "/containers")
        res.pulls.write.mode("overwrite").parquet(out + "/pulls")
        res.unrecoverable.write.mode("overwrite").parquet(out + "/unrecoverable")
        res.pending_deletions.write.mode("overwrite").parquet(out + "/pending_deletions")
        plan = _write_plan(res, args.output, args.limit)
        row = res.containers.agg(
            F.count(F.lit(1)).alias("n"),
            F.sum(F.col("n_replicas")).alias("replicas"),
            F.sum(F.col("read_replicas")).alias("read"),
            F.sum((F.col("state") == "MISMATCH").cast("int")).alias("mism"),
            F.sum((F.col("state") == "UNVERIFIED").cast("int")).alias("unver"),
        ).collect()[0]
        n_unrec = res.unrecoverable.count()
        idx = _volumes_out(spark, t, inventory, out)
    mism, unver = int(row["mism"] or 0), int(row["unver"] or 0)
    print(
        f"{row['n']} container(s), {mism} mismatched, {unver} unverified, "
        f"{plan['commands']} repair command(s) in {plan['rounds']} round(s), {n_unrec} "
        f"unrecoverable chunk(s); tables in {_dir_display(out)}/"
    )
    if idx is not None and idx.degraded:
        print(
            f"{idx.volumes_unverified} volume(s) not verified ("
            + ", ".join(f"{s} {n}" for s, n in sorted(idx.counts.items()) if s != "SCANNED")
            + f"), {len(idx.hosts_unverified)} host(s) with none verified: their replicas "
            "were not read ('spark report' lists them)"
        )
    _check_read(
        read_summary(int(row["replicas"] or 0), int(row["read"] or 0)), args.min_read_fraction
    )
    return EXIT_FINDINGS if (mism or n_unrec or unver or (idx is not None and idx.degraded)) else 0


def _volumes_out(spark: Any, t: Dict[str, Any], inventory: Any, out: str) -> Any:
    """The diff's OUT/volumes: the scan's volumes table with the inventory's hosts named and
    its hosts without a volume added as NOT_SCANNED; and their HostIndex (None without a
    volumes table or an inventory)."""
    from spark_udfs.cluster.hosts import host_index, volumes_with_inventory

    vols = t.get("volumes")
    if vols is None and inventory is None:
        return None
    if vols is not None:
        vols = volumes_with_inventory(spark, vols, inventory)
        vols.write.mode("overwrite").parquet(out + "/volumes")
    return host_index(spark, replicas=t.get("containers"), volumes=vols, inventory=inventory)
