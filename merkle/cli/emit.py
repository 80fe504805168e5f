"""`crcmerkle scan VOLUME... --emit URI`: this host's scan tables, written where `crcmerkle
spark diff/report/plan` read them (spark_udfs.tables.emit does the work; this is its command
line)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict

from merkle.cli import EXIT_ERROR, EXIT_FINDINGS, CLIError, one_line, print_error, redact_json


def add_options(p: argparse.ArgumentParser) -> None:
    """--emit and --host, on `crcmerkle scan`."""
    p.add_argument(
        "--emit",
        metavar="URI",
        help="write this host's scan tables (the Parquet tables of 'crcmerkle "
        "spark scan', partitioned by datanode) under URI (a directory, "
        "hdfs://, s3://...) instead of listing replicas; read-only; many "
        "hosts may emit to one URI: 'crcmerkle spark report URI' reads "
        "them all (bookies, with --ledger-metadata/--zookeeper: this host's "
        "verified copies, which 'crcmerkle spark report URI --ledger-metadata "
        "PATH' judges with the other hosts')",
    )
    p.add_argument(
        "--host",
        metavar="NAME",
        help="with --emit: the host name written in the tables' host columns "
        "(default: this machine's fully qualified name)",
    )


def emit_host(args: argparse.Namespace) -> str:
    """The host name an emit writes (--host, else this machine's fully qualified name),
    checked: one line, exit 2, for an empty one or one with a control character."""
    from spark_udfs.tables.emit import default_host

    host: str = args.host if args.host is not None else default_host()
    if not host or any(ord(c) < 0x20 or c == "\x7f" for c in host):
        raise CLIError(f"--host {host!r}: not a host name", EXIT_ERROR)
    return host


def run_emit(args: argparse.Namespace, idle: bool, tracker: Any = None) -> int:
    """Scan args.paths into args.emit; exit 0 clean, 1 findings, 2 when some PATH, volume
    or replica could not be scanned at all (or the output could not be written). `tracker`:
    --state's (merkle.replica.incremental.StateTracker with `replay`), or None."""
    try:
        from merkle.replica.uri import display
        from spark_udfs.tables.emit import emit_scan
    except ImportError as exc:  # pyarrow missing: one line
        raise CLIError(f"--emit needs pyarrow ({exc})", EXIT_ERROR) from None
    host = emit_host(args)
    where = display(args.emit)

    def on_volume(row: Dict[str, Any]) -> None:
        if args.json:
            return
        status = row["status"] + (f" ({row['detail']})" if row["detail"] else "")
        print(
            f"{one_line(row['volume'])}  datanode {one_line(row['datanode'])}: {status}, "
            f"{row['replicas']} replicas, {row['bytes_read']} bytes",
            flush=True,
        )

    options: Dict[str, Any] = {"workers": args.workers}
    if args.also:
        options["also"] = tuple(args.also)
    if args.buffer_size:
        options["buffer_size"] = args.buffer_size
    try:
        res = emit_scan(
            args.paths,
            args.emit,
            host,
            trees_only=args.trees_only,
            metadata_only=args.metadata_only,
            bytes_per_second=args.rate,
            drop_cache=not args.keep_cache,
            strict=args.strict,
            on_volume=on_volume,
            tracker=tracker,
            **options,
        )
        if tracker is not None:  # every PATH visited: the next run starts a new pass
            tracker.state.complete_pass()
    except (OSError, ValueError) as exc:
        raise CLIError(f"--emit {where}: {exc}", EXIT_ERROR) from None
    finally:
        if tracker is not None:
            tracker.state.close()
    for line in res.failures:
        if not args.json:
            print_error(line)
    failed_volumes = sum(1 for v in res.volumes if v["status"] != "SCANNED")
    summary = {
        "host": host,
        "emit": where,
        "volumes": len(res.volumes),
        "failed_volumes": failed_volumes,
        "replicas": res.replicas,
        "with_errors": res.with_errors,
        "scan_failed": res.scan_failed,
        "duplicates": res.duplicates,
        "bytes_read": res.bytes_read,
        "files": len(res.written),
        "removed": len(res.removed),
        "idle_io": idle,
        "drop_cache": not args.keep_cache,
        "bytes_per_second": args.rate,
    }
    if tracker is not None:
        summary["state"] = {
            "directory": args.state,
            "resumed_pass": tracker.resumed,
            "not_read_unchanged": tracker.carried,
            "recorded": tracker.recorded,
            "resumed_blocks": tracker.resumed_blocks,
        }
    cheap = args.trees_only or args.metadata_only
    summary["data_read"] = not cheap  # a census or trees-only pass says so (issue 36)
    if cheap:
        from merkle.replica.census import NO_DATA_READ

        summary["compared"] = NO_DATA_READ[args.trees_only]
    if args.json:
        json.dump(
            redact_json(
                {
                    "volumes": res.volumes,
                    "written": res.written,
                    "removed": res.removed,
                    "failed": res.failures,
                    "summary": summary,
                }
            ),
            sys.stdout,
            indent=1,
        )
        sys.stdout.write("\n")
    else:
        print(
            f"emitted {res.replicas} replicas of {len(res.volumes)} volume(s) as host "
            f"{one_line(host)} to {one_line(where)}: {len(res.written)} file(s) in "
            f"chunks/, blocks/, containers/, errors/, volumes/ (datanode=<id>/"
            f"{res.written[0].rsplit('/', 1)[-1] if res.written else '-'} ...)"
            + (f", {len(res.removed)} earlier file(s) of this host removed" if res.removed else "")
            + f"; {res.with_errors} with errors"
            + (f", {res.duplicates} duplicate replica(s)" if res.duplicates else "")
            + (f", {res.scan_failed} not scanned" if res.scan_failed else "")
        )
        if cheap:
            print(f"no data read: {summary['compared']}")
        if tracker is not None:
            print(
                f"state {one_line(args.state)}: {tracker.carried} replicas emitted from their "
                f"records (unchanged, verified "
                + ("in the pass in progress" if args.max_age is None else "within --max-age")
                + f"), {tracker.recorded} read and recorded"
            )
    if res.failures or failed_volumes or res.scan_failed:
        return EXIT_ERROR
    if not res.volumes:
        raise CLIError(f"no volume found under {', '.join(args.paths)}", EXIT_ERROR)
    return EXIT_FINDINGS if (res.with_errors or res.duplicates) else 0
