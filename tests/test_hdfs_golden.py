"""HDFS datanodes (issue 37, first part: merkle.replica.hdfs), pinned by the golden volumes
Hadoop's own classes wrote (tests/data/hdfs-golden, as the facts sheet ships them): exactly
the planted findings, every other chunk verified, the bad
chunks' stored and computed CRCs as Hadoop's verifyChunkedSums reports them, the meta rot
told from the data rot by the other replica, the stale replica by its genstamp, the open
file's replicas as open; with the fsck output, the blocks short of verified replicas; and
hostile volumes (links, FIFOs, a huge VERSION, a bytesPerChecksum of 2^31-1, misplaced and
unpaired files) as one finding each, nothing read outside the volume."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from merkle.cli import main
from merkle.replica.hdfs.blocks import id_to_block_dir
from merkle.replica.hdfs.fsck import read_fsck
from merkle.replica.hdfs.scan import scan_datanodes

HERE = Path(__file__).resolve().parent
GOLDEN: Path = HERE / "data" / "hdfs-golden"  # written by Hadoop's classes (its README.md)
POOL = "BP-1105290101-127.0.0.1-1700000000000"
DN = {f"dn{i}": f"0f6c3c8e-{str(i) * 4}-4a4a-9b9b-00000000000{i}" for i in (1, 2, 3)}


@pytest.fixture
def cluster(tmp_path: Path) -> Path:
    """A copy of the golden volumes with the empty tmp/, rbw/ and finalized/ directories
    git does not keep."""
    out = tmp_path / "cluster"
    shutil.copytree(GOLDEN / "cluster", out)
    for version in out.glob("dn*/data*/current/BP-*/current/VERSION"):
        pool = version.parent.parent
        for d in (pool / "tmp", pool / "current" / "rbw", pool / "current" / "finalized"):
            d.mkdir(exist_ok=True)
    return out


def _expected() -> Dict[str, Any]:
    return json.loads((GOLDEN / "expected.json").read_text())


def _keys(findings: List[Any]) -> List[Tuple[Any, ...]]:
    return sorted(
        (f.kind, f.datanode, f.block, f.genstamp, f.chunk, f.offset, Path(f.file or "").name)
        for f in findings
    )


PLANTED = [
    ("DATA_ROT", DN["dn2"], 1073741825, 1001, 1367, 699904, "blk_1073741825"),
    ("META_ROT", DN["dn3"], 1073741826, 1002, 10, 5120, "blk_1073741826_1002.meta"),
    ("REPLICA_OPEN", DN["dn1"], 1073811826, 1077, None, None, "blk_1073811826"),
    ("REPLICA_OPEN", DN["dn2"], 1073811826, 1077, None, None, "blk_1073811826"),
    ("STALE_REPLICA", DN["dn3"], 1073741827, 1003, None, None, "blk_1073741827_1003.meta"),
]


def test_the_golden_volumes_give_exactly_the_planted_findings(cluster: Path) -> None:
    report = scan_datanodes([str(cluster / d) for d in ("dn1", "dn2", "dn3")])
    assert _keys(report.findings) == sorted(PLANTED)
    assert report.failed == []
    # every other chunk verified: all of them but the two bad ones and the open replicas'
    # partial last chunks
    want = _expected()
    total = sum(r["chunks"] for r in want["replicas"])
    assert report.chunks_verified == total - 2 - 2
    assert len(report.replicas) == len(want["replicas"]) == 10
    # the bad chunks' CRCs as Hadoop's verifyChunkedSums reports them
    by_file = {r["block_file"].split("/")[-1] + r["datanode"]: r for r in want["replicas"]}
    for s in report.replicas:
        e = by_file[s.replica.block_name + Path(s.volume.path).parent.name]
        assert s.check.bad.tolist() == e["mismatching_chunks"]
        for k, d in enumerate(e["mismatch_detail"]):
            assert int(s.check.stored[k]) == int(d["stored_crc"], 16)
            assert int(s.check.computed[k]) == int(d["computed_crc"], 16)
        assert (s.check.checksum, s.check.bytes_per_checksum) == (
            e["checksum_type"],
            e["bytes_per_checksum"],
        )
        assert s.check.length == e["length"] and s.replica.genstamp == e["genstamp"]
    detail = {f.kind: f.detail for f in report.findings}
    assert "2b455f39" in detail["DATA_ROT"] and "bd26d40d" in detail["DATA_ROT"]
    assert "the meta rotted, the data is good" in detail["META_ROT"]


def test_with_fsck_the_blocks_short_of_verified_replicas_are_named(cluster: Path) -> None:
    fsck = read_fsck(str(GOLDEN / "fsck-rendered.txt"))
    assert fsck.problems == [] and len(fsck.files) == 4
    report = scan_datanodes([str(cluster / d) for d in ("dn1", "dn2", "dn3")], fsck)
    extra = sorted(
        (f.kind, f.block, f.genstamp, f.path)
        for f in report.findings
        if (f.kind, f.datanode, f.block, f.genstamp, f.chunk, f.offset, Path(f.file or "").name)
        not in PLANTED
    )
    # counting only verified replicas of the current genstamp: f1's two blocks each have one
    # good replica of two (data rot on dn2, meta rot on dn3), f2's one (dn3's is stale)
    assert extra == [
        ("UNDER_REPLICATED", 1073741825, 1001, "/golden/f1.bin"),
        ("UNDER_REPLICATED", 1073741826, 1002, "/golden/f1.bin"),
        ("UNDER_REPLICATED", 1073741827, 1004, "/golden/f2.bin"),
    ]
    paths = {f.kind: f.path for f in report.findings if f.kind in ("DATA_ROT", "META_ROT")}
    assert paths == {"DATA_ROT": "/golden/f1.bin", "META_ROT": "/golden/f1.bin"}


def test_the_cli_on_the_golden_volumes(cluster: Path, capsys: Any) -> None:
    paths = [str(cluster / d) for d in ("dn1", "dn2", "dn3")]
    capsys.readouterr()
    assert main(["scan", *paths, "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert sorted(f["error"] for f in doc["findings"]) == sorted(k[0] for k in PLANTED)
    assert doc["summary"]["volumes"] == 4 and doc["summary"]["datanodes"] == 3
    assert {v["storage"] for v in doc["volumes"]} == {
        "DS-11111111-aaaa-4bbb-8ccc-000000000011",
        "DS-11111111-aaaa-4bbb-8ccc-000000000012",
        "DS-22222222-aaaa-4bbb-8ccc-000000000021",
        "DS-33333333-aaaa-4bbb-8ccc-000000000031",
    }
    fsck = str(GOLDEN / "fsck-rendered.txt")
    assert main(["scan", *paths, "--fsck", fsck]) == 1
    text = capsys.readouterr().out
    assert "error: META_ROT" in text and "warning: REPLICA_OPEN" in text
    # the clean volume alone (dn1/data2: f2's current replica) exits 0
    assert main(["scan", str(cluster / "dn1" / "data2")]) == 0
    capsys.readouterr()
    assert main(["scan", *paths, "--fsck", str(cluster / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--fsck" in err
    # what an HDFS scan does not do is refused in one line that says why, nothing read
    for extra, why in (
        (["--state", str(cluster / "s"), "--max-age", "1d"], "keeps no scan state"),
        (["--emit", str(cluster / "out")], "writes no Spark scan tables"),
        (["--metadata-only"], "its stored CRCs"),
    ):
        assert main(["scan", *paths, *extra]) == 2, extra
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "not taken on HDFS datanodes" in err and why in err
    assert not (cluster / "s").exists() and not (cluster / "out").exists()


def test_the_layout_registry_knows_a_datanode_volume(cluster: Path) -> None:
    from merkle.replica.layouts import layout_of

    layout = layout_of(str(cluster / "dn1" / "data1"))
    assert layout.name == "hdfs"
    (vol,) = layout.volumes(str(cluster / "dn2" / "data1"))
    assert vol.datanode == DN["dn2"] and vol.cluster_id == _expected()["cluster_id"]
    assert [r.container for r in layout.replicas(vol)] == [1073741825, 1073741826, 1073811826]


def test_block_placement_is_hadoops() -> None:
    for block_id, where in _expected()["idToBlockDir_examples"].items():
        assert id_to_block_dir(int(block_id)) == where


def _pool(cluster: Path, dn: str) -> Path:
    return cluster / dn / "data1" / "current" / POOL / "current"


def test_hostile_volumes_are_one_finding_each(cluster: Path, tmp_path: Path) -> None:
    fin = _pool(cluster, "dn3") / "finalized" / "subdir0" / "subdir0"
    secret = tmp_path / "secret"
    secret.write_bytes(b"\0\1\2\0\0\2\0" + bytes(4))  # a meta-shaped file outside the volume
    # f3's meta replaced by a link to a file outside the volume
    (fin / "blk_1073741828_1005.meta").unlink()
    (fin / "blk_1073741828_1005.meta").symlink_to(secret)
    # a block file that is a FIFO (never opened: a read would block)
    os.mkfifo(fin / "blk_1073741999")
    (fin / "blk_1073741999_1999.meta").write_bytes(b"\0\1\2\0\0\2\0")
    # a bytesPerChecksum of 2^31-1 (a read sized by it would be 2 GiB)
    shutil.copy(fin / "blk_1073741826", fin / "blk_1073741830")
    (fin / "blk_1073741830_1010.meta").write_bytes(b"\0\1\2\x7f\xff\xff\xff" + bytes(4))
    # a block in the wrong subdir, a meta without its block, two metas for one block
    wrong = _pool(cluster, "dn3") / "finalized" / "subdir3" / "subdir4"
    wrong.mkdir(parents=True)
    shutil.copy(fin / "blk_1073741826", wrong / "blk_1073741826")
    shutil.copy(fin / "blk_1073741826_1002.meta", wrong / "blk_1073741826_1002.meta")
    (fin / "blk_1073741840_1020.meta").write_bytes(b"\0\1\2\0\0\2\0")
    shutil.copy(fin / "blk_1073741827_1003.meta", fin / "blk_1073741827_1009.meta")
    # a truncated meta: fewer CRCs than chunks
    meta2 = _pool(cluster, "dn2") / "finalized" / "subdir0" / "subdir0" / "blk_1073741826_1002.meta"
    meta2.write_bytes(meta2.read_bytes()[:-40])
    # a VERSION of 10 MB on dn1/data2
    (cluster / "dn1" / "data2" / "current" / "VERSION").write_bytes(b"#" + b"x" * (10 << 20))
    report = scan_datanodes([str(cluster / d) for d in ("dn1", "dn2", "dn3")])
    got: Dict[str, List[str]] = {}
    for f in report.findings:
        got.setdefault(f.kind, []).append(Path(f.file or "").name)
    assert got["NOT_A_REGULAR_FILE"] == ["blk_1073741828_1005.meta", "blk_1073741999"]
    assert got["META_HEADER_INVALID"] == ["blk_1073741830_1010.meta"]
    assert got["BLOCK_MISPLACED"] == ["blk_1073741826"]
    # the FIFO is no block file: its meta has none
    assert got["META_WITHOUT_BLOCK"] == ["blk_1073741840_1020.meta", "blk_1073741999_1999.meta"]
    assert got["DUPLICATE_META"] == ["blk_1073741827"]
    assert got["META_LENGTH_MISMATCH"] == ["blk_1073741826_1002.meta"]
    assert got["VOLUME_UNREADABLE"] == ["current"]
    assert "more than" in next(f.detail for f in report.findings if f.kind == "VOLUME_UNREADABLE")
    # nothing outside the volumes was read: the secret is no replica's
    assert all("secret" not in (s.meta_file + s.block_file) for s in report.replicas)
    # a meta of an invalid header is a finding, not an allocation of 2^31 bytes
    assert report.bytes_read < 4 << 20
