"""`crcmerkle scan`: verify container replicas against their recorded checksums."""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from merkle.cli import (
    EXIT_ERROR,
    EXIT_FINDINGS,
    MAX_BUFFER_BYTES,
    PROG,
    CLIError,
    byte_rate,
    duration_arg,
    exit_status_help,
    int_in_range,
    print_error,
    redact_json,
    refuse_also_without_data,
    seconds_arg,
    size_up_to,
)
from merkle.messages import one_line
from merkle.replica.also import ALSO_ALGORITHMS, WIDTHS, s3_base64
from merkle.replica.errors import ReplicaError
from merkle.replica.incremental import CarriedResult, not_read, utc
from merkle.trees.ozone import format_checksum

DESCRIPTION = """\
Scan container replicas: read every chunk window by window, recompute its checksums with the
chunk's own type, compare them with the recorded ones, and store the tree built from what was
read (merged into the stored tree; use --no-write for a read-only check). PATH may be a
replica (<volume>/<containerID>), a volume, a datanode or any directory above them.
On Ozone datanode volumes (<R>/hdds/VERSION) the scan is always read-only: block metadata
from each volume's RocksDB (opened once per volume, through a private snapshot), .container
files verified, only CLOSED, QUASI_CLOSED and UNHEALTHY containers' data checked.

The cheap passes read no block data and never write: --trees-only reads each replica's stored
.tree alone; --metadata-only (the census) reads and checks each replica's block metadata as
the scan does and takes its stored .tree where that still describes the metadata, else builds
the tree from the checksums the metadata records (the scan's tree if every chunk matches).

HDFS datanodes (PATH: a storage directory of dfs.datanode.data.dir, or a directory above them)
are scanned read-only: every finalized and open replica's every chunk against its meta file's
stored CRC (CRC32C or CRC32, the partial last chunk included; open replicas up to their last
complete chunk), each bad chunk named by the other replicas of its block (META_ROT: the data
equals theirs, the stored CRC rotted; DATA_ROT: the data rotted under their CRC), replicas of
an older genstamp (STALE_REPLICA); with --fsck the NameNode's view too (REPLICA_MISSING,
UNDER_REPLICATED counting only verified replicas, REPLICA_NOT_IN_FSCK).

BookKeeper bookies (PATH: a bookie's ledger directories, or a directory above them) are scanned
with --ledger-metadata, read-only: every entry copy the index names (DbLedgerStorage's RocksDBs
or .idx files) is framed, checked against its digest (CRC32C, CRC32, HMAC: the ledger's type and
password from the metadata) and placed against the write set of its ensemble segment; one line
per finding, naming bookie, ledger, entry, file and offset; then one line per ledger (good
copies per entry, entries below ackQuorum or without a good copy). On bookies --metadata-only
is the census: the indexes, cookies and master keys are read and each index entry is placed
against its write set (its log present, its location inside the log), no entry is read and
none verified: the ledger lines count indexed copies."""

EPILOG = """\
errors: CORRUPT_CHUNK, MISSING_CHUNK, INCONSISTENT_CHUNK_LENGTH, MISSING_DATA_FILE,
  UNREADABLE_DATA_FILE, NOT_A_REGULAR_FILE, METADATA_MISSING, METADATA_CORRUPT,
  METADATA_UNREADABLE, METADATA_UNSUPPORTED, TREE_UNREADABLE (after the last three,
  TREE_UNSUPPORTED, or a .tree/.blocks that is not a regular file, nothing is written to
  the replica); Ozone volumes also: CONTAINER_FILE_MISSING, CONTAINER_FILE_CORRUPT,
  CONTAINER_NOT_SCANNED of a schema V1/V2 replica, CONTAINER_PATH_MISMATCH (its
  metadataPath/chunksPath are not the replica's own directories on this volume's mount);
  a kind not listed here is an error; BookKeeper bookies: CORRUPT_ENTRY,
  DIGEST_MISMATCH_ALL_COPIES, COPIES_DIFFER, MISSING_ENTRY, ENTRY_FRAME_INVALID,
  ENTRY_LOG_MISSING, INDEX_UNREADABLE, LEDGER_IN_WRONG_DIR, COOKIE_INVALID, COOKIE_MISMATCH,
  BOOKIE_HOLDS_NOTHING, MASTER_KEY_MISMATCH
warnings (reported; the replica stays ok and they do not change the exit status unless
  --strict): TREE_MISSING, TREE_CORRUPT (the .tree is derived: rebuilt from the verified
  data), TREE_UNSUPPORTED; Ozone volumes also: CONTAINER_NOT_SCANNED of a state Ozone never
  data-scans (OPEN, CLOSING, ...), UNREFERENCED_DATA_FILE (invisible to Ozone's scanner);
  BookKeeper bookies: UNINDEXED_ENTRY, ENTRY_PAST_LAST_ENTRY, ENTRY_OF_OPEN_LEDGER,
  LEDGER_NOT_IN_METADATA;
  --metadata-only also: TREE_STALE (the stored .tree does not describe the block metadata:
  not trusted), TREE_FROM_METADATA (the tree was built from the recorded checksums)

output (text): one line per replica, '<status>  <container value>  <path>' with status OK,
  'OK (N WARNINGS)' or 'N ERRORS[, M WARNINGS]', each finding indented below it (a warning
  starts with 'warning:'); a summary line at the end, and an 'UNVERIFIED:' line naming the
  containers none of whose replicas was read (their stored values were checked by nobody).
output (json): {"replicas": [{path, container_id, ok, data_checksum, errors: [{error,
  block_id, offset, detail, severity}], warnings, blocks, chunks, bytes_read, seconds,
  verified, ...}], "failed": [...], "summary": {..., unverified_containers, unverified}};
  "verified" says the replica's data was read; "errors" lists every finding, "severity" is
  "error" or "warning", "ok" is false when a finding counts (errors; also warnings with --strict)
output with --ledger-metadata (BookKeeper): text as above per finding ('error: KIND bookie B
  ledger L entry E FILE @OFFSET: why'), then one line per ledger; json {"bookies": {bookie ID:
  [ledger dirs]}, "findings": [{error, severity, bookie, ledger, entry, file, offset, detail}],
  "ledgers": [{ledger, state, good_copies, below_ack_quorum, without_good_copy, ...}],
  "failed", "summary"}

polite on a live datanode: by default the scan reads in the kernel's idle I/O class
  (--no-idle-io: not) and drops each range it read from the page cache once checksummed
  (--keep-cache: not), so the datanode's clients keep their disk time and their cache;
  --bytes-per-second caps each volume's read rate (16MiB is the default of the cluster scans:
  11 days per 16 TB disk, 8 % of a 200 MB/s HDD; 0 means unlimited, as in 'spark scan'); the
  local scan is unlimited unless given

A PATH or directory that cannot be read (or a replica-like directory whose name is no valid
container ID, or an Ozone replica directory reached a second time by another path) is
listed under "failed" and the others are still scanned; Ozone volumes and crcmerkle-layout
replicas may be given together; --json output is valid JSON in every outcome.

""" + exit_status_help(
    "some replica has errors, or with --strict warnings, or some container is UNVERIFIED "
    "(none of its replicas was read: every one OPEN, without a usable .container, ...) "
    "(2 wins when some replica or PATH could not be scanned at all: missing, locked, "
    "unreadable, an Ozone volume whose DB cannot be opened; or no replica was found under a "
    "PATH)"
)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "scan",
        help="verify container replicas (containers, volumes, datanodes)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="replica, volume or datanode")
    p.add_argument("--json", action="store_true", help="JSON output (see below)")
    p.add_argument(
        "--workers",
        type=int_in_range(1, 1024),
        default=1,
        metavar="N",
        help="threads scanning the blocks of a replica in parallel (default 1)",
    )
    p.add_argument(
        "--bytes-per-second",
        "--rate",
        dest="rate",
        type=byte_rate,
        metavar="BYTES_PER_S",
        help="read at most this many bytes per second per volume (on bookies per ledger "
        "directory; e.g. 16MiB, the "
        "default of scans of live datanodes: 11 days per 16 TB disk; 5MiB is "
        "Ozone's scanner's); 0: unlimited, as in 'spark scan'; unlimited by "
        "default (--rate: the same)",
    )
    p.add_argument(
        "--idle-io",
        dest="idle_io",
        action="store_true",
        default=None,
        help="read in the kernel's idle I/O class (the default; given explicitly, "
        "says on stderr when the kernel refuses it or a disk's scheduler "
        "ignores it: only bfq and mq-deadline honour it)",
    )
    p.add_argument(
        "--no-idle-io",
        dest="idle_io",
        action="store_false",
        help="read in the process's own I/O class (a scan that must end on a "
        "disk that is never idle)",
    )
    p.add_argument(
        "--keep-cache",
        action="store_true",
        help="leave what the scan read in the page cache (by default each range "
        "is dropped once checksummed: a scan of a whole disk would evict the "
        "cache that serves the datanode's clients)",
    )
    p.add_argument(
        "--mmap",
        action="store_true",
        help="accepted for compatibility; block files are always read with "
        "pread (a mapped file that shrinks mid-scan would kill the scan "
        "with SIGBUS)",
    )
    p.add_argument(
        "--no-write",
        action="store_true",
        help="do not store the scanned tree (read-only; takes no lock)",
    )
    cheap = p.add_mutually_exclusive_group()
    cheap.add_argument(
        "--trees-only",
        action="store_true",
        help="read each replica's stored .tree alone: no block metadata, no data (read-only)",
    )
    cheap.add_argument(
        "--metadata-only",
        action="store_true",
        help="the census: check each replica's block metadata and take its "
        "stored .tree, or build the tree from the recorded checksums "
        "where the .tree is missing, unusable or older; on bookies, place "
        "every index entry against its write set; no data read "
        "(read-only)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="count warnings as errors: a replica with only warnings is not ok "
        "and the exit status is 1",
    )
    p.add_argument(
        "--no-progress",
        action="store_true",
        help="never show a progress bar (one is shown when stderr is a terminal)",
    )
    p.add_argument(
        "--also",
        action="append",
        type=str.lower,
        choices=ALSO_ALGORITHMS,
        metavar="ALG",
        help="also compute this CRC (crc64nvme, crc32c or crc32; repeatable) of "
        "every window of each chunk (the chunk's own bytes per checksum) and "
        "of each block read in full, from the bytes the scan reads anyway "
        "(nothing is read twice): what S3 keeps for an object "
        "(x-amz-checksum-crc64nvme of a one-block object is the block's "
        "value), compared later without reading the data again; in --json "
        'under each replica\'s "also" (each chunk with the checksums its '
        "metadata recorded: checksum_type, bytes_per_checksum, checksums in "
        "hex), in the text output one line per "
        "block, with --emit in the chunks and blocks tables' column of that "
        "name; on bookies: of each entry copy's payload, compared across its "
        "copies beside its CRC-32C",
    )
    p.add_argument(
        "--fsck",
        metavar="FILE",
        help="HDFS datanodes (PATHs whose current/VERSION says storageType=DATA_NODE): "
        "judge the replicas against the NameNode's view, the saved output of 'hdfs fsck "
        "PATH -files -blocks -locations' (expected replicas and genstamps, the files they "
        "belong to, replication counting only verified replicas)",
    )
    p.add_argument(
        "--ledger-metadata",
        metavar="PATH",
        help="scan BookKeeper bookies: each PATH is a bookie's ledger directory "
        "(or a directory above them), checked against the ledger metadata at "
        "this PATH: a directory of 'bookkeeper shell ledgermetadata -ledgerid "
        "N -dumptofile F' files, or a copy of the ZooKeeper znode tree "
        "(ledgers/00/0000/L0000/_data); read-only",
    )
    p.add_argument(
        "--zookeeper",
        metavar="HOST:PORT[/root]",
        help="scan BookKeeper bookies against the ledger metadata in this live "
        "ZooKeeper (read-only; also zk+hierarchical://HOST:PORT/ledgers; root "
        "default /ledgers), instead of --ledger-metadata",
    )
    p.add_argument(
        "--state",
        metavar="DIR",
        help="keep the scan's progress in DIR (created private; root's own, off the "
        "scanned volumes): each replica verified is recorded as soon as it is read, with "
        "the identity it had (its files' names, sizes, inodes and times and its block "
        "metadata), so that a rerun after a kill or a reboot continues the pass where it "
        "stopped, and reports the replicas already verified without reading them again",
    )
    p.add_argument(
        "--max-age",
        metavar="DURATION",
        type=duration_arg,
        help="with --state: do not read again a replica verified within DURATION (7d, 12h, "
        "30m, 90s) whose identity is unchanged; changed and never-verified replicas are "
        "read first, then the oldest verified. Bit rot changes no metadata: every replica "
        "is still read once per DURATION; a replica not read is reported with the time "
        "it was read",
    )
    p.add_argument(
        "--checkpoint-seconds",
        metavar="SECONDS",
        type=seconds_arg,
        help="with --state: within a replica, save the blocks verified so far at most every "
        "SECONDS of reading (default 1; 0: after every block), so that a rerun does not "
        "read a large replica again from its first byte: a kill costs at most SECONDS of "
        "reading and the block in flight per volume",
    )
    p.add_argument(
        "--metrics-file",
        metavar="FILE",
        help="with --state: write the run's figures in Prometheus' text format to FILE "
        "(node_exporter's textfile collector: a name ending .prom in its directory), "
        "replaced atomically: bytes and replicas read and not read, findings by kind and "
        "level, read errors, and per volume the byte rate, the age of the oldest "
        "verification and the time a full pass takes at that rate",
    )
    p.add_argument(
        "--loop",
        action="store_true",
        help="with --state and --max-age: run as a service, forever, one thread per volume "
        "at its byte rate, each pass reading what is due (changed and never-verified "
        "replicas first, then the oldest), sleeping until the next replica falls due; "
        "on bookies a thread per ledger storage, an entry log the replica, each pass's "
        "findings printed at its end; with --emit URI each volume's tables written to URI "
        "as its pass completes; SIGTERM or SIGINT: the read in progress finishes, "
        "the state is saved, exit 0",
    )
    p.add_argument(
        "--emit-every",
        metavar="DURATION",
        type=duration_arg,
        help="with --loop --emit: write each volume's tables to URI also mid-pass, after a "
        "replica, once DURATION has passed since they were last written (default 5m): the "
        "replicas read so far with the pass before's rows of the others, so that a finding "
        "reaches URI within DURATION and URI always holds every volume whole",
    )
    p.add_argument(
        "--metrics-port",
        type=int_in_range(1, 65535),
        metavar="PORT",
        help="with --loop: serve the metrics (those of --metrics-file) over HTTP on PORT",
    )
    p.add_argument(
        "--metrics-address",
        default="127.0.0.1",
        metavar="ADDR",
        help="the address --metrics-port listens on (default 127.0.0.1: this host only)",
    )
    p.add_argument(
        "--buffer-size", type=size_up_to(MAX_BUFFER_BYTES), default=None, help=argparse.SUPPRESS
    )
    from merkle.cli.emit import add_options

    add_options(p)  # --emit URI, --host NAME
    p.set_defaults(func=run)
    return p


def _state_refusal(args: argparse.Namespace) -> Optional[str]:
    """Why --state/--max-age cannot go with the other options given, or None."""
    if args.max_age is not None and not args.state:
        return "--max-age goes with --state DIR (where the verification times are kept)"
    if args.checkpoint_seconds is not None and not args.state:
        return "--checkpoint-seconds goes with --state DIR (where the blocks are saved)"
    if args.metrics_file and not args.state:
        return "--metrics-file goes with --state DIR (the ages it reports are kept there)"
    if args.loop and (not args.state or args.max_age is None):
        return "--loop goes with --state DIR and --max-age DURATION (what falls due when)"
    if args.loop and args.json:
        return "--loop prints a line per replica: not with --json (a document that never ends)"
    if args.metrics_port is not None and not args.loop:
        return "--metrics-port serves the --loop service's metrics: give --loop"
    if args.emit_every is not None and not (args.loop and args.emit):
        return "--emit-every goes with --loop and --emit URI (the service's output)"
    if args.emit and args.metrics_file and not args.loop:
        return (
            "--metrics-file is not written by --emit: `crcmerkle spark report URI` gives the "
            "emitted volumes' figures"
        )
    if not args.state:
        return None
    if args.trees_only or args.metadata_only:
        return "--state records verified data: not with --trees-only or --metadata-only"
    if args.also:
        return (
            "--state is not taken with --also (its values are of the bytes read: a replica "
            "not read again has none)"
        )
    if any("://" in p for p in args.paths):
        return "--state keeps a host's own progress: its PATHs are local directories, not URIs"
    return None


def _replicas(paths: List[str]) -> List[Tuple[Any, Any]]:
    """(layout, replica) of every replica a scan of `paths` will visit, found by each path's
    layout (merkle.replica.layouts); a path that cannot be walked adds none (the scan itself
    reports it)."""
    from merkle.replica.layouts import layout_of

    found: List[Tuple[Any, Any]] = []
    for p in paths:
        try:
            layout = layout_of(p)
            found.extend((layout, r) for v in layout.volumes(p) for r in layout.replicas(v))
        except (OSError, ReplicaError, ValueError):
            pass  # reported by the scan itself
    return found


def _bar(paths: List[str], enabled: bool) -> Any:
    """A tqdm bar on stderr (terminal only): bytes when every layout can tell its replicas'
    sizes at discovery (crcmerkle's: the .blocks files), else replicas (Ozone's sizes are in
    each volume's RocksDB, which only the scan opens), advanced once per replica scanned."""
    if not enabled or not sys.stderr.isatty():
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    found = _replicas(paths)
    sizes = [layout.data_bytes(r) for layout, r in found]
    if any(n is None for n in sizes):
        return tqdm(
            total=len(found),
            unit="replica",
            desc="scan",
            file=sys.stderr,
            leave=False,
            dynamic_ncols=True,
        )
    return tqdm(
        total=sum(n or 0 for n in sizes),
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        desc="scan",
        file=sys.stderr,
        leave=False,
        dynamic_ncols=True,
    )


def _status(r: Any, strict: bool) -> str:
    """'OK', 'OK (N WARNINGS)' or 'N ERRORS[, M WARNINGS]' (with --strict every finding is
    counted among the errors)."""
    warnings = len(r.warnings)
    if not r.errors:
        return "OK"
    if r.ok_at(strict):
        return f"OK ({warnings} WARNING{'S' if warnings != 1 else ''})"
    if strict or not warnings:
        return f"{len(r.errors)} ERRORS"
    return f"{len(r.errors) - warnings} ERRORS, {warnings} WARNING{'S' if warnings != 1 else ''}"


#: How many UNVERIFIED container IDs the summary lists (it counts them all).
FIRST_UNVERIFIED = 100


def _was_read(r: Any, args: argparse.Namespace) -> bool:
    """Whether this pass read what it compares of replica `r`: its data (ScanResult.verified),
    in the census its block metadata, with --trees-only its stored tree."""
    if args.trees_only:
        return not r.errors
    if args.metadata_only:
        return r.meta is not None
    return bool(r.verified)


def _unverified(results: List[Any], args: argparse.Namespace) -> List[int]:
    """The containers (sorted IDs) none of whose scanned replicas was read (_was_read): every
    replica OPEN, without a usable `.container` or block metadata, its files unreadable...
    Such a container is UNVERIFIED, a finding: its stored values were checked by nobody."""
    read: Dict[int, bool] = {}
    for r in results:
        read[r.container_id] = read.get(r.container_id, False) or _was_read(r, args)
    return sorted(c for c, ok in read.items() if not ok)


def _unverified_line(ids: List[int], args: argparse.Namespace) -> str:
    what = "stored .tree" if args.trees_only else "block metadata" if args.metadata_only else "data"
    shown = ", ".join(f"#{c}" for c in ids[:FIRST_UNVERIFIED])
    return (
        f"UNVERIFIED: {len(ids)} container(s), none of whose replicas' {what} was read "
        f"(first: {shown}{' ...' if len(ids) > FIRST_UNVERIFIED else ''})"
    )


def _idle_io(args: argparse.Namespace) -> Tuple[bool, Any]:
    """Put this thread's I/O in the idle class unless --no-idle-io: (whether it was set, the
    priority to restore after the scan or None). Explicit --idle-io says on stderr why it
    could not be set, or which disks ignore it (text output only: --json keeps stderr
    for errors)."""
    from merkle.replica import politeio

    if args.idle_io is False:
        return False, None
    previous = politeio.io_priority()
    why = politeio.set_idle_io_priority()
    if args.idle_io and not args.json:
        note = why if why is not None else politeio.scheduler_note(args.paths)
        if note is not None:
            print(f"{PROG}: note: {note}", file=sys.stderr, flush=True)
    return why is None, previous


def _refuse_bookies_without_metadata(paths: List[str]) -> None:
    """One line (exit 2) for a bookie given without --ledger-metadata: its copies are checked
    against the ledger metadata (digest type, password, ensembles), never without it."""
    from merkle.replica.layouts import layout_of

    for path in paths:
        try:
            name = layout_of(path).name
        except (OSError, ValueError):
            continue
        if name == "bookkeeper":
            raise CLIError(
                f"{path}: a BookKeeper bookie is scanned against its ledger "
                f"metadata: add --ledger-metadata PATH or --zookeeper HOST:PORT",
                EXIT_ERROR,
            )


def run(args: argparse.Namespace) -> int:
    from merkle.replica import politeio

    if args.host is not None and not args.emit:
        raise CLIError("--host is only for --emit", EXIT_ERROR)
    refuse_also_without_data(args)
    why = _state_refusal(args)
    if why is not None:
        raise CLIError(why, EXIT_ERROR)
    if args.metrics_file or args.metrics_port is not None:
        try:
            import prometheus_client  # noqa: F401  (the metrics extra)
        except ImportError:
            flag = "--metrics-file" if args.metrics_file else "--metrics-port"
            raise CLIError(
                f"{flag} needs the prometheus_client library: pip install 'crcmerkle[metrics]'",
                EXIT_ERROR,
            ) from None
    if (
        getattr(args, "ledger_metadata", None) is not None
        or getattr(args, "zookeeper", None) is not None
    ):
        if args.loop:
            from merkle.cli.bookkeeper.loop import run_bookie_loop

            return run_bookie_loop(args)
        from merkle.cli.bookkeeper import run_bookkeeper

        return run_bookkeeper(args)
    from merkle.cli.hdfs import is_hdfs_scan, run_hdfs

    if is_hdfs_scan(args):
        return run_hdfs(args)
    _refuse_bookies_without_metadata(args.paths)
    idle, previous = _idle_io(args)
    try:
        if args.loop:
            return _loop(args)
        if args.emit:
            from merkle.cli.emit import run_emit

            return run_emit(args, idle, _tracker(args, replay=True))
        return _run(args, idle)
    finally:
        if idle and previous is not None:
            politeio.set_io_priority(previous)  # an in-process caller (tests) gets it back


def print_result(r: Any, strict: bool) -> None:
    """A replica's text lines: its status, value and path (a replica not read: when it was
    verified), each finding, each --also block value."""
    carried = not_read(r)
    value = "-" if r.tree.data_checksum is None else format_checksum(r.tree.data_checksum)
    note = f"  (not read: unchanged since verified {utc(r.verified_at)})" if carried else ""
    print(f"{_status(r, strict)}  {value}  {one_line(r.path)}{note}", flush=True)
    for e in r.errors:
        print(f"    {'warning: ' if e.is_warning else ''}{one_line(str(e))}")
    for alg, values in r.also.items():  # --also: each block read in full
        digits = 2 * WIDTHS[alg]
        for b, v in zip(values.block_id.tolist(), values.block_value.tolist()):
            print(f"    {alg} block {b}: 0x{v:0{digits}x} {s3_base64(alg, v)}")
    r.also = {}  # printed: a whole disk's window values are not held to the end


def _tracker(args: argparse.Namespace, replay: bool = False) -> Any:
    """The StateTracker of --state DIR (None without), its database checked and opened; a
    directory or database that cannot be trusted is one line, exit 2. `replay`: replicas
    not read are given with their trees (--emit writes their chunks)."""
    if not args.state:
        return None
    from merkle.replica.incremental import StateTracker
    from merkle.replica.scanstate import ScanState, StateError

    def warn(line: str) -> None:
        print(f"{PROG}: warning: {one_line(line)}", file=sys.stderr, flush=True)

    try:
        return StateTracker(
            ScanState(args.state, list(args.paths), warn),
            args.max_age,
            checkpoint_seconds=_checkpoint_seconds(args),
            replay=replay,
        )
    except StateError as exc:
        raise CLIError(str(exc), EXIT_ERROR) from None
    except sqlite3.Error as exc:
        raise CLIError(f"--state {args.state}: {exc}", EXIT_ERROR) from None


def _checkpoint_seconds(args: argparse.Namespace) -> float:
    from merkle.replica.incremental import DEFAULT_CHECKPOINT_SECONDS

    given = args.checkpoint_seconds
    return DEFAULT_CHECKPOINT_SECONDS if given is None else float(given)


def _loop(args: argparse.Namespace) -> int:
    """`--loop`: merkle.cli.scanloop over one ScanState, a new tracker per pass."""
    from merkle.cli.scanloop import run_loop
    from merkle.replica.incremental import StateTracker

    replay = bool(args.emit)  # the emitted tables need the trees of the replicas not read
    first = _tracker(args, replay=replay)
    state = first.state
    trackers = [first]

    def make_tracker() -> Any:
        if trackers:
            return trackers.pop()
        return StateTracker(
            state, args.max_age, checkpoint_seconds=_checkpoint_seconds(args), replay=replay
        )

    return run_loop(args, make_tracker, print_result)


def _replica_dict(r: Any, strict: bool, tracker: Any) -> Dict[str, Any]:
    """A replica's JSON; with --state, whether this run read it and when it was verified."""
    d = r.to_dict(strict)
    if tracker is not None and "verified_at" not in d:
        when = tracker.read_at.get(r.path)
        d.update(read=True, verified_at=None if when is None else utc(when))
    return d


def _state_summary(args: argparse.Namespace, tracker: Any, results: List[Any]) -> Dict[str, Any]:
    carried = [r for r in results if isinstance(r, CarriedResult)]
    oldest = min((r.verified_at for r in carried), default=None)
    return {
        "directory": args.state,
        "resumed_pass": tracker.resumed,
        "pass_started": utc(tracker.state.pass_started),
        "max_age_seconds": args.max_age,
        "read": len(results) - len(carried),
        "not_read_unchanged": len(carried),
        "recorded": tracker.recorded,
        "resumed_blocks": tracker.resumed_blocks,
        "oldest_carried_verification": None if oldest is None else utc(oldest),
    }


def _state_line(st: Dict[str, Any]) -> str:
    line = (
        f"state {st['directory']}: {st['read']} replicas read, {st['not_read_unchanged']} "
        f"not read (unchanged, verified "
        + ("in the pass in progress" if st["max_age_seconds"] is None else "within --max-age")
        + ")"
    )
    if st["oldest_carried_verification"]:
        line += f", the oldest verified {st['oldest_carried_verification']}"
    if st["resumed_pass"]:
        line += f"; resumed the pass started {st['pass_started']}"
    if st["resumed_blocks"]:
        line += f", {st['resumed_blocks']} blocks of replicas in flight not read again"
    return line


def _run(args: argparse.Namespace, idle: bool) -> int:
    from merkle.replica.census import NO_DATA_READ
    from merkle.replica.scan import DEFAULT_BUFFER_SIZE, ScanResult, scan_paths

    cheap = args.trees_only or args.metadata_only  # no data read, nothing written
    tracker = _tracker(args)
    # no bar in bytes: none are read
    bar = _bar(args.paths, not args.no_progress and not args.json and not cheap)
    per_replica = bar is not None and bar.unit == "replica"  # sizes unknown: see _bar
    failed: List[Dict[str, str]] = []
    results: List[ScanResult] = []

    def on_result(r: Any) -> None:  # a ScanResult, or with --state a CarriedResult
        results.append(r)
        carried = isinstance(r, CarriedResult)
        if bar is not None and carried and not per_replica:
            bar.update(int(r.stored.get("bytes_read") or 0))  # not read this time
        if args.json:
            return
        if bar is not None:
            bar.clear()
            if per_replica:
                bar.update(1)
        print_result(r, args.strict)

    def on_error(loc: Any, exc: Exception) -> None:
        if bar is not None and per_replica:
            bar.update(1)
        failed.append({"path": os.fspath(loc.root), "error": str(exc)})
        if not args.json:
            print_error(str(exc))

    progress = None
    if bar is not None and not per_replica:
        lock = threading.Lock()

        def progress(n: int) -> None:  # worker threads report concurrently
            with lock:
                bar.update(n)

    def path_error(path: str, exc: Exception) -> None:
        failed.append({"path": path, "error": str(exc)})
        if not args.json:
            print_error(str(exc))

    seen: Dict[Any, Any] = {}  # a replica directory reached by two PATHs: scanned once
    t0 = time.perf_counter()
    try:
        for path in args.paths:  # one bad PATH does not stop the others
            before = (len(results), len(failed))
            try:
                scan_paths(
                    [path],
                    bytes_per_second=args.rate,
                    workers=args.workers,
                    write_tree=not (args.no_write or cheap),
                    trees_only=args.trees_only,
                    metadata_only=args.metadata_only,
                    on_result=on_result,
                    on_error=on_error,
                    progress=progress,
                    ozone_scanned=seen,
                    tracker=tracker,
                    drop_cache=not args.keep_cache,
                    buffer_size=args.buffer_size or DEFAULT_BUFFER_SIZE,
                    **({"also": tuple(args.also)} if args.also else {}),
                )
            except FileNotFoundError as exc:
                path_error(path, OSError(f"{path}: {exc.strerror or exc}"))
            except (ReplicaError, OSError) as exc:
                path_error(path, exc)
            if (len(results), len(failed)) == before:  # an empty PATH is one failed entry
                path_error(
                    path,
                    OSError(
                        f"{path}: no container replica found (a replica is "
                        f"<volume>/<containerID> with metadata/ and chunks/, "
                        f"or an Ozone volume <R>/hdds/VERSION)"
                    ),
                )
        if tracker is not None:  # every PATH visited: the next run starts a new pass
            tracker.state.complete_pass()
    finally:
        if bar is not None:
            bar.close()
        if tracker is not None:
            tracker.state.close()
    seconds = time.perf_counter() - t0
    nbytes = sum(r.bytes_read for r in results)
    bad = sum(1 for r in results if not r.ok_at(args.strict))
    warned = sum(1 for r in results if r.ok_at(args.strict) and r.warnings)
    summary = {
        "replicas": len(results),
        "with_errors": bad,
        "failed": len(failed),
        "errors": sum(len(r.errors) for r in results),
        "bytes_read": nbytes,
        "seconds": round(seconds, 6),
        "mb_per_s": round(nbytes / seconds / 1e6, 1) if seconds > 0 else None,
        "with_warnings_only": warned,
        "warnings": sum(len(r.warnings) for r in results),
        "strict": args.strict,
        "bytes_per_second": args.rate,
        "idle_io": idle,
        "drop_cache": not args.keep_cache,
        "also": list(args.also or ()),
    }
    unverified = _unverified(results, args)
    summary["unverified_containers"] = len(unverified)
    summary["unverified"] = unverified[:FIRST_UNVERIFIED]
    # a census or a trees-only pass reads no data: every output says so
    summary["data_read"] = not cheap
    if cheap:
        summary["compared"] = NO_DATA_READ[args.trees_only]
    if tracker is not None:
        summary["state"] = _state_summary(args, tracker, results)
    if args.json:
        json.dump(
            redact_json(
                {
                    "replicas": [_replica_dict(r, args.strict, tracker) for r in results],
                    "failed": failed,
                    "summary": summary,
                }
            ),
            sys.stdout,
            indent=1,
        )
        sys.stdout.write("\n")
    else:
        rate = f", {summary['mb_per_s']} MB/s" if summary["mb_per_s"] is not None else ""
        print(
            f"scanned {len(results)} replicas, {nbytes} bytes in {seconds:.2f} s{rate}: "
            f"{bad} with errors"
            + (f", {warned} with warnings only" if warned else "")
            + (f", {len(failed)} not scanned" if failed else "")
        )
        if cheap:
            print(f"no data read: {NO_DATA_READ[args.trees_only]}")
        if tracker is not None:
            print(_state_line(summary["state"]))
        if unverified:
            print(_unverified_line(unverified, args))
    if args.metrics_file:
        from merkle.cli.metrics import scan_registry, write_metrics_file

        write_metrics_file(args.metrics_file, scan_registry(results, failed, tracker))
    if failed:
        return EXIT_ERROR
    if not results:
        raise CLIError(
            f"no container replica found under {', '.join(args.paths)} (a replica "
            "is <volume>/<containerID> with metadata/ and chunks/)",
            EXIT_ERROR,
        )
    return EXIT_FINDINGS if bad or unverified else 0
