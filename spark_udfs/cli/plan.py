"""`crcmerkle spark plan SCAN --decommission DN,... --maintenance DN,...`: can these datanodes
stop? Checksum-aware replica counts, what holds each back, the copies that make it safe
(spark_udfs.jobs.plan); the plan step of `spark run --decommission` too. A bookie scan's
SCAN goes to spark_udfs.cli.bookkeeper.plan: may these bookies go down?
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Dict

from merkle.cli import EXIT_ERROR, EXIT_FINDINGS, CLIError
from spark_udfs.cli import common
from spark_udfs.cli.bookkeeper import is_bookkeeper_output
from spark_udfs.cli.common import (
    _LOAD_STATE,
    _check_paths,
    _check_read,
    _diff_tables,
    _guarded,
    _load_chunks,
    _not_scanned,
    _write_file,
)
from spark_udfs.cli.options import _common, _inventory_opt, _plan_opts, _report_opts


def add_parser(sub: Any) -> None:
    """`crcmerkle spark plan`, added to `crcmerkle spark`'s subcommands."""
    pl = sub.add_parser(
        "plan",
        help="can these datanodes be decommissioned / enter "
        "maintenance? checksum-aware counts and a copy plan",
        description="Ozone's decommission/maintenance replica counts "
        "(HDDS-1881), counting only good replicas: clean and in the largest "
        "group of equal container values. Of a bookie scan: may the "
        "--decommission bookies go down, counting only copies whose digest "
        "verified, with the `bookkeeper shell` commands to run. Exit 0: every "
        "listed datanode or bookie may stop now; 1: copies (or repairs) are "
        "needed first; 2: bad input.",
    )
    pl.add_argument("input", help="a scan output directory, or a chunk-table Parquet path")
    _report_opts(pl)
    _plan_opts(pl)
    _inventory_opt(pl)
    _common(pl)
    pl.set_defaults(func=_guarded(_not_scanned(_plan)))


def _plan(args: argparse.Namespace) -> int:
    _check_paths([args.input])  # before the JVM starts
    if is_bookkeeper_output(args.input):
        from spark_udfs.cli import bookkeeper

        return bookkeeper.plan(args)
    if not (args.decommission or args.maintenance):
        raise CLIError("plan needs --decommission DN[,DN...] and/or --maintenance DN[,DN...]")
    _check_leaving_known(args, _LOAD_STATE.get("inventory"))
    spark = common._session(args)
    t = _load_chunks(spark, args.input)
    t["inventory"] = _LOAD_STATE.get("inventory")  # --datanodes (_not_scanned loaded it)
    return _emit_plan(args, _diff_tables(t), t)


def _check_leaving_known(args: argparse.Namespace, inventory: Any) -> None:
    """With an inventory, every --decommission/--maintenance name is one of its hosts (a
    name, an address or a datanode UUID): a mistyped host is one line before the JVM starts,
    never a plan for a datanode nobody has."""
    if inventory is None:
        return
    uuids = {u.lower() for u in inventory.by_uuid()}
    for option, names in (
        ("--decommission", args.decommission or ()),
        ("--maintenance", args.maintenance or ()),
    ):
        for name in names:
            if inventory.host_named(name) is None and name.lower() not in uuids:
                raise CLIError(
                    f"{option} {name}: not a host, address or datanode UUID of the "
                    f"inventory (--datanodes {args.datanodes})",
                    EXIT_ERROR,
                )


def _emit_plan(args: argparse.Namespace, diff: Any, t: Dict[str, Any]) -> int:
    from spark_udfs.jobs.plan import build_plan, format_text, plan_read, to_json

    # a scan that read nothing (or too little) cannot say which copies are good: exit 2
    read = plan_read(diff)
    _check_read(read, args.min_read_fraction)
    try:
        plan = build_plan(
            diff,
            decommission=args.decommission,
            maintenance=args.maintenance,
            errors=t.get("errors"),
            blocks=t.get("blocks"),
            chunks=t["chunks"],
            replication=args.replication,
            min_healthy=args.min_healthy,
            min_replicas=args.min_replicas,
            maintenance_min=args.maintenance_min,
            limit=args.limit,
            first=args.first,
            read=read,
            replicas=t.get("containers"),
            volumes=t.get("volumes"),
            inventory=t.get("inventory"),
        )
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    if args.report:
        _write_file(args.report, to_json(plan).encode(), label="--report ")
    sys.stdout.write(to_json(plan) if args.json else format_text(plan))
    return 0 if plan["summary"]["held_back"] == 0 else EXIT_FINDINGS
