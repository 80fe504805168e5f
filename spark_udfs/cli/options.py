"""The options the `crcmerkle spark` verbs share, and their argument types: --master/--conf/
--debug (every verb), the scan's pass and politeness (scan, run), the report's (report, run,
plan), the decommission plan's (run, plan), --datanodes on the verbs that read scan tables;
and EPILOG, the exit statuses every verb's --help ends with.
Light imports only: the parser is built before a command checks for pyarrow or pyspark.
"""

from __future__ import annotations

import argparse
import os
from typing import Any, Dict, List, Optional

from merkle.cli import (
    EXIT_ERROR,
    CLIError,
    add_debug_flag,
    duration_arg,
    exit_status_help,
    positive_int,
    positive_size,
    seconds_arg,
)

__all__ = ["EPILOG", "state_option"]


EPILOG = exit_status_help(
    "scan: a replica has errors, or with --strict warnings (2 if some replica could not be "
    "read at all); diff: a container's replicas differ or a chunk is unrecoverable "
    "(repairs pending); report, run: the same, or a replica has errors (UNHEALTHY; with "
    "--strict warnings too); run --decommission/--maintenance, plan: some listed datanode "
    "may not stop yet (copies or repairs are needed first); copycheck: some key's verdict "
    "is not MATCH (MISMATCH, MISSING, SIZE_DIFFERS, NOT_COMPARABLE, UNVERIFIED; EXTRA too), "
    "unless --allow names it; demo: the findings differ from the injected faults"
)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--master", help="Spark master (default: local[*], or spark-submit's)")
    p.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark setting (repeatable)",
    )
    add_debug_flag(p)
    p.epilog = EPILOG
    p.formatter_class = argparse.RawDescriptionHelpFormatter


def _fraction(text: str) -> float:
    """argparse type: a number in [0, 1]."""
    try:
        v = float(text)
    except ValueError:
        v = -1.0
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a number from 0 to 1, not {text!r}")
    return v


def _strict_opt(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--strict",
        action="store_true",
        help="count scan findings of level warning as errors (exit 1; in the "
        "report, a container with warnings is UNHEALTHY; not used by the "
        "decommission plan, which judges good copies by its own rule)",
    )


def _read_opt(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--min-read-fraction",
        type=_fraction,
        default=0.0,
        metavar="F",
        help="fail (exit 2) unless at least this fraction of the replicas was "
        "read (default 0: fail only when none was)",
    )


def _report_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="the report as JSON")
    p.add_argument(
        "--limit",
        type=positive_int,
        default=20,
        help="repair commands per datanode per round (default 20, like Ozone)",
    )
    p.add_argument(
        "--replication",
        type=positive_int,
        default=3,
        help="expected replicas per container (default 3)",
    )
    p.add_argument(
        "--first",
        type=positive_int,
        default=100,
        help="container IDs listed per state (default 100)",
    )
    p.add_argument("--report", metavar="FILE", help="also write the JSON report to FILE")
    _read_opt(p)


def _names(text: str) -> List[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"want DN[,DN...], not {text!r}")
    return names


def _plan_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--decommission",
        type=_names,
        action="extend",
        default=[],
        metavar="DN[,DN...]",
        help="datanodes to decommission (leave for good): each its UUID or its host name",
    )
    p.add_argument(
        "--maintenance",
        type=_names,
        action="extend",
        default=[],
        metavar="DN[,DN...]",
        help="datanodes to put into maintenance (UUID or host name)",
    )
    p.add_argument(
        "--min-healthy",
        type=positive_int,
        default=1,
        help="good in-service copies a decommission keeps (default 1)",
    )
    p.add_argument(
        "--min-replicas",
        type=positive_int,
        default=None,
        help="good in-service + maintenance copies a decommission needs (default: --replication)",
    )
    p.add_argument(
        "--maintenance-min",
        type=positive_int,
        default=1,
        help="good in-service copies maintenance keeps (default 1)",
    )


def _rate(text: str) -> int:
    """argparse type: a byte rate (5MiB), or 0 for unlimited."""
    return 0 if text.strip() == "0" else positive_size(text)


def _scan_opts(p: argparse.ArgumentParser) -> None:
    """What scan and run share: the pass (data, trees, metadata), the data-local cluster
    scan's inventory, and the politeness on a live datanode."""
    # light modules only: the parser is built before the command checks for pyarrow
    from merkle.replica.politeio import DEFAULT_BYTES_PER_SECOND
    from spark_udfs.cluster.locality import DEFAULT_EXECUTOR_WAIT

    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--trees-only",
        action="store_true",
        help="read the stored .tree files instead of the data (no data read)",
    )
    mode.add_argument(
        "--metadata-only",
        action="store_true",
        help="the census: each replica's tree from its stored .tree where that "
        "still describes its block metadata, else from the checksums the "
        "client recorded (container.db); no data read",
    )
    p.add_argument(
        "--datanodes",
        metavar="FILE",
        help="scan a cluster where its disks are: one task per (host, volume) of "
        "this inventory, run on that host (the output of 'ozone admin "
        "datanode list --json', or a JSON list of {host, uuid, volumes}; with "
        "--ledger-metadata/--zookeeper the bookie hosts, one task each: {host, "
        "bookie, volumes} with the ledger directories as volumes); no PATH then",
    )
    p.add_argument(
        "--ozone-conf",
        metavar="FILE",
        help="an ozone-site.xml whose hdds.datanode.dir gives each host's volumes "
        "(when the inventory lists none)",
    )
    p.add_argument(
        "--bytes-per-second",
        type=_rate,
        metavar="RATE",
        default=None,
        help="read at most this many bytes per second per volume (on bookies per ledger "
        "directory; e.g. 50MiB); "
        f"with --datanodes the default is {DEFAULT_BYTES_PER_SECOND // 2**20} "
        "MiB/s, safe on a live datanode (a 16 TB disk in 11 days), else "
        "unlimited; 0: unlimited (as in 'crcmerkle scan')",
    )
    p.add_argument(
        "--no-idle-io",
        action="store_true",
        help="with --datanodes: read in the normal I/O class (default: the idle "
        "class, where the kernel's scheduler honours it; bookies too)",
    )
    p.add_argument(
        "--keep-cache",
        action="store_true",
        help="with --datanodes: leave what the scan read in the page cache "
        "(default: dropped, the datanode's cache is left as it was)",
    )
    p.add_argument(
        "--also",
        action="append",
        type=str.lower,
        choices=("crc64nvme", "crc32c", "crc32"),
        metavar="ALG",
        help="also compute this CRC (crc64nvme, crc32c or crc32; repeatable) of "
        "every window of each chunk and of each block read in full, from the "
        "bytes the scan reads anyway: the chunks and blocks tables' column of "
        "that name (binary, big-endian; a block's is S3's full-object "
        "checksum of an object made of that block); on bookies: of each entry "
        "copy's payload, the copies table's also_ALG column, compared across "
        "copies",
    )
    p.add_argument(
        "--state",
        metavar="DIR",
        help="with --datanodes: keep each volume's progress in DIR on its host (created "
        "private, root's own, off the volumes; a database per volume), as 'crcmerkle scan "
        "--state' does: a rerun after a lost executor or a driver restart reads only what "
        "the pass has not verified, and tables the rest from their records",
    )
    p.add_argument(
        "--max-age",
        metavar="DURATION",
        type=duration_arg,
        help="with --state: do not read again a replica verified within DURATION (7d, "
        "12h, ...) whose identity is unchanged; changed and never-verified replicas "
        "first, then the oldest. Bit rot changes no metadata: every replica is still "
        "read once per DURATION",
    )
    p.add_argument(
        "--checkpoint-seconds",
        metavar="SECONDS",
        type=seconds_arg,
        help="with --state: save the blocks verified of a replica in flight at most "
        "every SECONDS of reading (default 1; 0: after every block)",
    )
    p.add_argument(
        "--executor-wait",
        type=float,
        default=DEFAULT_EXECUTOR_WAIT,
        metavar="SECONDS",
        help="with --datanodes: how long to wait for every host's executor "
        f"before the hosts without one are reported (default "
        f"{DEFAULT_EXECUTOR_WAIT:g})",
    )


def _inventory_opt(p: argparse.ArgumentParser) -> None:
    """--datanodes FILE (and --ozone-conf) on the verbs that read scan tables: an inventory
    host with no volume in the tables is reported NOT_SCANNED (the --emit route: the host
    emitted nothing)."""
    p.add_argument(
        "--datanodes",
        metavar="FILE",
        help="the inventory of hosts (`ozone admin datanode list --json`, or a JSON "
        "list of {host, uuid, volumes}): a host of which the tables hold no "
        "volume is reported NOT_SCANNED (exit 1 at least)",
    )
    p.add_argument(
        "--ozone-conf",
        metavar="FILE",
        help="with --datanodes: an ozone-site.xml whose hdds.datanode.dir gives the hosts' volumes",
    )


def state_option(args: argparse.Namespace, data_local: bool) -> Optional[Dict[str, Any]]:
    """--state DIR (with --max-age, --checkpoint-seconds) as the hosts' tasks take it, or
    None; given where it cannot be honoured: one line, exit 2."""
    from merkle.replica.incremental import DEFAULT_CHECKPOINT_SECONDS

    if not args.state:
        if args.max_age is not None or args.checkpoint_seconds is not None:
            raise CLIError("--max-age and --checkpoint-seconds go with --state DIR", EXIT_ERROR)
        return None
    if not data_local:
        raise CLIError(
            "--state goes with --datanodes (each host keeps its own volumes' progress on "
            "its own disk)",
            EXIT_ERROR,
        )
    if args.trees_only or args.metadata_only or args.also:
        raise CLIError(
            "--state records verified data: not with --trees-only, --metadata-only or --also",
            EXIT_ERROR,
        )
    if not os.path.isabs(args.state) or "://" in args.state:
        raise CLIError(
            f"--state {args.state}: give an absolute local path (it names the same "
            f"directory on every host)",
            EXIT_ERROR,
        )
    given = args.checkpoint_seconds
    return {
        "dir": os.path.normpath(args.state),
        "max_age": args.max_age,
        "checkpoint_seconds": DEFAULT_CHECKPOINT_SECONDS if given is None else given,
    }
