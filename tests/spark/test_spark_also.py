"""`crcmerkle spark scan --also crc64nvme` (and the data-local host scan): the chunks and
blocks tables' crc64nvme column holds what the local scan computes (tests/test_scan_also.py
checks that against the block files' bytes), null for the algorithms not asked; the chunks
table's recorded columns (checksum_type, bytes_per_checksum, checksums) hold what each
replica's container.db holds, decoded independently (tests/recorded_oracle.py), equal to
the CRCs of the block files' windows; tables written before the columns existed still diff
and report, reading them as null."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

pytest.importorskip("rocksdict")
pytest.importorskip("yaml")

import pyarrow.parquet as pq  # noqa: E402

from merkle.cli import main  # noqa: E402
from merkle.replica.generate import GeneratorConfig, generate_cluster  # noqa: E402
from merkle.replica.inventory import load_inventory  # noqa: E402
from merkle.replica.scan import scan_paths  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from recorded_oracle import recorded_on_disk, window_crcs  # noqa: E402

KiB = 1024
RECORDED = ("checksum_type", "bytes_per_checksum", "checksums")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: Any) -> Path:
    root = tmp_path_factory.mktemp("spark-also") / "c"
    generate_cluster(
        root,
        GeneratorConfig(
            datanodes=2,
            replicas=2,
            volumes=1,
            containers=2,
            layout="ozone",
            block_size=12 * KiB,
            chunk_size=5 * KiB,
            bytes_per_checksum=2 * KiB,
            min_blocks=1,
            max_blocks=2,
            algorithm="mixed",
            seed=3,
        ),
    )
    return root


def _want(
    root: Path,
) -> Tuple[Dict[Tuple[str, int, int, int], bytes], Dict[Tuple[str, int, int], bytes]]:
    """(datanode dir, container, block, offset) -> packed windows; (.., block) -> value,
    from the local scan with --also."""
    chunks: Dict[Tuple[str, int, int, int], bytes] = {}
    blocks: Dict[Tuple[str, int, int], bytes] = {}
    for r in scan_paths([root], also=("crc64nvme",), write_tree=False):
        dn = Path(r.path).relative_to(root).parts[0]
        v = r.also["crc64nvme"]
        for i, (b, o) in enumerate(zip(v.chunk_block.tolist(), v.chunk_offset.tolist())):
            chunks[(dn, r.container_id, b, o)] = v.windows_bytes(i)
        for b, value in zip(v.block_id.tolist(), v.block_value.tolist()):
            blocks[(dn, r.container_id, b)] = int(value).to_bytes(8, "big")
    return chunks, blocks


def _dn_dirs(root: Path) -> Dict[str, str]:
    """datanode identity (the volumes' UUID) -> its directory name (dn0, dn1)."""
    manifest = json.loads((root / "manifest.json").read_text())
    return {uuid: dn for dn, uuid in manifest["datanode_uuids"].items()}


def _got(spark: Any, out: Path, root: Path) -> Tuple[Dict[Any, Any], Dict[Any, Any], List]:
    from spark_udfs.jobs.scan import TABLE_SCHEMAS

    dn = _dn_dirs(root)
    chunks = spark.read.schema(TABLE_SCHEMAS["chunks"]).parquet(str(out / "chunks")).collect()
    blocks = spark.read.schema(TABLE_SCHEMAS["blocks"]).parquet(str(out / "blocks")).collect()
    got_c = {
        (dn[r["datanode"]], r["container"], r["block"], r["offset"]): None
        if r["crc64nvme"] is None
        else bytes(r["crc64nvme"])
        for r in chunks
        if r["offset"] is not None
    }
    got_b = {
        (dn[r["datanode"]], r["container"], r["block"]): None
        if r["crc64nvme"] is None
        else bytes(r["crc64nvme"])
        for r in blocks
    }
    others = [r[c] for r in chunks + blocks for c in ("crc32c", "crc32")]
    return got_c, got_b, others


@pytest.fixture(scope="module")
def scanned(spark: Any, cluster: Path, tmp_path_factory: Any) -> Path:
    out = tmp_path_factory.mktemp("spark-also-out") / "scan"
    assert main(["spark", "scan", str(cluster), "-o", str(out), "--also", "crc64nvme"]) == 0
    return out


def test_spark_scan_writes_the_column(spark: Any, cluster: Path, scanned: Path) -> None:
    want_c, want_b = _want(cluster)
    got_c, got_b, others = _got(spark, scanned, cluster)
    assert got_c == want_c and len(want_c) > 4
    assert got_b == want_b and len(want_b) > 1
    assert others and all(v is None for v in others)


def _recorded(spark: Any, out: Path) -> List[Any]:
    from spark_udfs.jobs.scan import TABLE_SCHEMAS

    return [
        r
        for r in spark.read.schema(TABLE_SCHEMAS["chunks"]).parquet(str(out / "chunks")).collect()
        if r["offset"] is not None
    ]


def test_spark_scan_writes_the_recorded_checksums(spark: Any, cluster: Path, scanned: Path) -> None:
    """Every chunk row of every replica carries what its container.db records for it, and
    (its bytes having matched) that is the CRC of each window of the block file."""
    want = recorded_on_disk(cluster)
    rows = _recorded(spark, scanned)
    assert len(rows) == len(want) > 4
    for r in rows:
        ctype, bpc, sums, length = want[(os.path.realpath(r["replica"]), r["block"], r["offset"])]
        assert (r["checksum_type"], r["bytes_per_checksum"], bytes(r["checksums"])) == (
            ctype,
            bpc,
            sums,
        )
        assert r["checksum_matches"]
        assert window_crcs(r["replica"], r["block"], r["offset"], length, bpc, ctype) == sums
    assert {r["checksum_type"] for r in rows} == {"CRC32", "CRC32C"}


def test_old_tables_without_the_columns_still_diff_and_report(
    spark: Any, cluster: Path, scanned: Path, tmp_path: Path, capsys: Any
) -> None:
    """A scan written before the --also and the recorded columns: the same files without
    them."""
    from spark_udfs.tables import ALSO_COLUMNS, RECORDED_COLUMNS

    old = tmp_path / "old"
    for f in scanned.rglob("*.parquet"):
        t = pq.read_table(f, partitioning=None)
        t = t.drop_columns([c for c in ALSO_COLUMNS + RECORDED_COLUMNS if c in t.column_names])
        dst = old / f.relative_to(scanned)
        dst.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(t, dst)
    assert not any(
        c in pq.read_schema(next((old / "chunks").rglob("*.parquet"))).names
        for c in ALSO_COLUMNS + RECORDED_COLUMNS
    )
    got_c, got_b, _ = _got(spark, old, cluster)
    assert got_c and all(v is None for v in got_c.values())
    assert got_b and all(v is None for v in got_b.values())
    rows = _recorded(spark, old)
    assert rows and all(r[c] is None for r in rows for c in RECORDED)
    assert all(r[c] is not None for r in _recorded(spark, scanned) for c in RECORDED)
    for tables in (scanned, old):
        assert main(["spark", "report", str(tables)]) == 0
        report = capsys.readouterr().out
        assert main(["spark", "diff", str(tables), "-o", str(tmp_path / f"d-{tables.name}")]) == 0
        capsys.readouterr()
    assert report


def test_host_scan_passes_also_to_its_tasks(spark: Any, cluster: Path, tmp_path: Path) -> None:
    from spark_udfs.jobs.hostscan import scan_datanodes
    from spark_udfs.jobs.scan import TABLE_SCHEMAS

    manifest = json.loads((cluster / "manifest.json").read_text())
    path = tmp_path / "datanodes.json"
    path.write_text(
        json.dumps(
            [
                {
                    "host": "localhost",
                    "uuid": manifest["datanode_uuids"]["dn0"],
                    "volumes": sorted(os.fspath(p) for p in (cluster / "dn0").iterdir()),
                }
            ]
        )
    )
    t = scan_datanodes(spark, load_inventory(os.fspath(path)), executor_wait=0, also=("crc64nvme",))
    t.write(str(tmp_path / "hs"))
    want_c, want_b = _want(cluster)
    got_c, got_b, _ = _got(spark, tmp_path / "hs", cluster)
    assert got_c == {k: v for k, v in want_c.items() if k[0] == "dn0"} and got_c
    assert got_b == {k: v for k, v in want_b.items() if k[0] == "dn0"} and got_b
    assert TABLE_SCHEMAS["chunks"].endswith(
        "crc64nvme binary, crc32c binary, crc32 binary, "
        "checksum_type string, bytes_per_checksum long, checksums binary"
    )
    rows = _recorded(spark, tmp_path / "hs")
    want = recorded_on_disk(cluster)
    assert rows and all(
        (r["checksum_type"], r["bytes_per_checksum"], bytes(r["checksums"]))
        == want[(os.path.realpath(r["replica"]), r["block"], r["offset"])][:3]
        for r in rows
    )


def test_also_without_data_is_refused(cluster: Path, tmp_path: Path, capsys: Any) -> None:
    assert (
        main(
            [
                "spark",
                "scan",
                str(cluster),
                "-o",
                str(tmp_path / "x"),
                "--metadata-only",
                "--also",
                "crc64nvme",
            ]
        )
        == 2
    )
    assert "--also" in capsys.readouterr().err
