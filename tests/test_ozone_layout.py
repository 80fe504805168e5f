"""The `ozone` replica layout: real datanode volumes (schema V3), read-only scans, generator.

Cross-checked against Ozone's own bytes: the `.container` file from Ozone's test resources and
the worked example of the facts sheet (its checksum, the BlockData wire bytes, the block_data
key), and a golden `.tree` written by Ozone's Java dropped into a volume built here.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

pytest.importorskip("rocksdict")
pytest.importorskip("yaml")

from merkle.replica.generate import GeneratorConfig, generate_cluster, parse_faults  # noqa: E402
from merkle.replica.ozone import datanode_pb2 as pb  # noqa: E402
from merkle.replica.ozone.blockdata import decode_blocks, encode_block  # noqa: E402
from merkle.replica.ozone.containerfile import (  # noqa: E402
    ContainerFileError,
    checksum_of,
    parse_container_file,
    render_container_file,
)
from merkle.replica.ozone.layout import container_dir_index, find_volumes  # noqa: E402
from merkle.replica.ozone.rocks import VolumeDB, block_key, container_prefix, write_volume_db  # noqa: E402
from merkle.replica.ozone.writer import VolumeWriter  # noqa: E402
from merkle.replica.replicadir.blockmeta import BlockMeta, ChunkMeta, ContainerMeta  # noqa: E402
from merkle.replica.replicadir.writer import tree_from_meta  # noqa: E402
from merkle.replica.scan import (
    read_stored_tree,  # noqa: E402
    scan_paths,  # noqa: E402
)
from merkle.trees.treefile import tree_to_bytes  # noqa: E402

# Files written by Ozone's own Java (a container file and one golden case), kept in the
# repository in the layout of the full golden set; OZONE_GOLDEN points at another copy.
GOLDEN = Path(
    os.environ.get("OZONE_GOLDEN", Path(__file__).resolve().parent / "data" / "ozone-golden")
)
DATA = Path(__file__).resolve().parent / "data" / "ozone"

# ---- the worked example of Ozone's facts (container 7, block 109611004723200001) --------

EXAMPLE_KEY = bytes.fromhex("00000000000000077c313039363131303034373233323030303031")
EXAMPLE_VALUE = bytes.fromhex(
    "0a0e0807108180 80c08cd4dac201182a1a0b0a0454595045120 34b455922360a1a"
    "3130393631313030343732333230303030315f6368756e6b5f31100018a09c012a12"
    "0802108080011a04e59322151a0480b71f7222310a1a313039363131303034373233"
    "3230303030315f6368756e6b5f3210a09c0118f4032a0c0802108080011a042abd5f"
    "be2894a001".replace(" ", "")
)
EXAMPLE_CONTAINER = """\
!<KeyValueContainerData>
checksum: 2dd478d285aff65bfd3fa81590b6dd058c8fff58002bf09ef5e85e64c223fe12
chunksPath: /data/disk1/hdds/CID-5f0e3d6a-1b6b-4f47-9d3a-2a6f8f0c9e11/current/containerDir0/7/chunks
containerDBType: RocksDB
containerID: 7
containerType: KeyValueContainer
dataScanTimestamp: 1787400000000
layOutVersion: 2
maxSize: 5368709120
metadata: {}
metadataPath: /data/disk1/hdds/CID-5f0e3d6a-1b6b-4f47-9d3a-2a6f8f0c9e11/current/containerDir0/7/metadata
originNodeId: 2c6b0a4e-7f0e-4a53-9a55-0d7b0c6a1f22
originPipelineId: 9d2f7c1b-3e4a-4b8e-8f0d-6a5b4c3d2e1f
schemaVersion: '3'
state: CLOSED
"""  # noqa: E501 (a container file as Ozone writes it: its checksum covers these bytes)
EXAMPLE_BLOCK = 109611004723200001


def example_chunks() -> List[Tuple[int, bytes]]:
    one = bytes((7 * i) & 0xFF for i in range(20000))
    return [(0, one), (20000, b"ozone" * 100)]


# ---- helpers ---------------------------------------------------------------------------------


def make_volume(
    root: Path,
    containers: Dict[int, Dict[int, List[Tuple[int, bytes]]]],
    *,
    algorithm: str = "crc32",
    bpc: int = 16384,
    layout_version: int = 2,
    states: Optional[Dict[int, str]] = None,
    trees: Optional[Dict[int, bytes]] = None,
    datanode_uuid: Optional[str] = None,
) -> VolumeWriter:
    """A volume whose containers hold {block: [(offset, data), ...]} (CLOSED unless given).
    Its datanode: `datanode_uuid`, else a UUID named after the directory above the volume
    (the volumes of dn0/ share one datanode, dn1/'s are another's)."""
    states, trees = states or {}, trees or {}
    if datanode_uuid is None:
        datanode_uuid = str(uuid.uuid5(uuid.NAMESPACE_URL, "crcmerkle-test:" + root.parent.name))
    w = VolumeWriter(root, cluster_id="CID-test", storage_id="DS-test", datanode_uuid=datanode_uuid)
    stage = root.parent / (root.name + ".stage")
    stage.mkdir(exist_ok=True)
    for cid, blocks in containers.items():
        meta = ContainerMeta(cid)
        files = {}
        for bid, chunks in blocks.items():
            path = stage / f"{cid}-{bid}"
            with open(path, "wb") as f:
                for off, data in chunks:
                    f.seek(off)
                    f.write(data)
            files[bid] = path
            meta.blocks[bid] = BlockMeta(
                bid,
                tuple(
                    ChunkMeta.from_data(off, data, algorithm=algorithm, bytes_per_checksum=bpc)
                    for off, data in chunks
                ),
            )
        tree = tree_from_meta(meta)  # what the datanode stored when the container closed
        w.add_container(
            meta,
            block_files=files,
            state=states.get(cid, "CLOSED"),
            layout_version=layout_version,
            tree=trees.get(cid, tree_to_bytes(tree)),
            data_checksum=tree.data_checksum,
        )
    w.close()
    return w


def file_states(root: Path) -> Dict[str, Tuple[bytes, int]]:
    """Every file and directory under root: bytes (files) and mtime."""
    out: Dict[str, Tuple[bytes, int]] = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(dirpath) / name
            st = os.lstat(p)
            data = p.read_bytes() if p.is_file() and not p.is_symlink() else b""
            out[os.path.relpath(p, root)] = (data, st.st_mtime_ns)
    return out


def keys(result: Any) -> List[Tuple[str, int, int]]:
    return sorted((e.kind, e.block_id or 0, e.offset or 0) for e in result.errors)


# ---- .container ------------------------------------------------------------------------------


def test_container_file_of_ozone_verifies_and_renders_byte_for_byte() -> None:
    data = (GOLDEN / "container-files" / "1.container").read_bytes()
    c = parse_container_file(data)
    assert (c.container_id, c.state, c.schema_version, c.layout_version) == (1, "CLOSED", "3", 2)
    assert c.checksum == "5e4bea7286f96d88a5b3a745011ff9e4281a5221bfe564413215cd85871dcfd8"
    assert c.checksum_ok
    assert render_container_file(c.fields) == data


def test_container_file_example_checksum() -> None:
    c = parse_container_file(EXAMPLE_CONTAINER.encode())
    assert checksum_of(EXAMPLE_CONTAINER) == c.checksum
    assert c.checksum_ok
    assert render_container_file(c.fields) == EXAMPLE_CONTAINER.encode()


@pytest.mark.parametrize(
    "edit",
    [
        ("state: CLOSED", "state: OPEN"),
        ("maxSize: 5368709120", "maxSize: 5368709121"),
        ("checksum: 2dd4", "checksum: 3dd4"),
    ],
)
def test_container_file_any_change_breaks_the_checksum(edit: Tuple[str, str]) -> None:
    c = parse_container_file(EXAMPLE_CONTAINER.replace(*edit).encode())
    assert not c.checksum_ok


@pytest.mark.parametrize(
    "text, reason",
    [
        ("containerID: 7\n", "first line"),
        ("!<KeyValueContainerData>\ncontainerID: [\n", "YAML"),
        ("!<KeyValueContainerData>\ncontainerID: 7\nlayOutVersion: 2\nmaxSize: 1\n", "state"),
        (
            "!<KeyValueContainerData>\ncontainerID: x\nlayOutVersion: 2\nmaxSize: 1\nstate: OPEN\n",
            "integers",
        ),
        (
            "!<KeyValueContainerData>\ncontainerID: 7\nlayOutVersion: 2\nmaxSize: 1\nstate: NEW\n",
            "unknown state",
        ),
        ("!<KeyValueContainerData>\n!!python/object:os.system {}\n", "YAML"),
    ],
)
def test_container_file_errors_are_one_line(text: str, reason: str) -> None:
    with pytest.raises(ContainerFileError, match=reason) as exc:
        parse_container_file(text.encode())
    assert "\n" not in str(exc.value)


# ---- block_data keys and values -------------------------------------------------------------


def test_block_key_and_value_match_ozones_bytes() -> None:
    assert block_key(7, EXAMPLE_BLOCK) == EXAMPLE_KEY
    assert container_prefix(7) == EXAMPLE_KEY[:9] and len(container_prefix(7)) == 9
    decoded = decode_blocks(7, [(EXAMPLE_KEY[9:], EXAMPLE_VALUE)], "test")
    block = decoded.meta.blocks[EXAMPLE_BLOCK]
    assert [(c.offset, c.length, c.checksum_type, c.bytes_per_checksum) for c in block.chunks] == [
        (0, 20000, 2, 16384),
        (20000, 500, 2, 16384),
    ]
    assert block.chunks[0].checksums == bytes.fromhex("e593221580b71f72")
    # the chunk checksums Ozone's client computed equal ours over the example's data
    for c, (off, data) in zip(block.chunks, example_chunks()):
        assert ChunkMeta.from_data(off, data, algorithm="crc32", bytes_per_checksum=16384) == c
    # re-encoded the way a datanode stores it: the same 140 bytes
    names = [n for _, _, n in decoded.names[EXAMPLE_BLOCK]]
    assert encode_block(7, block, bcsid=42, names=names) == EXAMPLE_VALUE
    # values from the DB equal Ozone's formulas (facts sheet, section 8)
    tree = tree_from_meta(decoded.meta)
    assert [c.leaf for c in block.chunks] == [0x6BB87189, 0xF6A816C1]
    assert tree.block(EXAMPLE_BLOCK).value == 0x744E7C18
    assert tree.data_checksum == 0xBA28D860


def test_block_data_unknown_fields_survive() -> None:
    msg = pb.BlockData()
    msg.ParseFromString(EXAMPLE_VALUE + bytes([0x10, 0x05]))  # flags = 5 (declared)
    assert msg.flags == 5
    extra = EXAMPLE_VALUE + bytes([0x38, 0x01])  # field 7, unknown to us
    msg.ParseFromString(extra)
    assert msg.SerializeToString() == extra


@pytest.mark.parametrize(
    "key, value, reason",
    [
        (b"109611004723200001", EXAMPLE_VALUE[:-1], "not a BlockData"),
        (b"109611004723200002", EXAMPLE_VALUE, "does not name"),
    ],
)
def test_bad_block_data_entries_are_metadata_errors(key: bytes, value: bytes, reason: str) -> None:
    from merkle.replica.errors import BlockMetaError

    with pytest.raises(BlockMetaError, match=reason):
        decode_blocks(7, [(key, value)], "db")
    with pytest.raises(BlockMetaError, match="container 7"):
        decode_blocks(8, [(EXAMPLE_KEY[9:], EXAMPLE_VALUE)], "db")


def test_db_prefix_iteration_skips_hash_keys_and_other_containers(tmp_path: Path) -> None:
    rows = {
        block_key(7, 3): b"a",
        block_key(7, 12): b"b",
        container_prefix(7) + b"#x": b"c",
        block_key(6, 1): b"d",
        block_key(8, 1): b"e",
        block_key(7 + 256, 1): b"f",
    }
    meta = {container_prefix(7) + b"#BCSID": struct.pack(">q", 42)}
    write_volume_db(tmp_path / "db", rows, meta)
    with VolumeDB(tmp_path / "db") as db:
        assert list(db.block_values(7)) == [(b"12", b"b"), (b"3", b"a")]
        assert list(db.block_values(9)) == []
        assert db.metadata(7) == {"#BCSID": 42}
    assert not any(n.startswith("rocksdict") for n in os.listdir(tmp_path / "db"))


def test_unopenable_db_is_one_line(tmp_path: Path) -> None:
    from merkle.replica.ozone.rocks import VolumeDBError

    (tmp_path / "db").mkdir()
    (tmp_path / "db" / "CURRENT").write_text("MANIFEST-000099\n")
    with pytest.raises(VolumeDBError, match="cannot open") as exc:
        VolumeDB(tmp_path / "db")
    assert "\n" not in str(exc.value)
    with pytest.raises(VolumeDBError, match="No such file"):
        VolumeDB(tmp_path / "nothing")


# ---- volumes ---------------------------------------------------------------------------------


def test_container_dir_index() -> None:
    assert [container_dir_index(i) for i in (0, 511, 512, 1023, 1024, 512 * 256)] == [
        0,
        0,
        1,
        1,
        2,
        0,
    ]


def test_discovery_of_volumes_datanodes_clusters(tmp_path: Path) -> None:
    for dn in ("dn1", "dn2"):
        for vol in ("disk1", "disk2"):
            make_volume(tmp_path / dn / vol, {1: {1: [(0, b"x" * 100)]}, 600: {}})
    assert len(find_volumes(tmp_path)) == 4
    assert len(find_volumes(tmp_path / "dn1")) == 2
    ((vol, inner),) = find_volumes(tmp_path / "dn1" / "disk1")
    assert inner is None and [r.container_id for r in vol.replicas()] == [1, 600]
    assert vol.replicas()[1].root.parent.name == "containerDir1"
    rep = vol.replicas()[0].root
    ((vol2, inner2),) = find_volumes(rep / "chunks")
    assert vol2.root == vol.root and inner2 == rep / "chunks"
    results = scan_paths([rep])
    assert [r.container_id for r in results] == [1] and results[0].ok


# ---- scanning --------------------------------------------------------------------------------


def test_golden_tree_in_a_volume_is_read_as_is_and_matches_the_scan(tmp_path: Path) -> None:
    """Ozone's check vectors (golden_g02): the data, the DB values, the scanner's tree and the
    stored .tree written by Ozone's Java all agree."""
    case = GOLDEN / "cases" / "golden_g02_check_vectors_crc32"
    raw = (case / "ours.tree").read_bytes()
    info = json.loads((case / "case.json").read_text())["files"]["ours.tree"]["ozone"]

    def data(seed: int, n: int) -> bytes:
        return bytes((i * 31 + seed) % 251 for i in range(n))

    blocks = {1: [(0, data(1, 40000)), (40000, data(2, 40000))], 2: [(0, data(3, 12345))]}
    make_volume(tmp_path / "vol", {2: blocks}, trees={2: raw})
    (r,) = scan_paths([tmp_path / "vol"])
    assert r.ok, r.errors
    assert r.tree.data_checksum == info["dataChecksum"] == 0x1833A6A1
    assert r.scanned.data_checksum == info["dataChecksum"]
    files = _files(tmp_path / "vol", 2)
    stored, stored_raw, problem = read_stored_tree(files)
    files._db.close()
    assert problem is None and stored_raw == raw
    # (byte equality of a re-encoded tree is the tree encoder's business, tested elsewhere)
    ozone_blocks = [
        [
            b.block_id,
            b.value,
            b.deleted,
            [[c.offset, c.length, c.value, c.checksum_matches] for c in b.chunks],
        ]
        for b in stored.blocks()
    ]
    assert ozone_blocks == info["blocks"]
    for t in (r.tree, r.scanned):
        assert [
            [
                b.block_id,
                b.value,
                b.deleted,
                [[c.offset, c.length, c.value, c.checksum_matches] for c in b.chunks],
            ]
            for b in t.blocks()
        ] == info["blocks"]


def _files(vol_root: Path, cid: int) -> Any:
    from merkle.replica.ozone.containerfile import parse_container_file as parse
    from merkle.replica.ozone.scan import OzoneReplicaFiles

    ((vol, _),) = find_volumes(vol_root)
    rep = next(r for r in vol.replicas() if r.container_id == cid)
    db = VolumeDB(vol.db_dir)
    return OzoneReplicaFiles(rep, db, parse(rep.container_file.read_bytes()))


def test_ozone_rules(tmp_path: Path) -> None:
    good = [(0, b"a" * 5000), (5000, b"b" * 3000)]
    make_volume(
        tmp_path / "vol",
        {1: {1: good}, 2: {1: good}, 3: {1: good}, 4: {1: good}, 5: {1: good, 2: [(0, b"")]}},
        states={2: "OPEN", 3: "QUASI_CLOSED", 4: "UNHEALTHY"},
        bpc=1024,
    )
    ((vol, _),) = find_volumes(tmp_path / "vol")
    reps = {r.container_id: r for r in vol.replicas()}
    # block 2 of container 5 has one empty chunk and no file: no error (EC padding)
    reps[5].block_file(2).unlink()
    # ('#'-prefixed keys inside a container's range: test_hash_keys_skipped_...)
    results = {r.container_id: r for r in scan_paths([tmp_path / "vol"])}
    assert results[1].ok and results[3].ok and results[4].ok and results[5].ok
    assert keys(results[2]) == [("CONTAINER_NOT_SCANNED", 0, 0)]
    assert "OPEN" in results[2].errors[0].detail and results[2].bytes_read == 0
    assert results[1].bytes_read == 8000
    # (issue 36) an OPEN replica was not read: never `verified`, whatever its stored tree
    assert results[2].meta is None and not results[2].verified
    assert all(results[c].verified for c in (1, 3, 4, 5))


def test_hash_keys_skipped_and_unreferenced_files(tmp_path: Path) -> None:
    w = make_volume(tmp_path / "vol", {1: {1: [(0, b"a" * 5000)]}})
    ((vol, _),) = find_volumes(tmp_path / "vol")
    rep = vol.replicas()[0]
    # rebuild the DB with a '#' key in block_data (as V1-era markers look) and an orphan file
    rows = dict(w.block_rows)
    rows[container_prefix(1) + b"#deleting#1"] = b"not a BlockData"
    import shutil

    shutil.rmtree(vol.db_dir)
    write_volume_db(vol.db_dir, rows, w.meta_rows)
    (rep.chunks_dir / "77.block").write_bytes(b"uncommitted")
    (r,) = scan_paths([tmp_path / "vol"])
    assert keys(r) == [("UNREFERENCED_DATA_FILE", 77, 0)]


def test_file_per_chunk(tmp_path: Path) -> None:
    chunks = [(0, os.urandom(5000)), (5000, os.urandom(3000))]
    make_volume(tmp_path / "vol", {1: {1: chunks, 2: chunks}}, layout_version=1, bpc=1024)
    ((vol, _),) = find_volumes(tmp_path / "vol")
    rep = vol.replicas()[0]
    assert sorted(os.listdir(rep.chunks_dir)) == [
        "1_chunk_1",
        "1_chunk_2",
        "2_chunk_1",
        "2_chunk_2",
    ]
    (r,) = scan_paths([tmp_path / "vol"])
    assert r.ok and r.bytes_read == 16000
    with open(rep.chunks_dir / "1_chunk_2", "r+b") as f:
        f.seek(10)
        f.write(b"\x00" if chunks[1][1][10] else b"\x01")
    os.unlink(rep.chunks_dir / "2_chunk_1")
    (r,) = scan_paths([tmp_path / "vol"])
    assert keys(r) == [("CORRUPT_CHUNK", 1, 5000), ("MISSING_CHUNK", 2, 0)]
    for n in os.listdir(rep.chunks_dir):
        if n.startswith("2_"):
            os.unlink(rep.chunks_dir / n)
    (r,) = scan_paths([tmp_path / "vol"])
    assert ("MISSING_DATA_FILE", 2, 0) in keys(r)


def test_container_file_problems(tmp_path: Path) -> None:
    make_volume(
        tmp_path / "vol",
        {1: {1: [(0, b"a" * 100)]}, 2: {1: [(0, b"a" * 100)]}, 3: {1: [(0, b"a" * 100)]}},
    )
    ((vol, _),) = find_volumes(tmp_path / "vol")
    reps = {r.container_id: r for r in vol.replicas()}
    reps[1].container_file.unlink()
    text = reps[2].container_file.read_bytes()
    reps[2].container_file.write_bytes(text.replace(b"state: CLOSED", b"state: OPEN"))
    os.symlink(reps[2].container_file, reps[3].metadata_dir / "x")
    reps[3].container_file.unlink()
    os.symlink("x", reps[3].container_file)
    results = {r.container_id: r for r in scan_paths([tmp_path / "vol"])}
    assert keys(results[1]) == [("CONTAINER_FILE_MISSING", 0, 0)]
    assert keys(results[2]) == [("CONTAINER_FILE_CORRUPT", 0, 0)]
    assert "checksum mismatch" in results[2].errors[0].detail
    # a link is neither followed nor called corrupt: NOT_A_REGULAR_FILE (hostile issue)
    assert keys(results[3]) == [("NOT_A_REGULAR_FILE", 0, 0)]
    assert "symbolic link" in results[3].errors[0].detail
    # (issue 36) without a usable .container nothing was read: never verified with 0 bytes
    # read, in the scan or the census
    assert not any(r.verified or r.meta is not None for r in results.values())
    census = scan_paths([tmp_path / "vol"], metadata_only=True)
    assert len(census) == 3 and not any(r.verified or r.meta is not None for r in census)


def test_unopenable_db_is_reported_per_volume_and_the_walk_goes_on(tmp_path: Path) -> None:
    for v in ("vol1", "vol2"):
        make_volume(tmp_path / v, {1: {1: [(0, b"a" * 100)]}})
    ((vol1, _),) = find_volumes(tmp_path / "vol1")
    for name in os.listdir(vol1.db_dir):
        if name.startswith("MANIFEST"):
            (vol1.db_dir / name).write_bytes(b"garbage")
    failed: List[Any] = []
    results = scan_paths([tmp_path], on_error=lambda v, e: failed.append((v, e)))
    assert [r.path for r in results] == [os.fspath(r.path) for r in results]
    assert len(results) == 1 and "vol2" in results[0].path and results[0].ok
    assert len(failed) == 1 and failed[0][0].root == os.fspath(vol1.root)
    assert "container.db" in str(failed[0][1]) and "\n" not in str(failed[0][1])


def test_volume_items_open_each_volume_db_once(tmp_path: Path, monkeypatch: Any) -> None:
    """The Spark scan's task body: a run of items of one volume shares one open DB (two
    volumes of three replicas each: two opens, not six), and every replica is scanned."""
    from types import SimpleNamespace

    from merkle.replica.ozone import scan as ozone_scan

    for v in ("vol1", "vol2"):
        make_volume(tmp_path / v, {c: {1: [(0, bytes([c]) * 3000)]} for c in (1, 2, 3)})
    items = []
    for v in ("vol1", "vol2"):  # in volume order, as spark_udfs.jobs.scan sorts and slices them
        ((vol, _),) = find_volumes(tmp_path / v)
        items += [
            SimpleNamespace(
                path=os.fspath(r.root), container=r.container_id, fs_root=os.fspath(vol.root)
            )
            for r in vol.replicas()
        ]
    opened: List[Path] = []
    real = ozone_scan.VolumeDB

    def counting(db_dir: Path) -> Any:
        opened.append(Path(db_dir))
        return real(db_dir)

    monkeypatch.setattr(ozone_scan, "VolumeDB", counting)
    out = list(ozone_scan.scan_volume_items(items))
    assert len(opened) == 2 and len(set(opened)) == 2
    assert [exc for _, _, exc in out] == [None] * 6
    assert all(r.ok and r.bytes_read == 3000 for _, r, _ in out)


# ---- generated clusters ----------------------------------------------------------------------


def _generate(root: Path, layout: str, faults: str, seed: int = 3) -> Dict[str, Any]:
    return generate_cluster(
        root,
        GeneratorConfig(
            containers=12, seed=seed, layout=layout, faults=parse_faults(faults, layout)
        ),
    )


def _found(results: List[Any], root: Path) -> Dict[str, List[Tuple[str, int, int]]]:
    return {os.path.relpath(r.path, root): keys(r) for r in results}


def _expected(manifest: Dict[str, Any]) -> Dict[str, List[Tuple[str, int, int]]]:
    return {
        rep: sorted((e["error"], e["block_id"] or 0, e["offset"] or 0) for e in es)
        for rep, es in manifest["expected_errors"].items()
    }


def test_generated_volumes_are_scanned_read_only_and_exactly(tmp_path: Path) -> None:
    root = tmp_path / "c"
    manifest = _generate(root, "ozone", "default")
    kinds = {f["type"] for f in manifest["faults"]}
    assert {
        "container-checksum",
        "open-container",
        "db-entry-without-file",
        "file-without-db-entry",
        "meta-corrupt",
        "meta-missing",
    } <= kinds
    before = file_states(root)
    out = subprocess.run(
        [sys.executable, "-m", "merkle", "scan", "--json", os.fspath(root)],
        capture_output=True,
        text=True,
        env=dict(os.environ),
    )
    assert out.returncode == 1, out.stderr
    results = json.loads(out.stdout)
    assert not results["failed"]
    found = {
        os.path.relpath(r["path"], root): sorted(
            (e["error"], e["block_id"] or 0, e["offset"] or 0) for e in r["errors"]
        )
        for r in results["replicas"]
    }
    assert found == _expected(manifest)
    assert file_states(root) == before  # nothing in any volume changed: bytes and mtimes


def test_same_content_same_findings_in_both_layouts(tmp_path: Path) -> None:
    faults = (
        "bitflip=2,bitflip2=1,bitflip-all=1,truncate=2,missing-chunks=1,missing-file=1,"
        "tombstone=1,extra-block=1,tree-corrupt=1,tree-missing=1,meta-corrupt=1"
    )
    m_c = _generate(tmp_path / "c", "crcmerkle", faults)
    m_o = _generate(tmp_path / "o", "ozone", faults)
    crc = {
        os.path.relpath(r.path, tmp_path / "c"): r
        for r in scan_paths([tmp_path / "c"], write_tree=False)
    }
    ozo = {os.path.relpath(r.path, tmp_path / "o"): r for r in scan_paths([tmp_path / "o"])}

    def by_replica(results: Dict[str, Any]) -> Dict[Tuple[str, int], Any]:
        return {(p.split("/")[0], r.container_id): r for p, r in results.items()}

    a, b = by_replica(crc), by_replica(ozo)
    assert a.keys() == b.keys() and len(a) == 36
    for k in a:
        if any(e.kind == "METADATA_CORRUPT" for e in b[k].errors):
            # the Ozone form is one undecodable row: only its block goes unverified (Ozone
            # skips the row), where the crcmerkle layout's corrupt `.blocks` verifies nothing
            assert [e.kind for e in a[k].errors] == ["METADATA_CORRUPT"]
            assert [e.kind for e in b[k].errors] == ["METADATA_CORRUPT"]
            n_blocks = len(m_o["containers"][str(k[1])]["blocks"])
            assert b[k].errors[0].block_id is not None and b[k].blocks == n_blocks - 1
            continue
        assert keys(a[k]) == keys(b[k]), k
        assert a[k].tree.data_checksum == b[k].tree.data_checksum, k
        assert tree_to_bytes(a[k].scanned) == tree_to_bytes(b[k].scanned), k
    assert _found(list(ozo.values()), tmp_path / "o") == _expected(m_o)
    assert m_c["faults"][0]["type"] == m_o["faults"][0]["type"]


def test_generator_volume_db_values_follow_ozone(tmp_path: Path) -> None:
    manifest = _generate(tmp_path / "c", "ozone", "none")
    seen = 0
    for vol, _ in find_volumes(tmp_path / "c"):
        with VolumeDB(vol.db_dir) as db:
            for rep in vol.replicas():
                cid = rep.container_id
                d = decode_blocks(cid, db.block_values(cid), "db")
                counters = db.metadata(cid)
                assert counters["#BLOCKCOUNT"] == len(d.meta.blocks)
                assert counters["#BYTESUSED"] == d.meta.data_bytes
                assert counters["#BYTESUSED"] == sum(
                    manifest["containers"][str(cid)]["blocks"].values()
                )
                assert counters["#DATACHECKSUM"] == tree_from_meta(d.meta).data_checksum
                assert counters["#PENDINGDELETEBLOCKCOUNT"] == 0
                c = parse_container_file(rep.container_file.read_bytes())
                assert c.checksum_ok and c.state == "CLOSED"
                assert c.fields["chunksPath"] == os.fspath(rep.chunks_dir)
                seen += 1
    assert seen == 36


def test_cli_generate_defaults_to_ozone_and_reconcile_refuses(tmp_path: Path) -> None:
    root = tmp_path / "c"

    def cli(*argv: Any) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "merkle", *map(str, argv)], capture_output=True, text=True
        )

    out = cli("generate", root, "--containers", "12", "--seed", "5")
    assert out.returncode == 0, out.stderr
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["layout"] == "ozone" and all("/hdds/" in r for r in manifest["expected_errors"])
    before = file_states(root)
    rep = root / next(iter(manifest["expected_errors"]))
    for argv in (
        ["reconcile", "--all", root],
        ["reconcile", "--all", "--dry-run", root],
        ["reconcile", rep, rep.parent],
    ):
        out = cli(*argv)
        assert out.returncode == 2 and out.stdout == ""
        assert out.stderr.count("\n") == 1 and "ozone admin container reconcile" in out.stderr
    assert f"reconcile {rep.name}'" in out.stderr
    out = cli("scan", root)
    assert out.returncode == 1 and "CONTAINER_FILE_CORRUPT" in out.stdout
    assert file_states(root) == before


def test_mixed_layouts_scan_together(tmp_path: Path) -> None:
    # issue 23 item 16: one call may name Ozone volumes and crcmerkle-layout replicas
    make_volume(tmp_path / "vol", {1: {1: [(0, b"a" * 100)]}})
    _generate(tmp_path / "c", "crcmerkle", "none")
    results = scan_paths([tmp_path / "vol", tmp_path / "c"])
    on_volume = [r for r in results if os.fspath(tmp_path / "vol") in r.path]
    assert len(on_volume) == 1 and len(results) > 1 and all(r.ok for r in results)


def test_snapshot_links_tables_and_is_removed(tmp_path: Path, monkeypatch: Any) -> None:
    write_volume_db(tmp_path / "db", {block_key(1, 1): b"v"}, {})
    snaps = tmp_path / "snaps"
    snaps.mkdir()
    monkeypatch.setenv("CRCMERKLE_SNAPSHOT_DIR", os.fspath(snaps))
    ssts = [p for p in (tmp_path / "db").iterdir() if p.suffix == ".sst"]
    assert ssts
    before = file_states(tmp_path / "db")
    with VolumeDB(tmp_path / "db") as db:
        (snap,) = snaps.iterdir()
        assert all(os.path.samefile(p, snap / p.name) for p in ssts)  # linked, not copied
        assert not any(n.startswith("OPTIONS") for n in os.listdir(snap))
        assert list(db.block_values(1)) == [(b"1", b"v")]
    assert list(snaps.iterdir()) == []
    assert file_states(tmp_path / "db") == before


# ---- hostile volumes (issue 15): no hang on a FIFO, bounded reads, links never followed ----


def _child(*argv: Any, timeout: float = 60, memory: Any = None) -> subprocess.CompletedProcess:
    """`crcmerkle ARGV` in a child; a hang fails the test at `timeout`."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    env.pop("CRCMERKLE_DEBUG", None)

    if "asan" in env.get("LD_PRELOAD", ""):
        memory = None  # ASan reserves terabytes of shadow address space: no RLIMIT_AS then

    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    try:
        return subprocess.run(
            [sys.executable, "-m", "merkle", *map(str, argv)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            preexec_fn=limit if memory else None,
            cwd="/",
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"hung for {timeout} s: crcmerkle {' '.join(map(str, argv))}")


def _hostile_volume(root: Path) -> Any:
    make_volume(root, {2: {3: [(0, b"a" * 5000), (5000, b"b" * 3000)]}}, bpc=1024)
    ((vol, _),) = find_volumes(root)
    return vol, vol.replicas()[0]


@pytest.mark.parametrize("which", ["block", "container", "tree", "CURRENT"])
def test_hostile_a_fifo_never_hangs_the_ozone_scan(tmp_path: Path, which: str) -> None:
    vol, rep = _hostile_volume(tmp_path / "vol")
    path = {
        "block": rep.block_file(3),
        "container": rep.container_file,
        "tree": rep.tree,
        "CURRENT": vol.db_dir / "CURRENT",
    }[which]
    path.unlink()
    os.mkfifo(path)
    r = _child("scan", tmp_path / "vol", "--json")
    out = json.loads(r.stdout)
    if which == "CURRENT":  # the volume's DB cannot be read: reported for the volume
        assert r.returncode == 2 and out["replicas"] == []
        assert "not a regular file (a FIFO)" in out["failed"][0]["error"]
    else:
        assert r.returncode == 1, r.stderr
        errors = out["replicas"][0]["errors"]
        assert "NOT_A_REGULAR_FILE" in [e["error"] for e in errors]
        assert any("a FIFO" in e["detail"] for e in errors)
    import stat as st

    assert st.S_ISFIFO(os.lstat(path).st_mode)


def test_hostile_a_fifo_block_of_an_ozone_peer_never_hangs_offline_reconcile(
    tmp_path: Path,
) -> None:
    _, target = _hostile_volume(tmp_path / "dn1" / "vol")
    _, peer = _hostile_volume(tmp_path / "dn2" / "vol")
    with open(target.block_file(3), "r+b") as f:
        f.write(b"X")  # our chunk @0 is corrupt: the peer's copy is wanted
    peer.block_file(3).unlink()
    os.mkfifo(peer.block_file(3))
    r = _child("reconcile", "--offline", target.root, peer.root, "--json")
    out = json.loads(r.stdout)
    failures = [f["reason"] for p in out["results"][0]["peers"] for f in p["failures"]]
    assert r.returncode == 1 and any("a FIFO" in f for f in failures), (r.stdout, r.stderr)


def test_hostile_a_sparse_ozone_tree_is_refused_before_reading(tmp_path: Path) -> None:
    _, rep = _hostile_volume(tmp_path / "vol")
    with open(rep.tree, "r+b") as f:
        f.truncate(4 << 30)  # 4 GiB, a few KiB on disk
    # 2 GiB of address space: room for RocksDB's threads and their malloc arenas (768 MiB
    # was marginal with them), none for reading the file whole
    r = _child("scan", tmp_path / "vol", "--json", memory=2 << 30)
    assert r.stdout, r.stderr
    out = json.loads(r.stdout)
    errors = out["replicas"][0]["errors"]
    assert [e["error"] for e in errors] == ["TREE_UNREADABLE"] and "exceeds" in r.stdout
    assert rep.tree.stat().st_size == 4 << 30


def test_hostile_a_linked_container_db_is_reported_for_its_volume(tmp_path: Path) -> None:
    vol, _ = _hostile_volume(tmp_path / "vol")
    elsewhere = tmp_path / "elsewhere.db"
    vol.db_dir.rename(elsewhere)
    vol.db_dir.symlink_to(elsewhere)
    r = _child("scan", tmp_path / "vol", "--json")
    out = json.loads(r.stdout)
    assert r.returncode == 2 and out["replicas"] == []
    assert "symbolic link" in out["failed"][0]["error"]
