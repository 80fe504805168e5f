"""`crcmerkle generate --layout ozone --om-db`: the OM DB of the generated blocks, read back with
merkle.copies.omdb, against the manifest's ground truth (`keys`) and the blocks' true bytes."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any, Dict, Set, Tuple

import pytest

import merkle
from merkle.cli import main
from merkle.copies.omdb import open_om_db
from merkle.replica.generate import GeneratorError, block_data, generate_cluster, parse_faults
from merkle.replica.ozone.omkeys import KeyBytesError, key_bytes

pytest.importorskip("rocksdict")

SMALL = dict(block_size=48 * 1024, chunk_size=16 * 1024, bytes_per_checksum=4 * 1024)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Tuple[Path, Dict[str, Any]]:
    out = tmp_path_factory.mktemp("omgen") / "c"
    manifest = generate_cluster(
        out,
        layout="ozone",
        om_db=True,
        containers=8,
        seed=0,
        faults=parse_faults("default", "ozone"),
        **SMALL,
    )
    return out, manifest


def _live(manifest: Dict[str, Any]) -> Set[Tuple[int, int]]:
    """Live blocks, from the manifest's own sections (not the generator's helper)."""
    tomb = {(int(c), b) for c, bs in manifest["tombstones"].items() for b in bs}
    live = {(int(c), int(b)) for c, v in manifest["containers"].items() for b in v["blocks"]}
    live |= {(int(c), b) for c, bs in manifest["extra_blocks"].items() for b in bs}
    return live - tomb


def test_om_db_holds_exactly_the_manifest_keys(cluster: Tuple[Path, Dict[str, Any]]) -> None:
    out, m = cluster
    assert m["om_db"] == "om.db"
    with open_om_db(out / "om.db") as db:
        keys = {k.name: k for k in db.keys()}
        assert db.problems == [] and db.problem_count == 0
        buckets = sorted(db.buckets().values())
    assert set(keys) == {e["name"] for e in m["keys"]} and len(keys) == len(m["keys"])
    for e in m["keys"]:
        k = keys[e["name"]]
        assert k.reason is None and (k.volume, k.bucket, k.path) == (
            e["volume"],
            e["bucket"],
            e["path"],
        )
        assert e["name"] == f"/{e['volume']}/{e['bucket']}/{e['path']}"
        assert k.size == e["size"] == sum(n for _, _, n in e["blocks"])
        assert [(b.container_id, b.local_id, b.offset, b.length) for b in k.blocks] == [
            (c, lid, 0, n) for c, lid, n in e["blocks"]
        ]
        assert str(k.replication) == e["replication"] == "RATIS/THREE"
        assert k.table == (
            "fileTable" if e["bucket_layout"] == "FILE_SYSTEM_OPTIMIZED" else "keyTable"
        )
        assert not k.encrypted and not k.multipart and k.versions == 1
        # a block's length is its generated length (the bytes the pristine block file holds)
        for c, lid, n in e["blocks"]:
            if (c, lid) in {
                (int(x), int(y)) for x, ys in m["containers"].items() for y in ys["blocks"]
            }:
                assert m["containers"][str(c)]["blocks"][str(lid)] == n
    assert {b[2] for b in buckets} == {"OBJECT_STORE", "FILE_SYSTEM_OPTIMIZED"}
    assert len({b[0] for b in buckets}) >= 2


def test_every_live_block_is_in_exactly_one_key(cluster: Tuple[Path, Dict[str, Any]]) -> None:
    _, m = cluster
    seen = [(c, lid) for e in m["keys"] for c, lid, _ in e["blocks"]]
    assert len(seen) == len(set(seen))
    assert set(seen) == _live(m)
    # tombstoned blocks and the blocks the Ozone-only faults invented belong to no key
    assert m["tombstones"] and not {
        (int(c), b) for c, bs in m["tombstones"].items() for b in bs
    } & set(seen)
    invented = {
        (f["container_id"], f["block_id"])
        for f in m["faults"]
        if f["type"] in ("db-entry-without-file", "file-without-db-entry")
    }
    assert len(invented) == 2 and not invented & set(seen)


def test_shapes_the_copy_check_needs(cluster: Tuple[Path, Dict[str, Any]]) -> None:
    _, m = cluster
    fso = [e for e in m["keys"] if e["bucket_layout"] == "FILE_SYSTEM_OPTIMIZED"]
    assert any(e["path"].count("/") >= 2 for e in fso)  # two directories down, at least
    assert any(len({c for c, _, _ in e["blocks"]}) >= 2 for e in m["keys"])
    assert any(len(e["blocks"]) == 1 for e in m["keys"])
    assert any(e["bucket_layout"] == "OBJECT_STORE" and "/" in e["path"] for e in m["keys"])


def test_key_bytes_and_crcs_are_the_true_bytes(cluster: Tuple[Path, Dict[str, Any]]) -> None:
    out, m = cluster
    read = 0
    for e in m["keys"]:
        true = b"".join(block_data(0, c, lid, n) for c, lid, n in e["blocks"])
        assert zlib.crc32(true) == e["crc32"]  # an independent CRC-32
        assert merkle.crc32c(true) == e["crc32c"] and merkle.crc64nvme(true) == e["crc64nvme"]
        if e["pristine_copy"]:
            assert key_bytes(out, e) == true
            read += 1
        else:
            with pytest.raises(
                KeyBytesError,
                match=r"^[^\n]*no replica holds its generated "
                r"bytes[^\n]*$",
            ):
                key_bytes(out, e)
    assert read >= len(m["keys"]) - 1
    assert sum(not e["pristine_copy"] for e in m["keys"]) == 1  # the bitflip-all block's key


def test_faulted_blocks_follow_the_fault_list(cluster: Tuple[Path, Dict[str, Any]]) -> None:
    _, m = cluster
    where = {(c, lid): e for e in m["keys"] for c, lid, _ in e["blocks"]}
    for f in m["faults"]:
        block = (f["container_id"], f.get("block_id"))
        if f["type"] in (
            "bitflip",
            "bitflip2",
            "bitflip-all",
            "truncate",
            "missing-chunks",
            "missing-file",
        ):
            e = where[block]
            assert list(block) in e["faulted_blocks"]
            assert f["id"] in {x["id"] for x in e["faults"]}
            i = [(c, lid) for c, lid, _ in e["blocks"]].index(block)
            assert not set(f["replicas"]) & set(e["pristine_replicas"][i])
        elif f["type"] in ("container-checksum", "open-container"):  # a whole replica
            for e in m["keys"]:
                for (c, lid, _), reps in zip(e["blocks"], e["pristine_replicas"]):
                    if c == f["container_id"] and f["replicas"][0] in reps:
                        assert [c, lid] in e["faulted_blocks"]
    clean = [e for e in m["keys"] if not e["faults"]]
    assert all(not e["faulted_blocks"] for e in clean)


def test_key_bytes_refuses_what_is_not_there(
    cluster: Tuple[Path, Dict[str, Any]], tmp_path: Path
) -> None:
    out, m = cluster
    e = next(x for x in m["keys"] if x["pristine_copy"])
    hostile = dict(e, pristine_replicas=[["../../../etc"] for _ in e["blocks"]])
    with pytest.raises(KeyBytesError, match=r"^[^\n]+$"):
        key_bytes(out, hostile)
    with pytest.raises(KeyBytesError, match="not a generated key entry"):
        key_bytes(out, {"name": "x"})
    lying = dict(e, crc32c=e["crc32c"] ^ 1)
    with pytest.raises(KeyBytesError, match="CRC-32C differs"):
        key_bytes(out, lying)


def test_same_seed_same_om_db(tmp_path: Path) -> None:
    def rows(out: Path) -> Dict[str, bytes]:
        with open_om_db(out / "om.db") as db:
            return {k.db_key: k.record for k in db.keys()}

    kw: Dict[str, Any] = dict(layout="ozone", om_db=True, containers=3, seed=5, **SMALL)
    a = generate_cluster(tmp_path / "a", **kw)
    b = generate_cluster(tmp_path / "b", **kw)
    assert a["keys"] == b["keys"] and rows(tmp_path / "a") == rows(tmp_path / "b")
    c = generate_cluster(tmp_path / "a", **dict(kw, seed=6))  # replaces the earlier run
    assert c["keys"] != a["keys"] and rows(tmp_path / "a") != rows(tmp_path / "b")


def test_om_db_is_ozone_layout_only(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(GeneratorError, match="--layout ozone only"):
        generate_cluster(tmp_path / "x", layout="crcmerkle", om_db=True)
    status = main(["generate", str(tmp_path / "y"), "--layout", "crcmerkle", "--om-db"])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and "--om-db" in err
    assert not (tmp_path / "y").exists()
    status = main(
        [
            "generate",
            str(tmp_path / "z"),
            "--om-db",
            "--faults",
            "none",
            "--containers",
            "2",
            "--block-size",
            "32KiB",
            "--chunk-size",
            "16KiB",
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert status == 0 and out["keys"] and (tmp_path / "z" / "om.db").is_dir()


def test_records_carry_the_fields_ozone_writes(cluster: Tuple[Path, Dict[str, Any]]) -> None:
    """Each generated record sets exactly the fields Ozone's own codec set in the golden
    record of its kind (tests/data/ozone-golden/om-keys), with the same ACL bytes."""
    from merkle.copies import om_pb2

    golden = json.loads(
        (Path(__file__).parent / "data" / "ozone-golden" / "om-keys" / "entries.json").read_text(
            encoding="utf-8"
        )
    )["entries"]

    def fields(msg: Any) -> Set[str]:
        return {f.name for f, _ in msg.ListFields()}

    like = {
        "keyTable": "/vol1/obs1/dir1/dir2/key-3blocks.bin",
        "volumeTable": "/vol1",
        "bucketTable": "/vol1/obs1",
        "directoryTable": None,
        "fileTable": None,
    }
    kinds = {
        "keyTable": om_pb2.KeyInfo,
        "fileTable": om_pb2.KeyInfo,
        "volumeTable": om_pb2.VolumeInfo,
        "bucketTable": om_pb2.BucketInfo,
        "directoryTable": om_pb2.DirectoryInfo,
    }
    out, _ = cluster
    with open_om_db(out / "om.db") as db:
        for table, key in like.items():
            g = next(e for e in golden if e["table"] == table and key in (None, e["key"]))
            want = kinds[table].FromString(bytes.fromhex(g["value_hex"]))
            rows = list(db.rows(table))
            assert rows
            for _, value in rows:
                got = kinds[table].FromString(value)
                assert fields(got) == fields(want), table
                acls = "volumeAcls" if table == "volumeTable" else "acls"
                assert list(getattr(got, acls)) == list(getattr(want, acls))
                if table in ("keyTable", "fileTable"):
                    assert fields(got.keyLocationList[0]) == fields(want.keyLocationList[0])
                    assert all(
                        fields(a) == fields(want.keyLocationList[0].keyLocations[0])
                        for a in got.keyLocationList[0].keyLocations
                    )
                    assert got.isFile == (table == "fileTable")


def test_om_db_has_every_column_family_of_ozones(
    cluster: Tuple[Path, Dict[str, Any]], tmp_path: Path
) -> None:
    """Exactly the column families of the golden om.db (Ozone's OMDBDefinition): Ozone's own
    read-only tooling (DBStoreBuilder with OMDBDefinition) refuses a DB missing any, as it did
    the generated one ("Column family not found: deletedTable")."""
    import tarfile

    import rocksdict

    from merkle.copies.omdb import OM_COLUMN_FAMILIES

    golden = Path(__file__).parent / "data" / "ozone-golden" / "om-keys" / "om.db.tar"
    with tarfile.open(golden) as tar:
        tar.extractall(tmp_path / "golden", filter="data")
    want = set(rocksdict.Rdict.list_cf(str(tmp_path / "golden")))
    assert "deletedTable" in want and len(want) == 26
    out, _ = cluster
    assert set(rocksdict.Rdict.list_cf(str(out / "om.db"))) == want
    assert set(OM_COLUMN_FAMILIES) | {"default"} == want


def test_the_demo_copies_each_key_from_its_true_bytes(
    cluster: Tuple[Path, Dict[str, Any]], tmp_path: Path
) -> None:
    """The demo's copy step (spark_udfs.demo.copies) reads a key's true bytes through its own
    Ozone front end (spark_udfs.demo.ozone), not through the shared layout interface: each
    clean copy it writes is the key's generated bytes (the manifest's CRC-32C)."""
    from merkle._native import crc32c
    from spark_udfs.demo.copies import copy_keys

    out, m = cluster
    expected = copy_keys(out, m, tmp_path / "copies")
    matched = [k for k in m["keys"] if expected.get(k["name"].lstrip("/")) == "MATCH"]
    assert matched
    for key in matched:
        data = (tmp_path / "copies" / key["name"].lstrip("/")).read_bytes()
        assert len(data) == key["size"] and crc32c(data) == key["crc32c"], key["name"]
