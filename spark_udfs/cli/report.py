"""`crcmerkle spark report SCAN`: the health summary and repair plan of a scan (the diff
computed on the fly); and `crcmerkle spark run PATH... -o OUT`: scan, diff and report (or, with
--decommission/--maintenance, the plan) in one Spark session.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Dict, Optional, Tuple

from merkle.cli import EXIT_ERROR, EXIT_FINDINGS, CLIError, refuse_also_without_data
from spark_udfs.cli import common
from spark_udfs.cli.bookkeeper import bookkeeper_opts, is_bookkeeper_output, is_bookkeeper_scan
from spark_udfs.cli.common import (
    _LOAD_STATE,
    _check_paths,
    _check_read,
    _diff_tables,
    _guarded,
    _inventory,
    _load_chunks,
    _not_scanned,
    _progress,
    _write_file,
)
from spark_udfs.cli.options import (
    _common,
    _inventory_opt,
    _plan_opts,
    _report_opts,
    _scan_opts,
    _strict_opt,
)
from spark_udfs.cli.plan import _emit_plan
from spark_udfs.cli.scan import _scan_and_write
from spark_udfs.uri import child, display

REPORT_DESCRIPTION = """\
The health summary of a scan: how many containers are HEALTHY, UNHEALTHY, UNVERIFIED, ...,
the first container IDs of each state, and the repair plan (the diff is computed on the fly,
nothing is written but --report FILE). Repair with 'crcmerkle reconcile --report FILE'."""


RUN_DESCRIPTION = """\
scan, diff and report in one Spark session: the scan's and the diff's tables under OUTPUT,
the report on stdout (and --report FILE), the full repair command list under
OUTPUT/reconcile/. With --decommission or --maintenance: the decommission plan (as 'crcmerkle
spark plan') instead of the report. With --ledger-metadata or --zookeeper the PATHs are
BookKeeper bookies: the bookie scan's tables, then its report (as 'crcmerkle scan' prints it)."""


def add_parser(sub: Any) -> None:
    """`crcmerkle spark report` and `crcmerkle spark run` (scan + diff + report, or with
    --decommission/--maintenance the plan), added to `crcmerkle spark`'s subcommands."""
    r = sub.add_parser(
        "report", help="health summary and repair plan of a scan", description=REPORT_DESCRIPTION
    )
    r.add_argument("input", help="a scan output directory, or a chunk-table Parquet path")
    _report_opts(r)
    _strict_opt(r)
    _inventory_opt(r)
    bookkeeper_opts(r, emitted=True)
    _common(r)
    r.set_defaults(func=_guarded(_not_scanned(_report)))
    a = sub.add_parser(
        "run", help="scan + diff + report in one session", description=RUN_DESCRIPTION
    )
    a.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="replica, volume, datanode or cluster directory (or URI); none with --datanodes",
    )
    a.add_argument(
        "-o",
        "--output",
        required=True,
        help="output directory: the scan's Parquet tables, the diff's, and "
        "reconcile/ (the full command list)",
    )
    _scan_opts(a)
    bookkeeper_opts(a)
    _report_opts(a)
    _strict_opt(a)
    _plan_opts(a)
    _common(a)
    a.set_defaults(func=_guarded(_run))


def _emit_report(args: argparse.Namespace, spark: Any, diff: Any, t: Dict[str, Any]) -> int:
    from spark_udfs.jobs.report import build_report, format_text, report_has_findings, to_json

    to, ref = _commands_location(args)
    with _progress(args, spark, "report"):
        rep = build_report(
            diff,
            replicas=t.get("containers"),
            errors=t.get("errors"),
            replication=args.replication,
            first=args.first,
            limit=args.limit,
            commands_to=to,
            commands_ref=ref,
            strict=getattr(args, "strict", False),
            volumes=t.get("volumes"),
            inventory=t.get("inventory"),
        )
    if args.report:
        _write_file(args.report, to_json(rep).encode(), label="--report ")
    sys.stdout.write(to_json(rep) if args.json else format_text(rep))
    sys.stdout.flush()
    _check_read(rep["read"], args.min_read_fraction)
    return EXIT_FINDINGS if report_has_findings(rep) else 0


#: suffix of the full command list next to a --report FILE (FILE.commands/)
COMMANDS_SUFFIX = ".commands"


def _commands_location(args: argparse.Namespace) -> Tuple[Optional[str], Optional[str]]:
    """(where the executors write the report's full command list, how the JSON names it).
    Next to --report FILE as FILE.commands/, named relative to the report (the two move
    together); else, for `run`, OUT/reconcile/ named absolutely (the JSON goes to stdout);
    else nowhere (`report` without --report: only the first --first commands exist)."""
    if args.report:
        uri = "://" in args.report
        base, sep, query = args.report.partition("?") if uri else (args.report, "", "")
        base = base.rstrip("/")
        if not uri and os.path.isdir(base):
            raise CLIError(f"--report {args.report}: is a directory (give a file name)", EXIT_ERROR)
        name = base.rsplit("/", 1)[-1] if uri else os.path.basename(base)
        return base + COMMANDS_SUFFIX + sep + query, name + COMMANDS_SUFFIX
    output = getattr(args, "output", None)
    if output:
        out = child(output, "reconcile")
        return out, display(out) if "://" in out else os.path.abspath(out)
    return None, None


def _report(args: argparse.Namespace) -> int:
    _check_paths([args.input])  # before the JVM starts
    if is_bookkeeper_output(args.input):
        from spark_udfs.cli import bookkeeper

        return bookkeeper.report(args)
    if is_bookkeeper_scan(args):
        raise CLIError(
            "--ledger-metadata and --zookeeper go with bookie hosts' emitted rows "
            f"(`crcmerkle scan BOOKIE_DIR... --emit URI`): {args.input} holds none",
            EXIT_ERROR,
        )
    spark = common._session(args)
    t = _load_chunks(spark, args.input)
    t["inventory"] = _LOAD_STATE.get("inventory")  # --datanodes (_not_scanned loaded it)
    return _emit_report(args, spark, _diff_tables(t), t)


def _run(args: argparse.Namespace) -> int:
    refuse_also_without_data(args)
    if is_bookkeeper_scan(args):
        from spark_udfs.cli import bookkeeper

        return bookkeeper.run(args)
    spark, _ = _scan_and_write(args)
    t = _load_chunks(spark, args.output)
    t["inventory"] = _inventory(args)
    if args.decommission or args.maintenance:
        return _emit_plan(args, _diff_tables(t), t)
    return _emit_report(args, spark, _diff_tables(t), t)
