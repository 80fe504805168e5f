"""`crcmerkle spark copycheck`, issue 36 (nothing vouches unless it was checked): the replica
that speaks for a block is a datanode AND its replica path (a datanode with two replica rows
for one container vouches for nothing), with --datanodes only a replica on a volume the
inventory gives its host vouches, the report says which replica spoke; a local copy is read
only where a verdict needs it; a check that fails after Spark started leaves no output.

One generated cluster (CRC32, Ozone's default; no faults), one scan, its keys' true bytes
copied to a local directory (the target whose CRC32 compares with Ozone's)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

pytest.importorskip("rocksdict")

import pyarrow.dataset as ds  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from merkle.cli import main  # noqa: E402
from merkle.replica.generate import generate_cluster, parse_faults  # noqa: E402
from merkle.replica.ozone.omkeys import key_bytes  # noqa: E402

KiB = 1024
SPARSE = 64 << 20  # a sparse file's size: its holes would be read if it were read


@pytest.fixture(scope="module")
def world(tmp_path_factory: Any) -> Any:
    base = tmp_path_factory.mktemp("copycheck-trust")
    cluster = base / "cluster"
    manifest = generate_cluster(
        cluster,
        layout="ozone",
        om_db=True,
        containers=4,
        seed=5,
        block_size=48 * KiB,
        chunk_size=16 * KiB,
        bytes_per_checksum=4 * KiB,
        faults=parse_faults("none", "ozone"),
    )
    scan = base / "scan"
    assert main(["spark", "scan", str(cluster), "-o", str(scan)]) == 0
    copy = base / "copy"
    for k in manifest["keys"]:
        path = copy / k["name"].lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(key_bytes(cluster, k))
    return base, cluster, manifest, scan, copy


def check(
    world: Any, capsys: Any, out: str, *extra: str, scan: Any = None, target: str = ""
) -> Tuple[int, Dict[str, Any], Dict[str, Dict[str, Any]]]:
    base, cluster, _, default_scan, copy = world
    capsys.readouterr()
    rc = main(
        [
            "spark",
            "copycheck",
            "--om-db",
            str(cluster / "om.db"),
            "--scan",
            str(scan or default_scan),
            "--target",
            target or str(copy),
            "-o",
            str(base / out),
            "--json",
            *extra,
        ]
    )
    captured = capsys.readouterr()
    assert rc != 2, captured.err
    rows = pq.read_table(base / out / "verdicts").to_pylist()
    return rc, json.loads(captured.out), {r["ozone_name"] or r["name"]: r for r in rows}


def volumes(scan: Path) -> Dict[str, List[str]]:
    """Each datanode's volume directories, as the scan's volumes table has them."""
    out: Dict[str, List[str]] = {}
    for r in ds.dataset(scan / "volumes", partitioning="hive").to_table().to_pylist():
        out.setdefault(r["datanode"], []).append(r["volume"])
    return out


def inventory(path: Path, vols: Dict[str, List[str]]) -> str:
    hosts = [
        {"host": f"dn{i}.example.com", "uuid": dn, "volumes": v}
        for i, (dn, v) in enumerate(sorted(vols.items()))
    ]
    path.write_text(json.dumps(hosts))
    return str(path)


def test_inventory_volumes_decide_which_replicas_vouch(world: Any, capsys: Any) -> None:
    """With the true inventory every key MATCHes, each block spoken for by a replica under
    a volume it gives that datanode's host, and the sparse objects (one EXTRA, one copy cut
    to another size) are never read. With an inventory whose volumes hold none of the
    replicas, no key is vouched for."""
    base, _, manifest, scan, copy = world
    vols = volumes(scan)
    extra = copy / "vol1" / "extra-sparse.bin"
    with open(extra, "wb") as f:
        f.truncate(SPARSE)
    longer = next(k for k in manifest["keys"] if k["size"] > 0)
    longer_path = copy / longer["name"].lstrip("/")
    saved = longer_path.read_bytes()
    with open(longer_path, "r+b") as f:
        f.truncate(SPARSE)
    try:
        rc, report, rows = check(
            world, capsys, "good-inventory", "--datanodes", inventory(base / "inv.json", vols)
        )
    finally:
        extra.unlink()
        longer_path.write_bytes(saved)
    got = {n: r["verdict"] for n, r in rows.items()}
    assert got.pop(longer["name"]) == "SIZE_DIFFERS"
    assert got.pop("vol1/extra-sparse.bin") == "EXTRA"
    assert set(got.values()) == {"MATCH"} and len(got) == len(manifest["keys"]) - 1
    assert rc == 1
    # only the MATCHed copies were read: not a byte of either sparse file
    assert report["cost"]["bytes_read"] == sum(
        r["size"] for r in rows.values() if r["verdict"] == "MATCH"
    )
    # the report says which replica spoke for each block, in key order
    by_dn = {dn: [v.rstrip("/") + "/" for v in vs] for dn, vs in vols.items()}
    for k in manifest["keys"]:
        r = rows[k["name"]]
        if r["verdict"] != "MATCH":
            continue
        assert len(r["sources"]) == len(k["blocks"])
        for (container, local_id, _), src in zip(k["blocks"], r["sources"]):
            where, _, who = src.partition(": ")
            dn, _, replica = who.partition(" ")
            assert where == f"{container}/{local_id}"
            assert any(replica.startswith(v) for v in by_dn[dn]), src
    chosen = pq.read_table(base / "good-inventory" / "block_sources").to_pylist()
    assert chosen and all(c["chosen_replica"] and c["block_status"] is None for c in chosen)

    elsewhere = {dn: [f"/srv/elsewhere/{i}"] for i, dn in enumerate(vols)}
    rc, _, rows = check(
        world,
        capsys,
        "wrong-inventory",
        "--datanodes",
        inventory(base / "inv-wrong.json", elsewhere),
    )
    with_blocks = [k["name"] for k in manifest["keys"] if k["blocks"]]
    assert with_blocks and all(rows[n]["verdict"] == "UNVERIFIED" for n in with_blocks)
    assert all(
        "not on a volume the inventory (--datanodes) gives its host" in rows[n]["detail"]
        for n in with_blocks
    )
    assert rc == 1


def _rewrite_replicas(scan: Path, to: Path, how: Any) -> None:
    """`scan` copied to `to` with every table's replica paths rewritten by `how`."""
    shutil.copytree(scan, to)
    for table in ("chunks", "blocks", "containers"):
        for f in sorted((to / table).rglob("*.parquet")):
            t = pq.ParquetFile(f).read()  # the file alone (no hive partition column)
            rows = t.to_pylist()
            for r in rows:
                r["replica"] = how(r["replica"])
            pq.write_table(type(t).from_pylist(rows, schema=t.schema), f)
            # Hadoop's checksum of the file as Spark wrote it would refuse the new one
            (f.parent / f".{f.name}.crc").unlink(missing_ok=True)


def test_a_replica_path_that_leaves_its_volume_does_not_vouch(world: Any, capsys: Any) -> None:
    """Planted scan tables whose replica paths start with an inventory volume but climb out
    of it (`/srv/elsewhere/0/../../<real path>`): not on that volume, so no key is vouched
    for (a prefix test alone would have let them speak)."""
    base, _, manifest, scan, _ = world
    vols = volumes(scan)
    elsewhere = {dn: [f"/srv/elsewhere/{i}"] for i, dn in enumerate(sorted(vols))}
    dn_of = {v: dn for dn, vs in vols.items() for v in vs}

    def climb(path: str) -> str:
        dn = next(d for v, d in dn_of.items() if path.startswith(v.rstrip("/") + "/"))
        return elsewhere[dn][0] + "/../.." + path

    _rewrite_replicas(scan, base / "scan-climb", climb)
    rc, _, rows = check(
        world,
        capsys,
        "climb",
        "--datanodes",
        inventory(base / "inv-climb.json", elsewhere),
        scan=base / "scan-climb",
    )
    with_blocks = [k["name"] for k in manifest["keys"] if k["blocks"]]
    assert with_blocks and all(rows[n]["verdict"] == "UNVERIFIED" for n in with_blocks)
    assert rc == 1


def _twin_rows(scan: Path, twin: Path, container: int) -> None:
    """`scan` copied to `twin` with, on every datanode, a second replica row of
    `container` (another replica path): which replica a datanode's rows speak of cannot be
    told, so none of them may vouch."""
    shutil.copytree(scan, twin)
    for part in sorted((twin / "containers").glob("datanode=*")):
        for f in sorted(part.glob("*.parquet")):
            t = pq.read_table(f)
            rows = [r for r in t.to_pylist() if r["container"] == container]
            if rows:
                for r in rows:
                    r["replica"] = r["replica"] + "-twin"
                pq.write_table(
                    type(t).from_pylist(rows, schema=t.schema), part / "part-twin.parquet"
                )
                break


def test_a_datanode_with_two_replica_rows_for_a_container_vouches_for_nothing(
    world: Any, capsys: Any
) -> None:
    base, _, manifest, scan, _ = world
    container = manifest["keys"][0]["blocks"][0][0]
    _twin_rows(scan, base / "scan-twins", container)
    rc, _, rows = check(world, capsys, "twins", scan=base / "scan-twins")
    for k in manifest["keys"]:
        r = rows[k["name"]]
        if any(b[0] == container for b in k["blocks"]):
            assert r["verdict"] == "UNVERIFIED" and "two replica rows" in r["detail"], r
        else:
            assert r["verdict"] == "MATCH", r
    assert rc == 1


def test_a_check_that_fails_after_spark_started_leaves_no_output(world: Any, capsys: Any) -> None:
    """The listing file is there (so the check starts) but is not JSON: exit 2, one line,
    and no partial -o directory."""
    base, cluster, _, scan, _ = world
    listing = base / "broken.json"
    listing.write_text('[{"name": "a", "size": "1"}, {"name": ')
    out = base / "failed"
    capsys.readouterr()
    rc = main(
        [
            "spark",
            "copycheck",
            "--om-db",
            str(cluster / "om.db"),
            "--scan",
            str(scan),
            "--target",
            f"gs://b/p?listing={listing}",
            "-o",
            str(out),
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "malformed JSON" in err[0], err
    assert not out.exists()
