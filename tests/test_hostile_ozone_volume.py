"""Hostile Ozone volumes and what a real datanode expects of them (issue 23 items 5, 9, 11,
15, 16; issue 28 points 3 and 4).

VERSION names are data, never paths; a `.container` alias bomb stops only its replica; the DB
snapshot copies only what RocksDB reads, bounded; VERSION says what Ozone writes (and a
volume Ozone would refuse is reported); one bad PATH never stops a scan; a `.container` whose
recorded paths are not the replica's own is CONTAINER_PATH_MISMATCH; generated containers
carry the counters a datanode keeps.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Dict, List

import pytest

pytest.importorskip("rocksdict")
pytest.importorskip("yaml")

from test_ozone_layout import _child, _expected, _found, make_volume  # noqa: E402

from merkle.replica.generate import GeneratorConfig, generate_cluster, parse_faults  # noqa: E402
from merkle.replica.ozone.blockdata import decode_blocks  # noqa: E402
from merkle.replica.ozone.containerfile import (  # noqa: E402
    ContainerFileError,
    parse_container_file,
    render_container_file,
)
from merkle.replica.ozone.layout import find_volumes, read_version  # noqa: E402
from merkle.replica.ozone.rocks import VolumeDB  # noqa: E402
from merkle.replica.scan import scan_paths  # noqa: E402

CONTAINERS = {
    2: {3: [(0, b"a" * 5000), (5000, b"b" * 3000)]},
    3: {1: [(0, b"c" * 4000)]},
    4: {7: [(0, b"d" * 2000)]},
}


def _volume(root: Path, containers: Dict[int, Any] = CONTAINERS) -> Any:
    make_volume(root, containers, bpc=1024)
    ((vol, _),) = find_volumes(root)
    return vol


def _set_version(vol_root: Path, **changes: str) -> None:
    version = vol_root / "hdds" / "VERSION"
    props = read_version(version)
    props.update(changes)
    version.write_text("".join(f"{k}={v}\n" for k, v in props.items()))


def _scan_json(*paths: Any) -> Any:
    r = _child("scan", *paths, "--json")
    assert r.stdout, r.stderr
    return r.returncode, json.loads(r.stdout)


# ---- issue 23 item 5: VERSION's clusterID/storageID are one plain component ------------------


@pytest.mark.parametrize(
    "key, value",
    [
        ("clusterID", "../../../dn0/vol0/hdds/CID-test"),
        ("storageID", "../../../../dn0/vol0/hdds/CID-test/DS-test"),
        ("clusterID", "/abs/CID-test"),
        ("storageID", ".."),
        ("clusterID", "CID-test\x1b[2K\tforged"),
    ],
)
def test_version_names_that_walk_out_are_a_volume_problem(
    tmp_path: Path, key: str, value: str
) -> None:
    _volume(tmp_path / "dn0" / "vol0")
    empty = _volume(tmp_path / "dn1" / "vol0", {})
    _set_version(empty.root, **{key: value})
    ((vol, _),) = find_volumes(empty.root)
    assert vol.problem is not None and vol.replicas() == []
    code, out = _scan_json(empty.root)
    assert code == 2 and out["replicas"] == []
    assert "not one plain directory name" in out["failed"][0]["error"]
    # the whole cluster: dn1 claims none of dn0's replicas, dn0's are scanned once each
    code, out = _scan_json(tmp_path)
    assert code == 2 and len(out["failed"]) == 1
    assert (
        sorted(os.path.relpath(r["path"], tmp_path).split(os.sep)[0] for r in out["replicas"])
        == ["dn0"] * 3
    )


def test_a_datanode_never_lists_another_datanodes_replicas(tmp_path: Path) -> None:
    """What the decommission check counts: the replicas discovery gives each datanode."""
    pytest.importorskip("pyspark")
    from spark_udfs.jobs.scan import _discover

    _volume(tmp_path / "dn0" / "vol0")
    empty = _volume(tmp_path / "dn1" / "vol0", {})
    _set_version(empty.root, clusterID="../../../dn0/vol0/hdds/CID-test")
    _, work = _discover(os.fspath(tmp_path))
    # dn1's volume is refused (its clusterID is a path): only dn0's replicas are listed
    assert work and {os.path.relpath(w.path, tmp_path).split("/")[0] for w in work} == {"dn0"}


def test_a_linked_cluster_directory_is_never_followed(tmp_path: Path) -> None:
    _volume(tmp_path / "dn0" / "vol0")
    empty = _volume(tmp_path / "dn1" / "vol0", {})
    cluster = empty.root / "hdds" / "CID-test"
    shutil.rmtree(cluster)
    cluster.symlink_to(tmp_path / "dn0" / "vol0" / "hdds" / "CID-test")
    ((vol, _),) = find_volumes(empty.root)
    assert vol.replicas() == []
    code, out = _scan_json(empty.root)
    assert code == 2 and out["replicas"] == []


@pytest.mark.parametrize("which", ["current", "storage"])
def test_a_linked_current_or_storage_directory_is_never_followed(
    tmp_path: Path, which: str
) -> None:
    theirs = _volume(tmp_path / "dn0" / "vol0")
    empty = _volume(tmp_path / "dn1" / "vol0", {})
    assert empty.id_dir is not None and theirs.id_dir is not None
    if which == "current":
        shutil.rmtree(empty.id_dir / "current")
        (empty.id_dir / "current").symlink_to(theirs.id_dir / "current")
    else:
        # another volume's DB (and the replicas the first scan would attribute to it)
        shutil.rmtree(empty.id_dir / "DS-test")
        (empty.id_dir / "DS-test").symlink_to(theirs.id_dir / "DS-test")
        shutil.rmtree(empty.id_dir / "current")
        shutil.copytree(theirs.id_dir / "current", empty.id_dir / "current")
    code, out = _scan_json(empty.root)
    assert code == 2 and out["replicas"] == [], out


@pytest.mark.parametrize("what", ["link", "fifo", "huge"])
def test_an_unreadable_version_stops_only_its_volume(tmp_path: Path, what: str) -> None:
    _volume(tmp_path / "dn0" / "vol0")
    bad = _volume(tmp_path / "dn1" / "vol0")
    version = bad.root / "hdds" / "VERSION"
    if what == "link":
        version.unlink()
        version.symlink_to(tmp_path / "dn0" / "vol0" / "hdds" / "VERSION")
    elif what == "fifo":
        version.unlink()
        os.mkfifo(version)
    else:
        with open(version, "ab") as f:
            f.truncate(4 << 30)
    code, out = _scan_json(tmp_path)
    assert code == 2 and len(out["failed"]) == 1, out
    assert "dn1" in out["failed"][0]["error"]
    assert (
        sorted(os.path.relpath(r["path"], tmp_path).split(os.sep)[0] for r in out["replicas"])
        == ["dn0"] * 3
    )


def test_a_replica_reached_twice_is_scanned_once_and_reported(tmp_path: Path) -> None:
    _volume(tmp_path / "vol")
    alias = tmp_path / "alias"
    alias.symlink_to(tmp_path / "vol")  # the same volume named by a second path
    code, out = _scan_json(tmp_path / "vol", alias)
    assert len(out["replicas"]) == 3 and all(r["ok"] for r in out["replicas"])
    assert code == 2 and len(out["failed"]) == 3
    assert all("same device and inode" in f["error"] for f in out["failed"])


# ---- issue 23 item 9: .container alias bombs ------------------------------------------------


def _bomb(field: str) -> str:
    lines = ["!<KeyValueContainerData>", "a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 8):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    fields = {
        "containerID": "2",
        "layOutVersion": "2",
        "maxSize": "5368709120",
        "state": "CLOSED",
        "schemaVersion": "'3'",
        "checksum": "0" * 64,
    }
    fields[field] = "[" + ", ".join(["*a7"] * 9) + "]"
    return "\n".join(lines + [f"{k}: {v}" for k, v in sorted(fields.items())]) + "\n"


@pytest.mark.parametrize("field", ["state", "schemaVersion"])
def test_a_container_file_alias_bomb_stops_only_its_replica(tmp_path: Path, field: str) -> None:
    vol = _volume(tmp_path / "vol")
    bombed = vol.replicas()[0]
    bombed.container_file.write_text(_bomb(field))
    assert len(bombed.container_file.read_bytes()) < 2048  # expands to 9**9 items
    r = _child("scan", tmp_path / "vol", "--json", timeout=60, memory=2 << 30)
    out = json.loads(r.stdout)
    assert r.returncode == 1, r.stderr
    by_id = {rep["container_id"]: rep for rep in out["replicas"]}
    assert [e["error"] for e in by_id[bombed.container_id]["errors"]] == ["CONTAINER_FILE_CORRUPT"]
    assert "aliases" in by_id[bombed.container_id]["errors"][0]["detail"]
    assert len(r.stdout) < 20000
    assert all(rep["ok"] for cid, rep in by_id.items() if cid != bombed.container_id)


def test_container_file_anchor_and_non_scalar_fields_are_refused() -> None:
    base = render_container_file(
        {
            "containerID": 1,
            "layOutVersion": 2,
            "maxSize": 5,
            "state": "CLOSED",
            "schemaVersion": "3",
        }
    ).decode()
    with pytest.raises(ContainerFileError, match="anchors"):
        parse_container_file(base.replace("state: CLOSED", "state: &s CLOSED").encode())
    nested = "[" * 50 + "1" + "]" * 50
    with pytest.raises(ContainerFileError, match="state is a list"):
        parse_container_file(base.replace("state: CLOSED", f"state: {nested}").encode())
    with pytest.raises(ContainerFileError, match="schemaVersion is a dict") as info:
        parse_container_file(
            base.replace("schemaVersion: '3'", "schemaVersion: {a: [1, 2]}").encode()
        )
    assert "[1, 2]" not in str(info.value)
    long_state = "X" * 100000
    with pytest.raises(ContainerFileError) as info:
        parse_container_file(base.replace("state: CLOSED", f"state: {long_state}").encode())
    assert len(str(info.value)) < 200


def test_deep_nesting_with_the_pure_python_loader_is_one_replica_error(monkeypatch: Any) -> None:
    """libyaml caps nesting; PyYAML's own loader (no libyaml) recursed until RecursionError,
    which no caller catches: the whole scan died."""
    import yaml

    from merkle.replica.ozone import containerfile

    class PureLoader(yaml.SafeLoader):
        pass

    PureLoader.add_constructor(
        "KeyValueContainerData", lambda loader, node: loader.construct_mapping(node)
    )
    monkeypatch.setattr(containerfile, "_Loader", PureLoader)
    base = render_container_file(
        {
            "containerID": 1,
            "layOutVersion": 2,
            "maxSize": 5,
            "state": "CLOSED",
            "schemaVersion": "3",
        }
    ).decode()
    # block nesting (by indentation): flow nesting ([[[...]]]) is refused before YAML reads
    # it (the next test), block nesting still reaches the loader's recursion; 1,300 levels
    # are 851 KB, inside MAX_SIZE
    n = 1300
    deep = "".join(" " * (i + 1) + "k:\n" for i in range(n)) + " " * (n + 1) + "v\n"
    with pytest.raises(ContainerFileError, match="nested too deeply"):
        parse_container_file((base + "x:\n" + deep).encode())


def test_deep_nesting_is_refused_before_yaml_reads_it(monkeypatch: Any) -> None:
    """PyYAML's pure-Python scanner is quadratic in the flow depth: 5,000 levels held one scan
    for 45 s before its RecursionError. Past MAX_NESTING the file is refused unread; at it,
    YAML reads it (and the value is judged as any other)."""
    import yaml

    from merkle.replica.ozone import containerfile

    base = render_container_file(
        {"containerID": 1, "layOutVersion": 2, "maxSize": 5, "state": "CLOSED"}
    ).decode()
    parsed: List[str] = []
    real_parse = yaml.parse
    monkeypatch.setattr(
        yaml, "parse", lambda text, **kw: parsed.append(text) or real_parse(text, **kw)
    )
    n = containerfile.MAX_NESTING
    for depth, refused in ((n + 1, True), (n, False)):
        parsed.clear()
        deep = "[" * depth + "]" * depth
        with pytest.raises(ContainerFileError) as info:
            parse_container_file(base.replace("state: CLOSED", f"state: {deep}").encode())
        assert ("nested too deeply" in str(info.value)) is refused
        assert bool(parsed) is not refused  # refused: YAML never saw the text


# ---- issue 23 item 11: the DB snapshot copies only what RocksDB reads, bounded --------------


def _snapshot_names(monkeypatch: Any) -> List[List[str]]:
    seen: List[List[str]] = []
    real_open = VolumeDB._open

    def recording(self: Any, rd: Any) -> Any:
        seen.append(sorted(os.listdir(self._snap)))
        return real_open(self, rd)

    monkeypatch.setattr(VolumeDB, "_open", recording)
    return seen


def test_snapshot_takes_only_the_files_rocksdb_reads(tmp_path: Path, monkeypatch: Any) -> None:
    vol = _volume(tmp_path / "vol")
    db = vol.db_dir
    for name in ("junk", "MANIFEST-999999", "OPTIONS-000099", "LOG.old.1", "000001.txt"):
        with open(db / name, "wb") as f:
            f.truncate(64 << 20)  # sparse: 64 MiB that would be copied whole
    seen = _snapshot_names(monkeypatch)
    results = scan_paths([tmp_path / "vol"])
    assert len(results) == 3 and all(r.ok for r in results)
    current = (db / "CURRENT").read_text().strip()
    taken = seen[0]
    assert "junk" not in taken and "MANIFEST-999999" not in taken
    assert "CURRENT" in taken and current in taken
    assert all(
        n in ("CURRENT", current, "IDENTITY") or n.endswith((".sst", ".log")) for n in taken
    ), taken


@pytest.mark.parametrize("which", ["wal", "manifest"])
def test_an_oversized_db_file_makes_the_volume_unreadable_with_one_reason(
    tmp_path: Path, which: str
) -> None:
    vol = _volume(tmp_path / "vol")
    db = vol.db_dir
    name = "999999.log" if which == "wal" else (db / "CURRENT").read_text().strip()
    with open(db / name, "ab") as f:
        f.truncate(8 << 20)  # sparse
    env = dict(os.environ, CRCMERKLE_MAX_DB_FILE_BYTES=str(1 << 20))
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-m", "merkle", "scan", tmp_path / "vol", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=os.getcwd(),
    )
    out = json.loads(r.stdout)
    assert r.returncode == 2 and out["replicas"] == []
    ((failure,),) = [out["failed"]]
    assert f"{name} holds {8 << 20} bytes" in failure["error"]
    assert "CRCMERKLE_MAX_DB_FILE_BYTES" in failure["error"]


# ---- issue 23 item 15: VERSION as Ozone writes it, and checked ------------------------------


def test_version_is_what_ozone_writes(tmp_path: Path) -> None:
    vol = _volume(tmp_path / "vol")
    props = read_version(vol.root / "hdds" / "VERSION")
    assert set(props) == {"storageID", "clusterID", "datanodeUuid", "ctime", "layOutVersion"}
    assert props["layOutVersion"] == "1" and int(props["ctime"]) > 0


@pytest.mark.parametrize(
    "change",
    [
        {"layOutVersion": "0"},
        {"layOutVersion": "2"},
        {"layOutVersion": ""},
        {"layOutVersion": "one"},
        {"datanodeUuid": ""},
        {"ctime": "-1"},
        {"ctime": "99999999999999"},
    ],
)
def test_a_volume_ozone_would_refuse_is_a_volume_problem(
    tmp_path: Path, change: Dict[str, str]
) -> None:
    vol = _volume(tmp_path / "vol")
    _set_version(vol.root, **change)
    code, out = _scan_json(tmp_path / "vol")
    assert code == 2 and out["replicas"] == []
    assert "would refuse this volume" in out["failed"][0]["error"]
    if "layOutVersion" in change:
        assert "Ozone accepts only 1" in out["failed"][0]["error"]


# ---- issue 23 item 16: one bad PATH is one entry; the JSON envelope always -----------------


def test_scan_reports_missing_and_empty_paths_and_scans_the_volume(tmp_path: Path) -> None:
    _volume(tmp_path / "vol")
    (tmp_path / "empty").mkdir()
    code, out = _scan_json(tmp_path / "vol", tmp_path / "missing", tmp_path / "empty")
    assert code == 2 and len(out["replicas"]) == 3 and all(r["ok"] for r in out["replicas"])
    assert sorted(Path(f["path"]).name for f in out["failed"]) == ["empty", "missing"]
    assert out["summary"]["failed"] == 2
    r = _child("scan", tmp_path / "vol", tmp_path / "missing")
    assert r.returncode == 2 and "missing" in r.stderr and "Traceback" not in r.stderr
    assert r.stdout.count("OK ") == 3


def test_scan_mixes_ozone_volumes_and_crcmerkle_replicas(tmp_path: Path) -> None:
    _volume(tmp_path / "vol")
    generate_cluster(tmp_path / "c", GeneratorConfig(containers=2, layout="crcmerkle"))
    code, out = _scan_json(tmp_path / "vol", tmp_path / "c")
    assert code == 0 and out["failed"] == []
    assert len(out["replicas"]) == 3 + 2 * 3


# ---- issue 28 point 3: the paths Ozone trusts ----------------------------------------------


def _rewrite_paths(replica: Any, metadata: str, chunks: str) -> None:
    fields = dict(parse_container_file(replica.container_file.read_bytes()).fields)
    fields.update(metadataPath=metadata, chunksPath=chunks)
    replica.container_file.write_bytes(render_container_file(fields))


def _mismatch(results: List[Any], cid: int) -> List[str]:
    ((r,),) = [[r for r in results if r.container_id == cid]]
    return [e.detail for e in r.errors if e.kind == "CONTAINER_PATH_MISMATCH"]


@pytest.mark.parametrize(
    "where", ["other-volume", "outside", "other-replica", "dotdot", "split-mounts", "not-a-string"]
)
def test_container_paths_not_the_replicas_own_are_a_mismatch(tmp_path: Path, where: str) -> None:
    vol = _volume(tmp_path / "dn0" / "vol0")
    other = _volume(tmp_path / "dn1" / "vol0")
    rep = vol.replicas()[0]
    theirs = other.replicas()[0]
    rel = os.path.relpath(rep.root, vol.root)
    recorded = {
        "other-volume": (theirs.metadata_dir, theirs.chunks_dir),
        "outside": ("/etc", "/root"),
        "other-replica": (vol.replicas()[1].metadata_dir, vol.replicas()[1].chunks_dir),
        "dotdot": (f"{vol.root}/x/../{rel}/metadata", f"{vol.root}/x/../{rel}/chunks"),
        "split-mounts": (rep.metadata_dir, theirs.chunks_dir),
        "not-a-string": (None, None),
    }[where]
    if where == "not-a-string":
        fields = dict(parse_container_file(rep.container_file.read_bytes()).fields)
        fields["metadataPath"] = {"a": 1}
        fields.pop("chunksPath")
        rep.container_file.write_bytes(render_container_file(fields))
    else:
        _rewrite_paths(rep, *map(os.fspath, recorded))
    results = scan_paths([vol.root])
    (detail,) = _mismatch(results, rep.container_id)
    if where != "not-a-string":
        assert repr(os.fspath(recorded[0])) in detail
    assert repr(os.fspath(rep.metadata_dir)) in detail
    assert [r.container_id for r in results if not r.ok] == [rep.container_id]
    # never followed: the other replica's data was not read in place of this one
    (r,) = [r for r in results if r.container_id == rep.container_id]
    assert r.bytes_read == sum(len(d) for b in CONTAINERS[rep.container_id].values() for _, d in b)


def test_a_moved_or_copied_volume_still_scans_clean(tmp_path: Path) -> None:
    manifest = generate_cluster(
        tmp_path / "c",
        GeneratorConfig(containers=6, seed=5, layout="ozone", faults=parse_faults("none", "ozone")),
    )
    (tmp_path / "c").rename(tmp_path / "moved")
    shutil.copytree(tmp_path / "moved" / "dn0", tmp_path / "copy-of-dn0", symlinks=True)
    results = scan_paths([tmp_path / "moved", tmp_path / "copy-of-dn0"])
    assert results and all(r.ok for r in results), [
        (r.path, [str(e) for e in r.errors]) for r in results if not r.ok
    ]
    assert manifest["layout"] == "ozone"


def test_generate_mount_path_is_recorded_and_scans_clean(tmp_path: Path) -> None:
    out = tmp_path / "c"
    r = _child(
        "generate",
        out,
        "--containers",
        "6",
        "--seed",
        "2",
        "--mount-path",
        "/data/disk{volume}",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    manifest = json.loads(r.stdout)
    assert manifest["mount_paths"]["dn1/vol1"] == "/data/disk1"
    for cfile in out.glob("dn*/vol*/hdds/*/current/containerDir*/*/metadata/*.container"):
        fields = parse_container_file(cfile.read_bytes()).fields
        vol_root = cfile.parents[6]
        rel = os.path.relpath(cfile.parent, vol_root)
        assert fields["metadataPath"] == f"/data/disk{vol_root.name[3:]}/{rel}"
    results = scan_paths([out])
    assert _found(results, out) == _expected(manifest)


@pytest.mark.parametrize(
    "template, reason",
    [
        ("data/disk{volume}", "not an absolute path"),
        ("/data/{disk}", "only {datanode} and {volume}"),
        ("/data/disk", "at the same path"),
        ("/data/../etc{volume}", "not an absolute path"),
        ("/data/{volume.real}", "only {datanode} and {volume}"),
    ],
)
def test_generate_refuses_a_bad_mount_path_in_one_line(
    tmp_path: Path, template: str, reason: str
) -> None:
    r = _child("generate", tmp_path / "c", "--containers", "2", "--mount-path", template)
    assert r.returncode == 2 and reason in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert not (tmp_path / "c" / "dn0").exists()


# ---- issue 28 point 4: counters as a datanode keeps them ------------------------------------


def test_generated_containers_carry_the_counters_a_datanode_keeps(tmp_path: Path) -> None:
    manifest = generate_cluster(
        tmp_path / "c",
        GeneratorConfig(
            containers=8,
            seed=4,
            layout="ozone",
            faults=parse_faults("db-entry-without-file=2", "ozone"),
        ),
    )
    counters, pending = {}, {}
    for vol_dir in sorted((tmp_path / "c").glob("dn*/vol*")):
        ((vol, _),) = find_volumes(vol_dir)
        with VolumeDB(vol.db_dir) as db:
            for rep in vol.replicas():
                meta = db.metadata(rep.container_id)
                rows = list(db.block_values(rep.container_id))
                decoded = decode_blocks(rep.container_id, iter(rows), "test").meta
                where = os.path.relpath(rep.root, tmp_path / "c")
                counters[where] = (
                    (meta["#BLOCKCOUNT"], meta["#BYTESUSED"]),
                    (len(rows), decoded.data_bytes),
                )
                pending[where] = (
                    meta.get("#PENDINGDELETEBLOCKCOUNT"),
                    meta.get("#PENDINGDELETEBLOCKBYTES"),
                )
    assert len(counters) == sum(len(c["replicas"]) for c in manifest["containers"].values())
    assert {w: c for w, c in counters.items() if c[0] != c[1]} == {}
    assert set(pending.values()) == {(0, 0)}  # both keys, as a current datanode keeps them
    faults = [f for f in manifest["faults"] if f["type"] == "db-entry-without-file"]
    assert len(faults) == 2
    found = _found(scan_paths([tmp_path / "c"]), tmp_path / "c")
    assert found == _expected(manifest)


def test_a_copy_whose_container_file_names_a_sibling_volume_is_a_path_mismatch(
    tmp_path: Path,
) -> None:
    """A volume holding one replica whose `.container` still names the volume beside it
    (/dn0/vol0 for a replica on /dn0/vol1): Ozone would read and write vol0's files. Its one
    vote must not make vol0 this volume's mount; a copy whose original mount is not a
    directory beside it still scans clean."""
    blocks = {1: [(0, b"a" * 3000)], 2: [(0, b"b" * 2000)]}
    make_volume(tmp_path / "dn0" / "vol0", {1: blocks})
    make_volume(tmp_path / "dn0" / "vol1", {1: blocks})
    rel = Path("hdds/CID-test/current/containerDir0/1/metadata/1.container")
    (tmp_path / "dn0" / "vol1" / rel).write_bytes((tmp_path / "dn0" / "vol0" / rel).read_bytes())
    by_path = {r.path: r for r in scan_paths([tmp_path / "dn0" / "vol1"])}
    (result,) = by_path.values()
    assert [e.kind for e in result.errors] == ["CONTAINER_PATH_MISMATCH"], result.errors
    assert "vol0" in str(result.errors[0])
    # the same volume inspected where no sibling holds the recorded mount: a copy, clean
    (tmp_path / "dn0" / "vol0").rename(tmp_path / "elsewhere")
    (result,) = scan_paths([tmp_path / "dn0" / "vol1"])
    assert result.ok and result.errors == [], result.errors
