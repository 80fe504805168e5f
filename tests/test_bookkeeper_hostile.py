"""Issue 38: hostile bookies and metadata give one-line findings or errors, read nothing
outside the ledger directories and never size memory from a number read from a file: a cookie
naming a path, a size field of 2^31, an index pointing at a FIFO or a link, a log gone between
listing and reading, a RocksDB directory that is a link, a 100 MB metadata file, a segment
loop. Runs on a private copy of the golden bookie-4 (DbLedgerStorage), never on the original."""

from __future__ import annotations

import os
import shutil
import stat
import struct
from pathlib import Path
from typing import Any, Dict

import pytest
from bookkeeper_fixture import metadata_v3

from merkle.cli import main
from merkle.replica.bookkeeper import scan as bkscan
from merkle.replica.bookkeeper.metadata import LedgerMetadata, load_ledger_metadata
from merkle.replica.bookkeeper.scan import scan_bookies

#: the repository's copy (a fresh clone, CI's and the wheel suite's, has no ../shared: this
#: module once skipped there whole)
GOLDEN = Path(__file__).resolve().parent / "data" / "bookkeeper-golden"

B4 = "127.0.0.1:31814"


@pytest.fixture()
def bookie(tmp_path: Path) -> Path:
    """A writable copy of golden bookie-4's ledger directory (its entry logs 0..3 and
    RocksDBs)."""
    dst = tmp_path / "bookie-4" / "ledgers"
    shutil.copytree(GOLDEN / "bookie-4" / "ledgers", dst)
    for d, dirs, files in os.walk(tmp_path):
        for name in dirs + files:
            os.chmod(os.path.join(d, name), 0o755 if name in dirs else 0o644)
    # the cookie lists the golden's relative path; this copy is where it says
    return dst


@pytest.fixture()
def metadata() -> Dict[int, LedgerMetadata]:
    return load_ledger_metadata(str(GOLDEN / "zookeeper"))


def _one_line(report: Any) -> None:
    for f in report.findings:
        assert "\n" not in f.line()


def test_a_cookie_naming_paths_is_data(bookie: Path, metadata: Any) -> None:
    (bookie / "current/VERSION").write_bytes(
        b'5\nbookieHost: "../../../etc/passwd"\njournalDir: "/etc"\n'
        b'ledgerDirs: "2\\t/etc\\t../../../../root"\ninstanceId: "/proc/self/mem"\n'
    )
    report = scan_bookies(
        [str(bookie)], metadata, instance_id="4f45314a-d797-4da2-92b5-79bd9e51cc66"
    )
    mism = [f for f in report.findings if f.kind == "COOKIE_MISMATCH"]
    assert {f.bookie for f in mism} == {"../../../etc/passwd"} and len(mism) == 2
    assert any("instanceId /proc/self/mem" in f.detail for f in mism)
    # its copies are still verified, under the name the cookie gives (a string, never a path)
    assert {c.bookie for c in report.copies} == {"../../../etc/passwd"}
    _one_line(report)


def test_a_huge_cookie_is_one_finding(bookie: Path, metadata: Any) -> None:
    (bookie / "current/VERSION").write_bytes(b"5\n" + b"x" * (10 << 20))
    report = scan_bookies([str(bookie)], metadata)
    assert [f.kind for f in report.findings] == ["COOKIE_INVALID"]
    assert len(report.copies) == 0


@pytest.mark.parametrize("size", [1 << 31, (1 << 31) - 1, 0xFFFFFFFF, 20])
def test_a_size_field_of_2_31_is_a_finding(bookie: Path, metadata: Any, size: int) -> None:
    log = bookie / "current/0.log"
    data = bytearray(log.read_bytes())
    data[2311 - 4 : 2311] = struct.pack(">I", size)  # ledger 0 entry 7 (the golden fault's)
    log.write_bytes(bytes(data))
    report = scan_bookies([str(bookie)], metadata)
    bad = [f for f in report.findings if f.kind == "ENTRY_FRAME_INVALID"]
    assert [(f.ledger, f.entry, f.offset) for f in bad] == [(0, 7, 2311)]
    assert str(size) in bad[0].detail or size == 20
    _one_line(report)


@pytest.mark.parametrize("kind", ["symlink", "fifo", "directory"])
def test_an_index_pointing_at_a_link_or_fifo(bookie: Path, metadata: Any, kind: str) -> None:
    log = bookie / "current/1.log"
    log.unlink()
    if kind == "symlink":
        log.symlink_to(GOLDEN / "bookie-1/ledgers/current/1.log")
    elif kind == "fifo":
        os.mkfifo(log)
    else:
        log.mkdir()
    report = scan_bookies([str(bookie)], metadata)
    kinds = {f.kind for f in report.findings}
    assert {"NOT_A_REGULAR_FILE", "ENTRY_LOG_MISSING"} <= kinds
    assert not [c for c in report.copies if c.file.endswith("/1.log") and c.frame_ok]
    _one_line(report)


def test_a_log_vanishing_between_listing_and_reading(
    bookie: Path, metadata: Any, monkeypatch: Any
) -> None:
    real = bkscan.open_regular

    def racing(dir_fd: int, name: str, *a: Any, **kw: Any) -> int:
        if name == "2.log":  # listed, then deleted by the live bookie's GC
            os.unlink(name, dir_fd=dir_fd)
        return real(dir_fd, name, *a, **kw)

    monkeypatch.setattr(bkscan, "open_regular", racing)
    report = scan_bookies([str(bookie)], metadata)
    gone = [f for f in report.findings if f.kind == "ENTRY_LOG_MISSING"]
    assert len(gone) == 1 and gone[0].file.endswith("current/2.log")
    assert gone[0].severity == "error"
    assert "2 index entries" in gone[0].detail
    # the copies it held count as held but not good (reported once, by ENTRY_LOG_MISSING)
    lost = [c for c in report.copies if c.file.endswith("/2.log")]
    assert sorted((c.ledger, c.entry) for c in lost) == [(4, 3), (4, 4)]
    assert not any(c.good for c in lost)
    assert not [f for f in report.findings if f.kind == "MISSING_ENTRY"]


def test_a_rocksdb_directory_that_is_a_link(bookie: Path, metadata: Any) -> None:
    loc = bookie / "current/locations"
    shutil.rmtree(loc)
    loc.symlink_to(GOLDEN / "bookie-1/ledgers/current/locations")
    report = scan_bookies([str(bookie)], metadata)
    assert [f.kind for f in report.findings] == ["INDEX_UNREADABLE"]
    assert "symbolic link" in report.findings[0].detail


def test_a_missing_index_entry_is_under_replication(bookie: Path, metadata: Any) -> None:
    import rocksdict

    db = rocksdict.Rdict(
        str(bookie / "current/locations"), options=rocksdict.Options(raw_mode=True)
    )
    db.delete(struct.pack(">qq", 0, 4))
    db.close()
    report = scan_bookies([str(bookie)], metadata)
    kinds = sorted((f.kind, f.ledger, f.entry) for f in report.findings if f.severity == "error")
    assert kinds == [("CORRUPT_ENTRY", 0, 7), ("MISSING_ENTRY", 0, 4)]
    # the record is still in the log: unindexed
    assert ("UNINDEXED_ENTRY", 0, 4) in [(f.kind, f.ledger, f.entry) for f in report.findings]


def test_a_100_mb_metadata_file_is_one_line(tmp_path: Path, capsys: Any) -> None:
    meta = tmp_path / "meta"
    meta.mkdir()
    with open(meta / "5", "wb") as f:
        f.truncate(100 << 20)  # sparse: 100 MB that cost no disk
    status = main(["scan", str(GOLDEN / "bookie-4"), "--ledger-metadata", str(meta)])
    out, err = capsys.readouterr()
    assert status == 2 and out == ""
    assert len(err.splitlines()) == 1 and "104857600 bytes" in err


def test_a_segment_loop_is_one_line(tmp_path: Path, capsys: Any) -> None:
    meta = tmp_path / "meta"
    meta.mkdir()
    segs = [(0, [B4]), (0, [B4]), (0, [B4])]
    (meta / "3").write_bytes(metadata_v3(segs, write=1, ack=1))
    status = main(["scan", str(GOLDEN / "bookie-4"), "--ledger-metadata", str(meta)])
    out, err = capsys.readouterr()
    assert status == 2 and out == "" and len(err.splitlines()) == 1
    assert "segment loop" in err and str(meta / "3") in err


def test_no_bookie_under_a_path_is_exit_2(tmp_path: Path, capsys: Any) -> None:
    (tmp_path / "empty").mkdir()
    status = main(["scan", str(tmp_path / "empty"), "--ledger-metadata", str(GOLDEN / "zookeeper")])
    out, err = capsys.readouterr()
    assert status == 2 and "no bookie ledger directory found" in err
    assert stat.S_ISDIR(os.stat(tmp_path / "empty").st_mode)


def test_a_ledger_in_the_wrong_ledger_directory(tmp_path: Path, metadata: Any) -> None:
    """DbLedgerStorage keeps ledger L in ledger dir L mod numDirs: a cookie listing bookie-2's
    two dirs the other way round puts every ledger in the wrong one."""
    dst = tmp_path / "bookie-2"
    shutil.copytree(GOLDEN / "bookie-2", dst)
    cookie = (dst / "ledgers-a/current/VERSION").read_bytes()
    swapped = cookie.replace(
        b"bookie-2/ledgers-a\\tbookie-2/ledgers-b", b"bookie-2/ledgers-b\\tbookie-2/ledgers-a"
    )
    assert swapped != cookie
    for d in ("ledgers-a", "ledgers-b"):
        os.chmod(dst / d / "current", 0o755)
        os.chmod(dst / d / "current/VERSION", 0o644)
        (dst / d / "current/VERSION").write_bytes(swapped)
    report = scan_bookies([str(dst)], metadata)
    wrong = sorted(
        (f.ledger, Path(f.file).parent.name)
        for f in report.findings
        if f.kind == "LEDGER_IN_WRONG_DIR"
    )
    assert wrong == [(0, "ledgers-a"), (1, "ledgers-b"), (2, "ledgers-a"), (4, "ledgers-a")]
    # as given (the golden order), nothing is in the wrong place
    report = scan_bookies([str(GOLDEN / "bookie-2")], metadata)
    assert not [f for f in report.findings if f.kind == "LEDGER_IN_WRONG_DIR"]


def test_a_log_shrinking_while_it_is_read(bookie: Path, metadata: Any, monkeypatch: Any) -> None:
    """The bookie truncates a log after its size was taken: the entries past the new end
    are findings, the scan ends (no endless retry, no crash)."""
    real, real_read = bkscan.pread_exact, bkscan.WindowReader.read

    def shrunk(fd: int, size: int, offset: int) -> bytes:
        if not os.readlink(f"/proc/self/fd/{fd}").endswith("/0.log"):
            return real(fd, size, offset)
        return real(fd, max(0, min(size, 3000 - offset)), offset)

    def shrunk_window(self: Any, fd: int, size: int, offset: int) -> memoryview:
        if not os.readlink(f"/proc/self/fd/{fd}").endswith("/0.log"):
            return real_read(self, fd, size, offset)
        return real_read(self, fd, max(0, min(size, 3000 - offset)), offset)

    monkeypatch.setattr(bkscan, "pread_exact", shrunk)  # a single large entry's read
    monkeypatch.setattr(bkscan.WindowReader, "read", shrunk_window)  # the windows
    report = scan_bookies([str(bookie)], metadata)
    cut = [f for f in report.findings if f.kind == "ENTRY_FRAME_INVALID"]
    assert cut and all(
        f.offset is not None and f.offset >= 2900 and f.file.endswith("/0.log") for f in cut
    )
    assert all("shrank" in f.detail for f in cut)
    _one_line(report)


def test_a_cookie_the_metadata_store_does_not_register(bookie: Path, metadata: Any) -> None:
    """The registered cookie (`cookies/<bookieId>`) is what Cookie.verify compares with."""
    mine = (bookie / "current/VERSION").read_bytes()
    report = scan_bookies([str(bookie)], metadata, registered_cookies={B4: mine})
    assert not [f for f in report.findings if f.kind == "COOKIE_MISMATCH"]
    other = mine.replace(b"bookie-4/journal", b"/elsewhere/journal")
    for registered, why in (
        ({B4: other}, "differs"),
        ({}, "registers no cookie"),
        ({B4: b"junk"}, "does not parse"),
    ):
        report = scan_bookies([str(bookie)], metadata, registered_cookies=registered)
        mism = [f for f in report.findings if f.kind == "COOKIE_MISMATCH"]
        assert len(mism) == 1 and why in mism[0].detail and mism[0].bookie == B4


def test_a_metadata_password_that_is_not_the_ledgers(bookie: Path, metadata: Any) -> None:
    """Ledger D (HMAC, id 3) checked with another password: the bookie's master key says the
    password is wrong, so the digests failing on both copies are not blamed on a client."""
    wrong = dict(metadata)
    wrong[3] = LedgerMetadata(**{**vars(metadata[3]), "password": b"not-golden-d"})
    report = scan_bookies([str(bookie)], wrong)
    keys = [f for f in report.findings if f.kind == "MASTER_KEY_MISMATCH"]
    assert [(f.bookie, f.ledger) for f in keys] == [(B4, 3)]
    assert keys[0].severity == "error"
    # the right password: no such finding (the golden master keys are SHA-1("ledger" + pw))
    report = scan_bookies([str(bookie)], metadata)
    assert not [f for f in report.findings if f.kind == "MASTER_KEY_MISMATCH"]


def test_index_directories_apart_from_the_ledger_directory(bookie: Path, metadata: Any) -> None:
    """indexDirs: DbLedgerStorage keeps ledger dir i's RocksDBs in index dir i."""
    index = bookie.parent / "index"
    (index / "current").mkdir(parents=True)
    for db in ("ledgers", "locations"):
        shutil.move(str(bookie / "current" / db), str(index / "current" / db))
    cookie = (
        (bookie / "current/VERSION")
        .read_bytes()
        .replace(b"instanceId:", b'indexDirs: "1\\tbookie-4/index"\ninstanceId:')
    )
    for d in (bookie, index):
        (d / "current/VERSION").write_bytes(cookie)
    both = scan_bookies([str(bookie.parent)], metadata)
    alone = scan_bookies([str(GOLDEN / "bookie-4")], metadata)
    assert [(f.kind, f.ledger, f.entry) for f in both.findings] == [
        (f.kind, f.ledger, f.entry) for f in alone.findings
    ]
    assert len(both.copies) == len(alone.copies) > 30
    assert both.bookies == {B4: [str(bookie)]}
    # the ledger directory without its index directory: one finding, not read
    report = scan_bookies([str(bookie)], metadata)
    assert [f.kind for f in report.findings] == ["INDEX_UNREADABLE"]
    assert "indexDirs" in report.findings[0].detail and len(report.copies) == 0
