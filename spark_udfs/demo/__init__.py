"""The end-to-end demo behind `crcmerkle spark demo` (README.md's command 1); its steps are
this package's modules (decommission, copies), its directory's checks the command line's
(spark_udfs.cli.demodir).

It generates a small cluster with injected faults (merkle.replica.generate, ground truth in its
manifest), runs the scan, diff and report jobs on Spark, and checks that what the jobs found is
exactly what was injected: every expected scan error and nothing else, a repair pull for every
damaged chunk or block that has a healthy copy, the tombstones and extra blocks as divergences,
the chunks corrupted everywhere as unrecoverable, and no mismatch in a container that was not
touched. Then (unless told not to) it feeds the report's repair commands to the reconciler and
scans again: every container must match except those holding an unrecoverable chunk (the
crcmerkle layout; on Ozone volumes repair is the datanodes' own, the report lists it). On the
Ozone layout the generator also writes an OM DB of keys made of the blocks, and the copy-check
step (spark_udfs.demo.copies) copies them with injected differences and checks that
`crcmerkle spark copycheck` finds exactly those. Last (both layouts, unless told not to
repair) the decommission step, spark_udfs.demo.decommission: a node Ozone's replica count would let
go although it holds the only good copy of a container, and the plan whose copies make it
safe.

`check_findings` is the comparison itself, on plain Python rows, so it is tested without Spark.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

from merkle.replica.layout import REPAIR_IN_PLACE
from merkle.replica.layouts import layout_named
from merkle.replica.levels import ERROR, WARNING, severity_of

__all__ = ["DemoResult", "Findings", "NO_SCAN_FINDING", "check_findings", "fault_level", "run_demo"]

#: scan error -> the pull the diff must plan for the damaged replica
_PULL_FOR_ERROR = {
    "CORRUPT_CHUNK": "CORRUPT_CHUNK",
    "INCONSISTENT_CHUNK_LENGTH": "CORRUPT_CHUNK",
    "MISSING_CHUNK": "MISSING_CHUNK",
    "MISSING_DATA_FILE": "MISSING_BLOCK",
}

ErrorKey = Tuple[str, str, Optional[int], Optional[int]]  # replica, error, block, offset

#: faults (ozone layout) found by the scan alone: a block_data entry without its file or a
#: file without an entry concern a block no peer holds and no tree lists, so the container
#: values stay equal and nothing can be pulled
_SCAN_ONLY = ("db-entry-without-file", "file-without-db-entry")


#: the level of a fault whose only trace is in the diff (a tombstone, an extra block)
NO_SCAN_FINDING = "-"


@dataclass
class FaultCheck:
    """One injected fault and whether the jobs found it (with what was missing if not).
    `level`: its scan findings' level (fault_level)."""

    id: int
    type: str
    container: int
    found: bool
    missing: List[str] = field(default_factory=list)
    level: str = NO_SCAN_FINDING


def fault_level(fault: Dict[str, Any]) -> str:
    """The level of an injected fault: `error` if one of the scan findings it must cause is
    an error (merkle.replica.levels), `warning` if all are warnings, NO_SCAN_FINDING if it
    causes none (the diff reports it)."""
    levels = {severity_of(e["error"]) for e in fault.get("expected", [])}
    if not levels:
        return NO_SCAN_FINDING
    return WARNING if levels == {WARNING} else ERROR


@dataclass
class Findings:
    """The comparison of the jobs' output with the generator's ground truth."""

    faults: List[FaultCheck]
    false_errors: List[ErrorKey]  # scan errors no fault explains
    false_mismatches: List[int]  # containers reported mismatched that no fault touched
    false_pulls: List[Tuple[str, str, int, Optional[int]]]  # pulls in untouched containers
    false_pending: List[Tuple[str, int]]  # pending deletions of blocks no fault deleted
    unrecoverable_expected: Set[Tuple[int, int, int]]
    unrecoverable_found: Set[Tuple[int, int, int]]

    @property
    def missed(self) -> List[FaultCheck]:
        return [f for f in self.faults if not f.found]

    @property
    def exact(self) -> bool:
        """True when every fault was found, nothing else was, and the unrecoverable chunks
        are exactly those corrupted on every replica."""
        return (
            not (
                self.missed
                or self.false_errors
                or self.false_mismatches
                or self.false_pulls
                or self.false_pending
            )
            and self.unrecoverable_expected == self.unrecoverable_found
        )

    def table(self) -> str:
        """Per fault type: injected, found, missed; then the false alarms."""
        by_type: Dict[str, List[int]] = {}
        for f in self.faults:
            c = by_type.setdefault(f.type, [0, 0])
            c[0] += 1
            c[1] += f.found
        level_of = {f.type: f.level for f in self.faults}
        lines = [f"{'fault':<22}{'level':<9}{'injected':>8}{'found':>7}{'missed':>8}"]
        for t in sorted(by_type):
            n, ok = by_type[t]
            lines.append(f"{t:<22}{level_of[t]:<9}{n:>8}{ok:>7}{n - ok:>8}")
        n = len(self.faults)
        ok = n - len(self.missed)
        lines.append(f"{'total':<22}{'':<9}{n:>8}{ok:>7}{n - ok:>8}")
        lines.append(
            "level: error = Ozone marks the replica unhealthy or data is damaged "
            "(exit 1); warning = reported, the replica stays ok (exit 1 only with "
            "--strict); - = no scan finding, the diff reports it"
        )
        lines.append(
            f"false alarms: {len(self.false_errors)} scan errors, "
            f"{len(self.false_mismatches)} mismatched containers, "
            f"{len(self.false_pulls)} repair pulls, {len(self.false_pending)} "
            f"pending deletions"
        )
        lines.append(
            f"unrecoverable chunks: {len(self.unrecoverable_expected)} injected "
            f"(corrupted on every replica), {len(self.unrecoverable_found)} reported"
        )
        for f in self.missed:
            lines.append(
                f"  MISSED fault {f.id} ({f.type}, container {f.container}): "
                + "; ".join(f.missing)
            )
        for e in self.false_errors:
            lines.append(f"  FALSE scan error {e}")
        for cid in self.false_mismatches:
            lines.append(f"  FALSE mismatch: container {cid}")
        for p in self.false_pulls:
            lines.append(f"  FALSE pull {p}")
        for r, b in self.false_pending:
            lines.append(f"  FALSE pending deletion of block {b} on {r}")
        return "\n".join(lines)


def _opt(v: Any) -> Optional[int]:
    return None if v is None or v != v else int(v)  # v != v: pandas NaN


def check_findings(
    manifest: Dict[str, Any],
    errors: Iterable[ErrorKey],
    pulls: Iterable[Tuple[str, str, int, Optional[int]]],
    mismatched: Iterable[int],
    unrecoverable: Iterable[Tuple[int, int, int]],
    pending: Iterable[Tuple[str, int]] = (),
) -> Findings:
    """Compare the jobs' findings with a generator manifest.

    errors: (replica path relative to the cluster root, error, block, offset) scan errors;
    pulls: (target replica relative path, kind, block, offset) pulls the report plans
    (spark_udfs.jobs.report.planned_pulls);
    mismatched: container IDs the report counts MISMATCHED (spark_udfs.jobs.report
    .judged_containers); unrecoverable: (container, block, offset) chunks the diff reported
    unrecoverable; pending: (replica relative path, block) blocks the diff reported live on
    that replica but deleted on others.

    A fault of level warning (fault_level) must not make its container mismatched: a
    container touched only by such faults and reported mismatched is a false alarm.

    A tombstone is found when every replica without it is told to adopt it (a
    DIVERGED_DELETED_BLOCK pull, when the container values differ anyway) or is reported as
    a pending deletion (when the tombstone alone leaves the values equal, Ozone's rule).
    """
    found_errors = {(r, e, _opt(b), _opt(o)) for r, e, b, o in errors}
    pull_set = {(r, k, int(b), _opt(o)) for r, k, b, o in pulls}
    unrec_found = {(int(c), int(b), int(o)) for c, b, o in unrecoverable}
    pending_set = {(r, int(b)) for r, b in pending}
    pending_containers = {int(Path(r).name) for r, _ in pending_set}
    unrec_expected = {
        (u["container_id"], u["block_id"], u["offset"]) for u in manifest["unrepairable_chunks"]
    }
    replicas_of = {int(c): v["replicas"] for c, v in manifest["containers"].items()}
    expected_errors: Set[ErrorKey] = set()
    checks: List[FaultCheck] = []
    for f in manifest["faults"]:
        cid = int(f["container_id"])
        level = fault_level(f)
        missing: List[str] = []
        for e in f["expected"]:
            key = (e["replica"], e["error"], e["block_id"], e["offset"])
            expected_errors.add(key)
            if key not in found_errors:
                missing.append(f"scan error {e['error']} on {e['replica']}")
            kind = None if f["type"] in _SCAN_ONLY else _PULL_FOR_ERROR.get(e["error"])
            chunk = (cid, e["block_id"], e["offset"])
            if (
                kind
                and chunk not in unrec_expected
                and (e["replica"], kind, e["block_id"], e["offset"]) not in pull_set
            ):
                missing.append(f"{kind} pull for {e['replica']}")
        others = [r for r in replicas_of[cid] if r not in f["replicas"]]
        if f["type"] == "tombstone":
            for r in others:
                if (r, "DIVERGED_DELETED_BLOCK", f["block_id"], None) not in pull_set and (
                    r,
                    f["block_id"],
                ) not in pending_set:
                    missing.append(f"DIVERGED_DELETED_BLOCK pull or pending deletion for {r}")
        if f["type"] == "extra-block":
            for r in others:
                if (r, "MISSING_BLOCK", f["block_id"], None) not in pull_set:
                    missing.append(f"MISSING_BLOCK pull for {r}")
        if f["type"] in _SCAN_ONLY:  # a block no peer has: nothing to pull, values equal
            checks.append(FaultCheck(f["id"], f["type"], cid, not missing, missing, level))
            continue
        # warnings never make a mismatch (a tree is rebuilt from the data; a replica whose
        # data is not scanned is left out of the comparison)
        if (
            level != WARNING
            and f["type"] != "bitflip-all"
            and cid not in set(mismatched)
            and not (f["type"] == "tombstone" and cid in pending_containers)
        ):
            missing.append(f"container {cid} reported as matching")
        checks.append(FaultCheck(f["id"], f["type"], cid, not missing, missing, level))
    # a container touched only by warning-level faults may not be mismatched either
    touched = {int(f["container_id"]) for f in manifest["faults"] if fault_level(f) != WARNING}
    tombstoned = {(int(c), b) for c, bs in manifest["tombstones"].items() for b in bs}
    return Findings(
        faults=checks,
        false_errors=sorted(found_errors - expected_errors, key=str),
        false_mismatches=sorted(c for c in set(mismatched) if c not in touched),
        false_pulls=sorted((p for p in pull_set if int(Path(p[0]).name) not in touched), key=str),
        false_pending=sorted(
            (r, b) for r, b in pending_set if (int(Path(r).name), b) not in tombstoned
        ),
        unrecoverable_expected=unrec_expected,
        unrecoverable_found=unrec_found,
    )


@dataclass
class DemoResult:
    """What the demo found, and the state after the repair round (if it ran)."""

    root: Path
    findings: Findings
    report: Dict[str, Any]
    after_repair: Optional[Dict[str, Any]] = None  # the report of the re-scan
    plan_ok: Optional[bool] = None  # the decommission step (spark_udfs.demo.decommission)
    copies_ok: Optional[bool] = None  # the copy-check step (spark_udfs.demo.copies)

    @property
    def ok(self) -> bool:
        if not self.findings.exact or self.plan_ok is False or self.copies_ok is False:
            return False
        if self.after_repair is None:
            return True
        s = self.after_repair["summary"]
        unrec = {c for c, _, _ in self.findings.unrecoverable_expected}
        return (
            s["MISMATCHED"] == len(unrec)
            and set(self.after_repair["containers"]["MISMATCHED"]) == unrec
        )


def _rel(root: Path, path: Optional[str]) -> str:
    return os.path.relpath(str(path), str(root)) if path else ""


def _analyse(
    spark: Any, cluster: Path, out: Path, first: int, report_file: Path
) -> Tuple[Any, Dict[str, Any]]:
    """scan -> Parquet -> diff -> report, as `crcmerkle spark run --report FILE` does: the
    executors write the full command list next to `report_file` (FILE.commands/)."""
    from spark_udfs.jobs.diff import diff_scan
    from spark_udfs.jobs.report import build_report
    from spark_udfs.jobs.scan import scan_replicas

    scan_replicas(spark, [str(cluster)]).write(str(out))
    tables = {
        name: spark.read.parquet(str(out / name))
        for name in ("chunks", "blocks", "containers", "errors")
    }
    diff = diff_scan(tables)
    errors, containers = tables["errors"], tables["containers"]
    report = build_report(
        diff,
        replicas=containers,
        errors=errors,
        first=first,
        commands_to=str(report_file) + ".commands",
        commands_ref=report_file.name + ".commands",
    )
    return (diff, errors), report


def run_demo(
    workdir: os.PathLike,
    *,
    containers: int = 12,
    seed: int = 7,
    faults: str = "default",
    master: Optional[str] = None,
    repair: bool = True,
    say: Any = print,
    layout: str = "ozone",
) -> DemoResult:
    """Generate, scan, diff, report, check against the ground truth, repair, re-check.

    `workdir` must be new or empty (the CLI also accepts an earlier demo's); it receives
    cluster/, scan/, report.json and, after the repair (crcmerkle layout), rescan/ and
    report-after-repair.json; unless `repair` is false, the decommission step (both layouts)
    writes plan-cluster/, plan-scan/, plan-scan-after/ and plan.json. `say` receives
    progress lines.
    """
    from merkle.replica.fileio import write_atomic
    from merkle.replica.generate import generate_cluster, parse_faults
    from merkle.replica.reconcile import load_report_jobs, reconcile
    from spark_udfs.cluster.session import get_session
    from spark_udfs.jobs.report import format_text, judged_containers, planned_pulls, to_json

    work = Path(workdir)
    cluster = work / "cluster"
    ozone = layout == "ozone"
    manifest = generate_cluster(
        cluster,
        faults=parse_faults(faults, layout),
        containers=containers,
        seed=seed,
        layout=layout,
        om_db=ozone,
    )
    say(
        f"[1/8] generated {containers} containers x 3 replicas under {cluster} with "
        f"{len(manifest['faults'])} injected faults (ground truth: {cluster}/manifest.json)"
    )
    spark = get_session(master, app_name="crcmerkle-demo")
    say(f"[2/8] Spark {spark.version} on {spark.sparkContext.master}: scan, diff, report")
    (diff, errors), report = _analyse(
        spark, cluster, work / "scan", first=100, report_file=work / "report.json"
    )
    write_atomic(work / "report.json", to_json(report).encode())
    say(format_text(report))
    rows = errors.select("replica", "error", "block", "offset").collect()
    judged = judged_containers(diff, errors)
    # the pulls the report plans (none into a replica whose data was not scanned)
    pulls = planned_pulls(diff, judged).select("replica", "kind", "block", "offset").collect()
    findings = check_findings(
        manifest,
        errors=[(_rel(cluster, r[0]), r[1], r[2], r[3]) for r in rows],
        pulls=[(_rel(cluster, p[0]), p[1], p[2], p[3]) for p in pulls],
        mismatched=[r[0] for r in judged.filter("mismatched").select("container").collect()],
        unrecoverable=[
            (u[0], u[1], u[2])
            for u in diff.unrecoverable.select("container", "block", "offset").collect()
        ],
        pending=[
            (_rel(cluster, p[0]), p[1])
            for p in diff.pending_deletions.select("replica", "block").collect()
        ],
    )
    say("[3/8] found vs injected (ground truth)")
    say(findings.table())
    result = DemoResult(cluster, findings, report)
    if layout_named(layout).repair != REPAIR_IN_PLACE:
        # a datanode repairs its own replicas (container reconciliation): ask Ozone to
        say(
            f"[4/8] repair is the datanodes' own (Ozone container reconciliation): "
            f"{len(report['ozone_reconcile'])} container(s) to reconcile, listed above"
        )
        say(
            "[5/8] no local repair on running datanodes (crcmerkle reconcile refuses them; "
            "--offline repairs a stopped datanode's volumes)"
        )
        result.copies_ok = _copy_step(work, spark, cluster, manifest, say)
        if repair:
            result.plan_ok = _plan_step(work, spark, say, layout)
        return result
    if not repair:
        return result
    # every command, as `crcmerkle reconcile --report` reads them (the full list when the
    # JSON holds only the first ones)
    jobs = load_report_jobs(work / "report.json")
    say(
        f"[4/8] repair: {len(jobs)} reconcile command(s) from the report "
        f"(crcmerkle reconcile --report {work / 'report.json'})"
    )
    for (target, *peers), _ in jobs:
        reconcile(target, peers)
    spark.catalog.clearCache()
    _, after = _analyse(
        spark, cluster, work / "rescan", first=100, report_file=work / "report-after-repair.json"
    )
    write_atomic(work / "report-after-repair.json", to_json(after).encode())
    result.after_repair = after
    s = after["summary"]
    say(
        f"[5/8] re-scan after repair: {s['MATCH']} container(s) match, {s['MISMATCHED']} "
        f"mismatched ({s['UNRECOVERABLE']} holding a chunk corrupted on every replica: "
        f"{', '.join(f'#{c}' for c in after['containers']['UNRECOVERABLE']) or 'none'})"
    )
    say(
        "[6/8] copy check: shown on the Ozone layout (`--layout ozone`), whose OM DB names "
        "the keys that are copied"
    )
    result.plan_ok = _plan_step(work, spark, say, layout)
    return result


def _copy_step(work: Path, spark: Any, cluster: Path, manifest: Dict[str, Any], say: Any) -> bool:
    """Step 6 (Ozone layout): the keys' copies checked from stored checksums
    (spark_udfs.demo.copies)."""
    from spark_udfs.demo.copies import run_copy_step

    return run_copy_step(work, spark, cluster, manifest, work / "scan", say, "[6/8]")


def _plan_step(work: Path, spark: Any, say: Any, layout: str) -> bool:
    """Steps 6-7: the decommission plan (spark_udfs.demo.decommission) on its own small cluster, in
    the crcmerkle layout, where `crcmerkle replicate` carries the copies out."""
    from spark_udfs.demo.decommission import run_plan_demo

    return run_plan_demo(work, spark, say, demo_layout=layout)
