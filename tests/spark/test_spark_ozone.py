"""The Spark scan on Ozone datanode volumes gives what it gives on the crcmerkle layout for
the same content (values, counts, errors), and reads nothing but what the local scanner does."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

pytest.importorskip("rocksdict")
pytest.importorskip("yaml")

from merkle.replica.generate import GeneratorConfig, generate_cluster, parse_faults  # noqa: E402
from spark_udfs.jobs.diff import diff_scan  # noqa: E402
from spark_udfs.jobs.report import build_report  # noqa: E402
from spark_udfs.jobs.scan import scan_replicas  # noqa: E402

FAULTS = (
    "bitflip=1,truncate=1,missing-file=1,tombstone=1,extra-block=1,tree-missing=1,meta-corrupt=1"
)


#: faults both layouts report alike: not meta-corrupt, whose Ozone form (one undecodable
#: block_data row) costs only that row's block, where a corrupt `.blocks` costs the replica
SAME_FAULTS = FAULTS.replace(",meta-corrupt=1", "")


def _gen(root: Path, layout: str, faults: str = FAULTS) -> Dict[str, Any]:
    return generate_cluster(
        root,
        GeneratorConfig(containers=6, seed=11, layout=layout, faults=parse_faults(faults, layout)),
    )


class _renamed:
    """Scan tables whose `datanode` column is mapped through `names` (dn0 -> its UUID)."""

    def __init__(self, tables: Any, names: Dict[str, str]) -> None:
        from pyspark.sql import functions as F

        m = F.create_map(*[F.lit(x) for kv in names.items() for x in kv])
        for t in ("containers", "errors", "chunks", "blocks"):
            df = getattr(tables, t)
            setattr(self, t, df.withColumn("datanode", m[F.col("datanode")]))


def _containers(tables: Any) -> List[Tuple[Any, ...]]:
    return sorted(
        (
            r["datanode"],
            r["container"],
            r["data_checksum"],
            r["ok"],
            r["errors"],
            r["blocks"],
            r["chunks"],
            r["bytes_read"],
            r["tombstones"],
            r["unhealthy_chunks"],
        )
        for r in tables.containers.collect()
    )


def _errors(tables: Any) -> List[Tuple[Any, ...]]:
    return sorted(
        (r["datanode"], r["container"], r["error"], r["block"] or 0, r["offset"] or 0)
        for r in tables.errors.collect()
    )


def _files(root: Path) -> Dict[str, Tuple[int, int]]:
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            st = os.lstat(os.path.join(d, f))
            out[os.path.join(d, f)] = (st.st_size, st.st_mtime_ns)
    return out


def test_spark_scan_same_results_on_both_layouts(spark: Any, tmp_path: Path) -> None:
    _gen(tmp_path / "c", "crcmerkle", SAME_FAULTS)
    _gen(tmp_path / "o", "ozone", SAME_FAULTS)
    before = _files(tmp_path / "o")
    a = scan_replicas(spark, [str(tmp_path / "c")])
    b = scan_replicas(spark, [str(tmp_path / "o")])
    # the Ozone rows name each datanode by the UUID its volumes record, never by directory
    uuids = json.loads((tmp_path / "o" / "manifest.json").read_text())["datanode_uuids"]
    a = _renamed(a, uuids)
    assert _containers(a) == _containers(b) and len(_containers(b)) == 18
    assert _errors(a) == _errors(b) and _errors(b)

    def blocks(t: Any) -> List[Tuple[Any, ...]]:
        return sorted(
            (r["datanode"], r["container"], r["block"], r["block_value"], r["deleted"])
            for r in t.blocks.collect()
        )

    assert blocks(a) == blocks(b)
    ra = build_report(diff_scan(a), replicas=a.containers, errors=a.errors)
    rb = build_report(diff_scan(b), replicas=b.containers, errors=b.errors)
    assert ra["summary"] == rb["summary"] and ra["containers"] == rb["containers"]
    assert rb["reconcile"] == [] and ra["reconcile"]
    assert [o["argv"][-1] for o in rb["ozone_reconcile"]] == [
        str(c) for c in rb["containers"]["MISMATCHED"]
    ]
    assert _files(tmp_path / "o") == before
    # trees only: the stored trees, on both layouts alike
    ta = _renamed(scan_replicas(spark, [str(tmp_path / "c")], trees_only=True), uuids)
    tb = scan_replicas(spark, [str(tmp_path / "o")], trees_only=True)
    assert _containers(ta) == _containers(tb) and _errors(ta) == _errors(tb)


def test_spark_scan_unreadable_volume_is_per_volume(spark: Any, tmp_path: Path) -> None:
    _gen(tmp_path / "o", "ozone")
    bad = next((tmp_path / "o" / "dn0" / "vol0" / "hdds").glob("CID-*/DS-*/container.db"))
    for f in bad.iterdir():
        if f.name.startswith("MANIFEST"):
            f.write_bytes(b"garbage")
    t = scan_replicas(spark, [str(tmp_path / "o")])
    failed = {
        (r["datanode"], r["container"]) for r in t.errors.collect() if r["error"] == "SCAN_FAILED"
    }
    vol0 = {
        (r["datanode"], r["container"])
        for r in t.containers.collect()
        if "/dn0/vol0/" in r["replica"]
    }
    assert failed == vol0 and failed
    others = [r for r in t.containers.collect() if "/dn0/vol0/" not in r["replica"]]
    assert others and all(r["bytes_read"] > 0 or not r["ok"] for r in others)


def test_report_missing_counts_replicas_ozone_would_not_load(spark: Any, tmp_path: Path) -> None:
    """MISSING: no replica has usable metadata; on Ozone volumes a .container file that is gone
    or fails its checksum leaves the replica unloaded, like a missing .blocks file."""
    generate_cluster(
        tmp_path / "o",
        GeneratorConfig(containers=2, seed=3, layout="ozone", faults=parse_faults("none", "ozone")),
    )
    files = sorted(
        (tmp_path / "o").glob("dn*/vol*/hdds/CID-*/current/containerDir*/1/metadata/1.container")
    )
    assert len(files) == 3
    files[0].unlink()
    for f in files[1:]:  # a changed byte: the stored checksum no longer matches
        raw = bytearray(f.read_bytes())
        raw[raw.index(b"\n") - 1] ^= 0x01
        f.write_bytes(bytes(raw))
    t = scan_replicas(spark, [str(tmp_path / "o")])
    kinds = sorted(r["error"] for r in t.errors.collect() if r["container"] == 1)
    assert kinds == ["CONTAINER_FILE_CORRUPT"] * 2 + ["CONTAINER_FILE_MISSING"], kinds
    r = build_report(diff_scan(t), replicas=t.containers, errors=t.errors)
    assert r["containers"]["MISSING"] == [1] and r["summary"]["MISSING"] == 1


def test_unread_containers_are_unverified_and_a_census_reads_no_data(
    spark: Any, tmp_path: Path
) -> None:
    """Issue 36 items 6 and 7: a container every replica of which is OPEN was not read:
    UNVERIFIED (a finding), never MATCH; a census or a trees-only pass says that it read no
    data and that its values were compared from recorded checksums, never MATCH nor "Replicas
    read: N of N"."""
    from merkle.replica.ozone.containerfile import parse_container_file, render_container_file
    from spark_udfs.jobs.report import format_text, report_has_findings

    generate_cluster(
        tmp_path / "o",
        GeneratorConfig(containers=2, seed=3, layout="ozone", faults=parse_faults("none", "ozone")),
    )
    files = sorted(
        (tmp_path / "o").glob("dn*/vol*/hdds/CID-*/current/containerDir*/1/metadata/1.container")
    )
    assert len(files) == 3
    for f in files:  # a valid .container (its checksum recomputed) of an OPEN container
        fields = dict(parse_container_file(f.read_bytes()).fields)
        fields["state"] = "OPEN"
        f.write_bytes(render_container_file(fields))
    t = scan_replicas(spark, [str(tmp_path / "o")])
    assert (
        sorted((r["container"], r["verified"]) for r in t.containers.collect())
        == [(1, False)] * 3 + [(2, True)] * 3
    )
    r = build_report(diff_scan(t), replicas=t.containers, errors=t.errors)
    assert r["containers"]["UNVERIFIED"] == [1] and r["containers"]["MATCH"] == [2]
    assert report_has_findings(r) and r["data_read"] is True
    assert "compared_from_recorded_checksums" not in r
    for cheap in ({"metadata_only": True}, {"trees_only": True}):
        t = scan_replicas(spark, [str(tmp_path / "o")], **cheap)
        r = build_report(diff_scan(t), replicas=t.containers, errors=t.errors)
        assert r["summary"]["MATCH"] == 0 and r["containers"]["MATCH"] == [], cheap
        assert r["data_read"] is False and r["read"]["data_read"] == 0
        rec = r["compared_from_recorded_checksums"]
        assert rec["first"] == ([2] if "metadata_only" in cheap else [1, 2])
        text = format_text(r)
        assert "NO DATA READ: compared from recorded checksums" in text
        assert "MATCH: 0\n" in text and "Replicas read: none (no data read)" in text
        assert "Replicas read: 3" not in text and "Replicas read: 6" not in text
