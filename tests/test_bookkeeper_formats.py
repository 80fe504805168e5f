"""Issue 38: BookKeeper's formats read by hand-written fixtures (tests/bookkeeper_fixture.py,
from the facts sheet): Interleaved/Sorted storage's `.idx` files and entry logs, every digest
type, the ledger metadata's three serialisations and znode paths, cookies, and what a scan
finds in each case (its findings and levels)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any, List

import numpy as np
import pytest
from bookkeeper_fixture import (
    entry_bytes,
    metadata_v1,
    metadata_v2,
    metadata_v3,
    positions,
    write_bookie,
)
from hypothesis import given, settings, strategies as st

from merkle.cli import main
from merkle.replica.bookkeeper.cookie import CookieError, parse_cookie
from merkle.replica.bookkeeper.digest import verify_entries
from merkle.replica.bookkeeper.metadata import (
    MetadataError,
    load_ledger_metadata,
    parse_ledger_metadata,
)
from merkle.replica.bookkeeper.scan import scan_bookies

B1, B2 = "10.0.0.1:3181", "10.0.0.2:3181"


def _payload(e: int, n: int = 100) -> bytes:
    return bytes((i * 31 + e * 7) & 0xFF for i in range(n))


def _ledger(
    lid: int, count: int, digest: str = "CRC32C", password: bytes = b"pw", **kw: Any
) -> List[Any]:
    return [
        (lid, e, entry_bytes(lid, e, _payload(e), digest, password, lac=e - 1, **kw))
        for e in range(count)
    ]


def _kinds(report: Any) -> List[Any]:
    return sorted((f.kind, f.bookie, f.ledger, f.entry) for f in report.findings)


# ---- verify_entries ---------------------------------------------------------------------


@pytest.mark.parametrize("digest", ["CRC32C", "CRC32", "HMAC", "DUMMY"])
def test_verify_entries_each_digest_type(digest: str) -> None:
    entries = [
        entry_bytes(9, e, _payload(e, n), digest, b"secret")
        for e, n in enumerate([0, 1, 100, 100, 4096])
    ]
    entries[3] = entry_bytes(9, 3, _payload(3), digest, b"secret", bad_digest=True)
    buf = b"".join(struct.pack(">i", len(x)) + x for x in entries)
    offs, pos = [], 0
    for x in entries:
        offs.append(pos + 4)
        pos += 4 + len(x)
    r = verify_entries(buf, offs, [len(x) for x in entries], digest, b"secret")
    assert r["frame_ok"].all()
    assert r["entry_id"].tolist() == [0, 1, 2, 3, 4] and (r["ledger_id"] == 9).all()
    ok = r["digest_ok"].tolist()
    assert ok == ([True] * 5 if digest == "DUMMY" else [True, True, True, False, True])
    import merkle

    assert r["payload_crc32c"].tolist() == [
        merkle.crc32c(_payload(e, n)) for e, n in enumerate([0, 1, 100, 100, 4096])
    ]
    assert r["payload_length"].tolist() == [0, 1, 100, 100, 4096]
    if digest == "CRC32":  # 8 bytes: four zeros, then zlib's CRC-32
        import zlib

        assert int(r["stored_digest"][2]) == zlib.crc32(entries[2][:32] + _payload(2))
    # the wrong password fails every HMAC
    if digest == "HMAC":
        assert not verify_entries(buf, offs, [len(x) for x in entries], digest, b"other")[
            "digest_ok"
        ].any()


def test_verify_entries_short_frames_and_bounds() -> None:
    buf = bytes(64)
    r = verify_entries(buf, [0, 10], [35, 36], "CRC32C")
    assert r["frame_ok"].tolist() == [False, True]
    assert r["digest_ok"].tolist()[0] is False
    with pytest.raises(ValueError):
        verify_entries(buf, [40], [36], "CRC32C")  # outside the buffer
    with pytest.raises(ValueError):
        verify_entries(buf, [0], [36], "SHA256")
    empty = verify_entries(buf, np.zeros(0, np.int64), np.zeros(0, np.int64), "CRC32")
    assert all(len(v) == 0 for v in empty.values())


# ---- cookies -------------------------------------------------------------------------------


def test_cookie_v3_lines_and_v5_text() -> None:
    v3 = parse_cookie(b"3\nhost:3181\n/j1,/j2\n2\t/a\t/b\n")
    assert (v3.bookie_id, v3.journal_dirs, v3.ledger_dirs) == (
        "host:3181",
        ("/j1", "/j2"),
        ("/a", "/b"),
    )
    v5 = parse_cookie(
        b'5\nbookieHost: "h:1"\njournalDir: "/j"\nledgerDirs: "1\\t/l"\n'
        b'instanceId: "u"\nindexDirs: "1\\t/i"\n'
    )
    assert (v5.ledger_dirs, v5.index_dirs, v5.instance_id) == (("/l",), ("/i",), "u")
    for bad in (
        b"",
        b"x\n",
        b"2\na\nb\nc\n",
        b'5\njournalDir: "/j"\n',
        b'5\nbookieHost: "h"\njournalDir: "/j"\nledgerDirs: "3\\t/l"\n',
        b"5\n{{{",
        b"5\n" + b"x" * (1 << 17),
    ):
        with pytest.raises(CookieError):
            parse_cookie(bad)


# ---- ledger metadata -------------------------------------------------------------------------

SEGS = [(0, [B1, B2]), (5, [B2, B1])]


@pytest.mark.parametrize("make", [metadata_v2, metadata_v3])
def test_metadata_v2_text_and_v3_binary(make: Any) -> None:
    meta = parse_ledger_metadata(
        make(SEGS, write=2, ack=1, last=9, length=1000, digest="HMAC", password=b'p\tw"\x00')
    )
    assert (meta.state, meta.last_entry_id, meta.length) == ("CLOSED", 9, 1000)
    assert (meta.ensemble_size, meta.write_quorum, meta.ack_quorum) == (2, 2, 1)
    assert meta.digest_type == "HMAC" and meta.password == b'p\tw"\x00'
    assert meta.write_set(4) == (B1, B2) and meta.write_set(5) == (B1, B2)
    assert meta.write_set(6) == (B2, B1)
    # lastEntryId and length count only when CLOSED (LedgerMetadataSerDe.decodeFormat)
    open_meta = parse_ledger_metadata(make(SEGS, write=2, ack=2, state="OPEN", last=9, length=5))
    assert (open_meta.state, open_meta.last_entry_id, open_meta.length) == ("OPEN", -1, 0)


def test_metadata_v1_lines() -> None:
    meta = parse_ledger_metadata(metadata_v1(SEGS, write=2, last=7, length=70))
    assert (meta.format_version, meta.state, meta.last_entry_id, meta.length) == (
        1,
        "CLOSED",
        7,
        70,
    )
    assert meta.digest_type is None and meta.segments[1] == (5, (B2, B1))
    assert parse_ledger_metadata(metadata_v1(SEGS, write=2)).state == "OPEN"
    assert parse_ledger_metadata(metadata_v1(SEGS, write=2, last=-100)).state == "IN_RECOVERY"


def test_write_set_is_64_bit_round_robin() -> None:
    bookies = [f"b{i}:1" for i in range(3)]
    meta = parse_ledger_metadata(metadata_v3([(0, bookies)], write=2, ack=2, state="OPEN"))
    e = (1 << 31) + 1  # getWriteSetBookieIndex's int cast would be wrong here
    assert meta.write_set(e) == (bookies[e % 3], bookies[(e + 1) % 3])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(-3, 1 << 33), st.lists(st.sampled_from([B1, B2, "b3:1"]), max_size=4)
        ),
        min_size=1,
        max_size=5,
    ),
    st.integers(1, 4),
    st.lists(st.integers(-5, (1 << 33) + 5), max_size=40),
)
def test_write_sets_answer_as_write_set(segments: Any, write: int, entries: List[int]) -> None:
    """The memoised write sets a ledger's judging uses equal write_set's, entry by entry,
    segments out of order, repeated and empty (hostile metadata) included."""
    from merkle.replica.bookkeeper.metadata import LedgerMetadata

    meta = LedgerMetadata(
        ledger_id=7,
        ensemble_size=len(segments[0][1]),
        write_quorum=write,
        ack_quorum=1,
        state="CLOSED",
        last_entry_id=0,
        length=0,
        segments=[(first, tuple(bs)) for first, bs in segments],
    )
    write_set = meta.write_sets()
    probes = entries + [first + d for first, _ in segments for d in (-1, 0, 1)]
    for e in probes + probes:  # twice: the second answers come from the memo
        assert write_set(e) == meta.write_set(e), e


def test_znode_tree_hierarchical_and_long_paths(tmp_path: Path) -> None:
    short = tmp_path / "zk/ledgers/00/0000/L0042"
    long_ = tmp_path / "zk/ledgers/000/0000/0021/4748/L3648"  # 2147483648, %019d 3-4-4-4-4
    for node in (short, long_):
        node.mkdir(parents=True)
        (node / "_data").write_bytes(metadata_v3([(0, [B1])], write=1, ack=1, last=0))
    (tmp_path / "zk/ledgers/INSTANCEID").mkdir()
    (tmp_path / "zk/ledgers/INSTANCEID/_data").write_bytes(b"cluster-1")
    assert sorted(load_ledger_metadata(str(tmp_path / "zk"))) == [42, 2147483648]
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    (dumps / "7").write_bytes(metadata_v2([(0, [B1])], write=1, ack=1, last=3))
    (dumps / "8.bin").write_bytes(metadata_v3([(0, [B1])], write=1, ack=1, last=3))
    assert sorted(load_ledger_metadata(str(dumps))) == [7, 8]
    assert list(load_ledger_metadata(str(dumps / "7"))) == [7]


def test_metadata_that_no_client_could_use_is_one_line() -> None:
    for data, why in [
        (metadata_v3([(0, [B1]), (0, [B2])], write=1, ack=1), "segment loop"),
        (metadata_v3([(3, [B1])], write=1, ack=1), "starts at entry 3"),
        (metadata_v3([(0, [B1])], write=2, ack=1), "writeQuorum"),
        (b"BookieMetadataFormatVersion\t3\n\xff\xff\x03", "claims"),
        (b"BookieMetadataFormatVersion\t9\n", "version 9"),
        (b"BookieMetadataFormatVersion\t2\nsegment { ", "not closed"),
    ]:
        with pytest.raises(MetadataError, match=why) as info:
            parse_ledger_metadata(data)
        assert "\n" not in str(info.value)


# ---- Interleaved/Sorted storage: .idx files --------------------------------------------------


def _meta_dir(tmp_path: Path, ledgers: Any) -> Path:
    d = tmp_path / "meta"
    d.mkdir(exist_ok=True)
    for lid, data in ledgers.items():
        (d / str(lid)).write_bytes(data)
    return d


def test_idx_bookie_clean_then_each_fault(tmp_path: Path, capsys: Any) -> None:
    entries = _ledger(5, 4) + _ledger(300, 3, "CRC32", b"")
    bookie = write_bookie(tmp_path / "b1", B1, entries, passwords={300: b""})
    meta = _meta_dir(
        tmp_path,
        {
            5: metadata_v3([(0, [B1])], write=1, ack=1, last=3, digest="CRC32C", password=b"pw"),
            300: metadata_v2([(0, [B1])], write=1, ack=1, last=2, digest="CRC32", password=b""),
        },
    )
    assert (bookie / "current/1/2c/12c.idx").is_file()  # ledger 300 = 0x12c
    report = scan_bookies([str(bookie)], load_ledger_metadata(str(meta)))
    assert report.findings == [] and len(report.copies) == 7
    assert all(c.good and c.verified for c in report.copies)
    assert main(["scan", str(bookie), "--ledger-metadata", str(meta)]) == 0
    capsys.readouterr()

    # a flipped payload bit of ledger 5 entry 2: CORRUPT_ENTRY at that entry's offset
    log = bookie / "current/0.log"
    data = bytearray(log.read_bytes())
    pos = positions(bookie)[2]
    data[pos + 32 + 4 + 50] ^= 1
    log.write_bytes(bytes(data))
    report = scan_bookies([str(bookie)], load_ledger_metadata(str(meta)))
    assert _kinds(report) == [("CORRUPT_ENTRY", B1, 5, 2)]
    assert (report.findings[0].offset, report.findings[0].file) == (pos, str(log))
    # no good copy left: below ackQuorum and none
    info = next(x for x in report.ledgers if x["ledger"] == 5)
    assert info["without_good_copy"] == [2] and info["below_ack_quorum"] == [2]
    assert main(["scan", str(bookie), "--ledger-metadata", str(meta)]) == 1
    capsys.readouterr()


def test_idx_unindexed_missing_and_past_the_end(tmp_path: Path) -> None:
    entries = _ledger(5, 4)
    bookie = write_bookie(tmp_path / "b1", B1, entries, index=[(5, 0), (5, 2), (5, 3)])
    meta = {
        5: parse_ledger_metadata(metadata_v3([(0, [B1])], write=1, ack=1, last=4, password=b"pw"))
    }
    report = scan_bookies([str(bookie)], meta)
    # entry 1 in the log, no index names it; entry 4 nowhere although the ledger ends at 4
    assert _kinds(report) == [
        ("MISSING_ENTRY", B1, 5, 1),
        ("MISSING_ENTRY", B1, 5, 4),
        ("UNINDEXED_ENTRY", B1, 5, 1),
    ]
    unindexed = next(f for f in report.findings if f.kind == "UNINDEXED_ENTRY")
    assert unindexed.severity == "warning" and unindexed.offset == positions(bookie)[1]
    # an index location past the end of its log: the copy is gone
    idx = bookie / "current/0/5/5.idx"
    raw = bytearray(idx.read_bytes())
    raw[1024 + 8 * 3 : 1024 + 8 * 4] = struct.pack(">Q", 1 << 20)
    idx.write_bytes(bytes(raw))
    report = scan_bookies([str(bookie)], meta)
    frame = [f for f in report.findings if f.kind == "ENTRY_FRAME_INVALID"]
    assert [(f.ledger, f.entry, f.offset) for f in frame] == [(5, 3, 1 << 20)]


def test_past_last_entry_deleted_ledger_and_open_ledger(tmp_path: Path) -> None:
    bookie = write_bookie(tmp_path / "b1", B1, _ledger(5, 4) + _ledger(6, 2) + _ledger(7, 3))
    meta = {
        5: parse_ledger_metadata(metadata_v3([(0, [B1])], write=1, ack=1, last=1, password=b"pw")),
        7: parse_ledger_metadata(
            metadata_v3([(0, [B1])], write=1, ack=1, state="IN_RECOVERY", password=b"pw")
        ),
    }
    report = scan_bookies([str(bookie)], meta)
    by_kind = {f.kind: f for f in report.findings}
    assert sorted(by_kind) == [
        "ENTRY_OF_OPEN_LEDGER",
        "ENTRY_PAST_LAST_ENTRY",
        "LEDGER_NOT_IN_METADATA",
    ]
    assert all(f.severity == "warning" for f in report.findings)
    assert (by_kind["ENTRY_PAST_LAST_ENTRY"].ledger, by_kind["ENTRY_PAST_LAST_ENTRY"].entry) == (
        5,
        2,
    )
    assert "IN_RECOVERY" in by_kind["ENTRY_OF_OPEN_LEDGER"].detail
    assert by_kind["LEDGER_NOT_IN_METADATA"].ledger == 6
    assert "garbage" in by_kind["LEDGER_NOT_IN_METADATA"].detail


def test_two_bookies_copies_differ_client_digest_bug_and_an_empty_bookie(tmp_path: Path) -> None:
    meta = {
        5: parse_ledger_metadata(
            metadata_v3([(0, [B1, B2])], write=2, ack=2, last=2, password=b"pw")
        )
    }
    one = _ledger(5, 3)
    other = list(one)
    # entry 1: other bytes, a valid digest of their own; entry 2: the same wrong digest on both
    other[1] = (5, 1, entry_bytes(5, 1, b"different", "CRC32C", lac=0))
    bad = entry_bytes(5, 2, _payload(2), "CRC32C", lac=1, bad_digest=True)
    one[2] = other[2] = (5, 2, bad)
    b1 = write_bookie(tmp_path / "b1", B1, one)
    b2 = write_bookie(tmp_path / "b2", B2, other)
    report = scan_bookies([str(b1), str(b2)], meta)
    kinds = [(f.kind, f.entry) for f in report.findings]
    assert sorted(kinds) == [("COPIES_DIFFER", 1), ("DIGEST_MISMATCH_ALL_COPIES", 2)]
    assert "client" in next(f for f in report.findings if f.entry == 2).detail
    # a bookie that holds none of its share: re-formatted or replaced
    b3 = write_bookie(tmp_path / "b3", B2, _ledger(9, 1))
    report = scan_bookies([str(b1), str(b3)], meta)
    assert ("BOOKIE_HOLDS_NOTHING", B2) in [(f.kind, f.bookie) for f in report.findings]
    assert not [f for f in report.findings if f.kind == "MISSING_ENTRY"]


def test_json_findings_name_bookie_ledger_entry_file_offset(tmp_path: Path, capsys: Any) -> None:
    bookie = write_bookie(tmp_path / "b1", B1, _ledger(5, 2), index=[(5, 0)])
    meta = _meta_dir(
        tmp_path, {5: metadata_v3([(0, [B1])], write=1, ack=1, last=1, password=b"pw")}
    )
    assert main(["scan", str(tmp_path), "--ledger-metadata", str(meta), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    missing = next(f for f in data["findings"] if f["error"] == "MISSING_ENTRY")
    assert {k: missing[k] for k in ("bookie", "ledger", "entry", "severity")} == {
        "bookie": B1,
        "ledger": 5,
        "entry": 1,
        "severity": "error",
    }
    assert set(missing) == {
        "error",
        "severity",
        "bookie",
        "ledger",
        "entry",
        "file",
        "offset",
        "detail",
        "read_at",
    }
    assert data["bookies"] == {B1: [str(bookie)]}


# ---- entry logs: the scanner's rule, compaction leftovers -----------------------------------


def test_scan_records_steps_over_padding_a_byte_at_a_time(tmp_path: Path) -> None:
    import os

    from bookkeeper_fixture import log_header

    from merkle.replica.bookkeeper.entrylog import read_header, scan_records

    one = entry_bytes(5, 0, b"a" * 10)
    two = entry_bytes(5, 1, b"b" * 10)
    three = entry_bytes(6, 0, b"c")
    ledgers_map = struct.pack(">qqi", -1, -2, 1) + struct.pack(">qq", 5, 100)
    data = (
        log_header(0, 0)
        + struct.pack(">i", len(one))
        + one
        + bytes(7)
        + struct.pack(">i", len(two))
        + two
        + b"\xf0" * 13  # DirectIO's 0xF0 padding
        + struct.pack(">i", len(ledgers_map))
        + ledgers_map
        + struct.pack(">i", len(three))
        + three
        + struct.pack(">i", 1000)
        + b"short"
    )  # a short read ends the scan silently
    (tmp_path / "0.log").write_bytes(data)
    fd = os.open(tmp_path / "0.log", os.O_RDONLY)
    try:
        recs = [(r.ledger_id, r.entry_id, r.size) for r in scan_records(fd, len(data))]
        assert recs == [(5, 0, len(one)), (5, 1, len(two)), (6, 0, len(three))]
        assert read_header(fd, len(data)).ledgers_map_offset == 0
        assert read_header(fd, 0).empty  # a pre-allocated log closed before its header
    finally:
        os.close(fd)


def test_scan_records_skips_the_runs_it_is_given_and_nothing_else(tmp_path: Path) -> None:
    """The walk for unindexed records steps over the runs of records the scan verified (as
    _verify_log returns them): for every subset of a log's records, it yields exactly the
    records of the whole walk outside the subset, padding, a ledgers map and a record with a
    nested (hostile) location among them."""
    import itertools
    import os

    from bookkeeper_fixture import log_header

    from merkle.replica.bookkeeper.entrylog import HEADER_SIZE, scan_records
    from merkle.replica.bookkeeper.scan import _runs

    parts = [entry_bytes(5, e, bytes([e]) * (10 + e)) for e in range(4)]
    data = bytearray(log_header(0, 0))
    records = []  # (pos after the size field, size)
    for k, entry in enumerate(parts):
        if k == 2:
            data += bytes(5)  # padding between records
        data += struct.pack(">i", len(entry))
        records.append((len(data), len(entry)))
        data += entry
    ledgers_map = struct.pack(">qqi", -1, -2, 1) + struct.pack(">qq", 5, 100)
    data += struct.pack(">i", len(ledgers_map)) + ledgers_map
    tail = entry_bytes(6, 0, b"t")
    data += struct.pack(">i", len(tail))
    records.append((len(data), len(tail)))
    data += tail
    assert records[0][0] == HEADER_SIZE + 4
    (tmp_path / "0.log").write_bytes(bytes(data))
    nested = (records[1][0] + 8, 4)  # an index location inside another record
    fd = os.open(tmp_path / "0.log", os.O_RDONLY)
    try:
        whole = [(r.pos, r.size) for r in scan_records(fd, len(data))]
        assert whole == records
        for n in range(len(records) + 1):
            for subset in itertools.combinations(records, n):
                for extra in ([], [nested]):
                    pairs = list(subset) + extra
                    runs = _runs([p for p, _ in pairs], [n for _, n in pairs])
                    got = [(r.pos, r.size) for r in scan_records(fd, len(data), runs)]
                    assert got == [r for r in whole if r not in subset], (subset, extra)
    finally:
        os.close(fd)


def test_compaction_leftovers_are_named_not_read(tmp_path: Path) -> None:
    bookie = write_bookie(tmp_path / "b1", B1, _ledger(5, 2))
    current = bookie / "current"
    (current / "1.log.compacting").write_bytes((current / "0.log").read_bytes())
    (current / "1.log.0.compacted").write_bytes(b"")
    (current / "2.log").write_bytes(b"")  # pre-allocated, never written
    meta = {
        5: parse_ledger_metadata(metadata_v3([(0, [B1])], write=1, ack=1, last=1, password=b"pw"))
    }
    report = scan_bookies([str(bookie)], meta)
    assert sorted(Path(f.file).name for f in report.findings) == [
        "1.log.0.compacted",
        "1.log.compacting",
    ]
    assert {f.kind for f in report.findings} == {"UNINDEXED_ENTRY"}
    assert len(report.copies) == 2 and all(c.good for c in report.copies)


def test_oversized_znode_bytes_are_refused_before_parsing() -> None:
    """What bk-zk hands over from ZooKeeper: bytes, bounded before any parse."""
    with pytest.raises(MetadataError, match="more than the 4194304"):
        parse_ledger_metadata(b"BookieMetadataFormatVersion\t3\n" + bytes(100 << 20))
    # a message of 200 000 segments (within the size bound): refused by the field bound
    seg = b"\x32\x02\x10\x00"  # field 6, 2 bytes: firstEntryId 0
    body = seg * 200_000
    from bookkeeper_fixture import _varint

    with pytest.raises(MetadataError, match="more than 100000 fields"):
        parse_ledger_metadata(b"BookieMetadataFormatVersion\t3\n" + _varint(len(body)) + body)


def test_a_scan_that_verified_nothing_proves_nothing(tmp_path: Path, capsys: Any) -> None:
    """Metadata that names none of the stored ledgers (an empty OPEN ledger 99 only): every
    stored copy is a warning (LEDGER_NOT_IN_METADATA) and none was verified, so the scan is
    exit 2 with one line, never a clean 0."""
    bookie = write_bookie(tmp_path / "b1", B1, _ledger(5, 4))
    meta = _meta_dir(tmp_path, {99: metadata_v3([(0, [B1])], write=1, ack=1, state="OPEN")})
    assert main(["scan", str(bookie), "--ledger-metadata", str(meta)]) == 2
    err = capsys.readouterr().err
    assert "nothing is proved" in err and "Traceback" not in err


def test_also_crcs_tell_copies_apart_that_crc32c_does_not() -> None:
    """Two good copies whose CRC-32C and digest agree but whose --also CRC differs are
    COPIES_DIFFER (the --also value is one more comparison), named with that CRC; with the
    same --also values they are one entry's copies, no finding. Judged as columns
    (judge_ledger), which picks the entries to compare copy by copy."""
    from merkle.replica.bookkeeper.metadata import LedgerMetadata
    from merkle.replica.bookkeeper.scan import COPIES_DIFFER, Copy, Coverage, judge_ledger

    def copy(bookie: str, crc64: int) -> Copy:
        return Copy(
            bookie, 7, 3, f"/{bookie}/0.log", 1028, 100, frame_ok=True, digest_ok=True,
            verified=True, stored_digest="0a0b0c0d", payload_crc32c=0x1234,
            also={"crc64nvme": crc64},
        )  # fmt: skip

    meta = LedgerMetadata(7, 2, 2, 2, "CLOSED", 3, 0, [(0, ("b1", "b2"))])
    cover = Coverage({"b1": (1, (0,), True), "b2": (1, (0,), True)})
    others = [Copy(b, 7, e, f"/{b}/0.log", 100 * e, 100, True, True, True) for e in range(3)
              for b in ("b1", "b2")]  # fmt: skip
    same = judge_ledger(7, meta, [copy("b1", 5), copy("b2", 5), *others], cover)
    differ = judge_ledger(7, meta, [copy("b1", 5), copy("b2", 6), *others], cover)
    assert same.findings == [] and same.missing == {}
    assert [f.kind for f in differ.findings] == [COPIES_DIFFER]
    assert "crc64nvme 6" in differ.findings[0].detail


def test_also_on_bookies_from_the_command_line(tmp_path: Path, capsys: Any) -> None:
    """`crcmerkle scan BOOKIES --also crc64nvme --also crc32`: the same findings and exit
    status as without (the CRCs are extra comparisons of intact copies)."""
    from test_bookkeeper_generate import _generate

    manifest = _generate(tmp_path / "bk", "default", "mixed")
    paths = [str(tmp_path / "bk" / b) for b in manifest["bookies"]]
    meta = str(tmp_path / "bk" / manifest["metadata"]["dumps"])
    runs = []
    for extra in ([], ["--also", "crc64nvme", "--also", "crc32"]):
        capsys.readouterr()
        rc = main(["scan", *paths, "--ledger-metadata", meta, "--json", *extra])
        runs.append((rc, json.loads(capsys.readouterr().out)["findings"]))
    assert runs[0] == runs[1] and runs[0][0] == 1
