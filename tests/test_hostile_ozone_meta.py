"""Hostile block metadata on Ozone volumes (issue 23 items 2, 6, 8, 10, 12; issue 28 point 2).

A `block_data` row is data written by whoever can write the volume: a chunk name in it is never
a path to join, a proto2 `required` field missing makes the row unusable, a huge row is refused
before it is decoded, and one bad row costs only its own block, as Ozone's own scanner skips
it. Each finding says what Ozone's datanode does with the same row.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import pytest

pytest.importorskip("rocksdict")
pytest.importorskip("yaml")

from test_ozone_layout import keys, make_volume  # noqa: E402

from merkle.cli import main as main_scan  # noqa: E402
from merkle.replica.ozone import datanode_pb2 as pb  # noqa: E402
from merkle.replica.ozone.layout import find_volumes  # noqa: E402
from merkle.replica.ozone.rocks import block_key, write_volume_db  # noqa: E402
from merkle.replica.ozone.writer import VolumeWriter  # noqa: E402
from merkle.replica.replicadir.blockmeta import BlockMeta, ChunkMeta, ContainerMeta  # noqa: E402
from merkle.replica.replicadir.writer import tree_from_meta  # noqa: E402
from merkle.replica.safeopen import FileTooLargeError, open_dir, open_regular  # noqa: E402
from merkle.replica.scan import scan_files, scan_paths  # noqa: E402
from merkle.trees.ozone import format_checksum  # noqa: E402

Rows = Dict[bytes, bytes]


# ---- helpers ---------------------------------------------------------------------------------


def rewrite_rows(w: VolumeWriter, edit: Callable[[Rows], None]) -> None:
    """Rebuild the volume's container.db with `edit` applied to its block_data rows."""
    rows = dict(w.block_rows)
    edit(rows)
    assert w.volume.db_dir is not None
    shutil.rmtree(w.volume.db_dir)
    write_volume_db(w.volume.db_dir, rows, w.meta_rows)


def edit_value(rows: Rows, cid: int, bid: int, change: Callable[[Any], None]) -> None:
    """Apply `change` to the parsed BlockData of (cid, bid); stored even if left uninitialized
    (a proto2 `required` field missing), as a hostile writer may."""
    msg = pb.BlockData()
    msg.ParseFromString(rows[block_key(cid, bid)])
    change(msg)
    rows[block_key(cid, bid)] = msg.SerializePartialToString()


def scan_json(*paths: Path) -> Tuple[int, Dict[str, Any], str]:
    out = subprocess.run(
        [sys.executable, "-m", "merkle", "scan", "--json", *map(os.fspath, paths)],
        capture_output=True,
        text=True,
        env=dict(os.environ),
    )
    assert out.stdout, out.stderr  # JSON is printed whatever a row holds
    return out.returncode, json.loads(out.stdout), out.stdout


def by_container(report: Dict[str, Any]) -> Dict[int, Dict[str, Any]]:
    return {r["container_id"]: r for r in report["replicas"]}


def two_blocks(n: int = 2) -> Dict[int, List[Tuple[int, bytes]]]:
    return {b: [(0, bytes([b]) * 3000), (3000, bytes([b + 100]) * 2000)] for b in range(1, n + 1)}


def without_timing(report: Dict[str, Any]) -> Dict[str, Any]:
    for r in report["replicas"]:
        r.pop("seconds")
    for field in ("seconds", "mb_per_s"):
        report["summary"].pop(field)
    return report


# ---- item 2: a chunk name from container.db is data ------------------------------------------


def test_a_traversing_chunk_name_never_lets_an_outside_files_bytes_into_the_report(
    tmp_path: Path,
) -> None:
    w = make_volume(tmp_path / "vol", {1: two_blocks()}, layout_version=1, bpc=1024)
    ((vol, _),) = find_volumes(tmp_path / "vol")
    rep = vol.replicas()[0]
    secret = tmp_path / "private" / "secret"
    secret.parent.mkdir(mode=0o700)
    relative = os.path.relpath(secret, rep.chunks_dir)
    assert relative.startswith("../")

    def point_at_secret(msg: Any) -> None:
        # block 1's first chunk names the secret, with the secret's own window checksums:
        # a scanner that opened it would call it healthy, and any change of its bytes would
        # change the report
        c = ChunkMeta.from_data(0, secret.read_bytes(), algorithm="crc32", bytes_per_checksum=1024)
        ci = msg.chunks[0]
        ci.chunkName, ci.len = relative, c.length
        del ci.checksumData.checksums[:]
        ci.checksumData.checksums.extend(
            c.checksums[i : i + 4] for i in range(0, len(c.checksums), 4)
        )
        msg.size = sum(x.len for x in msg.chunks)

    reports = []
    for content in (b"s3cr3t-one" * 300, b"S3CR3T-TWO" * 300):
        secret.write_bytes(content)
        rewrite_rows(w, lambda rows: edit_value(rows, 1, 1, point_at_secret))
        code, report, _ = scan_json(tmp_path / "vol")
        assert code == 1
        reports.append(without_timing(report))
    assert reports[0] == reports[1]  # the outside file's bytes reach nothing we print
    r = by_container(reports[0])[1]
    assert [(e["error"], e["block_id"]) for e in r["errors"]] == [("METADATA_CORRUPT", 1)]
    assert "never opened" in r["errors"][0]["detail"]
    assert r["bytes_read"] == 5000  # block 2 alone


@pytest.mark.parametrize(
    "bad_name",
    ["/etc/passwd", "1_chunk_1\x00tail", "1_chunk_1/x", "2_chunk_1", "1_chunk_01", "..", ""],
)
def test_a_chunk_name_not_the_blocks_own_is_a_finding_of_that_block(
    tmp_path: Path, bad_name: str
) -> None:
    w = make_volume(
        tmp_path / "vol", {1: two_blocks(), 2: two_blocks()}, layout_version=1, bpc=1024
    )

    def rename(msg: Any) -> None:
        msg.chunks[1].chunkName = bad_name

    rewrite_rows(w, lambda rows: edit_value(rows, 1, 1, rename))
    code, report, _ = scan_json(tmp_path / "vol")
    assert code == 1 and not report["failed"]
    got = by_container(report)
    assert [(e["error"], e["block_id"]) for e in got[1]["errors"]] == [("METADATA_CORRUPT", 1)]
    assert got[1]["bytes_read"] == 5000 and got[2]["ok"]  # the rest is still verified


@pytest.mark.parametrize("layout_version, verified", [(1, 1), (2, 2)])
def test_a_chunk_name_that_is_not_utf8_is_read_as_ozone_reads_it(
    tmp_path: Path, layout_version: int, verified: int
) -> None:
    # proto2 does not validate UTF-8: the Python runtime then hands out bytes, Java a String
    # with U+FFFD; FILE_PER_CHUNK never opens such a name, FILE_PER_BLOCK does not use it
    w = make_volume(tmp_path / "vol", {1: two_blocks()}, layout_version=layout_version, bpc=1024)

    def edit(rows: Rows) -> None:
        key = block_key(1, 1)
        rows[key] = rows[key].replace(b"1_chunk_1", b"1_chunk_\xff", 1)

    rewrite_rows(w, edit)
    code, report, _ = scan_json(tmp_path / "vol")
    r = by_container(report)[1]
    assert r["blocks"] == verified
    if layout_version == 1:
        assert (
            code == 1
            and [(e["error"], e["block_id"]) for e in r["errors"]] == [("METADATA_CORRUPT", 1)]
            and "\ufffd" in r["errors"][0]["detail"]
        )
    else:
        assert code == 0 and r["ok"]


@pytest.mark.parametrize("name", ["..", ".", "", "sub/file", "file\x00"])
def test_open_regular_refuses_a_name_that_is_not_one_plain_entry(tmp_path: Path, name: str) -> None:
    from merkle.replica.safeopen import UnsafeNameError

    (tmp_path / "d" / "sub").mkdir(parents=True)
    (tmp_path / "d" / "sub" / "file").write_bytes(b"x")
    (tmp_path / "d" / "file").write_bytes(b"x")
    fd = open_dir(os.fspath(tmp_path / "d"))
    try:
        with pytest.raises(UnsafeNameError):
            os.close(open_regular(fd, name))
        with pytest.raises(UnsafeNameError):
            os.close(open_regular(open_dir("sub", fd), "../file"))
    finally:
        os.close(fd)


# ---- item 6: proto2 `required` -------------------------------------------------------------------


@pytest.mark.parametrize("strip", ["checksumData", "type", "bytesPerChecksum", "chunkName"])
def test_a_row_missing_a_required_field_is_never_read_as_unverifiable(
    tmp_path: Path, strip: str
) -> None:
    w = make_volume(tmp_path / "vol", {1: two_blocks(3)}, bpc=1024)
    ((vol, _),) = find_volumes(tmp_path / "vol")
    rep = vol.replicas()[0]

    def drop(msg: Any) -> None:
        for ci in msg.chunks:
            (ci if strip in ("checksumData", "chunkName") else ci.checksumData).ClearField(strip)

    rewrite_rows(w, lambda rows: edit_value(rows, 1, 1, drop))
    with open(rep.block_file(1), "r+b") as f:  # corrupt data a NONE chunk would hide
        f.write(b"\xff" * 10)
    (r,) = scan_paths([tmp_path / "vol"])
    assert keys(r) == [("METADATA_CORRUPT", 1, 0)] and not r.ok
    detail = r.errors[0].detail
    assert "required" in detail and "skips it silently" in detail
    assert r.bytes_read == 10000  # blocks 2 and 3 are verified


# ---- issue 28 point 2: what Ozone does with each bad row --------------------------------------


def _meta(blocks: Dict[int, List[Tuple[int, bytes]]], cid: int = 1) -> ContainerMeta:
    meta = ContainerMeta(cid)
    for bid, chunks in blocks.items():
        meta.blocks[bid] = BlockMeta(
            bid,
            tuple(
                ChunkMeta.from_data(o, d, algorithm="crc32", bytes_per_checksum=1024)
                for o, d in chunks
            ),
        )
    return meta


def test_an_undecodable_row_costs_its_block_alone_and_reports_ozones_checksum(
    tmp_path: Path,
) -> None:
    blocks = two_blocks(3)
    w = make_volume(tmp_path / "vol", {1: blocks}, bpc=1024)
    rewrite_rows(w, lambda rows: rows.__setitem__(block_key(1, 1), rows[block_key(1, 1)][:-1]))
    code, report, _ = scan_json(tmp_path / "vol")
    r = by_container(report)[1]
    assert code == 1 and [(e["error"], e["block_id"]) for e in r["errors"]] == [
        ("METADATA_CORRUPT", 1)
    ]  # its file is that finding's, not UNREFERENCED_DATA_FILE
    detail = r["errors"][0]["detail"]
    assert "skips it silently" in detail and "healthy" in detail
    assert "chunks/1.block looks unreferenced" in detail
    assert r["blocks"] == 2 and r["bytes_read"] == 10000
    # the checksum Ozone writes: its scan leaves the skipped block out of the tree
    ozones = tree_from_meta(_meta({b: c for b, c in blocks.items() if b != 1})).data_checksum
    assert r["data_checksum"] == format_checksum(ozones)


def test_an_undecodable_last_row_says_ozones_scan_fails(tmp_path: Path) -> None:
    w = make_volume(tmp_path / "vol", {1: two_blocks(3)}, bpc=1024)
    # keys sort as text: "3" is the container's last row
    rewrite_rows(w, lambda rows: rows.__setitem__(block_key(1, 3), b"\xff\xff"))
    (r,) = scan_paths([tmp_path / "vol"])
    assert keys(r) == [("METADATA_CORRUPT", 3, 0)] and r.blocks == 2
    assert "NoSuchElementException" in r.errors[0].detail


@pytest.mark.parametrize(
    "change, want, ozone, verified",
    [
        (lambda m: setattr(m, "size", m.size + 1), "not the sum", "codec throws", 2),
        (lambda m: [m.metadata.add(key="TYPE", value="KEY")], "appears twice", "codec throws", 2),
        (lambda m: m.blockID.__setattr__("localID", 9), "does not name", "as block 9", 3),
        (lambda m: m.blockID.__setattr__("containerID", 5), "of container 5", "as block 1", 3),
        (
            lambda m: m.chunks[0].checksumData.checksums.append(b"\0\0\0\0"),
            "checksums",
            "as many windows",
            2,
        ),
    ],
)
def test_each_bad_row_says_what_ozone_does_with_it(
    tmp_path: Path, change: Any, want: str, ozone: str, verified: int
) -> None:
    w = make_volume(tmp_path / "vol", {1: two_blocks(3)}, bpc=1024)
    rewrite_rows(w, lambda rows: edit_value(rows, 1, 1, change))
    (r,) = scan_paths([tmp_path / "vol"])
    corrupt = [e for e in r.errors if e.kind == "METADATA_CORRUPT"]
    assert len(corrupt) == 1 and want in corrupt[0].detail and ozone in corrupt[0].detail
    assert r.blocks == verified and not r.ok


def test_two_rows_of_one_block_verify_it_once(tmp_path: Path) -> None:
    w = make_volume(tmp_path / "vol", {1: two_blocks(3)}, bpc=1024)
    # key "2" holds block 3's value: Ozone verifies block 3 twice into one tree entry
    rewrite_rows(w, lambda rows: rows.__setitem__(block_key(1, 2), rows[block_key(1, 3)]))
    (r,) = scan_paths([tmp_path / "vol"])
    # no row's value names 2.block now: unreferenced, to Ozone as here
    assert keys(r) == [
        ("METADATA_CORRUPT", 3, 0),
        ("METADATA_CORRUPT", 3, 0),
        ("UNREFERENCED_DATA_FILE", 2, 0),
    ]
    assert "another row's too" in r.errors[1].detail and "as block 3" in r.errors[0].detail
    assert r.blocks == 2 and r.bytes_read == 10000  # block 3 once, block 1


def test_rows_after_one_ozone_fails_on_say_ozone_never_reaches_them(tmp_path: Path) -> None:
    w = make_volume(tmp_path / "vol", {1: two_blocks(3)}, bpc=1024)

    def edit(rows: Rows) -> None:
        edit_value(rows, 1, 1, lambda m: setattr(m, "size", 1))
        rows[block_key(1, 2)] = b"\x0a"

    rewrite_rows(w, edit)
    (r,) = scan_paths([tmp_path / "vol"])
    assert keys(r) == [("METADATA_CORRUPT", 1, 0), ("METADATA_CORRUPT", 2, 0)]
    assert "never reaches this row" in r.errors[1].detail and r.blocks == 1


# ---- item 8: a linked chunks/ is reported, never listed --------------------------------------


def test_a_linked_chunks_directory_is_reported_not_listed(tmp_path: Path) -> None:
    make_volume(tmp_path / "vol", {1: two_blocks(), 2: {}})
    ((vol, _),) = find_volumes(tmp_path / "vol")
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    (private / "payroll-2026.xlsx").write_bytes(b"x")
    (private / "7.block").write_bytes(b"x")
    for rep in vol.replicas():
        shutil.rmtree(rep.chunks_dir)
        os.symlink(private, rep.chunks_dir)
    code, report, text = scan_json(tmp_path / "vol")
    assert code == 1 and "payroll" not in text and "7.block" not in text
    for r in report["replicas"]:
        linked = [
            e for e in r["errors"] if e["error"] == "NOT_A_REGULAR_FILE" and e["block_id"] is None
        ]
        assert len(linked) == 1 and "chunks" in linked[0]["detail"]
        assert not [e for e in r["errors"] if e["error"] == "UNREFERENCED_DATA_FILE"]


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_a_chunks_directory_that_cannot_be_listed_is_reported_and_the_walk_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_volume(tmp_path / "vol", {1: two_blocks(), 2: two_blocks()})
    real = os.scandir

    def scandir(path: Any = ".") -> Any:  # chunks/ is listed through its descriptor
        if isinstance(path, int) and os.readlink(f"/proc/self/fd/{path}").endswith("/chunks"):
            raise PermissionError(13, "Permission denied")
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    r1, r2 = scan_paths([tmp_path / "vol"])
    for r in (r1, r2):
        assert (
            keys(r) == [("UNREADABLE_DATA_FILE", 0, 0)]
            and "cannot be listed" in r.errors[0].detail
            and r.bytes_read == 10000
        )


# ---- item 10: a container's rows are capped ----------------------------------------------------


def test_a_huge_row_is_refused_before_it_is_decoded(tmp_path: Path) -> None:
    w = make_volume(tmp_path / "vol", {1: two_blocks(3), 2: two_blocks()}, bpc=1024)

    def bloat(msg: Any) -> None:  # 6 MB of window checksums: above the 4 MiB row cap
        msg.chunks[0].checksumData.checksums.extend([b"\1\2\3\4"] * 1_000_000)

    rewrite_rows(w, lambda rows: edit_value(rows, 1, 2, bloat))
    r1, r2 = sorted(scan_paths([tmp_path / "vol"]), key=lambda r: r.container_id)
    assert keys(r1) == [("METADATA_UNREADABLE", 2, 0)] and "limit" in r1.errors[0].detail
    assert r1.blocks == 2 and r2.ok


def test_a_containers_rows_together_are_capped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_volume(tmp_path / "vol", {1: two_blocks(40), 2: two_blocks(1)}, bpc=1024)
    monkeypatch.setenv("CRCMERKLE_MAX_METADATA_BYTES", "4000")
    monkeypatch.setenv("CRCMERKLE_MAX_ROW_BYTES", "4000")
    r1, r2 = sorted(scan_paths([tmp_path / "vol"]), key=lambda r: r.container_id)
    assert keys(r1) == [("METADATA_UNREADABLE", 0, 0)] and r1.bytes_read == 0
    assert "CRCMERKLE_MAX_METADATA_BYTES" in r1.errors[0].detail
    assert r2.ok and r2.bytes_read == 5000  # the scan goes on


def test_a_containers_rows_and_chunks_are_counted_against_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # empty chunks (and empty rows) are ~25 bytes of a row each but cost ~350 bytes and
    # ~20 us to convert: the rows' cap bounds their number too (one per
    # BYTES_PER_CHUNK_LIMIT bytes)
    from merkle.replica.ozone.blockdata import BYTES_PER_CHUNK_LIMIT

    w = make_volume(tmp_path / "vol", {1: two_blocks(3)}, bpc=1024)
    row_bytes = sum(len(k) - 9 + len(v) for k, v in w.block_rows.items())
    cap = BYTES_PER_CHUNK_LIMIT * 8  # room for 3 rows and 5 of their 6 chunks
    assert row_bytes < cap
    monkeypatch.setenv("CRCMERKLE_MAX_METADATA_BYTES", str(cap))
    (r,) = scan_paths([tmp_path / "vol"])
    assert (
        keys(r) == [("METADATA_UNREADABLE", 0, 0)]
        and "more than 8 rows and chunks" in r.errors[0].detail
    )


# ---- item 12: remote metadata is capped --------------------------------------------------------


def test_remote_metadata_above_the_cap_is_refused_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pafs = pytest.importorskip("pyarrow.fs")
    from merkle.replica.crcmerkle.remote import ArrowReplicaFiles
    from merkle.replica.files import read_capped

    from replica_helpers import make_cluster

    make_cluster(tmp_path / "c", "none")
    tree = next((tmp_path / "c").rglob("*.tree"))
    root, cid = tree.parent.parent, int(tree.parent.parent.name)
    files = ArrowReplicaFiles(pafs.LocalFileSystem(), os.fspath(root), cid)
    monkeypatch.setenv("CRCMERKLE_MAX_METADATA_BYTES", str(tree.stat().st_size - 1))
    with pytest.raises(FileTooLargeError):
        files.read_tree()
    r = scan_files(files)
    assert {e.kind for e in r.errors} >= {"TREE_UNREADABLE", "METADATA_UNREADABLE"}

    class Endless:  # a store that says 1 TB: nothing may be read
        def size(self) -> int:
            return 1 << 40

        def read(self, n: int) -> bytes:
            raise AssertionError("read past the cap")

    with pytest.raises(FileTooLargeError):
        read_capped(Endless(), "s3://b/k", 1000)

    class Growing:  # a size that lies: at most cap+1 bytes are read
        def __init__(self) -> None:
            self.asked: List[int] = []

        def size(self) -> int:
            return 10

        def read(self, n: int) -> bytes:
            self.asked.append(n)
            return b"x" * n

    growing = Growing()
    with pytest.raises(FileTooLargeError):
        read_capped(growing, "s3://b/k", 1000)
    assert growing.asked == [1001]


# ---- the recorded checksums the chunks table carries (merkle.replica.recorded) ------------


@pytest.mark.parametrize("mode", [(), ("--metadata-only",)])
def test_recorded_checksums_of_hostile_rows(
    tmp_path: Path, capsys: Any, mode: Tuple[str, ...]
) -> None:
    """Block 1's checksum data cannot be used (one checksum too many): its chunks get no
    recorded values (no row) and the finding is reported as before; block 2's row
    claims 4 GiB windows: carried as a number, nothing sized from it (its one recorded CRC
    is what its row holds); block 3 is read as usual. The walk goes on."""
    pq = pytest.importorskip("pyarrow.parquet")
    huge = 0xFFFFFFFF
    w = make_volume(tmp_path / "dn0" / "vol", {1: two_blocks(3)}, bpc=1024)

    def edit(rows: Rows) -> None:
        edit_value(rows, 1, 1, lambda m: m.chunks[0].checksumData.checksums.append(b"\0" * 4))

        def one_window(m: Any) -> None:
            for c in m.chunks:
                c.checksumData.bytesPerChecksum = huge
                del c.checksumData.checksums[1:]

        edit_value(rows, 1, 2, one_window)

    rewrite_rows(w, edit)
    out = tmp_path / "t"
    assert (
        main_scan(
            ["scan", str(tmp_path / "dn0" / "vol"), "--emit", str(out), "--host", "h0", *mode]
        )
        == 1
    )
    capsys.readouterr()
    errors = pq.read_table(str(out / "errors")).to_pylist()
    assert ("METADATA_CORRUPT", 1) in [(e["error"], e["block"]) for e in errors]
    rows = [r for r in pq.read_table(str(out / "chunks")).to_pylist() if r["offset"] is not None]
    msg = pb.BlockData()
    by_block: Dict[int, List[Dict[str, Any]]] = {}
    for r in rows:
        by_block.setdefault(r["block"], []).append(r)
    # the block whose row could not be used has no chunk rows (the scan's tree and the
    # census's leave it out); were there any, their recorded columns would be null
    # (test_scan_also.test_recorded_columns_match_chunks_by_block_and_offset)
    assert 1 not in by_block
    assert by_block[2] and all(
        (r["checksum_type"], r["bytes_per_checksum"], len(r["checksums"])) == ("CRC32", huge, 4)
        for r in by_block[2]
    )
    msg.ParseFromString(w.block_rows[block_key(1, 3)])
    assert sorted((r["offset"], r["checksums"]) for r in by_block[3]) == sorted(
        (c.offset, b"".join(c.checksumData.checksums)) for c in msg.chunks
    )
