"""`crcmerkle spark demo --hosts N`: the data-local path of a real cluster, rehearsed on one
machine (root, Linux).

A Spark standalone master on 127.0.0.1 and N workers on 127.0.0.2.., each in its own mount
namespace where its datanode's two volumes, and only those, are at /srv/ozone/disk0 and
/srv/ozone/disk1 (spark_udfs.rehearsal.simhosts); the driver (this process) sees none of
them. Then what an operator runs on a real cluster: the inventory of hosts (written as the
plain host list; on a real cluster `ozone admin datanode list --json` with `--ozone-conf`),
the data-local scan (spark_udfs.jobs.hostscan: every host reads its own disks), the report that
names each replica's host, and a decommission plan for one host. The findings are compared
with the generator's ground truth as the one-machine demo does (spark_udfs.demo
.check_findings), a replica named by (datanode, path on its host) mapped back to the
generated dn<i>/vol<v> directory it came from.

Everything started is stopped, also on failure and on Ctrl-C or SIGTERM: the daemons (each
dies with this process's main thread anyway, PR_SET_PDEATHSIG), the mounts (they live only
in the workers' namespaces), the private directory of logs and work dirs, and the mount
points that were created. The generated cluster stays in the demo directory with the
reports, for the operator to look at.
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

from spark_udfs.rehearsal.simhosts import (
    MAX_DATANODES,
    VOLUMES,
    SimCluster,
    SimHostsUnavailable,
    check_can_simulate,
    check_mount_points,
    check_not_running,
    host_of,
    mount_paths,
    start_cluster,
    stop_cluster,
)

__all__ = [
    "MIN_HOSTS",
    "MAX_HOSTS",
    "HostsDemoResult",
    "check_requirements",
    "run_hosts_demo",
    "simulated_cluster",
]

#: three replicas per container need three datanodes (Ozone's RATIS/THREE)
MIN_HOSTS = 3
MAX_HOSTS = MAX_DATANODES
#: the host whose decommission is planned
LEAVING = 0
#: the demo's steps
STEPS = 6


@dataclass
class HostsDemoResult:
    """What the rehearsal found: the comparison with the ground truth, the report, the
    plan for LEAVING's host and whether that plan named it as an operator needs."""

    findings: Any  # spark_udfs.demo.Findings
    report: Dict[str, Any]
    plan: Dict[str, Any]
    leaving: str  # the host whose decommission was planned
    hosts_named: bool  # every mismatched replica of the report names its host
    plan_ok: bool  # the plan names the leaving host and its datanode, and Ozone's command

    @property
    def ok(self) -> bool:
        return self.findings.exact and self.hosts_named and self.plan_ok


def check_requirements(hosts: int) -> None:
    """SimHostsUnavailable (one line: what is missing) unless `hosts` simulated hosts can
    run here: a count in range, root, unshare and mount, Java, a kernel that allows a
    private mount namespace with a bind mount, /srv/ozone/disk* free (absent, or empty
    directories nothing is mounted on), and no other rehearsal running. Changes nothing
    (start_cluster checks the mount points and takes the lock again, for good)."""
    if not MIN_HOSTS <= hosts <= MAX_HOSTS:
        raise SimHostsUnavailable(
            f"{MIN_HOSTS} to {MAX_HOSTS} hosts (three replicas per "
            f"container need three datanodes), not {hosts}"
        )
    check_can_simulate()
    check_mount_points(mount_paths())
    check_not_running()


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt while the rehearsal runs (as Ctrl-C does), so its
    clean-up runs; restored afterwards. Only from the main thread (else left alone)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def simulated_cluster(
    work: Path,
    hosts: int,
    *,
    containers: int,
    seed: int,
    faults: str,
    say: Callable[[str], Any] = print,
) -> Iterator[SimCluster]:
    """The started simulated cluster, its generated volumes in `work`/cluster; stopped and
    cleaned up on leaving, however that happens. SimHostsUnavailable (one line) when it
    cannot start here; another running rehearsal is not waited for."""
    with _sigterm_interrupts():
        sim = start_cluster(
            {"containers": containers, "seed": seed, "faults": faults},
            datanodes=hosts,
            cluster_dir=work / "cluster",
            lock_wait_s=0,
        )
        try:
            yield sim
        finally:
            stop_cluster(sim)
            say(
                f"stopped the master and {hosts} workers; their mounts went with their "
                f"namespaces; removed {sim.root} and the mount points created"
            )


def _dn_path(sim: SimCluster, datanode: Optional[str], replica: Optional[str]) -> str:
    """A replica as (datanode UUID, path on its host) -> the generated directory it came
    from, relative to the cluster (dn<i>/vol<v>/...), as the manifest names it; a path
    under no mount point stays as it is (a finding the ground truth will not explain)."""
    index = {d.uuid: d.index for d in sim.datanodes}.get(datanode or "")
    text = replica or ""
    if index is None:
        return text
    for v, mount in enumerate(sim.mount_paths):
        if text == mount or text.startswith(mount + "/"):
            return f"dn{index}/vol{v}" + text[len(mount) :]
    return text


def _read_scan(spark: Any, out: Path) -> Dict[str, Any]:
    from spark_udfs.jobs.scan import TABLE_SCHEMAS

    return {
        name: spark.read.schema(schema).parquet(str(out / name))
        for name, schema in TABLE_SCHEMAS.items()
    }


def _findings(sim: SimCluster, diff: Any, errors: Any) -> Any:
    """check_findings on the host scan's tables, replicas mapped back to their generated
    directories."""
    from spark_udfs.demo import check_findings
    from spark_udfs.jobs.report import judged_containers, planned_pulls

    rows = errors.select("datanode", "replica", "error", "block", "offset").collect()
    judged = judged_containers(diff, errors)
    pulls = (
        planned_pulls(diff, judged)
        .select("datanode", "replica", "kind", "block", "offset")
        .collect()
    )
    pending = diff.pending_deletions.select("datanode", "replica", "block").collect()
    return check_findings(
        sim.manifest,
        errors=[(_dn_path(sim, r[0], r[1]), r[2], r[3], r[4]) for r in rows],
        pulls=[(_dn_path(sim, p[0], p[1]), p[2], p[3], p[4]) for p in pulls],
        mismatched=[r[0] for r in judged.filter("mismatched").select("container").collect()],
        unrecoverable=[
            (u[0], u[1], u[2])
            for u in diff.unrecoverable.select("container", "block", "offset").collect()
        ],
        pending=[(_dn_path(sim, p[0], p[1]), p[2]) for p in pending],
    )


def _hosts_named(report: Dict[str, Any], hosts: List[str]) -> bool:
    """Every replica the report lists as mismatched names one of the simulated hosts."""
    replicas = [r for m in report.get("mismatched", []) for r in m.get("replicas", [])]
    return bool(replicas) and all(r.get("host") in hosts for r in replicas)


def _plan_names(plan: Dict[str, Any], host: str, uuid: str) -> bool:
    """The plan resolved `host` to its datanode and gives Ozone's command for the host."""
    nodes = plan.get("datanodes", [])
    argv = [e.get("argv") for e in plan.get("ozone", {}).get("datanodes", [])]
    return (
        len(nodes) == 1
        and nodes[0].get("datanode") == uuid
        and nodes[0].get("host") == host
        and plan["parameters"]["decommission"] == [uuid]
        and argv == [["ozone", "admin", "datanode", "decommission", host]]
    )


def run_hosts_demo(
    work: Path, sim: SimCluster, spark: Any, say: Callable[[str], Any] = print
) -> HostsDemoResult:
    """Inventory, data-local scan, report, ground-truth check and decommission plan on the
    started `sim` with the driver session `spark` (see the module docstring); writes
    datanodes.json, scan/, report.json (+ .commands/) and plan.json into `work`."""
    from merkle.replica.fileio import write_atomic
    from merkle.replica.inventory import load_inventory
    from spark_udfs.jobs import plan as plans, report as reports
    from spark_udfs.jobs.diff import diff_scan
    from spark_udfs.jobs.hostscan import scan_datanodes

    hosts = sorted(sim.workers)
    say(
        f"[2/{STEPS}] Spark {spark.version}: master {sim.master_url}, {len(hosts)} workers, "
        f"each in its own mount namespace with its datanode's volumes at "
        f"{', '.join(sim.mount_paths)} (the driver sees empty directories there):"
    )
    for w in sorted(sim.workers.values(), key=lambda w: w.host):
        say(
            f"  {w.host:<11} dn{w.datanode.index} {w.datanode.uuid}  "
            f"{', '.join(str(s) for s in w.datanode.sources)}"
        )
    inventory_file = work / "datanodes.json"
    write_atomic(inventory_file, (json.dumps(sim.inventory(absent=()), indent=1) + "\n").encode())
    inventory = load_inventory(str(inventory_file))
    say(
        f"[3/{STEPS}] inventory {inventory_file}: {len(inventory.hosts)} hosts x "
        f"{VOLUMES} volumes (on a real cluster: `ozone admin datanode list --json` with "
        f"--ozone-conf ozone-site.xml)"
    )
    scan_dir = work / "scan"
    # unthrottled: the demo's volumes are a few MB; a live datanode keeps the default rate
    scan_datanodes(spark, inventory, bytes_per_second=None).write(str(scan_dir))
    t = _read_scan(spark, scan_dir)
    diff = diff_scan(t)
    report_file = work / "report.json"
    report = reports.build_report(
        diff,
        replicas=t["containers"],
        errors=t["errors"],
        first=100,
        commands_to=str(report_file) + ".commands",
        commands_ref=report_file.name + ".commands",
        volumes=t["volumes"],
        inventory=inventory,
    )
    write_atomic(report_file, reports.to_json(report).encode())
    say(
        f"[4/{STEPS}] data-local scan: each host read its own volumes (crcmerkle spark run "
        f"--datanodes {inventory_file} -o {scan_dir} --report {report_file}):"
    )
    say(reports.format_text(report))
    findings = _findings(sim, diff, t["errors"])
    say(f"[5/{STEPS}] found vs injected (ground truth: {sim.cluster_dir}/manifest.json)")
    say(findings.table())
    leaving = sim.workers[host_of(LEAVING)]
    plan = plans.build_plan(
        diff,
        decommission=[leaving.host],
        errors=t["errors"],
        blocks=t["blocks"],
        chunks=t["chunks"],
        first=20,
        replicas=t["containers"],
        volumes=t["volumes"],
        inventory=inventory,
    )
    write_atomic(work / "plan.json", plans.to_json(plan).encode())
    say(
        f"[6/{STEPS}] decommission {leaving.host} (crcmerkle spark plan {scan_dir} "
        f"--datanodes {inventory_file} --decommission {leaving.host}):"
    )
    say(plans.format_text(plan))
    return HostsDemoResult(
        findings,
        report,
        plan,
        leaving.host,
        _hosts_named(report, hosts),
        _plan_names(plan, leaving.host, leaving.datanode.uuid),
    )
