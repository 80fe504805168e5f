"""Issue 38: `crcmerkle spark scan|report|run` on BookKeeper bookies (spark_udfs.jobs.bookkeeper)
finds what `crcmerkle scan` finds, field for field: on generated bookies with every default
fault (DbLedgerStorage, and the three storages mixed), exactly the manifest's findings, exit 1;
on a clean generation nothing, exit 0; on the golden cluster BookKeeper wrote, the CLI's
findings. Each Spark command runs once per module (a module-scoped fixture): each costs ~10 s.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from merkle.cli import main

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from test_bookkeeper_generate import _assert_exactly_the_manifest, _generate  # noqa: E402

GOLDEN = Path(__file__).resolve().parent.parent / "data" / "bookkeeper-golden"
_FIELDS = ("error", "severity", "bookie", "ledger", "entry", "file", "offset", "detail")


def _sorted(findings: List[Dict[str, Any]]) -> List[Tuple[str, ...]]:
    return sorted(tuple(str(f[k]) for k in _FIELDS) for f in findings)


def _ledgers(data: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The ledgers of a JSON report without the Spark report's list lengths (`*_total`)."""
    return [{k: v for k, v in led.items() if not k.endswith("_total")} for led in data["ledgers"]]


def _json_of(capsys: Any, argv: List[str]) -> Tuple[int, Dict[str, Any]]:
    capsys.readouterr()
    status = main(argv)
    return status, json.loads(capsys.readouterr().out)


def _both(capsys: Any, out: Path, paths: List[str], metadata: str) -> Dict[str, Any]:
    """The local CLI scan's JSON and `spark run --json`'s of the same bookies."""
    local = _json_of(capsys, ["scan", *paths, "--ledger-metadata", metadata, "--json"])
    spark = _json_of(
        capsys,
        ["spark", "run", *paths, "--ledger-metadata", metadata, "-o", str(out), "--json"],
    )
    return {"local": local, "spark": spark, "out": out}


def _generated(tmp: Path, capsys: Any, storage: str, faults: str) -> Dict[str, Any]:
    bk = tmp / "bk"
    manifest = _generate(bk, faults, storage)
    paths = [str(bk / b) for b in manifest["bookies"]]
    both = _both(capsys, tmp / "out", paths, str(bk / manifest["metadata"]["znode_tree"]))
    return dict(both, manifest=manifest, bk=bk)


@pytest.fixture(scope="module")
def db(spark: Any, tmp_path_factory: Any) -> Dict[str, Any]:
    capsys = _Capture()
    with capsys:
        return _generated(tmp_path_factory.mktemp("bk_db"), capsys, "db", "default")


@pytest.fixture(scope="module")
def mixed(spark: Any, tmp_path_factory: Any) -> Dict[str, Any]:
    capsys = _Capture()
    with capsys:
        return _generated(tmp_path_factory.mktemp("bk_mixed"), capsys, "mixed", "default")


@pytest.fixture(scope="module")
def golden(spark: Any, tmp_path_factory: Any) -> Dict[str, Any]:
    capsys = _Capture()
    paths = [str(GOLDEN / f"bookie-{i}") for i in range(1, 5)]
    with capsys:
        return _both(
            capsys, tmp_path_factory.mktemp("bk_golden") / "out", paths, str(GOLDEN / "zookeeper")
        )


class _Capture:
    """capsys for module-scoped fixtures (pytest's is function-scoped): stdout redirected."""

    def __enter__(self) -> _Capture:
        import io

        self._old, self._buf = sys.stdout, io.StringIO()
        sys.stdout = self._buf
        return self

    def __exit__(self, *exc: Any) -> None:
        sys.stdout = self._old

    def readouterr(self) -> Any:
        from types import SimpleNamespace

        text = self._buf.getvalue()
        self._buf.seek(0)
        self._buf.truncate()
        return SimpleNamespace(out=text, err="")


@pytest.mark.slow  # two Spark runs: CI's campaigns step, not the fast tier
@pytest.mark.parametrize("case", ["db", "mixed"])
def test_every_default_fault_is_found_as_the_cli_finds_it(case: str, request: Any) -> None:
    """Exactly the manifest's findings, and the local scan's, field for field (bookie, ledger,
    entry, file, offset, level, detail), exit 1; the ledgers' summaries and the counts too."""
    r = request.getfixturevalue(case)
    (status, data), (local_status, local) = r["spark"], r["local"]
    assert status == local_status == 1
    _assert_exactly_the_manifest(r["bk"], r["manifest"], data)
    assert _sorted(data["findings"]) == _sorted(local["findings"])
    assert data["findings_total"] == len(local["findings"])
    assert _ledgers(data) == local["ledgers"]
    assert all(
        led["below_ack_quorum_total"] == len(led["below_ack_quorum"]) for led in data["ledgers"]
    )
    for key in ("bookies", "ledger_dirs", "copies", "good_copies", "errors", "warnings"):
        assert data["summary"][key] == local["summary"][key], key
    assert data["summary"]["bytes_read"] == local["summary"]["bytes_read"]
    assert data["bookies"] == local["bookies"]


@pytest.mark.slow
def test_the_tables_hold_every_copy_and_directory(spark: Any, mixed: Dict[str, Any]) -> None:
    """copies: one row per stored copy the local scan counts; volumes: one row per ledger
    directory, each SCANNED, their copies adding up; `spark report OUT` reads them back."""
    out, local = mixed["out"], mixed["local"][1]
    copies = spark.read.parquet(str(out / "copies"))
    assert copies.count() == local["summary"]["copies"]
    volumes = [r.asDict() for r in spark.read.parquet(str(out / "volumes")).collect()]
    dirs = sorted(d for ds in local["bookies"].values() for d in ds)
    assert sorted(v["directory"] for v in volumes) == dirs
    assert {v["status"] for v in volumes} == {"SCANNED"}
    assert sum(v["copies"] for v in volumes) == local["summary"]["copies"]
    assert {v["storage"] for v in volumes} == {"DbLedgerStorage", "InterleavedLedgerStorage"}


@pytest.mark.slow
def test_a_clean_generation_scans_clean(spark: Any, tmp_path: Path, capsys: Any) -> None:
    """spark scan, then spark report of its output: no finding, exit 0 both."""
    bk = tmp_path / "bk"
    manifest = _generate(bk, "none", "sorted")
    paths = [str(bk / b) for b in manifest["bookies"]]
    meta = str(bk / manifest["metadata"]["dumps"])
    out = tmp_path / "out"
    capsys.readouterr()
    assert main(["spark", "scan", *paths, "--ledger-metadata", meta, "-o", str(out)]) == 0
    assert "0 errors, 0 warnings" in capsys.readouterr().out
    status, data = _json_of(capsys, ["spark", "report", str(out), "--json"])
    assert status == 0 and data["findings"] == [] and data["findings_total"] == 0
    assert data["summary"]["good_copies"] == data["summary"]["copies"] > 0


@pytest.mark.slow
def test_the_golden_cluster_gives_the_clis_findings(golden: Dict[str, Any]) -> None:
    (status, data), (local_status, local) = golden["spark"], golden["local"]
    assert status == local_status == 1
    assert _sorted(data["findings"]) == _sorted(local["findings"])
    assert [f["error"] for f in data["findings"] if f["severity"] == "error"] == ["CORRUPT_ENTRY"]
    assert _ledgers(data) == local["ledgers"]


@pytest.mark.slow
def test_the_metadata_from_a_live_zookeeper(
    spark: Any, golden: Dict[str, Any], tmp_path: Path, capsys: Any
) -> None:
    """--zookeeper HOST:PORT/root (a real ZooKeeper holding the golden znodes): the findings
    of the run from the znode files, exit 1."""
    from zookeeper_server import ZooKeeperServer, load_znode_tree, require_zookeeper

    require_zookeeper()
    paths = [str(GOLDEN / f"bookie-{i}") for i in range(1, 5)]
    with ZooKeeperServer() as server:
        load_znode_tree(server.client())
        status, data = _json_of(
            capsys,
            ["spark", "run", *paths, "--zookeeper", server.hosts + "/ledgers"]
            + ["-o", str(tmp_path / "out"), "--json"],
        )
    assert status == 1
    assert _sorted(data["findings"]) == _sorted(golden["spark"][1]["findings"])
    assert data["ledgers"] == golden["spark"][1]["ledgers"]


def test_a_bad_ledger_metadata_path_is_one_line(
    tmp_path: Path, capsys: Any, monkeypatch: Any
) -> None:
    """Exit 2, one line, and the JVM never started (the metadata is read first)."""
    from spark_udfs.cli import common

    def no_session(*a: Any, **k: Any) -> Any:
        raise AssertionError("the session was started")

    monkeypatch.setattr(common, "_session", no_session)
    bookie = str(GOLDEN / "bookie-1")
    missing = str(tmp_path / "nowhere")
    for verb in ("scan", "run"):
        argv = ["spark", verb, bookie, "--ledger-metadata", missing, "-o", str(tmp_path / "o")]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("crcmerkle: error: --ledger-metadata")
        assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "planted",
    [b"{}", b"not json", b'{"format": "crcmerkle-bookkeeper-scan/1", "summary": {}}', None],
)
def test_a_report_of_an_edited_summary_is_one_line(
    tmp_path: Path, capsys: Any, monkeypatch: Any, planted: Any
) -> None:
    """OUT/bookkeeper.json edited, or a link planted in its place: one line, exit 2, no JVM."""
    from spark_udfs.cli import common

    monkeypatch.setattr(common, "_session", lambda *a, **k: pytest.fail("session started"))
    out = tmp_path / "out"
    out.mkdir()
    if planted is None:  # a summary that would be read, but for the link
        valid = {
            "format": "crcmerkle-bookkeeper-scan/1",
            "paths": [],
            "bookies": {},
            "failed": [],
            "metadata_problems": [],
            "summary": dict.fromkeys(
                ("bookies", "ledger_dirs", "ledgers", "copies", "good_copies")
                + ("verified_copies", "findings", "warnings"),
                0,
            ),
        }
        (tmp_path / "elsewhere.json").write_text(json.dumps(valid))
        (out / "bookkeeper.json").symlink_to(tmp_path / "elsewhere.json")
    else:
        (out / "bookkeeper.json").write_bytes(planted)
    assert main(["spark", "report", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bookkeeper.json" in err


@pytest.mark.parametrize(
    "extra", [["--trees-only"], ["--keep-cache"], ["--min-read-fraction", "0.5"]]
)
def test_a_replica_option_with_bookies_is_refused(
    tmp_path: Path, capsys: Any, monkeypatch: Any, extra: List[str]
) -> None:
    """An Ozone replica option is never silently ignored on bookies: one line, exit 2."""
    from spark_udfs.cli import common

    monkeypatch.setattr(common, "_session", lambda *a, **k: pytest.fail("session started"))
    zk = str(GOLDEN / "zookeeper")
    argv = ["spark", "run", str(GOLDEN / "bookie-1"), "--ledger-metadata", zk, *extra]
    assert main([*argv, "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not for BookKeeper bookies" in err


def test_the_report_takes_the_first_of_each_list(spark: Any) -> None:
    """The ledgers reaching the driver are the first --first, each entry list cut (at least
    to the 21 the text line needs), with its length beside it."""
    from spark_udfs.cli.bookkeeper import _first_ledgers
    from spark_udfs.jobs.bookkeeper import LEDGER_SCHEMA

    rows = [
        (lid, "CLOSED", "CRC32C", 99, 99, 3, 2, 2, {"1": 100}, list(range(100)), [])
        + (None, None, None)  # a data scan's row: no census columns
        for lid in range(5)
    ]
    got = _first_ledgers(spark.createDataFrame(rows, LEDGER_SCHEMA), 2)
    assert [g["ledger"] for g in got] == [0, 1]
    assert all(g["below_ack_quorum"] == list(range(21)) for g in got)
    assert all(
        g["below_ack_quorum_total"] == 100 and g["without_good_copy_total"] == 0 for g in got
    )
    assert not any(k.startswith(("census", "indexed", "without_indexed")) for k in got[0])
    census = [
        (0, "CLOSED", "CRC32C", 99, 99, 3, 2, 2, None, list(range(30)), None)
        + (True, {"2": 70, "1": 30}, list(range(25)))
    ]
    (row,) = _first_ledgers(spark.createDataFrame(census, LEDGER_SCHEMA), 2)
    assert row["census"] is True and row["indexed_copies"] == {"2": 70, "1": 30}
    assert row["without_indexed_copy"] == list(range(21))
    assert row["without_indexed_copy_total"] == 25 and row["below_ack_quorum_total"] == 30
    assert "good_copies" not in row and "without_good_copy" not in row


def test_the_spark_census_of_bookies_is_the_clis(spark: Any, tmp_path: Path, capsys: Any) -> None:
    """`spark run BOOKIES --metadata-only`: the CLI census's findings and ledgers, field for
    field, zero bytes read, no copy good; the report says it is a census; a plan of it is
    refused in one line (a plan counts verified copies only), before any Spark job."""
    bk = tmp_path / "bk"
    manifest = _generate(bk, "default", "mixed")
    paths = [str(bk / b) for b in manifest["bookies"]]
    meta = str(bk / manifest["metadata"]["znode_tree"])
    argv = [*paths, "--ledger-metadata", meta, "--metadata-only"]
    local_status, local = _json_of(capsys, ["scan", *argv, "--json"])
    out = tmp_path / "census"
    status, data = _json_of(capsys, ["spark", "run", *argv, "-o", str(out), "--json"])
    assert status == local_status == 1
    assert _sorted(data["findings"]) == _sorted(local["findings"])
    assert _ledgers(data) == local["ledgers"]
    assert all(led["census"] is True for led in data["ledgers"])
    s, ls = data["summary"], local["summary"]
    assert s["census"] is True and s["bytes_read"] == ls["bytes_read"] == 0
    assert s["good_copies"] == 0 and s["indexed_copies"] == ls["indexed_copies"] > 0
    assert not {f["error"] for f in data["findings"]} & {"CORRUPT_ENTRY", "COPIES_DIFFER"}
    capsys.readouterr()
    assert main(["spark", "report", str(out)]) == 1
    text = capsys.readouterr().out
    assert "placed by their indexes; census: no entry read, none verified" in text
    assert "(census: none verified)" in text
    bookie = next(iter(data["bookies"]))
    capsys.readouterr()
    assert main(["spark", "plan", str(out), "--decommission", bookie]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a census" in err
    capsys.readouterr()
    argv = ["spark", "scan", *argv, "--also", "crc32", "-o", str(tmp_path / "o")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--also computes its CRCs from the data read" in err


def test_a_host_task_takes_the_census(tmp_path: Path) -> None:
    """The data-local task's rows (host_batches, run here without Spark) of a census: every
    copy the local census places, indexed, none verified, zero bytes read."""
    from merkle.cli.bookkeeper import metadata_source
    from merkle.replica.bookkeeper.scan import scan_bookies
    from spark_udfs.jobs.bookkeeper.hosts import host_batches

    bk = tmp_path / "bk"
    manifest = _generate(bk, "none", "mixed")
    paths = [str(bk / b) for b in manifest["bookies"]]
    source = metadata_source(str(bk / manifest["metadata"]["znode_tree"]), None)
    batches = [
        b.to_pydict()
        for b in host_batches("h1", paths, None, source.ledgers, None, None, metadata_only=True)
    ]
    copies = [b for b in batches if b["kind"][0] == "COPY"]
    indexed = [i for b in copies for i in b["indexed"]]
    local = scan_bookies(paths, source.ledgers, metadata_only=True)
    assert len(indexed) == len(local.copies) > 0 and all(indexed)
    assert not any(v for b in copies for v in b["verified"])
    vols = [b for b in batches if b["kind"][0] == "VOLUME"]
    assert sum(n for b in vols for n in b["bytes_read"]) == 0


def test_a_storage_task_yields_its_copies_in_bounded_batches(tmp_path: Path) -> None:
    """Stage 1's function (run here without Spark): every copy the local scan finds, as rows
    in batches of at most the given size, and one VOLUME row per directory."""
    from types import SimpleNamespace

    import pyarrow as pa

    from merkle.cli.bookkeeper import metadata_source
    from merkle.replica.bookkeeper.scan import list_bookies, scan_bookies
    from spark_udfs.jobs.bookkeeper import _storage_fn

    bk = tmp_path / "bk"
    manifest = _generate(bk, "none", "db")
    paths = [str(bk / b) for b in manifest["bookies"]]
    source = metadata_source(str(bk / manifest["metadata"]["dumps"]), None)
    storages = list_bookies(paths).storages()
    run = _storage_fn(SimpleNamespace(value=storages), SimpleNamespace(value=source.ledgers), 7)
    ids = pa.RecordBatch.from_pydict({"id": list(range(len(storages)))})
    batches = [b.to_pydict() for b in run(iter([ids]))]
    copies = [b for b in batches if b["kind"][0] == "COPY"]
    assert all(len(b["kind"]) <= 7 and set(b["kind"]) == {"COPY"} for b in copies)
    local = scan_bookies(paths, source.ledgers)
    assert sum(len(b["kind"]) for b in copies) == len(local.copies) > 7
    volumes = [d for b in batches if b["kind"][0] == "VOLUME" for d in b["directory"]]
    assert sorted(volumes) == sorted(d for ds in local.bookies.values() for d in ds)


def test_each_ledger_is_judged_once_whatever_the_batches() -> None:
    """Stage 2's grouping (run here without Spark): a partition sorted by ledger, whose
    ledgers straddle batch boundaries, reaches the judge as one table per ledger holding
    every row of that ledger (PySpark 3.5 has no groupBy().applyInArrow to do it)."""
    import pyarrow as pa

    from spark_udfs.jobs.bookkeeper import _per_ledger

    seen = []

    def judge(group: pa.Table) -> pa.Table:
        seen.append((group.column("ledger").to_pylist(), group.column("entry").to_pylist()))
        return pa.table({"n": [group.num_rows]})

    rows = [(1, 0), (1, 1), (1, 2), (5, 0), (7, 0), (7, 1), (7, 2), (7, 3)]
    batches = [
        pa.RecordBatch.from_pydict({"ledger": [r[0] for r in part], "entry": [r[1] for r in part]})
        for part in (rows[:2], rows[2:2], rows[2:5], rows[5:6], rows[6:])
    ]
    out = [b.to_pydict()["n"][0] for b in _per_ledger(judge)(iter(batches))]
    assert out == [3, 1, 4]
    assert seen == [([1, 1, 1], [0, 1, 2]), ([5], [0]), ([7] * 4, [0, 1, 2, 3])]
    assert list(_per_ledger(judge)(iter([]))) == []


@pytest.mark.slow
def test_also_crcs_are_each_copys_payload(spark: Any, tmp_path: Path, capsys: Any) -> None:
    """`spark scan BOOKIES --also crc64nvme --also crc32`: every framed copy's also_* columns
    hold those CRCs of its payload, recomputed here from the entry log's bytes; the CRC not
    asked for is null."""
    import zlib

    import merkle
    from merkle.replica.bookkeeper.digest import DIGEST_LENGTHS

    bk = tmp_path / "bk"
    manifest = _generate(bk, "none", "mixed")
    paths = [str(bk / b) for b in manifest["bookies"]]
    meta = str(bk / manifest["metadata"]["dumps"])
    out = tmp_path / "out"
    argv = ["spark", "scan", *paths, "--ledger-metadata", meta, "-o", str(out)]
    assert main([*argv, "--also", "crc64nvme", "--also", "crc32"]) == 0
    rows = [r.asDict() for r in spark.read.parquet(str(out / "copies")).collect()]
    assert rows and all(r["frame_ok"] for r in rows)
    for r in rows:
        digest = manifest["ledgers"][str(r["ledger"])]["digest_type"]
        with open(r["file"], "rb") as f:
            f.seek(r["offset"])
            payload = f.read(r["size"])[32 + DIGEST_LENGTHS[digest] :]
        assert int.from_bytes(r["also_crc64nvme"], "big") == merkle.crc64nvme(payload)
        assert int.from_bytes(r["also_crc32"], "big") == zlib.crc32(payload)
        assert r["also_crc32c"] is None
