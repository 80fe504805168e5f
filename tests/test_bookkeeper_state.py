"""`--state DIR` on bookies (issue 34 on BookKeeper's layout, merkle.replica.bookkeeper.state):
a second pass within --max-age reads no entry log and finds what the first found, each
finding from a record saying when its log was read; a log that changed is read again, the
others not; a scan killed (SIGKILL) mid-pass resumes, reading only the logs the killed run
had not recorded, with the uninterrupted run's findings; what a bookie scan cannot honour
is refused in one line."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

pytest.importorskip("rocksdict")

from test_bookkeeper_generate import _generate  # noqa: E402

import merkle  # noqa: E402
from merkle.cli import main  # noqa: E402
from merkle.replica.scanstate import DB_NAME  # noqa: E402

MERKLE_HOME = str(Path(merkle.__file__).resolve().parents[1])


def _scan(capsys: Any, argv: List[str]) -> Tuple[int, Dict[str, Any]]:
    capsys.readouterr()
    status = main(["scan", *argv, "--json"])
    return status, json.loads(capsys.readouterr().out)


def _found(doc: Dict[str, Any]) -> List[Tuple[Any, ...]]:
    """The findings two runs must agree on (without when their data was read)."""
    keys = ("error", "bookie", "ledger", "entry", "file", "offset", "detail")
    return sorted(tuple(f[k] for k in keys) for f in doc["findings"])


@pytest.fixture(scope="module", params=["db", "interleaved"])
def bookies(request: Any, tmp_path_factory: Any) -> Tuple[List[str], str]:
    out = tmp_path_factory.mktemp(f"bkstate-{request.param}") / "bk"
    manifest = _generate(out, "default", request.param)
    paths = [str(out / b) for b in manifest["bookies"]]
    return paths, str(out / manifest["metadata"]["znode_tree"])


def test_a_second_pass_within_max_age_reads_no_entry_log(
    bookies: Any, tmp_path: Path, capsys: Any
) -> None:
    paths, meta = bookies
    plain_status, plain = _scan(capsys, [*paths, "--ledger-metadata", meta])
    state = str(tmp_path / "state")
    argv = [*paths, "--ledger-metadata", meta, "--state", state, "--max-age", "7d"]
    status1, first = _scan(capsys, argv)
    status2, second = _scan(capsys, argv)
    assert plain_status == status1 == status2 == 1
    assert _found(first) == _found(second) == _found(plain)
    s1, s2 = first["summary"], second["summary"]
    assert s1["logs_read"] > 0 and s1["logs_not_read"] == 0 and s1["bytes_read"] > 0
    assert s2["logs_read"] == 0 and s2["logs_not_read"] == s1["logs_read"]
    assert s2["bytes_read"] == 0  # counted: not one byte of an entry log read
    assert s2["copies"] == s1["copies"] and s2["good_copies"] == s1["good_copies"]
    # a finding from a record says when its log was read; none of the first run's does
    assert all(f["read_at"] is None for f in first["findings"])
    carried = [f for f in second["findings"] if f["read_at"] is not None]
    assert carried and all(f["file"] and f["file"].endswith(".log") for f in carried)
    assert all(abs(f["read_at"] - time.time()) < 600 for f in carried)


def test_a_changed_log_is_read_again_and_only_it(bookies: Any, tmp_path: Path, capsys: Any) -> None:
    paths, meta = bookies
    state = str(tmp_path / "state")
    argv = [*paths, "--ledger-metadata", meta, "--state", state, "--max-age", "7d"]
    _, first = _scan(capsys, argv)
    logs = sorted(p for b in paths for p in Path(b).glob("**/current/*.log") if p.stat().st_size)
    victim = logs[0]
    st = victim.stat()
    os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # touched: changed
    _, second = _scan(capsys, argv)
    assert second["summary"]["logs_read"] == 1
    assert second["summary"]["logs_not_read"] == first["summary"]["logs_read"] - 1
    assert 0 < second["summary"]["bytes_read"] < first["summary"]["bytes_read"]
    assert _found(second) == _found(first)
    # without --max-age the finished pass counts for nothing: every log is read again
    _, third = _scan(capsys, [*paths, "--ledger-metadata", meta, "--state", state])
    assert third["summary"]["logs_not_read"] == 0
    assert third["summary"]["bytes_read"] == first["summary"]["bytes_read"]


def test_a_record_that_does_not_parse_is_read_again(
    bookies: Any, tmp_path: Path, capsys: Any
) -> None:
    paths, meta = bookies
    state = tmp_path / "state"
    argv = [*paths, "--ledger-metadata", meta, "--state", str(state), "--max-age", "7d"]
    _, first = _scan(capsys, argv)
    db = sqlite3.connect(state / DB_NAME)
    try:
        with db:
            db.execute("UPDATE entry_logs SET copies = x'00ff'")
    finally:
        db.close()
    _, second = _scan(capsys, argv)
    assert second["summary"]["logs_not_read"] == 0
    assert second["summary"]["bytes_read"] == first["summary"]["bytes_read"]
    assert _found(second) == _found(first)


def test_what_a_bookie_scan_cannot_honour_is_refused_in_one_line(
    bookies: Any, tmp_path: Path, capsys: Any
) -> None:
    paths, meta = bookies
    state = str(tmp_path / "state")
    for extra, why in (
        (["--loop", "--max-age", "1d"], "--loop is not taken on BookKeeper bookies"),
        (["--checkpoint-seconds", "5"], "--checkpoint-seconds is not taken"),
        (["--also", "crc32"], "--state is not taken with --also"),
        (["--metadata-only"], "--state records verified data"),
    ):
        capsys.readouterr()
        status = main(["scan", *paths, "--ledger-metadata", meta, "--state", state, *extra])
        err = capsys.readouterr().err
        assert status == 2 and why in err and len(err.strip().splitlines()) == 1, (extra, err)
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    capsys.readouterr()
    assert main(["scan", *paths, "--ledger-metadata", meta, "--state", str(link)]) == 2
    assert "symbolic link" in capsys.readouterr().err


def _recorded(state: Path) -> int:
    try:
        db = sqlite3.connect(f"file:{state / DB_NAME}?mode=ro", uri=True)
        try:
            return int(db.execute("SELECT COUNT(*) FROM entry_logs").fetchone()[0])
        finally:
            db.close()
    except sqlite3.Error:
        return 0


@pytest.fixture(scope="module")
def rate_bookies(tmp_path_factory: Any) -> Tuple[List[str], str]:
    """Six clean bookies of one 96 MiB entry log each: a scan long enough to be killed in."""
    from merkle.replica.bookkeeper.generate import DUMPS_DIR
    from spark_udfs.rehearsal.bookkeeper import write_rate_bookies

    root = tmp_path_factory.mktemp("bkkill")
    _, out = write_rate_bookies(root, 6, "/srv/ozone/ledgers-{volume}", 1,
                                log_bytes=96 << 20, payload=4096)  # fmt: skip
    return [str(dirs[0]) for _, _, dirs in out], str(root / DUMPS_DIR)


def test_a_kill_9_mid_pass_resumes_with_the_uninterrupted_findings(
    rate_bookies: Any, tmp_path: Path, capsys: Any
) -> None:
    paths, meta = rate_bookies
    _, whole = _scan(capsys, [*paths, "--ledger-metadata", meta])
    total = whole["summary"]["bytes_read"]
    state = tmp_path / "state"
    argv = [*paths, "--ledger-metadata", meta, "--state", str(state)]
    env = {**os.environ, "PYTHONPATH": MERKLE_HOME}
    child = subprocess.Popen(
        [sys.executable, "-m", "merkle", "scan", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    recorded = 0
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and child.poll() is None and recorded < 2:
            recorded = _recorded(state)
            time.sleep(0.005)
        assert child.poll() is None, "the scan ended before it could be killed"
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    recorded = _recorded(state)
    assert 2 <= recorded < len(paths)
    status, resumed = _scan(capsys, argv)
    s = resumed["summary"]
    assert status == 1 and s["resumed_pass"] is True  # the cookies name /srv/ozone: findings
    assert s["logs_not_read"] == recorded and s["logs_read"] == len(paths) - recorded
    # what the rerun read is exactly the logs the killed run had not recorded
    per_log = total // len(paths)
    assert s["bytes_read"] == per_log * (len(paths) - recorded)
    assert _found(resumed) == _found(whole)
