"""The demo's decommission step: a node Ozone's replica count would let go although it holds
the only good copy of a container, and the plan that makes its decommission safe.

A small cluster (7 datanodes, 10 containers x 3 replicas, no faults; a datanode the scan
finds no replica on is unknown to the plan, so every node holds some); container 1 gets a
fourth replica with `replicate` (its only over-replicated container), then the bytes of its
three copies other than the first are flipped: three replicas on in-service nodes, none good.
Ozone counts 3 healthy replicas and would let the first holder be DECOMMISSIONED; the plan
says it holds the last good copy, and copies it (from the leaving node, still running) to the
free in-service nodes. After `replicate --report` a re-scan and re-plan say it may stop.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, List

__all__ = ["run_plan_demo"]


def _flip_first_byte(replica: Path) -> None:
    block = sorted((replica / "chunks").iterdir())[0]
    with open(block, "r+b") as f:
        b = f.read(1)
        f.seek(0)
        f.write(bytes([b[0] ^ 0x01]))


def _plan(spark: Any, cluster: Path, out: Path, node: str) -> Dict[str, Any]:
    from spark_udfs.diff import diff_scan
    from spark_udfs.plan import build_plan
    from spark_udfs.scan import scan_replicas

    spark.catalog.clearCache()
    scan_replicas(spark, [str(cluster)]).write(str(out))
    t = {n: spark.read.parquet(str(out / n)) for n in ("chunks", "blocks", "containers",
                                                         "errors")}
    return build_plan(diff_scan(t), decommission=[node], errors=t["errors"],
                      blocks=t["blocks"], chunks=t["chunks"], first=20)


def run_plan_demo(work: Path, spark: Any, say: Callable[[str], Any] = print) -> bool:
    """Run the step under `work` (plan-cluster/, plan-scan*/, plan.json); True when the plan
    blocked the node that Ozone would let go, and its commands made it safe."""
    from merkle.replica.fileio import write_atomic
    from merkle.replica.generate import generate_cluster
    from merkle.replica.reconcile import replica_groups
    from merkle.replica.replicate import commands_from_plan, replicate
    from spark_udfs.plan import format_text, to_json

    cluster = work / "plan-cluster"
    generate_cluster(cluster, datanodes=7, volumes=1, containers=10, seed=19, max_blocks=3)
    reps: List[Path] = sorted(replica_groups(cluster)[1])
    holders = {p.parent.parent.name for p in reps}
    free = sorted(d.name for d in cluster.iterdir() if d.is_dir() and d.name not in holders)
    fourth = cluster / free[0] / "vol0" / "1"
    replicate(reps[0], fourth)
    node = reps[0].parent.parent.name
    for r in reps[1:] + [fourth]:
        _flip_first_byte(r)
    say(f"[plan 1/2] decommission {node}: container 1 has 4 replicas, the 3 on in-service nodes "
        f"corrupt; {node} holds its only good copy")
    plan = _plan(spark, cluster, work / "plan-scan", node)
    write_atomic(work / "plan.json", to_json(plan).encode())
    say(format_text(plan))
    n = plan["datanodes"][0]
    # container 1: Ozone's count (3 healthy) would allow; the node's other containers are
    # under-replicated by either count
    blocked = (not n["can_stop"] and n["can_stop_after_copies"]
               and 1 in plan["containers"]["WOULD_LOSE"]
               and 1 in plan["containers"]["OZONE_WOULD_ALLOW"])
    pairs = commands_from_plan(plan)
    for s, t in pairs:
        replicate(s, t)
    after = _plan(spark, cluster, work / "plan-scan-after", node)
    ok = blocked and after["datanodes"][0]["can_stop"]
    say(f"[plan 2/2] ran the {len(pairs)} copy command(s) (crcmerkle replicate --report "
        f"{work / 'plan.json'}); re-plan: {node} "
        + ("may stop now" if after["datanodes"][0]["can_stop"] else "is STILL held back")
        + ("" if ok else " -- UNEXPECTED"))
    return ok
