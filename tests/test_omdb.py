"""Ozone's key map from an OM DB checkpoint (merkle.copies.omdb), against records and a real
om.db written by Ozone's own Java (tests/data/ozone-golden/om-keys), and hostile DBs."""

import json
import os
import re
import tarfile
from pathlib import Path
from typing import Dict, List

import pytest

from merkle.copies import om_pb2
from merkle.copies.omdb import (
    OmDBError,
    OmKey,
    bucket_key,
    open_om_db,
    ozone_key,
    ozone_path_key,
    write_om_db,
)

GOLDEN = Path(__file__).parent / "data" / "ozone-golden" / "om-keys"
ENTRIES = json.loads((GOLDEN / "entries.json").read_text(encoding="utf-8"))
READBACK = json.loads((GOLDEN / "readback.json").read_text(encoding="utf-8"))
MESSAGES = {
    "hadoop.ozone.KeyInfo": om_pb2.KeyInfo,
    "hadoop.ozone.DirectoryInfo": om_pb2.DirectoryInfo,
    "hadoop.ozone.VolumeInfo": om_pb2.VolumeInfo,
    "hadoop.ozone.BucketInfo": om_pb2.BucketInfo,
}
VOL = ENTRIES["volume_object_id"]
FSO = ENTRIES["fso_bucket_object_id"]


@pytest.fixture(scope="module")
def golden_keys(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, OmKey]:
    where = tmp_path_factory.mktemp("omdb")
    with tarfile.open(GOLDEN / "om.db.tar") as tar:
        tar.extractall(where)
    before = sorted((e.name, e.stat().st_size, e.stat().st_mtime_ns) for e in os.scandir(where))
    with open_om_db(where) as db:
        keys = {k.db_key: k for k in db.keys()}
        assert db.problems == [] and db.problem_count == 0
    after = sorted((e.name, e.stat().st_size, e.stat().st_mtime_ns) for e in os.scandir(where))
    assert after == before  # nothing written in the checkpoint
    return keys


def _golden_rows(table: str) -> List[dict]:
    return [r for r in READBACK["rows"] if r["table"] == table]


def _metadata(text: str) -> set:
    inner = text.strip("{}")
    return set(tuple(p.split("=", 1)) for p in inner.split(", ")) if inner else set()


def _latest_blocks(text_format: str) -> List[tuple]:
    """(containerID, localID, offset, length) of the last keyLocationList in a text form."""
    groups = re.findall(r"^keyLocationList \{\n(.*?)^\}", text_format, re.M | re.S)
    if not groups:
        return []
    return [
        (int(c), int(lo), int(o), int(n))
        for c, lo, o, n in re.findall(
            r"containerID: (\d+)\n\s*localID: (\d+)\n.*?offset: (\d+)\n\s*length: (\d+)",
            groups[-1],
            re.S,
        )
    ]


def test_every_key_of_readback_is_read_field_by_field(golden_keys: Dict[str, OmKey]) -> None:
    rows = _golden_rows("keyTable") + _golden_rows("fileTable")
    assert len(rows) == 13 and set(golden_keys) == {r["key"] for r in rows}
    for row in rows:
        k = golden_keys[row["key"]]
        assert k.table == row["table"] and k.reason is None, row["key"]
        assert (k.volume, k.bucket) == (
            ("vol1", "obs1") if k.table == "keyTable" else ("vol1", "fso1")
        )
        assert k.path.rsplit("/", 1)[-1] == row["fileName"]
        if k.table == "keyTable":
            assert k.path == row["keyName"]
        assert k.size == row["dataSize"]
        assert str(k.replication) == row["replication"]
        assert k.object_id == row["objectID"]
        assert k.versions == row["versions"] and len(k.blocks) == row["latestVersionBlocks"]
        assert k.version == row["versions"] - 1  # the latest group only
        assert (str(k.file_checksum) if k.file_checksum else None) == row["fileChecksum"]
        assert set(k.metadata) == _metadata(row["metadata"])
        assert not k.encrypted and not k.multipart  # as the text forms say: no such fields
        if k.table == "fileTable":  # the DB key's parent is the record's parentID
            assert int(k.db_key.split("/")[3]) == row["parentObjectID"]


def test_fso_paths_are_rebuilt_through_directory_table(golden_keys: Dict[str, OmKey]) -> None:
    paths = {k.name for k in golden_keys.values() if k.table == "fileTable"}
    assert paths == {
        "/vol1/fso1/top.txt",
        "/vol1/fso1/dirA/f1.bin",
        "/vol1/fso1/dirA/dirB/f2-ec.bin",
        "/vol1/fso1/dirA/dirB/f3-2versions",
        "/vol1/fso1/dirA/f4-meta",
        "/vol1/fso1/ファイル ü.txt",
    }
    assert "/vol1/obs1/日本/ключ 🙂.dat" in {k.name for k in golden_keys.values()}


def test_blocks_replication_and_checksum_match_the_text_forms(
    golden_keys: Dict[str, OmKey],
) -> None:
    checked = 0
    for e in ENTRIES["entries"]:
        if e["table"] not in ("keyTable", "fileTable"):
            continue
        k = golden_keys[e["key"]]
        assert [
            (b.container_id, b.local_id, b.offset, b.length) for b in k.blocks
        ] == _latest_blocks(e["value_text_format"]), e["key"]
        assert k.record == bytes.fromhex(e["value_hex"])
        text = e["value_text_format"]
        if k.replication.type == "EC":
            assert (
                'ecReplicationConfig {\n  data: 3\n  parity: 2\n  codec: "rs"\n'
                "  ecChunkSize: 1048576\n}" in text
            )
            assert (
                k.replication.ec_data,
                k.replication.ec_parity,
                k.replication.ec_chunk_size,
                k.replication.ec_codec,
            ) == (3, 2, 1048576, "rs")
        else:
            assert f"type: {k.replication.type}\nfactor: {k.replication.factor}\n" in text
        if k.file_checksum is not None:
            crc = int(re.search(r"crc: (\d+)", text).group(1))
            assert k.file_checksum.value == crc.to_bytes(4, "big")
            assert (k.file_checksum.algorithm, k.file_checksum.bytes_per_crc) == ("CRC32C", 16384)
        checked += 1
    assert checked == 13


def test_versions_keep_the_latest_group_only(golden_keys: Dict[str, OmKey]) -> None:
    k = golden_keys["/vol1/obs1/versioned/key-2versions"]
    e = next(x for x in ENTRIES["entries"] if x["key"] == k.db_key)
    first = re.findall(r"^keyLocationList \{\n(.*?)^\}", e["value_text_format"], re.M | re.S)[0]
    assert "version: 0" in first and k.version == 1
    assert all(f"localID: {b.local_id}\n" not in first for b in k.blocks)


def test_buckets_and_directories_match_readback(tmp_path: Path) -> None:
    with tarfile.open(GOLDEN / "om.db.tar") as tar:
        tar.extractall(tmp_path)
    with open_om_db(tmp_path) as db:
        buckets = db.buckets()
    want = {
        (VOL, r["objectID"]): ("vol1", r["bucket"], r["layout"])
        for r in _golden_rows("bucketTable")
    }
    assert buckets == want
    for r in _golden_rows("directoryTable"):
        e = next(x for x in ENTRIES["entries"] if x["key"] == r["key"])
        d = om_pb2.DirectoryInfo.FromString(bytes.fromhex(e["value_hex"]))
        assert d.name.decode() == r["name"]
        assert d.objectID - (1 << 64) == r["objectID"]
        assert d.parentID - (1 << 64) == r["parentObjectID"]


@pytest.mark.parametrize("entry", ENTRIES["entries"], ids=lambda e: e["key"])
def test_values_decode_and_reencode_byte_identical(entry: dict) -> None:
    raw = bytes.fromhex(entry["value_hex"])
    assert (GOLDEN / entry["value_file"]).read_bytes() == raw
    assert (GOLDEN / entry["key_file"]).read_bytes() == bytes.fromhex(entry["key_hex"])
    assert bytes.fromhex(entry["key_hex"]).decode("utf-8") == entry["key"]
    msg = MESSAGES[entry["value_proto_message"]].FromString(raw)
    # every field is declared in Ozone's order (or kept unknown), so even the two records
    # whose metadata Ozone's own codec reorders come back as stored
    assert msg.SerializeToString() == raw
    if entry["roundtrip_reencode_identical"] is False:
        assert bytes.fromhex(entry["reencoded_value_hex"]) != raw  # Ozone's own differs


def test_unknown_fields_are_kept() -> None:
    e = next(x for x in ENTRIES["entries"] if x["table"] == "keyTable")
    raw = bytes.fromhex(e["value_hex"]) + bytes([0x9A, 0x06, 3]) + b"new"  # field 99, bytes
    assert om_pb2.KeyInfo.FromString(raw).SerializeToString() == raw


@pytest.mark.parametrize("ex", ENTRIES["key_encoding_examples"], ids=lambda x: x["result"])
def test_key_encodings(ex: dict) -> None:
    if ex["method"] == "getOzoneKey":
        got = ozone_key(ex["volume"], ex["bucket"], ex["key"])
    elif ex["method"] == "getBucketKey":
        got = bucket_key(ex["volume"], ex["bucket"])
    else:
        got = ozone_path_key(
            ex["volumeId"], ex["bucketId"], ex["parentObjectId"], ex["pathComponentName"]
        )
    assert got == ex["result"]


def test_om_proto_is_what_the_classes_declare() -> None:
    fields = om_pb2.proto_fields((Path(om_pb2.__file__).with_name("om.proto")).read_text())
    assert fields["KeyInfo"][17] == ("optional", "FileChecksum", "fileChecksum", 18)
    for name, rows in fields.items():
        desc = getattr(om_pb2, name).DESCRIPTOR
        assert [(f.name, f.number) for f in desc.fields] == [(r[2], r[3]) for r in rows]


# ---- hostile DBs -------------------------------------------------------------------------


def _golden_tables() -> Dict[str, Dict[bytes, bytes]]:
    tables: Dict[str, Dict[bytes, bytes]] = {}
    for e in ENTRIES["entries"]:
        tables.setdefault(e["table"], {})[bytes.fromhex(e["key_hex"])] = bytes.fromhex(
            e["value_hex"]
        )
    return tables


def _file(name: str, parent: int, object_id: int, size: int = 3) -> bytes:
    template = next(x for x in ENTRIES["entries"] if x["key"].endswith("ファイル ü.txt"))
    info = om_pb2.KeyInfo.FromString(bytes.fromhex(template["value_hex"]))
    info.keyName = name.encode()
    info.parentID = parent % (1 << 64)
    info.objectID = object_id % (1 << 64)
    info.dataSize = size
    return info.SerializeToString()


def _dir(name: str, parent: int, object_id: int) -> bytes:
    template = next(x for x in ENTRIES["entries"] if x["table"] == "directoryTable")
    d = om_pb2.DirectoryInfo.FromString(bytes.fromhex(template["value_hex"]))
    d.name, d.parentID, d.objectID = name.encode(), parent % (1 << 64), object_id % (1 << 64)
    return d.SerializeToString()


def test_hostile_rows_give_one_line_each_and_the_walk_goes_on(tmp_path: Path) -> None:
    t = _golden_tables()
    x, y, orphan_parent = 1001, 1002, 5555
    t["directoryTable"].update(
        {
            ozone_path_key(VOL, FSO, y, "x").encode(): _dir("x", y, x),  # x under y under x
            ozone_path_key(VOL, FSO, x, "y").encode(): _dir("y", x, y),
            ozone_path_key(VOL, FSO, FSO, "..").encode(): _dir("..", FSO, 1003),
            # two directories claiming one objectID, a directory whose record names another parent
            ozone_path_key(VOL, FSO, FSO, "twin1").encode(): _dir("twin1", FSO, 1004),
            ozone_path_key(VOL, FSO, FSO, "twin2").encode(): _dir("twin2", FSO, 1004),
            ozone_path_key(VOL, FSO, FSO, "liar").encode(): _dir("liar", 777, 1005),
        }
    )
    t["fileTable"].update(
        {
            ozone_path_key(VOL, FSO, x, "in-cycle").encode(): _file("in-cycle", x, 2001),
            ozone_path_key(VOL, FSO, orphan_parent, "orphan").encode(): _file(
                "orphan", orphan_parent, 2002
            ),
            ozone_path_key(VOL, FSO, 1003, "escape").encode(): _file("escape", 1003, 2003),
            ozone_path_key(VOL, FSO, FSO, "garbage").encode(): b"\xff\xff\xff\xff",
            b"/not/a/path-key": _file("n", FSO, 2004),
            f"/ {VOL}/{FSO}/{FSO}/spaced".encode(): _file("spaced", FSO, 2005),
            ozone_path_key(VOL, FSO, 1004, "under-twin").encode(): _file("under-twin", 1004, 2006),
            ozone_path_key(VOL, FSO, 1005, "under-liar").encode(): _file("under-liar", 1005, 2007),
        }
    )
    huge = om_pb2.KeyInfo.FromString(t["keyTable"][b"/vol1/obs1/key-simple.txt"])
    huge.keyName, huge.dataSize = b"huge", (1 << 64) - 1
    t["keyTable"][b"/vol1/obs1/huge"] = huge.SerializeToString()
    sealed = om_pb2.KeyInfo.FromString(t["keyTable"][b"/vol1/obs1/key-simple.txt"])
    sealed.keyName, sealed.fileEncryptionInfo = b"sealed", b"\x08\x01"
    t["keyTable"][b"/vol1/obs1/sealed"] = sealed.SerializeToString()
    t["keyTable"][b"/vol1/obs1/bad-value"] = b"\x0a\xff\xff\xff\xff\x0f"
    t["keyTable"][b"/vol1/obs1/\xff\xfe"] = t["keyTable"][b"/vol1/obs1/key-simple.txt"]
    write_om_db(tmp_path / "om.db", t)
    with open_om_db(tmp_path / "om.db") as db:
        keys = {k.db_key: k for k in db.keys()}
        problems = db.problems
    assert db.problem_count == len(problems) == 7
    assert all("\n" not in p and p.endswith("; skipped") for p in problems)
    assert (
        sorted(p.split(" ", 1)[0] for p in problems)
        == ["directoryTable"] * 2 + ["fileTable"] * 3 + ["keyTable"] * 2
    )
    assert (
        sum("twin2" in p and "is also that of '/" in p and "twin1' (both" in p for p in problems)
        == 1
    )
    assert sum("parentID is not the DB key's" in p and "liar" in p for p in problems) == 1
    assert sum("/ -9223372036854775552/" in p for p in problems) == 1  # int() would take it
    assert any("bad-value" in p for p in problems) and any("garbage" in p for p in problems)
    assert any("not UTF-8" in p for p in problems)
    assert any("the DB key is not /volumeID/bucketID/parentID/name" in p for p in problems)
    assert sum("the value does not parse as KeyInfo" in p for p in problems) == 2

    def reason(name: str) -> str:
        k = next(k for k in keys.values() if k.db_key.endswith("/" + name))
        assert k.path is None and "\n" not in k.reason
        return k.reason

    assert "cycle" in reason("in-cycle")
    assert f"parent directory {orphan_parent} is not in directoryTable" == reason("orphan")
    assert "not a path component" in reason("escape")
    assert reason("under-twin") == "parent directory 1004 is not in directoryTable"
    assert reason("under-liar") == "parent directory 1005 is not in directoryTable"
    assert "dataSize 18446744073709551615" in keys["/vol1/obs1/huge"].reason
    assert keys["/vol1/obs1/huge"].size == (1 << 64) - 1
    assert keys["/vol1/obs1/sealed"].encrypted and keys["/vol1/obs1/sealed"].reason is None
    # every golden key is still there, read as before
    good = {k.name for k in keys.values() if k.reason is None}
    assert len(good) == 14 and "/vol1/fso1/dirA/dirB/f2-ec.bin" in good


def test_deep_chain_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from merkle.copies import omdb

    monkeypatch.setattr(omdb, "MAX_DEPTH", 8)
    t = _golden_tables()
    parent = FSO
    for i in range(12):
        oid = 3000 + i
        t["directoryTable"][ozone_path_key(VOL, FSO, parent, f"d{i}").encode()] = _dir(
            f"d{i}", parent, oid
        )
        parent = oid
    t["fileTable"][ozone_path_key(VOL, FSO, parent, "deep").encode()] = _file("deep", parent, 9)
    t["fileTable"][ozone_path_key(VOL, FSO, 3004, "shallow").encode()] = _file("shallow", 3004, 8)
    write_om_db(tmp_path / "om.db", t)
    with open_om_db(tmp_path / "om.db") as db:
        keys = {k.db_key.rsplit("/", 1)[1]: k for k in db.keys()}
    assert keys["deep"].reason == "more than 8 directory levels"
    assert keys["shallow"].name == "/vol1/fso1/d0/d1/d2/d3/d4/shallow"


def test_open_errors_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(OmDBError, match="^[^\n]+$"):
        open_om_db(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(OmDBError, match="^[^\n]+$"):
        open_om_db(tmp_path / "empty")
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(OmDBError, match="not a RocksDB directory"):
        open_om_db(tmp_path / "file")
    os.symlink(tmp_path / "empty", tmp_path / "link")
    with pytest.raises(OmDBError, match="symbolic link"):
        open_om_db(tmp_path / "link")
    # a RocksDB that is not an OM DB
    import rocksdict

    db = rocksdict.Rdict(str(tmp_path / "other"))
    db[b"k"] = b"v"
    db.close()
    with pytest.raises(OmDBError, match=r"no column family .*\(not an OM DB\)$"):
        open_om_db(tmp_path / "other")
    # a table file cut short
    write_om_db(tmp_path / "cut", _golden_tables())
    sst = sorted((tmp_path / "cut").glob("*.sst"))[0]
    sst.write_bytes(sst.read_bytes()[:100])
    with pytest.raises(OmDBError, match="^[^\n]+$") as cut:
        with open_om_db(tmp_path / "cut") as db:
            list(db.keys())
    assert str(tmp_path / "cut") in str(cut.value)
    assert "crcmerkle-omdb-" not in str(cut.value)  # the checkpoint named, not the snapshot
    # a table file whose bytes were flipped (same size)
    write_om_db(tmp_path / "flip", _golden_tables())
    for sst in (tmp_path / "flip").glob("*.sst"):
        raw = bytearray(sst.read_bytes())
        raw[10:400] = bytes(c ^ 0x55 for c in raw[10:400])
        sst.write_bytes(bytes(raw))
    with pytest.raises(OmDBError, match="Corruption"):
        with open_om_db(tmp_path / "flip") as db:
            list(db.keys())
