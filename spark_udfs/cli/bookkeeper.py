"""`crcmerkle spark scan|report|plan|run` on BookKeeper bookies: `scan BOOKIE_DIR... -o OUT
--ledger-metadata PATH | --zookeeper HOST:PORT[/root]` (spark_udfs.jobs.bookkeeper), `report OUT`,
`plan OUT --decommission BOOKIE[,...]` (spark_udfs.jobs.bookkeeper.plan), `run` = scan + report.

The scan writes OUT/{copies,findings,volumes,ledgers,entries} (Parquet) and OUT/bookkeeper.json (the
bookies, the paths not read, the metadata's problems and the summary counts: what the driver
knows whole); the report reads them back and prints what `crcmerkle scan` prints for the same
bookies: the findings (the first --first of them), the ledgers' lines and the summary, with the
same exit status (merkle.cli.bookkeeper.bookies_status: 0 clean, 1 findings, 2 could not).
The metadata is read, and the bookies listed, before the JVM starts: a bad --ledger-metadata
costs one line and no Spark.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Dict, List, Optional, Tuple

from merkle.cli import EXIT_ERROR, EXIT_FINDINGS, CLIError, print_error, redact_json
from merkle.messages import one_line
from spark_udfs.cli import common
from spark_udfs.cli.common import _check_output, _check_paths, _dir_display, _progress, _write_file
from spark_udfs.uri import child

__all__ = [
    "bookkeeper_opts",
    "is_bookkeeper_output",
    "is_bookkeeper_scan",
    "plan",
    "report",
    "run",
    "scan",
]


#: spark scan/run options for Ozone's replicas only (dest, flag, its unset value); the
#: inventory (--datanodes: bookie hosts and their ledger directories), --no-idle-io and the
#: census (--metadata-only) go with bookies too
_NOT_FOR_BOOKIES: Tuple[Tuple[str, str, Any], ...] = (
    ("ozone_conf", "--ozone-conf", None),
    ("trees_only", "--trees-only", False),
    ("keep_cache", "--keep-cache", False),
    ("decommission", "--decommission", []),
    ("maintenance", "--maintenance", []),
    ("min_read_fraction", "--min-read-fraction", 0.0),
    ("replication", "--replication", 3),
    ("limit", "--limit", 20),
    ("checkpoint_seconds", "--checkpoint-seconds", None),  # a rerun resumes at an entry log
)


#: `spark plan`'s options for Ozone's datanodes only (--decommission is for bookies too)
_PLAN_NOT_FOR_BOOKIES: Tuple[Tuple[str, str, Any], ...] = tuple(
    o for o in _NOT_FOR_BOOKIES if o[0] != "decommission"
) + (
    ("datanodes", "--datanodes", None),
    ("no_idle_io", "--no-idle-io", False),
    ("min_healthy", "--min-healthy", 1),
    ("min_replicas", "--min-replicas", None),
    ("maintenance_min", "--maintenance-min", 1),
)


def _refuse_ozone_options(
    args: argparse.Namespace, options: Tuple[Tuple[str, str, Any], ...] = _NOT_FOR_BOOKIES
) -> None:
    """A replica option given with bookies is one line, exit 2: never silently ignored."""
    for dest, flag, unset in options:
        if getattr(args, dest, unset) != unset:
            raise CLIError(
                f"{flag} is not for BookKeeper bookies (--ledger-metadata, --zookeeper)",
                EXIT_ERROR,
            )


def bookkeeper_opts(p: argparse.ArgumentParser, emitted: bool = False) -> None:
    """--ledger-metadata and --zookeeper: the PATHs are bookies (as in `crcmerkle scan`);
    `emitted` (`spark report`): the input is bookie hosts' emitted rows."""
    what = (
        "the input holds BookKeeper bookie hosts' emitted rows (crcmerkle scan BOOKIE_DIR... "
        "--emit URI), judged against"
        if emitted
        else "the PATHs are BookKeeper bookies:"
    )
    p.add_argument(
        "--ledger-metadata",
        metavar="PATH",
        help=f"{what} their ledger metadata from PATH (dump files or a copy of the znode tree)",
    )
    p.add_argument(
        "--zookeeper",
        metavar="HOST:PORT[/root]",
        help=f"{what} their ledger metadata from a live ZooKeeper (read-only)",
    )


def is_bookkeeper_scan(args: argparse.Namespace) -> bool:
    return (
        getattr(args, "ledger_metadata", None) is not None
        or getattr(args, "zookeeper", None) is not None
    )


def is_bookkeeper_output(location: str) -> bool:
    """Whether a scan directory holds a bookie scan (its META_FILE; local directories) or
    bookie hosts' emitted rows (is_bookkeeper_emit)."""
    from spark_udfs.jobs.bookkeeper import META_FILE

    if is_bookkeeper_emit(location):
        return True
    return "://" not in location and os.path.isfile(os.path.join(location, META_FILE))


def is_bookkeeper_emit(location: str) -> bool:
    """Whether `location` (a directory or URI) holds what `crcmerkle scan BOOKIE_DIR...
    --emit` wrote (its `bookkeeper/` table directory)."""
    from spark_udfs.jobs.bookkeeper.emit import EMIT_TABLE

    if "://" not in location:
        return os.path.isdir(os.path.join(location, EMIT_TABLE))
    try:
        import pyarrow.fs as pafs

        from merkle.replica.uri import Location

        loc = Location.parse(location)
        info = loc.filesystem.get_file_info(loc.path.rstrip("/") + "/" + EMIT_TABLE)
        return bool(info.type == pafs.FileType.Directory)
    except Exception:  # noqa: BLE001 - not reachable or not parsable: not ours to read here
        return False


def _scan_and_write(args: argparse.Namespace) -> Any:
    """Refuse what is not for bookies, read the metadata and list the bookies (no JVM yet),
    then run the job and write OUT's tables and META_FILE. Returns the session."""
    from merkle.cli.bookkeeper import metadata_source
    from merkle.replica.bookkeeper.scan import list_bookies
    from spark_udfs.jobs.bookkeeper import META_FILE, scan_bookkeeper
    from spark_udfs.jobs.bookkeeper.hosts import scan_bookie_hosts

    _refuse_ozone_options(args)
    inventory = common._inventory(args)
    if inventory is not None and args.paths:
        raise CLIError(
            "give the bookies' directories or --datanodes, not both (with an inventory "
            "every host's ledger directories are scanned where they are)",
            EXIT_ERROR,
        )
    if inventory is None and not args.paths:
        raise CLIError(
            "nothing to scan: give the bookies' directories, or --datanodes FILE (the "
            "bookie hosts and their ledger directories)",
            EXIT_ERROR,
        )
    if inventory is None and args.no_idle_io:
        raise CLIError("--no-idle-io goes with --datanodes", EXIT_ERROR)
    census = bool(getattr(args, "metadata_only", False))
    from spark_udfs.cli.options import state_option

    # --state DIR [--max-age D]: each host's entry logs' records on that host
    state = state_option(args, inventory is not None) if hasattr(args, "state") else None
    if inventory is None:
        _check_paths(args.paths)
        _check_output(args.output, args.paths)
    else:  # the ledger directories of every host (a local -o inside one is on its disk too)
        _check_output(args.output, sorted({v for h in inventory.hosts for v in h.volumes}))
    source = metadata_source(args.ledger_metadata, args.zookeeper)
    for problem in source.problems:
        print_error(one_line(f"--zookeeper: {problem}"))
    if inventory is not None:
        spark = common._session(args, locality=True)
        with _progress(args, spark, "scan"):
            tables = scan_bookie_hosts(
                spark,
                inventory,
                source.ledgers,
                instance_id=source.instance_id,
                registered_cookies=source.cookies,
                unread=source.unread,
                metadata_complete=source.complete,
                idle_io=not args.no_idle_io,
                executor_wait=max(0.0, args.executor_wait),
                also=tuple(args.also or ()),
                metadata_only=census,
                state=state,
                bytes_per_second=_rate(args, inventory=True),
            )
            tables.write(args.output)
        meta = tables.document([], source.problems)
        meta["inventory"] = [h.host for h in inventory.hosts]
        data = json.dumps(redact_json(meta), indent=1, sort_keys=True).encode()
        _write_file(child(args.output, META_FILE), data, label="-o ")
        return spark
    listing = list_bookies(
        args.paths, instance_id=source.instance_id, registered_cookies=source.cookies
    )
    spark = common._session(args)
    with _progress(args, spark, "scan"):
        tables = scan_bookkeeper(
            spark,
            listing,
            source.ledgers,
            unread=source.unread,
            metadata_complete=source.complete,
            also=tuple(args.also or ()),
            metadata_only=census,
            bytes_per_second=_rate(args, inventory=False),
        )
        tables.write(args.output)
    meta = tables.document(list(args.paths), source.problems)
    data = json.dumps(redact_json(meta), indent=1, sort_keys=True).encode()
    _write_file(child(args.output, META_FILE), data, label="-o ")
    return spark


def _rate(args: argparse.Namespace, inventory: bool) -> Optional[float]:
    """Each ledger directory's read rate: --bytes-per-second, with an inventory (live
    bookies) the datanodes' polite default when not given, as `spark scan` reads datanode
    volumes; None (0 given, or no inventory and none given): unlimited."""
    from merkle.replica.politeio import DEFAULT_BYTES_PER_SECOND

    given = getattr(args, "bytes_per_second", None)
    rate = DEFAULT_BYTES_PER_SECOND if given is None and inventory else given
    return float(rate) if rate else None


def _counts(meta: Dict[str, Any], strict: bool) -> Dict[str, int]:
    """The findings, errors and warnings the scan counted (its summary)."""
    s = meta["summary"]
    found, warnings = int(s["findings"]), int(s["warnings"])
    return {"all": found, "errors": found - warnings, "warnings": warnings, "strict": strict}


def scan(args: argparse.Namespace) -> int:
    """`spark scan` on bookies: the tables, one summary line, the exit status."""
    _scan_and_write(args)
    meta = _read_meta(args.output)
    n = _counts(meta, args.strict)
    s = meta["summary"]
    hosts = meta.get("inventory")
    tasks = f"on {len(hosts)} hosts" if hosts else f"{s['tasks']} storages"
    print(
        f"scanned {s['bookies']} bookies ({s['ledger_dirs']} ledger directories, "
        f"{tasks}), {s['copies']} entry copies ({_copies_counted(s)}): "
        f"{n['errors']} errors, {n['warnings']} warnings"
        + (f", {len(meta['failed'])} paths not scanned" if meta["failed"] else "")
        + f"; tables in {_dir_display(args.output)}/{{copies,findings,volumes,ledgers,entries}}"
    )
    return _status(meta, n, args.strict)


def _is_census(summary: Dict[str, Any]) -> bool:
    """Whether a scan's summary is a census's (`--metadata-only`: no copy verified)."""
    return summary.get("census") is True


def _copies_counted(s: Dict[str, Any]) -> str:
    """What the summary line says of the copies: how many are good, or a census's."""
    if _is_census(s):
        return (
            f"{int(s.get('indexed_copies') or 0)} placed by their indexes; "
            f"census: no entry read, none verified"
        )
    return f"{s['good_copies']} good"


def _status(meta: Dict[str, Any], n: Dict[str, int], strict: bool) -> int:
    from merkle.cli.bookkeeper import bookies_status

    s = meta["summary"]
    census = _is_census(s)
    return bookies_status(
        errors=n["all"] if strict else n["errors"],
        failed=len(meta["failed"]),
        bookies=int(s["bookies"]),
        copies=int(s["copies"]),
        verified=int(s["indexed_copies"] if census else s["verified_copies"]),
        problems=len(meta["metadata_problems"]),
        paths=[str(p) for p in meta["paths"]]
        or [f"the inventory's hosts ({', '.join(str(h) for h in meta.get('inventory', [])[:8])})"],
        census=census,
    )


def _read_meta(location: str) -> Dict[str, Any]:
    """META_FILE of a bookie scan, checked for the fields the report uses (a file that was
    edited or is another tool's is one line, exit 2)."""
    from merkle.replica.safeopen import open_dir, read_regular
    from spark_udfs.jobs.bookkeeper import META_FILE, SCAN_FORMAT

    path = os.path.join(location, META_FILE)
    try:
        top = open_dir(location, follow=True)
        try:  # never through a link planted in its place, never larger than 16 MiB
            meta = json.loads(read_regular(top, META_FILE, 16 << 20, display=path))
        finally:
            os.close(top)
        if not isinstance(meta, dict) or meta.get("format") != SCAN_FORMAT:
            raise ValueError(f"not a {SCAN_FORMAT} file")
        summary = meta["summary"]
        for key in (
            "bookies",
            "ledger_dirs",
            "ledgers",
            "copies",
            "good_copies",
            "verified_copies",
            "findings",
            "warnings",
        ):
            int(summary[key])
        if summary.get("census") not in (None, True, False):
            raise ValueError("census is not a boolean")
        if summary.get("census") is True:
            int(summary["indexed_copies"])
        for key in ("failed", "metadata_problems", "paths"):
            if not isinstance(meta[key], list):
                raise ValueError(f"{key} is not a list")
    except OSError as exc:
        raise CLIError(f"{path}: {exc.strerror or exc}", EXIT_ERROR) from None
    except (ValueError, KeyError, TypeError) as exc:
        raise CLIError(
            one_line(f"{path}: not a bookie scan's summary ({exc})"), EXIT_ERROR
        ) from None
    return meta


def _first_findings(findings: Any, first: int) -> List[Any]:
    from merkle.replica.bookkeeper.scan import Finding

    rows = (
        findings.orderBy("bookie", "ledger", "entry", "error", "file", "offset")
        .limit(first)
        .collect()
    )
    return [
        Finding(
            r["error"],
            r["detail"],
            bookie=r["bookie"],
            ledger=r["ledger"],
            entry=r["entry"],
            file=r["file"],
            offset=r["offset"],
            read_at=r["read_at"],
        )
        for r in rows
    ]


#: the entry lists of a ledger's row (one entry ID per item: a ledger may have millions)
_ENTRY_LISTS = ("below_ack_quorum", "without_good_copy", "without_indexed_copy")
#: a ledger row's columns of the data scan and of the census: the other kind's are null
_DATA_ONLY = ("good_copies", "without_good_copy", "without_good_copy_total")
_CENSUS_ONLY = ("census", "indexed_copies", "without_indexed_copy", "without_indexed_copy_total")


def _first_ledgers(ledgers: Any, first: int) -> List[Dict[str, Any]]:
    """The first `first` ledgers' summaries, each entry list cut to its first `first` IDs (at
    least the 21 the text line needs to say "...") with its length as `<list>_total`: what
    reaches the driver is bounded by --first, never by a ledger's entry count. Each row as
    `crcmerkle scan` gives it: a data scan's without the census's columns, and the reverse."""
    from pyspark.sql import functions as F

    keep = max(first, 21)
    cols = [F.col(c) for c in ledgers.columns if c not in _ENTRY_LISTS]
    for c in _ENTRY_LISTS:
        cols += [F.slice(c, 1, keep).alias(c), F.size(c).cast("long").alias(f"{c}_total")]
    rows = ledgers.orderBy("ledger").limit(first).select(*cols).collect()
    out = []
    for r in rows:
        d = r.asDict()
        for key in _DATA_ONLY if d.get("census") is True else _CENSUS_ONLY:
            d.pop(key, None)
        out.append(d)
    return out


def report(args: argparse.Namespace) -> int:
    """`spark report OUT` of a bookie scan: as `crcmerkle scan` prints it."""
    if is_bookkeeper_emit(args.input):
        return _report_emitted(args)
    if is_bookkeeper_scan(args):
        raise CLIError(
            f"{args.input} is a bookie scan: its metadata was read when it was scanned "
            f"(--ledger-metadata and --zookeeper go with emitted rows)",
            EXIT_ERROR,
        )
    if getattr(args, "datanodes", None):
        raise CLIError(
            "--datanodes goes with `spark scan|run` of bookies, and with `spark report` of "
            "their emitted rows (a scan's volumes table says what became of each host)",
            EXIT_ERROR,
        )
    return _report(args)


def _report_emitted(args: argparse.Namespace) -> int:
    """`spark report URI --ledger-metadata PATH | --zookeeper ...` of what bookie hosts
    emitted (`crcmerkle scan BOOKIE_DIR... --emit URI`): their rows judged together, as the
    data-local scan judges its tasks' (judge_hosts), with --datanodes' checks when given;
    printed as `spark report` of a scan prints it. `-o OUT` keeps the tables."""
    from merkle.cli.bookkeeper import metadata_source
    from spark_udfs.jobs.bookkeeper.emit import read_emitted
    from spark_udfs.jobs.bookkeeper.hosts import judge_hosts

    _refuse_ozone_options(args)
    if not is_bookkeeper_scan(args):
        raise CLIError(
            f"{args.input} holds bookie hosts' emitted rows: give their ledger metadata "
            f"(--ledger-metadata PATH or --zookeeper HOST:PORT[/root]) to judge them",
            EXIT_ERROR,
        )
    inventory = common._inventory(args)
    source = metadata_source(args.ledger_metadata, args.zookeeper)
    for problem in source.problems:
        print_error(one_line(f"--zookeeper: {problem}"))
    spark = common._session(args)
    with _progress(args, spark, "report"):
        stage1 = read_emitted(spark, args.input).cache()
        tables = judge_hosts(
            spark,
            stage1,
            source.ledgers,
            spark.sparkContext.broadcast(source.ledgers),
            instance_id=source.instance_id,
            driver_found=[],
            volumes=[],
            tasks=0,
            unread=source.unread,
            metadata_complete=source.complete,
            inventory=inventory,
        )
        out = getattr(args, "output", None)
        if out:
            from spark_udfs.jobs.bookkeeper import META_FILE

            _check_output(out, [args.input])
            tables.write(out)
    meta = tables.document([args.input], source.problems)
    if inventory is not None:
        meta["inventory"] = [h.host for h in inventory.hosts]
    if out:
        data = json.dumps(redact_json(meta), indent=1, sort_keys=True).encode()
        _write_file(child(out, META_FILE), data, label="-o ")
    return _print_report(args, meta, tables.findings, tables.ledgers)


def _report(args: argparse.Namespace) -> int:
    from spark_udfs.jobs.bookkeeper import FINDING_SCHEMA, LEDGER_SCHEMA

    _refuse_ozone_options(args)
    meta = _read_meta(args.input)
    spark = common._session(args)
    findings = spark.read.schema(FINDING_SCHEMA).parquet(child(args.input, "findings"))
    ledgers = spark.read.schema(LEDGER_SCHEMA).parquet(child(args.input, "ledgers"))
    return _print_report(args, meta, findings, ledgers)


def _print_report(
    args: argparse.Namespace, meta: Dict[str, Any], findings: Any, ledgers: Any
) -> int:
    """The report of a bookie scan (`meta`: META_FILE's document; the findings and ledgers
    tables): as `crcmerkle scan` prints it; its exit status."""
    from merkle.cli.bookkeeper import ledger_line

    n = _counts(meta, args.strict)
    n_ledgers = int(meta["summary"]["ledgers"])
    spark = findings.sparkSession
    with _progress(args, spark, "report"):
        shown = _first_findings(findings, args.first) if n["all"] else []
        infos = _first_ledgers(ledgers, args.first)
    s = dict(meta["summary"], errors=n["errors"], warnings=n["warnings"], strict=args.strict)
    doc = {
        "bookies": meta["bookies"],
        "findings": [f.to_dict() for f in shown],
        "findings_total": n["all"],
        "ledgers": infos,
        "ledgers_total": n_ledgers,
        "failed": meta["failed"],
        "metadata_problems": meta["metadata_problems"],
        "summary": s,
    }
    text = json.dumps(redact_json(doc), indent=1) + "\n"
    if args.report:
        _write_file(args.report, text.encode(), label="--report ")
    if args.json:
        sys.stdout.write(text)
    else:
        _print_text(shown, n["all"], infos, n_ledgers, meta, s, ledger_line)
    return _status(meta, n, args.strict)


def _print_text(
    shown: List[Any],
    total: int,
    infos: List[Dict[str, Any]],
    n_ledgers: int,
    meta: Dict[str, Any],
    s: Dict[str, Any],
    ledger_line: Any,
) -> None:
    for f in shown:
        prefix = "warning: " if f.severity == "warning" else "error: "
        print(one_line(prefix + f.line()))
    if total > len(shown):
        print(f"... and {total - len(shown)} more findings (all in the findings table)")
    for info in infos:
        print(ledger_line(info))
    if n_ledgers > len(infos):
        print(f"... and {n_ledgers - len(infos)} more ledgers (all in the ledgers table)")
    for failure in meta["failed"]:
        print_error(one_line(str(failure.get("error") if isinstance(failure, dict) else failure)))
    print(
        f"scanned {s['bookies']} bookies ({s['ledger_dirs']} ledger directories), "
        f"{s['copies']} entry copies ({_copies_counted(s)}), {s.get('bytes_read', 0)} "
        f"bytes: {s['errors']} errors, {s['warnings']} warnings"
        + (f", {len(meta['failed'])} paths not scanned" if meta["failed"] else "")
    )


def plan(args: argparse.Namespace) -> int:
    """`spark plan OUT --decommission BOOKIE[,...]` of a bookie scan: may they go down now,
    counting only good copies (spark_udfs.jobs.bookkeeper.plan)? Exit 0 every one may, 1 one
    is held back, 2 bad input (a bookie the scan does not have, a scan without its entries
    table)."""
    from spark_udfs.jobs.bookkeeper import ENTRY_SCHEMA, LEDGER_SCHEMA, META_FILE
    from spark_udfs.jobs.bookkeeper.plan import bookie_plan, format_bookie_plan

    _refuse_ozone_options(args, _PLAN_NOT_FOR_BOOKIES)
    if not args.decommission:
        raise CLIError("plan of bookies needs --decommission BOOKIE[,BOOKIE...]", EXIT_ERROR)
    meta = _read_meta(args.input)
    if _is_census(meta["summary"]):
        raise CLIError(
            f"{args.input} is a census (--metadata-only): it verified no copy, and a plan "
            f"counts only verified copies; scan the bookies' data for a plan",
            EXIT_ERROR,
        )
    scanned = meta.get("bookies")
    if not isinstance(scanned, dict):
        raise CLIError(f"{args.input}/{META_FILE}: not a bookie scan's summary", EXIT_ERROR)
    if not scanned:
        raise CLIError(f"{args.input}: the scan found no bookie", EXIT_ERROR)
    for b in args.decommission:
        if b not in scanned:
            names = sorted(str(k) for k in scanned)
            known = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if names[8:] else "")
            raise CLIError(
                one_line(f"--decommission {b}: not a bookie of this scan (its bookies: {known})"),
                EXIT_ERROR,
            )
    entries_dir = os.path.join(args.input, "entries")
    if not os.path.isdir(entries_dir):
        raise CLIError(
            f"{entries_dir}: missing (a scan by an older crcmerkle): scan the bookies again",
            EXIT_ERROR,
        )
    not_read = [str(f.get("path") if isinstance(f, dict) else f) for f in meta["failed"]]
    spark = common._session(args)
    entries = spark.read.schema(ENTRY_SCHEMA).parquet(child(args.input, "entries"))
    ledgers = spark.read.schema(LEDGER_SCHEMA).parquet(child(args.input, "ledgers"))
    with _progress(args, spark, "plan"):
        doc = bookie_plan(
            entries,
            ledgers,
            list(dict.fromkeys(args.decommission)),
            scanned={str(k): v for k, v in scanned.items()},
            not_read=not_read,
            first=args.first,
        )
    text = json.dumps(redact_json(doc), indent=1) + "\n"
    if args.report:
        _write_file(args.report, text.encode(), label="--report ")
    sys.stdout.write(text if args.json else format_bookie_plan(doc))
    return 0 if doc["summary"]["held_back"] == 0 else EXIT_FINDINGS


def run(args: argparse.Namespace) -> int:
    """`spark run` on bookies: the scan, then the report of its output, in one session."""
    _scan_and_write(args)
    args.input = args.output
    return _report(args)
