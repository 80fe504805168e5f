"""Nothing vouches unless it was checked (issue 36), without Spark: the cluster checks shared
by the data-local scan and the readers of emitted tables (spark_udfs.cluster.vouch), an inventory
volume nobody emitted (spark_udfs.cluster.hosts.unscanned_hosts), an Ozone volume whose `current/`
cannot be listed, and `--emit DIR` never writing or deleting through a link in DIR."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Dict, List

import pytest

pytest.importorskip("pyarrow")

from merkle.cli import main  # noqa: E402
from merkle.replica.inventory import parse_inventory  # noqa: E402

A = "00000000-0000-4000-8000-00000000000a"
B = "00000000-0000-4000-8000-00000000000b"


def _row(
    dn: str, host: str, vol: str, cluster: str = "CID-1", status: str = "SCANNED"
) -> Dict[str, Any]:
    return {"datanode": dn, "host": host, "volume": vol, "cluster_id": cluster, "status": status}


def _inv(hosts: List[Dict[str, Any]]) -> Any:
    return parse_inventory(json.dumps(hosts))


def test_inventory_checks() -> None:
    from spark_udfs.cluster.vouch import NOT_IN_INVENTORY, WRONG_DATANODE, check_volumes

    inv = _inv(
        [
            {"host": "h1", "uuid": A, "volumes": ["/d1", "/d2"]},
            {"host": "h2", "uuid": B, "volumes": ["/d1"]},
        ]
    )
    rows = [
        _row(A, "h1", "/d1"),
        _row(A, "H1", "/d2/"),  # fine (any spelling)
        _row(A, "h1", "/d9"),  # a disk nobody configured
        _row(A, "h2", "/d1"),  # dn A's VERSION on h2's disk
        _row(B, "h3", "/d1"),  # a host the inventory lacks
        _row(A, "h1", "/d3", status="VOLUME_FAILED"),
    ]  # judged already
    got = check_volumes(rows, inv)
    assert {k: (v.status, v.datanode) for k, v in got.items()} == {
        ("h1", "/d9"): (NOT_IN_INVENTORY, A),
        ("h2", "/d1"): (WRONG_DATANODE, B),
        ("h3", "/d1"): (NOT_IN_INVENTORY, None),
    }
    # a planted volume on h2 claiming A is h2's WRONG_DATANODE: A is not on two hosts
    assert all(v.status != "DUPLICATE_DATANODE" for v in got.values())


def test_without_inventory_a_datanode_on_two_hosts_is_refused() -> None:
    from spark_udfs.cluster.vouch import DUPLICATE_DATANODE, WRONG_DATANODE, check_volumes

    rows = [
        _row(A, "h1", "/d1"),
        _row(A, "h2", "/d1"),  # A on two hosts
        _row(B, "h3", "/d1"),
        _row("z", "h3", "/d9"),  # h3 names two datanodes
        _row("c", "h4", "/d1"),
        _row("c", "h4", "/d2"),
        _row("c", "h4", "/d3", cluster="CID-2"),  # one disk of another cluster
        _row("d", None, "/x"),
    ]  # a one-tree scan: not judged
    got = {k: v.status for k, v in check_volumes(rows).items()}
    assert got == {
        ("h1", "/d1"): DUPLICATE_DATANODE,
        ("h2", "/d1"): DUPLICATE_DATANODE,
        ("h3", "/d1"): WRONG_DATANODE,
        ("h3", "/d9"): WRONG_DATANODE,
        ("h4", "/d3"): WRONG_DATANODE,
    }


def test_the_data_local_scan_takes_out_only_the_other_clusters_volume() -> None:
    """Item 10: a disk with the host's UUID and another cluster's ID takes out that volume,
    not the datanode (the host's real volumes stay counted)."""
    from spark_udfs.jobs.hostscan import _cluster_checks

    rows = [
        _row("a", "h1", "/d1"),
        _row("a", "h1", "/d2"),
        _row("a", "h1", "/d3", "CID-2"),
        _row("b", "h2", "/d1"),
    ]
    changed, excluded = _cluster_checks(rows)
    assert set(changed) == {("h1", "/d3")} and changed[("h1", "/d3")][0] == "WRONG_DATANODE"
    assert excluded == {("h1", "/d3")}


def test_an_inventory_volume_nobody_emitted_is_named() -> None:
    from spark_udfs.cluster.hosts import unscanned_hosts

    inv = _inv(
        [
            {"host": "h1", "uuid": A, "volumes": ["/d1", "/d2"]},
            {"host": "h2", "uuid": B, "volumes": ["/d1"]},
        ]
    )
    rows = [{"datanode": A, "host": "h1", "ran_on": "h1", "volume": "/d1"}]
    got = [(r[0], r[1], r[2], r[4]) for r in unscanned_hosts(rows, inv)]
    assert got == [(A, "h1", "/d2", "NOT_SCANNED"), (B, "h2", "/d1", "NOT_SCANNED")]
    assert "volume /d2 of h1" in unscanned_hosts(rows, inv)[0][5]


def test_the_null_partition_name_is_escaped() -> None:
    from spark_udfs.tables.emit import SPARK_NULL_PARTITION, escape_partition_value

    assert escape_partition_value(SPARK_NULL_PARTITION) == "%5F_HIVE_DEFAULT_PARTITION__"
    assert escape_partition_value("_x") == "_x"


@pytest.fixture(scope="module")
def ozone_dn(tmp_path_factory: Any) -> Path:
    pytest.importorskip("rocksdict")
    from merkle.replica.generate import GeneratorConfig, generate_cluster, parse_faults

    root = tmp_path_factory.mktemp("vouch") / "c"
    generate_cluster(
        root,
        GeneratorConfig(containers=3, seed=2, layout="ozone", faults=parse_faults("none", "ozone")),
    )
    return root / "dn0"


@pytest.mark.parametrize("how", ["missing", "link", "file"])
def test_a_volume_whose_current_cannot_be_listed_is_failed(
    ozone_dn: Path, tmp_path: Path, how: str
) -> None:
    from merkle.replica.layouts import layout_of

    dn = tmp_path / "dn0"
    shutil.copytree(ozone_dn, dn, symlinks=True)
    vol = sorted(dn.iterdir())[0]
    (current,) = vol.glob("hdds/*/current")
    shutil.move(str(current), str(tmp_path / "elsewhere"))
    if how == "link":
        os.symlink(tmp_path / "elsewhere", current)
    elif how == "file":
        current.write_bytes(b"")
    found = {v.root: v for v in layout_of(str(dn)).volumes(str(dn))}
    assert found[str(vol)].problem is not None and "current" in found[str(vol)].problem
    assert all(v.problem is None for r, v in found.items() if r != str(vol))
    from spark_udfs.tables.emit import emit_scan

    res = emit_scan([str(dn)], str(tmp_path / "out"), "h0")
    assert {r["volume"]: r["status"] for r in res.volumes}[str(vol)] == "VOLUME_FAILED"


@pytest.fixture()
def small(tmp_path: Path) -> Path:
    from replica_helpers import make_cluster

    root = tmp_path / "c"
    make_cluster(root, containers=2, layout="crcmerkle")
    return root / "dn0"


def _tree(p: Path) -> Dict[str, bytes]:
    return {str(f.relative_to(p)): f.read_bytes() for f in sorted(p.rglob("*")) if f.is_file()}


@pytest.mark.parametrize("where", ["errors", "errors/datanode=dn0"])
def test_emit_never_writes_through_a_link(
    small: Path, tmp_path: Path, capsys: Any, where: str
) -> None:
    out, victim = tmp_path / "out", tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_bytes(b"mine")
    link = out / where
    link.parent.mkdir(parents=True)
    link.symlink_to(victim)
    rc = main(["scan", str(small), "--emit", str(out), "--host", "h0"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert _tree(victim) == {"keep": b"mine"} and link.is_symlink()


def test_emit_never_deletes_through_a_link_or_what_it_did_not_write(
    small: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    assert main(["scan", str(small), "--emit", str(out), "--host", "h0"]) == 0
    # names of this host's stale files: behind a link, another user's, a link itself
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "emit-h0_0000000000000000.parquet").write_bytes(b"elsewhere")
    (out / "errors" / "datanode=gone").symlink_to(victim)
    other = out / "errors" / "datanode=dn0" / "emit-h0_1111111111111111.parquet"
    other.write_bytes(b"another user's")
    os.chown(other, 54321, 54321)
    target = tmp_path / "target"
    target.write_bytes(b"t")
    lnk = out / "errors" / "datanode=dn0" / "emit-h0_2222222222222222.parquet"
    lnk.symlink_to(target)
    stale = out / "errors" / "datanode=dn0" / "emit-h0_3333333333333333.parquet"
    stale.write_bytes(b"an earlier run's")
    assert main(["scan", str(small), "--emit", str(out), "--host", "h0"]) == 0
    assert (victim / "emit-h0_0000000000000000.parquet").read_bytes() == b"elsewhere"
    assert other.read_bytes() == b"another user's" and lnk.is_symlink()
    assert target.read_bytes() == b"t"
    assert not stale.exists()  # ours: still removed
