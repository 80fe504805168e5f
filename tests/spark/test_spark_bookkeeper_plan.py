"""Issue 38: `crcmerkle spark plan BOOKIE_SCAN --decommission BOOKIE` (spark_udfs.jobs.
bookkeeper.plan) on the golden cluster BookKeeper wrote: which entries hold each bookie back,
checked against an oracle built from BookKeeper's own record of the cluster (ledgers.json:
every entry's round-robin write set and stored copies, written by BookKeeper's code; fault.json:
the one flipped copy), not from crcmerkle's write-set code. One Spark scan per module.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Dict, List, Set, Tuple

import pytest

from merkle.cli import main

GOLDEN = Path(__file__).resolve().parent.parent / "data" / "bookkeeper-golden"
BOOKIE_1, BOOKIE_2, BOOKIE_4 = "127.0.0.1:31811", "127.0.0.1:31812", "127.0.0.1:31814"


@pytest.fixture(scope="module")
def scan(spark: Any, tmp_path_factory: Any) -> Path:
    out = tmp_path_factory.mktemp("bk_plan") / "scan"
    paths = [str(GOLDEN / f"bookie-{i}") for i in range(1, 5)]
    status = main(
        ["spark", "scan", *paths, "--ledger-metadata", str(GOLDEN / "zookeeper"), "-o", str(out)]
    )
    assert status == 1  # the golden cluster's one flipped bit
    return out


def _oracle(leaving: Set[str]) -> Dict[str, Dict[Tuple[int, str], List[int]]]:
    """Per leaving bookie, per (ledger, reason), the entries that hold it back, from
    BookKeeper's record: good copies are the write set's stored copies but the flipped one."""
    fault = json.loads((GOLDEN / "fault.json").read_text())
    ledgers = json.loads((GOLDEN / "ledgers.json").read_text())["ledgers"]
    out: Dict[str, Dict[Tuple[int, str], List[int]]] = {b: {} for b in leaving}
    for led in ledgers:
        lid = led["ledgerId"]
        for e in led["entries"]:
            eid = e["entryId"]
            if led["state"] == "CLOSED" and eid > led["lastEntryId"]:
                continue
            ws = set(e["expectedBookies_RoundRobin"])
            good = {
                c["bookieId"]
                for c in e["copies"]
                if c["bookieId"] in ws
                and not (
                    c["bookieId"] == fault["bookieId"]
                    and lid == fault["ledgerId"]
                    and eid == fault["entryId"]
                )
            }
            stay = good - leaving
            if not good:
                reason = "NO_GOOD_COPY"
            elif not stay:
                reason = "LAST_GOOD_COPY"
            elif len(stay) < led["ackQuorumSize"]:
                reason = "UNDER_REPLICATED"
            else:
                continue
            for b in ws & leaving:
                out[b].setdefault((lid, reason), []).append(eid)
    return out


def _plan(capsys: Any, scan: Path, *args: str) -> Tuple[int, Dict[str, Any]]:
    capsys.readouterr()
    status = main(["spark", "plan", str(scan), *args, "--json"])
    return status, json.loads(capsys.readouterr().out)


def _held(plan: Dict[str, Any], bookie: str) -> Dict[Tuple[int, str], List[int]]:
    return {
        (led["ledger"], reason): [r["entries"], r["first_entry"], r["last_entry"]]
        for led in plan["bookies"][bookie]["ledgers"]
        for reason, r in led["reasons"].items()
    }


def _expected(oracle: Dict[Tuple[int, str], List[int]]) -> Dict[Tuple[int, str], List[int]]:
    return {k: [len(v), min(v), max(v)] for k, v in oracle.items()}


@pytest.mark.parametrize(
    "leaving", [[BOOKIE_1], [BOOKIE_4], [BOOKIE_1, BOOKIE_2]], ids=["bookie-1", "bookie-4", "two"]
)
def test_held_back_entries_are_what_bookkeepers_own_record_says(
    scan: Path, capsys: Any, leaving: List[str]
) -> None:
    status, plan = _plan(capsys, scan, "--decommission", ",".join(leaving), "--first", "100")
    oracle = _oracle(set(leaving))
    for b in leaving:
        assert _held(plan, b) == _expected(oracle[b]), b
        assert plan["bookies"][b]["may_go"] is (not oracle[b])
    assert status == (1 if any(oracle.values()) else 0)
    assert plan["summary"]["held_back"] == sum(bool(v) for v in oracle.values())
    assert not plan["counts_are_lower_bounds"]


def test_the_last_good_copy_of_the_flipped_entry_holds_its_sibling_back(
    scan: Path, capsys: Any
) -> None:
    """Entry 7 of ledger 0 (write set bookie-4, bookie-1): bookie-4's copy is the flipped one,
    so bookie-1 holds its last good copy; the commands recover ledger 0 while bookie-1 runs,
    then decommission it (flags as BookKeeper's shell takes them)."""
    status, plan = _plan(capsys, scan, "--decommission", BOOKIE_1)
    assert status == 1
    led0 = next(led for led in plan["bookies"][BOOKIE_1]["ledgers"] if led["ledger"] == 0)
    assert led0["reasons"]["LAST_GOOD_COPY"] == {"entries": 1, "first_entry": 7, "last_entry": 7}
    cmds = [c for c in plan["bookies"][BOOKIE_1]["commands"] if not c.startswith("#")]
    assert cmds[0] == f"bookkeeper shell recover -f -l 0 {BOOKIE_1}"
    assert cmds[-1] == f"bookkeeper shell decommissionbookie -bookieid {BOOKIE_1}"


def test_text_output_says_held_back_and_the_commands(scan: Path, capsys: Any) -> None:
    capsys.readouterr()
    assert main(["spark", "plan", str(scan), "--decommission", BOOKIE_1]) == 1
    out = capsys.readouterr().out
    assert f"{BOOKIE_1}: HELD BACK by " in out
    assert "ledger 0 (CLOSED, ackQuorum 2): LAST_GOOD_COPY: 1 entries (7)" in out
    assert f"  bookkeeper shell recover -f -l 0 {BOOKIE_1}\n" in out
    assert "1 bookie(s) to decommission: 0 may go down now, 1 held back" in out


@pytest.mark.parametrize(
    "args, says",
    [
        (["--decommission", "10.0.0.9:3181"], "not a bookie of this scan"),
        (["--maintenance", BOOKIE_1], "--maintenance is not for BookKeeper bookies"),
        (["--decommission", BOOKIE_1, "--replication", "2"], "--replication is not for"),
        ([], "needs --decommission BOOKIE"),
    ],
    ids=["unknown-bookie", "maintenance", "replication", "nothing"],
)
def test_bad_requests_are_one_line_exit_2(
    scan: Path, capsys: Any, args: List[str], says: str
) -> None:
    capsys.readouterr()
    assert main(["spark", "plan", str(scan), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and "\n" not in err


def test_a_scan_without_its_entries_table_is_one_line(
    scan: Path, capsys: Any, tmp_path: Path
) -> None:
    old = tmp_path / "old"
    shutil.copytree(scan, old)
    shutil.rmtree(old / "entries")
    capsys.readouterr()
    assert main(["spark", "plan", str(old), "--decommission", BOOKIE_1]) == 2
    err = capsys.readouterr().err.strip()
    assert "scan the bookies again" in err and "\n" not in err


@pytest.mark.slow  # a generation, a scan and a plan end to end: CI's campaigns step
def test_the_bookkeeper_demo_ends_ok(spark: Any, capsys: Any, tmp_path: Path) -> None:
    """`crcmerkle spark demo --layout bookkeeper`: exactly the manifest's findings, and the
    plan holds back the bookie with the flipped entry's last good copy."""
    capsys.readouterr()
    assert main(["spark", "demo", "--layout", "bookkeeper", "--dir", str(tmp_path / "d")]) == 0
    out = capsys.readouterr().out
    assert "OK: the jobs found exactly the " in out
    assert "the decommission plan held 127.0.0." in out and "LAST_GOOD_COPY" in out
    assert (tmp_path / "d" / "scan" / "entries").is_dir()
    assert main(["spark", "demo", "--layout", "bookkeeper", "--containers", "3"]) == 2
