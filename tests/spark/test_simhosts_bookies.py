"""The data-local BookKeeper scan on simulated bookie hosts (tests/spark/simhosts.py with
the bookie layout): four generated bookies (mixed storages: DbLedgerStorage, Sorted and
Interleaved, one fault of every type), bookie-(i+1) on 127.0.0.(i+2) in its own mount
namespace holding only its two ledger directories at /srv/ozone/ledgers-0 and -1 (which its
cookies name); the driver (this process) sees none of them. The ledger metadata comes from a
real ZooKeeper on 127.0.0.1 (Debian's package) holding the generated znodes.

`crcmerkle spark run --datanodes FILE --zookeeper` finds exactly the manifest's findings,
each with its level, every ledger directory scanned on its own host; `spark plan
--decommission` holds back the bookie with a flipped entry's last good copy; an inventory
host without a worker, a worker with another bookie's disks and an inventory that names
another bookie for a host are each reported, and nothing of theirs counts as a copy or as
missing. Skipped in one line where the kernel refuses mount namespaces."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from simhosts import (  # noqa: F401
    ABSENT_HOST,
    VOLUMES,
    host_of,
    sim_cluster,
    sim_spark,
)

SIM_GENERATE = {"layout": "bookkeeper", "storage": "mixed", "faults": "default", "seed": 7}
SIM_HOSTS = 4


@pytest.fixture(scope="module")
def zk_spec(sim_cluster: Any) -> Iterator[str]:
    """HOST:PORT/root of a real ZooKeeper holding the generated cluster's znodes."""
    from zookeeper_server import ZooKeeperServer, load_znode_tree, require_zookeeper

    require_zookeeper()
    meta = sim_cluster.manifest["metadata"]
    top = sim_cluster.cluster_dir / meta["znode_tree"] / meta["root"].strip("/")
    with ZooKeeperServer() as server:
        load_znode_tree(server.client(), str(top), under=meta["root"])
        yield server.hosts + meta["root"]


def _run(args: List[str], capsys: Any) -> Tuple[int, str, str]:
    from crcmerkle_cli import main

    rc = main(args)
    out, err = capsys.readouterr()
    return rc, out, err


def _table(spark: Any, out: Path, name: str) -> List[Dict[str, Any]]:
    from spark_udfs.jobs import bookkeeper as bk

    schema = {"findings": bk.FINDING_SCHEMA, "volumes": bk.VOLUME_SCHEMA}[name]
    return [r.asDict() for r in spark.read.schema(schema).parquet(os.fspath(out / name)).collect()]


def _on_hosts(expected: List[Dict[str, Any]], mounts: List[str]) -> List[Dict[str, Any]]:
    """The manifest's findings with their files where the hosts mount them: the generated
    `bookie-N/ledgers-d/...` is `<mounts[d]>/...` on bookie N's host."""
    out = []
    for f in expected:
        f = dict(f)
        if f.get("file"):
            parts = f["file"].split("/")
            d = int(parts[1].rsplit("-", 1)[1])
            f["file"] = "/".join([mounts[d], *parts[2:]])
        out.append(f)
    return out


def _scan(
    sim: Any, tmp: Path, zk: str, inventory: Path, capsys: Any, *extra: str, out: str = "out"
) -> Tuple[int, Path, str]:
    out_dir = tmp / out
    rc, text, err = _run(
        [
            "spark",
            "run",
            "--datanodes",
            os.fspath(inventory),
            "--zookeeper",
            zk,
            "-o",
            os.fspath(out_dir),
            "--master",
            sim.master_url,
            "--executor-wait",
            "5",
            "--json",
            *extra,
        ],
        capsys,
    )
    return rc, out_dir, text + err


def test_every_fault_is_found_on_its_host_and_the_plan_counts_good_copies(
    sim_cluster: Any, sim_spark: Any, zk_spec: str, tmp_path: Path, capsys: Any
) -> None:
    from spark_udfs.demo.bookkeeper import check_bookie_findings, last_good_copy_holder

    sim = sim_cluster
    inv = sim.write_inventory(tmp_path / "bookies.json", absent=())
    rc, out, text = _scan(sim, tmp_path, zk_spec, inv, capsys)
    assert rc == 1, text[-3000:]  # the generated faults are findings
    vols = _table(sim_spark, out, "volumes")
    by_host = {w.host: w.datanode.uuid for w in sim.workers.values()}
    assert sorted((v["host"], v["directory"], v["status"]) for v in vols) == [
        (host_of(i), p, "SCANNED") for i in range(SIM_HOSTS) for p in sim.mount_paths
    ]
    assert all(v["bookie"] == by_host[v["host"]] for v in vols)
    storages = {v["storage"] for v in vols}
    assert {"DbLedgerStorage", "InterleavedLedgerStorage"} <= storages, storages
    found = _table(sim_spark, out, "findings")
    expected = _on_hosts(sim.manifest["expected_findings"], sim.mount_paths)
    missing, extra = check_bookie_findings(expected, found, "/")
    assert (missing, extra) == ([], []), (missing, extra)
    # the summary the report printed: every finding counted, the copies of every bookie
    doc = json.loads(text[text.index("{") :])
    assert doc["summary"]["findings"] == len(found) == len(expected)
    assert sorted(doc["bookies"]) == sorted(by_host.values())

    holder = last_good_copy_holder(sim.manifest)
    assert holder is not None
    bookie, lid, eid = holder
    rcp, ptext, perr = _run(
        ["spark", "plan", os.fspath(out), "--decommission", bookie, "--json"]
        + ["--master", sim.master_url],
        capsys,
    )
    plan = json.loads(ptext)
    assert rcp == 1, perr
    mine = plan["bookies"][bookie]
    held = next(led for led in mine["ledgers"] if led["ledger"] == lid)
    last = held["reasons"]["LAST_GOOD_COPY"]
    assert not mine["may_go"] and last["first_entry"] <= eid <= last["last_entry"], plan


def test_each_bookie_host_keeps_its_state_and_a_second_pass_reads_no_log(
    sim_cluster: Any, sim_spark: Any, zk_spec: str, tmp_path: Path, capsys: Any
) -> None:
    """`--state` on the data-local bookie scan (issue 34): each host's entry logs' records
    in its own state directory (STATE_MOUNT, which only that host sees); a second pass
    within --max-age reads no byte of any entry log and finds what the first found."""
    from spark_udfs.rehearsal.simhosts import STATE_MOUNT

    sim = sim_cluster
    inv = sim.write_inventory(tmp_path / "bookies.json", absent=())
    state = ["--state", STATE_MOUNT, "--max-age", "7d"]
    runs = [_scan(sim, tmp_path, zk_spec, inv, capsys, *state, out=f"o{n}") for n in range(2)]
    assert [rc for rc, _, _ in runs] == [1, 1], runs[1][2][-3000:]
    vols = [_table(sim_spark, out, "volumes") for _, out, _ in runs]
    assert sum(v["bytes_read"] for v in vols[0]) > 0
    assert sum(v["bytes_read"] for v in vols[1]) == 0
    assert {v["status"] for v in vols[1]} == {"SCANNED"}
    keys = ("error", "bookie", "ledger", "entry", "file", "offset", "detail")
    found = [
        sorted(tuple(f[k] for k in keys) for f in _table(sim_spark, out, "findings"))
        for _, out, _ in runs
    ]
    assert found[0] == found[1] and found[0]
    for i in range(SIM_HOSTS):  # a database on each host's own disk, none on the driver's
        assert list(sim.state_dir(host_of(i)).glob("volume-*/*.sqlite")), host_of(i)


def test_hosts_without_a_worker_or_with_another_bookies_disks_count_nothing(
    sim_cluster: Any, sim_spark: Any, zk_spec: str, tmp_path: Path, capsys: Any
) -> None:
    from spark_udfs.cluster.locality import wait_for_executors

    sim = sim_cluster
    fresh = host_of(SIM_HOSTS)  # a new host started with bookie-1's disks
    sim.start_worker(fresh, 0)
    sim.wait_workers([fresh])
    wait_for_executors(sim_spark.sparkContext, [fresh], 120.0)
    try:
        rows = sim.inventory(absent=(ABSENT_HOST,))
        twin, other = host_of(0), host_of(1)
        for r in rows:
            if r["host"] == other:  # the inventory expects another bookie there
                r["bookie"] = "10.9.9.9:3181"
            if r["host"] == fresh:  # no bookie named: what its disks say is taken
                del r["bookie"]
        inv = tmp_path / "bookies.json"
        inv.write_text(json.dumps(rows))
        rc, out, text = _scan(sim, tmp_path, zk_spec, inv, capsys)
    finally:
        sim.kill_worker(fresh)
    assert rc == 1, text[-3000:]
    vols = {(v["host"], v["directory"]): v for v in _table(sim_spark, out, "volumes")}
    for p in sim.mount_paths:
        assert vols[(ABSENT_HOST, p)]["status"] == "NO_EXECUTOR"
        assert vols[(other, p)]["status"] == "WRONG_BOOKIE"
        assert vols[(twin, p)]["status"] == vols[(fresh, p)]["status"] == "DUPLICATE_BOOKIE"
        assert vols[(host_of(2), p)]["status"] == "SCANNED"
    assert all(v["copies"] == 0 for v in vols.values() if v["status"] != "SCANNED")
    found = _table(sim_spark, out, "findings")
    kinds = [f["error"] for f in found]
    assert kinds.count("NO_EXECUTOR") == kinds.count("WRONG_BOOKIE") == VOLUMES
    assert kinds.count("DUPLICATE_BOOKIE") == 2  # once per host that claims it
    twin_id, other_id = (sim.workers[h].datanode.uuid for h in (twin, other))
    # not read is not missing: neither bookie's absent copies are MISSING_ENTRY findings
    assert not [
        f for f in found if f["error"] == "MISSING_ENTRY" and f["bookie"] in (twin_id, other_id)
    ]
    assert all(f["severity"] == "error" for f in found if f["error"] in ("WRONG_BOOKIE",))


pytestmark = pytest.mark.slow
