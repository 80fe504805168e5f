"""Issue 38: bookie hosts that cannot run Spark workers emit their part of the scan
(`crcmerkle scan BOOKIE_DIR... --ledger-metadata PATH --emit URI --host H`, one host at a time,
no Spark), and `crcmerkle spark report URI --ledger-metadata PATH` judges every host's rows
together: exactly the generator's findings, each with its level, as the Spark scan of the same
bookies finds them; with an inventory, a host that emitted nothing is NOT_SCANNED and a bookie
the inventory does not put on its host is WRONG_BOOKIE, its copies not counted."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from merkle.cli import main

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from test_bookkeeper_generate import _generate  # noqa: E402


def _run(capsys: Any, argv: List[str]) -> Tuple[int, str, str]:
    capsys.readouterr()
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def emitted(tmp_path_factory: Any) -> Dict[str, Any]:
    """Four generated bookies (every default fault, mixed storages), each emitted by its own
    host (bk1..bk4) into one directory."""
    tmp = tmp_path_factory.mktemp("bk_emit")
    manifest = _generate(tmp / "bk", "default", "mixed")
    meta = str(tmp / "bk" / manifest["metadata"]["znode_tree"])  # INSTANCEID, cookies
    out = tmp / "emitted"
    statuses = {}
    for i, b in enumerate(sorted(manifest["bookies"]), 1):
        argv = ["scan", str(tmp / "bk" / b), "--ledger-metadata", meta]
        statuses[b] = main([*argv, "--emit", str(out), "--host", f"bk{i}", "--json"])
    return {"tmp": tmp, "manifest": manifest, "meta": meta, "out": out, "statuses": statuses}


@pytest.mark.slow
def test_the_emitted_rows_judged_together_are_the_generators_findings(
    spark: Any, emitted: Dict[str, Any], capsys: Any
) -> None:
    from spark_udfs.demo.bookkeeper import check_bookie_findings

    out, meta, manifest = emitted["out"], emitted["meta"], emitted["manifest"]
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.parquet"))
    assert files == [f"bookkeeper/emitted_by=bk{i}/emit-bk{i}_bookies.parquet" for i in range(1, 5)]
    # the re-formatted bookie holds nothing: its emit proves nothing (exit 2); the others 0 or 1
    for b, rc in emitted["statuses"].items():
        assert rc in (0, 1, 2)
        assert (rc == 2) == (manifest["bookies"][b]["copies"] == 0), (b, rc)
    rc, text, err = _run(capsys, ["spark", "report", str(out), "--ledger-metadata", meta, "--json"])
    doc = json.loads(text)
    assert rc == 1, err
    missing, extra = check_bookie_findings(
        manifest["expected_findings"], doc["findings"], str(emitted["tmp"] / "bk")
    )
    assert (missing, extra) == ([], []), (missing, extra)
    assert doc["findings_total"] == len(manifest["expected_findings"])
    assert doc["summary"]["copies"] == manifest["copies"]
    # a host re-emitting replaces its file, nothing else changes
    b1 = sorted(manifest["bookies"])[0]
    argv = ["scan", str(emitted["tmp"] / "bk" / b1), "--ledger-metadata", meta, "--emit"]
    assert main([*argv, str(out), "--host", "bk1"]) == emitted["statuses"][b1]
    assert len(list(out.rglob("*.parquet"))) == 4


@pytest.mark.slow
def test_an_inventory_names_the_hosts_that_emitted_nothing_or_the_wrong_bookie(
    spark: Any, emitted: Dict[str, Any], capsys: Any, tmp_path: Path
) -> None:
    out, meta, manifest = emitted["out"], emitted["meta"], emitted["manifest"]
    ids = [manifest["bookies"][b]["id"] for b in sorted(manifest["bookies"])]
    inv = [
        {"host": "bk1", "bookie": ids[0], "volumes": ["/data/bk/ledgers-0"]},
        {"host": "bk2", "bookie": "10.9.9.9:3181", "volumes": ["/data/bk/ledgers-0"]},
        {"host": "bk3", "volumes": ["/data/bk/ledgers-0"]},
        {"host": "bk4", "volumes": ["/data/bk/ledgers-0"]},
        {"host": "bk5", "bookie": "bk5:3181", "volumes": ["/data/bk/ledgers-0"]},
    ]
    (tmp_path / "inv.json").write_text(json.dumps(inv))
    argv = ["spark", "report", str(out), "--ledger-metadata", meta, "--json"]
    rc, text, _ = _run(capsys, [*argv, "--datanodes", str(tmp_path / "inv.json")])
    doc = json.loads(text)
    assert rc == 1
    kinds = {(f["error"], f["bookie"]) for f in doc["findings"]}
    assert ("NOT_SCANNED", "bk5:3181") in kinds
    assert ("WRONG_BOOKIE", "10.9.9.9:3181") in kinds
    # bookie 2 was not counted: none of its write-set copies is MISSING_ENTRY (not read)
    assert not [
        f for f in doc["findings"] if f["error"] == "MISSING_ENTRY" and f["bookie"] == ids[1]
    ]
    assert ids[1] not in doc["bookies"]


def test_emitted_rows_need_their_metadata_and_a_scan_refuses_it(
    emitted: Dict[str, Any], capsys: Any, monkeypatch: Any
) -> None:
    """One line, exit 2, before any JVM: emitted rows without metadata; a scan's output
    with metadata (read when it was scanned); metadata with an Ozone scan's output."""
    from spark_udfs.cli import common

    monkeypatch.setattr(common, "_session", lambda *a, **k: pytest.fail("session started"))
    rc, _, err = _run(capsys, ["spark", "report", str(emitted["out"])])
    assert rc == 2 and err.count("\n") == 1 and "give their ledger metadata" in err
    other = emitted["tmp"] / "not-a-scan"
    other.mkdir()
    rc, _, err = _run(capsys, ["spark", "report", str(other), "--ledger-metadata", emitted["meta"]])
    assert rc == 2 and err.count("\n") == 1 and "emitted rows" in err


@pytest.mark.parametrize("host", ["", "bk1\nbk2", "bk\x7f"])
def test_an_emit_host_that_is_no_host_name_is_one_line(
    emitted: Dict[str, Any], capsys: Any, tmp_path: Path, host: str
) -> None:
    """--host is written into file names and host columns: an empty one or one with a
    control character is refused in one line, exit 2, and nothing is written."""
    b1 = sorted(emitted["manifest"]["bookies"])[0]
    argv = ["scan", str(emitted["tmp"] / "bk" / b1), "--ledger-metadata", emitted["meta"]]
    rc, _, err = _run(capsys, [*argv, "--emit", str(tmp_path / "out"), "--host", host])
    assert rc == 2 and err.count("\n") == 1 and "not a host name" in err
    assert not (tmp_path / "out").exists()


def test_an_emit_that_verified_no_copy_proves_nothing(tmp_path: Path, capsys: Any) -> None:
    """A re-formatted bookie holds no copy: its emit writes its rows (the report judges
    BOOKIE_HOLDS_NOTHING) but claims nothing, one line, exit 2, never a clean 0."""
    manifest = _generate(tmp_path / "bk", "reformatted-bookie", "db")
    empty = [b for b, v in manifest["bookies"].items() if v["copies"] == 0]
    assert empty, manifest["bookies"]
    meta = str(tmp_path / "bk" / manifest["metadata"]["znode_tree"])
    argv = ["scan", str(tmp_path / "bk" / empty[0]), "--ledger-metadata", meta]
    rc, _, err = _run(capsys, [*argv, "--emit", str(tmp_path / "out"), "--host", "bk9"])
    assert rc == 2 and err.count("\n") == 1 and "nothing is proved" in err
    assert len(list((tmp_path / "out").rglob("*.parquet"))) == 1


@pytest.mark.slow
def test_a_copy_row_counts_only_for_the_bookie_its_host_listed(
    spark: Any, emitted: Dict[str, Any], capsys: Any, tmp_path: Path
) -> None:
    """An emitted file is anyone's to plant: rows in one host's file that claim a copy of
    another host's bookie (here the entry the generator left missing there, forged from a
    good copy on another bookie) are not counted and are said: the MISSING_ENTRY stays, and
    the forging pair is WRONG_BOOKIE."""
    import shutil

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    manifest = emitted["manifest"]
    gone = [f for f in manifest["expected_findings"] if f["kind"] == "MISSING_ENTRY"]
    assert gone, manifest["expected_findings"]
    target = gone[0]
    out = tmp_path / "emitted"
    shutil.copytree(emitted["out"], out)
    files = sorted(out.rglob("*.parquet"))
    tables = {p: pq.read_table(p) for p in files}

    def rows(t: pa.Table) -> pa.Table:
        copy = pc.equal(t.column("kind"), "COPY")
        same = pc.and_(
            pc.equal(t.column("ledger"), target["ledger"]),
            pc.equal(t.column("entry"), target["entry"]),
        )
        return t.filter(pc.and_(copy, same))

    donor = next((p, rows(t)) for p, t in tables.items() if rows(t).num_rows)
    forger = next(
        p
        for p, t in tables.items()
        if target["bookie"]
        not in t.filter(pc.equal(t.column("kind"), "LISTING")).column("bookie").to_pylist()
    )
    listing = tables[forger].filter(pc.equal(tables[forger].column("kind"), "LISTING"))
    host = listing.column("host")[0].as_py()
    assert host
    forged = donor[1].slice(0, 1)
    forged = forged.set_column(
        forged.schema.get_field_index("bookie"), "bookie", pa.array([target["bookie"]])
    ).set_column(forged.schema.get_field_index("host"), "host", pa.array([host]))
    forged = forged.cast(tables[forger].schema)
    pq.write_table(pa.concat_tables([tables[forger], forged]), forger)
    argv = ["spark", "report", str(out), "--ledger-metadata", emitted["meta"], "--json"]
    rc, text, _ = _run(capsys, argv)
    doc = json.loads(text)
    assert rc == 1
    kinds = [(f["error"], f["bookie"], f["ledger"], f["entry"]) for f in doc["findings"]]
    key = (target["bookie"], target["ledger"], target["entry"])
    assert ("MISSING_ENTRY", *key) in kinds
    stray = [f for f in doc["findings"] if f["error"] == "WRONG_BOOKIE"]
    assert [(f["bookie"], host in f["detail"]) for f in stray] == [(target["bookie"], True)]
    assert doc["findings_total"] == len(manifest["expected_findings"]) + 1
