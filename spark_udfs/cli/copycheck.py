"""`crcmerkle spark copycheck --om-db CHECKPOINT --scan SCAN --target URI -o OUT`: Ozone keys
against their copies (S3, GCS, HDFS listings, a directory) from stored checksums
(spark_udfs.jobs.copycheck).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import Any, Tuple

from merkle.cli import EXIT_ERROR, EXIT_FINDINGS, CLIError, positive_int
from spark_udfs.cli import common
from spark_udfs.cli.common import (
    _check_paths,
    _guarded,
    _load_chunks,
    _not_scanned,
    _progress,
    _read_inventory,
    _write_file,
)
from spark_udfs.cli.options import _common

COPYCHECK_DESCRIPTION = (
    "Every key of an OM DB checkpoint against its copy in a target, by name, proved from the "
    "checksums both sides already store: the key's full-object CRC is composed from the "
    "window checksums its datanodes recorded (taken from a replica the scan verified), the "
    "copy's from what the store keeps (S3 CRC32/CRC32C/CRC64NVME, full-object or composite "
    "with its parts; GCS crc32c; HDFS COMPOSITE-CRC). Verdicts: MATCH, MISMATCH, MISSING, "
    "EXTRA, SIZE_DIFFERS, NOT_COMPARABLE (no algorithm in common: which, and why) and "
    "UNVERIFIED (the source cannot be vouched for: why). Ozone CRC32 keys compare with CRC32 "
    "copies, CRC32C keys with CRC32C ones; any other algorithm needs the scan to have "
    "recorded it (crcmerkle spark scan --also crc64nvme|crc32c|crc32). Exit 0: every key "
    "MATCHes (and nothing is EXTRA, unless --allow); 1: findings; 2: bad input."
)


def add_parser(sub: Any) -> None:
    """`crcmerkle spark copycheck`, added to `crcmerkle spark`'s subcommands."""
    c = sub.add_parser(
        "copycheck",
        help="prove Ozone keys' copies in S3, GCS, HDFS or a "
        "directory from stored checksums (no data read)",
        description=COPYCHECK_DESCRIPTION,
    )
    c.add_argument(
        "--om-db",
        required=True,
        metavar="CHECKPOINT",
        help="a copy or checkpoint of the OM's om.db (opened read-only through a private snapshot)",
    )
    c.add_argument(
        "--scan",
        required=True,
        metavar="SCAN_OUTPUT",
        help="the output directory of 'crcmerkle spark scan' of the datanodes "
        "(its chunks, blocks and containers tables)",
    )
    c.add_argument(
        "--target",
        required=True,
        metavar="URI",
        help="s3://bucket/prefix[?endpoint_override=HOST:PORT&scheme=http&region=R], "
        "gs://bucket/prefix?listing=FILE, hdfs://nn/path?listing=FILE, or a "
        "local directory (the only target whose data is read: each copy whose key "
        "has its name and size, in full)",
    )
    c.add_argument(
        "--map",
        action="append",
        default=[],
        metavar="SOURCE_PREFIX=TARGET_PREFIX",
        help="name the copy of /volume/bucket/key: the longest matching source "
        "prefix replaced by the target prefix (repeatable; with --map, keys "
        "and objects under none of the prefixes are not compared; default: a "
        "key's copy is named volume/bucket/key under the target)",
    )
    c.add_argument(
        "-o",
        "--output",
        required=True,
        help="a new directory: keys/, key_blocks/, target_listing/, verdicts/ "
        "(Parquet) and report.json",
    )
    c.add_argument("--json", action="store_true", help="print the report as JSON")
    c.add_argument(
        "--first", type=positive_int, default=20, help="names listed per verdict (default 20)"
    )
    c.add_argument(
        "--allow",
        default="",
        metavar="VERDICT[,VERDICT...]",
        help="verdicts that do not count as findings for the exit status (e.g. "
        "EXTRA when the target holds more than the keys checked)",
    )
    c.add_argument(
        "--datanodes",
        metavar="FILE",
        help="the inventory of hosts (`ozone admin datanode list --json`, or a JSON "
        "list of {host, uuid, volumes}): only a replica on a volume it gives "
        "the replica's host vouches for a block",
    )
    c.add_argument(
        "--ozone-conf",
        metavar="FILE",
        help="with --datanodes: an ozone-site.xml whose hdds.datanode.dir gives the hosts' volumes",
    )
    _common(c)
    c.set_defaults(func=_guarded(_not_scanned(_copycheck)))


def _copycheck(args: argparse.Namespace) -> int:
    from merkle.cli import one_line
    from merkle.copies.keymap import parse_map
    from merkle.copies.verdicts import VERDICTS

    allowed = tuple(v.strip().upper() for v in args.allow.split(",") if v.strip())
    bad = [v for v in allowed if v not in VERDICTS]
    if bad:
        raise CLIError(f"--allow {bad[0]}: one of {', '.join(VERDICTS)}", EXIT_ERROR)
    try:
        names = parse_map(args.map)
    except ValueError as exc:
        raise CLIError(str(exc), EXIT_ERROR) from None
    _check_paths([args.om_db, args.scan])
    out = args.output
    if os.path.lexists(out) and (not os.path.isdir(out) or os.path.islink(out) or os.listdir(out)):
        raise CLIError(
            f"{out}: exists and is not an empty directory (give -o a new one)", EXIT_ERROR
        )
    # what a user can get wrong is found before the JVM starts: each costs nothing
    try:  # the target's URI, and that it is there (directory, listing file, boto3)
        from merkle.copies.targets import TargetError, open_target

        open_target(args.target).preflight()
    except (ValueError, TargetError) as exc:
        raise CLIError(f"--target: {one_line(str(exc))}", EXIT_ERROR) from None
    _check_scan_output(args.scan)
    inventory = _read_inventory(args)
    created = not os.path.lexists(out)
    ok = False
    try:
        rc = _copycheck_into(args, out, names, allowed, inventory)
        ok = True
        return rc
    finally:
        if not ok:  # a failed check leaves no partial output (a later run may reuse -o)
            _remove_output(out, created)


def _check_scan_output(scan: str) -> None:
    """--scan names a scan's output holding at least one replica (a local directory; a URI
    is read by Spark as it is): one line, before the JVM starts, when it does not."""
    if "://" in scan:
        return
    tables = ("chunks", "blocks", "containers")
    missing = [n for n in tables if not os.path.isdir(os.path.join(scan, n))]
    if not os.path.isdir(scan) or missing:
        raise CLIError(
            f"{scan}: not a scan's output (no {', '.join(missing or tables)} "
            "table): give the -o directory of 'crcmerkle spark scan'",
            EXIT_ERROR,
        )
    if not _has_rows(os.path.join(scan, "containers")):
        raise CLIError(
            f"{scan}: the scan's output holds no replica (an empty scan: nothing "
            "can vouch for a key)",
            EXIT_ERROR,
        )


def _has_rows(table: str, limit: int = 100_000) -> bool:
    """Whether a Parquet table directory (partitioned or not) holds a row: file footers
    only, stopping at the first file with rows; at most `limit` entries are looked at."""
    import pyarrow.parquet as pq

    seen = 0
    for where, dirs, files in os.walk(table):
        dirs.sort()
        for f in sorted(files):
            seen += 1
            if seen > limit:
                return True  # too many to look at: let the job read them
            if not f.endswith(".parquet"):
                continue
            try:
                if pq.ParquetFile(os.path.join(where, f)).metadata.num_rows > 0:
                    return True
            except Exception as exc:  # noqa: BLE001  pyarrow raises several kinds
                from merkle.cli import one_line

                raise CLIError(
                    f"{os.path.join(where, f)}: not a Parquet file of a scan "
                    f"({one_line(str(exc))[:200]})",
                    EXIT_ERROR,
                ) from None
    return False


def _remove_output(out: str, created: bool) -> None:
    """Remove what a failed copy check wrote in `out` (the directory itself if it made it)."""
    import shutil

    if created:
        shutil.rmtree(out, ignore_errors=True)
        return
    try:
        entries = os.listdir(out)
    except OSError:
        return
    for name in entries:
        path = os.path.join(out, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(path)


def _copycheck_into(
    args: argparse.Namespace, out: str, names: Any, allowed: Tuple[str, ...], inventory: Any
) -> int:
    """The copy check proper, writing into `out`: the key map (before the JVM starts: a
    --map that names no key costs nothing), then the job and the report."""
    from merkle.cli import one_line
    from merkle.copies.omdb import OmDBError
    from merkle.copies.report import format_text, to_json
    from merkle.copies.targets import TargetError
    from merkle.replica.uri import display as show_uri
    from spark_udfs.jobs.copycheck import write_key_map

    os.makedirs(out, exist_ok=True)
    try:
        key_map = write_key_map(args.om_db, out, names)
    except OmDBError as exc:
        raise CLIError(f"--om-db: {one_line(str(exc))}", EXIT_ERROR) from None
    problem = key_map.stats.problem()
    if problem is not None:
        raise CLIError(problem, EXIT_ERROR)
    spark = common._session(args)
    t = _load_chunks(spark, args.scan)
    missing = [n for n in ("chunks", "blocks", "containers") if t.get(n) is None]
    if missing:
        raise CLIError(
            f"{args.scan}: not a scan output directory (no {', '.join(missing)} table)", EXIT_ERROR
        )
    from spark_udfs.jobs.copycheck import copycheck

    # what it is doing, on a terminal only (as the stage display): never mixed into an error
    say = (
        (lambda m: print(f"crcmerkle: {m}", file=sys.stderr))
        if not args.json and sys.stderr.isatty()
        else (lambda m: None)
    )
    try:
        with _progress(args, spark, "copycheck"):
            res = copycheck(
                spark,
                args.om_db,
                t,
                args.target,
                out,
                names=names,
                first=args.first,
                say=say,
                key_map=key_map,
                inventory=inventory,
            )
    except (OmDBError, TargetError, ValueError) as exc:
        raise CLIError(one_line(str(exc)), EXIT_ERROR) from None
    objects = max(res.objects, 1)
    report = {
        "om_db": os.path.abspath(args.om_db),
        "scan": show_uri(args.scan),
        "target": res.target,
        "keys": res.keys,
        "out_of_scope_keys": res.out_of_scope_keys,
        "objects": res.objects,
        "out_of_scope_objects": res.out_of_scope_objects,
        "counts": res.counts,
        "findings": res.findings(allowed),
        "allowed": list(allowed),
        "reads_data": res.reads_data,
        "inventory": os.path.abspath(args.datanodes) if args.datanodes else None,
        "cost": {
            "bytes_read": res.bytes_read,
            "list_requests": res.list_requests,
            "object_requests": res.object_requests,
            "max_requests_per_object": res.max_requests_per_object,
            "requests_per_object": (res.object_requests + res.list_requests) / objects,
        },
        "om_problem_count": res.om_problem_count,
        "om_problems": res.om_problems,
        "first": res.first,
        "verdicts": os.path.abspath(os.path.join(out, "verdicts")),
        "block_sources": os.path.abspath(os.path.join(out, "block_sources")),
    }
    _write_file(os.path.join(out, "report.json"), to_json(report).encode())
    sys.stdout.write(to_json(report) if args.json else format_text(report))
    sys.stdout.flush()
    return EXIT_FINDINGS if report["findings"] else 0
