"""Issue 38: the census on BookKeeper bookies (`crcmerkle scan BOOKIE... --ledger-metadata PATH
--metadata-only`): the indexes, cookies and master keys are read and every index entry is
placed against its write set, no entry is read and none is verified. Checked against the data
scan of the same generated bookies: the census finds exactly the placement findings the data
scan finds (what needs no entry's bytes), none of the findings that do, reads zero bytes, and
does not change when every entry log's bytes are overwritten."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from merkle.cli import main
from merkle.replica.bookkeeper.entrylog import COMPACTION_LEFTOVER

#: what a census can see: the indexes against the metadata, the logs' presence and sizes, the
#: cookies (no entry's bytes)
PLACEMENT = {
    "MISSING_ENTRY",
    "BOOKIE_HOLDS_NOTHING",
    "COOKIE_MISMATCH",
    "LEDGER_NOT_IN_METADATA",
    "ENTRY_PAST_LAST_ENTRY",
    "ENTRY_OF_OPEN_LEDGER",
    "ENTRY_LOG_MISSING",
    "LEDGER_IN_WRONG_DIR",
    "MASTER_KEY_MISMATCH",
    "UNINDEXED_ENTRY",  # of a leftover file: seen_without_bytes
}
#: what only the entries' bytes show (UNINDEXED_ENTRY too, but for a compaction's leftover
#: file, which the directory listing shows)
IN_THE_BYTES = {"CORRUPT_ENTRY", "DIGEST_MISMATCH_ALL_COPIES", "COPIES_DIFFER"}


def _generate(out: Path, storage: str, faults: str = "default") -> Dict[str, Any]:
    argv = ["generate", str(out), "--layout", "bookkeeper", "--storage", storage]
    argv += ["--faults", faults, "--entries", "10-24", "--entry-size", "0-300", "--seed", "7"]
    assert main(argv) == 0
    return dict(json.loads((out / "manifest.json").read_text()))


def _scan(capsys: Any, out: Path, manifest: Dict[str, Any], *extra: str) -> Tuple[int, Any]:
    capsys.readouterr()
    argv = ["scan", *(str(out / b) for b in manifest["bookies"])]
    argv += ["--ledger-metadata", str(out / manifest["metadata"]["znode_tree"]), "--json"]
    status = main([*argv, *extra])
    return status, json.loads(capsys.readouterr().out)


def _keys(findings: List[Dict[str, Any]]) -> Counter:  # type: ignore[type-arg]
    return Counter(
        (f["error"], f["bookie"], f["ledger"], f["entry"], f["file"], f["offset"], f["severity"])
        for f in findings
    )


def _entry_logs(root: Path) -> List[Path]:
    """The entry logs holding entries (not the pre-allocated empty ones, not RocksDB's WALs)."""
    return sorted(
        p
        for p in root.rglob("*.log")
        if p.parent.name == "current" and p.is_file() and not p.is_symlink() and p.stat().st_size
    )


@pytest.mark.parametrize("storage", ["db", "interleaved", "mixed"])
def test_the_census_finds_the_placement_findings_and_reads_no_entry(
    tmp_path: Path, capsys: Any, storage: str
) -> None:
    out = tmp_path / "bk"
    manifest = _generate(out, storage)
    status, data = _scan(capsys, out, manifest)
    assert status == 1
    c_status, census = _scan(capsys, out, manifest, "--metadata-only")
    assert c_status == 1  # the generator's placement faults are errors
    assert census["summary"]["bytes_read"] == 0 and census["summary"]["census"] is True
    assert census["summary"]["good_copies"] == 0  # nothing verified, nothing vouches
    assert census["summary"]["indexed_copies"] > 0
    got = _keys(census["findings"])
    # nothing the census reports is absent from the data scan (same kind, place, level) ...
    assert not got - _keys(data["findings"]), sorted(got - _keys(data["findings"]), key=str)
    # ... and it reports every placement finding of the data scan but an unclosed ledger's
    # MISSING_ENTRY past its lastEntryId (the entries' headers say how far to check)
    states = {lg["ledger"]: (lg["state"], lg["last_entry_id"]) for lg in census["ledgers"]}

    def seen_without_bytes(f: Dict[str, Any]) -> bool:
        if f["error"] not in PLACEMENT:
            return False
        if f["error"] == "MISSING_ENTRY":
            state, last = states[f["ledger"]]
            return state == "CLOSED" or f["entry"] <= last
        if f["error"] == "UNINDEXED_ENTRY":
            return COMPACTION_LEFTOVER.fullmatch(os.path.basename(f["file"])) is not None
        return True

    want = _keys([f for f in data["findings"] if seen_without_bytes(f)])
    assert want and not want - got, sorted(want - got, key=str)
    kinds = {f["error"] for f in census["findings"]}
    assert not kinds & IN_THE_BYTES
    assert {f["error"] for f in data["findings"]} & IN_THE_BYTES  # the data scan saw them
    assert all(seen_without_bytes(f) for f in census["findings"] if f["error"] in PLACEMENT)
    # every ledger line counts indexed copies, never good ones
    for lg in census["ledgers"]:
        assert lg["census"] is True and "good_copies" not in lg and "indexed_copies" in lg


def test_the_census_is_blind_to_the_entry_logs_bytes(tmp_path: Path, capsys: Any) -> None:
    """Every entry log overwritten with zeros (sizes kept): the census says exactly what it
    said before (it opened no log), the data scan now finds every entry broken."""
    out = tmp_path / "bk"
    manifest = _generate(out, "mixed")
    _, before = _scan(capsys, out, manifest, "--metadata-only")
    logs = _entry_logs(out)
    assert logs
    for log in logs:
        size = log.stat().st_size
        with open(log, "r+b") as f:
            f.write(bytes(size))
    _, after = _scan(capsys, out, manifest, "--metadata-only")
    assert _keys(after["findings"]) == _keys(before["findings"])
    assert after["ledgers"] == before["ledgers"]
    _, data = _scan(capsys, out, manifest)
    assert data["summary"]["good_copies"] == 0


def test_a_clean_census_exits_0_and_counts_every_copy_as_indexed(
    tmp_path: Path, capsys: Any
) -> None:
    out = tmp_path / "bk"
    manifest = _generate(out, "db", faults="none")
    status, data = _scan(capsys, out, manifest)
    c_status, census = _scan(capsys, out, manifest, "--metadata-only")
    assert (status, c_status) == (0, 0)
    assert census["summary"]["indexed_copies"] == data["summary"]["good_copies"] > 0
    for d, c in zip(data["ledgers"], census["ledgers"]):
        assert c["ledger"] == d["ledger"]
        if d["state"] == "CLOSED":  # an unclosed one's census stops at its lastEntryId
            assert c["indexed_copies"] == d["good_copies"]
            assert c["below_ack_quorum"] == d["below_ack_quorum"] == []
    # the text form says it is a census
    capsys.readouterr()
    argv = ["scan", *(str(out / b) for b in manifest["bookies"]), "--metadata-only"]
    assert main([*argv, "--ledger-metadata", str(out / manifest["metadata"]["znode_tree"])]) == 0
    text = capsys.readouterr().out
    assert "census: no entry read, none verified" in text and " good)" not in text
    assert all("indexed copies" in line for line in text.splitlines() if line.startswith("ledger"))


def test_a_log_that_is_a_link_or_gone_in_a_census(tmp_path: Path, capsys: Any) -> None:
    """A log replaced by a symlink is never followed (NOT_A_REGULAR_FILE, its entries lost);
    a removed log is ENTRY_LOG_MISSING; both as the data scan says."""
    out = tmp_path / "bk"
    manifest = _generate(out, "db", faults="none")
    logs = _entry_logs(out)
    gone, linked = logs[0], logs[-1]
    assert gone != linked
    gone.unlink()
    target = tmp_path / "elsewhere.log"
    os.replace(linked, target)
    os.symlink(target, linked)
    _, census = _scan(capsys, out, manifest, "--metadata-only")
    _, data = _scan(capsys, out, manifest)
    kinds = Counter(f["error"] for f in census["findings"])
    assert kinds["ENTRY_LOG_MISSING"] == 2 and kinds["NOT_A_REGULAR_FILE"] == 1
    placed = {
        k for k in _keys(census["findings"]) if k[0] in ("ENTRY_LOG_MISSING", "MISSING_ENTRY")
    }
    assert placed <= set(_keys(data["findings"]))


def test_census_options_refused_in_one_line(tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "bk"
    manifest = _generate(out, "db", faults="none")
    meta = str(out / manifest["metadata"]["znode_tree"])
    bookies = [str(out / b) for b in manifest["bookies"]]
    for extra in (["--also", "crc32"], ["--emit", str(tmp_path / "emit")]):
        capsys.readouterr()
        argv = ["scan", *bookies, "--ledger-metadata", meta, "--metadata-only", *extra]
        assert main(argv) == 2, extra
        err = capsys.readouterr().err
        assert err.count("\n") == 1, err
        assert ("--also computes its CRCs" in err) == (extra[0] == "--also"), err
    capsys.readouterr()
    argv = ["scan", *bookies, "--ledger-metadata", meta, "--metadata-only", "--trees-only"]
    assert main(argv) == 2
    assert "not allowed with" in capsys.readouterr().err
