"""Nothing vouches unless it was checked (issue 36): tables written by `crcmerkle scan --emit`
get the data-local scan's checks when `crcmerkle spark report|plan|copycheck` read them
(spark_udfs.cluster.vouch), and the data-local scan takes out only the volumes that fail them.

The attack: container C's replicas on dn1 and dn2 are corrupt, so dn0 holds its only good
copy. A volume planted on dn1's host (a copy of dn0's volume whose VERSION names a new
datanode, or dn1 itself) is emitted with dn1's real volumes; unchecked, its copy of C counts
as a good in-service replica and `spark plan --maintenance dn0` said dn0 may stop now."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

pytest.importorskip("rocksdict")
pytest.importorskip("yaml")

from merkle.cli import main  # noqa: E402
from merkle.replica.generate import GeneratorConfig, generate_cluster, parse_faults  # noqa: E402

FRESH = "00000000-0000-4000-8000-00000000000f"


def _set_uuid(volume: Path, uuid: str, cluster: str = "") -> None:
    version = volume / "hdds" / "VERSION"
    lines = []
    for line in version.read_text().splitlines():
        if line.startswith("datanodeUuid="):
            line = f"datanodeUuid={uuid}"
        if cluster and line.startswith("clusterID="):
            line = f"clusterID={cluster}"
        lines.append(line)
    version.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def attacked(tmp_path_factory: Any) -> Dict[str, Any]:
    """The cluster, C, dn1's and dn2's copies of C corrupt, and a planted copy of dn0's
    volume holding C (its VERSION not yet changed: each test names whom it claims)."""
    base = tmp_path_factory.mktemp("trust")
    root = base / "cluster"
    manifest = generate_cluster(
        root,
        GeneratorConfig(containers=6, seed=5, layout="ozone", faults=parse_faults("none", "ozone")),
    )
    cid, info = next(
        (int(c), i) for c, i in sorted(manifest["containers"].items()) if len(i["replicas"]) == 3
    )
    by_dn = {r.split("/")[0]: root / r for r in info["replicas"]}
    for dn in ("dn1", "dn2"):  # a flipped byte in every block file: CORRUPT_CHUNK
        for block in sorted((by_dn[dn] / "chunks").iterdir()):
            data = bytearray(block.read_bytes())
            data[len(data) // 2] ^= 0xFF
            block.write_bytes(bytes(data))
    src = by_dn["dn0"].parents[4]  # dn0/volN
    return {
        "root": root,
        "manifest": manifest,
        "cid": cid,
        "source_volume": src,
        "uuids": manifest["datanode_uuids"],
        "base": base,
    }


def _volumes(root: Path, dn: str) -> List[str]:
    return sorted(str(p) for p in (root / dn).iterdir() if p.is_dir())


def _plant(attacked: Dict[str, Any], where: Path, uuid: str) -> Path:
    if where.exists():
        shutil.rmtree(where)
    shutil.copytree(attacked["source_volume"], where, symlinks=True)
    _set_uuid(where, uuid)
    return where


def _emit_all(attacked: Dict[str, Any], out: Path, planted: List[str]) -> None:
    root = attacked["root"]
    for i, dn in enumerate(("dn0", "dn1", "dn2")):
        extra = planted if dn == "dn1" else []
        assert main(
            ["scan", *_volumes(root, dn), *extra, "--emit", str(out), "--host", f"h{i}"]
        ) in (0, 1)


def _inventory(attacked: Dict[str, Any], path: Path, skip: Tuple[str, ...] = ()) -> str:
    root, uuids = attacked["root"], attacked["uuids"]
    path.write_text(
        json.dumps(
            [
                {
                    "host": f"h{i}",
                    "uuid": uuids[dn],
                    "volumes": [v for v in _volumes(root, dn) if v not in skip],
                }
                for i, dn in enumerate(("dn0", "dn1", "dn2"))
            ]
        )
    )
    return str(path)


def _plan(scan: Path, dn: str, capsys: Any, *extra: str) -> Tuple[int, Dict[str, Any], str]:
    capsys.readouterr()
    rc = main(["spark", "plan", str(scan), "--maintenance", dn, "--json", *extra])
    cap = capsys.readouterr()
    return rc, (json.loads(cap.out) if cap.out.strip() else {}), cap.err


def _volume_rows(spark: Any, scan: Path) -> Dict[Tuple[str, str], Dict[str, Any]]:
    from spark_udfs.jobs.scan import TABLE_SCHEMAS

    df = spark.read.schema(TABLE_SCHEMAS["volumes"]).parquet(str(scan / "volumes"))
    return {(r["host"], r["volume"]): r.asDict() for r in df.collect()}


def test_a_planted_datanode_on_a_host_is_no_good_copy(
    spark: Any, attacked: Dict[str, Any], tmp_path: Path, capsys: Any
) -> None:
    """Without an inventory: h1's volumes name dn1 and a new datanode, so none of them
    counts (WRONG_DATANODE); dn0 holds C's last good copy and may not stop."""
    planted = _plant(attacked, tmp_path / "planted" / "vol9", FRESH)
    out = tmp_path / "tables"
    _emit_all(attacked, out, [str(planted)])
    dn0 = attacked["uuids"]["dn0"]
    rc, plan, err = _plan(out, dn0, capsys)
    assert rc == 1, (plan.get("summary"), err)
    assert plan["summary"]["may_stop_now"] == 0
    assert attacked["cid"] in plan["containers"]["WOULD_LOSE"]
    assert {v["status"] for v in plan["volumes"] if v["host"] == "h1"} == {"WRONG_DATANODE"}


@pytest.mark.slow  # ~40 s or more: CI's campaigns step, not the fast tier
def test_with_an_inventory_only_the_planted_volume_is_out(
    spark: Any, attacked: Dict[str, Any], tmp_path: Path, capsys: Any
) -> None:
    """With the inventory: the planted volume (claiming dn1 itself: without an inventory it
    could not be told from dn1's real ones) is NOT_IN_INVENTORY and vouches for nothing;
    dn1's real volumes stay verified. (A new datanode's: tests/test_vouch.py.)"""
    for claim in (attacked["uuids"]["dn1"],):
        planted = _plant(attacked, tmp_path / "planted" / "vol9", claim)
        out = tmp_path / f"tables-{claim[:4]}"
        _emit_all(attacked, out, [str(planted)])
        inv = _inventory(attacked, tmp_path / "inv.json")
        rc, plan, err = _plan(out, "h0", capsys, "--datanodes", inv)
        assert rc == 1, (plan.get("summary"), err)
        assert plan["summary"]["may_stop_now"] == 0
        assert attacked["cid"] in plan["containers"]["WOULD_LOSE"]
        bad = [v for v in plan["volumes"] if v["status"] != "SCANNED"]
        assert [(v["host"], v["volume"], v["status"]) for v in bad] == [
            ("h1", str(planted), "NOT_IN_INVENTORY")
        ]
        # dn1 is still known and verified: it can be planned for (its copy of C is corrupt)
        rc, plan, err = _plan(out, "h1", capsys, "--datanodes", inv)
        assert rc in (0, 1) and plan["parameters"]["maintenance"] == [attacked["uuids"]["dn1"]], err


def test_a_datanode_on_two_hosts_is_refused(
    spark: Any, attacked: Dict[str, Any], tmp_path: Path, capsys: Any
) -> None:
    """Without an inventory, a volume on h1 claiming dn0: dn0 is on two hosts, none of its
    volumes counts (DUPLICATE_DATANODE), and C has no good copy at all."""
    planted = _plant(attacked, tmp_path / "planted" / "vol9", attacked["uuids"]["dn0"])
    out = tmp_path / "tables"
    _emit_all(attacked, out, [str(planted)])
    capsys.readouterr()
    assert main(["spark", "report", str(out), "--json"]) == 1
    rep = json.loads(capsys.readouterr().out)
    statuses = {(v["host"], v["status"]) for v in rep["volumes"]}
    assert statuses == {("h0", "DUPLICATE_DATANODE"), ("h1", "DUPLICATE_DATANODE")}


def test_an_inventory_volume_nobody_emitted_is_named(
    spark: Any, attacked: Dict[str, Any], tmp_path: Path, capsys: Any
) -> None:
    """h0 emits one of its two volumes: the other is NOT_SCANNED by name, and the
    containers with fewer verified replicas are UNVERIFIED, not UNDER_REPLICATED."""
    root = attacked["root"]
    out = tmp_path / "tables"
    kept, lost = _volumes(root, "dn0")
    assert main(["scan", kept, "--emit", str(out), "--host", "h0"]) in (0, 1)
    for i, dn in ((1, "dn1"), (2, "dn2")):
        assert main(["scan", *_volumes(root, dn), "--emit", str(out), "--host", f"h{i}"]) in (0, 1)
    inv = _inventory(attacked, tmp_path / "inv.json")
    capsys.readouterr()
    assert main(["spark", "report", str(out), "--json", "--datanodes", inv]) == 1
    cap = capsys.readouterr()
    rep = json.loads(cap.out)
    assert [line for line in cap.err.splitlines() if "NOT_SCANNED" in line] == [
        f"crcmerkle: NOT_SCANNED: host h0: volume {lost} of h0 is in the inventory, but the "
        f"scan tables hold no row of it: nothing of it was scanned or emitted (its replicas "
        f"are UNVERIFIED)"
    ]
    assert rep["summary"]["UNDER_REPLICATED"] == 0 and rep["summary"]["UNVERIFIED"] > 0
    rc, plan, err = _plan(out, "h0", capsys, "--datanodes", inv)
    assert rc == 2 and "were not read" in err and lost in err


def test_a_volume_whose_replicas_cannot_be_listed_holds_its_datanode(
    spark: Any, attacked: Dict[str, Any], tmp_path: Path, capsys: Any
) -> None:
    """dn0's volume without `current/` (or with a link there): VOLUME_FAILED in the emitted
    tables, and dn0 may not leave until it is scanned."""
    copy = tmp_path / "c"
    shutil.copytree(attacked["root"] / "dn0", copy / "dn0", symlinks=True)
    vol = Path(_volumes(copy, "dn0")[0])
    (current,) = vol.glob("hdds/*/current")
    shutil.move(str(current), str(tmp_path / "elsewhere"))
    out = tmp_path / "tables"
    assert main(["scan", *_volumes(copy, "dn0"), "--emit", str(out), "--host", "h0"]) == 2
    os.symlink(tmp_path / "elsewhere", current)
    out2 = tmp_path / "tables2"
    assert main(["scan", *_volumes(copy, "dn0"), "--emit", str(out2), "--host", "h0"]) == 2
    for o in (out, out2):
        for i, dn in ((1, "dn1"), (2, "dn2")):
            assert main(
                ["scan", *_volumes(attacked["root"], dn), "--emit", str(o), "--host", f"h{i}"]
            ) in (0, 1)
        rows = _volume_rows(spark, o)
        assert rows[("h0", str(vol))]["status"] == "VOLUME_FAILED"
        rc, _, err = _plan(o, "h0", capsys)
        assert rc == 2 and "were not read" in err and "VOLUME_FAILED" in err


def test_data_local_other_cluster_disk_is_that_volume_only(
    spark: Any, attacked: Dict[str, Any], tmp_path: Path
) -> None:
    """A disk with the host's UUID and another cluster's ID: that volume is WRONG_DATANODE,
    the host's real volumes and their replicas stay verified."""
    from merkle.replica.inventory import load_inventory
    from spark_udfs.jobs.hostscan import scan_datanodes

    root, uuids = attacked["root"], attacked["uuids"]
    copy = tmp_path / "c"
    shutil.copytree(root / "dn0", copy / "dn0", symlinks=True)
    real = _volumes(copy, "dn0")
    odd = copy / "dn0" / "vol9"  # a copy of a real one, of another cluster
    shutil.copytree(real[0], odd, symlinks=True)
    (cdir,) = [p for p in (odd / "hdds").iterdir() if p.is_dir()]
    other = "CID-00000000-0000-4000-8000-0000000000cc"
    cdir.rename(cdir.parent / other)
    _set_uuid(odd, uuids["dn0"], cluster=other)
    inv = tmp_path / "inv.json"
    inv.write_text(
        json.dumps([{"host": "localhost", "uuid": uuids["dn0"], "volumes": [*real, str(odd)]}])
    )
    t = scan_datanodes(spark, load_inventory(str(inv)), executor_wait=0)
    status = {r["volume"]: r["status"] for r in t.volumes.collect()}
    assert status == {real[0]: "SCANNED", real[1]: "SCANNED", str(odd): "WRONG_DATANODE"}
    reps = {r["replica"] for r in t.containers.collect()}
    want = {str(p) for v in real for p in Path(v).glob("hdds/*/current/containerDir*/*")}
    assert want and reps == want
    assert not [
        r
        for r in t.chunks.select("replica").distinct().collect()
        if r["replica"].startswith(str(odd) + "/")
    ]


def test_a_datanode_named_like_spark_null_reads_back_as_itself(spark: Any, tmp_path: Path) -> None:
    from spark_udfs.jobs.scan import TABLE_SCHEMAS
    from spark_udfs.tables.emit import SPARK_NULL_PARTITION

    from replica_helpers import make_cluster

    root = tmp_path / "c"
    make_cluster(root, containers=2, layout="crcmerkle")
    (root / "dn0").rename(root / SPARK_NULL_PARTITION)
    out = tmp_path / "tables"
    assert main(["scan", str(root / SPARK_NULL_PARTITION), "--emit", str(out), "--host", "h0"]) in (
        0,
        1,
    )
    for table in ("containers", "volumes"):
        df = spark.read.schema(TABLE_SCHEMAS[table]).parquet(str(out / table))
        assert {r["datanode"] for r in df.collect()} == {SPARK_NULL_PARTITION}, table
