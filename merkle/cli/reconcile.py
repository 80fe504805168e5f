"""`crcmerkle reconcile`: repair a replica from its peers (or every replica of a cluster)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Dict, List

from merkle.cli import EXIT_ERROR, EXIT_FINDINGS, CLIError, exit_status_help, print_error
from merkle.trees.ozone import format_checksum
from merkle.replica.errors import ReplicaError

DESCRIPTION = """\
Repair the replica CONTAINER from each PEER in turn: diff the trees, copy the missing and
corrupt chunks from the peer after verifying them against the peer's recorded window
checksums, adopt the peer's tombstones (tree only), then store metadata and tree. Local data
is never deleted or shortened. With --all, every PATH is searched for replicas, grouped by
container ID, and each replica reconciles with all the others (one round). With --report,
the repair commands of a `crcmerkle spark report --json` report are run, round by round.
Replicas on Ozone datanode volumes are refused: the datanode reconciles them itself
(`ozone admin container reconcile <containerID>`). With --offline, a replica on a stopped
datanode's volume is repaired here: the volume's RocksDB LOCK must be free and is held for
the whole repair; repaired chunks also update the volume's block_data."""

EPILOG = exit_status_help(
    "repairs are pending (--dry-run planned some) or were left undone (something could not "
    "be repaired, or with --all the replicas still disagree); 2: a replica could not be "
    "processed (locked, unreadable), no peer was usable, or --all found no replica")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "reconcile", help="repair a container replica from its peers",
        description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help="CONTAINER PEER [PEER...], or with --all: directories to search")
    p.add_argument("--all", action="store_true",
                   help="reconcile every replica found under the paths with its peers")
    p.add_argument("--report", metavar="REPORT.json",
                   help="run the repair commands of a 'crcmerkle spark report --json' report")
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan (what, from where, how many bytes); change nothing")
    p.add_argument("--json", action="store_true", help="JSON output")
    p.add_argument("--offline", action="store_true",
                   help="repair replicas on Ozone volumes whose datanode is stopped (the "
                        "volume's RocksDB LOCK is taken; refused while it is held)")
    p.set_defaults(func=run)
    return p


def _fmt(v: Any) -> str:
    return "-" if v is None else format_checksum(v)


def _print(r: Any) -> None:
    head = f"{r.path}: {_fmt(r.before)}"
    if not r.dry_run:
        head += f" -> {_fmt(r.after)}"
    print(head)
    for p in r.peers:
        if p.status == "skipped":
            print(f"  skip {p.peer}: {p.reason}")
            continue
        if r.dry_run:
            for c in p.planned:
                print(f"  pull block {c.block_id} chunk @{c.offset} ({c.length} bytes, "
                      f"{c.reason}) from {p.peer}")
            for t in p.tombstones:
                print(f"  adopt tombstone of block {t} from {p.peer}")
            if p.planned:
                print(f"  total from {p.peer}: {len(p.planned)} chunks, {p.bytes_planned} bytes")
        elif p.copied or p.tombstones:
            print(f"  from {p.peer}: copied {len(p.copied)} chunks ({p.bytes_copied} bytes)"
                  + (f", adopted tombstones {p.tombstones}" if p.tombstones else ""))
        for f in p.failures:
            print(f"  {p.peer}: {f}")
    for x in r.remaining:
        print(f"  unrepaired: {x}")


def _report_jobs(path: str) -> List[List[str]]:
    """[target, peer...] per command of a Spark report file, in round order."""
    from merkle.replica.reconcile import jobs_from_report

    try:
        with open(path, encoding="utf-8") as f:
            rep = json.load(f)
        return jobs_from_report(rep, path)
    except OSError as exc:
        raise CLIError(f"{path}: {exc.strerror or exc}", EXIT_ERROR) from None
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        raise CLIError(f"{path}: not a JSON report ({exc})", EXIT_ERROR) from None
    except ReplicaError as exc:
        raise CLIError(str(exc), EXIT_ERROR) from None


def _refuse_ozone(path: str, offline: bool = False) -> None:
    """Exit 2 with one line for a path on an Ozone datanode volume (see refuse_ozone),
    unless --offline."""
    from merkle.replica.reconcile import refuse_ozone
    if offline:
        return
    try:
        refuse_ozone(path)
    except ReplicaError as exc:
        raise CLIError(str(exc), EXIT_ERROR) from None


def _ozone_groups(path: str, walk_error: Any) -> Dict[int, List[str]]:
    """Replicas on the Ozone volumes at or under `path`, by container ID."""
    from merkle.replica.ozone.layout import find_volumes

    groups: Dict[int, List[str]] = {}
    for volume, _ in find_volumes(path):
        if volume.problem is not None:
            walk_error(volume.root, ReplicaError(volume.problem, os.fspath(volume.root)))
            continue
        for r in volume.replicas():
            groups.setdefault(r.container_id, []).append(os.fspath(r.root))
    return groups


def _stored_value(replica: str) -> Any:
    """The container value of a replica's stored `.tree` (None if it has none, or it cannot
    be read: opened safely, size-capped)."""
    from merkle.replica.crcmerkle.layout import container_paths
    from merkle.replica.files import LocalReplicaFiles
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
    from merkle.cli import one_line
    from merkle.replica.ozone.layout import is_ozone_path
    from merkle.replica.reconcile import reconcile, replica_groups

    jobs: List[List[str]] = []
    failed: List[Dict[str, str]] = []

    def walk_error(where: Any, exc: Exception) -> None:
        failed.append({"path": os.fspath(where), "error": str(exc)})
        if not args.json:
            print_error(str(exc))

    if args.report:
        if args.paths or args.all:
            raise CLIError("--report takes no PATH and no --all")
        jobs = _report_jobs(args.report)
    elif args.all:
        groups: Dict[int, List[str]] = {}
        for p in args.paths:
            _refuse_ozone(p, args.offline)
        try:
            for p in args.paths:
                ozone = args.offline and is_ozone_path(p)
                found = _ozone_groups(p, walk_error) if ozone else replica_groups(p, walk_error)
                for cid, reps in found.items():
                    groups.setdefault(cid, []).extend(os.fspath(r) for r in reps)
        except (ReplicaError, FileNotFoundError) as exc:
            raise CLIError(str(exc), EXIT_ERROR) from None
        if not args.paths:
            raise CLIError("--all needs the directories to search (crcmerkle reconcile --all "
                           "PATH...)")
        if not groups:
            raise CLIError(f"--all: no container replica found under {', '.join(args.paths)}")
        for cid in sorted(groups):
            reps = groups[cid]
            jobs.extend([r] + [q for q in reps if q != r] for r in reps)
    else:
        if len(args.paths) < 2:
            raise CLIError("give CONTAINER and at least one PEER (or --all PATH...)")
        jobs.append(list(args.paths))
    for job in jobs:  # one line before anything is done (a datanode repairs itself)
        for p in job:
            _refuse_ozone(p, args.offline)
    results = []
    for job in jobs:
        try:
            r = reconcile(job[0], job[1:], dry_run=args.dry_run, offline=args.offline)
        except (ReplicaError, OSError) as exc:
            failed.append({"path": job[0], "error": str(exc)})
            if not args.json:
                print_error(str(exc))
            continue
        results.append(r)
        if not args.json:
            _print(r)
        if job[1:] and all(p.status == "skipped" for p in r.peers):
            # nothing could be compared: the work was not done, whatever the replica holds
            failed.append({"path": job[0], "error": "no usable peer: "
                           + "; ".join(f"{p.peer}: {p.reason}" for p in r.peers)})
            if not args.json:
                print_error(f"{job[0]}: no usable peer (every peer was skipped)")
    unconverged = []
    if args.all and not args.dry_run:
        by_id: Dict[int, Dict[str, Any]] = {}
        for job in jobs:
            cid = int(os.path.basename(os.path.normpath(job[0])))
            by_id.setdefault(cid, {})[job[0]] = _stored_value(job[0])
        for cid, values in sorted(by_id.items()):
            if len(set(values.values())) != 1:
                unconverged.append({"container_id": cid,
                                    "values": {k: _fmt(v) for k, v in values.items()}})
                if not args.json:
                    print(one_line(f"container {cid}: replicas disagree: "
                                   + ", ".join(f"{k} {_fmt(v)}" for k, v in values.items())))
    if args.json:
        json.dump({"results": [r.to_dict() for r in results], "failed": failed,
                   "unconverged": unconverged}, sys.stdout, indent=1)
        sys.stdout.write("\n")
    if failed:
        return EXIT_ERROR
    if any(r.remaining for r in results) or unconverged:
        return EXIT_FINDINGS
    if args.dry_run and any(p.status == "planned" for r in results for p in r.peers):
        return EXIT_FINDINGS  # repairs pending
    if any(p.failures for r in results for p in r.peers):
        return EXIT_FINDINGS  # a pull stopped early (reported with the reason)
    return 0
