"""The demo's decommission step: a node Ozone's replica count would let go although it holds
the only good copy of a container, and the plan that makes its decommission safe.

A small cluster in the crcmerkle layout (7 datanodes dn0..dn6, 10 containers x 3 replicas,
no faults), plus a datanode dn7 holding one replica only: a fourth copy of container 1 made
with `replicate` (the only over-replicated container). Then a byte of each of container 1's
three generated copies is flipped: three replicas on in-service nodes, none good. Ozone
counts 3 healthy replicas and would let dn7 be DECOMMISSIONED at once; the plan says it holds
the last good copy and copies it (from the leaving node, still running) to in-service nodes
without a replica. After the copies (`replicate --report`, here the same calls) a re-scan
and re-plan say it may stop. The crcmerkle layout in both demos: `crcmerkle replicate`
cannot create replicas on Ozone volumes (there the plan leaves the copies to Ozone).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, List

__all__ = ["DATANODES", "run_plan_demo"]

#: datanodes generated (dn0..dn6); the leaving one, dn7, is added holding one replica
DATANODES = 7


def _flip_first_byte(replica: Path) -> None:
    block = sorted((replica / "chunks").iterdir())[0]
    with open(block, "r+b") as f:
        b = f.read(1)
        f.seek(0)
        f.write(bytes([b[0] ^ 0x01]))


def _plan(spark: Any, cluster: Path, out: Path, node: str) -> Dict[str, Any]:
    from spark_udfs.jobs.diff import diff_scan
    from spark_udfs.jobs.plan import build_plan
    from spark_udfs.jobs.scan import scan_replicas

    spark.catalog.clearCache()
    scan_replicas(spark, [str(cluster)]).write(str(out))
    t = {n: spark.read.parquet(str(out / n)) for n in ("chunks", "blocks", "containers", "errors")}
    return build_plan(
        diff_scan(t),
        decommission=[node],
        errors=t["errors"],
        blocks=t["blocks"],
        chunks=t["chunks"],
        first=20,
    )


def run_plan_demo(
    work: Path, spark: Any, say: Callable[[str], Any] = print, demo_layout: str = "crcmerkle"
) -> bool:
    """Run the step under `work` (plan-cluster/, plan-scan/, plan-scan-after/, plan.json);
    True when the plan held back the node Ozone's count would let go, and its commands,
    carried out, made it safe. `demo_layout`: the main demo's layout (only the wording)."""
    from merkle.replica.fileio import write_atomic
    from merkle.replica.generate import generate_cluster
    from merkle.replica.reconcile import replica_groups
    from merkle.replica.replicate import commands_from_plan, replicate
    from spark_udfs.jobs.plan import format_text, to_json

    cluster = work / "plan-cluster"
    generate_cluster(cluster, datanodes=DATANODES, volumes=1, containers=10, seed=19, max_blocks=3)
    reps: List[Path] = sorted(replica_groups(cluster)[1])
    node = f"dn{DATANODES}"  # a datanode of its own, holding only the fourth copy
    (cluster / node / "vol0").mkdir(parents=True)
    fourth = cluster / node / "vol0" / "1"
    replicate(reps[0], fourth)
    for r in reps:
        _flip_first_byte(r)
    where = (
        ""
        if demo_layout == "crcmerkle"
        else " (a cluster of its own in the crcmerkle layout, where crcmerkle replicate makes "
        "the copies; on Ozone volumes the plan leaves them to Ozone's ReplicationManager)"
    )
    say(
        f"[7/8] decommission {node}{where}: container 1 has 4 replicas; the 3 on in-service "
        f"nodes are corrupt, {node} holds its only good copy"
    )
    plan = _plan(spark, cluster, work / "plan-scan", node)
    write_atomic(work / "plan.json", to_json(plan).encode())
    say(format_text(plan))
    n = plan["datanodes"][0]
    # Ozone counts container 1's 3 in-service replicas as healthy: the node may go now
    blocked = (
        n["ozone_can_stop"]
        and not n["can_stop"]
        and n["can_stop_after_copies"]
        and plan["containers"]["WOULD_LOSE"] == [1]
        and 1 in plan["containers"]["OZONE_WOULD_ALLOW"]
    )
    say(
        f"Ozone's replica count (3 healthy copies in service) would let {node} be "
        f"DECOMMISSIONED now, losing container 1's only good copy; the plan holds it back and "
        f"copies that replica first"
        if n["ozone_can_stop"]
        else f"Ozone's replica count would hold {node} back too -- UNEXPECTED"
    )
    pairs = commands_from_plan(plan)
    for src, tgt in pairs:
        replicate(src, tgt)
    after = _plan(spark, cluster, work / "plan-scan-after", node)
    free = after["datanodes"][0]["can_stop"]
    ok = blocked and free and after["summary"]["would_lose"] == 0
    say(
        f"[8/8] ran the plan's {len(pairs)} copy command(s) (crcmerkle replicate --report "
        f"{work / 'plan.json'}); scan and plan again: {node} "
        + ("may stop now" if free else "is STILL held back")
        + ("" if ok else " -- UNEXPECTED")
    )
    return ok
