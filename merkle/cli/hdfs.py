"""`crcmerkle scan DATA_DIR... [--fsck FILE] [--json]` on HDFS datanode storage directories
(merkle.replica.hdfs.scan): one line per finding, one summary line; exit 0 clean, 1
findings (errors; warnings too with --strict), 2 a PATH not read or nothing verified."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, Dict

from merkle.cli import EXIT_ERROR, EXIT_FINDINGS, CLIError, print_error, redact_json
from merkle.messages import one_line

__all__ = ["is_hdfs_scan", "run_hdfs"]

#: the scan's options an HDFS scan does not take (dest, flag, its unset value, why)
_NOT_FOR_HDFS = (
    ("trees_only", "--trees-only", False, "a datanode keeps no tree"),
    ("metadata_only", "--metadata-only", False, "a block's only metadata is its stored CRCs"),
    ("state", "--state", None, "the HDFS layout keeps no scan state"),
    ("max_age", "--max-age", None, "the HDFS layout keeps no scan state"),
    ("loop", "--loop", False, "the HDFS layout keeps no scan state"),
    ("emit", "--emit", None, "the HDFS layout writes no Spark scan tables"),
    ("also", "--also", None, "the HDFS layout computes no other CRCs"),
    ("ledger_metadata", "--ledger-metadata", None, "that is a BookKeeper option"),
    ("zookeeper", "--zookeeper", None, "that is a BookKeeper option"),
    ("metrics_file", "--metrics-file", None, "the HDFS layout keeps no scan state"),
)


def is_hdfs_scan(args: argparse.Namespace) -> bool:
    """`--fsck` given, or every PATH an HDFS datanode storage directory (or a directory
    holding some): the scan is an HDFS one."""
    from merkle.replica.hdfs.storage import find_data_dirs

    if getattr(args, "fsck", None) is not None:
        return True
    return bool(args.paths) and all("://" not in p and bool(find_data_dirs(p)) for p in args.paths)


def run_hdfs(args: argparse.Namespace) -> int:
    from merkle.replica.hdfs.fsck import FsckError, read_fsck
    from merkle.replica.hdfs.scan import scan_datanodes
    from merkle.replica.levels import WARNING, counts_as_failure

    for dest, flag, unset, why in _NOT_FOR_HDFS:
        if getattr(args, dest, unset) not in (unset, [], ()):
            raise CLIError(f"{flag} is not taken on HDFS datanodes ({why})", EXIT_ERROR)
    fsck = None
    if args.fsck:
        try:
            fsck = read_fsck(args.fsck)
        except FsckError as exc:
            raise CLIError(one_line(str(exc)), EXIT_ERROR) from None
    t0 = time.perf_counter()
    report = scan_datanodes(args.paths, fsck)
    seconds = time.perf_counter() - t0
    errors = [f for f in report.findings if counts_as_failure(f.severity, args.strict)]
    warnings = [f for f in report.findings if f.severity == WARNING]
    verified = sum(r.check.verified for r in report.replicas)
    summary: Dict[str, Any] = {
        "datanodes": len({v.datanode_uuid for v in report.volumes if v.datanode_uuid}),
        "volumes": len(report.volumes),
        "replicas": len(report.replicas),
        "verified_replicas": verified,
        "chunks_verified": report.chunks_verified,
        "errors": len(report.findings) - len(warnings),
        "warnings": len(warnings),
        "failed": len(report.failed),
        "bytes_read": report.bytes_read,
        "seconds": round(seconds, 6),
        "strict": args.strict,
        "fsck": args.fsck is not None,
    }
    for problem in report.fsck_problems:
        print_error(one_line(f"--fsck: {problem}"))
    if args.json:
        doc = {
            "volumes": [
                {
                    "path": v.path,
                    "datanode": v.datanode_uuid,
                    "storage": v.storage_id,
                    "cluster": v.cluster_id,
                    "block_pools": [p.id for p in v.block_pools],
                    "problem": v.problem,
                }
                for v in report.volumes
            ],
            "findings": [f.to_dict() for f in report.findings],
            "failed": report.failed,
            "fsck_problems": report.fsck_problems,
            "summary": summary,
        }
        json.dump(redact_json(doc), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        for f in report.findings:
            prefix = "warning: " if f.severity == WARNING else "error: "
            print(one_line(prefix + f.line()))
        for failure in report.failed:
            print_error(one_line(failure["error"]))
        print(
            f"scanned {summary['volumes']} HDFS volumes of {summary['datanodes']} datanodes: "
            f"{summary['replicas']} replicas ({verified} verified whole), "
            f"{report.chunks_verified} chunks verified, {report.bytes_read} bytes in "
            f"{seconds:.2f} s: {summary['errors']} errors, {summary['warnings']} warnings"
            + (f", {len(report.failed)} paths not scanned" if report.failed else "")
        )
    if report.failed:
        return EXIT_ERROR
    if not report.replicas and not report.findings:
        raise CLIError("no HDFS replica found under the PATHs: nothing is proved", EXIT_ERROR)
    return EXIT_FINDINGS if errors or report.fsck_problems else 0
