"""`--state` on the data-local bookie scan (spark_udfs.jobs.bookkeeper.hosts, issue 34 on
BookKeeper's layout), on local[2]: each host's entry logs' records in a database of its own
under the state directory on that host; a rerun within --max-age reads no entry log and its
tables are the first run's; `crcmerkle scan --emit` with --state writes the same rows from
the records; --state without --datanodes is one line."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

pytest.importorskip("rocksdict")

from merkle.cli import main  # noqa: E402
from merkle.replica.inventory import load_inventory  # noqa: E402
from merkle.replica.scanstate import DB_NAME  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from test_bookkeeper_generate import _generate  # noqa: E402

#: what a read changes and a record does not hold
VARYING = {"bytes_read", "seconds", "cpu_seconds", "read_at"}


@pytest.fixture(scope="module")
def bookies(tmp_path_factory: Any) -> Dict[str, Any]:
    out = tmp_path_factory.mktemp("bkhoststate") / "bk"
    manifest = _generate(out, "default", "mixed")
    from merkle.cli.bookkeeper import metadata_source

    source = metadata_source(str(out / manifest["metadata"]["znode_tree"]), None)
    dirs = sorted(str(d) for b in manifest["bookies"] for d in (out / b).iterdir() if d.is_dir())
    return {"out": out, "manifest": manifest, "source": source, "dirs": dirs}


def _rows(df: Any) -> List[str]:
    rows = [{k: v for k, v in r.asDict().items() if k not in VARYING} for r in df.collect()]
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)


def test_a_rerun_within_max_age_reads_no_entry_log(
    spark: Any, bookies: Dict[str, Any], tmp_path: Path
) -> None:
    from spark_udfs.jobs.bookkeeper.hosts import scan_bookie_hosts

    src = bookies["source"]
    inv_file = tmp_path / "inv.json"
    inv_file.write_text(json.dumps([{"host": "localhost", "volumes": bookies["dirs"]}]))
    inv = load_inventory(str(inv_file))

    def scan(state: Any) -> Any:
        return scan_bookie_hosts(
            spark, inv, src.ledgers, instance_id=src.instance_id,
            registered_cookies=src.cookies, executor_wait=0, state=state,
        )  # fmt: skip

    plain = scan(None)
    state = {"dir": str(tmp_path / "state"), "max_age": 7 * 86400.0}
    first = scan(state)
    second = scan(state)
    for name in ("findings", "copies", "ledgers", "entries"):
        want = _rows(getattr(plain, name))
        assert _rows(getattr(first, name)) == want, name
        assert _rows(getattr(second, name)) == want, name
    read = [int(r["bytes_read"]) for r in first.volumes.collect()]
    assert sum(read) > 0
    assert sum(int(r["bytes_read"]) for r in second.volumes.collect()) == 0
    # one database for the host's ledger directories, private
    (db,) = Path(state["dir"]).glob(f"volume-*/{DB_NAME}")
    assert (db.parent.stat().st_mode & 0o077) == 0
    # the findings a record gave say when their log was read
    carried = [r for r in second.findings.collect() if r["read_at"] is not None]
    assert carried and all(r["file"].endswith(".log") for r in carried)
    assert all(r["read_at"] is None for r in first.findings.collect())


def test_emit_with_state_writes_the_same_rows_from_the_records(
    bookies: Dict[str, Any], tmp_path: Path, capsys: Any
) -> None:
    import pyarrow.parquet as pq

    out, manifest = bookies["out"], bookies["manifest"]
    meta = str(out / manifest["metadata"]["znode_tree"])
    paths = [str(out / b) for b in sorted(manifest["bookies"])]
    docs = []
    for n in range(2):
        capsys.readouterr()
        rc = main(["scan", *paths, "--ledger-metadata", meta, "--emit", str(tmp_path / f"e{n}"),
                   "--host", "bk", "--state", str(tmp_path / "state"), "--max-age", "1d",
                   "--json"])  # fmt: skip
        docs.append(json.loads(capsys.readouterr().out))
        assert rc == 1
    assert docs[0]["summary"]["bytes_read"] > 0 and docs[1]["summary"]["bytes_read"] == 0
    tables = [
        pq.read_table(next((tmp_path / f"e{n}").rglob("*.parquet"))).to_pylist() for n in range(2)
    ]
    rows = [
        sorted(json.dumps({k: v for k, v in r.items() if k not in VARYING}, sort_keys=True,
                          default=str) for r in t)
        for t in tables
    ]  # fmt: skip
    assert rows[0] == rows[1]


def test_state_without_an_inventory_is_one_line(
    bookies: Dict[str, Any], tmp_path: Path, capsys: Any, monkeypatch: Any
) -> None:
    from spark_udfs.cli import common

    monkeypatch.setattr(common, "_session", lambda *a, **k: pytest.fail("session started"))
    out, manifest = bookies["out"], bookies["manifest"]
    meta = str(out / manifest["metadata"]["znode_tree"])
    argv = ["spark", "scan", str(out / sorted(manifest["bookies"])[0]), "--ledger-metadata", meta]
    for extra, why in (
        (["--state", str(tmp_path / "s")], "--state goes with --datanodes"),
        (["--max-age", "1d"], "go with --state DIR"),
    ):
        capsys.readouterr()
        assert main([*argv, "-o", str(tmp_path / "o"), *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and why in err, err
