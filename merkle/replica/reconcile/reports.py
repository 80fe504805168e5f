"""The repair commands of a Spark report (`crcmerkle spark report --json`, `crcmerkle reconcile
--report`): read, checked against the report's digest and against the disk before any runs."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from merkle.replica.commandlist import MAX_CONTAINER_ID, MAX_ROUND, command_int
from merkle.replica.errors import ReplicaError
from merkle.replica.reconcile.peers import datanode_of
from merkle.replica.reconcile.results import PathLike

#: the "format" of the JSON that `crcmerkle spark report --json` writes
SPARK_REPORT_FORMAT = "crcmerkle-spark-report"


def _report_int(
    e: Dict[str, Any], key: str, high: int, source: str, *, required: bool = False
) -> Optional[int]:
    return command_int(e, key, high, source, "reconcile command", required=required)


def _inline_commands(report: Any, source: str) -> List[Dict[str, Any]]:
    """The "reconcile" list of a Spark report (dicts), after checking it is one."""
    if not isinstance(report, dict) or report.get("format") != SPARK_REPORT_FORMAT:
        raise ReplicaError(
            f'not a crcmerkle spark report (no "format": "{SPARK_REPORT_FORMAT}")', source
        )
    entries = report.get("reconcile")
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ReplicaError('the report has no "reconcile" list of commands', source)
    return entries


def report_jobs(report: Any, source: str = "report") -> List[Tuple[List[str], Dict[str, str]]]:
    """([target replica, peer...], {peer: its datanode}) for every repair command of a Spark
    report, in round order (see jobs_from_report); the datanodes let each cast one vote.
    Only the inline "reconcile" list: load_report_jobs reads a report file's full list."""
    entries = _inline_commands(report, source)
    keyed = []
    for i, e in enumerate(entries):
        rnd = _report_int(e, "round", MAX_ROUND, source) or 0
        _report_int(e, "container_id", MAX_CONTAINER_ID, source)
        keyed.append((rnd, i, e))
    jobs: List[Tuple[List[str], Dict[str, str]]] = []
    for _, _, e in sorted(keyed, key=lambda k: (k[0], k[1])):
        target, peers = e.get("replica"), e.get("peers")
        if (
            not isinstance(target, str)
            or not target
            or not isinstance(peers, list)
            or not peers
            or not all(isinstance(p, str) and p for p in peers)
        ):
            raise ReplicaError(
                f"container {e.get('container_id')} on "
                f"{str(e.get('datanode'))[:80]}: the command lacks replica "
                f"paths (the Spark scan records them)",
                source,
            )
        _check_argv(e, target, peers, source)
        names = e.get("peer_datanodes")
        if not (
            isinstance(names, list)
            and len(names) == len(peers)
            and all(isinstance(n, str) and n for n in names)
        ):
            names = [datanode_of(p) for p in peers]
        jobs.append(([target, *peers], dict(zip(peers, names))))
    return jobs


def _check_argv(e: Dict[str, Any], target: str, peers: List[str], source: str) -> None:
    """A command's `argv` (what an operator reads, not what runs: reconcile runs replica and
    peers itself, never a shell) must be absent or exactly `crcmerkle reconcile TARGET
    PEER...`: an edited argv that says something else is refused, not silently ignored."""
    if "argv" not in e or e["argv"] is None:
        return
    argv = e["argv"]
    if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)) or argv != [
        "crcmerkle",
        "reconcile",
        target,
        *peers,
    ]:
        raise ReplicaError(
            f'container {e.get("container_id")}: its "argv" is not '
            f"'crcmerkle reconcile' with its replica and peers",
            source,
        )


#: bounds of a report's "reconcile_commands" count
_MAX_COMMANDS = 1 << 40


def report_commands(report: Any, report_path: PathLike) -> List[Dict[str, Any]]:
    """Every reconcile command of a Spark report read from `report_path`, as dicts, after
    checking them against the report's digest (merkle.replica.commandlist).

    The rule: the report's "reconcile_commands" says how many commands there are ("total")
    and carries a SHA-256 digest of them all ("sha256"). With a "path" the full list is read
    from there (relative to the report file's directory, or absolute: a local path; a
    directory of JSON-lines part files as Spark writes them, or one JSON-lines file): it
    must hold exactly "total" commands, its parts must be the report's "parts" (name, bytes,
    SHA-256) whose digest is "sha256", and the inline "reconcile" list must be its first
    commands. Without a path the inline list must be the whole list, with "sha256" its
    canonical digest. A report without a digest, a list that is missing, unreadable, of
    another length or another digest is a ReplicaError: never a part, never another list."""
    return _report_commands(report, report_path)[0]


def _report_commands(
    report: Any, report_path: PathLike
) -> Tuple[List[Dict[str, Any]], List[Tuple[List[str], Dict[str, str]]]]:
    """(the commands, their jobs) of report_commands, validated (numbers, paths, argv)."""
    from merkle.replica import commandlist as cl

    source = os.fspath(report_path)
    inline = _inline_commands(report, source)
    report_jobs(report, source)  # the inline commands' numbers, paths and argv first
    rc = report.get("reconcile_commands")
    if rc is not None and not isinstance(rc, dict):
        raise ReplicaError('bad "reconcile_commands" (an object with total and path)', source)
    rc = rc or {}
    total = _report_int(rc, "total", _MAX_COMMANDS, source)
    total = len(inline) if total is None else total
    where = rc.get("path")
    if total != len(inline) and where is None:
        raise ReplicaError(
            f"the report lists only {len(inline)} of its {total} reconcile "
            f"commands and names no full list (write the report with "
            f"--report FILE: the full list goes next to it)",
            source,
        )
    digest = cl.check_digest_field(rc.get("sha256"), "the report", source)
    if where is None:
        jobs = report_jobs(report, source)
        if cl.lines_digest(inline) != digest:
            raise ReplicaError(
                "the report's commands do not match its digest (edited, or not this report's)",
                source,
            )
        return inline, jobs
    if not isinstance(where, str) or not where or "\0" in where:
        raise ReplicaError('bad "path" in "reconcile_commands"', source)
    if "://" in where:
        raise ReplicaError(
            f"the full command list is at {where}: copy it next to the report "
            f"(reconcile reads local files)",
            source,
        )
    full = os.path.join(os.path.dirname(os.path.abspath(source)), where)
    try:
        entries, parts = cl.read_command_list(full)
    except OSError as exc:
        raise ReplicaError(
            f"cannot read the report's command list: {exc.strerror or exc}", full
        ) from None
    if len(entries) != total:
        raise ReplicaError(
            f"the command list holds {len(entries)} command(s), the report "
            f"says {total}: incomplete or not this report's",
            full,
        )
    jobs = report_jobs(dict(report, reconcile=entries), full)
    _check_parts(rc.get("parts"), parts, digest, full)
    if entries[: len(inline)] != inline:
        raise ReplicaError(
            "the report's inline commands are not the first ones of its full "
            "list (edited, or not this report's)",
            source,
        )
    return entries, jobs


def _check_parts(listed: Any, read: List[Any], digest: str, where: str) -> None:
    """The parts read are exactly the report's listed parts, whose digest is `digest`."""
    from merkle.replica import commandlist as cl

    if not (
        isinstance(listed, list)
        and all(
            isinstance(p, dict)
            and isinstance(p.get("name"), str)
            and type(p.get("bytes")) is int
            and isinstance(p.get("sha256"), str)
            for p in listed
        )
    ):
        raise ReplicaError(
            'the report lists no parts of its command list ("parts": name, '
            "bytes, sha256 each): written by an older crcmerkle, or edited",
            where,
        )
    if cl.parts_digest(listed) != digest:
        raise ReplicaError("the report's part list does not match its digest (edited)", where)
    names = [p["name"] for p in listed]
    if names != [p.name for p in read]:
        raise ReplicaError(
            f"the command list's files ({', '.join(p.name for p in read)[:200]})"
            f" are not the report's parts (missing, extra or renamed)",
            where,
        )
    for want, got in zip(listed, read):
        if (want["bytes"], want["sha256"]) != (got.size, got.sha256):
            raise ReplicaError(
                f"{got.name}: does not match the report's digest of it "
                f"(swapped, edited or not this report's)",
                where,
            )


@dataclass
class ReportJob:
    """One reconcile command of a report, as run: its container, target, peers and the
    peers' datanodes (each casts one vote)."""

    container_id: int
    replicas: List[str]
    datanodes: Dict[str, str]


@dataclass
class LoadedReport:
    """A Spark report's commands (all of them, digest-checked) and what checks them."""

    jobs: List[ReportJob]
    #: the roots the scan read: every replica a command names lies under one
    roots: Optional[List[str]]
    #: on Ozone volumes: `ozone admin container reconcile` commands (the datanodes repair)
    ozone: List[List[str]]
    #: how many containers are mismatched in all (the report lists the first ones)
    mismatched: int = 0


def load_report(path: PathLike) -> LoadedReport:
    """A report file's commands (report_commands), validated, in round order; its scanned
    roots and, for replicas on Ozone volumes, the commands that ask the datanodes to
    reconcile. ReplicaError (or OSError / ValueError reading the report itself)."""
    from merkle.replica import commandlist as cl

    report = cl.read_json_file(path)
    source = os.fspath(path)
    ozone = _ozone_commands(report, source)
    entries, jobs = _report_commands(report, path)
    # report_jobs orders by (round, position): the same order gives each job its entry
    ordered = sorted(range(len(entries)), key=lambda i: (entries[i].get("round") or 0, i))
    out = []
    for i, (replicas, datanodes) in zip(ordered, jobs):
        cid = entries[i].get("container_id")
        out.append(ReportJob(-1 if cid is None else int(cid), replicas, datanodes))
    roots = report.get("scanned_roots")
    summary = report.get("summary")
    mismatched = _report_int(
        summary if isinstance(summary, dict) else {}, "MISMATCHED", _MAX_COMMANDS, source
    )
    return LoadedReport(
        out,
        roots if roots is None else cl.check_roots_field(roots, "the report", source),
        ozone,
        max(mismatched or 0, len(ozone)),
    )


def _ozone_commands(report: Any, source: str) -> List[List[str]]:
    """The report's "ozone_reconcile" commands (argv lists), validated: exactly
    `ozone admin container reconcile <containerID>`."""
    entries = report.get("ozone_reconcile") if isinstance(report, dict) else None
    if not entries:
        return []
    if not isinstance(entries, list):
        raise ReplicaError('bad "ozone_reconcile" (a list of commands)', source)
    out = []
    for e in entries:
        cid = _report_int(
            e if isinstance(e, dict) else {}, "containerID", MAX_CONTAINER_ID, source, required=True
        )
        argv = ["ozone", "admin", "container", "reconcile", str(cid)]
        if e.get("argv") not in (None, argv):
            raise ReplicaError(f"container {cid}: its \"argv\" is not '{' '.join(argv)}'", source)
        out.append(argv)
    return out


def check_report_job(job: ReportJob, roots: Optional[List[str]], source: str) -> Dict[str, str]:
    """Before a command runs: its target and peers are replicas of its container (their own
    metadata says so), under the roots the scan read, on volumes of one cluster, reached
    without links (merkle.replica.commandlist). ReplicaError naming what is wrong.

    Returns each peer's datanode as the disk says (datanode_of), for the vote: the
    command's "peer_datanodes" are what the report claims, and two copies on one datanode
    named as two datanodes would cast two votes."""
    from merkle.replica import commandlist as cl

    if roots is None:
        raise ReplicaError(
            'the report names no scanned roots ("scanned_roots"): its '
            "commands cannot be checked against the disk; write it again",
            source,
        )
    cid = job.container_id
    if cid < 0:
        raise ReplicaError('a command names no "container_id" (refused)', source)
    clusters = set()
    for p in job.replicas:
        root = cl.check_replica_path(p, cid, roots, source)
        clusters.add(cl.cluster_of(root))
    if len(clusters) > 1:
        raise ReplicaError(
            f"container {cid}: the command's replicas are on volumes of "
            f"different clusters ({', '.join(sorted(clusters))})",
            source,
        )
    for p in job.replicas:
        cl.check_replica_metadata(p, cid)
    return {p: datanode_of(p) for p in job.replicas[1:]}


def load_report_jobs(path: PathLike) -> List[Tuple[List[str], Dict[str, str]]]:
    """report_jobs for a report file: ALL its commands (report_commands), validated, in
    round order. ReplicaError (or OSError / ValueError reading the report itself)."""
    return [(j.replicas, j.datanodes) for j in load_report(path).jobs]


def jobs_from_report(report: Any, source: str = "report") -> List[List[str]]:
    """[target replica, peer...] for every repair command of a Spark report (the dict of
    `crcmerkle spark report --json`), in the report's round order. ReplicaError when it is
    not such a report, a command lacks replica paths, or a number in it is not an integer
    in range (a round of 1e400 or [1] is refused, not a crash)."""
    return [job for job, _ in report_jobs(report, source)]
