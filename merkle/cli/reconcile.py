"""`crcmerkle reconcile`: repair a replica from its peers (or every replica of a cluster)."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from typing import Any, Dict, List, Optional, Tuple

from merkle.cli import (
    EXIT_ERROR,
    EXIT_FINDINGS,
    CLIError,
    exit_status_help,
    print_error,
    redact_json,
)
from merkle.replica.errors import ReplicaError
from merkle.trees.ozone import format_checksum

DESCRIPTION = """\
Repair the replica CONTAINER from each PEER in turn: diff the trees, copy the missing and
corrupt chunks from the peer after verifying them against the peer's recorded window
checksums, adopt the peer's tombstones (tree only), then store metadata and tree. Local data
is never deleted or shortened. With --all, every PATH is searched for replicas, grouped by
container ID, and each replica reconciles with all the others (one round). With --report,
the repair commands of a `crcmerkle spark report --json` report are run, round by round: all
of them, read from the full list the report names (REPORT.json.commands/, written by the Spark
executors) when its JSON lists only the first ones; a missing list is an error, never a part.
The list must match the report's SHA-256 digest (each part's, as the executors wrote it) and
begin with the JSON's inline commands, and every command is checked against the disk before
any runs: its replicas lie under the roots the scan read, on volumes of one cluster, are
named by its container and their own metadata says so, with no symbolic link on the way;
anything else refuses the whole report (exit 2, nothing run). A report of replicas on Ozone
volumes prints the `ozone admin container reconcile` commands that ask the datanodes to
reconcile (exit 1 when there are some).
Replicas on Ozone datanode volumes are refused: the datanode reconciles them itself
(`ozone admin container reconcile <containerID>`). With --offline, a replica on a stopped
datanode's volume is repaired here: the volume's RocksDB LOCK must be free and is held for
the whole repair; repaired chunks also update the volume's block_data."""

EPILOG = exit_status_help(
    "repairs are pending (--dry-run planned some) or were left undone (something could not "
    "be repaired, or with --all the replicas still disagree); 2: a replica could not be "
    "processed (locked, unreadable), no peer was usable, or --all found no replica"
)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "reconcile",
        help="repair a container replica from its peers",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="CONTAINER PEER [PEER...], or with --all: directories to search",
    )
    p.add_argument(
        "--all",
        action="store_true",
        help="reconcile every replica found under the paths with its peers",
    )
    p.add_argument(
        "--report",
        metavar="REPORT.json",
        help="run every repair command of a 'crcmerkle spark report' JSON "
        "(and of the full command list it names)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan (what, from where, how many bytes); change nothing",
    )
    p.add_argument("--json", action="store_true", help="JSON output")
    p.add_argument(
        "--offline",
        action="store_true",
        help="repair replicas on Ozone volumes whose datanode is stopped (the "
        "volume's RocksDB LOCK is taken; refused while it is held)",
    )
    p.set_defaults(func=run)
    return p


def _fmt(v: Any) -> str:
    return "-" if v is None else format_checksum(v)


def _print(r: Any) -> None:
    from merkle.cli import one_line

    def out(text: str) -> None:  # a path may hold a newline: one line each, escaped
        print(one_line(text))

    head = f"{r.path}: {_fmt(r.before)}"
    if not r.dry_run:
        head += f" -> {_fmt(r.after)}"
    out(head)
    for p in r.peers:
        if p.status == "skipped":
            out(f"  skip {p.peer}: {p.reason}")
            continue
        if r.dry_run:
            for c in p.planned:
                out(
                    f"  pull block {c.block_id} chunk @{c.offset} ({c.length} bytes, "
                    f"{c.reason}) from {p.peer}"
                )
            for t in p.tombstones:
                out(f"  adopt tombstone of block {t} from {p.peer}")
            if p.planned:
                out(f"  total from {p.peer}: {len(p.planned)} chunks, {p.bytes_planned} bytes")
        elif p.copied or p.tombstones:
            out(
                f"  from {p.peer}: copied {len(p.copied)} chunks ({p.bytes_copied} bytes)"
                + (f", adopted tombstones {p.tombstones}" if p.tombstones else "")
            )
        for f in p.failures:
            out(f"  {p.peer}: {f}")
    for x in r.remaining:
        out(f"  unrepaired: {x}")


class _Refused(CLIError):
    """A CLIError naming the path it is about (listed under "failed" with --json)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message, EXIT_ERROR)
        self.path = path


def _os_message(exc: OSError) -> str:
    if exc.filename is not None and exc.strerror:
        return f"{exc.filename}: {exc.strerror}"
    return exc.strerror or str(exc)


Job = Tuple[List[str], Optional[Dict[str, str]]]


def _load_report(path: str) -> Any:
    """The commands of a Spark report file (merkle.replica.reconcile.load_report): all of
    them, from the full list the executors wrote when the report's JSON lists only the
    first ones, checked against the report's digest; never a part."""
    from merkle.replica.reconcile import load_report

    try:
        return load_report(path)
    except OSError as exc:
        raise _Refused(path, f"{path}: {exc.strerror or exc}") from None
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        # JSONDecodeError is a ValueError; so is an integer of more than 4300 digits
        raise _Refused(path, f"{path}: not a JSON report ({exc})") from None
    except ReplicaError as exc:
        raise _Refused(path, str(exc)) from None


def _report_jobs(path: str) -> Tuple[List[Job], Any]:
    """([target, peer...], {peer: datanode}) per command of a Spark report file, in round
    order, each checked against the disk before any runs (check_report_job: a command
    naming a replica of another container, outside the scanned roots, across clusters or
    through a link refuses the whole list), the datanodes that vote as the disk says; and
    the report's Ozone reconcile commands."""
    from merkle.replica.reconcile import check_report_job

    loaded = _load_report(path)
    jobs: List[Job] = []
    for job in loaded.jobs:
        try:
            jobs.append((job.replicas, check_report_job(job, loaded.roots, path)))
        except OSError as exc:
            raise _Refused(
                path, f"container {job.container_id}: {_os_message(exc)} (nothing was run)"
            ) from None
        except ReplicaError as exc:
            raise _Refused(path, f"{exc} (nothing was run)") from None
    return jobs, loaded


def _print_ozone(commands: List[List[str]], mismatched: int) -> None:
    """A report of replicas on Ozone datanode volumes: the datanodes repair them."""
    print(
        f"{mismatched} container(s) on Ozone datanode volumes to reconcile: Ozone "
        f"reconciles them itself (the datanodes' container reconciliation, HDDS-10239); "
        f"ask it to with:"
    )
    for argv in commands:
        print("  " + shlex.join(argv))
    if mismatched > len(commands):
        print(
            f"  ... (the report lists the first {len(commands)}; 'crcmerkle spark report "
            f"--first {mismatched}' lists them all)"
        )
    print("then follow it with 'ozone admin container reconcile --status <containerID>'")


def _refuse_ozone(path: str, offline: bool = False) -> None:
    """Exit 2 with one line for a path on an Ozone datanode volume (see refuse_ozone),
    unless --offline."""
    from merkle.replica.reconcile import refuse_ozone

    if offline:
        return
    try:
        refuse_ozone(path)
    except ReplicaError as exc:
        raise _Refused(path, str(exc)) from None


def _stored_value(replica: str) -> Any:
    """The container value of a replica's stored `.tree` (None if it has none, or it cannot
    be read: opened safely, size-capped)."""
    from merkle.replica.files import LocalReplicaFiles
    from merkle.replica.replicadir.paths import container_paths
    from merkle.replica.scan import read_stored_tree

    try:
        files = LocalReplicaFiles(container_paths(replica))
    except (ReplicaError, OSError):
        return None
    try:
        tree = read_stored_tree(files)[0]
    except OSError:
        return None
    finally:
        files.close()
    return None if tree is None else tree.data_checksum


def run(args: argparse.Namespace) -> int:
    """The verb; with --json a JSON document is printed in every outcome: {"results",
    "failed", "unconverged"}, an error that stops the run listed under "failed" (and on
    stderr as one line, exit 2)."""
    state: Dict[str, Any] = {"results": [], "failed": [], "unconverged": [], "printed": False}
    try:
        return _run(args, state)
    except CLIError as exc:
        if args.json and not state["printed"]:
            state["failed"].append({"path": getattr(exc, "path", None), "error": str(exc)})
            _dump(state)
        raise
    except (OSError, ReplicaError) as exc:
        message = _os_message(exc) if isinstance(exc, OSError) else str(exc)
        if args.json and not state["printed"]:
            state["failed"].append(
                {
                    "path": getattr(exc, "filename", None) or getattr(exc, "path", None),
                    "error": message,
                }
            )
            _dump(state)
        raise CLIError(message, EXIT_ERROR) from None


def _dump(state: Dict[str, Any]) -> None:
    doc = {
        "results": [r.to_dict() for r in state["results"]],
        "failed": state["failed"],
        "unconverged": state["unconverged"],
    }
    if state.get("ozone_reconcile"):
        doc["ozone_reconcile"] = [{"argv": a} for a in state["ozone_reconcile"]]
    json.dump(redact_json(doc), sys.stdout, indent=1)
    sys.stdout.write("\n")
    sys.stdout.flush()
    state["printed"] = True


def _run(args: argparse.Namespace, state: Dict[str, Any]) -> int:
    from merkle.cli import one_line
    from merkle.replica.reconcile import datanode_of, reconcile, replica_groups

    jobs: List[Job] = []
    failed: List[Dict[str, str]] = state["failed"]

    def walk_error(where: Any, exc: Exception) -> None:
        failed.append({"path": os.fspath(where), "error": str(exc)})
        if not args.json:
            print_error(str(exc))

    if args.report:
        if args.paths or args.all:
            raise CLIError("--report takes no PATH and no --all")
        jobs, loaded = _report_jobs(args.report)
        if loaded.ozone:
            state["ozone_reconcile"] = loaded.ozone
            if not args.json:
                _print_ozone(loaded.ozone, loaded.mismatched)
    elif args.all:
        if not args.paths:
            raise CLIError(
                "--all needs the directories to search (crcmerkle reconcile --all PATH...)"
            )
        groups: Dict[int, List[str]] = {}
        for p in args.paths:
            _refuse_ozone(p, args.offline)
        for p in args.paths:
            try:
                # each path's layout finds its replicas (offline: Ozone's volumes too)
                found = replica_groups(p, walk_error, offline=args.offline)
            except OSError as exc:
                raise _Refused(p, _os_message(exc)) from None
            except ReplicaError as exc:
                raise _Refused(p, str(exc)) from None
            for cid, found_reps in found.items():
                groups.setdefault(cid, []).extend(os.fspath(r) for r in found_reps)
        if not groups:
            raise CLIError(f"--all: no container replica found under {', '.join(args.paths)}")
        for cid in sorted(groups):
            reps = groups[cid]
            # each datanode casts one vote (two copies on one datanode never outvote another)
            where = {r: datanode_of(r) for r in reps}
            jobs.extend(([r] + [q for q in reps if q != r], where) for r in reps)
    else:
        if len(args.paths) < 2:
            raise CLIError("give CONTAINER and at least one PEER (or --all PATH...)")
        jobs.append((list(args.paths), None))
    for job, _ in jobs:  # one line before anything is done (a datanode repairs itself)
        for p in job:
            _refuse_ozone(p, args.offline)
    results = state["results"]
    for job, datanodes in jobs:
        try:
            r = reconcile(
                job[0], job[1:], dry_run=args.dry_run, offline=args.offline, datanodes=datanodes
            )
        except (ReplicaError, OSError) as exc:
            message = _os_message(exc) if isinstance(exc, OSError) else str(exc)
            failed.append({"path": job[0], "error": message})
            if not args.json:
                print_error(message)
            continue
        results.append(r)
        if not args.json:
            _print(r)
        if job[1:] and all(p.status == "skipped" for p in r.peers):
            # nothing could be compared: the work was not done, whatever the replica holds
            failed.append(
                {
                    "path": job[0],
                    "error": "no usable peer: "
                    + "; ".join(f"{p.peer}: {p.reason}" for p in r.peers),
                }
            )
            if not args.json:
                print_error(f"{job[0]}: no usable peer (every peer was skipped)")
    unconverged = state["unconverged"]
    if args.all and not args.dry_run:
        by_id: Dict[int, Dict[str, Any]] = {}
        for job, _ in jobs:
            cid = int(os.path.basename(os.path.normpath(job[0])))
            by_id.setdefault(cid, {})[job[0]] = _stored_value(job[0])
        for cid, values in sorted(by_id.items()):
            if len(set(values.values())) != 1:
                unconverged.append(
                    {"container_id": cid, "values": {k: _fmt(v) for k, v in values.items()}}
                )
                if not args.json:
                    print(
                        one_line(
                            f"container {cid}: replicas disagree: "
                            + ", ".join(f"{k} {_fmt(v)}" for k, v in values.items())
                        )
                    )
    if args.json:
        _dump(state)
    if failed:
        return EXIT_ERROR
    if any(r.remaining for r in results) or unconverged or state.get("ozone_reconcile"):
        return EXIT_FINDINGS
    if args.dry_run and any(p.status == "planned" for r in results for p in r.peers):
        return EXIT_FINDINGS  # repairs pending
    if any(p.failures for r in results for p in r.peers):
        return EXIT_FINDINGS  # a pull stopped early (reported with the reason)
    return 0
