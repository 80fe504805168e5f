"""`crcmerkle scan BOOKIE_DIR... --ledger-metadata PATH | --zookeeper HOST:PORT[/root]`:
verify BookKeeper bookies.

Reached from `crcmerkle scan` when --ledger-metadata or --zookeeper is given
(merkle.cli.scan.run): each BOOKIE_DIR is a bookie's ledger directory or a directory above
ledger directories; the ledger metadata is read from PATH (dump files or a copy of the znode
tree) or from a live ZooKeeper, read-only. Every finding is one line
(text) or one object (JSON) naming bookie, ledger, entry, file and offset; exit 0 clean, 1
findings, 2 when a path or the metadata could not be read.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from merkle.cli import EXIT_ERROR, EXIT_FINDINGS, PROG, CLIError, print_error, redact_json
from merkle.messages import one_line

__all__ = [
    "MetadataSource",
    "bookie_source",
    "bookies_status",
    "ledger_line",
    "log_states",
    "metadata_source",
    "pacer",
    "print_finding_lines",
    "run_bookkeeper",
]

#: scan options that read what only Ozone's and crcmerkle's replicas have
_NOT_FOR_BOOKIES = (("trees_only", "--trees-only"),)


def ledger_line(info: Dict[str, Any]) -> str:
    """A ledger's summary line; a census's (`census`) counts indexed copies, never good ones."""
    census = bool(info.get("census"))
    kind = "indexed" if census else "good"
    counts = ", ".join(
        f"{n} on {c} entr{'y' if c == 1 else 'ies'}"
        for n, c in sorted(info[f"{kind}_copies"].items(), key=lambda kv: -int(kv[0]))
    )
    below = info["below_ack_quorum"]
    none = info[f"without_{kind}_copy"]
    head = (
        f"ledger {info['ledger']} ({info['state']}, {info['digest_type'] or 'digest unknown'}"
        f", E{info['ensemble_size']}/W{info['write_quorum']}/A{info['ack_quorum']}): "
        f"entries 0..{info['checked_up_to']}, {kind} copies: {counts or 'none'}"
        + (" (census: none verified)" if census else "")
    )
    if below:
        head += (
            f"; below ackQuorum {info['ack_quorum']}: "
            f"{', '.join(map(str, below[:20]))}{' ...' if len(below) > 20 else ''}"
        )
    if none:
        more = " ..." if len(none) > 20 else ""
        head += f"; NO {kind} copy: {', '.join(map(str, none[:20]))}{more}"
    return head


@dataclass
class MetadataSource:
    """The ledger metadata and what the store says of the cluster, from files or ZooKeeper."""

    ledgers: Dict[int, Any]
    instance_id: Optional[str]
    cookies: Optional[Dict[str, bytes]]
    unread: Dict[int, str] = field(default_factory=dict)
    complete: bool = True
    problems: List[str] = field(default_factory=list)


def _from_zookeeper(spec: str) -> MetadataSource:
    """Every ledger's metadata from a live ZooKeeper (read-only). A ledger znode that does
    not parse is one problem line and counts as unread: its stored entries are reported as
    not verified, never as garbage."""
    from merkle.replica.bookkeeper.metadata import MetadataError, parse_ledger_metadata
    from merkle.replica.bookkeeper.zkmeta import ZooKeeperError, read_zookeeper_metadata

    try:
        zk = read_zookeeper_metadata(spec)
    except ZooKeeperError as exc:
        raise CLIError(one_line(str(exc)), EXIT_ERROR) from None
    source = MetadataSource(
        {},
        zk.instance_id,
        {b: c.data for b, c in zk.cookies.items()},
        dict(zk.unread),
        zk.complete,
        list(zk.problems),
    )
    for lid, data in sorted(zk.ledgers.items()):
        try:
            source.ledgers[lid] = parse_ledger_metadata(data, lid)
        except MetadataError as exc:
            source.unread[lid] = one_line(str(exc))
            source.problems.append(f"ledger {lid}: {one_line(str(exc))}")
    return source


def metadata_source(ledger_metadata: Optional[str], zookeeper: Optional[str]) -> MetadataSource:
    """The ledger metadata from --ledger-metadata PATH or --zookeeper HOST:PORT[/root] (one of
    them), or a one-line CLIError (exit 2): `crcmerkle scan` and `crcmerkle spark` read it
    alike."""
    from merkle.replica.bookkeeper.metadata import (
        MetadataError,
        load_instance_id,
        load_ledger_metadata,
        load_registered_cookies,
    )

    if zookeeper is not None and ledger_metadata is not None:
        raise CLIError(
            "--ledger-metadata and --zookeeper: give one source of the ledger metadata", EXIT_ERROR
        )
    if zookeeper is not None:
        return _from_zookeeper(zookeeper)
    if ledger_metadata is None:
        raise CLIError("bookies need --ledger-metadata PATH or --zookeeper HOST:PORT", EXIT_ERROR)
    try:
        return MetadataSource(
            load_ledger_metadata(ledger_metadata),
            load_instance_id(ledger_metadata),
            load_registered_cookies(ledger_metadata),
        )
    except FileNotFoundError as exc:
        raise CLIError(
            f"--ledger-metadata {ledger_metadata}: {exc.strerror or exc}", EXIT_ERROR
        ) from None
    except (MetadataError, OSError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise CLIError(f"--ledger-metadata: {one_line(why)}", EXIT_ERROR) from None


def bookies_status(
    *,
    errors: int,
    failed: int,
    bookies: int,
    copies: int,
    verified: int,
    problems: int,
    paths: List[str],
    census: bool = False,
) -> int:
    """The exit status of a bookie scan: 2 when a path could not be read, no bookie was
    found, or (no error found) no stored copy was verified; 1 on errors or metadata
    problems; else 0. A CLIError (exit 2) says why nothing is proved."""
    if failed:
        return EXIT_ERROR
    if not bookies:
        raise CLIError(f"no bookie found under {', '.join(paths)}", EXIT_ERROR)
    if not errors and not verified:
        # nothing compared is no proof: the metadata names none of the ledgers stored here
        # (another cluster's dumps, a wrong root) or the bookies hold no entry at all
        what = "placed by its index (census)" if census else "verified"
        raise CLIError(
            f"no stored entry copy was {what} ({copies} found, none of "
            f"a ledger the metadata has): nothing is proved",
            EXIT_ERROR,
        )
    # a metadata store that lied or could not be read whole is a finding too
    return EXIT_FINDINGS if errors or problems else 0


def print_finding_lines(findings: Any) -> None:
    """Each finding's text line, `error: ` or `warning: ` first."""
    for f in findings:
        prefix = "warning: " if f.severity == "warning" else "error: "
        print(one_line(prefix + f.line()))


def bookie_source(args: argparse.Namespace) -> MetadataSource:
    """The options a bookie scan does not take refused in one line, then the ledger
    metadata (metadata_source), each problem of its store one line on stderr."""
    for dest, flag in _NOT_FOR_BOOKIES:
        if getattr(args, dest, None):
            raise CLIError(
                f"{flag} is not for BookKeeper bookies (--ledger-metadata, --zookeeper)", EXIT_ERROR
            )
    source = metadata_source(args.ledger_metadata, args.zookeeper)
    for problem in source.problems:
        print_error(one_line(f"--zookeeper: {problem}"))
    return source


def run_bookkeeper(args: argparse.Namespace) -> int:
    """The one-shot scan of bookies (the module docstring); `--loop` is
    merkle.cli.bookkeeper.loop's."""
    from merkle.replica.bookkeeper.scan import scan_bookies
    from merkle.replica.levels import counts_as_failure

    source = bookie_source(args)
    census = bool(getattr(args, "metadata_only", False))
    if getattr(args, "emit", None):
        if census:
            raise CLIError(
                "--metadata-only with --emit: a host emits verified copies for `spark report`;"
                " run the census without --emit",
                EXIT_ERROR,
            )
        return _emit(args, source)
    t0 = time.perf_counter()
    states = log_states(args)
    try:
        report = scan_bookies(
            args.paths,
            source.ledgers,
            instance_id=source.instance_id,
            registered_cookies=source.cookies,
            unread=source.unread,
            metadata_complete=source.complete,
            also=tuple(args.also or ()),
            metadata_only=census,
            states=states,
            pace=pacer(getattr(args, "rate", None)),
        )
    finally:
        if states is not None:
            states.state.close()
    seconds = time.perf_counter() - t0
    # a census's placed copies of the ledgers the metadata has (`spark scan` counts the same)
    indexed = report.copies.count("indexed", ledgers=source.ledgers)
    errors = [f for f in report.findings if counts_as_failure(f.severity, args.strict)]
    warnings = [f for f in report.findings if f.severity == "warning"]
    summary = {
        "bookies": len(report.bookies),
        "ledger_dirs": sum(len(v) for v in report.bookies.values()),
        "ledgers": len(report.ledgers),
        "copies": len(report.copies),
        "good_copies": report.copies.count("good"),
        "census": census,
        "indexed_copies": indexed,
        "errors": len(report.findings) - len(warnings),
        "warnings": len(warnings),
        "failed": len(report.failed),
        "bytes_read": report.bytes_read,
        "seconds": round(seconds, 6),
        "strict": args.strict,
    }
    if states is not None:  # --state: the entry logs read now, and those a record gave
        summary.update(
            logs_read=states.read,
            logs_not_read=states.carried_logs,
            resumed_pass=states.resumed,
        )
    if args.json:
        json.dump(
            redact_json(
                {
                    "bookies": report.bookies,
                    "findings": [f.to_dict() for f in report.findings],
                    "ledgers": report.ledgers,
                    "failed": report.failed,
                    "metadata_problems": source.problems,
                    "summary": summary,
                }
            ),
            sys.stdout,
            indent=1,
        )
        sys.stdout.write("\n")
    else:
        print_finding_lines(report.findings)
        for info in report.ledgers:
            print(ledger_line(info))
        for failure in report.failed:
            print_error(one_line(failure["error"]))
        print(
            f"scanned {summary['bookies']} bookies ({summary['ledger_dirs']} ledger "
            f"directories), {summary['copies']} entry copies "
            + (
                f"({summary['indexed_copies']} placed by their indexes; census: no entry read,"
                f" none verified), "
                if census
                else f"({summary['good_copies']} good), "
            )
            + f"{report.bytes_read} bytes in {seconds:.2f} s: {summary['errors']} errors, "
            f"{summary['warnings']} warnings"
            + (f", {len(report.failed)} paths not scanned" if report.failed else "")
        )
    if states is not None and getattr(args, "metrics_file", None):
        # after the findings are out, as on datanodes: a file not written is exit 2
        write_bookie_metrics(args.metrics_file, report, states)
    return bookies_status(
        errors=len(errors),
        failed=len(report.failed),
        bookies=len(report.bookies),
        copies=len(report.copies),
        verified=indexed if census else report.copies.count("verified"),
        problems=len(source.problems),
        paths=args.paths,
        census=census,
    )


#: --state's companions that a bookie scan does not take (dest, flag, why)
_STATE_NOT_FOR_BOOKIES = (
    ("checkpoint_seconds", "--checkpoint-seconds", "an entry log is the unit a rerun resumes at"),
    (
        "emit_every",
        "--emit-every",
        "a host's rows are written at each pass's end, when its storages are all verified",
    ),
)


def pacer(rate: Optional[float], stop: Any = None) -> Any:
    """ScanReport.pace for --bytes-per-second (merkle.replica.results.volume_pace: each
    ledger directory at the rate) and the --loop service's `stop` (an Event:
    scanloop.Stopped raised at the next read once set); None when neither is given."""
    if not rate and stop is None:
        return None
    from merkle.replica.results import volume_pace

    paced = volume_pace(rate) if rate else None

    def pace(volume: str, nbytes: int) -> None:
        if stop is not None and stop.is_set():
            from merkle.cli.scanloop import Stopped

            raise Stopped()
        if paced is not None:
            paced(volume, nbytes)

    return pace


def write_bookie_metrics(path: str, report: Any, states: Any) -> None:
    """--metrics-file on bookies: the scan's figures (merkle.cli.metrics) per ledger
    directory; a file that cannot be written is a CLIError (exit 2)."""
    from merkle.cli.metrics import findings_registry, write_metrics_file

    write_metrics_file(path, findings_registry(report.findings, len(report.failed), states))


def log_states(args: argparse.Namespace) -> Any:
    """--state DIR [--max-age D] on bookies: the LogStates of this host's scan (its database
    checked and opened: one line and exit 2 when it cannot be trusted), or None."""
    if not getattr(args, "state", None):
        return None
    for dest, flag, why in _STATE_NOT_FOR_BOOKIES:
        if getattr(args, dest, None):
            raise CLIError(f"{flag} is not taken on BookKeeper bookies ({why})", EXIT_ERROR)
    from merkle.replica.bookkeeper.state import LogStates
    from merkle.replica.scanstate import ScanState, StateError

    def warn(line: str) -> None:
        print(f"{PROG}: warning: {one_line(line)}", file=sys.stderr, flush=True)

    try:
        return LogStates(ScanState(args.state, list(args.paths), warn), args.max_age)
    except StateError as exc:
        raise CLIError(str(exc), EXIT_ERROR) from None


def _emit(args: argparse.Namespace, source: MetadataSource) -> int:
    """`crcmerkle scan BOOKIE_DIR... --ledger-metadata PATH --emit URI`: this host's part of
    the scan written under URI (spark_udfs.jobs.bookkeeper.emit), for `crcmerkle spark
    report URI` to judge with the other hosts'. Exit 0 every copy good, 1 a copy or a
    directory with a finding, 2 a path not read, the output not written, or (no finding)
    no stored copy verified: nothing is proved here, though the rows are written (a bookie
    that holds nothing is for the report to judge)."""
    try:
        from merkle.cli.emit import emit_host
        from merkle.replica.uri import display
        from spark_udfs.jobs.bookkeeper.emit import EMIT_TABLE, emit_bookies
    except ImportError as exc:  # pyarrow missing: one line
        raise CLIError(f"--emit needs pyarrow ({exc})", EXIT_ERROR) from None
    host = emit_host(args)
    where = display(args.emit)
    states = log_states(args)
    try:
        res = emit_bookies(
            args.paths,
            args.emit,
            host,
            source.ledgers,
            instance_id=source.instance_id,
            registered_cookies=source.cookies,
            also=tuple(args.also or ()),
            states=states,
            pace=pacer(getattr(args, "rate", None)),
        )
    except (OSError, ValueError) as exc:
        raise CLIError(one_line(f"--emit {where}: {exc}"), EXIT_ERROR) from None
    finally:
        if states is not None:
            states.state.close()
    summary = {
        "host": host,
        "emit": where,
        "bookies": sorted(set(res.bookies)),
        "ledger_dirs": res.directories,
        "failed_dirs": res.failed_directories,
        "copies": res.copies,
        "verified_copies": res.verified,
        "good_copies": res.good_copies,
        "findings": res.findings,
        "bytes_read": res.bytes_read,
        "files": len(res.written),
        "removed": len(res.removed),
    }
    if args.json:
        doc = {"written": res.written, "removed": res.removed, "failed": res.failed}
        json.dump(redact_json(dict(doc, summary=summary)), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        for line in res.failed:
            print_error(one_line(line))
        print(
            f"emitted {len(set(res.bookies))} bookies ({res.directories} ledger directories), "
            f"{res.copies} entry copies ({res.good_copies} good) as host {one_line(host)} to "
            f"{one_line(where)}/{EMIT_TABLE}/: {res.findings} findings so far (the copies are "
            f"judged with the other bookies' by `crcmerkle spark report {one_line(where)}`)"
            + (f"; {len(res.removed)} earlier file(s) of this host removed" if res.removed else "")
        )
    if res.failed or res.failed_directories:
        return EXIT_ERROR
    if not res.bookies:
        raise CLIError(f"no bookie found under {', '.join(args.paths)}", EXIT_ERROR)
    if res.findings or res.good_copies < res.copies:
        return EXIT_FINDINGS
    if not res.verified:  # as bookies_status: nothing compared is no proof
        raise CLIError(
            f"no stored entry copy was verified ({res.copies} found, none of a ledger the "
            f"metadata has): nothing is proved here (the rows are written for `crcmerkle "
            f"spark report`)",
            EXIT_ERROR,
        )
    return 0


def generator_fault_types() -> List[str]:
    """The faults `crcmerkle generate --layout bookkeeper` injects (for generate's help)."""
    from merkle.replica.bookkeeper.generate import FAULT_TYPES

    return list(FAULT_TYPES)


def run_generate(args: argparse.Namespace) -> int:
    """`crcmerkle generate OUT --layout bookkeeper`: bookies, their ledger metadata and the
    manifest (merkle.replica.bookkeeper.generate)."""
    from merkle.replica.bookkeeper.generate import (
        BookKeeperGeneratorConfig,
        generate_bookies,
        parse_faults,
    )
    from merkle.replica.synth import GeneratorError

    for dest, flag in (("containers", "--containers"), ("mount_path", "--mount-path")):
        if getattr(args, dest, None) is not None:
            raise CLIError(f"{flag} is not for --layout bookkeeper", EXIT_ERROR)
    if args.om_db:
        raise CLIError("--om-db is not for --layout bookkeeper", EXIT_ERROR)
    try:
        cfg = BookKeeperGeneratorConfig(
            bookies=args.bookies,
            ledger_dirs=args.ledger_dirs,
            storage=args.storage,
            ledgers=args.ledgers,
            min_entries=args.entries[0],
            max_entries=args.entries[1],
            min_entry_size=args.entry_size[0],
            max_entry_size=args.entry_size[1],
            ensemble=args.quorum[0],
            write_quorum=args.quorum[1],
            ack_quorum=args.quorum[2],
            log_size_limit=args.log_size,
            faults=parse_faults(args.faults),
            seed=args.seed,
        )
        manifest = generate_bookies(args.out, cfg)
    except GeneratorError as exc:
        raise CLIError(one_line(str(exc)), EXIT_ERROR) from None
    if args.json:
        json.dump(manifest, sys.stdout, indent=1, sort_keys=True)
        sys.stdout.write("\n")
    else:
        print(
            f"wrote {args.out}: {len(manifest['bookies'])} bookies, "
            f"{len(manifest['ledgers'])} ledgers, {manifest['copies']} entry copies; "
            f"{len(manifest['faults'])} faults ({len(manifest['expected_findings'])} expected "
            f"findings); metadata {args.out}/{manifest['metadata']['znode_tree']} (znode tree) "
            f"and {args.out}/{manifest['metadata']['dumps']} (dump files); manifest "
            f"{args.out}/manifest.json"
        )
    return 0
