"""Issue 28 point 1: every scan finding has a level. Errors are where Ozone's datanode marks
the replica unhealthy or data is damaged; warnings (a derived `.tree` missing or corrupt, a
file no block_data row names, a container state Ozone never data-scans) are reported in text
and JSON but leave the replica ok and the exit status 0, unless --strict.
The Spark report's side is tests/spark/test_spark_levels.py."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from merkle.cli import build_parser, main
from merkle.replica.levels import ERROR, LEVELS, WARNING, severity_of
from merkle.replica.scan import ScanError, scan_container

from checkout import checkout_text
from replica_helpers import make_cluster

ROOT = Path(__file__).resolve().parent.parent


def run(capsys: Any, *argv: Any) -> Tuple[int, str, str]:
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def _one_replica(tmp_path: Path) -> Path:
    """A clean crcmerkle-layout replica (one container, three replicas generated)."""
    make_cluster(tmp_path / "c")
    return sorted((tmp_path / "c").glob("dn*/*/*"))[0]


def _findings(out: str) -> List[Dict[str, Any]]:
    return [e for r in json.loads(out)["replicas"] for e in r["errors"]]


# ---- the table --------------------------------------------------------------------------


def test_the_table_levels() -> None:
    warnings = {k for k, v in LEVELS.items() if v.severity == WARNING}
    assert warnings == {
        "TREE_MISSING",
        "TREE_CORRUPT",
        "TREE_UNSUPPORTED",
        "UNREFERENCED_DATA_FILE",
        "CONTAINER_NOT_SCANNED",
        "TREE_STALE",
        "TREE_FROM_METADATA",  # the last two: the census
        # BookKeeper bookies: leftovers and ledgers not (or no longer) closed
        "UNINDEXED_ENTRY",
        "ENTRY_PAST_LAST_ENTRY",
        "ENTRY_OF_OPEN_LEDGER",
        "LEDGER_NOT_IN_METADATA",
        # HDFS datanodes: open replicas, what fsck cannot vouch for, what HDFS only warns of
        "BLOCK_UNVERIFIED",
        "REPLICA_OPEN",
        "REPLICA_NOT_IN_FSCK",
        "BLOCK_MISPLACED",
        "META_VERSION",
        "CHECKSUM_NULL",
        "UNEXPECTED_ENTRY",
    }
    assert severity_of("CONTAINER_NOT_SCANNED", "schema") == ERROR
    assert severity_of("CONTAINER_NOT_SCANNED", "a case nobody listed") == WARNING
    # a kind added later (CONTAINER_PATH_MISMATCH, ...) is an error until the table says not
    assert severity_of("CONTAINER_PATH_MISMATCH") == ERROR
    assert ScanError("SOMETHING_NEW").severity == ERROR
    assert ScanError("TREE_MISSING").severity == WARNING
    assert ScanError("TREE_MISSING", severity=ERROR).severity == ERROR


def test_every_kind_the_code_emits_has_a_level() -> None:
    """Every finding kind defined in the scanners is in the table (none falls to the
    default by oversight)."""
    import importlib

    # the modules as imported (the checkout's, or the installed wheel's)
    sources = [
        Path(importlib.import_module(m).__file__)
        for m in (
            "merkle.replica.scan",
            "merkle.replica.results",
            "merkle.replica.ozone.scan",
            "merkle.replica.safeopen",
            "spark_udfs.jobs.scan",
            "merkle.replica.bookkeeper.scan",
            "merkle.replica.hdfs.scan",
        )
    ]
    kinds = set()
    for p in sources:
        kinds |= set(re.findall(r'^([A-Z][A-Z_]+) = "\1"$', p.read_text(), re.M))
    assert "CORRUPT_CHUNK" in kinds and "UNREFERENCED_DATA_FILE" in kinds
    assert "SCAN_FAILED" in kinds
    assert kinds <= set(LEVELS), kinds - set(LEVELS)


def test_the_docs_table_is_the_code_table() -> None:
    text = checkout_text("docs/findings.md")  # the "Findings and their levels" table
    rows = re.findall(r"^\| `([A-Z_]+)`(?: \(([^)]*)\))? \| (error|warning) \|", text, re.M)
    assert rows, "docs/findings.md: no table of findings"
    for kind, case, level in rows:
        key = f"{kind}:schema" if case and "schema" in case else kind
        assert LEVELS[key].severity == level, (kind, case, level)
    assert {k.split(":")[0] for k in LEVELS} <= {kind for kind, _, _ in rows}


def test_every_help_with_exit_statuses_mentions_strict(capsys: Any) -> None:
    parser = build_parser()
    helps = [parser.format_help()]
    sub = next(a for a in parser._actions if a.dest == "command")
    for p in sub.choices.values():
        helps.append(p.format_help())
        for a in p._actions:
            if getattr(a, "choices", None) and isinstance(a.choices, dict):
                helps += [q.format_help() for q in a.choices.values()]
    with_status = [h for h in helps if "exit status" in h]
    assert len(with_status) > 10
    assert all("--strict" in h for h in with_status)


# ---- crcmerkle layout ---------------------------------------------------------------------


def test_a_replica_with_only_warnings_exits_0_and_1_with_strict(
    tmp_path: Path, capsys: Any
) -> None:
    rep = _one_replica(tmp_path)
    tree = next((rep / "metadata").glob("*.tree"))
    tree.unlink()  # derived: a missing .tree is a warning (--no-write keeps it missing)
    st, out, _ = run(capsys, "scan", rep, "--no-write")
    assert st == 0 and "OK (1 WARNING)" in out and "warning: TREE_MISSING" in out
    assert "0 with errors, 1 with warnings only" in out
    st, out, _ = run(capsys, "scan", rep, "--no-write", "--json")
    data = json.loads(out)
    assert st == 0 and data["replicas"][0]["ok"] and data["replicas"][0]["warnings"] == 1
    assert _findings(out) == [
        {
            "error": "TREE_MISSING",
            "block_id": None,
            "offset": None,
            "detail": f"{tree.name} does not exist",
            "severity": "warning",
        }
    ]
    assert data["summary"]["with_errors"] == 0 and data["summary"]["with_warnings_only"] == 1
    st, out, _ = run(capsys, "scan", rep, "--no-write", "--strict", "--json")
    assert st == 1 and not json.loads(out)["replicas"][0]["ok"]
    assert json.loads(out)["summary"]["with_errors"] == 1
    st, out, _ = run(capsys, "scan", rep, "--no-write", "--strict")
    assert st == 1 and "1 ERRORS" in out and "warning: TREE_MISSING" in out
    # a corrupt .tree too; the scan that writes (the default) rebuilds it in the same run
    tree.write_bytes(b"\xff" * 7)
    st, out, _ = run(capsys, "scan", rep)
    assert st == 0 and "warning: TREE_CORRUPT" in out
    assert run(capsys, "scan", rep, "--strict")[0] == 0  # rebuilt: nothing left to report


def test_errors_and_warnings_together(tmp_path: Path, capsys: Any) -> None:
    rep = _one_replica(tmp_path)
    next((rep / "metadata").glob("*.tree")).unlink()
    block = sorted((rep / "chunks").glob("*.block"))[0]
    data = bytearray(block.read_bytes())
    data[100] ^= 1
    block.write_bytes(bytes(data))
    st, out, _ = run(capsys, "scan", rep, "--no-write")
    assert st == 1 and "1 ERRORS, 1 WARNING" in out
    st, out, _ = run(capsys, "scan", rep, "--no-write", "--json")
    levels = {e["error"]: e["severity"] for e in _findings(out)}
    assert levels == {"TREE_MISSING": "warning", "CORRUPT_CHUNK": "error"}
    assert not json.loads(out)["replicas"][0]["ok"]


def test_the_library_result(tmp_path: Path) -> None:
    rep = _one_replica(tmp_path)
    next((rep / "metadata").glob("*.tree")).unlink()
    r = scan_container(rep, write_tree=False)
    assert r.ok and not r.ok_at(strict=True) and [e.kind for e in r.warnings] == ["TREE_MISSING"]
    assert r.to_dict()["ok"] and not r.to_dict(strict=True)["ok"]


def test_reconcile_of_a_warning_only_replica_rebuilds_the_tree_and_pulls_nothing(
    tmp_path: Path, capsys: Any
) -> None:
    make_cluster(tmp_path / "c")
    target, *peers = sorted((tmp_path / "c").glob("dn*/*/*"))
    tree = next((target / "metadata").glob("*.tree"))
    tree.unlink()
    st, out, _ = run(capsys, "reconcile", target, *peers, "--dry-run", "--json")
    assert st == 0 and "pull" not in out
    assert run(capsys, "reconcile", target, *peers)[0] == 0
    assert tree.exists() and run(capsys, "scan", target, "--strict", "--no-write")[0] == 0


# ---- Ozone volumes -------------------------------------------------------------------------


@pytest.fixture()
def ozone_volumes(tmp_path: Path) -> Path:
    pytest.importorskip("rocksdict")
    pytest.importorskip("yaml")
    from test_ozone_layout import make_volume

    good = [(0, b"a" * 5000), (5000, b"b" * 3000)]
    root = tmp_path / "vol"
    make_volume(root, {1: {1: good}, 2: {1: good}, 3: {1: good}}, states={2: "OPEN"}, bpc=1024)
    return root


def _replica_dir(volume: Path, cid: int) -> Path:
    return next(p for p in volume.glob("hdds/*/current/containerDir*/*") if p.name == str(cid))


def test_ozone_warnings_exit_0_and_1_with_strict(ozone_volumes: Path, capsys: Any) -> None:
    # container 2 is OPEN; container 3 has a block file no block_data row names
    (_replica_dir(ozone_volumes, 3) / "chunks" / "77.block").write_bytes(b"uncommitted")
    # (issue 36) the OPEN container's only replica was not read: the replica is ok (a
    # warning), the container UNVERIFIED, a finding (exit 1); the scan of the others exits 0
    st, out, _ = run(capsys, "scan", ozone_volumes, "--json")
    assert st == 1, out
    levels = sorted((e["error"], e["severity"]) for e in _findings(out))
    assert levels == [("CONTAINER_NOT_SCANNED", "warning"), ("UNREFERENCED_DATA_FILE", "warning")]
    data = json.loads(out)
    assert all(r["ok"] for r in data["replicas"])
    assert {r["container_id"]: r["verified"] for r in data["replicas"]} == {
        1: True,
        2: False,
        3: True,
    }
    assert (data["summary"]["unverified_containers"], data["summary"]["unverified"]) == (1, [2])
    st, out, _ = run(capsys, "scan", ozone_volumes)
    assert st == 1 and out.count("OK (1 WARNING)") == 2
    assert "UNVERIFIED: 1 container(s), none of whose replicas' data was read (first: #2)" in out
    others = [_replica_dir(ozone_volumes, c) for c in (1, 3)]
    assert run(capsys, "scan", *others)[0] == 0
    assert run(capsys, "scan", *others, "--strict")[0] == 1
    # a missing .tree is a warning on Ozone volumes too (the datanode rebuilds it)
    next((_replica_dir(ozone_volumes, 1) / "metadata").glob("*.tree")).unlink()
    st, out, _ = run(capsys, "scan", *others, "--json")
    assert st == 0 and ("TREE_MISSING", "warning") in {
        (e["error"], e["severity"]) for e in _findings(out)
    }


def test_ozone_schema_v2_not_scanned_is_an_error(ozone_volumes: Path, capsys: Any) -> None:
    """CONTAINER_NOT_SCANNED of an OPEN container is a warning, but of a schema V2 replica
    (which Ozone does verify, and crcmerkle cannot read) an error."""
    from merkle.replica.ozone.containerfile import parse_container_file, render_container_file

    cfile = next((_replica_dir(ozone_volumes, 1) / "metadata").glob("*.container"))
    fields = dict(parse_container_file(cfile.read_bytes()).fields)
    fields["schemaVersion"] = "2"
    cfile.write_bytes(render_container_file(fields))
    st, out, _ = run(capsys, "scan", ozone_volumes, "--json")
    levels = {
        (r["container_id"], e["error"], e["severity"])
        for r in json.loads(out)["replicas"]
        for e in r["errors"]
    }
    assert levels == {
        (1, "CONTAINER_NOT_SCANNED", "error"),
        (2, "CONTAINER_NOT_SCANNED", "warning"),
    }
    assert st == 1


# ---- the demo's ground truth ----------------------------------------------------------------


def _manifest_with(fault_type: str, error: str) -> Dict[str, Any]:
    import copy

    from test_demo_check import MANIFEST

    m = copy.deepcopy(MANIFEST)
    m["faults"].append(
        {
            "id": 9,
            "type": fault_type,
            "container_id": 4,
            "replicas": ["dn0/v/4"],
            "expected": [{"replica": "dn0/v/4", "error": error, "block_id": None, "offset": None}],
        }
    )
    return m


def _check(manifest: Dict[str, Any], errors: List[Any], mismatched: List[int]) -> Any:
    from test_demo_check import ERRORS, PENDING, PULLS

    from spark_udfs.demo import check_findings

    return check_findings(
        manifest,
        errors=ERRORS + errors,
        pulls=PULLS,
        mismatched=mismatched,
        unrecoverable=[(3, 1, 0)],
        pending=PENDING,
    )


def test_the_demo_table_shows_each_faults_level() -> None:
    pytest.importorskip("pyarrow")
    f = _check(
        _manifest_with("open-container", "CONTAINER_NOT_SCANNED"),
        [("dn0/v/4", "CONTAINER_NOT_SCANNED", None, None)],
        [1],
    )
    assert f.exact, f.table()
    table = f.table()
    assert re.search(r"^fault\s+level\s+injected\s+found\s+missed$", table, re.M)
    assert re.search(r"^bitflip\s+error\s+1\s+1\s+0$", table, re.M)
    assert re.search(r"^open-container\s+warning\s+1\s+1\s+0$", table, re.M)
    assert re.search(r"^tombstone\s+-\s+1\s+1\s+0$", table, re.M)


def test_a_warning_only_fault_must_not_make_a_mismatch() -> None:
    pytest.importorskip("pyarrow")
    m = _manifest_with("open-container", "CONTAINER_NOT_SCANNED")
    f = _check(m, [("dn0/v/4", "CONTAINER_NOT_SCANNED", None, None)], [1, 4])
    assert not f.exact and f.false_mismatches == [4]
    # an error-level fault there still must make one
    m = _manifest_with("container-checksum", "CONTAINER_FILE_CORRUPT")
    f = _check(m, [("dn0/v/4", "CONTAINER_FILE_CORRUPT", None, None)], [1])
    assert not f.exact and f.missed and f.missed[0].level == "error"
    assert _check(m, [("dn0/v/4", "CONTAINER_FILE_CORRUPT", None, None)], [1, 4]).exact
