"""`crcmerkle scan VOLUME... --emit URI` on each host, then `crcmerkle spark report URI`: the
findings of the Spark scan of the same cluster (spark_udfs.tables.emit).

A generated Ozone cluster (three datanodes, two volumes each, faults) is emitted once per
datanode, as each host would (`--host dnN`), to one directory; the report of that directory
equals the report of `crcmerkle spark run <cluster>`. Also: the emitted tables are the Spark
scan's row for row (apart from the host columns, which only the emit knows), to S3 through the
loopback server, an inventory host that emitted nothing (NOT_SCANNED), a re-run of one host
replaces only its files, partition values escaped as Spark escapes them, credentials never
printed, a file that is not Parquet in the tables is one line."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

pytest.importorskip("rocksdict")
pytest.importorskip("yaml")

import pyarrow.parquet as pq  # noqa: E402

from merkle.cli import main  # noqa: E402
from merkle.replica.generate import GeneratorConfig, generate_cluster, parse_faults  # noqa: E402
from spark_udfs.jobs.scan import NOT_SCANNED, TABLE_SCHEMAS  # noqa: E402
from spark_udfs.tables.emit import TABLE_ARROW, escape_partition_value  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: a duplicate replica on one datanode comes from the Spark scan's own rule: injected below
FAULTS = "default"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: Any) -> Tuple[Path, Dict[str, Any]]:
    root = tmp_path_factory.mktemp("emit") / "cluster"
    manifest = generate_cluster(
        root,
        GeneratorConfig(
            containers=12, seed=11, layout="ozone", faults=parse_faults(FAULTS, "ozone")
        ),
    )
    return root, manifest


def _volumes(root: Path, dn: str) -> List[str]:
    return sorted(str(p) for p in (root / dn).iterdir() if p.is_dir())


def _emit(root: Path, out: str, dn: str, *extra: str) -> int:
    return main(["scan", *_volumes(root, dn), "--emit", out, "--host", dn, *extra])


@pytest.fixture(scope="module")
def emitted(cluster: Any, tmp_path_factory: Any) -> Path:
    root, manifest = cluster
    out = tmp_path_factory.mktemp("emitted") / "tables"
    for dn in sorted(manifest["datanode_uuids"]):
        assert _emit(root, str(out), dn) == 1  # the faults are findings
    return out


@pytest.fixture(scope="module")
def spark_run(spark: Any, cluster: Any, tmp_path_factory: Any) -> Tuple[Path, Dict[str, Any]]:
    root, _ = cluster
    out = tmp_path_factory.mktemp("run")
    rep = out / "report.json"
    assert main(["spark", "run", str(root), "-o", str(out / "scan"), "--report", str(rep)]) == 1
    return out / "scan", json.loads(rep.read_text())


def _report(args: List[str], capsys: Any) -> Tuple[int, Dict[str, Any], str]:
    capsys.readouterr()
    rc = main(["spark", "report", *args, "--json"])
    cap = capsys.readouterr()
    return rc, json.loads(cap.out), cap.err


def _same(report: Dict[str, Any]) -> Dict[str, Any]:
    """The report without what differs between two runs (its time, the command list's
    location, the verification ages: an emit times each volume it read, a scan of listed
    paths reads replicas, not volumes); paths are the cluster's own in both."""
    skip = ("generated", "reconcile_commands", "verification_age")
    return _no_hosts({k: v for k, v in report.items() if k not in skip})


#: the report's host fields (spark_udfs.cluster.hosts): the emitted tables name each host, a scan of
#: one tree none
_HOST_KEYS = (
    "host",
    "hosts",
    "group_hosts",
    "deleted_on_hosts",
    "target_host",
    "source_host",
    "peer_hosts",
    "knows_hosts",
)


def _no_hosts(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _no_hosts(v) for k, v in x.items() if k not in _HOST_KEYS}
    if isinstance(x, list):
        return [_no_hosts(v) for v in x]
    return x


def test_layout_written(emitted: Path, cluster: Any) -> None:
    """<out>/<table>/datanode=<uuid>/emit-<host>_<volume>.parquet, every table, the
    partition column not in the files, the column types Spark's reader is given."""
    _, manifest = cluster
    uuids = set(manifest["datanode_uuids"].values())
    for table in TABLE_SCHEMAS:
        parts = {p.name for p in (emitted / table).iterdir()}
        assert parts == {f"datanode={u}" for u in uuids}, table
        for u in uuids:
            files = sorted(p.name for p in (emitted / table / f"datanode={u}").iterdir())
            assert len(files) == 2 and all(f.startswith("emit-dn") for f in files), files
            for f in files:
                schema = pq.read_schema(emitted / table / f"datanode={u}" / f)
                want = TABLE_ARROW[table]
                assert "datanode" not in schema.names
                assert [(x.name, x.type) for x in schema] == [
                    (x.name, x.type) for x in want if x.name != "datanode"
                ]


def test_report_equals_the_spark_run(
    spark: Any, emitted: Path, spark_run: Any, capsys: Any
) -> None:
    _, run_report = spark_run
    rc, rep, err = _report([str(emitted)], capsys)
    assert rc == 1 and err == ""
    assert _same(rep) == _same(run_report)
    assert rep["containers"] and rep["mismatched"]
    # every emitted volume timed: its replicas read now, none carried (no --state)
    age = rep["verification_age"]
    assert age["volumes_with_figures"] == 6 and 0 < age["replicas_read"] <= age["replicas"]
    assert age["oldest_verification_age_seconds"] >= 0 and age["longest_full_pass_seconds"] > 0
    assert run_report["verification_age"] == {"volumes_with_figures": 0, "volumes": []}


def _rows(spark: Any, base: Path, table: str) -> List[Tuple]:
    cols = [
        c.split()[0]
        for c in TABLE_SCHEMAS[table].split(", ")
        if c.split()[0] not in ("host", "seconds", "ran_on")
    ]
    df = spark.read.schema(TABLE_SCHEMAS[table]).parquet(str(base / table))
    return sorted(tuple(json.dumps(r[c], default=str) for c in cols) for r in df.collect())


def test_tables_equal_the_spark_scan(spark: Any, emitted: Path, spark_run: Any) -> None:
    """Row for row (the host columns apart: the Spark scan of one tree knows no hosts)."""
    scan_dir, _ = spark_run
    for table in ("chunks", "blocks", "containers", "errors"):
        assert _rows(spark, emitted, table) == _rows(spark, scan_dir, table), table
    hosts = {
        r["host"]
        for r in spark.read.schema(TABLE_SCHEMAS["containers"])
        .parquet(str(emitted / "containers"))
        .collect()
    }
    assert hosts == {"dn0", "dn1", "dn2"}
    vols = spark.read.schema(TABLE_SCHEMAS["volumes"]).parquet(str(emitted / "volumes"))
    got = sorted(
        (r["datanode"], r["host"], r["status"], r["replicas"], r["ran_on"]) for r in vols.collect()
    )
    assert len(got) == 6 and {g[2] for g in got} == {"SCANNED"}
    assert all(g[1] == g[4] for g in got)


@pytest.mark.slow  # ~40 s or more: CI's campaigns step, not the fast tier
def test_diff_and_plan_read_emitted_tables(
    spark: Any, emitted: Path, cluster: Any, tmp_path: Path, capsys: Any
) -> None:
    _, manifest = cluster
    assert main(["spark", "diff", str(emitted), "-o", str(tmp_path / "diff")]) == 1
    assert "mismatched" in capsys.readouterr().out
    dn = manifest["datanode_uuids"]["dn0"]
    rc = main(["spark", "plan", str(emitted), "--maintenance", dn, "--json"])
    plan = json.loads(capsys.readouterr().out)
    assert rc in (0, 1) and plan["summary"]


def test_host_that_emitted_nothing_is_not_scanned(
    spark: Any, cluster: Any, tmp_path: Path, capsys: Any
) -> None:
    root, manifest = cluster
    out = tmp_path / "tables"
    uuids = manifest["datanode_uuids"]
    for dn in ("dn0", "dn1"):  # dn2 emits nothing
        assert _emit(root, str(out), dn) == 1
    inv = tmp_path / "inventory.json"
    # the volumes each host has (an emitted volume the inventory does not give its host is
    # NOT_IN_INVENTORY, one it gives but nobody emitted NOT_SCANNED)
    inv.write_text(
        json.dumps(
            [
                {"host": dn, "uuid": uuids[dn], "volumes": _volumes(root, dn)}
                for dn in ("dn0", "dn1", "dn2")
            ]
            + [{"host": "dn3.example", "volumes": ["/data/disk1"]}]
        )
    )
    capsys.readouterr()
    rc = main(["spark", "report", str(out), "--json", "--datanodes", str(inv)])
    err = capsys.readouterr().err.splitlines()
    assert rc == 1
    assert err == [
        f"crcmerkle: NOT_SCANNED: host dn2: in the inventory, but the scan tables hold "
        f"no volume of datanode {uuids['dn2']} or host dn2: nothing was scanned or "
        f"emitted there",
        "crcmerkle: NOT_SCANNED: host dn3.example: in the inventory, but the scan "
        "tables hold no volume of datanode (no UUID) or host dn3.example: nothing "
        "was scanned or emitted there",
    ]
    # the rows the report can union in: matched by UUID, else by host name
    vols = spark.read.schema(TABLE_SCHEMAS["volumes"]).parquet(str(out / "volumes"))
    from merkle.replica.inventory import load_inventory
    from spark_udfs.cluster.hosts import unscanned_hosts

    rows = unscanned_hosts(vols, load_inventory(str(inv)))
    assert [(r[0], r[1], r[2], r[4]) for r in rows] == [
        *((uuids["dn2"], "dn2", v, NOT_SCANNED) for v in _volumes(root, "dn2")),
        ("unknown", "dn3.example", "/data/disk1", NOT_SCANNED),
    ]
    # by host name: a host whose UUID the inventory does not know is matched by its name
    renamed = [{"datanode": "someone-else", "host": "dn2", "ran_on": "dn2"}]
    assert [r[1] for r in unscanned_hosts(renamed, load_inventory(str(inv)))] == [
        "dn0",
        "dn0",
        "dn1",
        "dn1",
        "dn3.example",
    ]  # one row per volume


def _files(out: Path) -> Dict[str, float]:
    return {str(p.relative_to(out)): p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}


def test_rerun_replaces_only_that_hosts_files(cluster: Any, tmp_path: Path) -> None:
    root, manifest = cluster
    out = tmp_path / "tables"
    for dn in ("dn0", "dn1"):
        assert _emit(root, str(out), dn) == 1
    # a stale file of an earlier dn1 run (a volume since removed) and another host's file
    # whose name starts like dn1's
    stale = out / "errors" / "datanode=gone" / "emit-dn1_0000000000000000.parquet"
    other = out / "errors" / "datanode=gone" / "emit-dn10_0000000000000000.parquet"
    stale.parent.mkdir()
    stale.write_bytes(b"old")
    other.write_bytes(b"other host")
    before = _files(out)
    assert _emit(root, str(out), "dn1", "--trees-only") in (0, 1)
    after = _files(out)
    assert not stale.exists() and other.exists()
    changed = {k for k in before if k in after and before[k] != after[k]}
    assert changed and all("emit-dn1_" in k for k in changed)
    assert {k for k in before if "emit-dn0_" in k} <= set(after)
    assert all(before[k] == after[k] for k in before if "emit-dn0_" in k)
    assert set(after) == set(before) - {str(stale.relative_to(out))}
    assert not [k for k in after if "/." in k or k.startswith(".")]  # no temporary left


def test_escape_matches_spark(spark: Any, tmp_path: Path) -> None:
    """The partition directory names Spark writes for awkward values, and reads back."""
    values = [
        "a/b",
        "x:y=z",
        "100%",
        "q?*\"'#",
        "{[^]}\\",
        "tab\there",
        "ünï cödé",
        "7",
        "..",
        " sp ",
    ]
    df = spark.createDataFrame([(v, 1) for v in values], "datanode string, n long")
    df.write.partitionBy("datanode").parquet(str(tmp_path / "t"))
    dirs = {p.name for p in (tmp_path / "t").iterdir() if p.name.startswith("datanode=")}
    assert dirs == {f"datanode={escape_partition_value(v)}" for v in values}


@pytest.mark.slow  # ~40 s or more: CI's campaigns step, not the fast tier
def test_s3(spark: Any, cluster: Any, emitted: Path, tmp_path: Path, capsys: Any) -> None:
    """Emitted to S3 (the loopback server): the same files, credentials never printed;
    Spark here has no S3 client (hadoop-aws), so the objects are read back with pyarrow and
    the report is made from a local copy."""
    pytest.importorskip("moto")
    import pyarrow.fs as pafs

    from loopback_s3 import ACCESS_KEY, SECRET_KEY, LoopbackS3

    root, manifest = cluster
    with LoopbackS3() as s3:
        uri = s3.uri("tables")
        capsys.readouterr()
        for dn in sorted(manifest["datanode_uuids"]):
            assert _emit(root, uri, dn) == 1
            assert main(["scan", *_volumes(root, dn), "--emit", uri, "--host", dn, "--json"]) == 1
        cap = capsys.readouterr()
        text = cap.out + cap.err
        assert SECRET_KEY not in text and ACCESS_KEY not in text
        assert f"s3://{s3.bucket}/tables" in text
        local = tmp_path / "copy"
        pafs.copy_files(
            f"{s3.bucket}/tables",
            str(local),
            source_filesystem=s3.filesystem(),
            destination_filesystem=pafs.LocalFileSystem(),
        )
    assert sorted(str(p.relative_to(local)) for p in local.rglob("*.parquet")) == sorted(
        str(p.relative_to(emitted)) for p in emitted.rglob("*.parquet")
    )
    rc, rep, _ = _report([str(local)], capsys)
    rc2, ref, _ = _report([str(emitted)], capsys)
    assert rc == rc2 == 1 and _same(rep) == _same(ref)


def test_credentials_never_printed_on_failure(cluster: Any, capsys: Any) -> None:
    root, _ = cluster
    uri = (
        "s3://AKIAEXAMPLEKEY:wJalr/XUtnFEMI+K7MDENG@bucket/t?endpoint_override="
        "127.0.0.1:9&scheme=http&secret_key=wJalr2"
    )
    capsys.readouterr()
    rc = main(["scan", _volumes(root, "dn0")[0], "--emit", uri, "--host", "dn0"])
    cap = capsys.readouterr()
    assert rc == 2
    text = cap.out + cap.err
    assert "wJalr" not in text and "AKIAEXAMPLEKEY" not in text
    assert len(cap.err.strip().splitlines()) == 1 and "Traceback" not in text


def test_not_parquet_is_one_line(spark: Any, emitted: Path, tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "tables"
    shutil.copytree(emitted, out)
    part = next((out / "errors").iterdir())
    (part / "emit-evil_0000000000000000.parquet").write_bytes(b"not parquet at all\n" * 20)
    capsys.readouterr()
    rc = main(["spark", "report", str(out)])
    cap = capsys.readouterr()
    assert rc == 2
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("crcmerkle: error: "), cap.err
    assert "Traceback" not in cap.err


def test_host_option_needs_emit(cluster: Any, capsys: Any) -> None:
    root, _ = cluster
    assert main(["scan", _volumes(root, "dn0")[0], "--host", "dn0"]) == 2
    assert "--host is only for --emit" in capsys.readouterr().err


def test_missing_path_is_exit_2(tmp_path: Path, capsys: Any) -> None:
    assert main(["scan", str(tmp_path / "nope"), "--emit", str(tmp_path / "o"), "--host", "h"]) == 2
    err = capsys.readouterr().err
    assert "nope" in err and len(err.strip().splitlines()) == 1


def test_duplicate_replica_on_one_host(tmp_path: Path, capsys: Any) -> None:
    """The Spark scan's rule: a second replica of a container on one datanode is one
    DUPLICATE_REPLICA error row (with the host), listed and never scanned; the exit is 1."""
    import pyarrow.dataset as ds

    from spark_udfs.jobs.scan import DUPLICATE_REPLICA

    from replica_helpers import make_cluster

    root = tmp_path / "c"
    make_cluster(root, containers=4, layout="crcmerkle")
    first = sorted(root.glob("dn0/vol*/[0-9]*"))[0]
    other = next(v for v in sorted(root.glob("dn0/vol*")) if v != first.parent)
    shutil.copytree(first, other / first.name)
    out = tmp_path / "tables"
    assert main(["scan", str(root / "dn0"), "--emit", str(out), "--host", "h0"]) == 1
    assert "1 duplicate replica(s)" in capsys.readouterr().out

    def table(name: str) -> List[Dict[str, Any]]:
        return (
            ds.dataset(str(out / name), format="parquet", partitioning="hive")
            .to_table()
            .to_pylist()
        )

    errors = table("errors")
    assert [(e["error"], e["datanode"], e["container"], e["host"]) for e in errors] == [
        (DUPLICATE_REPLICA, "dn0", int(first.name), "h0")
    ]
    containers = [(c["datanode"], c["container"]) for c in table("containers")]
    assert sorted(containers) == sorted(set(containers)) and len(containers) == 4
    vols = table("volumes")
    assert sum(v["replicas"] for v in vols) == 5 and {v["ran_on"] for v in vols} == {"h0"}


def test_rows_stream_in_row_groups(cluster: Any, tmp_path: Path, monkeypatch: Any) -> None:
    """A volume's rows are written a row group at a time (never held whole): with a tiny
    buffer every replica's rows are a row group of their own, and the file reads back the
    same rows as one written with the default buffer."""
    import spark_udfs.tables.emit as emit

    root, _ = cluster
    vol = _volumes(root, "dn0")[0]
    assert main(["scan", vol, "--emit", str(tmp_path / "big"), "--host", "dn0"]) == 1
    monkeypatch.setattr(emit, "ROW_GROUP_BYTES", 1)
    assert main(["scan", vol, "--emit", str(tmp_path / "small"), "--host", "dn0"]) == 1
    for table in ("chunks", "blocks", "containers"):
        (big,) = (tmp_path / "big" / table).glob("*/*.parquet")
        (small,) = (tmp_path / "small" / table).glob("*/*.parquet")
        assert pq.ParquetFile(big).num_row_groups == 1
        assert pq.ParquetFile(small).num_row_groups > 1
        assert pq.read_table(small).equals(pq.read_table(big))


def test_census_rows_are_verified_without_reading_data(
    cluster: Any, tmp_path: Path, capsys: Any
) -> None:
    """--metadata-only emits the census rows of the Spark scan (_result_rows with
    metadata_only): no byte of data read, each replica whose metadata was read verified."""
    root, _ = cluster
    out = tmp_path / "census"
    assert _emit(root, str(out), "dn0", "--metadata-only") in (0, 1)
    # (issue 36) the command's output says that no data was read, text and JSON alike
    assert "no data read: compared from recorded checksums" in capsys.readouterr().out
    assert _emit(root, str(out), "dn0", "--metadata-only", "--json") in (0, 1)
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert summary["data_read"] is False and "recorded checksums" in summary["compared"]
    rows = pq.read_table(next((out / "containers").glob("*/*.parquet"))).to_pylist()
    rows += pq.read_table(sorted((out / "containers").glob("*/*.parquet"))[-1]).to_pylist()
    assert rows and all(r["bytes_read"] == 0 for r in rows)
    assert any(r["verified"] for r in rows)
    assert all(r["host"] == "dn0" for r in rows)
