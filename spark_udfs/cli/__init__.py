"""`crcmerkle spark scan|diff|report|run|plan|copycheck|demo` (also `python -m spark_udfs ...`).

  scan PATH... -o OUT      verify replicas on Spark; Parquet tables
                           OUT/{chunks,blocks,containers,errors}; with --ledger-metadata
                           or --zookeeper the PATHs are BookKeeper bookies: tables
                           OUT/{copies,findings,volumes,ledgers,entries}
                           (spark_udfs.jobs.bookkeeper), read back by report and plan
                           (--decommission BOOKIE), scan + report in one by run
  diff SCAN -o OUT         hierarchical diff of a scan (or a chunk table); OUT/{containers,
                           pulls,unrecoverable,pending_deletions,plan} Parquet +
                           OUT/plan.json (counts, first commands)
  report SCAN [--json]     health summary + repair plan (diff computed on the fly)
  run PATH... -o OUT       scan, diff and report in one Spark session (with --decommission
                           or --maintenance: the plan instead of the report)
  plan SCAN --decommission DN,... --maintenance DN,...
                           can these datanodes stop? checksum-aware replica counts, what
                           holds each back, the copies that make it safe (spark_udfs.jobs.plan)
  copycheck --om-db CHECKPOINT --scan SCAN --target URI [--map SRC=DST] -o OUT
                           Ozone keys against their copies (S3, GCS, HDFS listings, a
                           directory) from stored checksums: MATCH, MISMATCH, MISSING,
                           EXTRA, SIZE_DIFFERS, NOT_COMPARABLE, UNVERIFIED
                           (spark_udfs.jobs.copycheck)
  demo                     generate a faulty cluster, scan/diff/report it, check the
                           findings against the ground truth; then, for the crcmerkle
                           layout, repair and re-scan (Ozone's: its reconcile commands)
Repair with `crcmerkle reconcile --report REPORT.json` (the JSON of report/run; the full
command list is written by the executors next to it, REPORT.json.commands/).
Spark runs embedded (local[*]) unless --master or spark-submit says otherwise. On a terminal
each command shows its running Spark stages (tasks done/total) on one line of stderr.
Errors are one line `crcmerkle: error: ...`; --debug (or CRCMERKLE_DEBUG=1) shows Spark's log
and the full stack traces. A container no replica of which could be read is UNVERIFIED (exit
1); a run that read no replica, or less than --min-read-fraction of them, exits 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any, List, Optional, Tuple

from merkle.cli import EXIT_ERROR, CLIError
from spark_udfs.cli.options import EPILOG

__all__ = ["VERB_MODULES", "add_parser", "run"]

#: The modules that each add their verbs to `crcmerkle spark`, in the order --help lists them.
#: Each provides `add_parser(sub)`, which adds its subcommand(s) to the `spark` parser's
#: subparsers and sets the handler (`set_defaults(func=_guarded(handler))`); the options
#: several verbs share are spark_udfs.cli.options', the handlers' shared steps
#: spark_udfs.cli.common's. To add a verb, write spark_udfs/cli/<verb>.py and list it here
#: (the Spark job it runs goes into spark_udfs/jobs/).
VERB_MODULES: Tuple[str, ...] = (
    "spark_udfs.cli.scan",
    "spark_udfs.cli.diff",
    "spark_udfs.cli.report",  # report, run
    "spark_udfs.cli.plan",
    "spark_udfs.cli.copycheck",
    "spark_udfs.cli.demo",
)

DESCRIPTION = (
    __doc__.split("\n\n")[0]
    + """

Verify and diff the replicas of every container of a cluster with Apache Spark: executors read
block files themselves and checksum them natively; the diff goes container -> block -> chunk
and only shuffles what diverges."""
)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "spark",
        help="scan, diff and report whole clusters on Spark",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="spark_command", metavar="ACTION", parser_class=type(p))
    for name in VERB_MODULES:
        importlib.import_module(name).add_parser(sub)
    p.set_defaults(func=lambda args: _usage())
    return p


def _usage() -> int:
    raise CLIError(
        "spark needs an action: scan, diff, report, run, plan, copycheck or demo; see "
        "'crcmerkle spark --help'",
        EXIT_ERROR,
    )


def run(argv: Optional[List[str]] = None) -> int:
    """`python -m spark_udfs ...`: the same commands without the `crcmerkle spark` prefix."""
    from merkle import cli

    cli.register("merkle.cli.spark")
    return cli.main(["spark", *(sys.argv[1:] if argv is None else argv)])
