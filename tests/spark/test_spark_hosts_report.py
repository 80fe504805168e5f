"""Report and plan name every datanode by its identity and its host, never by a path; volumes
and hosts that were not verified are findings, and their containers are never MATCH.

One generated Ozone cluster (3 datanodes dn0..dn2, 2 volumes each), scanned once from one
directory tree; its tables are then rewritten as a data-local scan would have written them
(a `host` per datanode, and, in the degraded copy, dn2's host without an executor and its
replicas absent), so that the report and plan can be checked without simulated hosts."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from merkle.cli import main
from merkle.replica.generate import generate_cluster, parse_faults
from merkle.replica.inventory import parse_inventory
from spark_udfs.cluster.hosts import command_host, unscanned_hosts

HOSTS = {"dn0": "h0.example", "dn1": "h1.example", "dn2": "h2.example"}


def run(capsys: Any, *argv: Any) -> Tuple[int, str, str]:
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def both(capsys: Any, tmp: Path, *argv: Any) -> Tuple[int, Dict[str, Any], str]:
    """(exit status, the JSON, the text) of one report or plan run (--report FILE)."""
    f = tmp / "out.json"
    status, text, _ = run(capsys, *argv, "--report", f)
    return status, json.loads(f.read_text()), text


def _rewrite(
    spark: Any,
    src: Path,
    dst: Path,
    uuid_host: Dict[str, str],
    drop: str = "",
    volume_status: Dict[str, List[Tuple[str, str]]] = None,
) -> None:
    """The scan tables of `src` as written on hosts: `host` set from `uuid_host`, the rows of
    datanode `drop` removed (its host had no executor), and its volumes given the statuses
    of `volume_status` (uuid -> [(status, ran_on)], one per volume, in path order)."""
    from pyspark.sql import functions as F

    from spark_udfs.jobs.scan import TABLE_SCHEMAS

    m = spark.createDataFrame(sorted(uuid_host.items()), "datanode string, h string")
    for name, schema in TABLE_SCHEMAS.items():
        df = spark.read.schema(schema).parquet(str(src / name))
        cols = [c.split()[0] for c in schema.split(", ")]
        if "host" in cols:
            df = df.join(F.broadcast(m), "datanode", "left").withColumn("host", F.col("h"))
        if drop and name != "volumes":
            df = df.filter(F.col("datanode") != drop)
        df = df.select(*cols)
        if name == "volumes" and volume_status:
            rows = []
            for r in df.orderBy("volume").collect():
                d = r.asDict()
                todo = volume_status.get(d["datanode"])
                if todo:
                    d["status"], d["ran_on"] = todo.pop(0)
                    d["detail"], d["replicas"] = f"forged {d['status']}", 0
                rows.append(tuple(d[c] for c in cols))
            df = spark.createDataFrame(rows, schema)
        df.write.mode("overwrite").partitionBy("datanode").parquet(str(dst / name))


@pytest.fixture(scope="module")
def hosted(spark: Any, tmp_path_factory: Any) -> Iterator[Dict[str, Any]]:
    base = tmp_path_factory.mktemp("hosts")
    root = base / "cluster"
    manifest = generate_cluster(
        root,
        containers=6,
        seed=5,
        layout="ozone",
        faults=parse_faults("bitflip=1,bitflip-all=1,tombstone=1", "ozone"),
    )
    uuids = manifest["datanode_uuids"]  # dn0 -> its datanodeUuid
    assert main(["spark", "scan", str(root), "-o", str(base / "scan")]) == 1
    by_uuid = {uuids[d]: HOSTS[d] for d in HOSTS}
    _rewrite(spark, base / "scan", base / "onhosts", by_uuid)
    down = uuids["dn2"]
    _rewrite(
        spark,
        base / "scan",
        base / "degraded",
        by_uuid,
        drop=down,
        volume_status={down: [("NO_EXECUTOR", None), ("WRONG_HOST", "h0.example")]},
    )
    inv = base / "inventory.json"
    inv.write_text(
        json.dumps(
            # each host's volumes as its rows name them: a volume the inventory does not give its
            # host vouches for nothing (NOT_IN_INVENTORY, issue 36 item 1)
            [
                {
                    "host": HOSTS[d],
                    "uuid": uuids[d],
                    "volumes": sorted(
                        str(v) for v in (root / d).iterdir() if v.name.startswith("vol")
                    ),
                }
                for d in HOSTS
            ]
            + [
                {
                    "host": "h9.example",
                    "uuid": "99999999-0000-4000-8000-000000000009",
                    "volumes": ["/data/disk1", "/data/disk2"],
                }
            ]
        )
    )
    yield {
        "root": root,
        "base": base,
        "uuids": uuids,
        "inventory": inv,
        "host_of": {uuids[d]: HOSTS[d] for d in HOSTS},
    }


#: keys whose values name datanodes (a string, or lists of them)
_DN_KEYS = (
    "datanode",
    "datanodes",
    "source",
    "target",
    "peer_datanodes",
    "deleted_on",
    "groups",
    "decommission",
    "maintenance",
)


def _datanode_values(obj: Any) -> Iterator[str]:
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in _DN_KEYS:
                stack = [v]
                while stack:
                    x = stack.pop()
                    if isinstance(x, list):
                        stack.extend(x)
                    elif isinstance(x, str):
                        yield x
                    elif isinstance(x, dict):
                        yield from _datanode_values(x)
            else:
                yield from _datanode_values(v)
    elif isinstance(obj, list):
        for x in obj:
            yield from _datanode_values(x)


def _no_datanode_by_path(doc: Any, text: str, uuids: Dict[str, str]) -> None:
    names = list(_datanode_values(doc))
    assert names, "nothing names a datanode"
    for n in names:
        assert "/" not in n and n not in uuids, n  # never a path, never a directory name
    # the text names the generated directories only inside replica or volume paths
    assert not re.search(r"(?<![/\w.-])dn[0-9]\b", text), text


def _hosts_in(rep: Dict[str, Any]) -> List[Tuple[str, Any]]:
    """(datanode, host) of every place of the report that names one."""
    out = []
    for m in rep["mismatched"]:
        out += [(r["datanode"], r["host"]) for r in m["replicas"]]
        for g, hs in zip(m["groups"], m["group_hosts"]):
            out += list(zip(g, hs))
    for u in rep["unrecoverable"]:
        out += list(zip(u["datanodes"], u["hosts"]))
    for p in rep["pending_deletions"]:
        out += [(p["datanode"], p["host"])] + list(zip(p["deleted_on"], p["deleted_on_hosts"]))
    for o in rep["ozone_reconcile"]:
        out += [(x["datanode"], x["host"]) for x in o["datanodes"]]
    for c in rep["repair_plan"]["commands"]:
        out += [(c["target"], c["target_host"]), (c["source"], c["source_host"])]
    return out


def _check_hosts(rep: Dict[str, Any], host_of: Dict[str, str]) -> None:
    pairs = _hosts_in(rep)
    assert (
        rep["mismatched"]
        and rep["unrecoverable"]
        and rep["pending_deletions"]
        and rep["ozone_reconcile"]
    )
    assert pairs and all(host_of[d] == h for d, h in pairs), pairs


def test_the_report_names_hosts_from_the_tables(hosted, capsys, tmp_path):
    st, rep, text = both(capsys, tmp_path, "spark", "report", hosted["base"] / "onhosts")
    assert st == 1  # the injected faults
    _check_hosts(rep, hosted["host_of"])
    assert rep["verification"]["volumes_unverified"] == 0 and rep["volumes"] == []
    assert rep["hosts_unverified"] == []
    assert "on h0.example" in text and "unknown host" not in text
    _no_datanode_by_path(rep, text, hosted["uuids"])


@pytest.mark.slow  # ~40 s or more: CI's campaigns step, not the fast tier
def test_the_report_and_diff_name_hosts_from_an_inventory(hosted, capsys, tmp_path):
    scan, inv = hosted["base"] / "scan", hosted["inventory"]
    st, out, _ = run(capsys, "spark", "report", scan, "--json")
    plain = json.loads(out)
    assert all(h is None for _, h in _hosts_in(plain)) and not plain["knows_hosts"]
    st, rep, text = both(capsys, tmp_path, "spark", "report", scan, "--datanodes", inv)
    assert st == 1
    _check_hosts(rep, hosted["host_of"])
    # the inventory's fourth host has no volume in the scan: NOT_SCANNED, a finding
    assert [(v["host"], v["volume"], v["status"]) for v in rep["volumes"]] == [
        ("h9.example", "/data/disk1", "NOT_SCANNED"),
        ("h9.example", "/data/disk2", "NOT_SCANNED"),
    ]
    assert rep["hosts_unverified"] == [
        {
            "host": "h9.example",
            "datanodes": ["99999999-0000-4000-8000-000000000009"],
            "statuses": ["NOT_SCANNED"],
        }
    ]
    assert rep["verification"]["volumes_unverified"] == 2
    # containers with fewer than 3 replicas read are UNVERIFIED now, never MATCH
    short = rep["verification"]["containers_short"]
    assert (
        rep["summary"]["UNVERIFIED"] >= short
        and rep["summary"]["MATCH"] + short >= plain["summary"]["MATCH"]
    )
    assert not set(rep["containers"]["MATCH"]) & set(rep["containers"]["UNVERIFIED"])
    assert "Volumes not verified: 2 of 8 (NOT_SCANNED 2)" in text
    assert "Hosts with no verified volume: h9.example" in text
    _no_datanode_by_path(rep, text, hosted["uuids"])
    # the diff: the same volumes, written with the NOT_SCANNED rows; exit 1
    st, out, _ = run(capsys, "spark", "diff", scan, "-o", tmp_path / "d", "--datanodes", inv)
    assert st == 1 and "2 volume(s) not verified (NOT_SCANNED 2)" in out
    from pyspark.sql import SparkSession

    vols = SparkSession.getActiveSession().read.parquet(str(tmp_path / "d" / "volumes"))
    assert sorted(r["status"] for r in vols.collect()) == ["NOT_SCANNED"] * 2 + ["SCANNED"] * 6


def test_unverified_hosts_leave_their_containers_unverified(hosted, capsys, tmp_path):
    degraded = hosted["base"] / "degraded"
    st, rep, text = both(capsys, tmp_path, "spark", "report", degraded)
    assert st == 1
    s = rep["summary"]
    # every container had a replica on dn2, whose host was not verified: at most 2 verified
    assert s["MATCH"] == 0 and s["UNDER_REPLICATED"] == 0
    assert s["UNVERIFIED"] == 6 and rep["verification"]["containers_short"] == 6
    assert sorted((v["status"], v["host"]) for v in rep["volumes"]) == [
        ("NO_EXECUTOR", "h2.example"),
        ("WRONG_HOST", "h2.example"),
    ]
    assert [h["host"] for h in rep["hosts_unverified"]] == ["h2.example"]
    assert "MATCH: 0" in text
    assert (
        "6 container(s) with fewer than 3 verified replicas are UNVERIFIED, never MATCH "
        "nor UNDER_REPLICATED" in text
    )
    _no_datanode_by_path(rep, text, hosted["uuids"])
    # with --replication 2 the two verified replicas are enough: judged as before
    st, out, _ = run(capsys, "spark", "report", degraded, "--json", "--replication", "2")
    assert json.loads(out)["summary"]["MATCH"] > 0


@pytest.mark.slow  # ~40 s or more: CI's campaigns step, not the fast tier
def test_the_plan_names_hosts_and_commands_take_them(hosted, capsys, tmp_path):
    u = hosted["uuids"]
    onhosts = hosted["base"] / "onhosts"
    st, plan, text = both(
        capsys,
        tmp_path,
        "spark",
        "plan",
        onhosts,
        "--decommission",
        "H0.Example",
        "--maintenance",
        u["dn1"],
    )
    assert plan["parameters"]["decommission"] == [u["dn0"]]
    assert plan["parameters"]["maintenance"] == [u["dn1"]]
    assert {n["datanode"]: n["host"] for n in plan["datanodes"]} == {
        u["dn0"]: "h0.example",
        u["dn1"]: "h1.example",
    }
    argv = {e["datanode"]: e["argv"] for e in plan["ozone"]["datanodes"]}
    assert argv == {
        u["dn0"]: ["ozone", "admin", "datanode", "decommission", "h0.example"],
        u["dn1"]: ["ozone", "admin", "datanode", "maintenance", "h1.example"],
    }
    for c in plan["copy_plan"]["commands"]:
        assert c["source_host"] == hosted["host_of"][c["source"]]
        assert c["target_host"] == hosted["host_of"][c["target"]]
    assert "ozone admin datanode decommission h0.example" in text
    assert "ozone admin datanode maintenance h1.example" in text
    _no_datanode_by_path(plan, text, u)

    # one directory tree, no inventory: no command names a UUID; one line asks for hosts
    scan = hosted["base"] / "scan"
    st, plan, text = both(capsys, tmp_path, "spark", "plan", scan, "--decommission", u["dn0"])
    assert plan["ozone"]["datanodes"] == [{"datanode": u["dn0"], "host": None}]
    assert "ozone admin datanode decommission" not in text
    assert sum("--datanodes FILE" in line for line in text.splitlines()) == 1
    # ... and with the inventory, the host by its name
    st, out, _ = run(
        capsys,
        "spark",
        "plan",
        scan,
        "--json",
        "--decommission",
        "h0.example",
        "--datanodes",
        hosted["inventory"],
    )
    plan = json.loads(out)
    assert plan["ozone"]["datanodes"][0]["argv"][-1] == "h0.example"
    assert plan["verification"]["volumes_unverified"] == 2  # h9 was never scanned


def test_the_plan_refuses_an_unverified_datanode_and_never_counts_it(hosted, capsys):
    degraded = hosted["base"] / "degraded"
    st, _, err = run(capsys, "spark", "plan", degraded, "--decommission", "h2.example")
    assert st == 2 and "were not verified" in err and err.count("\n") == 1
    st, out, _ = run(capsys, "spark", "plan", degraded, "--json", "--maintenance", "h0.example")
    plan = json.loads(out)
    # dn2's copies are unknown: dn0 may enter maintenance only as the verified copies say
    assert plan["verification"]["hosts_unverified"] == 1
    assert all(c["target_host"] != "h2.example" for c in plan["copy_plan"]["commands"])
    st, _, err = run(capsys, "spark", "plan", degraded, "--decommission", "nosuch.example")
    assert st == 2 and "UUID or its host name" in err


def test_a_volumes_table_past_its_bound_is_one_line(hosted, capsys, monkeypatch):
    """The volumes table is collected to the driver (one row per volume): a planted one with
    more rows than the bound is refused in one line, exit 2, before anything is collected."""
    import spark_udfs.cluster.hosts as hosts

    monkeypatch.setattr(hosts, "MAX_VOLUME_ROWS", 5)  # the tables hold 6 volumes
    capsys.readouterr()
    st = main(["spark", "report", str(hosted["base"] / "onhosts")])
    err = capsys.readouterr().err.strip()
    assert st == 2 and "\n" not in err, err
    assert "the volumes table has more than 5 rows" in err


def test_unscanned_hosts_and_command_hosts():
    inv = parse_inventory(
        json.dumps(
            [
                {
                    "host": "a.example",
                    "uuid": "11111111-0000-4000-8000-000000000001",
                    "volumes": ["/d1"],
                },
                {"host": "b.example", "address": "10.0.0.2", "volumes": ["/d1", "/d2"]},
                {"host": "c.example", "volumes": ["/d1"]},
            ]
        )
    )
    rows = [
        {"datanode": "11111111-0000-4000-8000-000000000001", "host": None},
        {"datanode": "x", "host": "10.0.0.2"},
    ]
    got = unscanned_hosts(rows, inv)
    assert [(r[0], r[1], r[2], r[4]) for r in got] == [
        ("unknown", "c.example", "/d1", "NOT_SCANNED")
    ]
    # by the host it ran on (no host column value)
    assert [r[1] for r in unscanned_hosts([{"datanode": "y", "ran_on": "c.example"}], inv)] == [
        "a.example",
        "b.example",
        "b.example",
    ]  # one row per volume
    assert unscanned_hosts(rows, None) == []
    assert command_host("dn1.example") == "dn1.example"
    for bad in ("-", "--force", "/data/disk1", "a b", None, "x\ny"):
        assert command_host(bad) is None
