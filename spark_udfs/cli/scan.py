"""`crcmerkle spark scan PATH... -o OUT` (or `--datanodes FILE`): verify replicas on Spark and
write the chunk/block/container/error/volume tables; the scan step of `spark run` too.
"""

from __future__ import annotations

import argparse
from typing import Any, Dict, Optional, Tuple

from merkle.cli import EXIT_ERROR, EXIT_FINDINGS, CLIError, refuse_also_without_data
from merkle.replica.levels import WARNING
from spark_udfs.cli import common
from spark_udfs.cli.bookkeeper import bookkeeper_opts, is_bookkeeper_scan
from spark_udfs.cli.common import (
    _check_output,
    _check_paths,
    _check_read,
    _dir_display,
    _guarded,
    _inventory,
    _progress,
)
from spark_udfs.cli.options import _common, _read_opt, _scan_opts, _strict_opt, state_option

SCAN_DESCRIPTION = """\
Verify container replicas on Spark: each executor reads the block files of the replicas it is
given (a path, or with --datanodes the volumes of its own host) and checksums them natively.
Writes Parquet tables under OUTPUT: chunks (one row per chunk: its recorded and computed
checksums), blocks, containers (each replica's status and container value) and errors (every
finding). 'crcmerkle spark diff' and 'report' read them; nothing is repaired here.
With --ledger-metadata or --zookeeper the PATHs are BookKeeper bookies: one task per ledger
storage, then the ledgers judged grouped by ledger; tables copies, findings, volumes and
ledgers."""


def add_parser(sub: Any) -> None:
    """`crcmerkle spark scan`, added to `crcmerkle spark`'s subcommands."""
    s = sub.add_parser(
        "scan",
        help="verify replicas (or BookKeeper bookies); write their tables",
        description=SCAN_DESCRIPTION,
    )
    s.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="replica, volume, datanode or cluster directory (or URI); none with --datanodes",
    )
    s.add_argument("-o", "--output", required=True, help="output directory (Parquet)")
    _scan_opts(s)
    bookkeeper_opts(s)
    _read_opt(s)
    _strict_opt(s)
    _common(s)
    s.set_defaults(func=_guarded(_scan))


def _scan_and_write(args: argparse.Namespace) -> Tuple[Any, Any]:
    """(session, ScanTables) after scanning args.paths, or every volume of the --datanodes
    inventory on its own host, into args.output (scan and run)."""
    from spark_udfs.jobs.scan import scan_replicas

    inventory = _inventory(args)
    if inventory is not None and args.paths:
        raise CLIError(
            "give PATHs or --datanodes, not both (with an inventory every host's "
            "volumes are scanned where they are)"
        )
    if inventory is None and not args.paths:
        raise CLIError("nothing to scan: give PATHs, or --datanodes FILE for a whole cluster")
    if inventory is None and (args.no_idle_io or args.keep_cache):
        raise CLIError("--no-idle-io and --keep-cache go with --datanodes")
    state = state_option(args, inventory is not None)
    if inventory is None:
        _check_paths(args.paths)
        _check_output(args.output, args.paths)
    else:  # the volumes of every host (a local -o inside one is on that host's disk too)
        _check_output(args.output, sorted({v for h in inventory.hosts for v in h.volumes}))
    spark = common._session(args, locality=inventory is not None)
    with _progress(args, spark, "scan"):
        try:
            if inventory is not None:
                tables = _scan_hosts(args, spark, inventory, state)
            else:
                tables = scan_replicas(
                    spark,
                    args.paths,
                    trees_only=args.trees_only,
                    metadata_only=args.metadata_only,
                    bytes_per_second=args.bytes_per_second or None,
                    also=tuple(args.also or ()),
                )
        except ValueError as exc:
            raise CLIError(str(exc), EXIT_ERROR) from None
        tables.write(args.output)
    return spark, tables


def _scan_hosts(
    args: argparse.Namespace, spark: Any, inventory: Any, state: Optional[Dict[str, Any]] = None
) -> Any:
    """The data-local scan of every (host, volume) of `inventory` (spark_udfs.jobs.hostscan)."""
    from merkle.replica.politeio import DEFAULT_BYTES_PER_SECOND
    from spark_udfs.jobs.hostscan import scan_datanodes

    rate = DEFAULT_BYTES_PER_SECOND if args.bytes_per_second is None else args.bytes_per_second
    return scan_datanodes(
        spark,
        inventory,
        trees_only=args.trees_only,
        metadata_only=args.metadata_only,
        bytes_per_second=rate or None,
        idle_io=not args.no_idle_io,
        drop_cache=not args.keep_cache,
        executor_wait=max(0.0, args.executor_wait),
        also=tuple(args.also or ()),
        state=state,
    )


def _scan(args: argparse.Namespace) -> int:
    refuse_also_without_data(args)
    if is_bookkeeper_scan(args):
        from spark_udfs.cli import bookkeeper

        return bookkeeper.scan(args)
    from pyspark.sql import functions as F

    from spark_udfs.jobs.report import read_summary

    spark, tables = _scan_and_write(args)
    with _progress(args, spark, "scan"):
        row = tables.replicas.agg(
            F.count(F.lit(1)).alias("n"), F.sum(F.col("verified").cast("int")).alias("read")
        ).collect()[0]
        counts = tables.errors.agg(
            F.count(F.lit(1)).alias("all"),
            F.sum((F.col("severity") == WARNING).cast("int")).alias("warnings"),
            F.sum((F.col("error") == "SCAN_FAILED").cast("int")).alias("failed"),
        ).collect()[0]
    warns = int(counts["warnings"] or 0)
    errs, failed = int(counts["all"]) - warns, int(counts["failed"] or 0)
    read = read_summary(int(row["n"]), int(row["read"] or 0))
    # a census or trees-only pass reads recorded checksums alone: it never says "read"
    done = (
        "with recorded checksums read (no data read)"
        if args.trees_only or args.metadata_only
        else "read"
    )
    print(
        f"scanned {read['replicas']} replica(s), {read['read']} {done}: {errs} error(s)"
        + (f", {warns} warning(s)" if warns else "")
        + (f", {failed} replica(s) could not be read" if failed else "")
        + f"; tables in {_dir_display(args.output)}/{{{','.join(tables.TABLES)}}}"
    )
    _check_read(read, args.min_read_fraction)
    if failed:
        return EXIT_ERROR
    return EXIT_FINDINGS if errs or (args.strict and warns) else 0
